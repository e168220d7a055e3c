package tsprep

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// workerPIDs lists this process's type-strip workers.
func workerPIDs(t *testing.T) []int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || !strings.HasSuffix(s[:i], "(exe") {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == self {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Programs that break a worker limit are exceptions naming the limit; the
// host survives, the next program is stripped by a fresh worker, and no
// worker outlives close. Only the time case has a time limit that can
// answer: the others (and the next program) get one that cannot, so a
// loaded machine never turns a stack or memory failure into a timeout
// (the stack case met its 2 s under load, before its stack limit).
func TestStripperLimits(t *testing.T) {
	const never = time.Hour // a limit no case reaches: the others answer first
	for _, tc := range []struct {
		name, src, want string
		memory          int
		timeLimit       time.Duration
	}{
		// Straight to the worker: checkNesting would refuse these first.
		{name: "stack", src: strings.Repeat("!", 300000) + "1", want: "passed its 64 MiB stack limit", timeLimit: never},
		// A lower ceiling than the default lets a program of moderate
		// depth (a small stack) show the memory limit.
		{name: "memory", src: strings.Repeat("a=", 20000) + "1", want: "needed more than its 64 MiB memory limit", memory: 64 << 20, timeLimit: never},
		{name: "time", src: "const f = " + strings.Repeat("x=>", 3000) + "1", want: "longer than its 2s limit", timeLimit: 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStripper(1, Limits{Time: tc.timeLimit, MemoryBytes: tc.memory})
			_, err := s.strip(context.Background(), tc.src)
			var sf *errStripFailed
			if !errors.As(err, &sf) {
				t.Fatalf("got %v, want a strip failure", err)
			}
			if !strings.Contains(sf.msg, tc.want) {
				t.Fatalf("got %q, want it to name %q", sf.msg, tc.want)
			}
			s.lim.Time = never
			res, err := s.strip(context.Background(), "const x: number = 1\nreturn x")
			if err != nil || len(res.Errors) > 0 || !strings.Contains(res.Program, "return x") {
				t.Fatalf("the next program: %+v %v", res, err)
			}
			if n := len(workerPIDs(t)); n != 1 {
				t.Errorf("%d workers alive before close, want 1", n)
			}
			s.Close()
			if pids := workerPIDs(t); len(pids) != 0 {
				t.Errorf("workers left after close: %v", pids)
			}
			if _, err := s.strip(context.Background(), "1"); err == nil {
				t.Error("strip after close succeeded")
			}
		})
	}
}

func TestStripperCancellation(t *testing.T) {
	s := NewStripper(1, Limits{})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.strip(ctx, "const f = "+strings.Repeat("x=>", 3000)+"1")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("got %v after %v", err, time.Since(start))
	}
}

// ctxSwitches is the voluntary context switches of pid's threads, summed.
func ctxSwitches(t *testing.T, pid int) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/status")
		if err != nil {
			continue // a thread that ended
		}
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				k, _ := strconv.Atoi(strings.TrimSpace(v))
				n += k
			}
		}
	}
	return n
}

// An idle worker sleeps: its memory is watched only while it strips a
// program (it once polled every 2 ms forever — over 1,000 wake-ups a second
// per worker, per runtime, on an idle host). Over half a second idle it
// wakes a handful of times at most (the Go runtime's own timers), where
// the old watcher woke 636 times on this machine.
func TestStripWorkerIdlesQuietly(t *testing.T) {
	s := NewStripper(1, Limits{})
	defer s.Close()
	if _, err := s.strip(context.Background(), "const x: number = 1\nreturn x"); err != nil {
		t.Fatal(err)
	}
	pids := workerPIDs(t)
	if len(pids) != 1 {
		t.Fatalf("workers %v, want 1", pids)
	}
	before := ctxSwitches(t, pids[0])
	time.Sleep(500 * time.Millisecond)
	if woke := ctxSwitches(t, pids[0]) - before; woke > 50 {
		t.Fatalf("an idle worker woke %d times in 500 ms", woke)
	}
	// And it still strips, watched, after idling.
	if res, err := s.strip(context.Background(), "const y: string = 'a'\nreturn y"); err != nil || !strings.Contains(res.Program, "return y") {
		t.Fatalf("after idling: %+v %v", res, err)
	}
}
