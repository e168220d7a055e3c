package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

// A health check that panics is an unhealthy answer, not a dead daemon;
// one that ignores its context makes /healthz answer 503 after the
// limit rather than hang every probe after it.
func TestHealthzCheckPanicsOrHangs(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	for _, c := range []struct {
		name  string
		check HealthCheck
		want  string
	}{
		{"panics", func(context.Context) error { panic("engine client is nil") }, "the health check panicked: engine client is nil"},
		{"hangs", func(context.Context) error { <-hang; return nil }, "did not finish within 100ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := registrytest.New(backend.Python)
			defer rt.Close(context.Background())
			s, err := New(WithRuntime(rt), WithHealthCheck(c.check))
			if err != nil {
				t.Fatal(err)
			}
			s.opts.healthLimit = 100 * time.Millisecond
			for range 2 { // the second waits on the same check
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
				if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), c.want) {
					t.Fatalf("%d %s, want 503 saying %q", rec.Code, rec.Body, c.want)
				}
			}
		})
	}
}
