package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/internal/testenv"
	"github.com/dsh-container/dsh-container/tsprep"
)

// The host-bounds suite (issue 10): programs that attack the host process
// around their container — its parser, its bridge, its buffers, its
// terminal, its view of outcomes — rather than the container itself. Each
// case asserts the bound, and that the host still serves the next program.
//
//	go test -count=1 -run 'TestHostBounds|TestServeUnderAttack' -v ./e2e/ | grep BOUND

// bound logs a quotable line.
func bound(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("BOUND %s: %s", t.Name(), fmt.Sprintf(format, args...))
}

// stillServes runs a trivial program: the host survived the case.
func stillServes(t *testing.T, e *env, lang backend.Language) {
	t.Helper()
	wantValue(t, e.run(t, map[backend.Language]string{backend.TypeScript: "return 1", backend.Python: "return 1"}[lang]), "1")
}

// deepTS returns TypeScript programs that nest n levels in constructs a
// parser recurses on, each under the program size cap.
func deepTS(n int) map[string]string {
	r := strings.Repeat
	return map[string]string{
		"parentheses":  "return " + r("(", n) + "1" + r(")", n),
		"not":          "return " + r("!", n) + "1",
		"assignments":  "let a = 0; " + r("a=", n) + "1; return a",
		"templates":    "return " + r("`${", n) + "1" + r("}`", n),
		"ternaries":    "const a = 1, b = 2, c = 3; return " + r("a?b:", n) + "c",
		"arrow bodies": "const f = " + r("x=>", n) + "1; return 1",
		"typeof":       "return " + r("typeof ", n) + "1",
	}
}

// Class 1: host-side parsing is bounded. Every deep shape, at the program
// size cap, is an exception naming the limit and starts no container; the
// host's memory does not move; the next program runs.
func TestHostBoundsDeepPrograms(t *testing.T) {
	e := newEnv(t, backend.TypeScript, nil)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for name, src := range deepTS(60000) {
		for len(src) > e.rt.Limits().ProgramBytes {
			src = src[:len(src)/2] // still far deeper than the limit, and still deep at its start
		}
		start := time.Now()
		res := e.run(t, src)
		if res.Error == nil || res.Error.Kind != backend.FailureException || !strings.Contains(res.Error.Message, fmt.Sprintf("deeper than %d levels", tsprep.MaxNesting)) {
			t.Fatalf("%s: %+v", name, res.Error)
		}
		bound(t, "%s, %d bytes: exception in %v: %.90s…", name, len(src), time.Since(start).Round(time.Millisecond), res.Error.Message)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapSys) - int64(before.HeapSys); grew > 64<<20 {
		t.Errorf("the host's heap grew by %d MiB", grew>>20)
	}
	if n := len(e.containers(t)); n != 0 {
		t.Errorf("%d containers exist: deep programs must start none", n)
	}
	stillServes(t, e, backend.TypeScript)
}

// Class 2: once the runner is connected, connections from the program to
// the bridge socket are closed unread; a flood of them, each offering a
// large request head, leaves the run, the host's goroutines and its memory
// where they were.
func TestHostBoundsBridgeConnections(t *testing.T) {
	programs := both(`
const net = await import("node:net");
const head = "GET /v1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Pad: " + "A".repeat(1 << 20);
let closed = 0, refused = 0, answered = 0;
for (let i = 0; i < 300; i++) {
  await new Promise<void>((resolve) => {
    const s = net.connect("/run/dsh/bridge.sock");
    let got = "";
    s.on("connect", () => s.write(head, () => {}));
    s.on("data", (d: Buffer) => { got += d.toString(); });
    s.on("error", () => {});
    s.on("close", () => { if (got) answered++; else closed++; resolve(); });
    setTimeout(() => { s.destroy(); resolve(); }, 3000);
  });
}
return {closed, refused, answered};`, `
import socket
head = b"GET /v1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Pad: " + b"A" * (1 << 20)
closed = refused = answered = 0
for i in range(300):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect("/run/dsh/bridge.sock")
    except OSError:
        refused += 1
        s.close()
        continue
    try:
        s.sendall(head)
    except OSError:
        pass
    try:
        got = s.recv(1)
    except OSError:
        got = b""
    if got:
        answered += 1
    else:
        closed += 1
    s.close()
return {"closed": closed, "refused": refused, "answered": answered}`)
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			goroutines := runtime.NumGoroutine()
			res := e.run(t, programs[lang])
			v := decode[map[string]int](t, res)
			if v["answered"] != 0 || v["closed"]+v["refused"] != 300 {
				t.Fatalf("connections: %v", v)
			}
			if n := runtime.NumGoroutine(); n > goroutines+20 {
				t.Errorf("goroutines grew from %d to %d", goroutines, n)
			}
			bound(t, "300 connections with 1 MiB heads: %v, run %v", v, res.Stats.Wall.Round(time.Millisecond))
			stillServes(t, e, lang)
		})
	}
}

