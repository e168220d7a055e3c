package container

// A sandbox's lifetime: start (endpoint, create, wait, start, hello),
// stop on the request path, teardown in the background, and the orphans
// whose removal is retried.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/egress"
	"github.com/dsh-container/dsh-container/portproto"
)

// sandbox is one started container whose runner has said hello.
type sandbox struct {
	driver  Driver
	cpu     CPUMeter
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
	// exitGrace is how long a broken bridge waits for the container's
	// exit status (see lostRunner).
	exitGrace time.Duration
	// peakMemory is the most memory the container was seen to use (0 when
	// the driver cannot tell): see sampleMemory.
	peakMemory atomic.Int64
	// meterTick, when set, replaces the CPU meter's ticker (tests: see
	// Runtime.meterTick).
	meterTick func() (<-chan time.Time, func())

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
	// egress is the run's egress policy (nil: none).
	egress *egress.Policy

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
	ep, err := r.driver.Endpoint(ctx, EndpointRequest{RunID: runID, SocketDir: r.opts.socketDir})
	if err != nil {
		return nil, fmt.Errorf("%w: the bridge endpoint: %w", errdefs.ErrUnavailable, err)
	}
	sb := &sandbox{driver: r.driver, cpu: r.driver.(CPUMeter), runID: runID, bridge: newBridge(ep, l.FrameBytes), limits: l, lang: r.opts.language, exitGrace: exitGraceFor(r.opts.ociRuntime), out: &logSink{max: l.LogBytes}, orphans: &r.orphans, meterTick: r.meterTick}
	defer func() {
		if retErr != nil {
			sb.teardown(ctx, log)
		}
	}()
	_, endCreate := r.phase(ctx, SpanCreate)
	id, err := r.driver.Create(ctx, r.spec(runID, ep))
	endCreate(err)
	if err != nil {
		sb.orphans.createFailed(err)
		return nil, err
	}
	trace.SpanFromContext(ctx).SetAttributes(AttrContainerID.String(id))
	sb.id = id
	log.Debug("container created", "container_id", id)
	_, endStart := r.phase(ctx, SpanStart)
	defer func() {
		if endStart != nil {
			endStart(retErr)
		}
	}()
	if sb.exit, err = r.driver.Wait(ctx, id); err != nil {
		return nil, err
	}
	if oa, ok := r.driver.(OutputAttacher); ok {
		if sb.streams, err = oa.StartAttached(ctx, id); err != nil {
			return nil, err
		}
		sb.captureStreams()
	} else if err := r.driver.Start(ctx, id); err != nil {
		return nil, err
	}

	endStart(nil)
	endStart = nil
	_, endHello := r.phase(ctx, SpanHello)
	defer func() { endHello(retErr) }()

	timer := time.NewTimer(l.StartupTime)
	defer timer.Stop()
	select {
	case sb.peer = <-sb.bridge.connCh:
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
	primeMeters(ctx, r.driver, id)
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
		if err := sb.driver.Kill(ctx, sb.id); err != nil && !errdefs.IsNotFound(err) {
			log.Debug("kill before removal", "container_id", sb.id, "err", err)
		}
		if err := sb.driver.Remove(ctx, sb.id); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", sb.id, err))
			sb.orphans.failed(sb.id, err)
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

// orphans are containers whose removal failed (the daemon restarting, a
// removal already in progress, a killed task not reaped yet). A
// long-lived process retries them before each run; Close retries them
// until they are gone (drain). The reaper spares live owners, itself
// included, so nothing else would.
type orphans struct {
	mu  sync.Mutex
	ids []string
	// last is each container's latest removal error.
	last map[string]error
}

func (o *orphans) failed(id string, err error) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last == nil {
		o.last = map[string]error{}
	}
	if _, ok := o.last[id]; !ok {
		o.ids = append(o.ids, id)
	}
	o.last[id] = err
}

// createFailed keeps what a failed create left (a *LeftError: its undo
// failed too) among the orphans: nobody else knows it is there.
func (o *orphans) createFailed(err error) {
	var left *LeftError
	if errors.As(err, &left) && left.ID != "" {
		o.failed(left.ID, left.Undo)
	}
}

// retry removes what it can and keeps the rest, logging each failure.
func (o *orphans) retry(ctx context.Context, d Driver, log *slog.Logger) {
	for id, err := range o.attempt(ctx, d) {
		log.Warn("still cannot remove a container", "container_id", id, "err", err)
	}
}

// attempt tries to remove every orphan once and returns the failures.
func (o *orphans) attempt(ctx context.Context, d Driver) map[string]error {
	o.mu.Lock()
	ids := o.ids
	o.ids, o.last = nil, nil
	o.mu.Unlock()
	var failed map[string]error
	for _, id := range ids {
		if err := d.Remove(ctx, id); err != nil && !errdefs.IsNotFound(err) {
			o.failed(id, err)
			if failed == nil {
				failed = map[string]error{}
			}
			failed[id] = err
		}
	}
	return failed
}

// orphanDrain bounds how long Close retries the orphans: an engine that
// refuses to remove a killed container usually agrees once it has reaped
// it, well within this.
const orphanDrain = teardownTimeout

// drain retries the orphans, backing off, until none is left, ctx ends or
// orphanDrain has passed. It returns an error naming each container still
// there and why, or nil when none is.
func (o *orphans) drain(ctx context.Context, d Driver) error {
	ctx, cancel := context.WithTimeout(ctx, orphanDrain)
	defer cancel()
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		failed := o.attempt(ctx, d)
		if len(failed) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			left := make([]string, 0, len(failed))
			for _, id := range slices.Sorted(maps.Keys(failed)) {
				left = append(left, fmt.Sprintf("%s (%v)", id, failed[id]))
			}
			return fmt.Errorf("%d container(s) could not be removed: %s", len(left), strings.Join(left, "; "))
		case <-time.After(delay):
		}
	}
}

// handOver moves every orphan, with its latest error, to to.
func (o *orphans) handOver(to *orphans) {
	o.mu.Lock()
	ids, last := o.ids, o.last
	o.ids, o.last = nil, nil
	o.mu.Unlock()
	for _, id := range ids {
		to.failed(id, last[id])
	}
}

func (o *orphans) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ids)
}
