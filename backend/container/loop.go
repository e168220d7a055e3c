package container

// The per-run loop: send the program, serve the runner's frames, dispatch
// bindings one at a time in issue order, write replies with backpressure,
// and settle.
//
// This dispatcher is the one owner of a run's call order (the registry
// keeps none of its own). A binding call takes two goroutine hops: the
// reader decodes the frame and hands it to the run loop, the loop queues it
// for the dispatcher, and the dispatcher invokes the binding on its own
// goroutine and writes the result to the connection itself. A runner that
// is slow to read holds the dispatcher in that write (at most writeTimeout),
// and with it every later call: the queue fills and further calls are
// rejected, while the run loop goes on reading frames and enforcing
// budgets.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/portproto"
)

// execute sends the program and serves the run until it settles. It
// returns an error, before the program is sent, only when the container's
// CPU time cannot be read: a compute budget is never left unenforced.
// maxBacklog bounds the replies a run's loop holds for a runner that is
// not reading them yet (small frames: rejections, egress acks), ≈ 150
// bytes each.
const maxBacklog = 4096

func (sb *sandbox) execute(ctx context.Context, prep prepared, req backend.RunRequest, l Limits, log *slog.Logger) (backend.RunResult, error) {
	bctx, cancel := context.WithTimeout(ctx, meterLoss)
	base, err := sb.cpu.CPUUsage(bctx, sb.id)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return backend.RunResult{Error: abortFailure(ctx)}, nil
		}
		return backend.RunResult{}, fmt.Errorf("%w: cannot read the container's CPU time, so its compute budget could not be enforced; the program was not started: %w", errdefs.ErrUnavailable, err)
	}
	sb.out.mu.Lock()
	sb.out.onEntry = req.Logs
	sb.out.mu.Unlock()
	var res backend.RunResult

	funcs := map[string]map[string]backend.BindingFunc{}
	run := portproto.Run{
		Type: portproto.TypeRun, Version: portproto.Version,
		Program: prep.program, SourceMap: prep.sourceMap,
		Bindings: []portproto.Binding{},
		Limits:   portproto.Limits{MaxLogBytes: l.LogBytes, MaxValueBytes: l.ValueBytes, MaxFrameBytes: l.FrameBytes},
	}
	for _, ns := range req.Bindings {
		funcs[ns.Global] = ns.Functions
		names := make([]string, 0, len(ns.Functions))
		for name := range ns.Functions {
			names = append(names, name)
		}
		slices.Sort(names)
		run.Bindings = append(run.Bindings, portproto.Binding{Global: ns.Global, Functions: names})
	}

	sb.callCtx, sb.cancelCalls = context.WithCancel(context.WithoutCancel(ctx))
	defer sb.settle()
	var tun *tunnels
	if sb.egress != nil {
		tun = newTunnels(ctx, sb, sb.egress, l.FrameBytes, log)
		run.Egress = tun.runEgress()
	}

	start := time.Now()
	wall := time.NewTimer(l.WallTime)
	defer wall.Stop()
	// CPU is sampled off the run loop: a slow sample (the stats API) must
	// never hold up frames.
	cpuMeter := sb.startMeter(ctx, base, l.ComputeTime)
	defer cpuMeter.stop()
	// Every frame the run loop sends goes through one writer goroutine, so
	// the loop never blocks on a runner that stops reading (see backlog). The
	// dispatcher writes binding results itself (see reply).
	sb.startWriter(2*l.PendingCalls + 2)
	sb.post(run)
	mark(ctx, func(t *RunTrace) *time.Time { return &t.Sent })

	var lastID int64
	// One dispatcher invokes the run's bindings one at a time, in the
	// order the program issued the calls. pending bounds the calls waiting
	// or running, queuedBytes the bytes of their arguments.
	queue := make(chan queuedCall, l.PendingCalls)
	pending := make(chan struct{}, l.PendingCalls)
	var queuedBytes atomic.Int64
	defer close(queue)
	sb.calls.Add(1)
	go sb.dispatch(queue, pending, &queuedBytes)

	finish := func(f *backend.Failure) backend.RunResult {
		// Settle first: from here on no queued binding starts.
		sb.settle()
		res.Stats.Wall = time.Since(start)
		res.Stats.CPU = cpuMeter.stop()
		if f != nil {
			res.Error = f
			res.Value, res.ValueKind, res.ValueTruncated = nil, backend.ValueNone, false
		}
		return res
	}
	// backlog holds replies waiting for room in the outbox, oldest first.
	// The loop keeps reading frames while it holds fewer than maxBacklog:
	// a runner whose sends block its reads (Python's sync websockets holds
	// one mutex for both) would otherwise deadlock with a loop that
	// stopped reading while the runner stopped reading its replies. Past
	// maxBacklog the loop reads no frames: a runner that sends far faster
	// than it reads is slowed down, and budgets keep running.
	var backlog []any
	reply := func(r any) {
		if len(backlog) == 0 && sb.post(r) {
			return
		}
		backlog = append(backlog, r)
	}
	// handle applies one frame; it reports whether the run settled.
	handle := func(fr frame) (backend.RunResult, bool) {
		if fr.err != nil {
			return finish(sb.lostRunner(ctx, fr.err)), true
		}
		switch m := fr.msg.(type) {
		case *portproto.Call:
			res.Stats.Calls++
			if m.ID <= lastID {
				return finish(&backend.Failure{Kind: backend.FailureExit, Message: fmt.Sprintf("runner broke protocol: call id %d after %d (ids must increase)", m.ID, lastID)}), true
			}
			lastID = m.ID
			fn := funcs[m.Global][m.Name]
			var reject string
			switch size := int64(len(m.Args)); {
			case fn == nil:
				reject = fmt.Sprintf("unknown binding %s[%q]", m.Global, m.Name)
			case queuedBytes.Load()+size > int64(l.FrameBytes):
				reject = fmt.Sprintf("too many bytes of arguments waiting (limit %d)", l.FrameBytes)
			default:
				select {
				case pending <- struct{}{}:
					queuedBytes.Add(size)
					queue <- queuedCall{m, fn} // never blocks: pending bounds it
				default:
					reject = fmt.Sprintf("too many binding calls in flight (limit %d)", l.PendingCalls)
				}
			}
			if reject != "" {
				reply(portproto.Result{Type: portproto.TypeResult, ID: m.ID, Message: reject})
			}
		case *portproto.Log:
			sb.out.add(backend.LogEntry{Source: backend.LogSource(m.Source), Level: backend.LogLevel(m.Level), Text: m.Text})
		case *portproto.Done:
			mark(ctx, func(t *RunTrace) *time.Time { return &t.Done })
			traceRunner(ctx, m.Timings)
			if m.Exit != nil {
				return finish(programExit(m)), true
			}
			if !m.OK {
				return finish(&backend.Failure{Kind: backend.FailureException, Message: describeError(m.Error)}), true
			}
			if m.ValueKind != "" {
				var cut bool
				res.Value, cut = capValue(m.Value, l.ValueBytes)
				res.ValueKind = backend.ValueKind(m.ValueKind)
				res.ValueTruncated = cut || m.Truncated
			}
			return finish(nil), true
		case *portproto.Hello:
			return finish(&backend.Failure{Kind: backend.FailureExit, Message: "runner broke protocol: second hello"}), true
		case *portproto.Open, *portproto.Data, *portproto.Close:
			if tun == nil {
				return finish(&backend.Failure{Kind: backend.FailureExit, Message: fmt.Sprintf("runner broke protocol: a %s frame in a run without egress", m.MessageType())}), true
			}
			r, fail := tun.handle(m)
			if fail != "" {
				return finish(&backend.Failure{Kind: backend.FailureExit, Message: fail}), true
			}
			if r != nil {
				reply(r)
			}
		}
		return backend.RunResult{}, false
	}

	serve := func() backend.RunResult {
		for {
			in, out := sb.peer.frames, chan<- any(nil)
			var next any
			if len(backlog) > 0 {
				out, next = sb.outbox, backlog[0]
			}
			if len(backlog) >= maxBacklog {
				in = nil
			}
			select {
			case fr := <-in:
				if r, settled := handle(fr); settled {
					return r
				}
			case out <- next:
				backlog[0] = nil
				backlog = backlog[1:]
			case err := <-sb.writeFailed:
				if isTimeout(err) {
					return finish(&backend.Failure{Kind: backend.FailureExit, Message: fmt.Sprintf("the runner stopped reading from the bridge (a write waited %v)", writeTimeout)})
				}
				return finish(sb.lostRunner(ctx, err))
			case err := <-cpuMeter.lost:
				return finish(&backend.Failure{Kind: backend.FailureExit, Message: fmt.Sprintf("the host could not read the program's CPU time for %v (%v); the run was stopped rather than left with its compute budget unenforced", meterLoss, err)})
			case used := <-cpuMeter.over:
				return finish(&backend.Failure{Kind: backend.FailureTimeout, Message: fmt.Sprintf("compute budget exceeded: the program used %v of CPU (limit %v)", used.Round(time.Millisecond), l.ComputeTime)})
			case <-wall.C:
				return finish(&backend.Failure{Kind: backend.FailureTimeout, Message: fmt.Sprintf("wall-clock budget exceeded: the program ran for %v (limit %v)", time.Since(start).Round(time.Millisecond), l.WallTime)})
			case st := <-sb.exit:
				// A runner that finished exits right after its done frame:
				// frames it sent before exiting still count.
				drain := time.NewTimer(exitDrain)
				for {
					select {
					case fr := <-sb.peer.frames:
						if fr.err == nil {
							if r, settled := handle(fr); settled {
								drain.Stop()
								return r
							}
							continue
						}
					case <-drain.C:
					}
					break
				}
				drain.Stop()
				return finish(sb.exitFailure(st))
			case <-ctx.Done():
				return finish(abortFailure(ctx))
			}
		}
	}
	return serve(), nil
}

