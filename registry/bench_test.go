package registry

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
)

// BenchmarkRunCodeBindingRoundTrip measures the registry's share of a
// binding round trip: a runtime invoking a no-op tool's binding from one
// goroutine, one call after another, as the container runtime's dispatcher
// does (no container, no runner):
//
//	go test -run '^$' -bench RunCodeBindingRoundTrip -benchmem ./registry/
func BenchmarkRunCodeBindingRoundTrip(b *testing.B) {
	var runErr error
	rt := funcRuntime{lang: backend.TypeScript, run: func(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
		fn := req.Bindings[0].Functions["noop"]
		args := json.RawMessage(`{"q":1}`)
		for b.Loop() {
			if _, err := fn(ctx, args); err != nil {
				runErr = err
				break
			}
		}
		return backend.RunResult{}, nil
	}}
	r := New(WithMode(ModeCode), WithRuntime(rt))
	noop := Tool{Name: "noop", Description: "does nothing", Execute: func(context.Context, Execution) ([]Block, error) { return nil, nil }}
	if err := r.Register(noop); err != nil {
		b.Fatal(err)
	}
	if res := r.Execute(context.Background(), runCall("bench", "x")); res.IsError || runErr != nil {
		b.Fatal(res.Text(), runErr)
	}
}
