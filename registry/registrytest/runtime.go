// Package registrytest provides an in-memory backend.Runtime for tests of
// code that runs programs through the registry, without containers.
//
// A Runtime "runs" a program in one of two ways. A program text registered
// with Handle runs the Go function given for it, which calls the bindings
// through an Env — sequentially with Call, concurrently with Go, from real
// goroutines. Any other program text is read as a tiny script of binding
// calls (see Script). Like the container runtime, it keeps the seam's
// promise (see backend.BindingFunc): a run's bindings are invoked one at a
// time, in the order the program issued the calls, and none starts after
// the run settled or was cancelled. So a binding that blocks — a call
// waiting for its approval (registry.Ask) — holds every call issued after
// it: the next starts only once it returns, and they start in submission
// order; the registry's approvals rely on this, as on the container
// runtime's same promise. The binding context is cancelled when
// the run settles, Run waits for every binding goroutine the program
// started before it returns, and every program outcome is a RunResult
// (Run's error is for misuse only).
package registrytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dsh-container/dsh-container/backend"
)

// Program stands in for a program's source text. Its return value becomes
// the run's value: nil for none, a json.RawMessage as is, anything else
// marshalled. A returned error is the program throwing (kind exception),
// unless it is a *backend.Failure, which is reported as it is. A program
// returning after its context was cancelled reports kind abort.
type Program func(ctx context.Context, env *Env) (any, error)

// Runtime is an in-memory backend.Runtime. The zero value is not usable;
// call New.
type Runtime struct {
	lang backend.Language

	mu       sync.Mutex
	programs map[string]Program
	closed   bool
	runs     sync.WaitGroup
	requests []backend.RunRequest
}

var _ backend.Runtime = (*Runtime)(nil)

// New returns a runtime that reports lang as its language. Any string
// works, so tests can configure a language no renderer knows.
func New(lang backend.Language) *Runtime {
	return &Runtime{lang: lang, programs: make(map[string]Program)}
}

// Handle makes Run execute p whenever the program text is source.
func (r *Runtime) Handle(source string, p Program) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.programs[source] = p
}

// Language implements backend.Runtime.
func (r *Runtime) Language() backend.Language { return r.lang }

// Isolation implements backend.Runtime: in-process.
func (r *Runtime) Isolation() backend.Isolation { return backend.IsolationInProcess }

// Requests returns the requests Run accepted, in order.
func (r *Runtime) Requests() []backend.RunRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]backend.RunRequest(nil), r.requests...)
}

// Close implements backend.Runtime: later runs fail with backend.ErrClosed;
// Close waits for in-flight runs (which must honour their context) or ctx.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.runs.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run implements backend.Runtime.
// It honours no per-run option: a request setting Limits or Egress fails
// with backend.ErrNotImplemented (backend.RefuseOptions); test doubles
// that embed it and honour one clear it before calling.
func (r *Runtime) Run(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
	if err := req.Validate(); err != nil {
		return backend.RunResult{}, err
	}
	if err := backend.RefuseOptions(r.lang, req); err != nil {
		return backend.RunResult{}, err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return backend.RunResult{}, backend.ErrClosed
	}
	r.runs.Add(1)
	defer r.runs.Done()
	r.requests = append(r.requests, req)
	prog, ok := r.programs[req.Program]
	r.mu.Unlock()

	if !ok {
		script, err := ParseScript(req.Program)
		if err != nil {
			return backend.RunResult{Logs: []backend.LogEntry{}, Error: &backend.Failure{Kind: backend.FailureException, Message: err.Error()}}, nil
		}
		prog = script.Program()
	}

	runCtx, settle := context.WithCancel(ctx)
	env := &Env{ctx: runCtx, bindings: req.Bindings, onLog: req.Logs}
	start := time.Now()
	value, progErr := run(runCtx, prog, env)
	settle()
	env.wg.Wait() // no binding goroutine outlives the run

	res := backend.RunResult{Logs: env.takeLogs()}
	res.Stats.Wall = time.Since(start)
	res.Stats.Calls = env.callCount()
	var f *backend.Failure
	switch {
	case ctx.Err() != nil:
		res.Error = &backend.Failure{Kind: backend.FailureAbort, Message: "run cancelled: " + context.Cause(ctx).Error()}
	case errors.As(progErr, &f):
		res.Error = f
	case progErr != nil:
		res.Error = &backend.Failure{Kind: backend.FailureException, Message: progErr.Error()}
	default:
		res.ValueKind, res.Value = encodeValue(value)
	}
	return res, nil
}

