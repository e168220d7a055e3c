package registry

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

// scripted is an Approver answering from a script, tool by tool, and
// recording what it was asked.
type scripted struct {
	mu      sync.Mutex
	answers map[string]Approval
	asked   []string
	block   chan struct{} // when set, Approve waits on it (or ctx)
}

func (s *scripted) Approve(ctx context.Context, req ApprovalRequest) (Approval, error) {
	s.mu.Lock()
	s.asked = append(s.asked, req.Exec.Name+" "+string(req.Exec.Arguments))
	a := s.answers[req.Exec.Name]
	block := s.block
	s.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return Approval{}, ctx.Err()
		}
	}
	return a, nil
}

func (s *scripted) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

// askAll is a guard asking about every tool but run_code.
func askAll(_ context.Context, exec Execution) error {
	if exec.Name == RunCode {
		return nil
	}
	return Ask("policy asks about " + exec.Name)
}

func approvalEvents(evs []Event) []string {
	var out []string
	for _, e := range evs {
		if e.Type == EventApproval {
			out = append(out, e.Tool+":"+e.Decision+":"+e.Reason)
		}
	}
	return out
}

func TestApprovalDecisions(t *testing.T) {
	tests := []struct {
		name      string
		approval  Approval
		program   string
		wantLogs  string
		wantAsked int
		wantEvs   []string
	}{
		{
			name:      "allow asks each call",
			approval:  Approval{Decision: DecisionAllow},
			program:   "try a {\"n\":1}\ntry a {\"n\":2}",
			wantLogs:  `a {"n":1}` + "\n" + `a {"n":2}`,
			wantAsked: 2,
			wantEvs:   []string{"a:allow:", "a:allow:"},
		},
		{
			name:      "deny rejects with the reason",
			approval:  Approval{Decision: DecisionDeny, Reason: "not today"},
			program:   "try a\nlog after",
			wantLogs:  "error: tool \"a\" denied: not today\nafter",
			wantAsked: 1,
			wantEvs:   []string{"a:deny:not today"},
		},
		{
			name:      "allowForRun asks once per run",
			approval:  Approval{Decision: DecisionAllowForRun},
			program:   "try a {\"n\":1}\ntry a {\"n\":2}",
			wantLogs:  `a {"n":1}` + "\n" + `a {"n":2}`,
			wantAsked: 1,
			wantEvs:   []string{"a:allowForRun:"},
		},
		{
			name:      "unknown decision denies",
			approval:  Approval{Decision: "maybe"},
			program:   "try a",
			wantLogs:  `error: tool "a" denied: approver answered "maybe" (want allow, deny or allowForRun)`,
			wantAsked: 1,
			wantEvs:   []string{`a:deny:approver answered "maybe" (want allow, deny or allowForRun)`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ap := &scripted{answers: map[string]Approval{"a": tc.approval}}
			r, _, ev := codeReg(t, WithGuard(askAll), WithApprover(ap))
			mustRegister(t, r, echoTool("a"))
			res := r.Execute(context.Background(), runCall("c1", tc.program))
			if res.IsError {
				t.Fatalf("run failed: %s", res.Text())
			}
			if got := res.Text(); got != tc.wantLogs {
				t.Errorf("output:\n%s\nwant:\n%s", got, tc.wantLogs)
			}
			if got := len(ap.calls()); got != tc.wantAsked {
				t.Errorf("asked %d times, want %d", got, tc.wantAsked)
			}
			if got := approvalEvents(ev.all()); strings.Join(got, "|") != strings.Join(tc.wantEvs, "|") {
				t.Errorf("approval events %q, want %q", got, tc.wantEvs)
			}
		})
	}
}

