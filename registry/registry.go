package registry

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/sdkgen"
)

// RunCode is the name of the reserved Code Mode transport tool. It cannot be
// registered, restrictions never hide it, and it is never part of the SDK.
const RunCode = "run_code"

// Registry holds tools and presents them to a model natively, as a Code Mode
// SDK behind run_code, or both. It is safe for concurrent use.
type Registry struct {
	cfg config

	mu    sync.RWMutex
	tools map[string]Tool

	// render renders the SDK (sdkgen.RenderWith); a field so in-package
	// tests can observe what assembly asks of it.
	render sdkRenderer
}

type config struct {
	mode      Mode
	runtime   backend.Runtime
	base      backend.RunRequest // WithRunRequest
	sink      func(Event)
	logSink   func(callID string, e backend.LogEntry)
	logger    *slog.Logger
	pre       []PreExecuteHook
	guards    []Guard
	post      []PostExecuteHook
	observers []ResultObserver
	err       error
	// sdkView and sdkThreshold choose the SDK section (disclosure.go).
	sdkView      SDKView
	sdkThreshold int
	// approver and approvalTimeout settle guards' asks (approval.go).
	approver        Approver
	approvalTimeout time.Duration
	// tracePayloads: WithTracePayloads (telemetry.go).
	tracePayloads bool
}

// Option configures a Registry.
type Option func(*config)

// WithMode selects the presentation mode. The default is ModeNative. An
// invalid mode is reported by Assemble and Execute (validate user input
// early with ParseMode).
func WithMode(m Mode) Option {
	return func(c *config) {
		mode, err := ParseMode(string(m))
		if err != nil {
			c.err = cmp.Or(c.err, err)
			return
		}
		c.mode = mode
	}
}

// WithRuntime sets the code runtime run_code executes programs on. The
// registry looks it up only when Code Mode is assembled or run_code is
// executed, so ModeNative needs none. The registry does not close it.
func WithRuntime(rt backend.Runtime) Option {
	return func(c *config) { c.runtime = rt }
}

// WithRunRequest sets what each run_code RunRequest starts from: its
// per-run options (Limits, Egress, Events) and Logs; the registry sets
// Program and Bindings, and WithLogSink replaces Logs. The runtime decides
// whether it can honour the options (backend.CheckRequest says so before
// a run; Run refuses them with an error otherwise).
func WithRunRequest(base backend.RunRequest) Option {
	return func(c *config) { c.base = base }
}

// WithEventSink receives one tool/code-dispatch Event per sub-call made by a
// run_code program. It is called synchronously from the run's dispatch
// goroutine, in sub-call order, always before the run_code Execute returns;
// it must not block for long or panic. Without a sink, runs work the same and the
// events are dropped.
func WithEventSink(sink func(Event)) Option {
	return func(c *config) { c.sink = sink }
}

// WithLogSink receives each log entry of a run_code program as the runtime
// captures it, with the run_code call's id, before Execute returns (the
// result carries them all as well). It must not block for long.
func WithLogSink(sink func(callID string, e backend.LogEntry)) Option {
	return func(c *config) { c.logSink = sink }
}

// WithLogger sets the logger (default: discard). Keys are snake_case.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithPreExecute appends a hook run before the guards of every call.
func WithPreExecute(h PreExecuteHook) Option {
	return func(c *config) {
		if h != nil {
			c.pre = append(c.pre, h)
		}
	}
}

// WithGuard appends a guard consulted, in order, before every call executes.
func WithGuard(g Guard) Option {
	return func(c *config) {
		if g != nil {
			c.guards = append(c.guards, g)
		}
	}
}

// WithPostExecute appends a hook run on the result of every executed call.
func WithPostExecute(h PostExecuteHook) Option {
	return func(c *config) {
		if h != nil {
			c.post = append(c.post, h)
		}
	}
}

// WithResultObserver appends an observer notified of every final result.
func WithResultObserver(o ResultObserver) Option {
	return func(c *config) {
		if o != nil {
			c.observers = append(c.observers, o)
		}
	}
}

// New returns an empty registry.
func New(opts ...Option) *Registry {
	c := config{mode: ModeNative, logger: slog.New(slog.DiscardHandler), sdkView: SDKFull, sdkThreshold: DefaultSDKAutoThreshold, approvalTimeout: DefaultApprovalTimeout}
	for _, o := range opts {
		o(&c)
	}
	return &Registry{cfg: c, tools: make(map[string]Tool), render: sdkgen.RenderWith}
}

// Mode reports the configured presentation mode.
func (r *Registry) Mode() Mode { return r.cfg.mode }

// Register adds a tool. It rejects the reserved names run_code and
// describe_tools, an empty or
// already registered name, a name that cannot be a binding (over
// backend.MaxFunctionNameBytes or not UTF-8), neither or both of Execute
// and ExecuteOutput, Parameters that are not a JSON object, an
// OutputSchema that is not a JSON object or boolean and Annotations that
// are not a JSON object. Nil Parameters mean {"type":"object"}.
// Errors wrap errdefs.ErrInvalidArgument or errdefs.ErrAlreadyExists.
func (r *Registry) Register(t Tool) error {
	if err := t.validate(); err != nil {
		return fmt.Errorf("register tool %q: %w", t.Name, err)
	}
	params, err := normalizeSchema(t.Parameters)
	if err != nil {
		return fmt.Errorf("register tool %q: %w", t.Name, err)
	}
	t.Parameters = params
	if t.OutputSchema, err = normalizeOutputSchema(t.OutputSchema); err != nil {
		return fmt.Errorf("register tool %q: %w", t.Name, err)
	}
	if t.Annotations, err = normalizeAnnotations(t.Annotations); err != nil {
		return fmt.Errorf("register tool %q: %w", t.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[t.Name]; dup {
		return fmt.Errorf("register tool %q: %w", t.Name, errorf(errdefs.ErrAlreadyExists, "a tool with this name is already registered"))
	}
	r.tools[t.Name] = t
	return nil
}

// visible returns the registered tools the scope can see, sorted by name.
func (r *Registry) visible(s Scope) []Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Tool, 0, len(r.tools))
	for name, t := range r.tools {
		if s.Allows(name) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b Tool) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// lookup returns the registered tool name if the scope can see it.
func (r *Registry) lookup(s Scope, name string) (Tool, bool) {
	if !s.Allows(name) {
		return Tool{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}
