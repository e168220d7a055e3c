package registrytest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-container/dsh-container/backend"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is a binding namespace whose functions echo their name and args.
func echo(names ...string) []backend.BindingNamespace {
	fns := map[string]backend.BindingFunc{}
	for _, n := range names {
		fns[n] = func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			if n == "fail" {
				return nil, errors.New("failed " + string(args))
			}
			v, _ := json.Marshal(n + " " + string(args))
			return v, nil
		}
	}
	return []backend.BindingNamespace{{Global: "tools", Functions: fns}}
}

func logTexts(res backend.RunResult) []string {
	var out []string
	for _, l := range res.Logs {
		out = append(out, l.Text)
	}
	return out
}

func TestScript(t *testing.T) {
	tests := []struct {
		name      string
		program   string
		wantLogs  []string
		wantValue string
		wantFail  string // "kind: message" substring
	}{
		{name: "calls", program: "# c\n\nlog start\ncall a {\"x\": 1}\ntry fail\ncall \"a\" [1]\nreturn {\"ok\":true}",
			wantLogs: []string{"start", `a {"x": 1}`, "error: failed {}", "a [1]"}, wantValue: `{"ok":true}`},
		{name: "concurrent", program: "go a\ngo fail\nwait\ngo a\n", wantLogs: []string{"a {}", "error: failed {}"}},
		{name: "uncaught", program: "call fail\nlog never", wantFail: "exception: line 1: failed {}"},
		{name: "unknown binding", program: "call nope", wantFail: `tools["nope"] is not a function`},
		{name: "throw", program: "throw bad thing", wantFail: "exception: bad thing"},
		{name: "sleep", program: "sleep 1ms\nreturn 1", wantValue: "1"},
		{name: "syntax: statement", program: "frobnicate", wantFail: `exception: SyntaxError: line 1: unknown statement "frobnicate"`},
		{name: "syntax: return", program: "return {", wantFail: "line 1: return needs a JSON value"},
		{name: "syntax: wait", program: "wait now", wantFail: "wait takes no argument"},
		{name: "syntax: sleep", program: "sleep soon", wantFail: "line 1: time: invalid duration"},
		{name: "syntax: name", program: "call", wantFail: "missing tool name"},
		{name: "syntax: quoted name", program: `call "a`, wantFail: "bad quoted tool name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := New(backend.Python).Run(t.Context(), backend.RunRequest{Program: tt.program, Bindings: echo("a", "fail")})
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantFail != "" {
				if res.Error == nil || !strings.Contains(res.Error.Error(), tt.wantFail) {
					t.Fatalf("Error = %v, want %q", res.Error, tt.wantFail)
				}
				return
			}
			if res.Error != nil {
				t.Fatalf("Error = %v", res.Error)
			}
			if got := logTexts(res); !slices.Equal(got, tt.wantLogs) {
				t.Errorf("logs = %q, want %q", got, tt.wantLogs)
			}
			if string(res.Value) != tt.wantValue {
				t.Errorf("value = %s, want %s", res.Value, tt.wantValue)
			}
		})
	}
}

func TestRunOutcomes(t *testing.T) {
	timeout := &backend.Failure{Kind: backend.FailureTimeout, Message: "maxWallMs"}
	tests := []struct {
		name      string
		prog      Program
		wantKind  backend.ValueKind
		wantValue string
		wantErr   *backend.Failure
	}{
		{name: "nil", prog: func(context.Context, *Env) (any, error) { return nil, nil }},
		{name: "raw JSON", prog: func(context.Context, *Env) (any, error) { return json.RawMessage(`[1]`), nil }, wantKind: backend.ValueJSON, wantValue: `[1]`},
		{name: "raw non-JSON", prog: func(context.Context, *Env) (any, error) { return json.RawMessage(`[1`), nil }, wantKind: backend.ValueInspect, wantValue: `"[1"`},
		{name: "marshalled", prog: func(context.Context, *Env) (any, error) { return map[string]int{"a": 1}, nil }, wantKind: backend.ValueJSON, wantValue: `{"a":1}`},
		{name: "not JSON", prog: func(context.Context, *Env) (any, error) { return func() {}, nil }, wantKind: backend.ValueInspect},
		{name: "failure as is", prog: func(context.Context, *Env) (any, error) { return nil, timeout }, wantErr: timeout},
		{name: "panic", prog: func(context.Context, *Env) (any, error) { panic("x") }, wantErr: &backend.Failure{Kind: backend.FailureExit, Message: "program panicked: x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := New(backend.TypeScript)
			rt.Handle("p", tt.prog)
			res, err := rt.Run(t.Context(), backend.RunRequest{Program: "p"})
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != nil {
				if res.Error == nil || *res.Error != *tt.wantErr {
					t.Fatalf("Error = %v, want %v", res.Error, tt.wantErr)
				}
				return
			}
			if res.Error != nil || res.ValueKind != tt.wantKind || tt.wantValue != "" && string(res.Value) != tt.wantValue {
				t.Fatalf("res = %+v", res)
			}
		})
	}
}

