package containertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
)

// RunCloseWhileStarting checks that Runtime.Close, called while the warm
// pool is starting a sandbox, returns only when everything is gone. A
// pool of one serves a warm run; its refill is held in the driver (a
// wrapper of cfg's) until Close has begun, then goes on as an engine goes
// on with a request its client gave up on:
//
//   - create: the create completes on the engine, and its answer reaches
//     the runtime only after Close began;
//   - start: the engine starts the container, and the runtime hears its
//     context's error;
//   - create, cancelled: the create begins only after Close began, under
//     the cancelled context.
//
// Close must return nil, and then nothing of the runtime's owner may be
// left: no container (Driver.List), no task and no snapshot (where the
// driver counts them apart: a Leftovers method, as containerd's), no
// socket directory. It runs TypeScript only: a sandbox's lifetime does
// not depend on its language.
func RunCloseWhileStarting(t *testing.T, cfg Config) {
	cfg.validate(t)
	for _, hold := range []string{holdCreate, holdStart, holdCreateCancelled} {
		t.Run(hold, func(t *testing.T) {
			h := &holdingDriver{Driver: cfg.Driver, call: hold, nth: 2, held: make(chan struct{})}
			hcfg := cfg
			hcfg.Driver = h
			e, err := openEnv(hcfg, backend.TypeScript, testLogger(t), func(l *container.Limits) {
				// A loaded machine is slow to start a container, not
				// unable to.
				l.StartupTime = 90 * time.Second
			}, container.WithPool(1))
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			defer func() {
				if !closed {
					_ = e.close()
				}
			}()
			deadline := time.Now().Add(2 * time.Minute)
			for e.rt.PoolIdle() < 1 {
				if time.Now().After(deadline) {
					t.Fatal("the pool did not fill within 2 minutes")
				}
				time.Sleep(20 * time.Millisecond)
			}
			res := e.run(t, "return 1")
			if res.Error != nil || !res.Stats.Warm {
				t.Fatalf("warm run: %+v (warm %v)", res.Error, res.Stats.Warm)
			}
			select {
			case <-h.held:
			case <-time.After(2 * time.Minute):
				t.Fatalf("the pool's refill never reached its %s", hold)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cerr := e.rt.Close(ctx)
			var left []string
			if lc, ok := cfg.Driver.(leftoverCounter); ok {
				tasks, snapshots, err := lc.Leftovers(ctx, container.LabelOwner, e.owner)
				if err != nil || tasks != 0 || snapshots != 0 {
					left = append(left, fmt.Sprintf("%d task(s) and %d snapshot(s) (%v)", tasks, snapshots, err))
				}
			}
			closed = true
			if err := e.close(); err != nil { // containers and socket directories
				left = append(left, err.Error())
			}
			id, outcome := h.heldCall()
			t.Logf("CLOSE %s %s %s: held container %q: %s; Close: %v", cfg.driverName(), cfg.ociRuntime(), hold, id, outcome, cerr)
			if cerr != nil || len(left) != 0 {
				t.Fatalf("Close while the pool's refill was held at its %s: %v; left: %v", hold, cerr, left)
			}
		})
	}
}

// The calls RunCloseWhileStarting holds.
const (
	holdCreate          = "create"
	holdStart           = "start"
	holdCreateCancelled = "create, cancelled"
)

// leftoverCounter is a driver that counts what carries label=value apart
// from containers: tasks and snapshots (containerd's).
type leftoverCounter interface {
	Leftovers(ctx context.Context, label, value string) (tasks, snapshots int, err error)
}

// holdingDriver holds the nth Create or start of its driver until the
// call's context ends — the pool's, which Close cancels — and lets it go
// on then (see RunCloseWhileStarting). It keeps every optional ability
// the runtime uses; the start goes through OutputAttacher, emulated with
// Start when the driver lacks it.
type holdingDriver struct {
	container.Driver
	call string
	nth  int
	held chan struct{} // closed once the call is held

	mu      sync.Mutex
	n       int
	heldID  string
	outcome string
}

// hold counts a call of the kind held (mine) and reports whether it is
// the one to hold.
func (h *holdingDriver) hold(mine bool) bool {
	if !mine {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	return h.n == h.nth
}

func (h *holdingDriver) record(id, outcome string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.heldID, h.outcome = id, outcome
}

func (h *holdingDriver) heldCall() (id, outcome string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.heldID, h.outcome
}

func (h *holdingDriver) Create(ctx context.Context, s container.Spec) (string, error) {
	if !h.hold(h.call == holdCreate || h.call == holdCreateCancelled) {
		return h.Driver.Create(ctx, s)
	}
	if h.call == holdCreateCancelled {
		close(h.held)
		<-ctx.Done()
		id, err := h.Driver.Create(ctx, s)
		h.record(s.Name, fmt.Sprintf("created under a cancelled context: id %q, %v", id, err))
		return id, err
	}
	id, err := h.Driver.Create(ctx, s)
	h.record(id, fmt.Sprintf("created (%v), answered after Close began", err))
	close(h.held)
	<-ctx.Done()
	return id, err
}

func (h *holdingDriver) StartAttached(ctx context.Context, id string) (container.Streams, error) {
	start := func(ctx context.Context) (container.Streams, error) {
		if oa, ok := h.Driver.(container.OutputAttacher); ok {
			return oa.StartAttached(ctx, id)
		}
		return container.Streams{}, h.Driver.Start(ctx, id)
	}
	if !h.hold(h.call == holdStart) {
		return start(ctx)
	}
	close(h.held)
	<-ctx.Done()
	st, err := start(context.WithoutCancel(ctx))
	h.record(id, fmt.Sprintf("started after Close began (%v), the runtime told %v", err, ctx.Err()))
	if err != nil {
		return container.Streams{}, err
	}
	if st.Close != nil {
		_ = st.Close() // the runtime never sees them
	}
	return container.Streams{}, ctx.Err()
}

func (h *holdingDriver) CPUUsage(ctx context.Context, id string) (time.Duration, error) {
	if m, ok := h.Driver.(container.CPUMeter); ok {
		return m.CPUUsage(ctx, id)
	}
	return 0, fmt.Errorf("%w: the driver cannot read CPU time", errdefs.ErrNotImplemented)
}

func (h *holdingDriver) MemoryPeak(ctx context.Context, id string) (int64, error) {
	if m, ok := h.Driver.(container.MemoryMeter); ok {
		return m.MemoryPeak(ctx, id)
	}
	return 0, fmt.Errorf("%w: the driver cannot read peak memory", errdefs.ErrNotImplemented)
}

func (h *holdingDriver) PrimeMeters(ctx context.Context, id string) {
	if p, ok := h.Driver.(container.MeterPrimer); ok {
		p.PrimeMeters(ctx, id)
	}
}

var (
	_ container.CPUMeter       = (*holdingDriver)(nil)
	_ container.MemoryMeter    = (*holdingDriver)(nil)
	_ container.OutputAttacher = (*holdingDriver)(nil)
	_ container.MeterPrimer    = (*holdingDriver)(nil)
)
