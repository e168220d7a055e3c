package tsprep

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A program that forgets ServeWorkerIfRequested gets an error naming it,
// and its main is never re-executed doing its normal work for long: with no
// call at all no worker starts; a worker whose main does not reach the call
// is refused at its handshake (it printed, or exited) or killed when the
// handshake limit passes (it hung). With the call first thing, it strips.
// The program is testdata/forgetful, built here.
func TestServeWorkerIfRequestedIsNeeded(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "forgetful")
	build := exec.Command("go", "build", "-o", bin, "./testdata/forgetful")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const named = "call tsprep.ServeWorkerIfRequested from main"
	for _, tc := range []struct {
		mode    string
		want    []string
		started int // processes that ran the program's main
	}{
		{mode: "first", want: []string{"ok"}, started: 1},
		{mode: "never", want: []string{"error: ", named, "no worker was started"}, started: 1},
		{mode: "parent-print", want: []string{"error: ", named, `"usage: forgetful`}, started: 2},
		{mode: "parent-hang", want: []string{"error: ", named, "did not answer its handshake within 2s and was killed"}, started: 2},
		// What the re-executed main started dies with it (its process
		// group), and does not hold the parent past the handshake limit.
		{mode: "parent-spawn", want: []string{"error: ", named, "did not answer its handshake within 2s and was killed"}, started: 2},
		// A handshake refused is remembered: the second program does not
		// re-execute the main again.
		{mode: "parent-print-twice", want: []string{"error: ", named, `"usage: forgetful`}, started: 2},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "mode"), []byte(tc.mode), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "run")
			cmd.Dir = dir
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output %q, want it to contain %q", out, w)
				}
			}
			started, _ := os.ReadFile(filepath.Join(dir, "started"))
			pids := strings.Fields(string(started))
			if len(pids) != tc.started {
				t.Fatalf("%d processes ran the program's main (%v), want %d", len(pids), pids, tc.started)
			}
			if tc.mode == "parent-print-twice" && strings.Count(string(out), "error: ") != 2 {
				t.Errorf("output %q, want two errors", out)
			}
			if tc.mode == "parent-spawn" {
				if _, err := os.Stat(filepath.Join(dir, "finished")); err == nil {
					t.Error("the shell the re-executed main started ran to its end: the parent waited for it")
				}
				child, err := os.ReadFile(filepath.Join(dir, "children"))
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, strings.TrimSpace(string(child)))
			}
			for _, pid := range pids[1:] {
				n, err := strconv.Atoi(pid)
				if err != nil {
					t.Fatal(err)
				}
				if running(n) {
					t.Errorf("pid %s, started by the parent's worker, is still running", pid)
				}
			}
		})
	}
}

// running says whether pid is a process that has not ended: a killed
// process whose parent died waits as a zombie until init reaps it, which
// kill(pid, 0) still finds.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := strings.LastIndex(string(b), ") ")
	rest := string(b)[i+2:]
	ok := i >= 0
	return !ok || !strings.HasPrefix(rest, "Z")
}
