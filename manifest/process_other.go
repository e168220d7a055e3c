//go:build !linux

package manifest

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/containerd/errdefs"
)

// process is unavailable off Linux: without PID namespaces, subreapers and
// the parent-death signal a stdio server's processes could outlive it.
type process struct{ stdin, stdout *os.File }

func startProcess(argv, env []string, stderr *stderrLog, log *slog.Logger) (*process, error) {
	return nil, fmt.Errorf("%w: stdio MCP servers run only on Linux", errdefs.ErrNotImplemented)
}

func (p *process) stop()                                   {}
func (p *process) exitStatus(time.Duration) (string, bool) { return "", false }
