package container

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (d *fakeDriver) count() (live, created int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.containers), d.created
}

// answerOnce serves exactly one program per container and counts runs.
func answerOnce(runs *atomic.Int32) func(ctx context.Context, r *fakeRunner) ExitStatus {
	return func(ctx context.Context, r *fakeRunner) ExitStatus {
		if _, err := r.handshake(); err != nil {
			return ExitStatus{Code: 137}
		}
		runs.Add(1)
		r.send(done(`"warm?"`))
		// A second run frame would mean reuse: fail loudly if one comes.
		if _, _, err := r.Conn.ReadMessage(); err == nil {
			r.t.Error("a container received a second message after its program")
		}
		<-ctx.Done()
		return ExitStatus{}
	}
}

func TestPoolServesWarmRunsAndNeverReuses(t *testing.T) {
	var runs atomic.Int32
	d := newFakeDriver(t, answerOnce(&runs))
	dir, _ := shortDir(t)
	rt, err := New(d, WithImage("fake"), WithSocketDir(dir), WithPool(2))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pool to fill", func() bool { return rt.pool.idleCount() == 2 })
	for i := 0; i < 5; i++ {
		res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
		if err != nil || res.Error != nil {
			t.Fatal(err, res.Error)
		}
		if i < 2 && !res.Stats.Warm {
			t.Fatalf("run %d was cold with a full pool", i)
		}
	}
	if n := runs.Load(); n != 5 {
		t.Fatalf("%d programs served", n)
	}
	waitFor(t, "the pool to refill", func() bool { return rt.pool.idleCount() == 2 })
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.checkNoLeaks(t, dir)
}

func TestPoolReplacesExpiredAndDeadSandboxes(t *testing.T) {
	var dieIdle atomic.Bool
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.hello()
		if dieIdle.Load() {
			return ExitStatus{Code: 1} // dies while waiting in the pool
		}
		<-ctx.Done()
		return ExitStatus{}
	})
	dir, _ := shortDir(t)
	rt, err := New(d, WithImage("fake"), WithSocketDir(dir), WithPool(1), WithPoolTTL(80*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replacement after the TTL", func() bool { _, c := d.count(); return c >= 3 })
	dieIdle.Store(true)
	// Idle sandboxes now die: get must not hand one out.
	waitFor(t, "a dead idle sandbox", func() bool { _, c := d.count(); return c >= 5 })
	if sb := rt.pool.get(); sb != nil && !sb.healthy() {
		t.Fatal("pool handed out a dead sandbox")
	} else if sb != nil {
		sb.teardown(context.Background(), rt.log)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.checkNoLeaks(t, dir)
}

func TestAdmissionQueuesThenRejects(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int32
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		started.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		r.send(done(`1`))
		<-ctx.Done()
		return ExitStatus{}
	})
	dir, _ := shortDir(t)
	rt, err := New(d, WithImage("fake"), WithSocketDir(dir), WithAdmission(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	results := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
			if err == nil && res.Error != nil {
				err = res.Error
			}
			results <- err
		}()
		if i == 0 {
			waitFor(t, "the first run to start", func() bool { return started.Load() == 1 })
		}
	}
	waitFor(t, "the second run to queue", func() bool { return len(rt.queued) == 1 })
	_, err = rt.Run(context.Background(), backend.RunRequest{Program: "x"})
	if !errors.Is(err, ErrOverloaded) || !errdefs.IsResourceExhausted(err) {
		t.Fatalf("third run: %v, want ErrOverloaded", err)
	}
	// A queued run whose caller gives up is an abort, not an overload.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := rt.Run(ctx, backend.RunRequest{Program: "x"}); err == nil && (res.Error == nil || res.Error.Kind != backend.FailureAbort) {
		t.Fatalf("cancelled queued run: %+v", res.Error)
	}
	close(release)
	for i := 0; i < 2; i++ {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	rt.Close(context.Background())
	d.checkNoLeaks(t, dir)
}
