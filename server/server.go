package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
)

// DefaultMaxBodyBytes bounds a request body unless WithMaxBodyBytes says
// otherwise: room for a program at the container runtime's default cap
// (256 KiB) even when JSON escaping multiplies its size.
const DefaultMaxBodyBytes = 2 << 20

// DefaultBodyTimeout bounds how long reading a request body may take once
// its headers have arrived, unless WithBodyTimeout says otherwise: a client
// that stalls mid-body gets 408 and its connection back.
const DefaultBodyTimeout = 10 * time.Second

// MaxIDBytes bounds a caller-supplied call id.
const MaxIDBytes = 256

// HealthCheck reports why the server cannot run programs, or nil.
type HealthCheck func(ctx context.Context) error

// PoolReporter is the optional ability of a runtime with a warm pool: the
// number of pre-started sandboxes ready now. The container runtime has it.
type PoolReporter interface {
	PoolIdle() int
}

// Option configures a Server.
type Option func(*options)

type options struct {
	runtimes    []backend.Runtime
	named       []namedRuntime
	tools       []registry.Tool
	source      ToolSource
	mode        registry.Mode
	logger      *slog.Logger
	metrics     *prometheus.Registry
	health      HealthCheck
	maxBody     int64
	maxRequest  int64 // 0: DefaultMaxRequestBytes, or maxBody when larger
	bodyTimeout time.Duration
	regOpts     []registry.Option
	retryAfter  time.Duration
	healthLimit time.Duration
	// mt is authentication, tenants and admission (auth.go).
	mt multiTenant
}

// WithRuntime serves programs of rt.Language() on rt. Give one per
// language; the server does not close them.
func WithRuntime(rt backend.Runtime) Option {
	return func(o *options) { o.runtimes = append(o.runtimes, rt) }
}

// WithNamedRuntime lets a request choose rt, by its OCI runtime's name,
// for programs of rt.Language(): the "runtime" key of POST /v1/run and of
// a session's start frame. A request without the key runs on the
// language's WithRuntime runtime; one naming a runtime not given here is a
// 400 listing the names that are. Give the default runtime under its own
// name too, so naming it is allowed. The server does not close rt.
func WithNamedRuntime(name string, rt backend.Runtime) Option {
	return func(o *options) { o.named = append(o.named, namedRuntime{name, rt}) }
}

// WithTools sets the tools every program can call (and the SDK shows).
func WithTools(tools ...registry.Tool) Option {
	return func(o *options) { o.tools = append(o.tools, tools...) }
}

// ToolSource provides tools that may change while the server runs (the
// tools of MCP servers: manifest.Toolset is one). Each request uses the
// list Tools returns then.
type ToolSource interface {
	Tools() []registry.Tool
}

// WithToolSource adds the tools of src, after those given WithTools.
func WithToolSource(src ToolSource) Option { return func(o *options) { o.source = src } }

