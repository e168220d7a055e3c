package server

// Approvals in a session: when the server's policy asks about a call, the
// daemon sends an approval frame and the call waits for the client's
// approvalResult (docs/session-protocol.md, "Approvals").

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/dsh-container/dsh-container/registry"
)

// Approval frame types: the daemon asks, the client answers.
const (
	FrameApproval       = "approval"
	FrameApprovalResult = "approvalResult"
)

// ApprovalFrame asks the client to decide one call the server's policy
// asks about. ID is the call's id (a sub-call's "<run>:code:<n>"); Args
// its canonical arguments.
type ApprovalFrame struct {
	Type string          `json:"type"`
	ID   string          `json:"id"`
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// ApprovalResultFrame answers an approval frame: allow, deny (with an
// optional reason the program's rejection carries) or allowForRun (the
// tool for the rest of the run).
type ApprovalResultFrame struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

func init() {
	frameFields[FrameApproval] = []string{"type", "id", "tool", "args"}
	frameFields[FrameApprovalResult] = []string{"type", "id", "decision", "reason"}
}

func (*ApprovalResultFrame) frameType() string { return FrameApprovalResult }

// decodeApprovalFrames decodes the two approval frames; f has checked the
// keys.
func decodeApprovalFrames(typ string, f *fieldReader) any {
	switch typ {
	case FrameApproval:
		m := &ApprovalFrame{Type: typ}
		f.str("id", &m.ID, true)
		f.str("tool", &m.Tool, true)
		f.raw("args", &m.Args, true)
		if f.err == nil && (m.ID == "" || m.Tool == "") {
			f.fail("id and tool must not be empty")
		}
		return m
	case FrameApprovalResult:
		m := &ApprovalResultFrame{Type: typ}
		f.str("id", &m.ID, true)
		f.str("decision", &m.Decision, true)
		f.str("reason", &m.Reason, false)
		switch {
		case f.err != nil:
		case m.ID == "" || len(m.ID) > MaxCallIDBytes:
			f.fail("id must be 1 to %d bytes", MaxCallIDBytes)
		case m.Decision != string(registry.DecisionAllow) && m.Decision != string(registry.DecisionDeny) && m.Decision != string(registry.DecisionAllowForRun):
			f.fail("decision %q is not one of allow, deny, allowForRun", truncateName(m.Decision))
		case len(m.Reason) > MaxMessageBytes:
			f.fail("reason exceeds %d bytes", MaxMessageBytes)
		}
		return m
	}
	return nil
}

// sessionApprovals is a session's approvals in flight and answered.
type sessionApprovals struct {
	mu      sync.Mutex
	pending map[string]chan *ApprovalResultFrame
	// done holds the ids asked and settled (answered, timed out,
	// abandoned): a late answer to one is ignored, a second answer too.
	done map[string]bool
}

// Approve implements registry.Approver for the session's run: an
// approval frame, then the client's answer, the timeout or the run's end.
func (ss *session) Approve(ctx context.Context, req registry.ApprovalRequest) (registry.Approval, error) {
	a := &ss.approvals
	ch := make(chan *ApprovalResultFrame, 1)
	id := req.Exec.CallID
	a.mu.Lock()
	if a.pending == nil {
		a.pending, a.done = map[string]chan *ApprovalResultFrame{}, map[string]bool{}
	}
	if _, dup := a.pending[id]; dup || a.done[id] {
		a.mu.Unlock()
		return registry.Approval{}, errors.New("internal error: a second approval for one call")
	}
	a.pending[id] = ch
	a.mu.Unlock()
	ss.send(ApprovalFrame{Type: FrameApproval, ID: id, Tool: req.Exec.Name, Args: req.Exec.Arguments}, false)
	select {
	case m := <-ch:
		return registry.Approval{Decision: registry.Decision(m.Decision), Reason: m.Reason}, nil
	case <-ctx.Done():
		a.mu.Lock()
		if _, still := a.pending[id]; still {
			delete(a.pending, id)
			a.done[id] = true
		}
		a.mu.Unlock()
		return registry.Approval{}, context.Cause(ctx)
	}
}

// deliverApproval hands an approvalResult to the call waiting for it. An
// answer for an id never asked is a protocol violation; a late or second
// answer for one asked is ignored.
func (ss *session) deliverApproval(m *ApprovalResultFrame) error {
	a := &ss.approvals
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, ok := a.pending[m.ID]; ok {
		delete(a.pending, m.ID)
		a.done[m.ID] = true
		ch <- m
		return nil
	}
	if a.done[m.ID] {
		return nil
	}
	return sessionErr(CodeUnknownCall, "no approval %q was asked of this client", truncateName(m.ID))
}
