package container

import (
	"context"
	"time"

	"github.com/dsh-container/dsh-container/portproto"
)

// RunTrace records when one run passed its phases, for bench's warm-run
// breakdown. Attach it with WithRunTrace; Run fills it in (from the run's
// own goroutine, so read it after Run returns). Runner holds the runner's
// own account from its done frame, when it gave one.
type RunTrace struct {
	Start    time.Time // Run entered
	Prepared time.Time // program validated and type-stripped
	Acquired time.Time // a sandbox is ready: a pooled one, or a fresh start
	Sent     time.Time // the run frame is queued to the writer
	Done     time.Time // the done frame arrived
	Returned time.Time // settled: bindings waited for, logs taken
	Runner   *portproto.Timings
}

type traceKey struct{}

// WithRunTrace returns ctx carrying tr for the Run it is passed to.
func WithRunTrace(ctx context.Context, tr *RunTrace) context.Context {
	return context.WithValue(ctx, traceKey{}, tr)
}

// mark sets *at to now when ctx carries a trace; field picks the field.
func mark(ctx context.Context, field func(*RunTrace) *time.Time) {
	if tr, ok := ctx.Value(traceKey{}).(*RunTrace); ok && tr != nil {
		*field(tr) = time.Now()
	}
}

// traceRunner records the runner's timings when ctx carries a trace.
func traceRunner(ctx context.Context, t *portproto.Timings) {
	if tr, ok := ctx.Value(traceKey{}).(*RunTrace); ok && tr != nil {
		tr.Runner = t
	}
}
