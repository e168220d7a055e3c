package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
)

// EventApproval is the type of the event each approval decision emits.
const EventApproval = "tool/approval"

// DefaultApprovalTimeout bounds how long a call waits for an Approver's
// decision when WithApprovalTimeout is not given. A wait that outlasts it
// is a denial.
const DefaultApprovalTimeout = 2 * time.Minute

// Decision is an Approver's answer.
type Decision string

const (
	// DecisionAllow lets this one call run.
	DecisionAllow Decision = "allow"
	// DecisionDeny rejects the call, with Approval.Reason.
	DecisionDeny Decision = "deny"
	// DecisionAllowForRun lets this call run and every later call of the
	// same tool in the same run_code run without asking again. For a
	// native call (no run) it is DecisionAllow.
	DecisionAllowForRun Decision = "allowForRun"
)

// ParseDecision validates a decision name.
func ParseDecision(s string) (Decision, error) {
	switch d := Decision(s); d {
	case DecisionAllow, DecisionDeny, DecisionAllowForRun:
		return d, nil
	}
	return "", errorf(errdefs.ErrInvalidArgument, "decision %q: want allow, deny or allowForRun", s)
}

// Approval is an Approver's decision about one call.
type Approval struct {
	Decision Decision
	// Reason explains a denial; the program's rejection carries it.
	Reason string
}

// ApprovalRequest is what an Approver is asked about: the call, and why a
// guard asked.
type ApprovalRequest struct {
	// Exec is the call waiting for the decision. Exec.Arguments is its
	// canonical JSON; print it neutralised for the medium (a terminal)
	// — it is written by the model or its program.
	Exec Execution
	// Reason is the asking guard's message.
	Reason string
}

// Approver decides calls a guard asked about (see Ask). Approve blocks
// while the call waits: for a sub-call the program is awaiting its
// binding's promise, using no compute while its wall time runs. ctx ends
// at the approval timeout or when the call's run ends; an Approver must
// return promptly then. An error, or a Decision that is not one of the
// three, is a denial.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Approval, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (Approval, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) (Approval, error) {
	return f(ctx, req)
}

// AskError is a guard's answer "ask": the call waits for the registry's
// Approver. Return one with Ask.
type AskError struct {
	// Reason says why the guard asks; the Approver sees it.
	Reason string
}

func (e *AskError) Error() string { return "approval required: " + e.Reason }

// Ask is a guard's "ask" answer (see Guard).
func Ask(reason string) error { return &AskError{Reason: reason} }

// WithApprover sets who decides the calls guards ask about. Without one an
// "ask" is a denial saying no approver is configured.
func WithApprover(a Approver) Option {
	return func(c *config) { c.approver = a }
}

// WithApprovalTimeout bounds the wait for one decision (default
// DefaultApprovalTimeout); a decision that does not come in time is a
// denial. d <= 0 keeps the default.
func WithApprovalTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.approvalTimeout = d
		}
	}
}

// errNoApprover denies an "ask" when no Approver is configured.
var errNoApprover = errors.New("approval required, but no approver is configured")

// approve settles a guard's ask: the run's allowForRun memory, then the
// Approver, under the approval timeout. A nil error allows the call.
func (r *Registry) approve(ctx context.Context, exec Execution, ask *AskError) (err error) {
	b := bridgeOf(ctx, exec)
	if b != nil && b.allowedForRun(exec.Name) {
		return nil
	}
	// The span's decision: deny unless set below; a time-out, an
	// abandoned wait or a failing approver is also an error.
	_, endSpan := StartApprovalSpan(ctx, exec)
	decision, failed := string(DecisionDeny), false
	defer func() {
		if failed {
			endSpan(decision, err)
		} else {
			endSpan(decision, nil)
		}
	}()
	if r.cfg.approver == nil {
		r.emitApproval(b, exec, DecisionDeny, errNoApprover.Error())
		return fmt.Errorf("%w (%s)", errNoApprover, ask.Reason)
	}
	timeout := r.cfg.approvalTimeout
	actx, cancel := context.WithTimeoutCause(ctx, timeout, errApprovalTimeout)
	defer cancel()
	type answer struct {
		a   Approval
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		var ans answer
		defer func() {
			if v := recover(); v != nil {
				ans = answer{err: fmt.Errorf("approver panicked: %v", v)}
			}
			ch <- ans
		}()
		ans.a, ans.err = r.cfg.approver.Approve(actx, ApprovalRequest{Exec: exec, Reason: ask.Reason})
	}()
	var ans answer
	select {
	case ans = <-ch:
	case <-actx.Done():
		// The approver may not honour ctx: do not wait for it.
	}
	switch {
	case ctx.Err() != nil:
		// The call's run ended while it waited: no decision was made.
		decision, failed = "abandoned", true
		return fmt.Errorf("approval abandoned: %w", context.Cause(ctx))
	case actx.Err() != nil:
		// Out of time; an answer that raced the deadline does not count.
		decision, failed = "timeout", true
		reason := fmt.Sprintf("approval timed out after %v", timeout)
		r.emitApproval(b, exec, DecisionDeny, reason)
		return errors.New(reason)
	case ans.err != nil:
		failed = true
		reason := "approver failed: " + ans.err.Error()
		r.emitApproval(b, exec, DecisionDeny, reason)
		return errors.New(reason)
	}
	switch ans.a.Decision {
	case DecisionAllow:
	case DecisionAllowForRun:
		if b != nil {
			b.allowForRun(exec.Name)
		}
	case DecisionDeny:
		reason := ans.a.Reason
		if reason == "" {
			reason = "denied by the approver"
		}
		r.emitApproval(b, exec, DecisionDeny, reason)
		return errors.New(reason)
	default:
		reason := fmt.Sprintf("approver answered %q (want allow, deny or allowForRun)", ans.a.Decision)
		r.emitApproval(b, exec, DecisionDeny, reason)
		return errors.New(reason)
	}
	decision = string(ans.a.Decision)
	r.emitApproval(b, exec, ans.a.Decision, ans.a.Reason)
	return nil
}

var errApprovalTimeout = errors.New("approval timed out")

// emitApproval emits the event of one decision: bounded with the run's
// events for a sub-call, directly for a native call.
func (r *Registry) emitApproval(b *bridge, exec Execution, d Decision, reason string) {
	if r.cfg.sink == nil {
		return
	}
	ev := Event{
		Type:         EventApproval,
		ParentCallID: exec.Parent,
		CallID:       exec.CallID,
		Tool:         exec.Name,
		Decision:     string(d),
		Reason:       summarize(reason, SummaryBytes),
		IsError:      d == DecisionDeny,
	}
	if b != nil {
		ev.Seq = seqOf(exec.CallID)
		b.emitBounded(ev)
		return
	}
	r.emit(ev)
}

// seqOf is the sub-call number at the end of "<parent>:code:<n>".
func seqOf(callID string) int {
	i := strings.LastIndex(callID, ":code:")
	if i < 0 {
		return 0
	}
	n, _ := strconv.Atoi(callID[i+len(":code:"):])
	return n
}

type bridgeKey struct{}

// bridgeOf returns the run a sub-call belongs to, nil for a native call.
func bridgeOf(ctx context.Context, exec Execution) *bridge {
	b, _ := ctx.Value(bridgeKey{}).(*bridge)
	if b == nil || exec.Parent == "" || b.parent.CallID != exec.Parent {
		return nil
	}
	return b
}

func (b *bridge) allowedForRun(tool string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.forRun[tool]
}

func (b *bridge) allowForRun(tool string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.forRun == nil {
		b.forRun = make(map[string]bool)
	}
	b.forRun[tool] = true
}
