package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/bench"
)

// Bench's floors run in a sandbox made like a run's, over its bind-mounted
// socket, and come back with one timing per exchange (less the warm-up
// tenth); the leak check of newEnv finds nothing left.
func TestBenchFloors(t *testing.T) {
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for _, library := range []bool{false, true} {
				d, err := bench.Floor(ctx, e.rt, lang, library, 50)
				if err != nil {
					t.Fatalf("library %v: %v", library, err)
				}
				if len(d) != 45 || d[0] <= 0 {
					t.Fatalf("library %v: %d timings %v", library, len(d), d)
				}
			}
		})
	}
}

// RunCommand reports a command that fails with its status and stderr, and
// removes its container when the caller gives up mid-serve.
func TestRunCommandFailureAndCancel(t *testing.T) {
	e := newEnv(t, "python", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := e.rt.RunCommand(ctx, []string{"python3", "-I", "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"}, func(ctx context.Context, ln net.Listener) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if err == nil || !strings.Contains(err.Error(), "status 3") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("got %v", err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	err = e.rt.RunCommand(cctx, []string{"python3", "-I", "-c", "import time; time.sleep(60)"}, func(ctx context.Context, ln net.Listener) error {
		time.AfterFunc(time.Second, ccancel)
		<-ctx.Done()
		return ctx.Err()
	})
	if err == nil {
		t.Fatal("a cancelled RunCommand returned no error")
	}
	if err := e.rt.RunCommand(ctx, nil, nil); err == nil {
		t.Fatal("an empty command ran")
	}
}

// IdleMemory reads each idle pooled runner's cgroup memory.
func TestIdleMemory(t *testing.T) {
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil, container.WithPool(1))
			deadline := time.Now().Add(30 * time.Second)
			for e.rt.PoolIdle() < 1 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			ms, err := e.rt.IdleMemory(context.Background())
			if err != nil || len(ms) != 1 {
				t.Fatalf("%v %v", ms, err)
			}
			if ms[0].Usage < 1<<20 || ms[0].Anon <= 0 || ms[0].Anon > ms[0].Usage {
				t.Fatalf("implausible: %+v", ms[0])
			}
			t.Logf("%s idle: usage %.1f MiB, anon %.1f MiB", lang, float64(ms[0].Usage)/(1<<20), float64(ms[0].Anon)/(1<<20))
		})
	}
}
