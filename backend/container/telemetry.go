package container

// Tracing and metrics hooks of a run (issue 15).
//
// Spans go through the OpenTelemetry API's global TracerProvider: a no-op
// until the program (the CLI) installs an SDK provider, so a library user
// who never configures tracing pays for a no-op tracer only. The span tree
// of one run:
//
//	run
//	├── prepare
//	├── acquire            (dsh.pool_hit; on a miss:)
//	│   ├── create
//	│   ├── start
//	│   └── hello
//	├── program            (tool-call spans, from the registry, nest here)
//	└── teardown           (ends after Run returned: it runs in the background)
//
// Measurements for metrics go to an Observer (WithObserver), which the
// daemon implements with Prometheus.

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-container/dsh-container/backend"
)

// TracerName is the instrumentation scope of the runtime's spans.
const TracerName = "github.com/dsh-container/dsh-container/backend/container"

// Span names of a run and its phases.
const (
	SpanRun      = "run"
	SpanPrepare  = "prepare"
	SpanAcquire  = "acquire"
	SpanCreate   = "create"
	SpanStart    = "start"
	SpanHello    = "hello"
	SpanProgram  = "program"
	SpanTeardown = "teardown"
	SpanEgress   = "egress"
)

// Attribute keys of the runtime's spans.
const (
	AttrRunID          = attribute.Key("dsh.run_id")
	AttrLanguage       = attribute.Key("dsh.language")
	AttrDriver         = attribute.Key("dsh.driver")
	AttrOCIRuntime     = attribute.Key("dsh.oci_runtime")
	AttrOutcome        = attribute.Key("dsh.outcome")
	AttrCPUMs          = attribute.Key("dsh.cpu_ms")
	AttrWallMs         = attribute.Key("dsh.wall_ms")
	AttrCalls          = attribute.Key("dsh.calls")
	AttrLogsTruncated  = attribute.Key("dsh.logs_truncated")
	AttrValueTruncated = attribute.Key("dsh.value_truncated")
	AttrTruncated      = attribute.Key("dsh.truncated")
	AttrPoolHit        = attribute.Key("dsh.pool_hit")
	AttrContainerID    = attribute.Key("dsh.container_id")
	AttrEgressHost     = attribute.Key("dsh.egress.host")
	AttrEgressPort     = attribute.Key("dsh.egress.port")
	AttrEgressAllowed  = attribute.Key("dsh.egress.allowed")
	AttrEgressBytesIn  = attribute.Key("dsh.egress.bytes_in")
	AttrEgressBytesOut = attribute.Key("dsh.egress.bytes_out")
)

// Outcome of a run that returned an error (no container for the program).
const OutcomeError = "error"

func tracer() trace.Tracer { return otel.Tracer(TracerName) }

// Observer receives a run's measurements as they happen, for metrics.
// Implementations must be cheap and safe for concurrent use; ctx is the
// run's (its values — a tenant, say — are the caller's).
type Observer interface {
	// ObservePhase reports how long one phase of a run took: prepare,
	// acquire, create, start, hello, program or teardown.
	ObservePhase(ctx context.Context, language backend.Language, phase string, d time.Duration)
	// ObservePool reports whether a run's sandbox came from the warm pool.
	ObservePool(ctx context.Context, language backend.Language, hit bool)
	// ObserveFrames reports the bridge traffic of one run once it ended:
	// frames and their payload bytes from the runner (in) and to it (out).
	ObserveFrames(ctx context.Context, language backend.Language, inFrames, inBytes, outFrames, outBytes int64)
}

// WithObserver sends the runtime's measurements to o (default: none).
func WithObserver(o Observer) Option { return func(opts *options) { opts.observer = o } }

