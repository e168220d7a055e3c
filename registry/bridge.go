package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/dsh-container/dsh-container/backend"
)

// bridge is the dispatch bridge of one run_code run. It turns every tool the
// scope can see into a binding; each binding call is normalized, numbered
// and executed through the registry's pipeline on the caller's goroutine.
//
// Call order has one owner: the runtime. backend.BindingFunc promises that a
// run's bindings are invoked one at a time, in the order the program issued
// the calls, and none after settlement; the bridge numbers calls in the
// order they arrive, so the numbers are the issue order. It keeps no queue
// of its own. What it does keep is the settle guard: once the run settles,
// or its context is cancelled, no call starts, and settle waits for the one
// in flight. A runtime that breaks the seam by invoking a binding while
// another runs gets that call rejected, unnumbered and unexecuted: two tool
// calls of one run never overlap. A call paused for approval (approval.go)
// is a call in flight: the calls issued after it wait in the runtime's
// queue, in order, until it is decided.
type bridge struct {
	r      *Registry
	parent Execution
	tools  []Tool
	// ctx is the run-scoped context: cancelled with the outer context and
	// when the run settles.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	n        int // sub-calls numbered so far
	settled  bool
	running  bool           // a sub-call is executing
	inflight sync.WaitGroup // the executing sub-call; Add only under mu, before settled

	// Event accounting, under mu.
	events, eventBytes, dropped int
	settleOnce                  sync.Once
	// forRun holds the tools an approver allowed for the rest of the run,
	// under mu.
	forRun map[string]bool
}

func (r *Registry) newBridge(ctx context.Context, parent Execution) *bridge {
	runCtx, cancel := context.WithCancel(ctx)
	b := &bridge{r: r, parent: parent, tools: r.visible(parent.Scope), cancel: cancel}
	b.ctx = context.WithValue(runCtx, bridgeKey{}, b)
	return b
}

// functions returns one binding per visible tool.
func (b *bridge) functions() map[string]backend.BindingFunc {
	fns := make(map[string]backend.BindingFunc, len(b.tools))
	for _, t := range b.tools {
		fns[t.Name] = func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			return b.call(ctx, t, args)
		}
	}
	return fns
}

// errOverlap rejects a binding invoked while another of its run executes:
// the runtime broke backend.BindingFunc's promise.
var errOverlap = errors.New("the code runtime invoked a binding while another was still running (bindings run one at a time); the call was not executed")

// call is one binding invocation from the program. It returns when the
// tool's execution has finished.
func (b *bridge) call(ctx context.Context, t Tool, raw json.RawMessage) (json.RawMessage, error) {
	args, err := NormalizeArguments(raw)
	if err != nil {
		return nil, fmt.Errorf("tools[%q]: %w", t.Name, err)
	}
	sc, err := b.begin(ctx, t, args)
	if err != nil {
		return nil, err
	}
	defer b.end()
	// The tool's context ends with the run or with the binding's own.
	cctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
	}
	sctx, span := startToolSpan(cctx, ctx, sc)
	sc.ctx = sctx
	v, err := b.dispatch(sc)
	endToolSpan(span, b.r.cfg.tracePayloads, sc, v, err)
	return v, err
}

type subCall struct {
	seq  int
	tool Tool
	exec Execution
	ctx  context.Context
}

