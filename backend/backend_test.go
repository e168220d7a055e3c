package backend_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
)

// The seam's errors carry errdefs classes through marker methods, wrapped
// or not, while the package itself imports only the standard library.
func TestErrorClasses(t *testing.T) {
	wrapped := func(err error) error { return fmt.Errorf("run: %w", fmt.Errorf("%w: detail", err)) }
	for _, err := range []error{backend.ErrInvalidRequest, wrapped(backend.ErrInvalidRequest)} {
		if !errdefs.IsInvalidArgument(err) || errdefs.IsUnavailable(err) || !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("%v: invalid argument %v, unavailable %v", err, errdefs.IsInvalidArgument(err), errdefs.IsUnavailable(err))
		}
	}
	for _, err := range []error{backend.ErrClosed, wrapped(backend.ErrClosed)} {
		if !errdefs.IsUnavailable(err) || errdefs.IsInvalidArgument(err) || !errors.Is(err, backend.ErrClosed) {
			t.Errorf("%v: unavailable %v, invalid argument %v", err, errdefs.IsUnavailable(err), errdefs.IsInvalidArgument(err))
		}
	}
	var req backend.RunRequest
	req.Bindings = []backend.BindingNamespace{{Global: "1x"}}
	if err := req.Validate(); !errdefs.IsInvalidArgument(err) {
		t.Errorf("Validate: %v is not an invalid argument", err)
	}
}

func TestNewReportNeverNull(t *testing.T) {
	r := backend.NewReport(&backend.RunResult{})
	if string(r.Value) != "null" || r.Logs == nil {
		t.Fatalf("%+v", r)
	}
}
