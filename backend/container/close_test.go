package container

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	marked := h.heldID
	h.mu.Unlock()
	return refuseRemovals(ctx, h.fakeDriver, &h.mu, id, marked, h.refuse, &h.removals, h.refused)
}

// refuseRemovals removes id through d unless it is marked and the engine
// still refuses it: the marked container's first refuse removals (all
// when refuse < 0) fail as the engine answers a killed sandbox not yet
// reaped, counted in *removals (under mu); hook, when set, is called
// after each refusal with the count.
func refuseRemovals(ctx context.Context, d *fakeDriver, mu *sync.Mutex, id, marked string, refuse int, removals *int, hook func(n int)) error {
	mu.Lock()
	refused := id == marked && (refuse < 0 || *removals < refuse)
	if id == marked {
		*removals++
	}
	n := *removals
	mu.Unlock()
	if refused {
		if hook != nil {
			hook(n)
		}
		return fmt.Errorf("delete task %s: sandbox is not running: %w", id, errdefs.ErrUnknown)
	}
	return d.Remove(ctx, id)
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

// leftDriver is the fake engine whose nth create fails the way a driver's
// does when removing what it made failed too: the container is there, and
// Create returns a *LeftError naming it instead of its id (with keep, the
// create succeeds). The engine refuses the first refuse removals of that
// container (every one when refuse < 0); refused, when set, is called
// after each refusal (outside mu).
type leftDriver struct {
	*fakeDriver
	nth, refuse int
	keep        bool
	refused     func(n int)

	mu       sync.Mutex
	creates  int
	leftID   string
	removals int
}

func (l *leftDriver) Create(ctx context.Context, s Spec) (string, error) {
	id, err := l.fakeDriver.Create(ctx, s)
	l.mu.Lock()
	l.creates++
	n := l.creates
	if n == l.nth {
		l.leftID = id
	}
	l.mu.Unlock()
	if n != l.nth || err != nil || l.keep {
		return id, err
	}
	return "", &LeftError{ID: id, Err: fmt.Errorf("creating container: %w", context.DeadlineExceeded), Undo: fmt.Errorf("sandbox is not running: %w", errdefs.ErrUnknown)}
}

func (l *leftDriver) Remove(ctx context.Context, id string) error {
	l.mu.Lock()
	marked := l.leftID
	l.mu.Unlock()
	return refuseRemovals(ctx, l.fakeDriver, &l.mu, id, marked, l.refuse, &l.removals, l.refused)
}

func (l *leftDriver) left() (id string, removals int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leftID, l.removals
}

// A create that fails and whose undo fails too leaves a container only the
// driver's *LeftError names: the runtime keeps it among its orphans, so
// Close removes it (retrying while the engine refuses) and returns nil
// only once it is gone — whether the create was a run's, the pool's
// refill or RunCommand's. Close returned nil with it there (review of
// issue 24, finding 3).
func TestCloseRemovesWhatAFailedCreateLeft(t *testing.T) {
	for _, tc := range []struct {
		name        string
		nth, refuse int
		make        func(t *testing.T, l *leftDriver, dir string) *Runtime
	}{
		{"a run's create", 1, 0, runsOnce},
		{"a run's create, removal refused twice", 1, 2, runsOnce},
		// The first create fills the pool.
		{"the pool's refill", 2, 0, refillsOnce},
		{"the pool's refill, removal refused three times", 2, 3, refillsOnce},
		{"RunCommand's create", 1, 1, commandsOnce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			l := &leftDriver{fakeDriver: newFakeDriver(t, answerOnce(&runs)), nth: tc.nth, refuse: tc.refuse}
			dir, _ := shortDir(t)
			rt := tc.make(t, l, dir)
			if id, _ := l.left(); id == "" {
				t.Fatal("the failing create never happened")
			}
			if err := rt.Close(context.Background()); err != nil {
				t.Fatalf("Close: %v", err)
			}
			id, removals := l.left()
			if left, err := l.List(context.Background(), LabelOwner, "left-test"); err != nil || len(left) != 0 {
				t.Errorf("Close returned nil with %d container(s) of its owner left (%v): %+v", len(left), err, left)
			}
			if removals != tc.refuse+1 {
				t.Errorf("%s removed after %d attempts, want %d", id, removals, tc.refuse+1)
			}
			l.checkNoLeaks(t, dir)
		})
	}
}