// TestApprovalForRunIsPerRun: allowForRun does not carry to the next run.
func TestApprovalForRunIsPerRun(t *testing.T) {
	ap := &scripted{answers: map[string]Approval{"a": {Decision: DecisionAllowForRun}}}
	r, _, _ := codeReg(t, WithGuard(askAll), WithApprover(ap))
	mustRegister(t, r, echoTool("a"))
	for _, id := range []string{"r1", "r2"} {
		if res := r.Execute(context.Background(), runCall(id, "call a\ncall a")); res.IsError {
			t.Fatalf("%s: %s", id, res.Text())
		}
	}
	if got := len(ap.calls()); got != 2 {
		t.Errorf("asked %d times over two runs, want 2", got)
	}
}

func TestApprovalWithoutApproverDenies(t *testing.T) {
	r, _, ev := codeReg(t, WithGuard(askAll))
	mustRegister(t, r, echoTool("a"))
	res := r.Execute(context.Background(), runCall("c1", "try a"))
	if want := `error: tool "a" denied: approval required, but no approver is configured (policy asks about a)`; res.Text() != want {
		t.Errorf("got %q, want %q", res.Text(), want)
	}
	if got := approvalEvents(ev.all()); len(got) != 1 || !strings.HasPrefix(got[0], "a:deny:") {
		t.Errorf("events %q", got)
	}
}

func TestApprovalNativeCall(t *testing.T) {
	ap := &scripted{answers: map[string]Approval{"a": {Decision: DecisionDeny, Reason: "no"}}}
	ev := &events{}
	r := newReg(t, WithGuard(askAll), WithApprover(ap), WithEventSink(ev.sink))
	mustRegister(t, r, echoTool("a"))
	res := r.Execute(context.Background(), Call{ID: "n1", Name: "a"})
	var denied *DeniedError
	if !res.IsError || !errors.As(res.Err, &denied) || !errdefs.IsPermissionDenied(res.Err) {
		t.Fatalf("want a denial, got %+v", res)
	}
	if got := approvalEvents(ev.all()); len(got) != 1 || got[0] != "a:deny:no" {
		t.Errorf("events %q", got)
	}
}

func TestApprovalTimeoutDenies(t *testing.T) {
	ap := &scripted{block: make(chan struct{})}
	defer close(ap.block)
	r, _, ev := codeReg(t, WithGuard(askAll), WithApprover(ap), WithApprovalTimeout(50*time.Millisecond))
	mustRegister(t, r, echoTool("a"))
	res := r.Execute(context.Background(), runCall("c1", "try a\nlog after"))
	if want := "error: tool \"a\" denied: approval timed out after 50ms\nafter"; res.Text() != want {
		t.Errorf("got %q, want %q", res.Text(), want)
	}
	if got := approvalEvents(ev.all()); len(got) != 1 || got[0] != "a:deny:approval timed out after 50ms" {
		t.Errorf("events %q", got)
	}
}

// TestApprovalIgnoringContext: an approver that never returns cannot hold
// the call past the timeout.
func TestApprovalIgnoringContext(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	ap := ApproverFunc(func(context.Context, ApprovalRequest) (Approval, error) {
		<-stuck
		return Approval{Decision: DecisionAllow}, nil
	})
	r, _, _ := codeReg(t, WithGuard(askAll), WithApprover(ap), WithApprovalTimeout(30*time.Millisecond))
	mustRegister(t, r, echoTool("a"))
	res := r.Execute(context.Background(), runCall("c1", "try a"))
	if !strings.Contains(res.Text(), "approval timed out") {
		t.Errorf("got %q", res.Text())
	}
}

