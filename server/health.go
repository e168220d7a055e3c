package server

import (
	"context"
	"net/http"
)

// healthBody is the body of GET /healthz.
type healthBody struct {
	Status    string   `json:"status"` // "ok" or "unavailable"
	Languages []string `json:"languages"`
	Error     string   `json:"error,omitempty"`
}

// handleHealthz answers 200 when the health check passes (by default it
// always does), else 503 with the reason.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	body := healthBody{Status: "ok", Languages: s.Languages()}
	if s.opts.health != nil {
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.healthLimit)
		defer cancel()
		if err := s.opts.health(ctx); err != nil {
			body.Status, body.Error = "unavailable", err.Error()
			writeJSON(w, http.StatusServiceUnavailable, body)
			return
		}
	}
	writeJSON(w, http.StatusOK, body)
}
