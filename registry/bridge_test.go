package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

func TestRunCodeComposesTools(t *testing.T) {
	r, rt, ev := codeReg(t)
	mustRegister(t, r,
		Tool{Name: "add", Execute: func(_ context.Context, exec Execution) ([]Block, error) {
			var a struct{ A, B int }
			if err := json.Unmarshal(exec.Arguments, &a); err != nil {
				return nil, err
			}
			return []Block{TextBlock(fmt.Sprint(a.A + a.B))}, nil
		}},
		echoTool("shout"),
	)
	const program = "const sum = await tools.add({a: 1, b: 2}); ..."
	rt.Handle(program, func(ctx context.Context, env *registrytest.Env) (any, error) {
		sum, err := env.CallText("add", `{"b": 2, "a": 1}`)
		if err != nil {
			return nil, err
		}
		env.Log("sum is " + sum)
		loud, err := env.CallText("shout", `{"text":"`+sum+`"}`)
		if err != nil {
			return nil, err
		}
		return map[string]string{"result": loud}, nil
	})
	res := r.Execute(t.Context(), runCall("call-1", program))
	if res.IsError {
		t.Fatalf("run_code failed: %s", res.Text())
	}
	if want := "sum is 3\n" + `{"result":"shout {\"text\":\"3\"}"}`; res.Text() != want {
		t.Errorf("text = %q, want %q", res.Text(), want)
	}
	if res.CallID != "call-1" || res.Name != RunCode {
		t.Errorf("identity = %s/%s", res.CallID, res.Name)
	}
	if res.CodeRun == nil || res.CodeRun.ValueKind != backend.ValueJSON || len(res.CodeRun.Logs) != 1 || res.CodeRun.Stats.Calls != 2 {
		t.Errorf("CodeRun = %+v", res.CodeRun)
	}
	if res.Card == nil || *res.Card != (Card{Type: CardGeneric, Content: res.Text()}) {
		t.Errorf("result card = %+v", res.Card)
	}
	want := []Event{
		{Type: EventCodeDispatch, ParentCallID: "call-1", CallID: "call-1:code:1", Seq: 1, Tool: "add", Arguments: json.RawMessage(`{"a":1,"b":2}`), Summary: "3"},
		{Type: EventCodeDispatch, ParentCallID: "call-1", CallID: "call-1:code:2", Seq: 2, Tool: "shout", Arguments: json.RawMessage(`{"text":"3"}`), Summary: `shout {"text":"3"}`},
	}
	assertEvents(t, ev.all(), want)
	req := rt.Requests()[0]
	if req.Program != program || len(req.Bindings) != 1 || req.Bindings[0].Global != "tools" {
		t.Errorf("request = %+v", req)
	}
}

func assertEvents(t *testing.T, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if string(g.Arguments) != string(w.Arguments) {
			t.Errorf("event %d arguments = %s, want %s", i, g.Arguments, w.Arguments)
		}
		g.Arguments, w.Arguments = nil, nil
		if !reflect.DeepEqual(g, w) {
			t.Errorf("event %d = %+v, want %+v", i, g, w)
		}
	}
}

