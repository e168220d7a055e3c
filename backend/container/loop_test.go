package container

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
)

// A runner that stops reading its results: the dispatcher's write of a
// result waits writeTimeout, then the run ends naming the cause — not a
// stall until the wall budget, not a misreported broken bridge.
func TestRunnerThatStopsReadingResultsFails(t *testing.T) {
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		for i := 1; i <= 8; i++ {
			r.send(`{"type":"call","id":` + itoa(i) + `,"global":"tools","name":"big","args":null}`)
		}
		<-ctx.Done() // never reads
		return ExitStatus{Code: 137}
	})
	rt, dir := newTestRuntime(t, d, func(l *Limits) { l.WallTime = 3 * writeTimeout; l.ComputeTime = 3 * writeTimeout })
	bigv := json.RawMessage(`"` + strings.Repeat("v", 1<<20) + `"`)
	ns := []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{
		"big": func(context.Context, json.RawMessage) (json.RawMessage, error) { return bigv, nil },
	}}}
	start := time.Now()
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x", Bindings: ns})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Kind != backend.FailureExit || !strings.Contains(res.Error.Message, "stopped reading") {
		t.Fatalf("got %+v", res.Error)
	}
	if took := time.Since(start); took < writeTimeout || took > 2*writeTimeout {
		t.Errorf("the run ended after %v; want about writeTimeout (%v)", took, writeTimeout)
	}
	d.checkNoLeaks(t, dir)
}
