package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/portproto"
)

// The breakdown splits a traced run into its phases; "return" is what the
// runner's own timings leave of the time between the run frame and the
// done frame. Runs missing a timestamp are left out.
func TestBreakdown(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	tr := &container.RunTrace{Start: at(0), Prepared: at(1), Acquired: at(1.5), Sent: at(2), Done: at(10), Returned: at(10.25),
		Runner: &portproto.Timings{Compile: 2000, Evaluate: 1000, Render: 500}}
	b := traces{tr, {Start: at(0)}}.breakdown()
	if b == nil || b.RunnerReported != 1 {
		t.Fatalf("got %+v", b)
	}
	for name, c := range map[string]struct {
		got  Dist
		want float64
	}{
		"type-strip": {b.TypeStrip, 1}, "acquire": {b.Acquire, 0.5}, "send": {b.Send, 0.5},
		"compile": {b.Compile, 2}, "evaluate": {b.Evaluate, 1}, "render": {b.Render, 0.5},
		"return": {b.Return, 4.5}, "settle": {b.Settle, 0.25},
	} {
		if c.got.N != 1 || c.got.P50 != c.want {
			t.Errorf("%s: %+v, want p50 %v", name, c.got, c.want)
		}
	}
	if traces(nil).breakdown() != nil {
		t.Error("a breakdown of nothing")
	}
	// Without the runner's timings, return is the whole exchange.
	tr.Runner = nil
	if b := (traces{tr}).breakdown(); b.Return.P50 != 8 || b.RunnerReported != 0 {
		t.Errorf("without runner timings: %+v", b)
	}
}

// The text report shows the floors, the breakdown, the idle memory and
// issue 17's ratios with their verdicts.
func TestTextIssue17(t *testing.T) {
	lr := LangReport{Warm: Dist{N: 1, P50: 6}, RoundTrip: Dist{N: 1, P50: 0.2, P99: 0.6},
		RawFloor: Dist{N: 1, P50: 0.1}, LibraryFloor: Dist{N: 1, P50: 0.15},
		FloorRatios:   FloorRatios{RoundTripOverRaw: 2, RoundTripOverLibrary: 1.33, RoundTripP99OverP50: 3},
		IdleMemory:    &IdleMemory{UsageMiB: 64.5, AnonMiB: 14.25, Runners: 2},
		WarmBreakdown: &Breakdown{TypeStrip: Dist{N: 1, P50: 1.2}}}
	py := lr
	py.Warm.P50 = 5
	r := &Report{Drivers: []*DriverReport{{Name: "docker", Driver: "docker", Languages: map[string]LangReport{"typescript": lr, "python": py},
		Ratios: Ratios{WarmTSOverWarmPy: 1.2, WarmTSOverWorker: 0.2}}}}
	var buf bytes.Buffer
	r.Text(&buf)
	out := buf.String()
	for _, want := range []string{
		"typescript   raw socket floor", "typescript   library floor", "typescript   warm: type-strip (host)", "python   warm: settle",
		"typescript idle pooled runner memory", "64.5 MiB (anon 14.2)",
		"docker typescript round trip: p50 / raw socket floor 2.00 (target ≤ 2: met)", "p99 / p50 3.00 (target ≤ 4: met)",
		"docker warm TS / warm Python 1.20 (target ≤ 1.5: met); warm TS / worker_threads 0.20 (target ≤ 0.15: missed)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}
