package container

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/portproto"
)

// sandbox is one started container whose runner has said hello.
type sandbox struct {
	driver  Driver
	runID   string
	id      string
	bridge  *bridge
	peer    *peer
	exit    <-chan ExitStatus
	streams Streams
	readers sync.WaitGroup // attach stream readers
	out     *logSink
	readyAt time.Time
	limits  Limits
	lang    backend.Language
	// peakMemory is the most memory the container was seen to use (0 when
	// the driver cannot tell): see sampleMemory.
	peakMemory atomic.Int64

	// Binding calls run under callCtx, cancelled at settlement; calls
	// tracks them so teardown can wait for quiescence. settled is set (under
	// settledMu) at settlement: no result is sent after it.
	callCtx     context.Context
	cancelCalls context.CancelFunc
	calls       sync.WaitGroup
	settledMu   sync.Mutex
	settled     bool

	// orphans records containers whose removal failed, for a retry.
	orphans *orphans

	// outbox feeds the writer goroutine; writeFailed reports its first
	// write error; writerQuit stops it.
	outbox      chan any
	writeFailed chan error
	writerQuit  chan struct{}
	stopOnce    sync.Once
}

const teardownTimeout = 30 * time.Second

// startSandbox creates and starts a container and waits for its runner's
// hello. On failure everything created so far is removed.
func (r *Runtime) startSandbox(ctx context.Context, runID string, log *slog.Logger) (_ *sandbox, retErr error) {
	l := r.opts.limits
	b, err := newBridge(r.opts.socketDir, l.FrameBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err)
	}
	sb := &sandbox{driver: r.driver, runID: runID, bridge: b, limits: l, lang: r.opts.language, out: &logSink{max: l.LogBytes}, orphans: &r.orphans}
	defer func() {
		if retErr != nil {
			sb.teardown(ctx, log)
		}
	}()
	// Create must not be cut short by cancellation: the daemon may create
	// the container after the client gave up, and then nobody would know
	// its id to remove it. It is bounded instead, and ctx checked after.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	spec := r.spec(runID, b.dir)
	id, err := r.driver.Create(cctx, spec)
	cancel()
	if err != nil {
		// The daemon may still have created it (a timeout): remove it by
		// its name; NotFound is the usual answer.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		if rerr := r.driver.Remove(rctx, spec.Name); rerr != nil && !errdefs.IsNotFound(rerr) {
			log.Warn("could not remove a container whose creation failed", "name", spec.Name, "err", rerr)
		}
		rcancel()
		return nil, err
	}
	sb.id = id
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	log.Debug("container created", "container_id", id)
	if sb.streams, err = r.driver.Attach(ctx, id); err != nil {
		return nil, err
	}
	if sb.exit, err = r.driver.Wait(ctx, id); err != nil {
		return nil, err
	}
	sb.captureStreams()
	if err := r.driver.Start(ctx, id); err != nil {
		return nil, err
	}

	timer := time.NewTimer(l.StartupTime)
	defer timer.Stop()
	select {
	case sb.peer = <-b.connCh:
	case st := <-sb.exit:
		return nil, fmt.Errorf("%w: runner exited with status %d before connecting%s", errdefs.ErrUnavailable, st.Code, sb.out.tail())
	case <-timer.C:
		return nil, fmt.Errorf("%w: runner did not connect within %v%s", errdefs.ErrUnavailable, l.StartupTime, sb.out.tail())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case f := <-sb.peer.frames:
		if f.err != nil {
			if !portproto.IsProtocolError(f.err) {
				// Usually the runner is exiting: report its status.
				select {
				case st := <-sb.exit:
					return nil, fmt.Errorf("%w: runner exited with status %d before hello%s", errdefs.ErrUnavailable, st.Code, sb.out.tail())
				case <-time.After(2 * time.Second):
				}
			}
			return nil, fmt.Errorf("%w: runner handshake: %w", errdefs.ErrUnavailable, f.err)
		}
		h, ok := f.msg.(*portproto.Hello)
		if !ok {
			return nil, fmt.Errorf("%w: runner sent %q before hello", errdefs.ErrUnavailable, f.msg.MessageType())
		}
		if h.Language != string(r.opts.language) {
			return nil, fmt.Errorf("%w: image %s runs %s programs, runtime expects %s", errdefs.ErrFailedPrecondition, r.opts.image, h.Language, r.opts.language)
		}
	case st := <-sb.exit:
		return nil, fmt.Errorf("%w: runner exited with status %d before hello%s", errdefs.ErrUnavailable, st.Code, sb.out.tail())
	case <-timer.C:
		return nil, fmt.Errorf("%w: runner did not say hello within %v", errdefs.ErrUnavailable, l.StartupTime)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	sb.readyAt = time.Now()
	return sb, nil
}

