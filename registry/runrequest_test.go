package registry

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
)

// WithRunRequest is the one route per-run options take into run_code's
// RunRequest: its Limits, Egress and Events reach Run as given, the
// registry sets Program and Bindings over the base's, and WithLogSink
// replaces the base's Logs.
func TestWithRunRequestCarriesTheOptions(t *testing.T) {
	var events, baseLogs, sinkLogs int
	base := backend.RunRequest{
		Program:  "the base's program, never run",
		Bindings: []backend.BindingNamespace{{Global: "base"}},
		Limits:   backend.Limits{WallTime: 2 * time.Second, MemoryBytes: 64 << 20, Pids: 16},
		Egress:   &backend.Egress{Allow: []string{"api.example.com:443"}},
		Events:   func(json.RawMessage) { events++ },
		Logs:     func(backend.LogEntry) { baseLogs++ },
	}
	var got backend.RunRequest
	rt := funcRuntime{lang: backend.TypeScript, run: func(ctx context.Context, req backend.RunRequest) (backend.RunResult, error) {
		got = req
		if req.Events != nil {
			req.Events(json.RawMessage(`{"type":"egress"}`))
		}
		if req.Logs != nil {
			req.Logs(backend.LogEntry{Text: "one"})
		}
		return backend.RunResult{Value: json.RawMessage(`1`), ValueKind: backend.ValueJSON}, nil
	}}
	r := newReg(t, WithMode(ModeCode), WithRuntime(rt), WithRunRequest(base),
		WithLogSink(func(string, backend.LogEntry) { sinkLogs++ }))
	res := r.Execute(context.Background(), runCall("c1", "return 1"))
	if res.IsError {
		t.Fatalf("%s (%v)", res.Text(), res.Err)
	}
	if got.Program != "return 1" {
		t.Errorf("Program %q, want the call's", got.Program)
	}
	if len(got.Bindings) != 1 || got.Bindings[0].Global != BindingGlobal {
		t.Errorf("Bindings %+v, want the registry's %q namespace only", got.Bindings, BindingGlobal)
	}
	if got.Limits != base.Limits {
		t.Errorf("Limits %+v, want %+v", got.Limits, base.Limits)
	}
	if got.Egress == nil || len(got.Egress.Allow) != 1 || got.Egress.Allow[0] != "api.example.com:443" {
		t.Errorf("Egress %+v, want the base's", got.Egress)
	}
	if events != 1 {
		t.Errorf("the base's Events saw %d events, want 1", events)
	}
	if sinkLogs != 1 || baseLogs != 0 {
		t.Errorf("log sink saw %d, the base's Logs %d: WithLogSink must replace the base's Logs", sinkLogs, baseLogs)
	}
}
