package container

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dsh-container/dsh-container/backend"
)

type recObserver struct {
	mu              sync.Mutex
	phases          []string
	pool            []bool
	inFrames, inB   int64
	outFrames, outB int64
	framesReported  int
}

func (o *recObserver) ObservePhase(_ context.Context, _ backend.Language, phase string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.phases = append(o.phases, phase)
}

func (o *recObserver) ObservePool(_ context.Context, _ backend.Language, hit bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pool = append(o.pool, hit)
}

func (o *recObserver) ObserveFrames(_ context.Context, _ backend.Language, inF, inB, outF, outB int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inFrames, o.inB, o.outFrames, o.outB = o.inFrames+inF, o.inB+inB, o.outFrames+outF, o.outB+outB
	o.framesReported++
}

func inMemoryTracing(t *testing.T) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	return exp, tp
}

func spanNamed(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no %q span among %d", name, len(spans))
	return tracetest.SpanStub{}
}

func children(spans tracetest.SpanStubs, parent tracetest.SpanStub) []string {
	var out []string
	for _, s := range spans {
		if s.Parent.SpanID() == parent.SpanContext.SpanID() && s.SpanContext.TraceID() == parent.SpanContext.TraceID() {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return out
}

// A cold run's span tree: run under the caller's span; prepare, acquire,
// program and teardown under run; create, start and hello under acquire;
// the run's attributes; and the observer's phases, pool miss and frames.
func TestRunSpansAndObserver(t *testing.T) {
	exp, tp := inMemoryTracing(t)
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		if _, err := r.handshake(); err != nil {
			return ExitStatus{Code: 99}
		}
		r.send(`{"type":"call","id":1,"global":"tools","name":"echo","args":{"a":1}}`)
		if res, err := r.readResult(); err != nil || !res.OK {
			return ExitStatus{Code: 98}
		}
		r.send(done(`7`))
		<-ctx.Done()
		return ExitStatus{Code: 137}
	})
	obs := &recObserver{}
	rt, dir := newTestRuntime(t, d, nil, WithObserver(obs))
	ctx, caller := tp.Tracer("test").Start(context.Background(), "caller")
	res, err := rt.Run(ctx, backend.RunRequest{Program: "x", Bindings: echoBindings()})
	caller.End()
	if err != nil || res.Error != nil || string(res.Value) != "7" {
		t.Fatalf("run: %v %+v", err, res.Error)
	}
	d.checkNoLeaks(t, dir) // closes the runtime: teardown has ended
	if res.Stats.RunID == "" || res.Stats.TraceID != caller.SpanContext().TraceID().String() {
		t.Errorf("stats run id %q, trace id %q", res.Stats.RunID, res.Stats.TraceID)
	}

	spans := exp.GetSpans()
	run := spanNamed(t, spans, SpanRun)
	if run.Parent.SpanID() != caller.SpanContext().SpanID() {
		t.Errorf("run's parent %v, want the caller's span", run.Parent.SpanID())
	}
	if got, want := children(spans, run), []string{SpanAcquire, SpanPrepare, SpanProgram, SpanTeardown}; !slices.Equal(got, want) {
		t.Errorf("run's children %v, want %v", got, want)
	}
	if got, want := children(spans, spanNamed(t, spans, SpanAcquire)), []string{SpanCreate, SpanHello, SpanStart}; !slices.Equal(got, want) {
		t.Errorf("acquire's children %v, want %v", got, want)
	}
	attrs := map[string]any{}
	for _, a := range run.Attributes {
		attrs[string(a.Key)] = a.Value.AsInterface()
	}
	for k, want := range map[string]any{"dsh.language": "typescript", "dsh.driver": "fake", "dsh.oci_runtime": "default",
		"dsh.outcome": "ok", "dsh.calls": int64(1), "dsh.truncated": false, "dsh.pool_hit": false, "dsh.run_id": res.Stats.RunID} {
		if attrs[k] != want {
			t.Errorf("run %s = %v, want %v", k, attrs[k], want)
		}
	}
	if _, ok := attrs["dsh.cpu_ms"].(float64); !ok {
		t.Errorf("run dsh.cpu_ms = %v", attrs["dsh.cpu_ms"])
	}

	obs.mu.Lock()
	defer obs.mu.Unlock()
	phases := slices.Clone(obs.phases)
	slices.Sort(phases)
	if want := []string{SpanAcquire, SpanCreate, SpanHello, SpanPrepare, SpanProgram, SpanStart, SpanTeardown}; !slices.Equal(phases, want) {
		t.Errorf("observed phases %v, want %v", phases, want)
	}
	if !slices.Equal(obs.pool, []bool{false}) {
		t.Errorf("observed pool %v, want one miss", obs.pool)
	}
	// In: hello, call, done; out: run, result.
	if obs.framesReported != 1 || obs.inFrames != 3 || obs.outFrames != 2 || obs.inB <= 0 || obs.outB <= 0 {
		t.Errorf("observed frames: %d reports, in %d/%dB, out %d/%dB", obs.framesReported, obs.inFrames, obs.inB, obs.outFrames, obs.outB)
	}
}

// A sandbox that never becomes ready: Run's error marks the hello, acquire
// and run spans with error status and the run's outcome "error".
func TestRunSpansOnStartFailure(t *testing.T) {
	exp, _ := inMemoryTracing(t)
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		<-ctx.Done() // never says hello
		return ExitStatus{Code: 137}
	})
	rt, dir := newTestRuntime(t, d, func(l *Limits) { l.StartupTime = time.Second })
	if _, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"}); err == nil {
		t.Fatal("Run succeeded without a hello")
	}
	d.checkNoLeaks(t, dir)
	spans := exp.GetSpans()
	for _, name := range []string{SpanHello, SpanAcquire, SpanRun} {
		if s := spanNamed(t, spans, name); s.Status.Code != codes.Error {
			t.Errorf("%s span status %v, want Error", name, s.Status)
		}
	}
	for _, a := range spanNamed(t, spans, SpanRun).Attributes {
		if a.Key == AttrOutcome && a.Value.AsString() != OutcomeError {
			t.Errorf("run outcome %q, want %q", a.Value.AsString(), OutcomeError)
		}
	}
	if s := spanNamed(t, spans, SpanCreate); s.Status.Code == codes.Error {
		t.Errorf("create span has error status: %v", s.Status)
	}
}