// Class 5: empty log entries are not free. A program printing a million
// empty lines ends with at most container.MaxLogEntries entries and the
// truncation reported.
func TestHostBoundsEmptyLogs(t *testing.T) {
	programs := both(`for (let i = 0; i < 1000000; i++) console.log(""); return "done"`,
		"import sys\nfor i in range(1000000):\n    print('')\nreturn 'done'")
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			res := e.run(t, programs[lang])
			if res.Error != nil || !res.LogsTruncated || len(res.Logs) > container.MaxLogEntries {
				t.Fatalf("%+v truncated %v entries %d", res.Error, res.LogsTruncated, len(res.Logs))
			}
			bound(t, "1,000,000 empty lines: %d entries kept, truncated, run %v", len(res.Logs), res.Stats.Wall.Round(time.Millisecond))
		})
	}
}

// Class 7: what a program prints never decides its outcome. Printing V8's
// heap-exhaustion message and aborting is "exit"; a real heap bomb stays
// "oom".
func TestHostBoundsOutcomeIsNotPrinted(t *testing.T) {
	e := newEnv(t, backend.TypeScript, nil)
	res := e.run(t, `console.error("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory");
process.stderr.write("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\n");
process.abort();`)
	if res.Error == nil || res.Error.Kind != backend.FailureExit {
		t.Fatalf("a forged heap message: %+v, want exit", res.Error)
	}
	bound(t, "forged V8 message + abort: %s: %s", res.Error.Kind, res.Error.Message)
	res = e.run(t, `const keep: number[][] = []; for (;;) keep.push(new Array(1 << 20).fill(1.5));`)
	if res.Error == nil || res.Error.Kind != backend.FailureOOM {
		t.Fatalf("a real heap bomb: %+v, want oom", res.Error)
	}
	bound(t, "real heap bomb: %s: %s", res.Error.Kind, res.Error.Message)

	py := newEnv(t, backend.Python, nil)
	res = py.run(t, "import os, sys\nprint('Killed')\nprint('MemoryError', file=sys.stderr)\nos.abort()")
	if res.Error == nil || res.Error.Kind != backend.FailureExit {
		t.Fatalf("python forged OOM text: %+v, want exit", res.Error)
	}
	bound(t, "python forged text + abort: %s: %s", res.Error.Kind, res.Error.Message)
}

var sockDirName = regexp.MustCompile(`^s-[0-9a-f]{16}$`)

// Class 13: what the container learns about the host. The bridge mount's
// host path names neither the host process nor anything but a random
// directory; the rest of what the mount table shows is listed in
// SECURITY.md.
func TestHostBoundsMountinfo(t *testing.T) {
	programs := both(`const fs = await import("node:fs");
return fs.readFileSync("/proc/self/mountinfo", "utf8");`, `
with open("/proc/self/mountinfo") as f:
    return f.read()`)
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			res := e.run(t, programs[lang])
			mountinfo := decode[string](t, res)
			var bridge string
			for _, line := range strings.Split(mountinfo, "\n") {
				if f := strings.Fields(line); len(f) > 4 && f[4] == container.BridgeDir {
					bridge = f[3] // the mount's root within its source filesystem
				}
			}
			if bridge == "" {
				t.Fatalf("no mount at %s in:\n%s", container.BridgeDir, mountinfo)
			}
			if !sockDirName.MatchString(filepath.Base(bridge)) {
				t.Errorf("the bridge directory is %q, want s-<16 hex digits>", filepath.Base(bridge))
			}
			pid := strconv.Itoa(os.Getpid())
			if strings.Contains(filepath.Base(bridge), pid) {
				t.Errorf("the bridge path %q names the host pid %s", bridge, pid)
			}
			bound(t, "the bridge mount shows %q", bridge)
		})
	}
}

// serveProc is a `dsh-container serve` process on a private Unix socket.
type serveProc struct {
	cmd    *exec.Cmd
	sock   string
	xdg    string
	prefix string // owner label prefix of its containers
	hc     *http.Client
	stderr *testenv.LockedBuffer
	exited chan error
}

