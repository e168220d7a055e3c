package server

// Telemetry of the daemon (issue 15): the W3C trace context of a request
// joins its runs to the caller's trace, and RunObserver turns the
// runtime's per-run measurements (phases, pool, bridge traffic) into
// Prometheus metrics labelled by tenant.

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-container/dsh-container/backend"
)

// Metric names of RunObserver.
const (
	MetricRunPhase     = "dsh_container_run_phase_seconds"
	MetricPoolAcquire  = "dsh_container_pool_acquisitions_total"
	MetricBridgeFrames = "dsh_container_bridge_frames_total"
	MetricBridgeBytes  = "dsh_container_bridge_bytes_total"
)

// withTraceContext joins a request to the caller's trace: its context
// carries the span context of a valid W3C traceparent header (and its
// tracestate). Invalid headers are ignored, as W3C asks.
func withTraceContext(r *http.Request) *http.Request {
	if r.Header.Get("traceparent") == "" {
		return r
	}
	ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return r
	}
	return r.WithContext(ctx)
}

// RunObserver records the container runtime's measurements of each run
// (it implements backend/container.Observer) as Prometheus metrics, with
// the tenant of the run's request. Register it with the registry given
// to WithMetrics, and give it to the runtimes (container.WithObserver).
type RunObserver struct {
	phase  *prometheus.HistogramVec
	pool   *prometheus.CounterVec
	frames *prometheus.CounterVec
	bytes  *prometheus.CounterVec
}

var _ prometheus.Collector = (*RunObserver)(nil)

// NewRunObserver returns a RunObserver; register it to serve its metrics.
func NewRunObserver() *RunObserver {
	return &RunObserver{
		phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricRunPhase,
			Help:    "Duration of each phase of a run: prepare, acquire (create, start, hello on a pool miss), program, teardown.",
			Buckets: prometheus.ExponentialBucketsRange(0.0001, 120, 20),
		}, []string{"language", "tenant", "phase"}),
		pool: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPoolAcquire,
			Help: "Sandboxes runs acquired, by result: hit (from the warm pool) or miss (created for the run).",
		}, []string{"language", "tenant", "result"}),
		frames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricBridgeFrames,
			Help: "Websocket frames on the bridge between the host and the runners, by direction: in (from the runner) or out.",
		}, []string{"language", "tenant", "direction"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricBridgeBytes,
			Help: "Payload bytes of the bridge's websocket frames, by direction: in (from the runner) or out.",
		}, []string{"language", "tenant", "direction"}),
	}
}

// Describe implements prometheus.Collector.
func (o *RunObserver) Describe(ch chan<- *prometheus.Desc) {
	o.phase.Describe(ch)
	o.pool.Describe(ch)
	o.frames.Describe(ch)
	o.bytes.Describe(ch)
}

// Collect implements prometheus.Collector.
func (o *RunObserver) Collect(ch chan<- prometheus.Metric) {
	o.phase.Collect(ch)
	o.pool.Collect(ch)
	o.frames.Collect(ch)
	o.bytes.Collect(ch)
}

// ObservePhase records one phase of a run.
func (o *RunObserver) ObservePhase(ctx context.Context, l backend.Language, phase string, d time.Duration) {
	o.phase.WithLabelValues(string(l), tenantOf(ctx).Name, phase).Observe(d.Seconds())
}

// ObservePool records a pool hit or miss.
func (o *RunObserver) ObservePool(ctx context.Context, l backend.Language, hit bool) {
	result := "miss"
	if hit {
		result = "hit"
	}
	o.pool.WithLabelValues(string(l), tenantOf(ctx).Name, result).Inc()
}

// ObserveFrames records one run's bridge traffic: frames and payload
// bytes from the runner (in) and to it (out).
func (o *RunObserver) ObserveFrames(ctx context.Context, l backend.Language, inFrames, inBytes, outFrames, outBytes int64) {
	t := tenantOf(ctx).Name
	o.frames.WithLabelValues(string(l), t, "in").Add(float64(inFrames))
	o.frames.WithLabelValues(string(l), t, "out").Add(float64(outFrames))
	o.bytes.WithLabelValues(string(l), t, "in").Add(float64(inBytes))
	o.bytes.WithLabelValues(string(l), t, "out").Add(float64(outBytes))
}