func TestRunAbortAndSettlement(t *testing.T) {
	rt := New(backend.TypeScript)
	started := make(chan struct{})
	var bindingCtx context.Context
	var mu sync.Mutex
	var streamed []string
	rt.Handle("wait", func(ctx context.Context, env *Env) (any, error) {
		env.Log("waiting")
		_, err := env.Go("block", nil).Wait()
		return nil, err
	})
	block := map[string]backend.BindingFunc{"block": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		bindingCtx = ctx
		close(started) // cancelled once it runs: a call cancelled first never starts
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	res, err := rt.Run(ctx, backend.RunRequest{
		Program:  "wait",
		Bindings: []backend.BindingNamespace{{Global: "tools", Functions: block}},
		Logs: func(e backend.LogEntry) {
			mu.Lock()
			streamed = append(streamed, e.Text)
			mu.Unlock()
		},
	})
	if err != nil || res.Error == nil || res.Error.Kind != backend.FailureAbort {
		t.Fatalf("res = %+v, %v; want abort", res, err)
	}
	if bindingCtx.Err() == nil {
		t.Errorf("binding context still live after settlement")
	}
	if !slices.Equal(streamed, []string{"waiting"}) || res.Stats.Calls != 1 {
		t.Errorf("streamed %q, calls %d", streamed, res.Stats.Calls)
	}
}

func TestRunMisuseAndClose(t *testing.T) {
	rt := New("lua")
	if rt.Language() != "lua" || rt.Isolation() != backend.IsolationInProcess {
		t.Errorf("descriptors = %s/%s", rt.Language(), rt.Isolation())
	}
	_, err := rt.Run(t.Context(), backend.RunRequest{Bindings: []backend.BindingNamespace{{Global: "console"}}})
	if !errors.Is(err, backend.ErrInvalidRequest) {
		t.Errorf("reserved namespace: %v", err)
	}
	res, err := rt.Run(t.Context(), backend.RunRequest{Program: "log hi", Bindings: echo("x")})
	if err != nil || res.Error != nil {
		t.Fatal(res, err)
	}
	if reqs := rt.Requests(); len(reqs) != 1 || reqs[0].Program != "log hi" {
		t.Errorf("requests = %+v", reqs)
	}
	v, err := (&Env{ctx: t.Context(), bindings: echo("x")}).CallIn("other", "x", nil)
	if err == nil || v != nil || !strings.Contains(err.Error(), `other["x"] is not a function`) {
		t.Errorf("CallIn unknown global = %s, %v", v, err)
	}
	if s, err := (&Env{ctx: t.Context(), bindings: echo("fail")}).CallText("fail", `{}`); err == nil || s != "" {
		t.Errorf("CallText on failure = %q, %v", s, err)
	}

	// Close waits for in-flight runs, bounded by its context.
	release := make(chan struct{})
	running := make(chan struct{})
	rt.Handle("hold", func(ctx context.Context, env *Env) (any, error) {
		close(running)
		<-release
		return nil, nil
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		rt.Run(context.Background(), backend.RunRequest{Program: "hold"})
	}()
	<-running
	short, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := rt.Close(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close with a run in flight = %v, want deadline exceeded", err)
	}
	close(release)
	<-done
	if err := rt.Close(t.Context()); err != nil {
		t.Errorf("Close = %v", err)
	}
	if _, err := rt.Run(t.Context(), backend.RunRequest{Program: "log x"}); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("Run after Close = %v", err)
	}
}

func TestText(t *testing.T) {
	for in, want := range map[string]string{`"a\n"`: "a\n", `null`: "null", `{"a":1}`: `{"a":1}`, ``: ``, `"x`: `"x`} {
		if got := Text(json.RawMessage(in)); got != want {
			t.Errorf("Text(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestBindingsRunOneAtATimeInIssueOrder: calls issued with Go while the
// first one blocks, and calls racing in from many goroutines, reach the
// bindings one at a time, each in the order it was issued.
func TestBindingsRunOneAtATimeInIssueOrder(t *testing.T) {
	rt := New(backend.Python)
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	running, overlap := 0, false
	fns := map[string]backend.BindingFunc{"work": func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		mu.Lock()
		running++
		overlap = overlap || running > 1
		order = append(order, string(args))
		mu.Unlock()
		if string(args) == "0" {
			<-release // everything else is issued while the first call runs
		}
		time.Sleep(100 * time.Microsecond) // give an overlap the chance to show
		mu.Lock()
		running--
		mu.Unlock()
		return args, nil
	}}
	const n = 16
	rt.Handle("all", func(ctx context.Context, env *Env) (any, error) {
		var ps []*Pending
		for i := range n {
			ps = append(ps, env.Go("work", json.RawMessage(strconv.Itoa(i))))
		}
		close(release)
		var out []string
		for _, p := range ps {
			v, err := p.Wait()
			if err != nil {
				return nil, err
			}
			out = append(out, string(v))
		}
		return out, nil
	})
	res, err := rt.Run(t.Context(), backend.RunRequest{Program: "all", Bindings: []backend.BindingNamespace{{Global: "tools", Functions: fns}}})
	if err != nil || res.Error != nil {
		t.Fatalf("res = %+v, %v", res, err)
	}
	var want []string
	for i := range n {
		want = append(want, strconv.Itoa(i))
	}
	if !slices.Equal(order, want) || overlap {
		t.Errorf("order %q (overlap %v), want %q one at a time", order, overlap, want)
	}
	if string(res.Value) != `["`+strings.Join(want, `","`)+`"]` {
		t.Errorf("value = %s", res.Value)
	}

	// Racing goroutines: whichever order they reach Call in is the order
	// they run in, never two at once.
	order, overlap = nil, false
	var issued []string
	rt.Handle("race", func(ctx context.Context, env *Env) (any, error) {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				env.Call("work", json.RawMessage(strconv.Itoa(i+1)))
			})
		}
		close(start)
		wg.Wait()
		return nil, nil
	})
	if _, err := rt.Run(t.Context(), backend.RunRequest{Program: "race", Bindings: []backend.BindingNamespace{{Global: "tools", Functions: fns}}}); err != nil {
		t.Fatal(err)
	}
	issued = slices.Clone(order)
	slices.Sort(issued)
	if len(order) != n || overlap || len(slices.Compact(issued)) != n {
		t.Errorf("raced calls ran %q (overlap %v), want %d distinct calls one at a time", order, overlap, n)
	}
}

// TestNothingStartsAfterSettlement: a program returns while one call runs
// and two more wait their turn: settlement cancels the running call, and
// the waiting ones reject without their binding being invoked.
func TestNothingStartsAfterSettlement(t *testing.T) {
	rt := New(backend.TypeScript)
	started := make(chan struct{})
	var invoked []string
	var mu sync.Mutex
	fns := map[string]backend.BindingFunc{"slow": func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		mu.Lock()
		invoked = append(invoked, string(args))
		mu.Unlock()
		if string(args) == "1" {
			close(started)
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	var ps []*Pending
	rt.Handle("dangling", func(ctx context.Context, env *Env) (any, error) {
		ps = append(ps, env.Go("slow", json.RawMessage("1")))
		<-started
		ps = append(ps, env.Go("slow", json.RawMessage("2")), env.Go("slow", json.RawMessage("3")))
		return "early", nil // settles with three calls pending
	})
	res, err := rt.Run(t.Context(), backend.RunRequest{Program: "dangling", Bindings: []backend.BindingNamespace{{Global: "tools", Functions: fns}}})
	if err != nil || res.Error != nil || res.Stats.Calls != 3 {
		t.Fatalf("res = %+v, %v", res, err)
	}
	if !slices.Equal(invoked, []string{"1"}) {
		t.Errorf("invoked %q, want only the first call", invoked)
	}
	if _, err := ps[0].Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("running call: %v, want its context cancelled", err)
	}
	for i, p := range ps[1:] {
		if _, err := p.Wait(); !errors.Is(err, ErrSettled) {
			t.Errorf("waiting call %d: %v, want ErrSettled", i+2, err)
		}
	}
}