// startServe starts serve with args (plus a private socket) and waits until
// it is healthy. Cleanup kills it and removes what it left.
func startServe(t *testing.T, args ...string) *serveProc {
	t.Helper()
	bin := buildCLI(t)
	xdg, err := os.MkdirTemp("", "dshs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(xdg) })
	s := &serveProc{xdg: xdg, sock: filepath.Join(xdg, "api.sock"), stderr: &testenv.LockedBuffer{}, exited: make(chan error, 1)}
	s.cmd = exec.Command(bin, append([]string{"serve", "--listen", "unix://" + s.sock}, args...)...)
	s.cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+xdg)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.prefix = container.OwnerOf(s.cmd.Process.Pid)
	go func() { s.exited <- s.cmd.Wait() }()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", s.sock)
	}}
	s.hc = &http.Client{Transport: tr, Timeout: 3 * time.Minute}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		s.cmd.Process.Kill()
		for _, c := range containersByOwnerPrefix(t, s.prefix) {
			cli.ContainerRemove(context.Background(), c.ID, dcontainer.RemoveOptions{Force: true})
		}
		if t.Failed() {
			t.Logf("serve's log:\n%s", s.stderr.String())
		}
	})
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if code, _ := s.get("/healthz"); code == http.StatusOK {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never became healthy; stderr:\n%s", s.stderr.String())
		}
	}
}

