package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
)

// Call is one tool call, native or run_code.
type Call struct {
	// ID is the provider-issued call id; required. Sub-calls of a run_code
	// program are numbered under it.
	ID string
	// Name is the tool to call.
	Name string
	// Arguments is the JSON the model passed; empty means {}. See
	// NormalizeArguments for what is rejected.
	Arguments json.RawMessage
	// Scope limits the tools the call (and a program's bindings) can reach.
	Scope Scope
}

// Result is the outcome of one call. Execute never panics and never returns
// a Go error: every failure is a Result with IsError set.
type Result struct {
	CallID string `json:"callId"`
	Name   string `json:"name"`
	// Content is what goes back to the model.
	Content []Block `json:"content"`
	// StructuredContent is the tool's structured value (MCP's
	// structuredContent), canonical JSON, when its Output carried one.
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError"`
	// Err is the error behind IsError, when there is one; inspect it with
	// errors.As (*CodeRunFailedError, *DeniedError) and errdefs.IsXxx.
	Err error `json:"-"`
	// CodeRun is the runtime's full result for a run_code call whose
	// program ran (nil otherwise, e.g. when Run returned a Go error).
	CodeRun *backend.RunResult `json:"-"`
	// Card is the result card of a run_code call (see PresentCall).
	Card *Card `json:"card,omitempty"`
}

// Text renders the content as one string: text blocks verbatim, other
// blocks as placeholders, one block per line.
func (r Result) Text() string { return joinBlocks(r.Content) }

// PreExecuteHook runs before the guards of every call, native or sub-call,
// run_code included. An error fails the call (an error result); the tool
// does not run.
type PreExecuteHook func(ctx context.Context, exec Execution) error

// Guard is a policy check run after the pre-execute hooks. A non-nil error
// denies the call: the result is an error wrapping a *DeniedError with the
// guard's error as the reason, and for a sub-call the program's binding
// rejects with that text. Guards run in order and the first denial is final:
// no later guard or hook can undo it. A guard may answer "ask" by returning
// Ask(reason): the call then waits for the registry's Approver (see
// WithApprover) and runs on only if it allows; later guards still run.
type Guard func(ctx context.Context, exec Execution) error

// PostExecuteHook runs on the result of every call whose tool executed (not
// on denials or pre-execute failures) and returns the result to keep. It
// cannot change the call's identity: CallID and Name are restored.
type PostExecuteHook func(ctx context.Context, exec Execution, res Result) Result

// ResultObserver is notified of every final result Execute produces and of
// every sub-call result, after the post-execute hooks. It gets its own copy
// of the content; what it does with it cannot change the result.
type ResultObserver func(ctx context.Context, exec Execution, res Result)

// DeniedError is a guard's denial of a call. It matches
// errdefs.IsPermissionDenied.
type DeniedError struct {
	CallID string
	Tool   string
	// Reason is the guard's error.
	Reason error
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("tool %q denied: %v", e.Tool, e.Reason)
}

// Unwrap exposes errdefs.ErrPermissionDenied and the guard's error.
func (e *DeniedError) Unwrap() []error { return []error{errdefs.ErrPermissionDenied, e.Reason} }

// Execute runs one call through the pipeline: argument normalization, then
// pre-execute hooks → guards → the tool → post-execute hooks → result
// observers. run_code (in ModeCode and ModeBoth) takes the same path; its
// sub-calls take it too, each under its own id. An unknown tool, a tool the
// scope hides, run_code in ModeNative, invalid arguments and panics are all
// error results.
func (r *Registry) Execute(ctx context.Context, call Call) Result {
	exec, do, err := r.resolve(call)
	if err != nil {
		res := errorResult(err)
		res.CallID, res.Name = call.ID, call.Name
		r.observe(ctx, exec, res)
		return res
	}
	return r.pipeline(ctx, exec, do)
}

type executeFunc func(ctx context.Context, exec Execution) Result

// resolve validates a call and finds what executes it.
func (r *Registry) resolve(call Call) (Execution, executeFunc, error) {
	exec := Execution{CallID: call.ID, Name: call.Name, Scope: call.Scope}
	if err := r.cfg.err; err != nil {
		return exec, nil, err
	}
	if call.ID == "" {
		return exec, nil, errorf(errdefs.ErrInvalidArgument, "call to %q has no id", call.Name)
	}
	var do executeFunc
	if call.Name == RunCode || call.Name == DescribeTools {
		if !r.cfg.mode.codeMode() {
			return exec, nil, errorf(errdefs.ErrNotFound, "tool %q is not available in mode %q", call.Name, r.cfg.mode)
		}
		do = r.runCode
		if call.Name == DescribeTools {
			do = r.describeTools
		}
	} else {
		t, ok := r.lookup(call.Scope, call.Name)
		if !ok {
			return exec, nil, errorf(errdefs.ErrNotFound, "tool %q is not available", call.Name)
		}
		do = t.run
		exec.Annotations = t.Annotations
	}
	args, err := NormalizeArguments(call.Arguments)
	if err != nil {
		return exec, nil, fmt.Errorf("tool %q: %w", call.Name, err)
	}
	exec.Arguments = args
	if call.Name == RunCode {
		if _, err := parseRunCodeArgs(args); err != nil {
			return exec, nil, err
		}
	}
	return exec, do, nil
}

