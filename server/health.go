package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// healthBody is the body of GET /healthz.
type healthBody struct {
	Status    string   `json:"status"` // "ok" or "unavailable"
	Languages []string `json:"languages"`
	Error     string   `json:"error,omitempty"`
}

// HealthCacheTTL is how long one health check's answer serves GET
// /healthz. The endpoint needs no token (probes call it), so a flood of
// it must not become a flood of engine calls: concurrent requests share
// one check, and its answer is reused for this long.
const HealthCacheTTL = time.Second

// healthCache coalesces health checks.
type healthCache struct {
	mu      sync.Mutex
	at      time.Time     // when err was found
	err     error         // the last check's answer
	running chan struct{} // closed when the check in flight ends
}

// handleHealthz answers 200 when the health check passes (by default it
// always does), else 503 with the reason.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	body := healthBody{Status: "ok", Languages: s.Languages()}
	if s.opts.health != nil {
		if err := s.checkHealth(r.Context()); err != nil {
			body.Status, body.Error = "unavailable", err.Error()
			writeJSON(w, http.StatusServiceUnavailable, body)
			return
		}
	}
	writeJSON(w, http.StatusOK, body)
}

// checkHealth is the health check's answer at most HealthCacheTTL old:
// a fresh one, the one in flight, or a new one run for everyone waiting
// (bounded by healthLimit, not by the first caller's context). A caller
// that leaves while it waits gets its context's error; one that waited
// healthLimit for a check that ignores its context gets a time-out (the
// endpoint says unhealthy rather than hang); a check that panics is an
// unhealthy answer, not a dead daemon.
func (s *Server) checkHealth(ctx context.Context) error {
	c := &s.healthCache
	c.mu.Lock()
	if !c.at.IsZero() && time.Since(c.at) < HealthCacheTTL {
		err := c.err
		c.mu.Unlock()
		return err
	}
	running := c.running
	if running == nil {
		running = make(chan struct{})
		c.running = running
		go func() {
			cctx, cancel := context.WithTimeout(context.Background(), s.opts.healthLimit)
			defer cancel()
			err := runHealthCheck(cctx, s.opts.health)
			c.mu.Lock()
			c.at, c.err, c.running = time.Now(), err, nil
			c.mu.Unlock()
			close(running)
		}()
	}
	c.mu.Unlock()
	wait := time.NewTimer(s.opts.healthLimit)
	defer wait.Stop()
	select {
	case <-running:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	case <-wait.C:
		return fmt.Errorf("the health check did not finish within %v", s.opts.healthLimit)
	}
}

// runHealthCheck runs h, a panic in it an error.
func runHealthCheck(ctx context.Context, h HealthCheck) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the health check panicked: %v", p)
		}
	}()
	return h(ctx)
}
