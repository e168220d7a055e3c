package container

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
)

func TestLimitsLower(t *testing.T) {
	base := DefaultLimits()
	cases := []struct {
		name string
		rl   RunLimits
		want func(l *Limits)
		err  []string
	}{
		{name: "zero keeps everything", want: func(*Limits) {}},
		{
			name: "every field lowered",
			rl:   RunLimits{WallTime: time.Second, ComputeTime: 500 * time.Millisecond, MemoryBytes: 64 << 20, NanoCPUs: 5e8, Pids: 32},
			want: func(l *Limits) {
				l.WallTime, l.ComputeTime, l.MemoryBytes, l.NanoCPUs, l.Pids = time.Second, 500*time.Millisecond, 64<<20, 5e8, 32
				l.TmpfsBytes = 32 << 20 // at most half the memory
			},
		},
		{name: "equal is not raising", rl: RunLimits{MemoryBytes: base.MemoryBytes, Pids: base.Pids}, want: func(*Limits) {}},
		{
			name: "raising names each limit",
			rl:   RunLimits{WallTime: time.Hour, MemoryBytes: 1 << 30, NanoCPUs: 4e9},
			err:  []string{"wall time 1h0m0s exceeds the runtime's 30s", "memory bytes 1073741824 exceeds", "cpus 4 CPUs exceeds the runtime's 1 CPUs", "never raise"},
		},
		{name: "negative", rl: RunLimits{Pids: -1}, err: []string{"pids -1: must be positive"}},
		{name: "below the minimum", rl: RunLimits{MemoryBytes: 1 << 20}, err: []string{"memory 1048576 bytes: must be at least 32 MiB"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := base.Lower(c.rl)
			if c.err != nil {
				if !errors.Is(err, backend.ErrInvalidRequest) {
					t.Fatalf("got %v, want an invalid request", err)
				}
				for _, s := range c.err {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := base
			c.want(&want)
			if got != want {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

// A run that lowers only time budgets takes a pooled container and meets
// its own wall budget; one that lowers a container setting gets a cold
// container created with it; neither changes the runtime's own limits.
func TestRunWithLimits(t *testing.T) {
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		if _, err := r.handshake(); err != nil {
			return ExitStatus{Code: 99}
		}
		<-ctx.Done() // never finishes: only a budget ends the run
		return ExitStatus{Code: 137}
	})
	rec := &recordingDriver{fakeDriver: d}
	rt, dir := newTestRuntime(t, rec, nil, WithPool(1))
	d.rt = rt
	defer d.checkNoLeaks(t, dir)
	waitIdle := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); rt.PoolIdle() < 1; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the pool never filled")
			}
		}
	}
	ctx := context.Background()
	req := backend.RunRequest{Program: "return 1"}

	waitIdle()
	start := time.Now()
	res, err := rt.RunWithLimits(ctx, req, RunLimits{WallTime: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Kind != backend.FailureTimeout || !strings.Contains(res.Error.Message, "300ms") {
		t.Fatalf("got %+v, want a timeout at the lowered 300ms wall budget", res.Error)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("the lowered wall budget fired after %v", el)
	}
	if !res.Stats.Warm {
		t.Error("a run lowering only time budgets did not take the pooled container")
	}

	waitIdle()
	res, err = rt.RunWithLimits(ctx, req, RunLimits{WallTime: 200 * time.Millisecond, MemoryBytes: 64 << 20, Pids: 16})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.Warm {
		t.Error("a run lowering the memory limit took a pooled container")
	}
	rec.mu.Lock()
	var lowered, other int
	for _, s := range rec.specs {
		switch {
		case s.MemoryBytes == 64<<20 && s.Pids == 16 && s.TmpfsBytes == 32<<20:
			lowered++
		case s.MemoryBytes == DefaultLimits().MemoryBytes && s.Pids == DefaultLimits().Pids:
			other++
		default:
			t.Errorf("a container with unexpected settings: %+v", s)
		}
	}
	rec.mu.Unlock()
	if lowered != 1 || other < 2 {
		t.Errorf("%d containers with the lowered settings (want 1), %d with the runtime's (want at least 2)", lowered, other)
	}
	if rt.Limits() != newLimitsForTest() {
		t.Errorf("the runtime's limits changed: %+v", rt.Limits())
	}

	if _, err := rt.RunWithLimits(ctx, req, RunLimits{Pids: 1 << 20}); !errors.Is(err, backend.ErrInvalidRequest) {
		t.Fatalf("raising pids: got %v, want an invalid request", err)
	}
}

// recordingDriver records the spec of every container created.
type recordingDriver struct {
	*fakeDriver
	mu    sync.Mutex
	specs []Spec
}

func (d *recordingDriver) Create(ctx context.Context, s Spec) (string, error) {
	d.mu.Lock()
	d.specs = append(d.specs, s)
	d.mu.Unlock()
	return d.fakeDriver.Create(ctx, s)
}

// newLimitsForTest are newTestRuntime's limits.
func newLimitsForTest() Limits {
	l := DefaultLimits()
	l.WallTime = 5 * time.Second
	l.StartupTime = 5 * time.Second
	return l
}
