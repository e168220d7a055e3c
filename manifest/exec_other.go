//go:build !linux

package manifest

import (
	"context"
	"fmt"
	"io"

	"github.com/containerd/errdefs"
)

// runGroup fails closed: without Linux process groups and parent-death
// signals a tool's processes could outlive its call.
func runGroup(ctx context.Context, argv []string, stdin []byte, stdout, stderr io.Writer) (bool, error) {
	return false, fmt.Errorf("%w: command tools run only on Linux", errdefs.ErrNotImplemented)
}
