package mcp

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// withTraceMeta joins a tool call to the caller's trace: the W3C
// "traceparent" (and "tracestate") keys of the request's _meta, when they
// hold a valid trace context. Anything else is ignored.
func withTraceMeta(ctx context.Context, meta map[string]any) context.Context {
	tp, _ := meta["traceparent"].(string)
	if tp == "" {
		return ctx
	}
	c := propagation.MapCarrier{"traceparent": tp}
	if ts, _ := meta["tracestate"].(string); ts != "" {
		c["tracestate"] = ts
	}
	out := propagation.TraceContext{}.Extract(ctx, c)
	if !trace.SpanContextFromContext(out).IsValid() {
		return ctx
	}
	return out
}
