package telemetry

import (
	"context"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-container/dsh-container/backend"
)

// NewJSONLogger returns the JSON slog logger of serve and mcp: a line
// logged with a context that carries a span gets its trace_id (and
// span_id), and one whose context names a run (backend.ContextWithRunID)
// its run_id, unless the line has its own.
func NewJSONLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(traceHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})})
}

// traceHandler adds trace_id and span_id from a record's context.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	runID := backend.RunIDFromContext(ctx)
	if !sc.IsValid() && runID == "" {
		return h.Handler.Handle(ctx, r)
	}
	hasTrace, hasRun := false, false
	r.Attrs(func(a slog.Attr) bool {
		hasTrace = hasTrace || a.Key == "trace_id"
		hasRun = hasRun || a.Key == "run_id"
		return true
	})
	r = r.Clone()
	if runID != "" && !hasRun {
		r.AddAttrs(slog.String("run_id", runID))
	}
	if sc.IsValid() && !hasTrace {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(as)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}
