package registry

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

// tLogger routes the registry's logs to t.Log.
func tLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// newReg returns a registry logging to t with the given options.
func newReg(t *testing.T, opts ...Option) *Registry {
	t.Helper()
	return New(append([]Option{WithLogger(tLogger(t))}, opts...)...)
}

// mustRegister registers tools or fails the test.
func mustRegister(t *testing.T, r *Registry, tools ...Tool) {
	t.Helper()
	for _, tool := range tools {
		if err := r.Register(tool); err != nil {
			t.Fatalf("Register(%q): %v", tool.Name, err)
		}
	}
}

// echoTool returns its arguments as text.
func echoTool(name string) Tool {
	return Tool{
		Name:        name,
		Description: "echoes " + name,
		Parameters:  json.RawMessage(`{"type":"object"}`),
		Execute: func(_ context.Context, exec Execution) ([]Block, error) {
			return []Block{TextBlock(name + " " + string(exec.Arguments))}, nil
		},
	}
}

// failTool always fails with msg.
func failTool(name, msg string) Tool {
	return Tool{Name: name, Execute: func(context.Context, Execution) ([]Block, error) {
		return nil, errors.New(msg)
	}}
}

// events collects dispatch events.
type events struct {
	mu  sync.Mutex
	evs []Event
}

func (e *events) sink(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *events) all() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.evs...)
}

// codeReg is a ModeCode registry on a fresh TypeScript fake runtime.
func codeReg(t *testing.T, opts ...Option) (*Registry, *registrytest.Runtime, *events) {
	t.Helper()
	rt := registrytest.New(backend.TypeScript)
	ev := &events{}
	r := newReg(t, append([]Option{WithMode(ModeCode), WithRuntime(rt), WithEventSink(ev.sink)}, opts...)...)
	return r, rt, ev
}

// runCall is a run_code Call for program.
func runCall(id, program string) Call {
	args, _ := json.Marshal(map[string]string{"code": program})
	return Call{ID: id, Name: RunCode, Arguments: args}
}

// funcRuntime is a backend.Runtime whose Run is a function, for runtimes
// that misbehave in ways the fake does not.
type funcRuntime struct {
	lang backend.Language
	run  func(ctx context.Context, req backend.RunRequest) (backend.RunResult, error)
}

func (f funcRuntime) Language() backend.Language      { return f.lang }
func (f funcRuntime) Isolation() backend.Isolation    { return backend.IsolationInProcess }
func (f funcRuntime) Close(ctx context.Context) error { return nil }
func (f funcRuntime) Run(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
	return f.run(ctx, req)
}
