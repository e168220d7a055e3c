package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/client"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

// egressRuntime is the in-memory runtime with an egress allowlist: each
// run reports one connection per allowed entry.
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
			return fmt.Errorf("%w: egress: allow %q is not within the server's allowlist", backend.ErrInvalidRequest, a)
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
	if allow == nil {
		allow = r.allow
	}
	for _, a := range allow {
		host, _, _ := strings.Cut(a, ":")
		if req.Events != nil {
			req.Events(json.RawMessage(`{"type":"egress","host":"` + host + `","port":443,"outcome":"ok"}`))
		}
	}
	return r.Runtime.Run(ctx, req)
}

// Request.Egress narrows the daemon's allowlist; each connection comes as
// an event and in the report's EgressEvents; widening is refused (400).
func TestEgressRequestAndEvents(t *testing.T) {
	py := &egressRuntime{Runtime: registrytest.New(backend.Python), allow: []string{"api.github.com:443", "a.example.com:443"}}
	c := &client.Client{URL: newDaemonWith(t, py).URL}
	var events []string
	rep, err := c.Run(context.Background(), client.Request{Language: "python", Code: "return 1", Egress: []string{"a.example.com:443"}}, nil, client.Handlers{
		Event: func(e json.RawMessage) { events = append(events, string(e)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || !strings.Contains(events[0], `"host":"a.example.com"`) || len(rep.EgressEvents) != 1 || string(rep.EgressEvents[0]) != events[0] {
		t.Fatalf("events %q, report's egress events %s", events, rep.EgressEvents)
	}
	if _, err := c.Run(context.Background(), client.Request{Language: "python", Code: "return 1"}, nil, client.Handlers{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Run(context.Background(), client.Request{Language: "python", Code: "return 1", Egress: []string{"evil.org:443"}}, nil, client.Handlers{})
	var rf *client.RefusedError
	if !errors.As(err, &rf) || rf.Status != 400 || !strings.Contains(rf.Error(), `"evil.org:443" is not within`) {
		t.Fatalf("widening: %v, want a 400 naming the entry", err)
	}
	py.mu.Lock()
	defer py.mu.Unlock()
	if len(py.got) != 2 || !slices.Equal(py.got[0], []string{"a.example.com:443"}) || py.got[1] != nil {
		t.Fatalf("the runtime got %q", py.got)
	}
}
