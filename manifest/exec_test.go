package manifest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestExec(t *testing.T) {
	ctx := context.Background()
	out, err := Exec(ctx, Tool{Name: "cat", Command: []string{"/bin/cat"}}, json.RawMessage(`{"a":1}`))
	if err != nil || out != `{"a":1}` {
		t.Fatalf("%q %v", out, err)
	}
	_, err = Exec(ctx, Tool{Name: "f", Command: []string{"/bin/sh", "-c", "echo nope >&2; exit 3"}}, nil)
	if err == nil || err.Error() != "nope" {
		t.Fatalf("stderr as message: %v", err)
	}
	_, err = Exec(ctx, Tool{Name: "q", Command: []string{"/bin/sh", "-c", "exit 4"}}, nil)
	if err == nil || err.Error() != `tool "q" exited with status 4` {
		t.Fatalf("silent failure: %v", err)
	}
	_, err = Exec(ctx, Tool{Name: "k", Command: []string{"/bin/sh", "-c", "kill -SEGV $$"}}, nil)
	if err == nil || err.Error() != `tool "k" was killed by signal 11 (segmentation fault)` {
		t.Fatalf("killed by a signal: %v", err)
	}
	_, err = Exec(ctx, Tool{Name: "m", Command: []string{"/nonexistent"}}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), `tool "m": `) {
		t.Fatalf("missing binary: %v", err)
	}
	if _, err := Exec(ctx, Tool{Name: "n"}, nil); err == nil || err.Error() != `tool "n" has no command` {
		t.Fatalf("no command: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Exec(cctx, Tool{Name: "s", Command: []string{"/bin/sleep", "5"}}, nil); err == nil || err.Error() != `tool "s" cancelled` {
		t.Fatalf("cancelled: %v", err)
	}
	// Invalid UTF-8 never reaches the program.
	out, err = Exec(ctx, Tool{Name: "u", Command: []string{"/bin/sh", "-c", `printf 'a\377b'; printf 'c\377d' >&2; exit $1`, "sh", "0"}}, nil)
	if err != nil || out != "a\uFFFDb" {
		t.Fatalf("%q %v", out, err)
	}
	_, err = Exec(ctx, Tool{Name: "u", Command: []string{"/bin/sh", "-c", `printf 'a\377b'; printf 'c\377d' >&2; exit $1`, "sh", "1"}}, nil)
	if err == nil || err.Error() != "c\uFFFDd" {
		t.Fatalf("%v", err)
	}
	// The host environment is passed through (tools run with the host's
	// authority); the sandbox never sees it.
	t.Setenv("DSH_TOOL_ENV", "visible")
	out, err = Exec(ctx, Tool{Name: "e", Command: []string{"/bin/sh", "-c", "printf %s \"$DSH_TOOL_ENV\""}}, nil)
	if err != nil || out != "visible" {
		t.Fatalf("%q %v", out, err)
	}
}