// TestRunCodeSubmissionOrder issues calls concurrently (Promise.all) while
// the first is still executing: the runtime runs them one at a time, in
// issue order, and the registry numbers them 1..n in that order.
func TestRunCodeSubmissionOrder(t *testing.T) {
	r, rt, ev := codeReg(t)
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	var running, maxRunning atomic.Int32
	mustRegister(t, r, Tool{Name: "work", Execute: func(ctx context.Context, exec Execution) ([]Block, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		mu.Lock()
		order = append(order, exec.CallID+"="+string(exec.Arguments))
		mu.Unlock()
		if exec.CallID == "run:code:1" {
			<-release // everything else queues behind the first call
		}
		time.Sleep(time.Millisecond) // give an overlap the chance to show
		return []Block{TextBlock(string(exec.Arguments))}, nil
	}})
	const n = 8
	rt.Handle("Promise.all", func(ctx context.Context, env *registrytest.Env) (any, error) {
		var ps []*registrytest.Pending
		for i := range n {
			ps = append(ps, env.Go("work", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))))
		}
		close(release)
		var out []string
		for _, p := range ps {
			v, err := p.Wait()
			if err != nil {
				return nil, err
			}
			out = append(out, registrytest.Text(v))
		}
		return out, nil
	})
	res := r.Execute(t.Context(), runCall("run", "Promise.all"))
	if res.IsError {
		t.Fatalf("run_code: %s", res.Text())
	}
	var want []string
	var wantEvents []Event
	for i := range n {
		id := fmt.Sprintf("run:code:%d", i+1)
		args := fmt.Sprintf(`{"i":%d}`, i)
		want = append(want, id+"="+args)
		wantEvents = append(wantEvents, Event{Type: EventCodeDispatch, ParentCallID: "run", CallID: id, Seq: i + 1, Tool: "work", Arguments: json.RawMessage(args), Summary: args})
	}
	if !slices.Equal(order, want) {
		t.Errorf("execution order = %q, want %q", order, want)
	}
	if m := maxRunning.Load(); m != 1 {
		t.Errorf("%d sub-calls ran at once, want 1", m)
	}
	assertEvents(t, ev.all(), wantEvents)
}

// TestRunCodeSerializesUnderContention fires many calls at once without any
// coordination: whatever order the runtime issues them in, they execute one
// at a time and in id order, every id once. A runtime that breaks the seam
// by invoking a binding while another runs gets that call rejected
// unexecuted and unnumbered: the registry never runs two at once.
func TestRunCodeSerializesUnderContention(t *testing.T) {
	t.Run("runtime", func(t *testing.T) {
		r, rt, ev := codeReg(t)
		var mu sync.Mutex
		var ids []string
		var running atomic.Int32
		var overlap atomic.Bool
		mustRegister(t, r, Tool{Name: "work", Execute: func(ctx context.Context, exec Execution) ([]Block, error) {
			if running.Add(1) > 1 {
				overlap.Store(true)
			}
			defer running.Add(-1)
			mu.Lock()
			ids = append(ids, exec.CallID)
			mu.Unlock()
			return []Block{TextBlock("ok")}, nil
		}})
		const n = 64
		rt.Handle("burst", func(ctx context.Context, env *registrytest.Env) (any, error) {
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					env.Call("work", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)))
				})
			}
			close(start)
			wg.Wait()
			return nil, nil
		})
		if res := r.Execute(t.Context(), runCall("p", "burst")); res.IsError {
			t.Fatalf("run_code: %s", res.Text())
		}
		if overlap.Load() {
			t.Errorf("sub-calls overlapped")
		}
		for i, id := range ids {
			if want := fmt.Sprintf("p:code:%d", i+1); id != want {
				t.Fatalf("execution %d had id %s, want %s (all: %q)", i, id, want, ids)
			}
		}
		if len(ids) != n || len(ev.all()) != n {
			t.Errorf("%d executions, %d events, want %d", len(ids), len(ev.all()), n)
		}
	})
	t.Run("seam broken", func(t *testing.T) {
		started, release := make(chan struct{}), make(chan struct{})
		var overlapErr, firstErr, thirdErr error
		rt := funcRuntime{lang: backend.TypeScript, run: func(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
			fn := req.Bindings[0].Functions["work"]
			first := make(chan struct{})
			go func() {
				defer close(first)
				_, firstErr = fn(ctx, json.RawMessage(`{"n":1}`))
			}()
			<-started
			_, overlapErr = fn(ctx, json.RawMessage(`{"n":2}`)) // while the first runs
			close(release)
			<-first
			_, thirdErr = fn(ctx, json.RawMessage(`{"n":3}`))
			return backend.RunResult{}, nil
		}}
		ev := &events{}
		r := newReg(t, WithMode(ModeCode), WithRuntime(rt), WithEventSink(ev.sink))
		var ran []string
		mustRegister(t, r, Tool{Name: "work", Execute: func(_ context.Context, exec Execution) ([]Block, error) {
			ran = append(ran, exec.CallID+"="+string(exec.Arguments))
			if exec.CallID == "p:code:1" {
				close(started)
				<-release
			}
			return nil, nil
		}})
		if res := r.Execute(t.Context(), runCall("p", "x")); res.IsError {
			t.Fatalf("run_code: %s", res.Text())
		}
		if !errors.Is(overlapErr, errOverlap) || !strings.Contains(overlapErr.Error(), "one at a time") {
			t.Errorf("overlapping call: %v, want it rejected", overlapErr)
		}
		if firstErr != nil || thirdErr != nil {
			t.Errorf("first %v, third %v; want both to resolve", firstErr, thirdErr)
		}
		if want := []string{`p:code:1={"n":1}`, `p:code:2={"n":3}`}; !slices.Equal(ran, want) {
			t.Errorf("ran %q, want %q", ran, want)
		}
		if len(ev.all()) != 2 {
			t.Errorf("events %+v, want the two calls that ran", ev.all())
		}
	})
}