// WithMode sets the presentation mode: registry.ModeCode (the default)
// and registry.ModeBoth run programs; registry.ModeNative offers the tools
// only, so POST /v1/run answers 404. GET /v1/tools lists what the mode
// offers.
func WithMode(m registry.Mode) Option { return func(o *options) { o.mode = m } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithMetrics registers the server's collectors with reg and serves reg at
// /metrics (default: a new registry of the server's own).
func WithMetrics(reg *prometheus.Registry) Option { return func(o *options) { o.metrics = reg } }

// WithHealthCheck sets what GET /healthz checks (default: always healthy).
func WithHealthCheck(h HealthCheck) Option { return func(o *options) { o.health = h } }

// WithMaxBodyBytes bounds a request body (default DefaultMaxBodyBytes).
func WithMaxBodyBytes(n int64) Option { return func(o *options) { o.maxBody = n } }

// WithMaxRequestBytes bounds the bytes of request bodies and session
// start frames the server holds at once, all tenants together (default
// DefaultMaxRequestBytes): each is reserved before the request is read
// (past its first 4 KiB when its length is not announced) and held until
// its run ends. n is divided among the tenants, and each tenant's share
// is there for it whatever the others hold: a tenant gets the smaller of
// what its quota can use, (maxRuns + queue + 1) × the body limit (no
// bound without maxRuns), and an even split of what the tenants using
// less leave. A request that would take its tenant past its share gets
// 429 at once, unread. When n is less than the number of tenants × the
// body limit the table is still taken (New and Auth.Reload log a warning
// naming the figures): every share is then one body limit, the shares add
// up to more than n, and n is enforced by the total alone. With no auth
// the one anonymous tenant's share is n, or its quota's need when
// smaller. (The total is checked too: while the shares add up to more
// than n, or requests admitted under a replaced tenant table still hold
// more than the new shares leave, a request waits, within the body
// timeout, then gets 503.)
func WithMaxRequestBytes(n int64) Option { return func(o *options) { o.maxRequest = n } }

// WithBodyTimeout bounds reading one request body (default
// DefaultBodyTimeout).
func WithBodyTimeout(d time.Duration) Option { return func(o *options) { o.bodyTimeout = d } }

// WithRegistryOptions adds options (hooks, guards, observers) to the
// registry each run gets. Mode, runtime, logger and event sink are the
// server's.
func WithRegistryOptions(opts ...registry.Option) Option {
	return func(o *options) { o.regOpts = append(o.regOpts, opts...) }
}

// Server is the HTTP API. It is an http.Handler, safe for concurrent use.
type Server struct {
	opts     options
	runtimes map[backend.Language]backend.Runtime
	langs    []string // served languages, sorted
	// choices are the runtimes a request may name (runtimes.go).
	choices runtimeChoices
	log     *slog.Logger
	metrics *metrics
	mux     *http.ServeMux
	// admit hands out run slots per tenant and language; intake the
	// bytes requests hold before and while they run (intake.go);
	// sessions tracks open sessions (session.go).
	admit    *admission
	intake   *intake
	sessions sessionSet
	// healthCache coalesces GET /healthz's checks (health.go).
	healthCache healthCache
}

var _ http.Handler = (*Server)(nil)

// New builds a Server. It fails (errdefs.ErrInvalidArgument) without a
// runtime, with two runtimes of one language, or with a tool the registry
// rejects.
func New(opts ...Option) (*Server, error) {
	o := options{maxBody: DefaultMaxBodyBytes, bodyTimeout: DefaultBodyTimeout, retryAfter: time.Second, healthLimit: 10 * time.Second, mode: registry.ModeCode}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.metrics == nil {
		o.metrics = prometheus.NewRegistry()
	}
	if o.maxBody <= 0 {
		return nil, fmt.Errorf("%w: max body bytes %d must be positive", errdefs.ErrInvalidArgument, o.maxBody)
	}
	if o.bodyTimeout <= 0 {
		return nil, fmt.Errorf("%w: body timeout %v must be positive", errdefs.ErrInvalidArgument, o.bodyTimeout)
	}
	switch {
	case o.maxRequest == 0:
		o.maxRequest = max(DefaultMaxRequestBytes, o.maxBody)
	case o.maxRequest < o.maxBody:
		return nil, fmt.Errorf("%w: max request bytes %d must be at least the body limit, %d", errdefs.ErrInvalidArgument, o.maxRequest, o.maxBody)
	}
	s := &Server{opts: o, runtimes: map[backend.Language]backend.Runtime{}, log: o.logger}
	if a := o.mt.auth; a != nil {
		if w := sharesWarning(*a.tenants.Load(), o.maxRequest, o.maxBody); w != "" {
			s.log.Warn("tenant table oversubscribes the request memory", "detail", w)
		}
	}
	for _, rt := range o.runtimes {
		if rt == nil {
			return nil, fmt.Errorf("%w: nil runtime", errdefs.ErrInvalidArgument)
		}
		l := rt.Language()
		if _, dup := s.runtimes[l]; dup {
			return nil, fmt.Errorf("%w: two runtimes for language %q", errdefs.ErrInvalidArgument, l)
		}
		s.runtimes[l] = rt
		s.langs = append(s.langs, string(l))
	}
	if len(s.runtimes) == 0 {
		return nil, fmt.Errorf("%w: the server needs at least one runtime", errdefs.ErrInvalidArgument)
	}
	choices, err := newRuntimeChoices(o.named, s.runtimes)
	if err != nil {
		return nil, err
	}
	s.choices = choices
	slices.Sort(s.langs)
	mode, err := registry.ParseMode(string(o.mode))
	if err != nil {
		return nil, err
	}
	s.opts.mode = mode
	// Register the tools once now so a bad tool fails start-up, not every
	// request.
	probe := registry.New()
	for _, t := range s.tools() {
		if err := probe.Register(t); err != nil {
			return nil, err
		}
	}
	m, err := newMetrics(o.metrics, s.runtimes, func() float64 { held, _ := s.intake.held(""); return float64(held) })
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.initTenants()

	if a := o.mt.auth; a != nil {
		// Never a refusal: a reload that adds a tenant, or revokes a
		// token, is taken; the log says when the total is oversubscribed.
		a.addCheck(func(tenants []Tenant) error {
			if w := sharesWarning(tenants, o.maxRequest, o.maxBody); w != "" {
				s.log.Warn("tenant table oversubscribes the request memory", "detail", w)
			}
			return nil
		})
	}

	s.mux = http.NewServeMux()
	s.mux.Handle("/v1/run", s.instrument("run", methods(s.handleRun, http.MethodPost)))
	s.mux.Handle("/v1/sdk", s.instrument("sdk", methods(s.handleSDK, http.MethodGet, http.MethodHead)))
	s.mux.Handle("/v1/sessions", s.instrument("sessions", methods(s.handleSession, http.MethodGet)))
	s.mux.Handle("/v1/tools", s.instrument("tools", methods(s.handleTools, http.MethodGet, http.MethodHead)))
	s.mux.Handle("/healthz", s.instrument("healthz", methods(s.handleHealthz, http.MethodGet, http.MethodHead)))
	s.mux.Handle("/metrics", s.instrument("metrics", methods(s.metrics.handler.ServeHTTP, http.MethodGet, http.MethodHead)))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s (endpoints: POST /v1/run, GET /v1/sessions, GET /v1/sdk, GET /v1/tools, GET /healthz, GET /metrics)", r.URL.Path))
	})
	return s, nil
}