func TestExecCapsStdout(t *testing.T) {
	// 100 MB of stdout: the result is the first MiB and the marker, and
	// the count covers everything the tool printed.
	out, err := Exec(context.Background(), Tool{Name: "big", Command: []string{"/bin/sh", "-c", "head -c 100000000 /dev/zero"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	marker := "\n[dsh-container: output truncated: the tool printed 100000000 bytes, the cap is 1048576]"
	if len(out) != DefaultMaxOutputBytes+len(marker) || !strings.HasSuffix(out, marker) || strings.Trim(out[:DefaultMaxOutputBytes], "\x00") != "" {
		t.Fatalf("%d bytes, ending %q", len(out), out[max(0, len(out)-120):])
	}

	// A tool's own cap; a cut never leaves half a character.
	tool := Tool{Name: "small", Command: []string{"/bin/sh", "-c", "printf 'abcd\\303\\251fgh'"}, MaxOutputBytes: 5}
	out, err = Exec(context.Background(), tool, nil)
	if want := "abcd\n[dsh-container: output truncated: the tool printed 9 bytes, the cap is 5]"; err != nil || out != want {
		t.Fatalf("%q %v, want %q", out, err, want)
	}
	tool.MaxOutputBytes = 6
	out, err = Exec(context.Background(), tool, nil)
	if want := "abcdé\n[dsh-container: output truncated: the tool printed 9 bytes, the cap is 6]"; err != nil || out != want {
		t.Fatalf("%q %v, want %q", out, err, want)
	}
	// Exactly at the cap is not truncated.
	tool.MaxOutputBytes = 9
	if out, err = Exec(context.Background(), tool, nil); err != nil || out != "abcdéfgh" {
		t.Fatalf("%q %v", out, err)
	}
}

func TestExecCapsStderr(t *testing.T) {
	_, err := Exec(context.Background(), Tool{Name: "loud", Command: []string{"/bin/sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' x >&2; exit 1"}}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	suffix := fmt.Sprintf("… (%d more bytes cut)", 1000000-MaxMessageBytes)
	if !strings.HasSuffix(msg, suffix) || msg != strings.Repeat("x", MaxMessageBytes)+suffix {
		t.Fatalf("%d bytes, ending %q", len(msg), msg[max(0, len(msg)-80):])
	}
}

// family runs testdata/spawn.sh as a tool and returns its result and the
// pids it recorded. With wait set, it calls wait(pids) once all pids are
// recorded and checks they were all alive then, while the tool is running.
func family(t *testing.T, ctx context.Context, tool Tool, mode string, wait func()) (string, []proc, error) {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "pids")
	tool.Command = []string{"/bin/sh", "testdata/spawn.sh", pidfile, mode}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := Exec(ctx, tool, nil)
		done <- result{out, err}
	}()
	var procs []proc
	if wait != nil {
		deadline := time.Now().Add(10 * time.Second)
		for procs = readPids(t, pidfile); len(procs) < 6; procs = readPids(t, pidfile) {
			if time.Now().After(deadline) {
				t.Fatalf("the tool recorded only %d pids in 10s", len(procs))
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, p := range procs {
			if !p.alive() {
				t.Fatalf("pid %d was never seen alive", p.pid)
			}
		}
		wait()
	}
	r := <-done
	if wait == nil {
		procs = readPids(t, pidfile)
	}
	cleanUp(t, procs)
	if len(procs) != 6 {
		t.Fatalf("%d pids recorded: %v", len(procs), procs)
	}
	return r.out, procs, r.err
}

func TestExecKillsTheGroupAtTheEnd(t *testing.T) {
	// The tool exits at once, leaving a child that holds stdout, one that
	// holds nothing, an orphan and a subshell with a child: the call
	// returns without waiting for them and none of them survives it. (A
	// child left holding stdout would otherwise stall the call for
	// waitDelay and make it fail.)
	start := time.Now()
	out, procs, err := family(t, context.Background(), Tool{Name: "fork"}, "exit", nil)
	if err != nil || out != "done\n" {
		t.Fatalf("%q %v", out, err)
	}
	if d := time.Since(start); d > waitDelay {
		t.Errorf("the call took %v", d)
	}
	assertGone(t, procs)
}

func TestExecTimeoutKillsTheGroup(t *testing.T) {
	var started time.Time
	out, procs, err := family(t, context.Background(), Tool{Name: "hang", TimeoutMs: 2000}, "hang", func() { started = time.Now() })
	if err == nil || err.Error() != `tool "hang" timed out after 2s` || out != "" {
		t.Fatalf("%q %v", out, err)
	}
	if d := time.Since(started); d > 2*time.Second+waitDelay {
		t.Errorf("the call returned %v after its processes were all seen", d)
	}
	assertGone(t, procs)
}

func TestExecCancelKillsTheGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelled time.Time
	out, procs, err := family(t, ctx, Tool{Name: "hang"}, "hang", func() { cancelled = time.Now(); cancel() })
	if err == nil || err.Error() != `tool "hang" cancelled` || out != "" {
		t.Fatalf("%q %v", out, err)
	}
	if d := time.Since(cancelled); d > waitDelay {
		t.Errorf("the call returned %v after its context was cancelled", d)
	}
	assertGone(t, procs)
}

func TestExecProcessOutsideTheGroup(t *testing.T) {
	// Not covered, by design: a process that leaves the tool's process
	// group (setsid) survives the call. It cannot stall the call: holding
	// stdout, it is given waitDelay after the tool exits, then the call is
	// rejected.
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Fatal("this test needs setsid (util-linux, on every Debian host):", err)
	}
	pidfile := filepath.Join(t.TempDir(), "pid")
	start := time.Now()
	out, err := Exec(context.Background(), Tool{Name: "escape", Command: []string{"/bin/sh", "testdata/escape.sh", pidfile}}, nil)
	elapsed := time.Since(start)
	procs := readPids(t, pidfile)
	cleanUp(t, procs)
	want := `tool "escape" exited, but a process it started outside its process group kept its output open; gave up after 2s`
	if err == nil || err.Error() != want || out != "" {
		t.Fatalf("%q %v", out, err)
	}
	if elapsed < waitDelay || elapsed > waitDelay+5*time.Second {
		t.Errorf("the call took %v", elapsed)
	}
	if len(procs) != 1 || !procs[0].alive() {
		t.Fatalf("the escaped process: %v", procs)
	}
}

// proc is a process seen in /proc: its pid and its name then, so a reused
// pid is not mistaken for it.
type proc struct {
	pid  int
	comm string
}

func readPids(t *testing.T, pidfile string) []proc {
	t.Helper()
	data, err := os.ReadFile(pidfile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var procs []proc
	for _, line := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(line)
		if err != nil {
			t.Fatalf("pid file: %q", data)
		}
		comm, _ := procState(pid)
		procs = append(procs, proc{pid, comm})
	}
	return procs
}

// procState reads a process's name and state from /proc/PID/stat ("" when
// there is no such process).
func procState(pid int) (comm string, state byte) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0
	}
	s := string(data) // "pid (comm) S ..."
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+2 >= len(s) {
		return "", 0
	}
	return s[open+1 : end], s[end+2]
}

