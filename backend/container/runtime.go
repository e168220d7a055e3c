package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container/runner"
	"github.com/dsh-container/dsh-container/tsprep"
)

// Runtime runs each program in a fresh container used once.
type Runtime struct {
	opts   options
	driver Driver
	log    *slog.Logger

	mu     sync.Mutex
	closed bool
	runs   sync.WaitGroup
	// stopRuns is cancelled by Close to abort in-flight runs.
	stopCtx  context.Context
	stopRuns context.CancelFunc

	pool    *pool // nil when disabled
	orphans orphans
	// strip type-strips TypeScript programs in worker processes (nil for
	// other languages).
	strip *tsprep.Stripper
	// slots admits running runs; queued counts runs waiting for a slot.
	slots  chan struct{}
	queued chan struct{}

	// meterTick, when set before the first run, is when every sandbox's
	// CPU meter samples instead of every computePoll: a test that must
	// know which samples a run took sets it.
	meterTick func() (<-chan time.Time, func())
}

// ErrOverloaded is returned by Run when the admission queue is full. It
// matches errdefs.IsResourceExhausted.
var ErrOverloaded = fmt.Errorf("%w: too many runs in flight and the admission queue is full", errdefs.ErrResourceExhausted)

var _ backend.Runtime = (*Runtime)(nil)

// New returns a Runtime that creates containers through d.
func New(d Driver, opts ...Option) (*Runtime, error) {
	o := options{
		language:  backend.TypeScript,
		limits:    DefaultLimits(),
		socketDir: DefaultSocketDir(),
		owner:     defaultOwner(),
	}
	for _, opt := range opts {
		opt(&o)
	}
	if d == nil {
		return nil, fmt.Errorf("%w: container runtime needs a driver", errdefs.ErrInvalidArgument)
	}
	if _, err := backend.ParseLanguage(string(o.language)); err != nil {
		return nil, fmt.Errorf("%w: %w", errdefs.ErrInvalidArgument, err)
	}
	if _, ok := d.(CPUMeter); !ok {
		return nil, fmt.Errorf("%w: the %s driver cannot read a container's CPU time, so the compute budget could not be enforced", errdefs.ErrNotImplemented, d.Capabilities().Name)
	}
	if err := checkLabelValue("owner", o.owner); err != nil {
		return nil, fmt.Errorf("%w: %w", errdefs.ErrInvalidArgument, err)
	}
	if o.image == "" {
		return nil, fmt.Errorf("%w: container runtime needs a runner image", errdefs.ErrInvalidArgument)
	}
	if err := o.limits.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", errdefs.ErrInvalidArgument, err)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.poolTTL != 0 && o.poolTTL < 10*time.Millisecond {
		return nil, fmt.Errorf("%w: pool TTL %v: must be at least 10ms", errdefs.ErrInvalidArgument, o.poolTTL)
	}
	if o.poolSize < 0 || o.maxRuns < 0 || o.queueLength < 0 {
		return nil, fmt.Errorf("%w: pool size, max runs and queue length must not be negative", errdefs.ErrInvalidArgument)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runtime{opts: o, driver: d, log: o.logger, stopCtx: ctx, stopRuns: cancel}
	if o.maxRuns > 0 {
		r.slots = make(chan struct{}, o.maxRuns)
		r.queued = make(chan struct{}, o.queueLength)
	}
	if o.language == backend.TypeScript {
		r.strip = tsprep.NewStripper(maxStripWorkers, tsprep.Limits{})
	}
	if o.poolSize > 0 {
		r.pool = newPool(r.startSandbox, r.log, o.poolSize, o.poolTTL, o.poolFill)
	}
	return r, nil
}

