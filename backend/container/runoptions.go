package container

// Per-run options (backend.RunRequest's Limits, Egress and Events): one
// program run with budgets lower than the runtime's and its egress
// narrowed.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/egress"
)

var _ backend.RequestChecker = (*Runtime)(nil)

// perRun is the part of l a run may lower (backend.Limits).
func (l Limits) perRun() backend.Limits {
	return backend.Limits{WallTime: l.WallTime, ComputeTime: l.ComputeTime, MemoryBytes: l.MemoryBytes, NanoCPUs: l.NanoCPUs, Pids: l.Pids}
}

// Lower returns l with rl's non-zero fields applied. It fails, wrapping
// backend.ErrInvalidRequest and naming every offending field, when rl
// raises a limit (backend.Limits.Within decides) or sets one below its
// minimum (see Validate). A lower memory limit lowers the /tmp size with
// it to at most half of it.
func (l Limits) Lower(rl backend.Limits) (Limits, error) {
	if err := rl.Within(l.perRun()); err != nil {
		return l, err
	}
	out := l
	set := func(dst *int64, v int64) {
		if v != 0 {
			*dst = v
		}
	}
	set((*int64)(&out.WallTime), int64(rl.WallTime))
	set((*int64)(&out.ComputeTime), int64(rl.ComputeTime))
	set(&out.MemoryBytes, rl.MemoryBytes)
	set(&out.NanoCPUs, rl.NanoCPUs)
	set(&out.Pids, rl.Pids)
	out.TmpfsBytes = min(out.TmpfsBytes, out.MemoryBytes/2)
	if err := out.Validate(); err != nil {
		return l, err
	}
	return out, nil
}

// sameContainer reports whether containers started with l and m are
// interchangeable: the settings a container is created with agree.
func (l Limits) sameContainer(m Limits) bool {
	return l.MemoryBytes == m.MemoryBytes && l.NanoCPUs == m.NanoCPUs && l.Pids == m.Pids && l.TmpfsBytes == m.TmpfsBytes && l.NoFile == m.NoFile
}

// options resolves req's per-run options against the runtime's own: the
// limits lowered (Limits.Lower) and the egress policy narrowed
// (egress.Policy.Narrow), with req.Events among its receivers. It is the
// one check behind both Run and CheckRequest.
func (r *Runtime) options(req backend.RunRequest) (Limits, *egress.Policy, error) {
	l, err := r.opts.limits.Lower(req.Limits)
	if err != nil {
		return Limits{}, nil, err
	}
	p := r.opts.egress
	if req.Egress != nil {
		switch {
		case p == nil:
			return Limits{}, nil, fmt.Errorf("%w: egress: the %s runtime of this server offers no egress (it has no egress policy)", backend.ErrNotImplemented, r.opts.language)
		case len(req.Egress.Allow) == 0:
			return Limits{}, nil, fmt.Errorf("%w: egress: the allowlist must have at least one entry (nil Egress: the runtime's own)", backend.ErrInvalidRequest)
		}
		if p, err = p.Narrow(req.Egress.Allow); err != nil {
			return Limits{}, nil, fmt.Errorf("%w: egress: %w", backend.ErrInvalidRequest, err)
		}
	}
	if p != nil && req.Events != nil {
		sink := req.Events
		p = p.WithEvents(func(e egress.Event) {
			if b, err := json.Marshal(e); err == nil {
				sink(b)
			}
		})
	}
	return l, p, nil
}

// CheckRequest reports the error Run would return for req's per-run
// options (a limit raised or below its minimum, egress on a runtime
// without it or outside its allowlist), or nil. See
// backend.RequestChecker.
func (r *Runtime) CheckRequest(req backend.RunRequest) error {
	_, _, err := r.options(req)
	return err
}

// runWithOptions runs req with its per-run options: on r itself when they
// change nothing, else on a view of r whose limits and egress are the
// run's. The run shares the runtime's admission, type-strip workers,
// shutdown and, when its containers are interchangeable with the
// runtime's (it lowers only time budgets), the warm pool; egress is
// configured by the run frame, not by the container, so it keeps the
// pool. Close waits for it like for any run.
func (r *Runtime) runWithOptions(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
	l, p, err := r.options(req)
	if err != nil {
		return backend.RunResult{}, err
	}
	if l == r.opts.limits && p == r.opts.egress {
		return r.run(ctx, req)
	}
	if err := r.enter(); err != nil {
		return backend.RunResult{}, err
	}
	v := r.view(l)
	v.opts.egress = p
	return r.runOnView(ctx, v, req)
}

// runOnView runs req on v, a view of r the caller entered (r.enter). The
// view's container is torn down in the background; the runtime counts the
// run until then, and keeps what could not be removed.
func (r *Runtime) runOnView(ctx context.Context, v *Runtime, req backend.RunRequest) (backend.RunResult, error) {
	res, err := v.run(ctx, req)
	go func() {
		v.runs.Wait()
		v.orphans.handOver(&r.orphans)
		r.runs.Done()
	}()
	return res, err
}

// view is a runtime for one run with limits l, sharing r's driver,
// admission, type-strip workers and shutdown signal, and its pool when the
// containers are interchangeable. It is never closed: r's Close stops its
// run through the shared stop context. Fields added to Runtime must be
// shared here as well.
func (r *Runtime) view(l Limits) *Runtime {
	v := &Runtime{
		opts:     r.opts,
		driver:   r.driver,
		log:      r.log,
		stopCtx:  r.stopCtx,
		stopRuns: func() {},
		strip:    r.strip,
		slots:    r.slots,
		queued:   r.queued,

		meterTick: r.meterTick,
	}
	v.opts.limits = l
	if l.sameContainer(r.opts.limits) {
		v.pool = r.pool
	}
	return v
}
