package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dsh-container/dsh-container/backend"
)

// Metric names, all under the dsh_container_ namespace.
const (
	MetricRuns         = "dsh_container_runs_total"
	MetricRunWall      = "dsh_container_run_wall_seconds"
	MetricRunStartup   = "dsh_container_run_startup_seconds"
	MetricRunCPU       = "dsh_container_run_cpu_seconds"
	MetricBindingCalls = "dsh_container_binding_calls_total"
	MetricInFlight     = "dsh_container_runs_in_flight"
	MetricPoolIdle     = "dsh_container_pool_idle_sandboxes"
	MetricHTTPRequests = "dsh_container_http_requests_total"
	MetricSessions     = "dsh_container_sessions"
	MetricAuthFailures = "dsh_container_auth_failures_total"
	MetricRequestBytes = "dsh_container_request_bytes"
)

// Outcomes of dsh_container_runs_total: ok, a backend.FailureKind, or
// rejected (the program never ran: admission overload, image missing,
// daemon unreachable, runtime closed).
const OutcomeRejected = "rejected"

type metrics struct {
	runs     *prometheus.CounterVec
	wall     *prometheus.HistogramVec
	startup  *prometheus.HistogramVec
	cpu      *prometheus.HistogramVec
	calls    *prometheus.CounterVec
	inFlight *prometheus.GaugeVec
	requests *prometheus.CounterVec
	// sessions counts open sessions by tenant; authFailures requests
	// refused for a missing or wrong token or client certificate.
	sessions     *prometheus.GaugeVec
	authFailures prometheus.Counter
	handler      http.Handler
}

// newMetrics registers the server's collectors; requestBytes reports the
// bytes requests hold (intake.go).
func newMetrics(reg *prometheus.Registry, runtimes map[backend.Language]backend.Runtime, requestBytes func() float64) (*metrics, error) {
	lang := []string{"language"}
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRuns,
			Help: "Runs by language, tenant and outcome: ok, exception, timeout, abort, oom, exit, or rejected (never started).",
		}, []string{"language", "tenant", "outcome"}),
		wall: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricRunWall,
			Help:    "Program wall time, from its start to its settlement, of runs that got a sandbox.",
			Buckets: prometheus.ExponentialBucketsRange(0.005, 120, 16),
		}, lang),
		startup: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricRunStartup,
			Help:    "Time to get a sandbox ready (warm=true: taken from the warm pool), of runs that got one.",
			Buckets: prometheus.ExponentialBucketsRange(0.0001, 30, 16),
		}, []string{"language", "warm"}),
		cpu: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricRunCPU,
			Help:    "CPU time the sandbox's cgroup charged to the program, of runs that got a sandbox.",
			Buckets: prometheus.ExponentialBucketsRange(0.001, 60, 16),
		}, lang),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricBindingCalls,
			Help: "Binding (tool) calls programs made.",
		}, lang),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricInFlight,
			Help: "Runs in flight, including runs waiting for admission, by language and tenant.",
		}, []string{"language", "tenant"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricHTTPRequests,
			Help: "HTTP requests by handler, method and status code.",
		}, []string{"handler", "method", "code"}),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricSessions,
			Help: "Open sessions (GET /v1/sessions) by tenant.",
		}, []string{"tenant"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricAuthFailures,
			Help: "Requests refused for a missing or wrong bearer token or client certificate.",
		}),
	}
	cs := []prometheus.Collector{m.runs, m.wall, m.startup, m.cpu, m.calls, m.inFlight, m.requests, m.sessions, m.authFailures,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: MetricRequestBytes,
			Help: "Bytes of request bodies and session start frames the server holds: reserved before each is read, held until its run ends.",
		}, requestBytes)}
	for l, rt := range runtimes {
		// Start every series at zero so dashboards see the language.
		m.calls.WithLabelValues(string(l))
		if p, ok := rt.(PoolReporter); ok {
			cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        MetricPoolIdle,
				Help:        "Pre-started sandboxes ready in the warm pool.",
				ConstLabels: prometheus.Labels{"language": string(l)},
			}, func() float64 { return float64(p.PoolIdle()) }))
		}
	}
	cs = append(cs,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: nil, Registry: reg})
	return m, nil
}

// observeRun records a run the runtime reported.
func (m *metrics) observeRun(l backend.Language, tenant string, r *backend.RunResult) {
	lang := string(l)
	m.runs.WithLabelValues(lang, tenant, outcome(r)).Inc()
	m.calls.WithLabelValues(lang).Add(float64(r.Stats.Calls))
	// A program rejected before it got a sandbox (a syntax error, an
	// abort while queued) has no timings worth a histogram.
	if r.Stats.Startup <= 0 {
		return
	}
	warm := "false"
	if r.Stats.Warm {
		warm = "true"
	}
	m.wall.WithLabelValues(lang).Observe(r.Stats.Wall.Seconds())
	m.startup.WithLabelValues(lang, warm).Observe(r.Stats.Startup.Seconds())
	m.cpu.WithLabelValues(lang).Observe(r.Stats.CPU.Seconds())
}

// observeRejected records a run that never started.
func (m *metrics) observeRejected(l backend.Language, tenant string) {
	m.runs.WithLabelValues(string(l), tenant, OutcomeRejected).Inc()
}

// instrument counts requests by handler, method and code.
func (s *Server) instrument(name string, h http.Handler) http.Handler {
	return promhttp.InstrumentHandlerCounter(s.metrics.requests.MustCurryWith(prometheus.Labels{"handler": name}), h)
}