// Languages lists the languages the server runs, sorted.
func (s *Server) Languages() []string { return slices.Clone(s.langs) }

// Mode is the presentation mode.
func (s *Server) Mode() registry.Mode { return s.opts.mode }

// tools are the tools now: WithTools's, then the source's.
func (s *Server) tools() []registry.Tool {
	tools := slices.Clone(s.opts.tools)
	if s.opts.source != nil {
		tools = append(tools, s.opts.source.Tools()...)
	}
	return tools
}

// ServeHTTP implements http.Handler.
// Every request passes the gate (auth.go) first.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.gate(w, withTraceContext(r)) }

// methods answers 405 with Allow, in JSON, to any other method.
func methods(h http.HandlerFunc, allowed ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(allowed, r.Method) {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s (use %s)", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
			return
		}
		h(w, r)
	}
}

// errorBody is every non-run failure's body.
type errorBody struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client may be gone; nothing to do about it
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

// statusFor maps an error that kept a program from running to a status.
func statusFor(err error) int {
	switch {
	case errdefs.IsResourceExhausted(err):
		return http.StatusTooManyRequests
	case errdefs.IsUnavailable(err), errdefs.IsNotFound(err), errdefs.IsFailedPrecondition(err):
		return http.StatusServiceUnavailable
	case errdefs.IsInvalidArgument(err), errors.Is(err, backend.ErrNotImplemented):
		// backend.ErrNotImplemented: a per-run option this runtime cannot
		// honour, which the request asked for. Any other not-implemented
		// error (a driver without a shim or OCI runtime) is the server's.
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}
