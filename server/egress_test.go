package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry/registrytest"
	"github.com/dsh-container/dsh-container/server"
)

// egressRuntime is the in-memory runtime with an egress allowlist a
// request may narrow: a backend.RequestChecker that honours Egress.
type egressRuntime struct {
	*registrytest.Runtime
	allow []string

	mu  sync.Mutex
	got [][]string
}

func (r *egressRuntime) CheckRequest(req backend.RunRequest) error {
	if req.Egress == nil {
		return backend.RefuseOptions(r.Language(), req)
	}
	for _, a := range req.Egress.Allow {
		if !slices.Contains(r.allow, a) {
			return fmt.Errorf("%w: egress: allow %q is not within the server's allowlist: a request may narrow egress, never widen it", backend.ErrInvalidRequest, a)
		}
	}
	return backend.RefuseOptions(r.Language(), backend.RunRequest{Limits: req.Limits})
}

func (r *egressRuntime) Run(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
	if err := r.CheckRequest(req); err != nil {
		return backend.RunResult{}, err
	}
	var allow []string
	if req.Egress != nil {
		allow = req.Egress.Allow
	}
	req.Egress = nil // honoured here
	r.mu.Lock()
	r.got = append(r.got, allow)
	r.mu.Unlock()
	if req.Events != nil {
		req.Events(json.RawMessage(`{"type":"egress","host":"api.github.com","port":443,"outcome":"ok"}`))
	}
	return r.Runtime.Run(ctx, req)
}

func TestRequestEgress(t *testing.T) {
	py := &egressRuntime{Runtime: registrytest.New(backend.Python), allow: []string{"api.github.com:443", "a.example.com:443"}}
	t.Cleanup(func() { py.Close(context.Background()) })
	ts := registrytest.New(backend.TypeScript)
	t.Cleanup(func() { ts.Close(context.Background()) })
	srv, err := server.New(server.WithRuntime(py), server.WithRuntime(ts), server.WithTools(echoTool), server.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: srv}
	for _, c := range []struct {
		egress string
		status int
		want   string
	}{
		{`{"allow":["api.github.com:443"]}`, 200, ""},
		{`null`, 200, ""},
		{`{"allow":["evil.org:443"]}`, 400, `allow "evil.org:443" is not within the server's allowlist`},
		{`{"allow":[]}`, 400, "egress.allow must list at least one"},
		{`{"allow":["a.example.com:443"],"maxBytes":5}`, 400, `unknown field "maxBytes"`},
		{`["api.github.com:443"]`, 400, "egress must be an object"},
	} {
		rec := f.do(t, http.MethodPost, "/v1/run", `{"language":"python","code":"return 1","egress":`+c.egress+`}`)
		var body struct{ Error string }
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != c.status || !strings.Contains(body.Error, c.want) {
			t.Errorf("egress %s: %d %s, want %d %q", c.egress, rec.Code, rec.Body.String(), c.status, c.want)
		}
	}
	py.mu.Lock()
	got := py.got
	py.mu.Unlock()
	// Only the valid requests reached Run: the narrowed one with its
	// list, the other with the server's (nil).
	if len(got) != 2 || !slices.Equal(got[0], []string{"api.github.com:443"}) || got[1] != nil {
		t.Fatalf("the runtime got %v", got)
	}
	rec := f.do(t, http.MethodPost, "/v1/run", `{"language":"python","code":"return 1"}`)
	var resp server.RunResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || len(resp.EgressEvents) != 1 || !strings.Contains(string(resp.EgressEvents[0]), `"type":"egress"`) {
		t.Fatalf("response %s: egress events missing", rec.Body.String())
	}
	// A runtime without egress refuses the key.
	rec = f.do(t, http.MethodPost, "/v1/run", `{"language":"typescript","code":"return 1","egress":{"allow":["api.github.com:443"]}}`)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "offers no egress") {
		t.Fatalf("egress on a runtime without it: %d %s", rec.Code, rec.Body.String())
	}
}

// A session's start frame takes "egress" like POST /v1/run.
func TestSessionStartEgress(t *testing.T) {
	sf := newSessionFixture(t)
	p := sf.dial(t, nil)
	st := start("python", "return 1")
	st.Egress = json.RawMessage(`{"allow":["api.github.com:443"]}`)
	p.send(st)
	m, _ := p.expect(server.FrameRefused)
	if m["status"] != 400.0 || !strings.Contains(m["error"].(string), "offers no egress") {
		t.Fatalf("refused %v", m)
	}
	p.closed()
}

// A session's egress connections reach its client as event frames, as
// they happen, and in the done report's egressEvents, like POST /v1/run's.
func TestSessionEgressEvents(t *testing.T) {
	py := &egressRuntime{Runtime: registrytest.New(backend.Python), allow: []string{"api.github.com:443"}}
	t.Cleanup(func() { py.Close(context.Background()) })
	srv, err := server.New(server.WithRuntime(py), server.WithTools(echoTool), server.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	sf := &sessionFixture{srv: srv, ts: httptest.NewServer(srv)}
	t.Cleanup(sf.ts.Close)
	p := sf.dial(t, nil)
	st := start("python", "return 1")
	st.Egress = json.RawMessage(`{"allow":["api.github.com:443"]}`)
	p.send(st)
	p.expect(server.FrameAccepted)
	m, _ := p.expect(server.FrameEvent)
	if ev, _ := m["event"].(map[string]any); ev["type"] != "egress" || ev["host"] != "api.github.com" || ev["outcome"] != "ok" {
		t.Fatalf("event frame %v, want the egress connection", m)
	}
	m, _ = p.until(server.FrameDone)
	rep, _ := m["report"].(map[string]any)
	evs, _ := rep["egressEvents"].([]any)
	if len(evs) != 1 || evs[0].(map[string]any)["type"] != "egress" {
		t.Fatalf("done report %v, want one egress event", rep)
	}
	p.closed()
	waitNoSessions(t, srv)
}