// TestRunCodeConcurrentRuns: two runs on one registry number independently.
func TestRunCodeConcurrentRuns(t *testing.T) {
	r, rt, _ := codeReg(t)
	var mu sync.Mutex
	seen := map[string][]string{}
	mustRegister(t, r, Tool{Name: "t", Execute: func(_ context.Context, exec Execution) ([]Block, error) {
		mu.Lock()
		defer mu.Unlock()
		seen[exec.Parent] = append(seen[exec.Parent], exec.CallID)
		return nil, nil
	}})
	prog := "call t\ncall t\ncall t"
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b", "c"} {
		wg.Go(func() {
			if res := r.Execute(t.Context(), runCall(id, prog)); res.IsError {
				t.Errorf("%s: %s", id, res.Text())
			}
		})
	}
	wg.Wait()
	_ = rt
	for _, id := range []string{"a", "b", "c"} {
		want := []string{id + ":code:1", id + ":code:2", id + ":code:3"}
		if !slices.Equal(seen[id], want) {
			t.Errorf("run %s ids = %q, want %q", id, seen[id], want)
		}
	}
}

// TestRunCodeOuterCancellation cancels the outer context while the first
// sub-call runs and two more are queued: the running call sees the
// cancellation, the queued ones never start and reject, the run reports an
// abort, and only the call that ran is logged.
func TestRunCodeOuterCancellation(t *testing.T) {
	r, rt, ev := codeReg(t)
	started := make(chan struct{})
	var executed atomic.Int32
	mustRegister(t, r, Tool{Name: "slow", Execute: func(ctx context.Context, exec Execution) ([]Block, error) {
		if executed.Add(1) == 1 {
			close(started)
		}
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}})
	ctx, cancel := context.WithCancel(t.Context())
	var rejections []error
	rt.Handle("fan-out", func(pctx context.Context, env *registrytest.Env) (any, error) {
		ps := []*registrytest.Pending{env.Go("slow", nil)}
		<-started
		ps = append(ps, env.Go("slow", nil), env.Go("slow", nil))
		cancel()
		for _, p := range ps {
			_, err := p.Wait()
			rejections = append(rejections, err)
		}
		return nil, pctx.Err()
	})
	res := r.Execute(ctx, runCall("outer", "fan-out"))
	var failed *CodeRunFailedError
	if !res.IsError || !errors.As(res.Err, &failed) || failed.Kind != backend.FailureAbort {
		t.Fatalf("res = %q (%v), want an abort CodeRunFailedError", res.Text(), res.Err)
	}
	if n := executed.Load(); n != 1 {
		t.Errorf("%d sub-calls executed, want 1", n)
	}
	for i, err := range rejections {
		if err == nil {
			t.Errorf("call %d resolved after cancellation", i+1)
		}
	}
	got := ev.all()
	if len(got) != 1 || got[0].CallID != "outer:code:1" || !got[0].IsError || !strings.Contains(got[0].Summary, "canceled") {
		t.Errorf("events = %+v, want one error event for the running call", got)
	}
	// A runtime that dequeues a call after the run was cancelled and
	// invokes it anyway: the registry's guard rejects it unexecuted, even
	// when the binding's own context is still live.
	t.Run("late runtime", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var lateErr error
		rt := funcRuntime{lang: backend.Python, run: func(rctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
			fn := req.Bindings[0].Functions["slow"]
			fn(context.Background(), nil)
			_, lateErr = fn(context.Background(), nil)
			return backend.RunResult{Error: &backend.Failure{Kind: backend.FailureAbort, Message: "cancelled"}}, nil
		}}
		r := newReg(t, WithMode(ModeCode), WithRuntime(rt))
		var executed atomic.Int32
		mustRegister(t, r, Tool{Name: "slow", Execute: func(ctx context.Context, exec Execution) ([]Block, error) {
			executed.Add(1)
			cancel()
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}})
		r.Execute(ctx, runCall("outer", "x"))
		if n := executed.Load(); n != 1 {
			t.Errorf("%d sub-calls executed, want 1", n)
		}
		if !errors.Is(lateErr, ErrCallAbandoned) || !errors.Is(lateErr, context.Canceled) {
			t.Errorf("late call: %v, want abandoned with the run's cancellation", lateErr)
		}
	})
}