// alive reports whether the process still runs: it exists, is the same
// program, and is not a zombie (a killed orphan waits as a zombie until
// its new parent reaps it).
func (p proc) alive() bool {
	comm, state := procState(p.pid)
	return comm != "" && comm == p.comm && state != 'Z' && state != 'X'
}

// cleanUp kills what a failed test leaves running.
func cleanUp(t *testing.T, procs []proc) {
	t.Cleanup(func() {
		for _, p := range procs {
			if p.alive() {
				syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
	})
}

func assertGone(t *testing.T, procs []proc) {
	t.Helper()
	// SIGKILL is sent before the call returns; dying takes a moment.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var alive []proc
		for _, p := range procs {
			if p.alive() {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running 5s on: %v", alive)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestExecHostDies(t *testing.T) {
	// When the host process dies mid-call, the tool dies with it (the
	// parent-death signal). The host here is this test binary re-run as a
	// helper that calls a hanging tool; the test kills it with SIGKILL.
	if pidfile := os.Getenv("DSH_MANIFEST_HOST_HELPER"); pidfile != "" {
		Exec(context.Background(), Tool{Name: "t", Command: []string{"/bin/sh", "-c", `echo $$ >"$0"; exec sleep 307`, pidfile}}, nil)
		return
	}
	pidfile := filepath.Join(t.TempDir(), "pid")
	host := exec.Command(os.Args[0], "-test.run=^TestExecHostDies$", "-test.count=1")
	host.Env = append(os.Environ(), "DSH_MANIFEST_HOST_HELPER="+pidfile)
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Process.Kill(); host.Wait() })
	var procs []proc
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if procs = readPids(t, pidfile); len(procs) == 1 && procs[0].comm == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tool did not start: %v", procs)
		}
	}
	cleanUp(t, procs)
	if !procs[0].alive() {
		t.Fatal("the tool was never seen alive")
	}
	host.Process.Kill()
	host.Wait()
	assertGone(t, procs)
}
