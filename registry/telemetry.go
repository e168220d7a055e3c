package registry

// Tracing of sub-calls (issue 15): one span per tool call a run_code
// program makes, under the span of the binding's context (the runtime's
// "program" span), through the OpenTelemetry API's global provider — a
// no-op until the program installs an SDK.

import (
	"context"
	"encoding/json"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-container/dsh-container/backend"
)

// TracerName is the instrumentation scope of the registry's spans.
const TracerName = "github.com/dsh-container/dsh-container/registry"

// Span names.
const (
	// SpanToolCall is the span of one sub-call.
	SpanToolCall = "tool_call"
	// SpanApproval is the span of one approval decision (StartApprovalSpan).
	SpanApproval = "approval"
)

// Attribute keys of the registry's spans. The gen_ai.* keys follow the
// OpenTelemetry GenAI semantic conventions for tool execution.
const (
	AttrToolName         = attribute.Key("dsh.tool.name")
	AttrCallID           = attribute.Key("dsh.call_id")
	AttrParentCallID     = attribute.Key("dsh.parent_call_id")
	AttrSeq              = attribute.Key("dsh.seq")
	AttrOutcome          = attribute.Key("dsh.outcome")
	AttrArgumentsBytes   = attribute.Key("dsh.arguments_bytes")
	AttrResultBytes      = attribute.Key("dsh.result_bytes")
	AttrArguments        = attribute.Key("dsh.arguments")
	AttrResult           = attribute.Key("dsh.result")
	AttrGenAIOperation   = attribute.Key("gen_ai.operation.name")
	AttrGenAIToolName    = attribute.Key("gen_ai.tool.name")
	AttrGenAIToolCallID  = attribute.Key("gen_ai.tool.call.id")
	AttrApprovalDecision = attribute.Key("dsh.approval.decision")
)

// Outcomes of a tool-call span.
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
)

// TracePayloadBytes bounds the argument and result contents a span holds
// under WithTracePayloads.
const TracePayloadBytes = 16 << 10

// WithTracePayloads puts the arguments and results of sub-calls on their
// spans (default: only their sizes). They may hold secrets: whoever reads
// the traces reads them.
func WithTracePayloads(on bool) Option { return func(c *config) { c.tracePayloads = on } }

func tracer() trace.Tracer { return otel.Tracer(TracerName) }

// startToolSpan starts a sub-call's span. Its parent is the binding's
// span (bctx, from the runtime) when there is one, else ctx's; the
// returned context keeps ctx's cancellation and carries bctx's run id.
func startToolSpan(ctx, bctx context.Context, sc *subCall) (context.Context, trace.Span) {
	if sp := trace.SpanFromContext(bctx); sp.SpanContext().IsValid() {
		ctx = trace.ContextWithSpan(ctx, sp)
	}
	if id := backend.RunIDFromContext(bctx); id != "" {
		ctx = backend.ContextWithRunID(ctx, id)
	}
	return tracer().Start(ctx, SpanToolCall, trace.WithAttributes(
		AttrToolName.String(sc.exec.Name),
		AttrCallID.String(sc.exec.CallID),
		AttrParentCallID.String(sc.exec.Parent),
		AttrSeq.Int(sc.seq),
		AttrArgumentsBytes.Int(len(sc.exec.Arguments)),
		AttrGenAIOperation.String("execute_tool"),
		AttrGenAIToolName.String(sc.exec.Name),
		AttrGenAIToolCallID.String(sc.exec.CallID),
	))
}

// endToolSpan records a sub-call's outcome and ends its span.
func endToolSpan(span trace.Span, payloads bool, sc *subCall, value json.RawMessage, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if payloads {
		span.SetAttributes(AttrArguments.String(summarize(string(sc.exec.Arguments), TracePayloadBytes)))
	}
	if err != nil {
		msg := err.Error()
		span.SetAttributes(AttrOutcome.String(OutcomeError), AttrResultBytes.Int(len(msg)))
		if payloads {
			span.SetAttributes(AttrResult.String(summarize(msg, TracePayloadBytes)))
		}
		var be *bindingError
		if !errors.As(err, &be) || be.err != nil {
			span.RecordError(err)
		}
		span.SetStatus(codes.Error, summarize(msg, SummaryBytes))
	} else {
		span.SetAttributes(AttrOutcome.String(OutcomeOK), AttrResultBytes.Int(len(value)))
		if payloads {
			span.SetAttributes(AttrResult.String(summarize(string(value), TracePayloadBytes)))
		}
	}
	span.End()
}

// StartApprovalSpan starts an "approval" span for exec's approval under
// ctx's span (approval.go); the returned function ends it with the
// decision ("allow", "deny", "allowForRun", "timeout", "abandoned") and
// the error, if any.
func StartApprovalSpan(ctx context.Context, exec Execution) (context.Context, func(decision string, err error)) {
	ctx, span := tracer().Start(ctx, SpanApproval, trace.WithAttributes(
		AttrToolName.String(exec.Name), AttrCallID.String(exec.CallID)))
	return ctx, func(decision string, err error) {
		span.SetAttributes(AttrApprovalDecision.String(decision))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