// phase starts one phase's span under ctx's span and returns the context
// for the phase's work and the function that ends it, reporting the
// phase's duration to the observer. Phases of a sandbox the pool starts
// in the background (no run span in ctx) get no span.
func (r *Runtime) phase(ctx context.Context, name string) (context.Context, func(err error)) {
	start := time.Now()
	var span trace.Span
	if trace.SpanFromContext(ctx).IsRecording() {
		ctx, span = tracer().Start(ctx, name)
	}
	return ctx, func(err error) {
		if obs := r.opts.observer; obs != nil {
			obs.ObservePhase(ctx, r.opts.language, name, time.Since(start))
		}
		if span != nil {
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}
	}
}

// startRun starts a run's span with what is known before it runs.
func (r *Runtime) startRun(ctx context.Context) (context.Context, trace.Span) {
	return tracer().Start(ctx, SpanRun, trace.WithAttributes(
		AttrLanguage.String(string(r.opts.language)),
		AttrDriver.String(r.driver.Capabilities().Name),
		AttrOCIRuntime.String(ociRuntimeName(r.opts.ociRuntime)),
	))
}

// ociRuntimeName names the OCI runtime; empty is the engine's default.
func ociRuntimeName(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

// endRun records a run's outcome on its span and ends it.
func endRun(span trace.Span, res *backend.RunResult, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	switch {
	case err != nil:
		span.SetAttributes(AttrOutcome.String(OutcomeError))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case res.Error != nil:
		span.SetAttributes(AttrOutcome.String(string(res.Error.Kind)))
		span.SetStatus(codes.Error, string(res.Error.Kind)+": "+cutMessage(res.Error.Message))
	default:
		span.SetAttributes(AttrOutcome.String("ok"))
	}
	if res != nil {
		span.SetAttributes(
			AttrCPUMs.Float64(float64(res.Stats.CPU.Microseconds())/1000),
			AttrWallMs.Float64(float64(res.Stats.Wall.Microseconds())/1000),
			AttrCalls.Int(res.Stats.Calls),
			AttrLogsTruncated.Bool(res.LogsTruncated),
			AttrValueTruncated.Bool(res.ValueTruncated),
			AttrTruncated.Bool(res.LogsTruncated || res.ValueTruncated),
		)
	}
	span.End()
}

// traceID is ctx's trace id in hex, or "" without one.
func traceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}

// frameMeter counts one bridge connection's frames and bytes.
type frameMeter struct {
	inFrames, inBytes, outFrames, outBytes atomic.Int64
}

func (m *frameMeter) in(n int) {
	m.inFrames.Add(1)
	m.inBytes.Add(int64(n))
}

func (m *frameMeter) out(n int) {
	m.outFrames.Add(1)
	m.outBytes.Add(int64(n))
}

func (m *frameMeter) counts() (inFrames, inBytes, outFrames, outBytes int64) {
	return m.inFrames.Load(), m.inBytes.Load(), m.outFrames.Load(), m.outBytes.Load()
}

// StartEgressSpan is the hook for egress connections (the CONNECT proxy
// tunnelled over the bridge, built separately): it starts an "egress" span
// under the run's span in ctx; the returned function ends it with the
// decision, the bytes each way and the error, if any (tunnels.go).
func StartEgressSpan(ctx context.Context, host string, port int) (context.Context, func(allowed bool, bytesIn, bytesOut int64, err error)) {
	ctx, span := tracer().Start(ctx, SpanEgress, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrEgressHost.String(host), AttrEgressPort.Int(port)))
	return ctx, func(allowed bool, bytesIn, bytesOut int64, err error) {
		span.SetAttributes(AttrEgressAllowed.Bool(allowed), AttrEgressBytesIn.Int64(bytesIn), AttrEgressBytesOut.Int64(bytesOut))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		} else if !allowed {
			span.SetStatus(codes.Error, "egress denied")
		}
		span.End()
	}
}

// observeFrames reports a finished sandbox's bridge traffic.
func (r *Runtime) observeFrames(ctx context.Context, sb *sandbox) {
	if r.opts.observer == nil || sb.peer == nil {
		return
	}
	inF, inB, outF, outB := sb.peer.meter.counts()
	r.opts.observer.ObserveFrames(ctx, r.opts.language, inF, inB, outF, outB)
}
