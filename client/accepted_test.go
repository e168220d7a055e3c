package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dsh-container/dsh-container/client"
)

// A peer that misbehaves once the client sent start: a daemon with a bug,
// a proxy, or something posing as a daemon. Whatever it does after
// accepted — or a running program's frame it sends before — the run is
// never started again: one start frame in all, on every endpoint.

const acceptedFrame = `{"type":"accepted","id":"r"}`

// step is one thing the peer does on the connection.
type step func(*websocket.Conn)

func send(frame string) step {
	return func(c *websocket.Conn) { c.WriteMessage(websocket.TextMessage, []byte(frame)) }
}

func sendBinary(frame string) step {
	return func(c *websocket.Conn) { c.WriteMessage(websocket.BinaryMessage, []byte(frame)) }
}

// closeWith ends the session with a close frame and waits for the
// client's answer (or its going away), so no frame is lost to a reset.
func closeWith(code int, reason string) step {
	return func(c *websocket.Conn) {
		c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(5*time.Second))
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	}
}

// drop ends the connection without a close frame: a node that died.
func drop(*websocket.Conn) {}

// newPeer serves script to every session after reading its start frame;
// a script that does not end the session ends it with a normal close.
func newPeer(t *testing.T, script ...step) *fakeNode {
	t.Helper()
	n := &fakeNode{}
	n.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.dials.Add(1)
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		if _, _, err := conn.ReadMessage(); err != nil {
			return
		}
		n.starts.Add(1)
		for _, s := range script {
			s(conn)
		}
	}))
	t.Cleanup(n.Close)
	return n
}

// misbehaviour is a peer's script and what the client must make of it.
type misbehaviour struct {
	name     string
	script   []step
	maxFrame int64
	lost     bool   // ErrNodeLost
	code     string // else a *ProtocolError with this code
	in       string // the error says this
}

var (
	huge         = `{"type":"log","source":"stdout","text":"` + strings.Repeat("x", 4096) + `"}`
	sideCall     = `{"type":"call","id":"r:code:1","name":"side","args":{}}`
	normal       = closeWith(websocket.CloseNormalClosure, "")
	misbehaviors = []misbehaviour{
		{name: "refused 503 after accepted", script: []step{send(acceptedFrame), send(`{"type":"refused","status":503,"error":"shutting down"}`), normal},
			code: "unexpected", in: "refused the run (503: shutting down) after accepting it, a protocol violation; the run was accepted and is not retried"},
		{name: "refused 429 after accepted", script: []step{send(acceptedFrame), send(`{"type":"refused","status":429,"error":"busy","retryAfterMs":1}`), normal},
			code: "unexpected", in: "refused the run (429: busy) after accepting it"},
		{name: "connection dropped after accepted", script: []step{send(acceptedFrame), drop}, lost: true},
		{name: "normal close after accepted", script: []step{send(acceptedFrame), normal}, lost: true, in: "1000"},
		{name: "close 1011 after accepted", script: []step{send(acceptedFrame), closeWith(websocket.CloseInternalServerErr, "crashed")}, lost: true, in: "1011"},
		{name: "error frame after accepted", script: []step{send(acceptedFrame), send(`{"type":"error","code":"not-started","message":"no runner"}`), normal},
			code: "not-started", in: "no runner"},
		{name: "malformed frame after accepted", script: []step{send(acceptedFrame), send(`{"type":"refused",`), normal},
			code: "bad-frame", in: "not-json: the frame is not one JSON object; the run was accepted and is not retried"},
		{name: "unknown frame after accepted", script: []step{send(acceptedFrame), send(`{"type":"retry"}`), normal},
			code: "bad-frame", in: "unknown-type"},
		{name: "binary frame after accepted", script: []step{send(acceptedFrame), sendBinary(doneFrame), normal},
			code: "binary", in: "sent a binary frame, a protocol violation; the run was accepted"},
		{name: "oversized frame after accepted", script: []step{send(acceptedFrame), send(huge), normal}, maxFrame: 1024,
			code: "too-large", in: "larger than 1024 bytes"},
		{name: "accepted twice", script: []step{send(acceptedFrame), send(acceptedFrame), normal},
			code: "unexpected", in: "sent accepted twice"},
		{name: "call before accepted", script: []step{send(sideCall), normal},
			code: "unexpected", in: "sent call before accepted, a protocol violation; the run may have started and is not retried"},
		{name: "log before accepted", script: []step{send(`{"type":"log","source":"stdout","text":"hi"}`), normal},
			code: "unexpected", in: "sent log before accepted"},
		{name: "done before accepted", script: []step{send(doneFrame), normal},
			code: "unexpected", in: "sent done before accepted"},
		{name: "oversized frame before accepted", script: []step{send(huge), normal}, maxFrame: 1024,
			code: "too-large", in: "may have started"},
		{name: "binary frame before accepted", script: []step{sendBinary(acceptedFrame), normal},
			code: "binary"},
	}
)

