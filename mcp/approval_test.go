package mcp

import (
	"context"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

func askHello(_ context.Context, exec registry.Execution) error {
	if exec.Name == "hello" {
		return registry.Ask("policy asks about hello")
	}
	return nil
}

// connect is a client session with an elicitation handler.
func connectEliciting(t *testing.T, srv *Server, version string, elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)) *sdk.ClientSession {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.MCPServer().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "eliciting"}, &sdk.ClientOptions{ElicitationHandler: elicit}).Connect(t.Context(), ct, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// newAskingServer serves a "hello" tool the guard asks about, on the
// in-memory TypeScript runtime; both close at cleanup.
func newAskingServer(t *testing.T) *Server {
	t.Helper()
	rt := registrytest.New(backend.TypeScript)
	srv, err := New(WithRuntime(rt), WithLogger(tLogger(t)), WithTools(textTool("hello", "hi")), WithRegistryOptions(registry.WithGuard(askHello)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		rt.Close(context.Background())
	})
	return srv
}

// With elicitation the user decides; each answer shapes what the program
// sees.
func TestApprovalElicitation(t *testing.T) {
	srv := newAskingServer(t)
	var mu sync.Mutex
	var messages []string
	answers := []*sdk.ElicitResult{
		{Action: "accept", Content: map[string]any{"decision": "allow"}},
		{Action: "accept", Content: map[string]any{"decision": "deny", "reason": "not now"}},
		{Action: "decline"},
		{Action: "accept", Content: map[string]any{"decision": "allowForRun"}},
	}
	cs := connectEliciting(t, srv, "2025-11-25", func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		messages = append(messages, req.Params.Message)
		return answers[len(messages)-1], nil
	})
	res, err := runCode(t, cs, t.Context(), "try hello {\"x\":\"1\"}\ntry hello {\"x\":\"2\"}\ntry hello {\"x\":\"3\"}\ntry hello {\"x\":\"4\"}\ntry hello {\"x\":\"5\"}", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `hi {"x":"1"}` + "\n" + `error: tool "hello" denied: not now` + "\n" + `error: tool "hello" denied: declined by the user` + "\n" + `hi {"x":"4"}` + "\n" + `hi {"x":"5"}`
	if got := text(res); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if len(messages) != 4 || !strings.Contains(messages[0], `tool "hello" with arguments {"x":"1"}`) {
		t.Errorf("elicitations %q", messages)
	}
}

// Without the capability the call is denied, saying why.
func TestApprovalWithoutElicitation(t *testing.T) {
	h := newHarness(t, backend.TypeScript, WithMode(registry.ModeBoth), WithTools(textTool("hello", "hi")), WithRegistryOptions(registry.WithGuard(askHello)))
	res, err := runCode(t, h.cs, t.Context(), "try hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(res); got != `error: tool "hello" denied: `+ErrNoElicitation.Error() {
		t.Errorf("got %q", got)
	}
	res, err = h.cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "hello"})
	if err != nil || !res.IsError || !strings.Contains(text(res), "does not support elicitation") {
		t.Errorf("native: %v %+v", err, res)
	}
}

// On a protocol where a server may not elicit during a tool call, the
// call is denied saying so, and nothing is elicited.
func TestApprovalElicitationForbidden(t *testing.T) {
	srv := newAskingServer(t)
	cs := connectEliciting(t, srv, "", func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		t.Error("elicited")
		return &sdk.ElicitResult{Action: "decline"}, nil
	})
	res, err := runCode(t, cs, t.Context(), "try hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(res); !strings.Contains(got, "does not support elicitation") || !strings.Contains(got, "forbids elicitation during a tool call") {
		t.Errorf("got %q", got)
	}
}