// TestRunCodeSettlementAbandonsQueue uses a runtime that returns from Run
// while its queue still holds calls, and goes on invoking them after (a
// broken runtime that neither waits for its binding calls nor stops at
// settlement): settlement cancels the running call, Execute returns only
// after it finished, and the calls invoked after settlement reject without
// executing.
func TestRunCodeSettlementAbandonsQueue(t *testing.T) {
	started := make(chan struct{})
	var finished atomic.Bool
	var callers sync.WaitGroup
	errs := make([]error, 3)
	rt := funcRuntime{lang: backend.TypeScript, run: func(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
		fn := req.Bindings[0].Functions["slow"]
		callers.Go(func() {
			for i := range errs {
				_, errs[i] = fn(context.Background(), nil)
			}
		})
		<-started
		return backend.RunResult{}, nil // settles with three calls pending
	}}
	ev := &events{}
	r := newReg(t, WithMode(ModeCode), WithRuntime(rt), WithEventSink(ev.sink))
	var executed atomic.Int32
	mustRegister(t, r, Tool{Name: "slow", Execute: func(ctx context.Context, exec Execution) ([]Block, error) {
		executed.Add(1)
		close(started)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // cleanup work that settlement must wait for
		finished.Store(true)
		return nil, ctx.Err()
	}})
	res := r.Execute(t.Context(), runCall("p", "x"))
	if !finished.Load() {
		t.Errorf("Execute returned before the in-flight sub-call finished")
	}
	callers.Wait()
	if res.IsError {
		t.Errorf("run_code: %s", res.Text())
	}
	if n := executed.Load(); n != 1 {
		t.Errorf("%d sub-calls executed, want 1", n)
	}
	if errs[0] == nil {
		t.Errorf("the in-flight call resolved; want the cancellation")
	}
	for _, err := range errs[1:] {
		if !errors.Is(err, ErrCallAbandoned) || !strings.Contains(err.Error(), "settled") {
			t.Errorf("queued call error = %v, want abandoned at settlement", err)
		}
	}
	if got := ev.all(); len(got) != 1 {
		t.Errorf("events = %+v, want only the call that ran", got)
	}
}

// TestRunCodeNothingStartsAfterSettlement calls a binding after run_code
// returned: it rejects at once, nothing executes, nothing is logged.
func TestRunCodeNothingStartsAfterSettlement(t *testing.T) {
	r, rt, ev := codeReg(t)
	var executed atomic.Int32
	mustRegister(t, r, Tool{Name: "t", Execute: func(context.Context, Execution) ([]Block, error) {
		executed.Add(1)
		return nil, nil
	}})
	if res := r.Execute(t.Context(), runCall("p", "call t")); res.IsError {
		t.Fatal(res.Text())
	}
	late := rt.Requests()[0].Bindings[0].Functions["t"]
	if _, err := late(context.Background(), json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "settled") {
		t.Errorf("late call error = %v, want settled", err)
	}
	if executed.Load() != 1 || len(ev.all()) != 1 {
		t.Errorf("executed %d, events %d; want 1 and 1", executed.Load(), len(ev.all()))
	}
}