// exitDrain bounds how long frames are still read after the container's
// exit status arrived.
const exitDrain = 200 * time.Millisecond

type queuedCall struct {
	call *portproto.Call
	fn   backend.BindingFunc
}

// dispatch serves queued calls in order until the queue is closed. Calls
// still queued at settlement are abandoned: their bindings never start.
func (sb *sandbox) dispatch(queue <-chan queuedCall, pending <-chan struct{}, queuedBytes *atomic.Int64) {
	defer sb.calls.Done()
	for q := range queue {
		// Checked under settledMu, so a binding either starts before the
		// run settles or never.
		sb.settledMu.Lock()
		settled := sb.settled
		sb.settledMu.Unlock()
		if !settled {
			value, err := invoke(sb.callCtx, q.fn, q.call.Args)
			// A reply is a frame like any other: a value that would not
			// fit the runner's frame limit is a rejection instead.
			if err == nil && len(value) > sb.limits.FrameBytes-resultFrameOverhead {
				value, err = nil, fmt.Errorf("the result of %d bytes exceeds the %d-byte frame limit", len(value), sb.limits.FrameBytes)
			}
			reply := portproto.Result{Type: portproto.TypeResult, ID: q.call.ID, OK: err == nil, Value: value}
			if err != nil {
				reply.Message = cutMessage(err.Error())
				if reply.Message == "" {
					reply.Message = "binding failed"
				}
			}
			sb.reply(reply)
		}
		queuedBytes.Add(-int64(len(q.call.Args)))
		<-pending
	}
}

