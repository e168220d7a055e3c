package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/dsh-container/dsh-container/backend"
)

// bridge is the dispatch bridge of one run_code run. It turns every tool the
// scope can see into a binding; each binding call is normalized, numbered
// and queued; one dispatch goroutine executes the queue in submission order
// through the registry's pipeline, so concurrent calls from the program run
// one at a time. Settlement cancels the run-scoped context, abandons queued
// calls and waits for the dispatch goroutine: nothing starts or survives
// after it.
type bridge struct {
	r      *Registry
	parent Execution
	tools  []Tool
	// ctx is the run-scoped context: cancelled with the outer context and
	// when the run settles.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	n       int // sub-calls submitted so far
	settled bool
	queue   []*subCall

	wake chan struct{} // capacity 1: "the queue or settled changed"
	done chan struct{} // closed when the dispatch goroutine exits

	// Event accounting, touched only by the dispatch goroutine and, after
	// it exits, by settle.
	events, eventBytes, dropped int
	settleOnce                  sync.Once
}

type subCall struct {
	seq  int
	tool Tool
	exec Execution
	// ctx is cancelled when the run settles or the binding's caller gives
	// up; cancel must be called once the call is finished.
	ctx    context.Context
	cancel context.CancelFunc
	reply  chan subReply // capacity 1
}

type subReply struct {
	value json.RawMessage
	err   error
}

func (r *Registry) newBridge(ctx context.Context, parent Execution) *bridge {
	runCtx, cancel := context.WithCancel(ctx)
	b := &bridge{
		r: r, parent: parent, tools: r.visible(parent.Scope),
		ctx: runCtx, cancel: cancel,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	go b.dispatchLoop()
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

// call is one binding invocation from the program.
func (b *bridge) call(ctx context.Context, t Tool, raw json.RawMessage) (json.RawMessage, error) {
	args, err := NormalizeArguments(raw)
	if err != nil {
		return nil, fmt.Errorf("tools[%q]: %w", t.Name, err)
	}
	sc, err := b.submit(t, args)
	if err != nil {
		return nil, fmt.Errorf("tools[%q]: %w", t.Name, err)
	}
	select {
	case rep := <-sc.reply:
		return rep.value, rep.err
	case <-ctx.Done():
		sc.cancel() // a queued call is abandoned, a running one cancelled
		return nil, fmt.Errorf("tools[%q]: %w", t.Name, context.Cause(ctx))
	}
}

// submit numbers a call and queues it.
func (b *bridge) submit(t Tool, args json.RawMessage) (*subCall, error) {
	b.mu.Lock()
	if b.settled {
		b.mu.Unlock()
		return nil, errRunSettled
	}
	b.n++
	ctx, cancel := context.WithCancel(b.ctx)
	sc := &subCall{
		seq:  b.n,
		tool: t,
		exec: Execution{
			CallID:    fmt.Sprintf("%s:code:%d", b.parent.CallID, b.n),
			Name:      t.Name,
			Arguments: args,
			Parent:    b.parent.CallID,
			Scope:     b.parent.Scope,
		},
		ctx: ctx, cancel: cancel,
		reply: make(chan subReply, 1),
	}
	b.queue = append(b.queue, sc)
	b.mu.Unlock()
	b.signal()
	if hook := b.r.testHookSubmitted; hook != nil {
		hook(sc.exec.CallID)
	}
	return sc, nil
}

func (b *bridge) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// settle ends the run: no call starts after it returns, queued calls are
// abandoned, and the dispatch goroutine has exited. Idempotent.
func (b *bridge) settle() {
	b.mu.Lock()
	b.settled = true
	b.mu.Unlock()
	b.cancel()
	b.signal()
	<-b.done
	b.settleOnce.Do(func() {
		if b.dropped > 0 {
			b.r.emit(Event{Type: EventCodeDispatchDropped, ParentCallID: b.parent.CallID, Dropped: b.dropped})
		}
	})
}

// emitBounded emits a sub-call's event unless the run's events are full.
func (b *bridge) emitBounded(ev Event) {
	if b.r.cfg.sink == nil {
		return
	}
	size := ev.size()
	if b.events >= MaxEventsPerRun || b.eventBytes+size > MaxEventBytesPerRun {
		b.dropped++
		return
	}
	b.events++
	b.eventBytes += size
	b.r.emit(ev)
}

// dispatchLoop executes queued calls one at a time, in submission order.
func (b *bridge) dispatchLoop() {
	defer close(b.done)
	for {
		sc, abandon, ok := b.next()
		if !ok {
			return
		}
		if abandon != nil {
			sc.reply <- subReply{err: fmt.Errorf("tools[%q] (%s): %w: %w", sc.exec.Name, sc.exec.CallID, ErrCallAbandoned, abandon)}
			sc.cancel()
			continue
		}
		b.dispatch(sc)
	}
}

// next takes the oldest queued call, deciding under the lock whether it may
// start. ok is false once the run has settled and the queue is empty.
func (b *bridge) next() (sc *subCall, abandon error, ok bool) {
	for {
		b.mu.Lock()
		if len(b.queue) > 0 {
			sc = b.queue[0]
			b.queue[0] = nil
			b.queue = b.queue[1:]
			// The run's own context is checked, not only the call's:
			// cancelling a context marks it done before it cancels its
			// children one by one, so the call's context may still look
			// live for a moment after the run was cancelled — long enough
			// for the call before it to return and this one to start.
			switch {
			case b.settled:
				abandon = errRunSettled
			case b.ctx.Err() != nil:
				abandon = context.Cause(b.ctx)
			case sc.ctx.Err() != nil:
				abandon = context.Cause(sc.ctx)
			}
			b.mu.Unlock()
			return sc, abandon, true
		}
		settled := b.settled
		b.mu.Unlock()
		if settled {
			return nil, nil, false
		}
		<-b.wake
	}
}

// dispatch runs one sub-call through the pipeline, emits its event and
// resolves or rejects the binding.
func (b *bridge) dispatch(sc *subCall) {
	res := b.r.pipeline(sc.ctx, sc.exec, sc.tool.run)
	sc.cancel()
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
		sc.reply <- subReply{err: &bindingError{msg: text, err: res.Err}}
		return
	}
	if structured {
		// Canonical again: a post-execute hook may have replaced it.
		v, err := canonicalJSON(res.StructuredContent)
		if err != nil {
			err = fmt.Errorf("tool %q: structured content is not lossless JSON: %w", sc.exec.Name, err)
		}
		sc.reply <- subReply{value: v, err: err}
		return
	}
	v, err := encodeCanonical(text)
	sc.reply <- subReply{value: v, err: err}
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
