package mcp

import (
	"net/http"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of the streamable HTTP transport.
const (
	// MaxRequestBytes bounds an HTTP request body: room for a program at
	// the container runtime's default cap (256 KiB) even when JSON
	// escaping multiplies its size, as serve's POST /v1/run allows.
	MaxRequestBytes = 2 << 20
	// SessionIdleTimeout closes a session that sent nothing for this long.
	SessionIdleTimeout = 10 * time.Minute
)

// Handler serves the MCP streamable HTTP transport. Requests that arrive
// on a loopback address with a non-loopback Host are refused (DNS
// rebinding); bodies are bounded by MaxRequestBytes; idle sessions close
// after SessionIdleTimeout; at most WithMaxSessions sessions (stateless
// requests in flight included) live at once, and a request that would
// open one more gets 503. A call's context ends when its HTTP request
// does, so a client that goes away cancels its run.
func (s *Server) Handler() http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, &sdk.StreamableHTTPOptions{
		Logger:                       s.log,
		MaxRequestBodyBytes:          MaxRequestBytes,
		SessionTimeout:               SessionIdleTimeout,
		PropagateRequestCancellation: true,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" && s.sessions() >= s.opts.sessions {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many MCP sessions; retry later", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// sessions counts the live sessions.
func (s *Server) sessions() int {
	n := 0
	for range s.srv.Sessions() {
		n++
	}
	return n
}
