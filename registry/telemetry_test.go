package registry

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

// Each sub-call gets a tool_call span under the binding context's span
// with its name, id, sizes and outcome; a failed call's span has error
// status; contents only with WithTracePayloads, cut to TracePayloadBytes.
func TestToolCallSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	big := strings.Repeat("x", TracePayloadBytes+100)
	for _, payloads := range []bool{false, true} {
		exp.Reset()
		rt := registrytest.New(backend.TypeScript)
		rt.Handle("prog", func(ctx context.Context, env *registrytest.Env) (any, error) {
			if _, err := env.Call("echo", json.RawMessage(`{"secret":"s3cr3t"}`)); err != nil {
				return nil, err
			}
			if _, err := env.Call("echo", json.RawMessage(`{"big":"`+big+`"}`)); err != nil {
				return nil, err
			}
			_, err := env.Call("broken", json.RawMessage(`{}`))
			return err != nil, nil
		})
		r := newReg(t, WithMode(ModeCode), WithRuntime(rt), WithTracePayloads(payloads))
		mustRegister(t, r, echoTool("echo"), failTool("broken", "it broke"))
		ctx, outer := otel.Tracer("test").Start(context.Background(), "outer")
		args, _ := json.Marshal(map[string]string{"code": "prog"})
		res := r.Execute(ctx, Call{ID: "c1", Name: RunCode, Arguments: args})
		outer.End()
		if res.CodeRun == nil || res.CodeRun.Error != nil || string(res.CodeRun.Value) != "true" {
			t.Fatalf("run: %+v %s", res.CodeRun, res.Text())
		}
		var calls []tracetest.SpanStub
		for _, s := range exp.GetSpans() {
			if s.Name == SpanToolCall {
				calls = append(calls, s)
			}
		}
		if len(calls) != 3 {
			t.Fatalf("payloads=%v: %d tool_call spans, want 3", payloads, len(calls))
		}
		for i, s := range calls {
			attrs := map[string]any{}
			for _, a := range s.Attributes {
				attrs[string(a.Key)] = a.Value.AsInterface()
			}
			if s.Parent.SpanID() != outer.SpanContext().SpanID() {
				t.Errorf("call %d: parent %v, want the binding's span", i+1, s.Parent.SpanID())
			}
			wantTool, wantOutcome, wantStatus := "echo", OutcomeOK, codes.Unset
			if i == 2 {
				wantTool, wantOutcome, wantStatus = "broken", OutcomeError, codes.Error
			}
			if attrs["dsh.tool.name"] != wantTool || attrs["gen_ai.tool.name"] != wantTool || attrs["dsh.outcome"] != wantOutcome ||
				attrs["dsh.call_id"] != "c1:code:"+string(rune('1'+i)) || attrs["dsh.parent_call_id"] != "c1" || s.Status.Code != wantStatus {
				t.Errorf("call %d: %v status %v", i+1, attrs, s.Status)
			}
			if n, _ := attrs["dsh.arguments_bytes"].(int64); n <= 0 {
				t.Errorf("call %d: arguments_bytes %v", i+1, attrs["dsh.arguments_bytes"])
			}
			if n, _ := attrs["dsh.result_bytes"].(int64); n <= 0 {
				t.Errorf("call %d: result_bytes %v", i+1, attrs["dsh.result_bytes"])
			}
			a, hasArgs := attrs["dsh.arguments"].(string)
			_, hasResult := attrs["dsh.result"].(string)
			if hasArgs != payloads || hasResult != payloads {
				t.Errorf("payloads=%v: call %d has arguments %v, result %v", payloads, i+1, hasArgs, hasResult)
			}
			if len(a) > TracePayloadBytes+len("…") {
				t.Errorf("call %d: arguments of %d bytes on the span", i+1, len(a))
			}
		}
		if payloads {
			if a := calls[0].Attributes; !strings.Contains(attrString(a, "dsh.arguments"), "s3cr3t") {
				t.Errorf("payloads: first call's arguments %q", attrString(a, "dsh.arguments"))
			}
			if got := attrString(calls[2].Attributes, "dsh.result"); !strings.Contains(got, "it broke") {
				t.Errorf("payloads: failed call's result %q", got)
			}
		}
	}
}

func attrString(as []attribute.KeyValue, key string) string {
	for _, a := range as {
		if string(a.Key) == key {
			return a.Value.AsString()
		}
	}
	return ""
}

// Each approval is an "approval" span with its decision; a time-out is
// also an error.
func TestApprovalSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	ap := &scripted{answers: map[string]Approval{"a": {Decision: DecisionAllow}, "b": {Decision: DecisionDeny, Reason: "no"}}}
	r := newReg(t, WithGuard(askAll), WithApprover(ap))
	mustRegister(t, r, echoTool("a"), echoTool("b"))
	r.Execute(context.Background(), Call{ID: "n1", Name: "a"})
	r.Execute(context.Background(), Call{ID: "n2", Name: "b"})
	slow := &scripted{block: make(chan struct{})}
	defer close(slow.block)
	r2 := newReg(t, WithGuard(askAll), WithApprover(slow), WithApprovalTimeout(20*time.Millisecond))
	mustRegister(t, r2, echoTool("a"))
	r2.Execute(context.Background(), Call{ID: "n3", Name: "a"})

	var got []string
	for _, s := range exp.GetSpans() {
		if s.Name != SpanApproval {
			continue
		}
		var d string
		for _, kv := range s.Attributes {
			if kv.Key == AttrApprovalDecision {
				d = kv.Value.AsString()
			}
		}
		got = append(got, d+":"+s.Status.Code.String())
	}
	if want := "allow:Unset deny:Unset timeout:Error"; strings.Join(got, " ") != want {
		t.Errorf("approval spans %q, want %q", strings.Join(got, " "), want)
	}
}
