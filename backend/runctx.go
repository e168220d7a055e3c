package backend

import "context"

type runIDKey struct{}

// ContextWithRunID returns ctx carrying a run's id. A runtime sets it on
// the context its bindings get, so what a tool logs with that context
// can name the run (slog handlers read it with RunIDFromContext).
func ContextWithRunID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, runIDKey{}, id)
}

// RunIDFromContext returns the run id ctx carries, or "".
func RunIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(runIDKey{}).(string)
	return id
}