// run adapts a Tool's Execute or ExecuteOutput to the pipeline. A
// structured value must be one lossless JSON value (see
// NormalizeArguments); it is kept in canonical form.
func (t Tool) run(ctx context.Context, exec Execution) Result {
	var out Output
	var err error
	if t.ExecuteOutput != nil {
		out, err = t.ExecuteOutput(ctx, exec)
	} else {
		out.Content, err = t.Execute(ctx, exec)
	}
	if err != nil {
		return errorResult(err)
	}
	if out.Content == nil {
		out.Content = []Block{}
	}
	res := Result{Content: out.Content}
	if len(bytes.TrimSpace(out.Structured)) > 0 {
		v, err := canonicalJSON(out.Structured)
		if err != nil {
			return errorResult(errorf(errdefs.ErrInternal, "tool %q returned structured content that is not lossless JSON: %w", t.Name, err))
		}
		res.StructuredContent = v
	}
	return res
}

// pipeline runs the stages, stamps the identity, notifies the observers and
// logs the outcome.
func (r *Registry) pipeline(ctx context.Context, exec Execution, do executeFunc) Result {
	start := time.Now()
	res := r.stages(ctx, exec, do)
	res.CallID, res.Name = exec.CallID, exec.Name
	r.observe(ctx, exec, res)
	if res.CodeRun != nil && res.CodeRun.Stats.RunID != "" {
		ctx = backend.ContextWithRunID(ctx, res.CodeRun.Stats.RunID) // names the run in the log line
	}
	r.cfg.logger.LogAttrs(ctx, slog.LevelDebug, "tool call",
		slog.String("call_id", exec.CallID), slog.String("tool", exec.Name),
		slog.String("parent_call_id", exec.Parent), slog.Bool("is_error", res.IsError),
		slog.Duration("duration", time.Since(start)))
	return res
}

func (r *Registry) stages(ctx context.Context, exec Execution, do executeFunc) (res Result) {
	defer func() {
		if v := recover(); v != nil {
			r.cfg.logger.LogAttrs(ctx, slog.LevelError, "tool call panicked",
				slog.String("call_id", exec.CallID), slog.String("tool", exec.Name),
				slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
			res = errorResult(errorf(errdefs.ErrInternal, "tool %q panicked: %v", exec.Name, v))
		}
	}()
	if err := ctx.Err(); err != nil {
		return errorResult(fmt.Errorf("tool %q not started: %w", exec.Name, context.Cause(ctx)))
	}
	for _, h := range r.cfg.pre {
		if err := h(ctx, exec); err != nil {
			return errorResult(fmt.Errorf("tool %q: pre-execute: %w", exec.Name, err))
		}
	}
	for _, g := range r.cfg.guards {
		err := g(ctx, exec)
		if ask := (*AskError)(nil); errors.As(err, &ask) {
			// The call pauses here until the approver decides.
			err = r.approve(ctx, exec, ask)
		}
		if err != nil {
			return errorResult(&DeniedError{CallID: exec.CallID, Tool: exec.Name, Reason: err})
		}
	}
	res = do(ctx, exec)
	for _, h := range r.cfg.post {
		res = h(ctx, exec, res)
		res.CallID, res.Name = exec.CallID, exec.Name
	}
	return res
}

// observe notifies the result observers, each with its own copy.
func (r *Registry) observe(ctx context.Context, exec Execution, res Result) {
	for _, o := range r.cfg.observers {
		cp := res
		cp.Content = cloneBlocks(res.Content)
		cp.StructuredContent = bytes.Clone(res.StructuredContent)
		if res.Card != nil {
			card := *res.Card
			cp.Card = &card
		}
		func() {
			defer func() {
				if v := recover(); v != nil {
					r.cfg.logger.LogAttrs(ctx, slog.LevelError, "result observer panicked",
						slog.String("call_id", exec.CallID), slog.Any("panic", v))
				}
			}()
			o(ctx, exec, cp)
		}()
	}
}

// errorResult is the registry's error boundary: any failure becomes an
// error result whose text is the error's message.
func errorResult(err error) Result {
	msg := err.Error()
	if msg == "" {
		msg = "tool call failed"
	}
	return Result{Content: []Block{TextBlock(msg)}, IsError: true, Err: err}
}
