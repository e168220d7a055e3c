package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serveRunResponse is the 200 body of POST /v1/run.
type serveRunResponse struct {
	ID        string          `json:"id"`
	Value     json.RawMessage `json:"value"`
	ValueKind string          `json:"valueKind"`
	Logs      []struct {
		Source, Level, Text string
	} `json:"logs"`
	Error *struct {
		Kind, Message string
	} `json:"error"`
	Stats struct {
		WallMs, CPUMs, StartupMs float64
		Calls                    int
	} `json:"stats"`
	Events []struct {
		Type         string          `json:"type"`
		ParentCallID string          `json:"parentCallId"`
		CallID       string          `json:"callId"`
		Tool         string          `json:"tool"`
		Arguments    json.RawMessage `json:"arguments"`
		IsError      bool            `json:"isError"`
		Summary      string          `json:"summary"`
	} `json:"events"`
}

// `dsh-container serve` on a Unix socket: runs in both languages with a
// host tool, health and metrics; SIGTERM exits 0 with every container of
// the daemon (pooled ones included) and every socket directory removed.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	os.WriteFile(tools, []byte(`{"tools":[{"name":"shout","description":"Upper-case the text.",
		"inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},
		"command":["/bin/sh","-c","tr a-z A-Z"]}]}`), 0o644)
	s := startServe(t, "--pool", "1", "--tools", tools, "--wall-timeout", "20s")
	cmd, sock, xdg, prefix, get := s.cmd, s.sock, s.xdg, s.prefix, s.get
	run := func(lang, code, id string) serveRunResponse {
		t.Helper()
		status, b, err := s.run(lang, code, id)
		if err != nil || status != http.StatusOK {
			t.Fatalf("POST /v1/run %s: %d %v %s", lang, status, err, b)
		}
		var r serveRunResponse
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		t.Logf("%s run: %s", lang, b)
		return r
	}

	// Up: the socket answers and the daemon is healthy.
	if code, body := get("/healthz"); code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket %s: %v %v, want mode 0660", sock, fi.Mode(), err)
	}

	ts := run("typescript", `const r = await tools.shout({text: "hello"}); console.log(r); return {r}`, "ts1")
	// The tool upper-cases its JSON arguments: {"TEXT":"HELLO"}.
	if ts.Error != nil || ts.ValueKind != "json" || string(ts.Value) != `{"r":"{\"TEXT\":\"HELLO\"}"}` {
		t.Errorf("typescript: %+v %s", ts.Error, ts.Value)
	}
	if len(ts.Events) != 1 || ts.Events[0].CallID != "ts1:code:1" || ts.Events[0].Tool != "shout" || ts.Events[0].Summary != `{"TEXT":"HELLO"}` {
		t.Errorf("typescript events: %+v", ts.Events)
	}
	py := run("python", "r = await tools.shout({\"text\": \"world\"})\nprint(r)\nreturn r", "py1")
	if py.Error != nil || string(py.Value) != `"{\"TEXT\":\"WORLD\"}"` || len(py.Logs) != 1 || py.Logs[0].Text != "{\"TEXT\":\"WORLD\"}\n" {
		t.Errorf("python: %+v %s %+v", py.Error, py.Value, py.Logs)
	}
	if len(py.Events) != 1 || py.Events[0].CallID != "py1:code:1" || string(py.Events[0].Arguments) != `{"text":"world"}` {
		t.Errorf("python events: %+v", py.Events)
	}
	// A program's failure is a 200 naming the kind.
	if bad := run("typescript", `throw new Error("boom")`, ""); bad.Error == nil || bad.Error.Kind != "exception" || !strings.Contains(bad.Error.Message, "boom") {
		t.Errorf("throw: %+v", bad.Error)
	}

	code, metrics := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`dsh_container_runs_total{language="typescript",outcome="ok",tenant="anonymous"} 1`,
		`dsh_container_runs_total{language="typescript",outcome="exception",tenant="anonymous"} 1`,
		`dsh_container_runs_total{language="python",outcome="ok",tenant="anonymous"} 1`,
		`dsh_container_binding_calls_total{language="python"} 1`,
		`dsh_container_binding_calls_total{language="typescript"} 1`,
		`dsh_container_run_wall_seconds_count{language="python"} 1`,
		`dsh_container_runs_in_flight{language="typescript",tenant="anonymous"} 0`,
		`dsh_container_pool_idle_sandboxes{language="python"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if n := len(containersByOwnerPrefix(t, prefix)); n == 0 {
		t.Errorf("no container of the daemon (owner %s*) while it serves with a pool", prefix)
	}

	// SIGTERM: exit 0, nothing left.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		if err != nil {
			t.Fatalf("serve exited with %v; stderr:\n%s", err, s.stderr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("serve did not exit after SIGTERM; stderr:\n%s", s.stderr.String())
	}
	if left := containersByOwnerPrefix(t, prefix); len(left) != 0 {
		t.Errorf("serve left %d container(s) of owner %s*", len(left), prefix)
	}
	if dirs, _ := os.ReadDir(filepath.Join(xdg, "dsh-container")); len(dirs) != 0 {
		t.Errorf("serve left socket directories: %v", dirs)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("serve left its API socket: %v", err)
	}
}
