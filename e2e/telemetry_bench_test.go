package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/registry"
)

// BenchmarkWarmRunTracing times warm runs (a pooled sandbox, 3 tool calls)
// through the registry with tracing exported over OTLP/HTTP to an
// in-test receiver and with tracing off (the API's no-op provider),
// alternating on and off in one invocation so both see the same machine,
// and reports each p50 and their ratio (target ≤ 1.05).
//
//	go test -run '^$' -bench WarmRunTracing -benchtime 40x ./e2e/
func BenchmarkWarmRunTracing(b *testing.B) {
	rcv := newOTLPReceiver(b)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(rcv.srv.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	prev := otel.GetTracerProvider()
	b.Cleanup(func() {
		otel.SetTracerProvider(prev)
		tp.Shutdown(context.Background())
	})
	off := noop.NewTracerProvider()

	e := newEnv(b, backend.TypeScript, nil, container.WithPool(1), container.WithLogger(slog.New(slog.DiscardHandler)))
	reg := registry.New(registry.WithMode(registry.ModeCode), registry.WithRuntime(e.rt))
	reg.Register(textTool("echo", func(args map[string]any) (string, error) { return fmt.Sprint(args["n"]), nil }))
	const program = `let s = 0; for (let i = 1; i <= 3; i++) s += Number(await tools.echo({n: i})); return s`
	waitWarm := func() {
		for deadline := time.Now().Add(time.Minute); e.rt.PoolIdle() < 1; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("the pool did not refill within a minute")
			}
		}
	}
	runOnce := func(id string) time.Duration {
		waitWarm()
		start := time.Now()
		res := reg.Execute(context.Background(), codeCall(id, program))
		d := time.Since(start)
		if res.CodeRun == nil || res.CodeRun.Error != nil || string(res.CodeRun.Value) != "6" || !res.CodeRun.Stats.Warm {
			b.Fatalf("run %s: %s %+v", id, res.Text(), res.CodeRun)
		}
		return d
	}
	// Warm up both paths once.
	otel.SetTracerProvider(tp)
	runOnce("warm-on")
	otel.SetTracerProvider(off)
	runOnce("warm-off")

	var on, offD []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, traced := range order {
			if traced {
				otel.SetTracerProvider(tp)
				on = append(on, runOnce(fmt.Sprintf("on%d", i)))
			} else {
				otel.SetTracerProvider(off)
				offD = append(offD, runOnce(fmt.Sprintf("off%d", i)))
			}
		}
	}
	b.StopTimer()
	otel.SetTracerProvider(off)
	if err := tp.ForceFlush(context.Background()); err != nil {
		b.Fatal(err)
	}
	rcv.mu.Lock()
	exported := len(rcv.spans)
	rcv.mu.Unlock()
	pOn, pOff := percentile(on, 0.5), percentile(offD, 0.5)
	b.ReportMetric(float64(pOn.Microseconds())/1000, "p50-traced-ms")
	b.ReportMetric(float64(pOff.Microseconds())/1000, "p50-off-ms")
	b.ReportMetric(float64(pOn)/float64(pOff), "ratio")
	b.ReportMetric(float64(exported)/float64(len(on)+1), "spans/traced-run")
	b.Logf("warm run p50: traced %v, off %v, ratio %.3f (%d runs each, %d spans exported)", pOn, pOff, float64(pOn)/float64(pOff), len(on), exported)
}
