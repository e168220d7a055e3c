package mcp

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestTraceMetaJoinsTheCall(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, c := range []struct {
		meta map[string]any
		want string
	}{
		{map[string]any{"traceparent": tp, "tracestate": "k=v"}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{nil, ""},
		{map[string]any{"traceparent": 42}, ""},
		{map[string]any{"traceparent": "junk"}, ""},
	} {
		sc := trace.SpanContextFromContext(withTraceMeta(context.Background(), c.meta))
		got := ""
		if sc.IsValid() {
			got = sc.TraceID().String()
		}
		if got != c.want {
			t.Errorf("_meta %v: trace %q, want %q", c.meta, got, c.want)
		}
	}
}
