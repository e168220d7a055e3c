package container

// Per-run limits: one program run with budgets lower than the runtime's.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dsh-container/dsh-container/backend"
)

// RunLimits lowers a runtime's budgets for one run. A zero field keeps the
// runtime's own value; no field can raise one.
//
// WallTime and ComputeTime are budgets of the run itself. MemoryBytes,
// NanoCPUs and Pids are settings of the container: a run that lowers one
// of them gets a container of its own, started cold with those settings,
// while a run that lowers only time budgets is served from the warm pool
// like any other.
type RunLimits struct {
	WallTime    time.Duration
	ComputeTime time.Duration
	MemoryBytes int64
	NanoCPUs    int64
	Pids        int64
}

// Lower returns l with rl's non-zero fields applied. It fails, wrapping
// backend.ErrInvalidRequest and naming every offending field, when rl
// raises a limit or sets one below its minimum (see Validate). A lower
// memory limit lowers the /tmp size with it to at most half of it.
func (l Limits) Lower(rl RunLimits) (Limits, error) {
	var errs []string
	lower := func(name string, max, v int64, unit func(int64) string) int64 {
		switch {
		case v == 0:
			return max
		case v < 0:
			errs = append(errs, fmt.Sprintf("%s %s: must be positive", name, unit(v)))
		case v > max:
			errs = append(errs, fmt.Sprintf("%s %s exceeds the runtime's %s: a run may lower a limit, never raise it", name, unit(v), unit(max)))
		}
		return v
	}
	dur := func(v int64) string { return time.Duration(v).String() }
	num := func(v int64) string { return fmt.Sprint(v) }
	cpus := func(v int64) string { return fmt.Sprintf("%g CPUs", float64(v)/1e9) }
	out := l
	out.WallTime = time.Duration(lower("wall time", int64(l.WallTime), int64(rl.WallTime), dur))
	out.ComputeTime = time.Duration(lower("compute time", int64(l.ComputeTime), int64(rl.ComputeTime), dur))
	out.MemoryBytes = lower("memory bytes", l.MemoryBytes, rl.MemoryBytes, num)
	out.NanoCPUs = lower("cpus", l.NanoCPUs, rl.NanoCPUs, cpus)
	out.Pids = lower("pids", l.Pids, rl.Pids, num)
	if len(errs) > 0 {
		return l, fmt.Errorf("%w: %s", backend.ErrInvalidRequest, strings.Join(errs, "; "))
	}
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

// RunWithLimits is Run with budgets lowered by rl (see RunLimits and
// Limits.Lower; a request that raises a limit fails with
// backend.ErrInvalidRequest before anything starts). The run shares the
// runtime's admission, type-strip workers, shutdown and, when it lowers
// only time budgets, its warm pool; Close waits for it like for any run.
//
// It is implemented beside Run, not inside it: the run goes through a
// view of the runtime whose limits are the lowered ones and whose pool is
// the runtime's own only when the containers are interchangeable. Fields
// added to Runtime must be shared in view as well.
func (r *Runtime) RunWithLimits(ctx context.Context, req backend.RunRequest, rl RunLimits) (backend.RunResult, error) {
	l, err := r.opts.limits.Lower(rl)
	if err != nil {
		return backend.RunResult{}, err
	}
	if l == r.opts.limits {
		return r.Run(ctx, req)
	}
	if err := r.enter(); err != nil {
		return backend.RunResult{}, err
	}
	return r.runOnView(ctx, r.view(l), req)
}

// runOnView runs req on v, a view of r the caller entered (r.enter). The
// view's container is torn down in the background; the runtime counts the
// run until then, and keeps what could not be removed.
func (r *Runtime) runOnView(ctx context.Context, v *Runtime, req backend.RunRequest) (backend.RunResult, error) {
	res, err := v.Run(ctx, req)
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
// run through the shared stop context.
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