// admit waits for a run slot. It fails fast with ErrOverloaded when the
// queue is full; release must be called when the run ends.
func (r *Runtime) admit(ctx context.Context) (release func(), err error) {
	if r.slots == nil {
		return func() {}, nil
	}
	select {
	case r.slots <- struct{}{}:
		return func() { <-r.slots }, nil
	default:
	}
	select {
	case r.queued <- struct{}{}:
	default:
		return nil, ErrOverloaded
	}
	defer func() { <-r.queued }()
	select {
	case r.slots <- struct{}{}:
		return func() { <-r.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Language reports the language programs must be written in.
func (r *Runtime) Language() backend.Language { return r.opts.language }

// Isolation reports IsolationContainer.
func (r *Runtime) Isolation() backend.Isolation { return backend.IsolationContainer }

// Limits reports the runtime's budgets and caps.
func (r *Runtime) Limits() Limits { return r.opts.limits }

// Close aborts in-flight runs, stops the warm pool, and returns once
// every container the runtime or its pool created is gone: in-flight runs
// and their teardowns, pool starts in progress (a start Close interrupts
// removes what it made, one that completes anyway is torn down), idle
// sandboxes, and containers whose removal failed — retried, backing off,
// until they are removed (an engine may refuse while a killed container
// is not reaped yet), ctx ends or 30 s have passed. It returns nil only
// when nothing it created is left; otherwise an error naming each
// container still there (the reaper removes them after this process has
// exited) or saying what it was still waiting for when ctx ended. Later
// Runs fail with backend.ErrClosed. It is idempotent.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.stopRuns()
	if r.strip != nil {
		r.strip.Close() // a strip in progress stops its worker when done
	}
	var errs []error
	if r.pool != nil {
		if err := r.pool.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("the warm pool's starts and teardowns did not finish: %w", err))
		}
	}
	done := make(chan struct{})
	go func() {
		r.runs.Wait()
		close(done)
	}()
	select {
	case <-done:
		if err := r.orphans.drain(ctx, r.driver); err != nil {
			errs = append(errs, err)
		}
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("runs and their teardowns did not finish: %w", ctx.Err()))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing container runtime: %w", err)
	}
	return nil
}

func (r *Runtime) enter() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return backend.ErrClosed
	}
	r.runs.Add(1)
	return nil
}

func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// spec builds the container for one run: the hardening preset, the
// configured limits, and nothing from the request.
func (r *Runtime) spec(runID string, ep *Endpoint) Spec {
	l := r.opts.limits
	var cmd []string
	switch r.opts.language {
	case backend.Python:
		cmd = runner.PythonArgv(ep.RunnerAddress)
	default:
		// V8's heap limit leaves room under the cgroup limit (v8HeapMiB):
		// a heap bomb meets V8's abort, reported as oom.
		cmd = runner.TypeScriptArgv(ep.RunnerAddress, v8HeapMiB(l.MemoryBytes))
	}
	labels := map[string]string{
		LabelManaged: "true",
		LabelOwner:   r.opts.owner,
		LabelRun:     runID,
		LabelLang:    string(r.opts.language),
	}
	if ep.Label != "" {
		labels[LabelBridge] = ep.Label
	}
	return Spec{
		Name:            "dsh-" + runID,
		Hostname:        "sandbox",
		Image:           r.opts.image,
		Cmd:             cmd,
		Env:             []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"},
		User:            RunnerUser,
		WorkingDir:      "/tmp",
		Labels:          labels,
		BindDir:         ep.BindDir,
		NetworkDisabled: true,
		ReadOnlyRoot:    true,
		CapDropAll:      true,
		NoNewPrivileges: true,
		Init:            true,
		IPCPrivate:      true,
		LogDriverNone:   true,
		MemoryBytes:     l.MemoryBytes,
		NanoCPUs:        l.NanoCPUs,
		Pids:            l.Pids,
		TmpfsBytes:      l.TmpfsBytes,
		NoFile:          l.NoFile,
		OCIRuntime:      r.opts.ociRuntime,
		Seccomp:         r.opts.seccompProfile(),
	}
}

// Run executes one program in a fresh container. See backend.Runtime.
//
// req's per-run options apply to this run only: Limits lowers the
// runtime's budgets (Limits.Lower), Egress narrows its egress policy
// (WithEgress) and Events receives each egress connection's event; see
// runWithOptions and CheckRequest.
//
// Errors: backend.ErrInvalidRequest / ErrClosed for misuse (a limit raised
// or an egress entry outside the allowlist included),
// backend.ErrNotImplemented for egress on a runtime without it, and, when
// no container could be provided for the program (daemon unreachable,
// image missing), an error classified with errdefs (ErrUnavailable,
// ErrNotFound...). Everything the program does is a RunResult.
func (r *Runtime) Run(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
	if err := req.Validate(); err != nil {
		return backend.RunResult{}, err
	}
	return r.runWithOptions(ctx, req)
}