// checkOutcome checks err against what m says the client must report.
func (m misbehaviour) checkOutcome(t *testing.T, rep *client.Report, err error) {
	t.Helper()
	var pe *client.ProtocolError
	switch {
	case m.lost && !errors.Is(err, client.ErrNodeLost):
		t.Errorf("err %v, want ErrNodeLost", err)
	case !m.lost && (!errors.As(err, &pe) || pe.Code != m.code):
		t.Errorf("err %v (%T), want a *ProtocolError %q", err, err, m.code)
	case !strings.Contains(errString(err), m.in):
		t.Errorf("err %q does not say %q", err, m.in)
	case rep != nil:
		t.Errorf("a report %+v from a peer that broke the protocol", rep)
	}
	var rf *client.RefusedError
	if errors.As(err, &rf) {
		t.Errorf("a refusal after accepted came back as a *RefusedError (nothing ran): %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// countingTool is the tool a peer's call names: it must never run for a
// call sent before accepted.
func countingTool(n *atomic.Int32) client.Tool {
	return client.Tool{Name: "side", Func: func(context.Context, json.RawMessage) (any, error) {
		n.Add(1)
		return "done", nil
	}}
}

// One endpoint, retries allowed: after accepted (or a running program's
// frame before it) the run is started once, whatever the peer does next.
func TestNothingAfterAcceptedIsRetried(t *testing.T) {
	for _, m := range misbehaviors {
		t.Run(m.name, func(t *testing.T) {
			peer := newPeer(t, m.script...)
			var calls, retries atomic.Int32
			c := &client.Client{URL: peer.URL, MaxRetries: 5, RetryBackoff: time.Millisecond, MaxFrameBytes: m.maxFrame,
				OnRetry: func(string, error) { retries.Add(1) }}
			rep, err := c.Run(context.Background(), one, []client.Tool{countingTool(&calls)}, client.Handlers{})
			m.checkOutcome(t, rep, err)
			if n := peer.starts.Load(); n != 1 || retries.Load() != 0 {
				t.Errorf("the run was started %d times (%d retries), want once", n, retries.Load())
			}
			if calls.Load() != 0 {
				t.Errorf("the tool ran %d times for a call sent before accepted", calls.Load())
			}
		})
	}
}

// The frames a daemon sends before accepted stay retryable where nothing
// can have run: a refusal, or a close before any frame.
func TestRefusedBeforeAcceptedIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script []step
	}{
		{"refused 503", []step{send(`{"type":"refused","status":503,"error":"shutting down"}`), normal}},
		{"closed at once", []step{normal}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer := newPeer(t, tc.script...)
			_, err := (&client.Client{URL: peer.URL, MaxRetries: 2, RetryBackoff: time.Millisecond}).Run(context.Background(), one, nil, client.Handlers{})
			if err == nil || errors.Is(err, client.ErrNodeLost) {
				t.Fatalf("err %v", err)
			}
			if n := peer.starts.Load(); n != 3 {
				t.Fatalf("%d starts, want 1 + 2 retries", n)
			}
		})
	}
}
