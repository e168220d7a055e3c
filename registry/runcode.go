package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
)

// BindingGlobal is the global a program reaches its tools through.
const BindingGlobal = "tools"

// CodeRunFailedError is a run_code program's failure outcome, as the runtime
// reported it: an exception, a budget expiring, an abort, an OOM kill or the
// sandbox exiting. It is the Err of the run_code error result; the result's
// CodeRun holds the full run (logs, stats).
type CodeRunFailedError struct {
	Kind    backend.FailureKind `json:"kind"`
	Message string              `json:"message"`
}

func (e *CodeRunFailedError) Error() string {
	return fmt.Sprintf("code run failed (%s): %s", e.Kind, e.Message)
}

// Program returns the program text of a run_code execution, "" for any
// other tool. Guards can use it to inspect a program before it runs.
func (e Execution) Program() string {
	if e.Name != RunCode {
		return ""
	}
	p, _ := parseRunCodeArgs(e.Arguments)
	return p
}

// parseRunCodeArgs extracts the program from normalized run_code arguments.
// Fields other than code are ignored.
func parseRunCodeArgs(args json.RawMessage) (string, error) {
	var a struct {
		Code *string `json:"code"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.Code == nil {
		return "", errorf(errdefs.ErrInvalidArgument, "%s needs arguments {\"code\": string}", RunCode)
	}
	if strings.TrimSpace(*a.Code) == "" {
		return "", errorf(errdefs.ErrInvalidArgument, "%s: code is empty", RunCode)
	}
	return *a.Code, nil
}

// RunCodeArguments are the arguments of a run_code call running code:
// {"code": code}, in one allocation of exactly their size (no HTML
// escaping, unlike json.Marshal, which can make a program of angle
// brackets six times larger, and grows its buffer as it goes). Invalid
// UTF-8 becomes U+FFFD, as json.Marshal makes it.
func RunCodeArguments(code string) json.RawMessage {
	const head, tail = `{"code":`, `}`
	if !utf8.ValidString(code) {
		code = strings.ToValidUTF8(code, "\uFFFD")
	}
	out := make([]byte, 0, len(head)+jsonStringLen(code)+len(tail))
	out = append(out, head...)
	out = appendJSONString(out, code)
	return append(out, tail...)
}

// runCode executes a run_code call: it bridges the scope's tools into the
// program, runs it, settles the bridge and shapes the outcome.
func (r *Registry) runCode(ctx context.Context, exec Execution) Result {
	rt, _, _, err := r.codeRuntime()
	if err != nil {
		return errorResult(fmt.Errorf("%s: %w", RunCode, err))
	}
	b := r.newBridge(ctx, exec)
	runRes, runErr := func() (backend.RunResult, error) {
		defer b.settle() // also when Run panics: no sub-call starts after, none outlives it
		// The per-run options come from WithRunRequest.
		req := r.cfg.base
		req.Program = exec.Program()
		req.Bindings = []backend.BindingNamespace{{Global: BindingGlobal, Functions: b.functions()}}
		if sink := r.cfg.logSink; sink != nil {
			id := exec.CallID
			req.Logs = func(e backend.LogEntry) { sink(id, e) }
		}
		return rt.Run(b.ctx, req)
	}()
	if runErr != nil {
		return errorResult(fmt.Errorf("%s: code runtime: %w", RunCode, runErr))
	}
	abortedByCaller(ctx, &runRes)
	output := renderOutput(&runRes)
	res := Result{CodeRun: &runRes}
	if f := runRes.Error; f != nil {
		failed := &CodeRunFailedError{Kind: f.Kind, Message: f.Message}
		text := failed.Error()
		if output != "" {
			text = output + "\n" + text
		}
		res.Content, res.IsError, res.Err = []Block{TextBlock(text)}, true, failed
	} else {
		if output == "" {
			output = "(no output)"
		}
		res.Content = []Block{TextBlock(output)}
	}
	res.Card = &Card{Type: CardGeneric, Content: res.Text()}
	return res
}

// renderOutput is the captured output as the model sees it: one line per
// log entry, then the value if the program returned one (a string value
// unquoted, any other JSON as is), with truncation noted.
func renderOutput(rr *backend.RunResult) string {
	var lines []string
	for _, e := range rr.Logs {
		lines = append(lines, strings.TrimSuffix(e.Text, "\n"))
	}
	if rr.LogsTruncated {
		lines = append(lines, "[log output truncated]")
	}
	v := bytes.TrimSpace(rr.Value)
	returned := len(v) > 0 && (rr.ValueKind != backend.ValueNone || !bytes.Equal(v, []byte("null")))
	if returned {
		var s string
		if v[0] == '"' && json.Unmarshal(v, &s) == nil {
			lines = append(lines, s)
		} else {
			lines = append(lines, string(v))
		}
		if rr.ValueTruncated {
			lines = append(lines, "[value truncated]")
		}
	}
	return strings.Join(lines, "\n")
}

// errRunSettled rejects a binding called after its run settled.
var errRunSettled = errors.New("the run_code program has settled")

// ErrCallAbandoned is wrapped by the rejection of a sub-call that never
// started: the run settled or was cancelled first, or the runtime had given
// up on the call (its binding context was done) before invoking it.
var ErrCallAbandoned = errors.New("tool call abandoned before it started")

// abortedByCaller reports as an abort a run that failed after its caller
// cancelled it. The program's sub-calls and the runtime hold sibling
// contexts under the run's, and a cancelled context cancels its children
// one at a time: a sub-call can see the cancellation, fail, and the
// program throw, before the runtime's own context is marked done, and
// the runtime then reports an exception. The caller cancelled the run, so
// it was aborted whichever child heard first. Budget outcomes (time-outs,
// compute, memory) are the program's own and stay as they are.
func abortedByCaller(ctx context.Context, rr *backend.RunResult) {
	f := rr.Error
	if f == nil || ctx.Err() == nil {
		return
	}
	switch f.Kind {
	case backend.FailureException, backend.FailureExit:
		rr.Error = &backend.Failure{Kind: backend.FailureAbort, Message: "run cancelled: " + context.Cause(ctx).Error()}
	}
}
