package container

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
)

// BenchmarkHostRoundTrip measures the host's share of a binding round
// trip: a Go peer sends call frames one at a time over the real bridge and
// waits for each result (no container, no runner interpreter).
func BenchmarkHostRoundTrip(b *testing.B) {
	var elapsed time.Duration
	d := newFakeDriver(nil, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		start := time.Now()
		for i := 1; i <= b.N; i++ {
			r.send(`{"type":"call","id":` + itoa(i) + `,"global":"tools","name":"noop","args":{"q":1}}`)
			if _, err := r.readResult(); err != nil {
				return ExitStatus{Code: 90}
			}
		}
		elapsed = time.Since(start)
		r.send(done(""))
		<-ctx.Done()
		return ExitStatus{}
	})
	dir, err := shortDirB(b)
	if err != nil {
		b.Fatal(err)
	}
	l := DefaultLimits()
	rt, err := New(d, WithImage("fake"), WithLimits(l), WithSocketDir(dir))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(context.Background())
	noop := func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage("null"), nil }
	b.ResetTimer()
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x", Bindings: []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{"noop": noop}}}})
	if err != nil || res.Error != nil {
		b.Fatal(err, res.Error)
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N), "ns/call")
}