func newLeftRuntime(t *testing.T, l *leftDriver, dir string, opts ...Option) *Runtime {
	t.Helper()
	rt, err := New(l, append([]Option{WithImage("fake"), WithSocketDir(dir), WithOwner("left-test")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// runsOnce: a run whose create fails, reported as the run's error.
func runsOnce(t *testing.T, l *leftDriver, dir string) *Runtime {
	rt := newLeftRuntime(t, l, dir)
	_, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
	var left *LeftError
	if !errors.As(err, &left) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v, want the create's *LeftError, its cause visible", err)
	}
	return rt
}

// refillsOnce: a pool of one, filled, then taken by a warm run; the
// refill's create fails.
func refillsOnce(t *testing.T, l *leftDriver, dir string) *Runtime {
	rt := newLeftRuntime(t, l, dir, WithPool(1))
	waitFor(t, "the pool to fill", func() bool { return rt.PoolIdle() == 1 })
	if res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"}); err != nil || res.Error != nil {
		t.Fatal(err, res.Error)
	}
	waitFor(t, "the refill's create", func() bool { id, _ := l.left(); return id != "" })
	return rt
}

// commandsOnce: RunCommand, whose create fails.
func commandsOnce(t *testing.T, l *leftDriver, dir string) *Runtime {
	rt := newLeftRuntime(t, l, dir)
	err := rt.RunCommand(context.Background(), []string{"true"}, func(context.Context, net.Listener) error { return nil })
	var left *LeftError
	if !errors.As(err, &left) {
		t.Fatalf("RunCommand: %v, want the create's *LeftError", err)
	}
	return rt
}

// A container the engine never lets go of after a failed create is not a
// silent success: Close names it and the engine's reason once ctx ends
// (here, when the engine has refused it to Close three times).
func TestCloseReportsWhatAFailedCreateLeft(t *testing.T) {
	var runs atomic.Int32
	l := &leftDriver{fakeDriver: newFakeDriver(t, answerOnce(&runs)), nth: 1, refuse: -1}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const refusals = 3
	l.refused = func(n int) {
		if n == refusals {
			cancel()
		}
	}
	dir, _ := shortDir(t)
	rt := runsOnce(t, l, dir)
	err := rt.Close(ctx)
	id, removals := l.left()
	l.mu.Lock()
	l.refuse = 0 // the engine relents: clean up
	l.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "closing container runtime: 1 container(s) could not be removed: "+id+" (") || !strings.Contains(err.Error(), "sandbox is not running") {
		t.Fatalf("Close: %v; want an error naming %s and why", err, id)
	}
	if removals != refusals {
		t.Errorf("Close returned after %d removals of %s, want %d", removals, id, refusals)
	}
	if err := l.Remove(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	l.checkNoLeaks(t, dir)
}

// A removal RunCommand's own cleanup fails is an orphan too: Close
// removes it, and returned nil with it there.
func TestCloseRemovesWhatRunCommandLeft(t *testing.T) {
	l := &leftDriver{fakeDriver: newFakeDriver(t, func(context.Context, *fakeRunner) ExitStatus { return ExitStatus{} }), nth: 1, keep: true, refuse: 1}
	dir, _ := shortDir(t)
	rt := newLeftRuntime(t, l, dir)
	err := rt.RunCommand(context.Background(), []string{"true"}, func(ctx context.Context, ln net.Listener) error {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
		return nil
	})
	id, _ := l.left()
	if id == "" || err == nil || !strings.Contains(err.Error(), "removing container "+id) {
		t.Fatalf("RunCommand: %v, want its removal's refusal of %q", err, id)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, removals := l.left(); removals != 2 {
		t.Errorf("%s removed after %d attempts, want 2", id, removals)
	}
	l.checkNoLeaks(t, dir)
}
