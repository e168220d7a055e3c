package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dsh-container/dsh-container/client"
)

// fakeNode is a daemon that does one thing with every session.
type fakeNode struct {
	*httptest.Server
	dials  atomic.Int32 // upgrade attempts
	starts atomic.Int32 // start frames read
}

const doneFrame = `{"type":"done","report":{"id":"r","value":7,"logs":[],"error":null,"stats":{"wallMs":1,"cpuMs":1,"startupMs":1,"calls":0},"events":[]}}`

// newFake serves behave: "429", "503", "429-frame", "400", "502", "runs",
// "close-before-accept" (newPeer serves a script).
func newFake(t *testing.T, behave string, retryAfter string) *fakeNode {
	t.Helper()
	n := &fakeNode{}
	n.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.dials.Add(1)
		switch behave {
		case "429", "503", "400", "502":
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			code := map[string]int{"429": 429, "503": 503, "400": 400, "502": 502}[behave]
			http.Error(w, `{"error":"fake `+behave+`"}`, code)
			return
		}
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		if _, _, err := conn.ReadMessage(); err != nil {
			return
		}
		n.starts.Add(1)
		switch behave {
		case "429-frame":
			conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"refused","status":429,"error":"busy","retryAfterMs":`+retryAfter+`}`))
		case "runs":
			conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"accepted","id":"r"}`))
			conn.WriteMessage(websocket.TextMessage, []byte(doneFrame))
			conn.ReadMessage() // the client's close
		case "close-before-accept":
		}
	}))
	t.Cleanup(n.Close)
	return n
}

var one = client.Request{Language: "python", Code: "return 7"}

// Refused with 429 by one node, 503 by another and 502 by a balancer, the
// run goes to the fourth; each is tried at most once per run.
func TestEndpointsMoveOnRefusal(t *testing.T) {
	busy, down, gw, ok := newFake(t, "429", "1"), newFake(t, "503", ""), newFake(t, "502", ""), newFake(t, "runs", "")
	c, err := client.New(busy.URL, down.URL, gw.URL, ok.URL)
	if err != nil {
		t.Fatal(err)
	}
	c.RetryBackoff = time.Millisecond
	var retries atomic.Int32
	c.OnRetry = func(ep string, err error) {
		var rf *client.RefusedError
		if ep == ok.URL || !errors.As(err, &rf) {
			t.Errorf("OnRetry(%s, %v)", ep, err)
		}
		retries.Add(1)
	}
	for range 10 {
		rep, err := c.Run(context.Background(), one, nil, client.Handlers{})
		if err != nil || string(rep.Value) != "7" {
			t.Fatalf("run: %v %+v", err, rep)
		}
	}
	if ok.starts.Load() != 10 {
		t.Fatalf("%d runs reached the working node, want 10", ok.starts.Load())
	}
	if n, refusals := retries.Load(), busy.dials.Load()+down.dials.Load()+gw.dials.Load(); n != refusals {
		t.Fatalf("OnRetry called %d times for %d refusals", n, refusals)
	}
	// busy's Retry-After (1s) keeps it out for the rest of each run.
	if busy.dials.Load() > 10 || down.dials.Load() > 10 || gw.dials.Load() > 10 {
		t.Fatalf("a refusing node was tried more than once per run: 429 %d, 503 %d, 502 %d", busy.dials.Load(), down.dials.Load(), gw.dials.Load())
	}
}

// A connection that fails before accepted (nothing listening, or closed
// before the daemon's answer) moves the run on; nothing ran.
func TestEndpointsMoveOnConnectionFailure(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()
	closing, ok := newFake(t, "close-before-accept", ""), newFake(t, "runs", "")
	c := &client.Client{URL: goneURL, Endpoints: []string{closing.URL, ok.URL}, RetryBackoff: time.Millisecond, MaxRetries: 10}
	for range 5 {
		if _, err := c.Run(context.Background(), one, nil, client.Handlers{}); err != nil {
			t.Fatal(err)
		}
	}
	if ok.starts.Load() != 5 {
		t.Fatalf("%d runs, want 5", ok.starts.Load())
	}
}

