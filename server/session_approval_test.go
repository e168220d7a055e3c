package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/server"
)

// askEcho is a server policy asking about the server's echo tool.
func askEcho(_ context.Context, exec registry.Execution) error {
	if exec.Name == "echo" {
		return registry.Ask("the policy asks about echo")
	}
	return nil
}

// An approval round trip: the daemon asks, the client answers; allow runs
// the tool, deny rejects the program's call with the reason,
// allowForRun stops the asking; each decision is an event.
func TestSessionApprovals(t *testing.T) {
	sf := newSessionFixture(t, server.WithRegistryOptions(registry.WithGuard(askEcho)))
	p := sf.dial(t, nil)
	st := start("python", "try echo {\"x\":1}\ntry echo {\"x\":2}\ntry echo {\"x\":3}\ntry echo {\"x\":4}\nreturn 1")
	st.ID = "s1"
	p.send(st)
	p.expect(server.FrameAccepted)
	answers := []server.ApprovalResultFrame{
		{Decision: "allow"},
		{Decision: "deny", Reason: "not x=2"},
		{Decision: "allowForRun"},
	}
	var logs, decisions []string
	asked := 0
	for done := false; !done; {
		m, msg := p.next()
		switch m["type"] {
		case server.FrameApproval:
			ap := msg.(*server.ApprovalFrame)
			if asked == len(answers) {
				t.Fatalf("asked again after allowForRun: %v", m)
			}
			wantID := fmt.Sprintf("s1:code:%d", asked+1)
			if ap.ID != wantID || ap.Tool != "echo" || string(ap.Args) != fmt.Sprintf(`{"x":%d}`, asked+1) {
				t.Fatalf("approval %d: %+v", asked, ap)
			}
			a := answers[asked]
			a.Type, a.ID = server.FrameApprovalResult, ap.ID
			p.send(a)
			asked++
		case server.FrameLog:
			logs = append(logs, m["text"].(string))
		case server.FrameEvent:
			if ev := msg.(*server.EventFrame).Event; ev.Type == registry.EventApproval {
				decisions = append(decisions, ev.Decision+":"+ev.Reason)
			}
		case server.FrameDone:
			done = true
		}
	}
	wantLogs := `echo:{"x":1}|error: tool "echo" denied: not x=2|echo:{"x":3}|echo:{"x":4}`
	if got := strings.Join(logs, "|"); got != wantLogs {
		t.Errorf("logs %s, want %s", got, wantLogs)
	}
	if got := strings.Join(decisions, "|"); got != "allow:|deny:not x=2|allowForRun:" {
		t.Errorf("decisions %s", got)
	}
	if code := p.closed(); code != websocket.CloseNormalClosure {
		t.Fatalf("close code %d", code)
	}
	waitNoSessions(t, sf.srv)
}

// An unanswered approval times out as a denial; a late answer is ignored.
func TestSessionApprovalTimeout(t *testing.T) {
	sf := newSessionFixture(t, server.WithRegistryOptions(registry.WithGuard(askEcho), registry.WithApprovalTimeout(100*time.Millisecond)))
	p := sf.dial(t, nil)
	p.send(start("python", "try echo {\"x\":1}\nsleep 200ms\nreturn 1"))
	p.expect(server.FrameAccepted)
	_, msg := p.until(server.FrameApproval)
	ap := msg.(*server.ApprovalFrame)
	m, _ := p.until(server.FrameLog)
	if m["text"] != `error: tool "echo" denied: approval timed out after 100ms` {
		t.Fatalf("log %v", m)
	}
	p.send(server.ApprovalResultFrame{Type: server.FrameApprovalResult, ID: ap.ID, Decision: "allow"})
	_, msg = p.until(server.FrameDone)
	if rep := msg.(*server.DoneFrame).Report; rep.Error != nil {
		t.Fatalf("report %+v", rep)
	}
	p.closed()
	waitNoSessions(t, sf.srv)
}

// An abort while a call waits for approval ends the run; an answer to an
// approval never asked breaks the protocol.
func TestSessionApprovalAbortAndUnknown(t *testing.T) {
	sf := newSessionFixture(t, server.WithRegistryOptions(registry.WithGuard(askEcho)))
	p := sf.dial(t, nil)
	p.send(start("python", "call echo {\"x\":1}\nreturn 1"))
	p.expect(server.FrameAccepted)
	p.until(server.FrameApproval)
	p.send(server.AbortFrame{Type: server.FrameAbort, Reason: "stop"})
	_, msg := p.until(server.FrameDone)
	if rep := msg.(*server.DoneFrame).Report; rep.Error == nil || rep.Error.Kind != "abort" {
		t.Fatalf("report %+v", rep.Error)
	}
	p.closed()

	p = sf.dial(t, nil)
	p.send(start("python", "sleep 5s\nreturn 1"))
	p.expect(server.FrameAccepted)
	p.send(server.ApprovalResultFrame{Type: server.FrameApprovalResult, ID: "nope", Decision: "allow"})
	m, _ := p.until(server.FrameError)
	if m["code"] != server.CodeUnknownCall {
		t.Fatalf("error %v", m)
	}
	p.closed()
	waitNoSessions(t, sf.srv)
}

// POST /v1/run has no one to ask: an ask is a denial.
func TestRunAskWithoutApprover(t *testing.T) {
	sf := newSessionFixture(t, server.WithRegistryOptions(registry.WithGuard(askEcho)))
	resp, err := http.Post(sf.ts.URL+"/v1/run", "application/json", strings.NewReader(`{"language":"python","code":"try echo {}"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "approval required, but no approver is configured") {
		t.Fatalf("body %s", body)
	}
}