// TestRunCodeBindingContextCancelled: the runtime gives up on a call (its
// binding context ends) before invoking it: that call is abandoned
// unexecuted, numbered, and later ones run. A binding context that ends
// while its call runs cancels the tool's context.
func TestRunCodeBindingContextCancelled(t *testing.T) {
	var errs [4]error
	midStarted := make(chan struct{})
	rt := funcRuntime{lang: backend.Python, run: func(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
		fn := req.Bindings[0].Functions["t"]
		_, errs[0] = fn(ctx, nil)
		gone, cancel := context.WithCancel(ctx)
		cancel()
		_, errs[1] = fn(gone, nil) // given up on before it started
		_, errs[2] = fn(ctx, nil)
		mid, cancelMid := context.WithCancel(ctx)
		defer cancelMid()
		go func() {
			<-midStarted
			cancelMid() // given up on while it runs
		}()
		_, errs[3] = fn(mid, json.RawMessage(`{"cancel":true}`))
		return backend.RunResult{}, nil
	}}
	r := newReg(t, WithMode(ModeBoth), WithRuntime(rt))
	var ran []string // calls run one at a time, on the runtime's goroutine
	mustRegister(t, r, Tool{Name: "t", Execute: func(ctx context.Context, exec Execution) ([]Block, error) {
		ran = append(ran, exec.CallID)
		if string(exec.Arguments) == `{"cancel":true}` {
			close(midStarted)
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-time.After(10 * time.Second):
				return nil, errors.New("the binding's cancellation did not reach the tool")
			}
		}
		return nil, nil
	}})
	res := r.Execute(t.Context(), runCall("p", "x"))
	if res.IsError {
		t.Fatal(res.Text())
	}
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("errs = %v, want calls 1 and 3 to resolve", errs)
	}
	if !errors.Is(errs[1], ErrCallAbandoned) || !errors.Is(errs[1], context.Canceled) {
		t.Errorf("call 2: %v, want abandoned with its context's cause", errs[1])
	}
	if errs[3] == nil || !strings.Contains(errs[3].Error(), "canceled") {
		t.Errorf("call 4: %v, want the tool's cancellation", errs[3])
	}
	if want := []string{"p:code:1", "p:code:3", "p:code:4"}; !slices.Equal(ran, want) {
		t.Errorf("ran %q, want %q", ran, want)
	}
}