// reply writes a binding's result to the runner from the dispatcher's
// goroutine: a write that waits is backpressure on a runner slow to read.
// Nothing is written after the run settled; a failed write is reported to
// the run loop like the writer's.
func (sb *sandbox) reply(r portproto.Result) {
	if sb.isSettled() {
		return
	}
	if err := sb.peer.send(r); err != nil {
		select {
		case sb.writeFailed <- err:
		default: // the first failure is already reported
		}
	}
}

// isTimeout reports a write that hit its deadline. gorilla/websocket
// replaces a temporary net.Error by its own, which no longer wraps
// os.ErrDeadlineExceeded but still reports Timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// startWriter starts the goroutine that writes frames to the runner in
// the order they are posted, until the run is stopped.
func (sb *sandbox) startWriter(capacity int) {
	sb.outbox = make(chan any, capacity)
	sb.writeFailed = make(chan error, 1)
	sb.writerQuit = make(chan struct{})
	sb.calls.Add(1)
	go func() {
		defer sb.calls.Done()
		for {
			select {
			case <-sb.writerQuit:
				return
			case f := <-sb.outbox:
				if sb.isSettled() {
					continue
				}
				if err := sb.peer.send(f); err != nil {
					select {
					case sb.writeFailed <- err:
					default: // the dispatcher's failure is already reported
					}
					return
				}
			}
		}
	}()
}

// post queues a frame for the writer; it reports false when the outbox is
// full. It never blocks.
func (sb *sandbox) post(f any) bool {
	select {
	case sb.outbox <- f:
		return true
	default:
		return false
	}
}

func (sb *sandbox) isSettled() bool {
	sb.settledMu.Lock()
	defer sb.settledMu.Unlock()
	return sb.settled
}

// settle marks the run settled: no binding result is sent after it, and
// in-flight bindings see their context cancelled.
func (sb *sandbox) settle() {
	sb.settledMu.Lock()
	sb.settled = true
	sb.settledMu.Unlock()
	if sb.cancelCalls != nil {
		sb.cancelCalls()
	}
}

// resultFrameOverhead is room for a result frame's envelope around its
// value.
const resultFrameOverhead = 128

// invoke calls a binding, turning a panic into an error and checking that
// the value it returns is JSON.
func invoke(ctx context.Context, fn backend.BindingFunc, args json.RawMessage) (value json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			value, err = nil, fmt.Errorf("binding panicked: %v", p)
		}
	}()
	value, err = fn(ctx, args)
	if err != nil {
		return nil, err
	}
	if len(value) == 0 {
		return json.RawMessage("null"), nil
	}
	if !json.Valid(value) {
		return nil, errors.New("binding returned invalid JSON")
	}
	return value, nil
}

// capValue enforces the value cap host-side; an oversize value becomes a
// JSON string holding the first max bytes of its text.
func capValue(v json.RawMessage, max int) (json.RawMessage, bool) {
	if len(v) <= max {
		return v, false
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	s, _ := json.Marshal(string(v[:cut]))
	return s, true
}
