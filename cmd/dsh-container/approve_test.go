package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/policy"
	"github.com/dsh-container/dsh-container/registry"
)

// fakeTTY is a terminal: what the approver writes, and answers typed into
// a pipe. prompts receives one value per question written.
type fakeTTY struct {
	mu      sync.Mutex
	out     bytes.Buffer
	r       *io.PipeReader
	w       *io.PipeWriter
	prompts chan struct{}
}

func newFakeTTY() *fakeTTY {
	r, w := io.Pipe()
	return &fakeTTY{r: r, w: w, prompts: make(chan struct{}, 16)}
}

func (t *fakeTTY) Read(p []byte) (int, error) { return t.r.Read(p) }
func (t *fakeTTY) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if bytes.Contains(p, []byte("allow?")) {
		t.prompts <- struct{}{}
	}
	return t.out.Write(p)
}
func (t *fakeTTY) Close() error { t.r.Close(); return t.w.Close() }
func (t *fakeTTY) written() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.out.String()
}

func withTTY(t *testing.T, open func() (io.ReadWriteCloser, error)) {
	t.Helper()
	old := openTTY
	openTTY = open
	t.Cleanup(func() { openTTY = old })
}

func TestApproveWithoutTTY(t *testing.T) {
	withTTY(t, func() (io.ReadWriteCloser, error) { return nil, errors.New("open /dev/tty: no such device or address") })
	prog := write(t, "p.ts", "return 1")
	r := runCLI(t, "", nil, "run", "--approve", prog)
	if r.code != 2 || !strings.Contains(r.stderr, "--approve prompts on a terminal, and there is none") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestPolicyFlagErrors(t *testing.T) {
	prog := write(t, "p.ts", "return 1")
	bad := write(t, "policy.json", `{"default":"allow","tools":{"x":{"action":"deny","when":[{"path":"a","regx":"b"}]}}}`)
	for _, args := range [][]string{
		{"run", "--policy", bad, prog},
		{"serve", "--policy", bad},
		{"mcp", "--policy", bad},
	} {
		r := runCLI(t, "", nil, args...)
		if r.code != 2 || !strings.Contains(r.stderr, `tools.x.when[0]: unknown field "regx"`) {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	r := runCLI(t, "", nil, "run", "--policy", "/nonexistent/policy.json", prog)
	if r.code != 2 || !strings.Contains(r.stderr, "--policy") {
		t.Errorf("missing file: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestTTYApprover(t *testing.T) {
	tty := newFakeTTY()
	withTTY(t, func() (io.ReadWriteCloser, error) { return tty, nil })
	a, c, err := newTTYApprover()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := registry.ApprovalRequest{
		Exec:   registry.Execution{Name: "rm\x1b]0;pwned\x07", Arguments: json.RawMessage(`{"path":"/x\u202e"}`)},
		Reason: "policy asks",
	}
	for _, tc := range []struct {
		answer string
		want   registry.Decision
	}{
		{"y\n", registry.DecisionAllow},
		{"always\n", registry.DecisionAllowForRun},
		{"n\n", registry.DecisionDeny},
		{"what\n", registry.DecisionDeny},
	} {
		// Typed once the question is on the terminal: a line typed
		// before it is drained, not taken as the answer.
		go func() { <-tty.prompts; _, _ = io.WriteString(tty.w, tc.answer) }()
		got, err := a.Approve(context.Background(), req)
		if err != nil || got.Decision != tc.want {
			t.Errorf("answer %q: %+v, %v", tc.answer, got, err)
		}
	}
	out := tty.written()
	if strings.ContainsAny(out, "\x1b\x07\u202e") {
		t.Errorf("the prompt carries raw controls: %q", out)
	}
	if !strings.Contains(out, `tool rm\x1b]0;pwned\x07`) || !strings.Contains(out, `\u202e`) {
		t.Errorf("prompt %q does not show the neutralised name and arguments", out)
	}
	// No answer: the approval's context ends the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := a.Approve(ctx, req); err == nil {
		t.Error("an unanswered prompt returned no error")
	}
}

// A policy naming a tool no source provides is accepted (a session may
// bring it under serve) but warned about, naming it.
func TestWarnUnknownPolicyTools(t *testing.T) {
	p, err := policy.Parse([]byte(`{"tools":{"pusj":{"action":"deny"},"push":{"action":"ask"},"run_code":{"action":"allow"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	tools := []registry.Tool{{Name: "push"}, {Name: "fetch"}}
	for _, sessions := range []bool{false, true} {
		var buf bytes.Buffer
		warnUnknownPolicyTools(slog.New(slog.NewTextHandler(&buf, nil)), p, tools, sessions)
		out := buf.String()
		if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "tool=pusj") || !strings.Contains(out, "known=push,fetch") {
			t.Errorf("sessions=%v: %q, want one warning naming pusj and the known tools", sessions, out)
		}
		if sessions != strings.Contains(out, "sessions whose client brings it") {
			t.Errorf("sessions=%v: %q", sessions, out)
		}
	}
	var buf bytes.Buffer
	warnUnknownPolicyTools(slog.New(slog.NewTextHandler(&buf, nil)), nil, tools, false)
	if buf.Len() != 0 {
		t.Errorf("no policy: %q", buf.String())
	}
}
