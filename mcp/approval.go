package mcp

import (
	"context"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-container/dsh-container/registry"
)

// ErrNoElicitation denies a call the policy asks about when the MCP
// client did not declare the elicitation capability: nobody can be asked.
var ErrNoElicitation = errors.New("approval required, but the MCP client does not support elicitation, so the call is denied; configure a policy that allows it, or use a client with elicitation")

// maxElicitArgs bounds the arguments shown in an elicitation message.
const maxElicitArgs = 4000

// multiRoundTripVersion is the MCP protocol version from which a server
// cannot elicit while it serves a request.
const multiRoundTripVersion = "2026-07-28"

type sessionKey struct{}

// withSession records the MCP session a call came from, for the approver.
func withSession(ctx context.Context, ss *sdk.ServerSession) context.Context {
	if ss == nil {
		return ctx
	}
	return context.WithValue(ctx, sessionKey{}, ss)
}

// approvalSchema is the form an approval elicits: one decision, and an
// optional reason for a denial.
var approvalSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"decision": map[string]any{
			"type":        "string",
			"title":       "Decision",
			"description": "allow this call, deny it, or allow this tool for the rest of the run",
			"enum":        []any{string(registry.DecisionAllow), string(registry.DecisionDeny), string(registry.DecisionAllowForRun)},
		},
		"reason": map[string]any{
			"type":        "string",
			"title":       "Reason",
			"description": "why it is denied (the program sees it)",
		},
	},
	"required": []any{"decision"},
}

// elicitApprover asks the MCP client (its user) about a call through
// elicitation/create, when the client declared the capability; otherwise
// the call is denied with ErrNoElicitation.
type elicitApprover struct{}

func (elicitApprover) Approve(ctx context.Context, req registry.ApprovalRequest) (registry.Approval, error) {
	ss, _ := ctx.Value(sessionKey{}).(*sdk.ServerSession)
	if ss == nil || !supportsElicitation(ss) {
		return registry.Approval{Decision: registry.DecisionDeny, Reason: ErrNoElicitation.Error()}, nil
	}
	if v := ss.InitializeParams().ProtocolVersion; v >= multiRoundTripVersion {
		// From this version a server may not send elicitation/create
		// while it serves tools/call (SEP-2322): the input would come in
		// a second tools/call, and the program's run cannot wait across
		// calls.
		return registry.Approval{Decision: registry.DecisionDeny, Reason: fmt.Sprintf("%v (protocol %s forbids elicitation during a tool call)", ErrNoElicitation, v)}, nil
	}
	args := string(req.Exec.Arguments)
	if len(args) > maxElicitArgs {
		args = args[:maxElicitArgs] + fmt.Sprintf("… (%d bytes)", len(args))
	}
	msg := fmt.Sprintf("The program wants to call tool %q with arguments %s (%s). Allow it?", req.Exec.Name, args, req.Reason)
	res, err := ss.Elicit(ctx, &sdk.ElicitParams{Mode: "form", Message: msg, RequestedSchema: approvalSchema})
	if err != nil {
		return registry.Approval{}, fmt.Errorf("elicitation failed: %w", err)
	}
	switch res.Action {
	case "accept":
		d, _ := res.Content["decision"].(string)
		dec, err := registry.ParseDecision(d)
		if err != nil {
			return registry.Approval{Decision: registry.DecisionDeny, Reason: fmt.Sprintf("the elicitation answer has no valid decision (%q)", d)}, nil
		}
		reason, _ := res.Content["reason"].(string)
		if dec == registry.DecisionDeny && reason == "" {
			reason = "denied by the user"
		}
		return registry.Approval{Decision: dec, Reason: reason}, nil
	case "decline":
		return registry.Approval{Decision: registry.DecisionDeny, Reason: "declined by the user"}, nil
	}
	return registry.Approval{Decision: registry.DecisionDeny, Reason: "the user dismissed the approval"}, nil
}

func supportsElicitation(ss *sdk.ServerSession) bool {
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}
