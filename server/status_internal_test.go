package server

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
)

// A per-run option the runtime cannot honour is the client's to fix
// (400); any other not-implemented error — a driver without the shim or
// OCI runtime it was configured with — is the server's (500).
func TestStatusForNotImplemented(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("%w: limits: the python runtime of this server cannot lower limits per request", backend.ErrNotImplemented), http.StatusBadRequest},
		{fmt.Errorf("%w: containerd has no shim io.containerd.runsc.v1", errdefs.ErrNotImplemented), http.StatusInternalServerError},
		{fmt.Errorf("%w: limits.pids -1 must be positive", backend.ErrInvalidRequest), http.StatusBadRequest},
		{fmt.Errorf("%w: queue full", errdefs.ErrResourceExhausted), http.StatusTooManyRequests},
	} {
		if got := statusFor(tc.err); got != tc.want {
			t.Errorf("statusFor(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
