// Package backend is the code-runtime seam: the interface a Code Mode
// execution substrate implements and the vocabulary it speaks.
//
// A Runtime is handed a program and named async bindings, runs the program
// once, and reports what it returned and logged. It knows nothing about
// tools: the registry turns tools into BindingFuncs before calling Run.
// Every outcome of the program itself — success, a thrown exception, a
// program that did not parse, a budget expiring, cancellation, the sandbox
// dying — is a RunResult whose Error field says which. Run returns a Go
// error only for caller misuse and when the substrate cannot provide a
// sandbox at all; see Runtime.Run for the classes.
//
// This package holds types only and imports nothing but the standard library.
package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Language is the language a runtime's programs must be written in.
type Language string

const (
	TypeScript Language = "typescript"
	Python     Language = "python"
)

// Languages lists the languages this project knows, in a stable order.
func Languages() []Language { return []Language{TypeScript, Python} }

// ParseLanguage validates s as a Language.
func ParseLanguage(s string) (Language, error) {
	for _, l := range Languages() {
		if string(l) == s {
			return l, nil
		}
	}
	return "", fmt.Errorf("unknown language %q (known: typescript, python)", s)
}

// Isolation describes the boundary a runtime puts around a program. It is
// informational: a registry can tell backends apart, it does not gate on it.
type Isolation string

const (
	// IsolationContainer: every program runs in a fresh, hardened container.
	IsolationContainer Isolation = "container"
	// IsolationInProcess: the program shares the host process (test doubles).
	IsolationInProcess Isolation = "in-process"
)

// Runtime runs one program per call in a fresh sandbox.
type Runtime interface {
	// Language is the language programs must be written in.
	Language() Language
	// Isolation describes the sandbox boundary.
	Isolation() Isolation
	// Run executes req.Program. Cancelling ctx aborts the run; the result
	// then has Error.Kind == FailureAbort.
	//
	// The error return is for what kept the program from running at all,
	// classed so github.com/containerd/errdefs' IsXxx functions (and an
	// HTTP server's status codes) can tell the cases apart without
	// importing the implementation:
	//   - caller misuse: ErrInvalidRequest (errdefs.IsInvalidArgument),
	//     a limit raised or an egress entry outside the runtime's included;
	//   - a per-run option the runtime cannot honour (RunRequest.Limits,
	//     RunRequest.Egress): ErrNotImplemented (errdefs.IsNotImplemented),
	//     naming the option;
	//   - a closed runtime: ErrClosed (errdefs.IsUnavailable);
	//   - no sandbox could be provided: the substrate unreachable
	//     (IsUnavailable), its image missing (IsNotFound), a runtime that
	//     does not match its image (IsFailedPrecondition), admission full
	//     (IsResourceExhausted).
	// An implementation classes its errors with marker methods (as
	// ErrInvalidRequest does) or by wrapping errdefs' sentinels.
	Run(ctx context.Context, req RunRequest) (RunResult, error)
	// Close stops in-flight runs, waits for them to be torn down and
	// releases the runtime's resources. Run after Close returns ErrClosed.
	Close(ctx context.Context) error
}

// Misuse errors returned by Run. Implementations wrap them with detail.
// Each carries an errdefs marker method: ErrInvalidRequest satisfies
// errdefs.IsInvalidArgument, ErrClosed errdefs.IsUnavailable.
var (
	ErrInvalidRequest error = invalidRequestError{}
	ErrClosed         error = closedError{}
	// ErrNotImplemented: the runtime cannot honour a per-run option the
	// request sets (errdefs.IsNotImplemented). The wrapping message names
	// the option.
	ErrNotImplemented error = notImplementedError{}
)

type notImplementedError struct{}

func (notImplementedError) Error() string { return "not implemented" }

// NotImplemented is errdefs' marker for its ErrNotImplemented class.
func (notImplementedError) NotImplemented() {}

type invalidRequestError struct{}

func (invalidRequestError) Error() string { return "invalid run request" }

// InvalidParameter is errdefs' marker for its ErrInvalidArgument class.
func (invalidRequestError) InvalidParameter() {}

type closedError struct{}

func (closedError) Error() string { return "runtime is closed" }

// Unavailable is errdefs' marker for its ErrUnavailable class.
func (closedError) Unavailable() {}

// RunRequest holds every input of one run. Cancellation is the context
// passed to Run.
type RunRequest struct {
	// Program is the source text: the body of an async function, so
	// top-level await and return work.
	Program string
	// Bindings are the namespaces exposed to the program as globals.
	Bindings []BindingNamespace
	// Logs, when set, receives each log entry as it is captured, in order,
	// from the run's goroutine. It must not block for long.
	Logs func(LogEntry)

	// Per-run options. A runtime that cannot honour one that is set fails
	// the run with ErrNotImplemented naming it (see RequestChecker and
	// RefuseOptions); one that can never widens what it was configured
	// with.

	// Limits lowers the runtime's budgets for this run. A zero field keeps
	// the runtime's own; no field can raise one (see Limits.Within).
	Limits Limits
	// Egress, when set, narrows the runtime's egress allowlist for this
	// run (never widens it). nil: the runtime's own egress, if any.
	Egress *Egress
	// Events, when set, receives each event of the run as its JSON object,
	// in order, from the run's goroutines; today the egress connections
	// ({"type":"egress","host":...,"outcome":...}, at most the egress
	// policy's maxConnections+1 per run). It must not block for long.
	Events func(json.RawMessage)
}

