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
	"github.com/dsh-container/dsh-container/server"
)

// egressRuntime is the in-memory runtime with an egress allowlist: each
// run reports one connection per allowed entry.
type egressRuntime struct {
	*registrytest.Runtime
	allow []string

	mu  sync.Mutex
	got [][]string
}

func (r *egressRuntime) HasEgress() bool { return true }

func (r *egressRuntime) CheckEgress(allow []string) error {
	for _, a := range allow {
		if !slices.Contains(r.allow, a) {
			return fmt.Errorf("allow %q is not within the server's allowlist", a)
		}
	}
	return nil
}

func (r *egressRuntime) RunEgress(ctx context.Context, req backend.RunRequest, _ server.Limits, allow []string, onEvent func(json.RawMessage)) (backend.RunResult, error) {
	r.mu.Lock()
	r.got = append(r.got, allow)
	r.mu.Unlock()
	if allow == nil {
		allow = r.allow
	}
	for _, a := range allow {
		host, _, _ := strings.Cut(a, ":")
		onEvent(json.RawMessage(`{"type":"egress","host":"` + host + `","port":443,"outcome":"ok"}`))
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