// A run's events are bounded: long arguments become a preview that keeps
// the event valid JSON, and past MaxEventsPerRun or MaxEventBytesPerRun the
// run's sub-calls still execute but their events are counted in one
// closing EventCodeDispatchDropped event (issue 10, class 4).
func TestRunCodeEventsAreBounded(t *testing.T) {
	for _, tc := range []struct {
		name        string
		calls       int
		argBytes    int
		wantEvents  int // sub-call events
		wantDropped int
	}{
		{"few small calls", 10, 10, 10, 0},
		{"one long argument", 1, 100 << 10, 1, 0},
		{"more calls than the event cap", MaxEventsPerRun + 250, 10, MaxEventsPerRun, 250},
		{"long arguments pass the byte cap", 600, 8 << 10, MaxEventBytesPerRun / (EventArgumentBytes + 3 + 200), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, rt, ev := codeReg(t)
			var executed atomic.Int32
			mustRegister(t, r, Tool{Name: "work", Execute: func(ctx context.Context, exec Execution) ([]Block, error) {
				executed.Add(1)
				return []Block{TextBlock("ok")}, nil
			}})
			arg, _ := json.Marshal(map[string]string{"s": strings.Repeat("x", tc.argBytes)})
			rt.Handle("many", func(ctx context.Context, env *registrytest.Env) (any, error) {
				for i := 0; i < tc.calls; i++ {
					if _, err := env.CallText("work", string(arg)); err != nil {
						return nil, err
					}
				}
				return nil, nil
			})
			res := r.Execute(t.Context(), runCall("run", "many"))
			if res.IsError {
				t.Fatalf("run_code: %s", res.Text())
			}
			if int(executed.Load()) != tc.calls {
				t.Fatalf("%d of %d calls executed", executed.Load(), tc.calls)
			}
			events := ev.all()
			var sub, bytes, dropped int
			for i, e := range events {
				b, err := json.Marshal(e)
				if err != nil || !json.Valid(b) {
					t.Fatalf("event %d does not encode: %v", i, err)
				}
				switch e.Type {
				case EventCodeDispatch:
					sub++
					bytes += len(b)
					if len(e.Arguments) > EventArgumentBytes {
						t.Fatalf("event %d carries %d bytes of arguments", i, len(e.Arguments))
					}
					if len(arg) > EventArgumentBytes {
						if !e.ArgumentsTruncated || e.Arguments != nil || e.ArgumentsBytes != len(arg) ||
							len(e.ArgumentsPreview) > EventArgumentBytes+len("…") || !strings.HasPrefix(string(arg), strings.TrimSuffix(e.ArgumentsPreview, "…")) {
							t.Fatalf("event %d: truncated %v, %d bytes of arguments, preview %d bytes, argumentsBytes %d", i, e.ArgumentsTruncated, len(e.Arguments), len(e.ArgumentsPreview), e.ArgumentsBytes)
						}
					} else if string(e.Arguments) != string(arg) || e.ArgumentsTruncated {
						t.Fatalf("event %d: arguments %s", i, e.Arguments)
					}
				case EventCodeDispatchDropped:
					if i != len(events)-1 || e.ParentCallID != "run" {
						t.Fatalf("dropped event %+v at %d of %d", e, i, len(events))
					}
					dropped = e.Dropped
				}
			}
			wantDropped := tc.wantDropped
			if tc.name == "long arguments pass the byte cap" {
				// However the sizes are estimated, the byte cap held and
				// every call is accounted for.
				if sub < tc.wantEvents/2 || sub >= tc.calls {
					t.Fatalf("%d events", sub)
				}
				wantDropped = tc.calls - sub
			} else if sub != tc.wantEvents {
				t.Fatalf("%d sub-call events, want %d", sub, tc.wantEvents)
			}
			if dropped != wantDropped {
				t.Fatalf("dropped %d, want %d", dropped, wantDropped)
			}
			if bytes > MaxEventBytesPerRun {
				t.Fatalf("events hold %d bytes of JSON, over the %d cap", bytes, MaxEventBytesPerRun)
			}
		})
	}
}

// TestRunCodeCancelledRunIsAnAbort: a run whose caller cancelled it is an
// abort even when the runtime reports the program's exception — a
// sub-call's context can be cancelled before the runtime's, its
// rejection thrown, and the runtime not yet see its own context done
// (the session test's flake: "0 aborted runs of 1"). A budget outcome
// stays what it was, and a run that failed with its caller live stays
// an exception.
func TestRunCodeCancelledRunIsAnAbort(t *testing.T) {
	for _, c := range []struct {
		name   string
		cancel bool
		kind   backend.FailureKind
		want   backend.FailureKind
	}{
		{"exception after cancel", true, backend.FailureException, backend.FailureAbort},
		{"exit after cancel", true, backend.FailureExit, backend.FailureAbort},
		{"timeout after cancel", true, backend.FailureTimeout, backend.FailureTimeout},
		{"exception, caller live", false, backend.FailureException, backend.FailureException},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			rt := funcRuntime{lang: backend.Python, run: func(rctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
				if c.cancel {
					cancel(errors.New("the client broke the protocol"))
				}
				return backend.RunResult{Error: &backend.Failure{Kind: c.kind, Message: "Error: tools.greet failed"}}, nil
			}}
			r := newReg(t, WithMode(ModeCode), WithRuntime(rt))
			res := r.Execute(ctx, runCall("outer", "x"))
			var failed *CodeRunFailedError
			if !errors.As(res.Err, &failed) || failed.Kind != c.want {
				t.Fatalf("res = %q (%v), want a %s CodeRunFailedError", res.Text(), res.Err, c.want)
			}
			if c.want == backend.FailureAbort && (!strings.Contains(failed.Message, "the client broke the protocol") || res.CodeRun.Error.Kind != backend.FailureAbort) {
				t.Errorf("abort = %q, CodeRun kind %s: want the caller's cause, in the run result too", failed.Message, res.CodeRun.Error.Kind)
			}
		})
	}
}