// begin numbers a call and decides, under the lock, whether it may start.
// Nothing starts once the run has settled or its context, or the
// binding's, is done. The run's own context is checked, not only the
// binding's: cancelling a context marks it done before it cancels its
// children one by one, so a derived context may still look live for a
// moment after the run was cancelled (issue 18 item 17).
func (b *bridge) begin(ctx context.Context, t Tool, args json.RawMessage) (*subCall, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.settled:
		return nil, fmt.Errorf("tools[%q]: %w: %w", t.Name, ErrCallAbandoned, errRunSettled)
	case b.running:
		return nil, fmt.Errorf("tools[%q]: %w", t.Name, errOverlap)
	}
	b.n++
	sc := &subCall{
		seq:  b.n,
		tool: t,
		exec: Execution{
			CallID:      b.parent.CallID + ":code:" + strconv.Itoa(b.n),
			Name:        t.Name,
			Arguments:   args,
			Parent:      b.parent.CallID,
			Scope:       b.parent.Scope,
			Annotations: t.Annotations,
		},
	}
	var abandon error
	switch {
	case b.ctx.Err() != nil:
		abandon = context.Cause(b.ctx)
	case ctx.Err() != nil:
		abandon = context.Cause(ctx)
	}
	if abandon != nil {
		return nil, fmt.Errorf("tools[%q] (%s): %w: %w", t.Name, sc.exec.CallID, ErrCallAbandoned, abandon)
	}
	b.running = true
	b.inflight.Add(1)
	return sc, nil
}

// end marks the executing call finished.
func (b *bridge) end() {
	b.mu.Lock()
	b.running = false
	b.mu.Unlock()
	b.inflight.Done()
}

// settle ends the run: no call starts after it returns, and the call in
// flight, if any, has finished. Idempotent.
func (b *bridge) settle() {
	b.mu.Lock()
	b.settled = true
	b.mu.Unlock()
	b.cancel()
	b.inflight.Wait()
	b.settleOnce.Do(func() {
		b.mu.Lock()
		dropped := b.dropped
		b.mu.Unlock()
		if dropped > 0 {
			b.r.emit(Event{Type: EventCodeDispatchDropped, ParentCallID: b.parent.CallID, Dropped: dropped})
		}
	})
}

// emitBounded emits a sub-call's event unless the run's events are full.
func (b *bridge) emitBounded(ev Event) {
	if b.r.cfg.sink == nil {
		return
	}
	size := ev.size()
	b.mu.Lock()
	full := b.events >= MaxEventsPerRun || b.eventBytes+size > MaxEventBytesPerRun
	if full {
		b.dropped++
	} else {
		b.events++
		b.eventBytes += size
	}
	b.mu.Unlock()
	if !full {
		b.r.emit(ev)
	}
}

// dispatch runs one sub-call through the pipeline, emits its event and
// returns the binding's resolution or rejection.
func (b *bridge) dispatch(sc *subCall) (json.RawMessage, error) {
	res := b.r.pipeline(sc.ctx, sc.exec, sc.tool.run)
	text := res.Text()
	// A tool with an output schema resolves to its structured value (the
	// type the SDK declares); any other to its text.
	structured := !res.IsError && sc.tool.hasOutput()
	if structured && res.StructuredContent == nil {
		res.IsError = true
		text = fmt.Sprintf("tool %q declares an output schema but its result has no structured content", sc.exec.Name)
		if t := res.Text(); t != "" {
			text += "; its text: " + summarize(t, SummaryBytes)
		}
	}
	summary := text
	if structured && !res.IsError {
		summary = string(res.StructuredContent)
	}
	ev := Event{
		Type:         EventCodeDispatch,
		ParentCallID: sc.exec.Parent,
		CallID:       sc.exec.CallID,
		Seq:          sc.seq,
		Tool:         sc.exec.Name,
		IsError:      res.IsError,
		Summary:      summarize(summary, SummaryBytes),
	}
	ev.withArguments(sc.exec.Arguments)
	b.emitBounded(ev)
	if res.IsError {
		if text == "" {
			text = "tool call failed"
		}
		return nil, &bindingError{msg: text, err: res.Err}
	}
	if structured {
		// Canonical again: a post-execute hook may have replaced it.
		v, err := canonicalJSON(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("tool %q: structured content is not lossless JSON: %w", sc.exec.Name, err)
		}
		return v, nil
	}
	return encodeCanonical(text)
}

// bindingError is a sub-call's rejection: its text is what the program sees.
type bindingError struct {
	msg string
	err error
}

func (e *bindingError) Error() string { return e.msg }
func (e *bindingError) Unwrap() error { return e.err }

func (r *Registry) emit(ev Event) {
	if r.cfg.sink != nil {
		r.cfg.sink(ev)
	}
}