// captureStreams turns raw container output into stdout/stderr entries.
func (sb *sandbox) captureStreams() {
	for _, s := range []struct {
		r   io.Reader
		src backend.LogSource
	}{{sb.streams.Stdout, backend.SourceStdout}, {sb.streams.Stderr, backend.SourceStderr}} {
		if s.r == nil {
			continue
		}
		sb.readers.Add(1)
		go func(r io.Reader, src backend.LogSource) {
			defer sb.readers.Done()
			br := bufio.NewReaderSize(r, 64<<10)
			for {
				line, err := br.ReadSlice('\n')
				if len(line) > 0 {
					sb.out.add(backend.LogEntry{Source: src, Text: strings.ToValidUTF8(string(line), "\uFFFD")})
				}
				if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
					return
				}
			}
		}(s.r, s.src)
	}
}

// computePoll is how often CPU usage is sampled. A compute budget expires
// at most one interval late. It is deliberately not configurable.
const computePoll = 20 * time.Millisecond

// execute sends the program and serves the run until it settles. It
// returns an error, before the program is sent, only when the container's
// CPU time cannot be read: a compute budget is never left unenforced.
func (sb *sandbox) execute(ctx context.Context, prep prepared, req backend.RunRequest, l Limits, log *slog.Logger) (backend.RunResult, error) {
	bctx, cancel := context.WithTimeout(ctx, meterLoss)
	base, err := sb.driver.CPUUsage(bctx, sb.id)
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

	start := time.Now()
	wall := time.NewTimer(l.WallTime)
	defer wall.Stop()
	// CPU is sampled off the run loop: a slow sample (the stats API) must
	// never hold up frames.
	cpuMeter := sb.startMeter(ctx, base, l.ComputeTime)
	defer cpuMeter.stop()
	// Every frame to the runner goes through one writer goroutine, so the
	// run loop never blocks on a runner that stops reading (see held).
	sb.startWriter(2*l.PendingCalls + 2)
	sb.post(run)

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
	// held is a reply waiting for room in the outbox. While there is one
	// the loop reads no frames: a runner that sends faster than it reads
	// its replies is slowed down, never killed, and budgets keep running.
	var held any
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
				if r := (portproto.Result{Type: portproto.TypeResult, ID: m.ID, Message: reject}); !sb.post(r) {
					held = r // the loop stops reading until it fits
				}
			}
		case *portproto.Log:
			sb.out.add(backend.LogEntry{Source: backend.LogSource(m.Source), Level: backend.LogLevel(m.Level), Text: m.Text})
		case *portproto.Done:
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
		}
		return backend.RunResult{}, false
	}

	serve := func() backend.RunResult {
		for {
			in, out := sb.peer.frames, chan<- any(nil)
			if held != nil {
				in, out = nil, sb.outbox
			}
			select {
			case fr := <-in:
				if r, settled := handle(fr); settled {
					return r
				}
			case out <- held:
				held = nil
			case err := <-sb.writeFailed:
				if errors.Is(err, os.ErrDeadlineExceeded) {
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

// meter samples a container's CPU usage in its own goroutine, against the
// baseline read as the program starts. Once usage since then reaches the
// limit, over receives it; if no sample succeeds for meterLoss, lost
// receives the last error: the run is stopped rather than left unmetered.
type meter struct {
	over   chan time.Duration
	lost   chan error
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	last   time.Duration
}

// meterLoss is how long CPU samples may fail in a row before the run is
// stopped.
const meterLoss = 2 * time.Second

func (sb *sandbox) startMeter(ctx context.Context, base, limit time.Duration) *meter {
	ctx, cancel := context.WithCancel(ctx)
	m := &meter{over: make(chan time.Duration, 1), lost: make(chan error, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTicker(computePoll)
		defer t.Stop()
		lastOK := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			sb.sampleMemory(ctx)
			// A sample that hangs counts as failed: it must not stop
			// the meter from noticing that it has lost track.
			sctx, scancel := context.WithTimeout(ctx, meterLoss)
			cpu, err := sb.driver.CPUUsage(sctx, sb.id)
			scancel()
			if err != nil {
				if ctx.Err() == nil && time.Since(lastOK) >= meterLoss {
					m.lost <- err
					return
				}
				continue
			}
			lastOK = time.Now()
			used := cpu - base
			m.mu.Lock()
			// A dead container's usage may read as zero: never go back.
			if used > m.last {
				m.last = used
			}
			used = m.last
			m.mu.Unlock()
			if used >= limit {
				m.over <- used
				return
			}
		}
	}()
	return m
}

// stop ends sampling and returns the CPU time used (0 when unmetered).
func (m *meter) stop() time.Duration {
	m.cancel() // also cuts short a slow sample
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

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
			// Wait for room: backpressure on a runner that is slow to read.
			select {
			case sb.outbox <- reply:
			case <-sb.writerQuit:
			}
		}
		queuedBytes.Add(-int64(len(q.call.Args)))
		<-pending
	}
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
					sb.writeFailed <- err
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

// lostRunner classifies a broken bridge: a protocol violation, or the
// container dying (which is then reported by its exit status).
func (sb *sandbox) lostRunner(ctx context.Context, err error) *backend.Failure {
	if portproto.IsProtocolError(err) {
		return &backend.Failure{Kind: backend.FailureExit, Message: "runner broke protocol: " + err.Error()}
	}
	// The connection usually breaks because the container is exiting;
	// give its status a moment to arrive.
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case st := <-sb.exit:
		return sb.exitFailure(st)
	case <-t.C:
	case <-ctx.Done():
		return abortFailure(ctx)
	}
	return &backend.Failure{Kind: backend.FailureExit, Message: "runner closed the bridge before finishing: " + err.Error()}
}

// sampleMemory records the container's peak memory use, when the driver
// can read it. The meter calls it every computePoll during a run; the
// cgroup, and with it the figure, goes when the container exits.
func (sb *sandbox) sampleMemory(ctx context.Context) {
	mm, ok := sb.driver.(MemoryMeter)
	if !ok {
		return
	}
	if v, err := mm.MemoryPeak(ctx, sb.id); err == nil && v > sb.peakMemory.Load() {
		sb.peakMemory.Store(v)
	}
}

// v8AbortStatus is a TypeScript runner's exit status when V8 aborts the
// process (SIGABRT through the init process: 128+6).
const v8AbortStatus = 134

// v8HeapNear is the container memory use, as a fraction of V8's heap
// limit, at or above which a V8 abort counts as heap exhaustion.
const v8HeapNear = 0.9

// exitFailure classifies the container's death from facts the program
// cannot forge by printing: the kernel's OOM kill, and for TypeScript,
// whose V8 heap is capped below the cgroup limit on purpose (v8HeapMiB),
// V8's abort status together with memory use the host measured near that
// cap. Nothing the program writes decides the kind.
func (sb *sandbox) exitFailure(st ExitStatus) *backend.Failure {
	if st.Code != 0 {
		// The runner's last output drains a moment after its exit
		// status arrives; keep it in the logs.
		drained := make(chan struct{})
		go func() {
			sb.readers.Wait()
			close(drained)
		}()
		t := time.NewTimer(time.Second)
		select {
		case <-drained:
		case <-t.C:
		}
		t.Stop()
	}
	if !st.OOMKilled && st.Code == v8AbortStatus && sb.lang == backend.TypeScript {
		// One last sample: the cgroup may still be there.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		sb.sampleMemory(ctx)
		cancel()
		heap := v8HeapMiB(sb.limits.MemoryBytes) << 20
		if peak := sb.peakMemory.Load(); float64(peak) >= v8HeapNear*float64(heap) {
			return &backend.Failure{Kind: backend.FailureOOM, Message: fmt.Sprintf("the program exceeded its memory limit of %d MiB (the JavaScript heap reached its %d MiB cap; the container peaked at %d MiB)",
				sb.limits.MemoryBytes>>20, heap>>20, peak>>20)}
		}
	}
	return exitFailure(st, sb.limits)
}

func exitFailure(st ExitStatus, l Limits) *backend.Failure {
	if st.OOMKilled {
		return &backend.Failure{Kind: backend.FailureOOM, Message: fmt.Sprintf("the program exceeded its memory limit of %d MiB", l.MemoryBytes>>20)}
	}
	msg := fmt.Sprintf("the container exited with status %d before the program finished", st.Code)
	if st.Err != nil {
		msg = "the container stopped before the program finished: " + st.Err.Error()
	}
	return &backend.Failure{Kind: backend.FailureExit, Message: msg}
}

// maxFailureBytes caps the failure message a runner reports: it reaches
// the model like logs do, and must not bypass their cap.
const maxFailureBytes = 16 << 10

func describeError(e *portproto.ProgramError) string {
	msg := e.Stack
	switch {
	case msg != "":
	case e.Message == "":
		msg = e.Name
	default:
		msg = e.Name + ": " + e.Message
	}
	return cutMessage(msg)
}

// resultFrameOverhead is room for a result frame's envelope around its
// value.
const resultFrameOverhead = 128

// cutMessage cuts a message to maxFailureBytes on a rune boundary, saying
// how much was cut.
func cutMessage(msg string) string {
	if len(msg) <= maxFailureBytes {
		return msg
	}
	cut := maxFailureBytes
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + fmt.Sprintf("… (%d more bytes cut)", len(msg)-cut)
}

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

// teardown removes the container and the bridge and waits for every
// goroutine of the sandbox. It runs under a non-cancellable context.
//
// Run splits it: stop (synchronous, so the result is complete and no
// binding runs after Run returns) and teardown (in the background, tracked
// so Close waits for it).
func (sb *sandbox) teardown(ctx context.Context, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	var errs []error
	if sb.id != "" {
		if err := sb.driver.Remove(ctx, sb.id); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", sb.id, err))
			sb.orphans.add(sb.id)
		}
	}
	if sb.streams.Close != nil {
		_ = sb.streams.Close()
	}
	if sb.peer != nil {
		sb.peer.close()
	}
	if err := sb.bridge.close(ctx); err != nil {
		errs = append(errs, err)
	}
	sb.readers.Wait()
	sb.stop() // no-op after Run's stop; settles a sandbox that never ran
	if err := errors.Join(errs...); err != nil {
		log.Error("teardown incomplete; it is retried by the next run and by Close (and by the reaper after a crash)", "container_id", sb.id, "err", err)
	}
}

// stop ends a settled run on the request path: no binding result is sent
// after it, the bridge connection is closed and in-flight bindings have
// returned. Killing and removing the container and the socket directory —
// the slow part — is left to teardown. Raw output the container writes
// after settlement is not part of the result.
func (sb *sandbox) stop() {
	sb.stopOnce.Do(func() {
		sb.settle()
		// Nothing reaches the caller's log callback after Run returns.
		sb.out.mu.Lock()
		sb.out.onEntry = nil
		sb.out.mu.Unlock()
		// Closing the connection first unblocks a write stuck on a
		// runner that stopped reading.
		if sb.peer != nil {
			sb.peer.close()
		}
		if sb.writerQuit != nil {
			close(sb.writerQuit)
		}
		sb.calls.Wait()
	})
}

// Every log entry is charged LogEntryOverhead bytes on top of its text
// against Limits.LogBytes, and a run keeps at most MaxLogEntries entries:
// empty entries are not free (each costs the host a struct and a JSON
// object in every report).
const (
	LogEntryOverhead = 64
	MaxLogEntries    = 10000
)

// logSink collects log entries under the byte and entry caps, in arrival
// order.
type logSink struct {
	mu        sync.Mutex
	max       int
	used      int
	entries   []backend.LogEntry
	truncated bool
	onEntry   func(backend.LogEntry)
}

func (s *logSink) add(e backend.LogEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.truncated {
		return
	}
	if len(s.entries) >= MaxLogEntries || s.used+LogEntryOverhead > s.max {
		s.truncated = true
		return
	}
	if s.used+LogEntryOverhead+len(e.Text) > s.max {
		s.truncated = true
		cut := s.max - s.used - LogEntryOverhead
		for cut > 0 && !utf8.RuneStart(e.Text[cut]) {
			cut--
		}
		if cut <= 0 {
			return
		}
		e.Text = e.Text[:cut]
	}
	s.used += LogEntryOverhead + len(e.Text)
	s.entries = append(s.entries, e)
	if s.onEntry != nil {
		s.onEntry(e)
	}
}

func (s *logSink) snapshot() ([]backend.LogEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]backend.LogEntry(nil), s.entries...), s.truncated
}

// tail renders the last captured output for an error message.
func (s *logSink) tail() string {
	entries, _ := s.snapshot()
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.Text)
	}
	t := strings.TrimSpace(b.String())
	if t == "" {
		return ""
	}
	if len(t) > 512 {
		t = "…" + t[len(t)-512:]
	}
	return "; it printed: " + t
}

// orphans are containers whose removal failed (the daemon restarting, a
// removal already in progress). A long-lived process retries them: the
// reaper spares live owners, itself included.
type orphans struct {
	mu  sync.Mutex
	ids []string
}

func (o *orphans) add(id string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ids = append(o.ids, id)
}

// retry removes what it can and keeps the rest.
func (o *orphans) retry(ctx context.Context, d Driver, log *slog.Logger) {
	o.mu.Lock()
	ids := o.ids
	o.ids = nil
	o.mu.Unlock()
	for _, id := range ids {
		if err := d.Remove(ctx, id); err != nil && !errdefs.IsNotFound(err) {
			log.Warn("still cannot remove a container", "container_id", id, "err", err)
			o.add(id)
		}
	}
}

func (o *orphans) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ids)
}
