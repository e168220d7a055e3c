package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Decisions an approval handler answers with.
const (
	DecisionAllow       = "allow"
	DecisionDeny        = "deny"
	DecisionAllowForRun = "allowForRun"
)

// ApprovalRequest is the daemon asking about one call its policy asks
// about (an approval frame): the call's id, tool and arguments. The
// arguments come from the program: show them with care.
type ApprovalRequest struct {
	ID   string
	Tool string
	Args json.RawMessage
}

// Approval answers an ApprovalRequest: Decision is DecisionAllow,
// DecisionDeny (Reason is what the program's rejection says) or
// DecisionAllowForRun (the tool for the rest of the run).
type Approval struct {
	Decision string
	Reason   string
}

// approve answers one approval frame from Handlers.Approve, in its own
// goroutine: an error, a panic or an unknown decision is a denial.
func (s *clientSession) approve(ctx context.Context, f *frame) {
	s.spawn(ctx, func(cctx context.Context) {
		a, err := func() (a Approval, err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("the approval handler panicked: %v", p)
				}
			}()
			if s.h.Approve == nil {
				return Approval{Decision: DecisionDeny, Reason: "this client has no approval handler"}, nil
			}
			return s.h.Approve(cctx, ApprovalRequest{ID: f.ID, Tool: f.Tool, Args: f.Args})
		}()
		switch {
		case err != nil:
			a = Approval{Decision: DecisionDeny, Reason: err.Error()}
		case a.Decision != DecisionAllow && a.Decision != DecisionDeny && a.Decision != DecisionAllowForRun:
			a = Approval{Decision: DecisionDeny, Reason: fmt.Sprintf("the approval handler answered %q", a.Decision)}
		}
		if ctx.Err() != nil {
			return // the abort frame ends the run
		}
		res := map[string]any{"type": "approvalResult", "id": f.ID, "decision": a.Decision}
		if a.Reason != "" {
			if len(a.Reason) > 16<<10 {
				a.Reason = strings.ToValidUTF8(a.Reason[:16<<10], "")
			}
			res["reason"] = a.Reason
		}
		_ = s.write(res)
	})
}