// Limits are budgets of one run (RunRequest.Limits). A zero field means
// the runtime's own value.
//
// WallTime and ComputeTime are budgets of the run itself; MemoryBytes,
// NanoCPUs and Pids are settings of the sandbox (the container runtime
// starts a run that lowers one of them in a container of its own, cold).
type Limits struct {
	WallTime    time.Duration
	ComputeTime time.Duration
	MemoryBytes int64
	NanoCPUs    int64
	Pids        int64
}

// Within checks that l only lowers max, the runtime's own limits: every
// non-zero field of l must be positive and at most max's. It is the one
// place "a request may lower a limit, never raise it" is decided; the
// error wraps ErrInvalidRequest and names every offending limit by its key
// in the daemon's "limits" object (wallTimeoutMs and computeTimeoutMs in
// milliseconds, memoryBytes, cpus, pids), as a client sent it.
func (l Limits) Within(max Limits) error {
	var errs []string
	check := func(key string, v, m int64, unit func(int64) string) {
		switch {
		case v == 0:
		case v < 0:
			errs = append(errs, fmt.Sprintf("limits.%s %s must be positive", key, unit(v)))
		case v > m:
			errs = append(errs, fmt.Sprintf("limits.%s %s exceeds the runtime's %s: a request may lower a limit, never raise it", key, unit(v), unit(m)))
		}
	}
	// Decimal, never exponent notation: 3600000, not 3.6e+06.
	decimal := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	ms := func(v int64) string { return decimal(float64(v) / float64(time.Millisecond)) }
	num := func(v int64) string { return fmt.Sprint(v) }
	cpus := func(v int64) string { return decimal(float64(v) / 1e9) }
	check("wallTimeoutMs", int64(l.WallTime), int64(max.WallTime), ms)
	check("computeTimeoutMs", int64(l.ComputeTime), int64(max.ComputeTime), ms)
	check("memoryBytes", l.MemoryBytes, max.MemoryBytes, num)
	check("cpus", l.NanoCPUs, max.NanoCPUs, cpus)
	check("pids", l.Pids, max.Pids, num)
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidRequest, strings.Join(errs, "; "))
	}
	return nil
}

// Egress narrows a runtime's egress for one run (RunRequest.Egress).
type Egress struct {
	// Allow is the run's allowlist ("host:port", "*.domain:port"); every
	// entry must be within the runtime's, and there must be at least one.
	Allow []string
}

// RequestChecker is the optional ability of a runtime to say, before a run
// is admitted, whether it would accept req's per-run options (Limits,
// Egress): the error Run would return for them, by the same code, or nil.
// A server checks a request with it (through CheckRequest) before queueing
// the run.
type RequestChecker interface {
	CheckRequest(req RunRequest) error
}

// CheckRequest is rt's CheckRequest when rt is a RequestChecker, else
// RefuseOptions: a runtime that cannot check options honours none.
func CheckRequest(rt Runtime, req RunRequest) error {
	if c, ok := rt.(RequestChecker); ok {
		return c.CheckRequest(req)
	}
	return RefuseOptions(rt.Language(), req)
}

// RefuseOptions is what a runtime that honours no per-run option returns
// for req: nil when req sets none, else an error wrapping
// ErrNotImplemented that names the first option set.
func RefuseOptions(lang Language, req RunRequest) error {
	switch {
	case req.Limits != Limits{}:
		return fmt.Errorf("%w: limits: the %s runtime of this server cannot lower limits per request", ErrNotImplemented, lang)
	case req.Egress != nil:
		return fmt.Errorf("%w: egress: the %s runtime of this server offers no egress", ErrNotImplemented, lang)
	}
	return nil
}

// BindingNamespace is one global object of async functions in the program.
type BindingNamespace struct {
	// Global is the name of the object, e.g. "tools".
	Global string
	// Functions maps each member name (any non-empty string) to its
	// implementation.
	Functions map[string]BindingFunc
}

// BindingFunc implements one binding. args is the JSON the program passed;
// the returned JSON becomes the program-side resolution, a returned error a
// program-side rejection carrying err.Error(). ctx is cancelled when the run
// settles.
//
// A runtime invokes one run's bindings one at a time, in the order the
// program issued the calls — even when the program awaits several at once
// (Promise.all, asyncio.gather) — and starts none after the run settles or
// is cancelled. The runtime is the one owner of that order: it queues the
// calls the program has issued (and bounds the queue), and its callers keep
// no queue of their own — the registry numbers calls in the order they
// arrive and relies on this promise for the numbers to be the issue order.
type BindingFunc func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)