// run is Run on r as configured (r may be a view; see runWithOptions).
func (r *Runtime) run(ctx context.Context, req backend.RunRequest) (_ backend.RunResult, retErr error) {
	if err := r.enter(); err != nil {
		return backend.RunResult{}, err
	}
	defer r.runs.Done()
	ctx, span := r.startRun(ctx)
	var out backend.RunResult
	defer func() { endRun(span, &out, retErr) }()
	ret := func(res backend.RunResult) backend.RunResult {
		out = res
		return res
	}
	mark(ctx, func(t *RunTrace) *time.Time { return &t.Start })

	if len(req.Program) > r.opts.limits.ProgramBytes {
		return ret(backend.RunResult{Error: &backend.Failure{
			Kind:    backend.FailureException,
			Message: fmt.Sprintf("program of %d bytes exceeds the %d-byte limit", len(req.Program), r.opts.limits.ProgramBytes),
		}}), nil
	}

	// Close aborts the run like the caller's cancellation does.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(r.stopCtx, func() { cancel(errors.New("runtime closed")) })
	defer stop()

	if r.orphans.len() > 0 {
		r.orphans.retry(context.WithoutCancel(ctx), r.driver, r.log)
	}
	// Admission covers preparation too: the type-strip is host work a
	// program drives.
	release, err := r.admit(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ret(backend.RunResult{Error: abortFailure(ctx)}), nil
		}
		return backend.RunResult{}, err
	}
	defer release()
	pctx, endPrepare := r.phase(ctx, SpanPrepare)
	prep, fail, err := prepare(pctx, r.opts.language, req.Program, r.strip)
	endPrepare(err)
	switch {
	case fail != nil:
		return ret(backend.RunResult{Error: fail}), nil
	case ctx.Err() != nil:
		return ret(backend.RunResult{Error: abortFailure(ctx)}), nil
	case err != nil:
		return backend.RunResult{}, err
	}

	mark(ctx, func(t *RunTrace) *time.Time { return &t.Prepared })
	startup := time.Now()
	actx, endAcquire := r.phase(ctx, SpanAcquire)
	var sb *sandbox
	warm := false
	if r.pool != nil {
		sb = r.pool.get()
		warm = sb != nil
	}
	trace.SpanFromContext(actx).SetAttributes(AttrPoolHit.Bool(warm))
	if r.opts.observer != nil {
		r.opts.observer.ObservePool(ctx, r.opts.language, warm)
	}
	if sb == nil {
		runID := newRunID()
		sb, err = r.startSandbox(actx, runID, r.log.With("run_id", runID, "language", string(r.opts.language), "trace_id", traceID(ctx)))
		endAcquire(err)
		if err != nil {
			if ctx.Err() != nil {
				return ret(backend.RunResult{Error: abortFailure(ctx)}), nil
			}
			return backend.RunResult{}, err
		}
	} else {
		endAcquire(nil)
	}
	span.SetAttributes(AttrRunID.String(sb.runID), AttrPoolHit.Bool(warm))
	log := r.log.With("run_id", sb.runID, "trace_id", traceID(ctx), "language", string(r.opts.language), "warm", warm)
	ready := time.Now()
	mark(ctx, func(t *RunTrace) *time.Time { return &t.Acquired })
	sb.egress = r.opts.egress
	xctx, endProgram := r.phase(backend.ContextWithRunID(ctx, sb.runID), SpanProgram)
	res, err := sb.execute(xctx, prep, req, r.opts.limits, log)
	endProgram(err)
	if err != nil {
		sb.stop()
		tctx, endTeardown := r.phase(ctx, SpanTeardown)
		r.runs.Add(1)
		go func() {
			defer r.runs.Done()
			sb.teardown(tctx, log)
			endTeardown(nil)
			r.observeFrames(ctx, sb)
		}()
		return backend.RunResult{}, err
	}
	res.Stats.Startup = ready.Sub(startup)
	res.Stats.Warm = warm
	res.Stats.RunID, res.Stats.TraceID = sb.runID, traceID(ctx)
	// Settle and wait for bindings now; kill and remove the container in
	// the background (Close waits for it, the reaper covers a crash in
	// between).
	sb.stop()
	res.Logs, res.LogsTruncated = sb.out.snapshot()
	mark(ctx, func(t *RunTrace) *time.Time { return &t.Returned })
	tctx, endTeardown := r.phase(ctx, SpanTeardown)
	r.runs.Add(1)
	go func() {
		defer r.runs.Done()
		sb.teardown(tctx, log)
		endTeardown(nil)
		r.observeFrames(ctx, sb)
	}()
	return ret(res), nil
}

func abortFailure(ctx context.Context) *backend.Failure {
	msg := "run cancelled"
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		msg += ": " + cause.Error()
	} else if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		msg += ": caller's deadline exceeded"
	}
	return &backend.Failure{Kind: backend.FailureAbort, Message: msg}
}

// PoolIdle reports how many pre-started sandboxes are ready (0 without a
// pool).
func (r *Runtime) PoolIdle() int {
	if r.pool == nil {
		return 0
	}
	return r.pool.idleCount()
}
