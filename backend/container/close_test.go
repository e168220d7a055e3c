package container

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
)

// holdDriver is the fake engine with the pool's refill held: its nth
// Create (or StartAttached) waits until Close has begun — Close cancels
// the pool's context — and then goes on as an engine does with a request
// whose client gave up: the create completes; the start is carried out
// while the caller hears ctx's error. The engine then refuses the first
// refuse removals of that container (a killed sandbox not reaped yet:
// runsc's "sandbox is not running"), every one when refuse < 0.
type holdDriver struct {
	*fakeDriver
	call   string // "create" or "start"
	nth    int
	refuse int
	held   chan struct{} // closed once the call is held
	// refused, when set, is called after the engine refuses the held
	// container's nth removal (outside mu).
	refused func(n int)

	mu       sync.Mutex
	creates  int
	starts   int
	heldID   string
	removals int
}

func newHoldDriver(t *testing.T, call string, refuse int) *holdDriver {
	var runs atomic.Int32
	return &holdDriver{fakeDriver: newFakeDriver(t, answerOnce(&runs)), call: call, nth: 2, refuse: refuse, held: make(chan struct{})}
}

// hold reports whether this call is the one to hold, counting it.
func (h *holdDriver) hold(call string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := &h.creates
	if call == "start" {
		n = &h.starts
	}
	*n++
	return h.call == call && *n == h.nth
}

func (h *holdDriver) setHeld(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.heldID = id
}

func (h *holdDriver) Create(ctx context.Context, s Spec) (string, error) {
	if !h.hold("create") {
		return h.fakeDriver.Create(ctx, s)
	}
	close(h.held)
	<-ctx.Done()
	id, err := h.fakeDriver.Create(context.WithoutCancel(ctx), s)
	h.setHeld(id)
	return id, err
}

func (h *holdDriver) StartAttached(ctx context.Context, id string) (Streams, error) {
	if !h.hold("start") {
		return h.fakeDriver.StartAttached(ctx, id)
	}
	close(h.held)
	<-ctx.Done()
	h.setHeld(id)
	st, err := h.fakeDriver.StartAttached(context.WithoutCancel(ctx), id)
	if err != nil {
		return Streams{}, err
	}
	_ = st.Close() // the caller never sees them
	return Streams{}, ctx.Err()
}

func (h *holdDriver) Remove(ctx context.Context, id string) error {
	h.mu.Lock()
	refused := id == h.heldID && (h.refuse < 0 || h.removals < h.refuse)
	if id == h.heldID {
		h.removals++
	}
	n, hook := h.removals, h.refused
	h.mu.Unlock()
	if refused {
		if hook != nil {
			hook(n)
		}
		return fmt.Errorf("delete task %s: sandbox is not running: %w", id, errdefs.ErrUnknown)
	}
	return h.fakeDriver.Remove(ctx, id)
}

// closeWhileRefilling takes the one idle sandbox of a pool of one with a
// warm run, waits until the refill is held, and closes the runtime with
// ctx. It returns the runtime's socket directory and Close's error.
func closeWhileRefilling(ctx context.Context, t *testing.T, h *holdDriver) (string, error) {
	t.Helper()
	dir, _ := shortDir(t)
	rt, err := New(h, WithImage("fake"), WithSocketDir(dir), WithPool(1), WithOwner("close-test"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pool to fill", func() bool { return rt.PoolIdle() == 1 })
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
	if err != nil || res.Error != nil || !res.Stats.Warm {
		t.Fatalf("warm run: %v %+v (warm %v)", err, res.Error, res.Stats.Warm)
	}
	select {
	case <-h.held:
	case <-time.After(30 * time.Second):
		t.Fatalf("the pool's refill never reached %s", h.call)
	}
	return dir, rt.Close(ctx)
}

// Close returns only when what the pool was starting is gone: a Create
// or a Start that Close interrupts, and that the engine carries out
// anyway, is removed — also when the engine refuses the first removals,
// more than teardown's one and Close's one retry (issue 24: the soak's
// containerd/runsc sandbox, left with its task and snapshot after Close
// returned nil).
func TestCloseWhilePoolRefills(t *testing.T) {
	for _, tc := range []struct {
		name   string
		call   string
		refuse int
	}{
		{"create held", "create", 0},
		{"start held", "start", 0},
		{"create held, removal refused twice", "create", 2},
		{"start held, removal refused three times", "start", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHoldDriver(t, tc.call, tc.refuse)
			dir, err := closeWhileRefilling(context.Background(), t, h)
			if err != nil {
				t.Fatalf("Close: %v", err)
			}
			left, lerr := h.List(context.Background(), LabelOwner, "close-test")
			h.mu.Lock()
			id, removals := h.heldID, h.removals
			h.mu.Unlock()
			if lerr != nil || len(left) != 0 {
				t.Errorf("after Close returned nil: %d container(s) left (%v): %+v", len(left), lerr, left)
			}
			if id == "" || removals != tc.refuse+1 {
				t.Errorf("held container %q removed after %d attempts, want %d", id, removals, tc.refuse+1)
			}
			h.checkNoLeaks(t, dir)
		})
	}
}

// A container the engine never lets go of is not a silent success: Close
// returns an error naming it and the engine's reason once ctx ends. ctx
// ends when the engine has refused the container to Close itself — the
// teardown of the interrupted start is the first removal, Close's retries
// the next — so the pool's starts and the runs have all finished, however
// slow the machine, and what Close reports is the container alone.
func TestCloseReportsWhatIsLeft(t *testing.T) {
	h := newHoldDriver(t, "start", -1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const refusals = 3 // the teardown's, then two of Close's (one after backing off)
	h.refused = func(n int) {
		if n == refusals {
			cancel()
		}
	}
	dir, err := closeWhileRefilling(ctx, t, h)
	h.mu.Lock()
	id, removals := h.heldID, h.removals
	h.refuse = 0 // the engine relents: clean up
	h.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "closing container runtime: 1 container(s) could not be removed: "+id+" (") || !strings.Contains(err.Error(), "sandbox is not running") {
		t.Fatalf("Close: %v; want an error naming %s and why, and nothing else", err, id)
	}
	if removals != refusals {
		t.Errorf("Close returned after %d removals of %s, want %d (it returns once ctx ends)", removals, id, refusals)
	}
	if err := h.Remove(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	h.checkNoLeaks(t, dir)
}
