package mcp

import (
	"fmt"
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
//
// The bound holds however many requests arrive at once: a request that
// may open a session (a POST without Mcp-Session-Id) reserves a slot
// before the go-sdk handler sees it, counted with the live sessions, and
// gives it back when the handler returns, by which time a session it
// opened is among the live ones.
func (s *Server) Handler() http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, &sdk.StreamableHTTPOptions{
		Logger:                       s.log,
		MaxRequestBodyBytes:          MaxRequestBytes,
		SessionTimeout:               SessionIdleTimeout,
		PropagateRequestCancellation: true,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			if !s.reserveSession() {
				w.Header().Set("Retry-After", "1")
				http.Error(w, fmt.Sprintf("too many MCP sessions (the bound is %d); retry later", s.opts.sessions), http.StatusServiceUnavailable)
				return
			}
			defer s.releaseSession()
			if testHookSessionReserved != nil {
				testHookSessionReserved()
			}
		}
		h.ServeHTTP(w, r)
	})
}

// testHookSessionReserved, when set, runs after a request reserved a
// session slot and before the go-sdk handler sees it.
var testHookSessionReserved func()

// reserveSession takes a slot for a request that may open a session, if
// the live sessions and the slots taken leave one.
func (s *Server) reserveSession() bool {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if s.sessions()+s.pending >= s.opts.sessions {
		return false
	}
	s.pending++
	return true
}

func (s *Server) releaseSession() {
	s.sessMu.Lock()
	s.pending--
	s.sessMu.Unlock()
}

// sessions counts the live sessions.
func (s *Server) sessions() int {
	n := 0
	for range s.srv.Sessions() {
		n++
	}
	return n
}