// A run a node accepted is never replayed on another node, whatever the
// node does after accepted (or for a running program's frame before it):
// each run is started exactly once across all the endpoints, and a run
// that a misbehaving node started and another then finished is a replay.
// A fresh client starts at a random endpoint: runs go on until the
// misbehaving node had three.
func TestEndpointsNeverReplayAccepted(t *testing.T) {
	for _, m := range misbehaviors {
		t.Run(m.name, func(t *testing.T) {
			bad, other := newPeer(t, m.script...), newFake(t, "runs", "")
			var calls atomic.Int32
			for run := 0; bad.starts.Load() < 3; run++ {
				if run == 200 {
					t.Fatalf("the misbehaving node started %d of 200 runs", bad.starts.Load())
				}
				c := &client.Client{Endpoints: []string{bad.URL, other.URL}, MaxRetries: 10, RetryBackoff: time.Millisecond, MaxFrameBytes: m.maxFrame}
				badBefore, otherBefore := bad.starts.Load(), other.starts.Load()
				rep, err := c.Run(context.Background(), one, []client.Tool{countingTool(&calls)}, client.Handlers{})
				badRan, otherRan := bad.starts.Load()-badBefore, other.starts.Load()-otherBefore
				switch {
				case badRan+otherRan != 1:
					t.Fatalf("run %d was started %d times: %d on the misbehaving node, %d on the other (err %v)", run, badRan+otherRan, badRan, otherRan, err)
				case badRan == 1:
					m.checkOutcome(t, rep, err)
				case err != nil || string(rep.Value) != "7":
					t.Fatalf("run %d on the working node: %v %+v", run, err, rep)
				}
			}
			if calls.Load() != 0 {
				t.Errorf("the tool ran %d times for calls sent before accepted", calls.Load())
			}
		})
	}
}

// Every node refusing: attempts are bounded and the last refusal comes
// back as it was.
func TestEndpointsBoundedAttempts(t *testing.T) {
	a, b := newFake(t, "503", ""), newFake(t, "503", "")
	c := &client.Client{Endpoints: []string{a.URL, b.URL}, MaxRetries: 5, RetryBackoff: time.Millisecond}
	_, err := c.Run(context.Background(), one, nil, client.Handlers{})
	var rf *client.RefusedError
	if !errors.As(err, &rf) || rf.Status != 503 {
		t.Fatalf("err %v", err)
	}
	if n := a.dials.Load() + b.dials.Load(); n != 6 {
		t.Fatalf("%d attempts, want 1 + 5 retries", n)
	}
	// A refusal that is not 429 or 503 is final.
	bad := newFake(t, "400", "")
	_, err = (&client.Client{Endpoints: []string{bad.URL, a.URL}, MaxRetries: 5}).Run(context.Background(), one, nil, client.Handlers{})
	if !errors.As(err, &rf) || rf.Status != 400 && rf.Status != 503 {
		t.Fatalf("err %v", err)
	}
	if bad.dials.Load() > 1 {
		t.Fatalf("a 400 was retried: %d attempts", bad.dials.Load())
	}
}

// Retry-After is honoured on the node that gave it (header and frame),
// and the wait ends with ctx.
func TestEndpointsRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		behave, after string
		want          time.Duration
	}{{"429", "1", time.Second}, {"429-frame", "600", 600 * time.Millisecond}} {
		busy := newFake(t, tc.behave, tc.after)
		c := &client.Client{URL: busy.URL, MaxRetries: 1, RetryBackoff: time.Millisecond}
		began := time.Now()
		_, err := c.Run(context.Background(), one, nil, client.Handlers{})
		var rf *client.RefusedError
		if !errors.As(err, &rf) || rf.Status != 429 || busy.dials.Load() != 2 {
			t.Fatalf("%s: err %v after %d attempts", tc.behave, err, busy.dials.Load())
		}
		if d := time.Since(began); d < tc.want {
			t.Fatalf("%s: retried after %v, before the Retry-After of %v", tc.behave, d, tc.want)
		}
	}
	busy := newFake(t, "429", "30")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := (&client.Client{URL: busy.URL, MaxRetries: 3}).Run(ctx, one, nil, client.Handlers{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 5*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(began))
	}
}

func TestNewChecksEndpoints(t *testing.T) {
	for _, eps := range [][]string{nil, {"ftp://x"}, {"http://"}, {"unix://"}, {"http://a:1", "::"}} {
		if _, err := client.New(eps...); err == nil {
			t.Errorf("New(%q) accepted", eps)
		}
	}
	if _, err := (&client.Client{}).Run(context.Background(), one, nil, client.Handlers{}); err == nil || !strings.Contains(err.Error(), "no endpoint") {
		t.Fatalf("no endpoint: %v", err)
	}
}

// A TLS handshake refused on trust is not retried: another attempt would
// fail alike.
func TestEndpointsTLSTrustNotRetried(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	var handshakes atomic.Int32
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			handshakes.Add(1)
		}
	}
	ts.StartTLS()
	defer ts.Close()
	began := time.Now()
	_, err := (&client.Client{URL: ts.URL, MaxRetries: 5, RetryBackoff: time.Second}).Run(context.Background(), one, nil, client.Handlers{})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(began); d > 900*time.Millisecond || handshakes.Load() > 1 {
		t.Fatalf("an untrusted certificate was retried: %d connections in %v", handshakes.Load(), d)
	}
}