func run(ctx context.Context, prog Program, env *Env) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &backend.Failure{Kind: backend.FailureExit, Message: fmt.Sprintf("program panicked: %v", p)}
		}
	}()
	return prog(ctx, env)
}

func encodeValue(v any) (backend.ValueKind, json.RawMessage) {
	switch v := v.(type) {
	case nil:
		return backend.ValueNone, nil
	case json.RawMessage:
		if json.Valid(v) {
			return backend.ValueJSON, v
		}
		s, _ := json.Marshal(string(v))
		return backend.ValueInspect, s
	}
	b, err := json.Marshal(v)
	if err != nil {
		s, _ := json.Marshal(fmt.Sprint(v))
		return backend.ValueInspect, s
	}
	return backend.ValueJSON, b
}

// Env is a running program's view of its bindings and console.
type Env struct {
	ctx      context.Context
	bindings []backend.BindingNamespace
	onLog    func(backend.LogEntry)

	wg    sync.WaitGroup
	mu    sync.Mutex
	logs  []backend.LogEntry
	calls int
	// last is closed when the most recently issued call has finished:
	// each call waits for the one issued before it, so calls run one at a
	// time, in issue order.
	last chan struct{}
}

// Context is the run's context, cancelled when the run settles.
func (e *Env) Context() context.Context { return e.ctx }

// Log records a console.log entry.
func (e *Env) Log(text string) {
	entry := backend.LogEntry{Source: backend.SourceConsole, Level: backend.LevelLog, Text: text}
	e.mu.Lock()
	e.logs = append(e.logs, entry)
	e.mu.Unlock()
	if e.onLog != nil {
		e.onLog(entry)
	}
}

func (e *Env) takeLogs() []backend.LogEntry {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]backend.LogEntry{}, e.logs...)
}

func (e *Env) callCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls
}

// Call awaits tools[name](args) in the "tools" namespace.
func (e *Env) Call(name string, args json.RawMessage) (json.RawMessage, error) {
	return e.CallIn("tools", name, args)
}

// CallIn awaits global[name](args). An unknown name rejects at once, as
// the container host does. Calls made concurrently from several goroutines
// are issued in the order they reach CallIn, and run in that order.
func (e *Env) CallIn(global, name string, args json.RawMessage) (json.RawMessage, error) {
	return e.issue(global, name, args)()
}

// ErrSettled is wrapped by the rejection of a call that was issued but had
// not started when the run settled or was cancelled: its binding was never
// invoked.
var ErrSettled = errors.New("the run settled before the call started")

// issue issues global[name](args): the call takes its place in the run's
// order now, and runs when the returned function is called and every call
// issued before it has finished.
func (e *Env) issue(global, name string, args json.RawMessage) func() (json.RawMessage, error) {
	var fn backend.BindingFunc
	for _, ns := range e.bindings {
		if ns.Global == global {
			fn = ns.Functions[name]
			break
		}
	}
	e.mu.Lock()
	e.calls++
	if fn == nil {
		e.mu.Unlock()
		return func() (json.RawMessage, error) {
			return nil, fmt.Errorf("%s[%q] is not a function", global, name)
		}
	}
	prev, mine := e.last, make(chan struct{})
	e.last = mine
	e.mu.Unlock()
	return func() (json.RawMessage, error) {
		defer close(mine)
		if prev != nil {
			<-prev
		}
		if e.ctx.Err() != nil {
			return nil, fmt.Errorf("%s[%q]: %w: %w", global, name, ErrSettled, context.Cause(e.ctx))
		}
		return fn(e.ctx, args)
	}
}

// CallText is Call for a tool resolving with a string: args is JSON text,
// the result is the string the binding resolved with.
func (e *Env) CallText(name, args string) (string, error) {
	v, err := e.Call(name, json.RawMessage(args))
	if err != nil {
		return "", err
	}
	return Text(v), nil
}

// Pending is a binding call started with Go.
type Pending struct {
	done  chan struct{}
	value json.RawMessage
	err   error
}

// Go issues tools[name](args) and lets it run on its own goroutine, like a
// promise the program has not awaited yet; Promise.all is several Go then
// Wait. The call's place in the run's order is taken before Go returns.
func (e *Env) Go(name string, args json.RawMessage) *Pending {
	p := &Pending{done: make(chan struct{})}
	call := e.issue("tools", name, args)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer close(p.done)
		p.value, p.err = call()
	}()
	return p
}

// Wait awaits the call.
func (p *Pending) Wait() (json.RawMessage, error) {
	<-p.done
	return p.value, p.err
}

// Text renders a binding resolution: a JSON string unquoted, anything else
// as its JSON text.
func Text(v json.RawMessage) string {
	var s string
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}