// ValueKind says how RunResult.Value was produced.
type ValueKind string

const (
	// ValueNone: the program returned nothing (undefined / None).
	ValueNone ValueKind = ""
	// ValueJSON: Value is the program's return value as JSON.
	ValueJSON ValueKind = "json"
	// ValueInspect: the value was not JSON; Value is a JSON string holding
	// its util.inspect (TypeScript) or repr (Python) rendering.
	ValueInspect ValueKind = "inspect"
)

// RunResult is everything a run produced.
type RunResult struct {
	Value     json.RawMessage
	ValueKind ValueKind
	Logs      []LogEntry
	// Error is nil when the program completed.
	Error *Failure
	// LogsTruncated reports that log output past the cap was dropped.
	LogsTruncated bool
	// ValueTruncated reports that the value exceeded its cap; Value is
	// then a JSON string holding the first bytes of the value's text.
	ValueTruncated bool
	Stats          RunStats
}

// RunStats are measurements of one run.
type RunStats struct {
	// Wall is the time from the program's start to its settlement.
	Wall time.Duration
	// CPU is the CPU time the sandbox used while running the program, when
	// the backend can meter it.
	CPU time.Duration
	// Startup is the time spent getting a sandbox ready before the program
	// started.
	Startup time.Duration
	// Calls counts binding calls the program made.
	Calls int
	// Warm reports that a pre-started sandbox served the run.
	Warm bool
	// RunID identifies the run in logs and container names (empty when
	// the program never got a sandbox); TraceID is the trace of the run's
	// span in hex (empty when tracing is off and the caller gave none).
	RunID, TraceID string
}

// LogSource says where a log entry was captured.
type LogSource string

const (
	SourceConsole LogSource = "console"
	SourceStdout  LogSource = "stdout"
	SourceStderr  LogSource = "stderr"
)

// LogLevel is the level of a console entry.
type LogLevel string

const (
	LevelLog   LogLevel = "log"
	LevelInfo  LogLevel = "info"
	LevelWarn  LogLevel = "warn"
	LevelError LogLevel = "error"
	LevelDebug LogLevel = "debug"
)

// LogEntry is one captured line or write.
type LogEntry struct {
	Source LogSource `json:"source"`
	Level  LogLevel  `json:"level,omitempty"`
	Text   string    `json:"text"`
}

// FailureKind classifies how a run failed. The kinds are orthogonal: a
// timed-out run is not an exception, an abort is not a timeout.
type FailureKind string

const (
	// FailureException: the program threw, or did not parse.
	FailureException FailureKind = "exception"
	// FailureTimeout: a budget expired; the message names which.
	FailureTimeout FailureKind = "timeout"
	// FailureAbort: the caller cancelled the run.
	FailureAbort FailureKind = "abort"
	// FailureOOM: the sandbox was killed for exceeding its memory limit.
	FailureOOM FailureKind = "oom"
	// FailureExit: the program ended its own process before returning
	// (process.exit, sys.exit, os._exit, a signal), at any status, 0
	// included — the message states the status — or the sandbox died some
	// other way (or the runner broke protocol).
	FailureExit FailureKind = "exit"
)

// Failure is a run's failure outcome.
type Failure struct {
	Kind    FailureKind `json:"kind"`
	Message string      `json:"message"`
}

func (f *Failure) Error() string { return string(f.Kind) + ": " + f.Message }

var globalName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedGlobals are names the runners bind themselves.
var reservedGlobals = map[string]bool{
	"console": true, "ToolCallError": true, "print": true, "globalThis": true,
	"process": true, "require": true, "__builtins__": true,
}

// MaxFunctionNameBytes bounds a binding function name.
const MaxFunctionNameBytes = 1024

// Validate checks a request's shape: unique, well-formed namespace names
// and non-empty function names with implementations. It returns an error
// wrapping ErrInvalidRequest.
func (r *RunRequest) Validate() error {
	seen := make(map[string]bool, len(r.Bindings))
	for _, ns := range r.Bindings {
		if !globalName.MatchString(ns.Global) {
			return fmt.Errorf("%w: binding namespace %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", ErrInvalidRequest, ns.Global)
		}
		if reservedGlobals[ns.Global] {
			return fmt.Errorf("%w: binding namespace %q is reserved by the runner", ErrInvalidRequest, ns.Global)
		}
		if seen[ns.Global] {
			return fmt.Errorf("%w: duplicate binding namespace %q", ErrInvalidRequest, ns.Global)
		}
		seen[ns.Global] = true
		for name, fn := range ns.Functions {
			if name == "" || len(name) > MaxFunctionNameBytes || !utf8.ValidString(name) {
				return fmt.Errorf("%w: binding %s has an invalid function name %q (1..%d bytes of UTF-8)", ErrInvalidRequest, ns.Global, name, MaxFunctionNameBytes)
			}
			if fn == nil {
				return fmt.Errorf("%w: binding %s[%q] has no implementation", ErrInvalidRequest, ns.Global, name)
			}
		}
	}
	return nil
}