func (s *serveProc) get(path string) (int, string) {
	resp, err := s.hc.Get("http://dsh" + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// run posts one program and returns the status and the raw body.
func (s *serveProc) run(lang, code, id string) (int, []byte, error) {
	body, _ := json.Marshal(map[string]string{"language": lang, "code": code, "id": id})
	resp, err := s.hc.Post("http://dsh/v1/run", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// status reads a field of /proc/<pid>/status in KiB.
func procStatusKiB(pid int, field string) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return -1
}

// MaxServeRSSMiB is the documented bound on the serve daemon's peak
// resident memory while hostile programs of different classes run at once
// (SECURITY.md).
const MaxServeRSSMiB = 150

// The serve daemon under attack: tool output floods, event floods with
// large arguments, a tool that leaves processes behind, deep programs,
// connection and log floods, all through the HTTP API; then four hostile
// programs of different classes at once, with the daemon's peak RSS held
// under MaxServeRSSMiB (issue 10: classes 1-6 and the host-memory check).
func TestServeUnderAttack(t *testing.T) {
	dir := t.TempDir()
	marker := fmt.Sprintf("dsh-e2e-orphan-%d", time.Now().UnixNano())
	tools := filepath.Join(dir, "tools.json")
	manifest := map[string]any{"tools": []map[string]any{
		{"name": "flood", "description": "Print 100 MB.", "command": []string{"/bin/sh", "-c", "head -c 104857600 /dev/zero | tr '\\0' x; echo; head -c 1048576 /dev/zero | tr '\\0' e >&2"}},
		{"name": "echo", "description": "Return the arguments.", "command": []string{"/bin/cat"}},
		{"name": "orphan", "description": "Leave a process behind and hang.", "timeoutMs": 1500,
			"command": []string{"/bin/bash", "-c", "(exec -a " + marker + " sleep 300) & (exec -a " + marker + " sleep 301 &) ; sleep 300"}},
	}}
	data, _ := json.Marshal(manifest)
	os.WriteFile(tools, data, 0o644)
	s := startServe(t, "--tools", tools, "--pool", "0", "--max-runs", "4", "--queue", "8", "--wall-timeout", "60s", "--compute-timeout", "30s")
	pid := s.cmd.Process.Pid

	type report struct {
		Value          json.RawMessage `json:"value"`
		Error          *backend.Failure
		Logs           []backend.LogEntry
		LogsTruncated  bool `json:"logsTruncated"`
		ValueTruncated bool `json:"valueTruncated"`
		Events         []map[string]any
	}
	post := func(lang, code string) report {
		t.Helper()
		status, body, err := s.run(lang, code, "")
		if err != nil || status != http.StatusOK {
			t.Fatalf("POST /v1/run: %d %v %.300s", status, err, body)
		}
		var r report
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("%v: %.300s", err, body)
		}
		return r
	}

	for _, lang := range langs {
		t.Run("tool output is capped/"+string(lang), func(t *testing.T) {
			code := map[backend.Language]string{
				backend.TypeScript: `const out = await tools.flood({}); return {len: out.length, tail: out.slice(-120)}`,
				backend.Python:     "out = await tools.flood({})\nreturn {'len': len(out), 'tail': out[-120:]}",
			}[lang]
			r := post(string(lang), code)
			var v struct {
				Len  int
				Tail string
			}
			json.Unmarshal(r.Value, &v)
			if r.Error != nil || v.Len > 1<<20+200 || !strings.Contains(v.Tail, "output truncated: the tool printed 104857601 bytes, the cap is 1048576") {
				t.Fatalf("%+v %+v", r.Error, v)
			}
			bound(t, "100 MB of tool stdout reached the program as %d characters ending %q", v.Len, v.Tail[len(v.Tail)-80:])
		})

		t.Run("events are bounded/"+string(lang), func(t *testing.T) {
			code := map[backend.Language]string{
				backend.TypeScript: "const big = \"x\".repeat(20 << 10);\nfor (let i = 0; i < 1100; i++) await tools.echo({i, big});\nreturn \"done\"",
				backend.Python:     "big = 'x' * (20 << 10)\nfor i in range(1100):\n    await tools.echo({'i': i, 'big': big})\nreturn 'done'",
			}[lang]
			r := post(string(lang), code)
			var sub, dropped int
			var size int
			for _, e := range r.Events {
				b, _ := json.Marshal(e)
				size += len(b)
				switch e["type"] {
				case "tool/code-dispatch":
					sub++
					if e["argumentsTruncated"] != true || e["arguments"] != nil || len(e["argumentsPreview"].(string)) > 4<<10+8 {
						t.Fatalf("a 20 KiB argument in an event: %.200v", e)
					}
				case "tool/code-dispatch-dropped":
					dropped = int(e["dropped"].(float64))
				}
			}
			if r.Error != nil || sub+dropped != 1100 || size > 1<<20+4<<10 {
				t.Fatalf("%+v: %d events, %d dropped, %d bytes", r.Error, sub, dropped, size)
			}
			bound(t, "1100 calls with 20 KiB arguments: %d events (%d KiB), %d counted as dropped", sub, size>>10, dropped)
		})
	}

	t.Run("tool processes do not outlive the call", func(t *testing.T) {
		r := post("typescript", `try { await tools.orphan({}); return "returned" } catch (e) { return String(e) }`)
		if r.Error != nil || !strings.Contains(string(r.Value), "timed out after 1.5s") {
			t.Fatalf("%+v %s", r.Error, r.Value)
		}
		time.Sleep(500 * time.Millisecond)
		out, _ := exec.Command("pgrep", "-f", marker).Output()
		if pids := strings.Fields(string(out)); len(pids) != 0 {
			for _, p := range pids {
				if n, err := strconv.Atoi(p); err == nil {
					syscall.Kill(n, syscall.SIGKILL)
				}
			}
			t.Fatalf("processes of the tool survived: %v", pids)
		}
		bound(t, "a tool that backgrounds sleeps and hangs: %s; none of its processes left", r.Value)
	})

	// Four hostile programs of different classes at once.
	hostile := []struct{ name, lang, code string }{
		{"deep nesting (class 1)", "typescript", "return " + strings.Repeat("(", 120000) + "1" + strings.Repeat(")", 120000)},
		{"tool output flood (class 3)", "typescript", `let n = 0; for (let i = 0; i < 20; i++) n += (await tools.flood({})).length; return n`},
		{"event flood with large arguments (class 4)", "python", "big = [0] * 400000\nfor i in range(60):\n    await tools.echo({'i': i, 'big': big})\nreturn 'done'"},
		{"connection and empty-log flood (classes 2, 5)", "python", `
import socket
for i in range(200):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("/run/dsh/bridge.sock")
        s.sendall(b"GET /v1 HTTP/1.1\r\nX: " + b"A" * (1 << 20))
    except OSError:
        pass
    s.close()
for i in range(500000):
    print("")
return "done"`},
	}
	base := procStatusKiB(pid, "VmRSS")
	var wg sync.WaitGroup
	results := make([]string, len(hostile))
	start := time.Now()
	for i, h := range hostile {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body, err := s.run(h.lang, h.code, "")
			var r report
			json.Unmarshal(body, &r)
			kind := "ok"
			if r.Error != nil {
				kind = string(r.Error.Kind) + ": " + r.Error.Message
			}
			results[i] = fmt.Sprintf("%d %v %.100s", status, err, kind)
		}()
	}
	wg.Wait()
	peak := procStatusKiB(pid, "VmHWM")
	for i, h := range hostile {
		bound(t, "concurrent %s: %s", h.name, results[i])
		if !strings.HasPrefix(results[i], "200 <nil>") {
			t.Errorf("%s: %s", h.name, results[i])
		}
	}
	bound(t, "serve RSS before the concurrent run %d MiB, peak (VmHWM) %d MiB over %v; bound %d MiB", base>>10, peak>>10, time.Since(start).Round(time.Second), MaxServeRSSMiB)
	if peak < 0 || peak>>10 > MaxServeRSSMiB {
		t.Errorf("serve's peak RSS is %d MiB, over the %d MiB bound", peak>>10, MaxServeRSSMiB)
	}
	if code, _ := s.get("/healthz"); code != http.StatusOK {
		t.Errorf("serve is not healthy after the attack: %d", code)
	}
}