// TestApprovalAbortWhileWaiting: cancelling the run while a call waits
// for approval ends the run promptly; the tool never runs.
func TestApprovalAbortWhileWaiting(t *testing.T) {
	ap := &scripted{block: make(chan struct{})}
	defer close(ap.block)
	ran := make(chan struct{}, 1)
	r, _, _ := codeReg(t, WithGuard(askAll), WithApprover(ap))
	mustRegister(t, r, Tool{Name: "a", Execute: func(context.Context, Execution) ([]Block, error) {
		ran <- struct{}{}
		return nil, nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for len(ap.calls()) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	start := time.Now()
	res := r.Execute(ctx, runCall("c1", "call a"))
	if !res.IsError {
		t.Fatalf("want the run to fail, got %q", res.Text())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("abort took %v", d)
	}
	select {
	case <-ran:
		t.Error("the tool ran")
	default:
	}
}

// TestApprovalHoldsOrder: a paused call holds the later calls of
// Promise.all: they start in submission order, after the decision.
func TestApprovalHoldsOrder(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	ap := ApproverFunc(func(ctx context.Context, req ApprovalRequest) (Approval, error) {
		if req.Exec.Name == "slow" {
			<-release
		}
		return Approval{Decision: DecisionAllow}, nil
	})
	guard := func(_ context.Context, exec Execution) error {
		if exec.Name == "slow" {
			return Ask("slow asks")
		}
		return nil
	}
	r, _, _ := codeReg(t, WithGuard(guard), WithApprover(ap))
	rec := func(name string) Tool {
		return Tool{Name: name, Execute: func(_ context.Context, exec Execution) ([]Block, error) {
			mu.Lock()
			order = append(order, name+string(exec.Arguments))
			mu.Unlock()
			return []Block{TextBlock(name)}, nil
		}}
	}
	mustRegister(t, r, rec("fast"), rec("slow"))
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(release)
	}()
	res := r.Execute(context.Background(), runCall("c1", "go fast {\"i\":1}\ngo slow {\"i\":2}\ngo fast {\"i\":3}\ngo fast {\"i\":4}\nwait"))
	if res.IsError {
		t.Fatal(res.Text())
	}
	want := `fast{"i":1} slow{"i":2} fast{"i":3} fast{"i":4}`
	if got := strings.Join(order, " "); got != want {
		t.Errorf("order %s, want %s", got, want)
	}
}

func TestParseDecision(t *testing.T) {
	for _, s := range []string{"allow", "deny", "allowForRun"} {
		if d, err := ParseDecision(s); err != nil || string(d) != s {
			t.Errorf("ParseDecision(%q) = %q, %v", s, d, err)
		}
	}
	if _, err := ParseDecision("Allow"); !errdefs.IsInvalidArgument(err) {
		t.Errorf("ParseDecision(Allow): %v", err)
	}
}

func TestApproverFailureDenies(t *testing.T) {
	for name, ap := range map[string]Approver{
		"error": ApproverFunc(func(context.Context, ApprovalRequest) (Approval, error) { return Approval{}, errors.New("tty closed") }),
		"panic": ApproverFunc(func(context.Context, ApprovalRequest) (Approval, error) { panic("boom") }),
	} {
		t.Run(name, func(t *testing.T) {
			r, _, _ := codeReg(t, WithGuard(askAll), WithApprover(ap))
			mustRegister(t, r, echoTool("a"))
			res := r.Execute(context.Background(), runCall("c1", "try a"))
			if !strings.HasPrefix(res.Text(), `error: tool "a" denied: approver failed: `) {
				t.Errorf("got %q", res.Text())
			}
		})
	}
}

// A later guard still runs after an approval: an ask is not an allow of
// everything.
func TestApprovalThenLaterGuardDenies(t *testing.T) {
	ap := &scripted{answers: map[string]Approval{"a": {Decision: DecisionAllow}}}
	deny := func(context.Context, Execution) error { return errors.New("second guard says no") }
	r, _, _ := codeReg(t, WithGuard(askAll), WithGuard(func(ctx context.Context, e Execution) error {
		if e.Name == RunCode {
			return nil
		}
		return deny(ctx, e)
	}), WithApprover(ap))
	mustRegister(t, r, echoTool("a"))
	res := r.Execute(context.Background(), runCall("c1", "try a"))
	if res.Text() != `error: tool "a" denied: second guard says no` || len(ap.calls()) != 1 {
		t.Errorf("got %q, asked %d", res.Text(), len(ap.calls()))
	}
}
