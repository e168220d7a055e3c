package registry

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

// TestRunCodeSubCallOutcomes: what a program sees for each kind of sub-call
// outcome, and the event each logs.
func TestRunCodeSubCallOutcomes(t *testing.T) {
	png := make([]byte, 1234)
	tests := []struct {
		name      string
		tools     []Tool
		opts      []Option
		program   string
		wantLog   string // the program's log of the outcome
		wantEvent *Event // nil: no event
	}{
		{
			name:      "text blocks joined",
			tools:     []Tool{{Name: "t", Execute: func(context.Context, Execution) ([]Block, error) { return []Block{TextBlock("a"), TextBlock("b")}, nil }}},
			program:   "try t",
			wantLog:   "a\nb",
			wantEvent: &Event{Tool: "t", Summary: "a\nb"},
		},
		{
			name: "non-text placeholders",
			tools: []Tool{{Name: "shot", Execute: func(context.Context, Execution) ([]Block, error) {
				return []Block{TextBlock("see:"), ImageBlock("image/png", png), {Type: "audio", MimeType: "audio/wav", Data: []byte{1, 2, 3}}, {Type: "resource"}}, nil
			}}},
			program:   "try shot",
			wantLog:   "see:\n[image: image/png, 1234 bytes]\n[audio: audio/wav, 3 bytes]\n[resource]",
			wantEvent: &Event{Tool: "shot", Summary: "see:\n[image: image/png, 1234 bytes]\n[audio: audio/wav, 3 bytes]\n[resource]"},
		},
		{
			name:      "tool error rejects",
			tools:     []Tool{failTool("write", "disk full")},
			program:   `try write {"path":"/x"}`,
			wantLog:   "error: disk full",
			wantEvent: &Event{Tool: "write", Arguments: json.RawMessage(`{"path":"/x"}`), IsError: true, Summary: "disk full"},
		},
		{
			name:      "empty tool error message",
			tools:     []Tool{failTool("write", "")},
			program:   "try write",
			wantLog:   "error: tool call failed",
			wantEvent: &Event{Tool: "write", IsError: true, Summary: "tool call failed"},
		},
		{
			name:  "post-execute isError rejects",
			tools: []Tool{echoTool("t")},
			opts: []Option{WithPostExecute(func(_ context.Context, exec Execution, res Result) Result {
				if exec.Name != "t" {
					return res
				}
				res.IsError = true
				res.Content = []Block{TextBlock("redacted failure")}
				return res
			})},
			program:   "try t",
			wantLog:   "error: redacted failure",
			wantEvent: &Event{Tool: "t", IsError: true, Summary: "redacted failure"},
		},
		{
			name:  "guard denial rejects with the reason",
			tools: []Tool{echoTool("rm")},
			opts: []Option{WithGuard(func(_ context.Context, exec Execution) error {
				if exec.Name == "rm" {
					return errors.New("writes are not allowed")
				}
				return nil
			})},
			program:   "try rm",
			wantLog:   `error: tool "rm" denied: writes are not allowed`,
			wantEvent: &Event{Tool: "rm", IsError: true, Summary: `tool "rm" denied: writes are not allowed`},
		},
		{
			name:      "tool panic rejects",
			tools:     []Tool{{Name: "p", Execute: func(context.Context, Execution) ([]Block, error) { panic("kaboom") }}},
			program:   "try p",
			wantLog:   `error: tool "p" panicked: kaboom`,
			wantEvent: &Event{Tool: "p", IsError: true, Summary: `tool "p" panicked: kaboom`},
		},
		{
			name:    "NaN rejected before dispatch",
			tools:   []Tool{echoTool("t")},
			program: `try t {"x":NaN}`,
			wantLog: `error: tools["t"]: arguments are not lossless JSON: invalid character 'N' looking for beginning of value`,
		},
		{
			name:    "duplicate key rejected before dispatch",
			tools:   []Tool{echoTool("t")},
			program: `try t {"x":1,"x":2}`,
			wantLog: `error: tools["t"]: arguments are not lossless JSON: duplicate object key "x"`,
		},
		{
			name:    "hidden tool is not a binding",
			tools:   []Tool{echoTool("t")},
			program: "try secret",
			wantLog: `error: tools["secret"] is not a function`,
		},
		{
			name:      "arguments normalized",
			tools:     []Tool{{Name: "t", Execute: func(context.Context, Execution) ([]Block, error) { return nil, nil }}},
			program:   `try t {"z":"<&>","a":[1.50,12345678901234567890]}`,
			wantLog:   "",
			wantEvent: &Event{Tool: "t", Arguments: json.RawMessage(`{"a":[1.50,12345678901234567890],"z":"<&>"}`)},
		},
		{
			name: "long result summarized",
			tools: []Tool{{Name: "t", Execute: func(context.Context, Execution) ([]Block, error) {
				return []Block{TextBlock(strings.Repeat("é", 150))}, nil
			}}},
			program:   "try t",
			wantLog:   strings.Repeat("é", 150),
			wantEvent: &Event{Tool: "t", Summary: strings.Repeat("é", 100) + "…"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _, ev := codeReg(t, tt.opts...)
			mustRegister(t, r, tt.tools...)
			res := r.Execute(t.Context(), runCall("c", tt.program))
			if res.IsError {
				t.Fatalf("run_code failed: %s", res.Text())
			}
			log := res.CodeRun.Logs[0].Text
			if log != tt.wantLog {
				t.Errorf("program saw %q, want %q", log, tt.wantLog)
			}
			var want []Event
			if w := tt.wantEvent; w != nil {
				w.Type, w.ParentCallID, w.CallID, w.Seq = EventCodeDispatch, "c", "c:code:1", 1
				if w.Arguments == nil {
					w.Arguments = json.RawMessage(`{}`)
				}
				want = append(want, *w)
			}
			assertEvents(t, ev.all(), want)
		})
	}
}

// TestRunCodeOutcomes: how run_code's own result is shaped.
func TestRunCodeOutcomes(t *testing.T) {
	misuse := errors.New("duplicate namespace")
	tests := []struct {
		name     string
		rt       backend.Runtime // nil: the fake
		program  string
		wantErr  bool
		wantText string
		wantKind backend.FailureKind // a CodeRunFailedError of this kind
		check    func(t *testing.T, res Result)
	}{
		{name: "logs then value", program: "log one\nlog two\nreturn \"done\"", wantText: "one\ntwo\ndone"},
		{name: "JSON value", program: `return {"a": [1, 2]}`, wantText: `{"a": [1, 2]}`},
		{name: "no output", program: "# nothing", wantText: "(no output)"},
		{name: "exception", program: "log before\nthrow boom", wantErr: true, wantKind: backend.FailureException, wantText: "before\ncode run failed (exception): boom"},
		{name: "uncaught tool error", program: "call fail", wantErr: true, wantKind: backend.FailureException, wantText: "code run failed (exception): line 1: disk full"},
		{name: "syntax error", program: "bogus", wantErr: true, wantKind: backend.FailureException, wantText: `code run failed (exception): SyntaxError: line 1: unknown statement "bogus"`},
		{
			name: "timeout failure",
			rt: funcRuntime{lang: backend.TypeScript, run: func(context.Context, backend.RunRequest) (backend.RunResult, error) {
				return backend.RunResult{Logs: []backend.LogEntry{{Source: backend.SourceStdout, Text: "partial\n"}}, Error: &backend.Failure{Kind: backend.FailureTimeout, Message: "computeMs budget (100ms) exceeded"}}, nil
			}},
			wantErr: true, wantKind: backend.FailureTimeout,
			wantText: "partial\ncode run failed (timeout): computeMs budget (100ms) exceeded",
		},
		{
			name: "runtime misuse error",
			rt: funcRuntime{lang: backend.TypeScript, run: func(context.Context, backend.RunRequest) (backend.RunResult, error) {
				return backend.RunResult{}, misuse
			}},
			wantErr: true, wantText: "run_code: code runtime: duplicate namespace",
			check: func(t *testing.T, res Result) {
				var failed *CodeRunFailedError
				if !errors.Is(res.Err, misuse) || errors.As(res.Err, &failed) || res.CodeRun != nil || res.Card != nil {
					t.Errorf("res = %+v, want the misuse error through the error boundary", res)
				}
			},
		},
		{
			name: "runtime panic",
			rt: funcRuntime{lang: backend.TypeScript, run: func(context.Context, backend.RunRequest) (backend.RunResult, error) {
				panic("runtime bug")
			}},
			wantErr: true, wantText: `tool "run_code" panicked: runtime bug`,
			check: func(t *testing.T, res Result) {
				if !errdefs.IsInternal(res.Err) || res.CodeRun != nil {
					t.Errorf("res = %+v", res)
				}
			},
		},
		{
			name: "truncation noted",
			rt: funcRuntime{lang: backend.TypeScript, run: func(context.Context, backend.RunRequest) (backend.RunResult, error) {
				return backend.RunResult{
					Logs: []backend.LogEntry{{Text: "a"}}, LogsTruncated: true,
					Value: json.RawMessage(`"abc"`), ValueKind: backend.ValueJSON, ValueTruncated: true,
				}, nil
			}},
			wantText: "a\n[log output truncated]\nabc\n[value truncated]",
		},
		{
			name: "inspect value and null",
			rt: funcRuntime{lang: backend.TypeScript, run: func(context.Context, backend.RunRequest) (backend.RunResult, error) {
				return backend.RunResult{Value: json.RawMessage(`"Map(1) { 'a' => 1 }"`), ValueKind: backend.ValueInspect}, nil
			}},
			wantText: "Map(1) { 'a' => 1 }",
		},
		{
			name: "explicit null value",
			rt: funcRuntime{lang: backend.TypeScript, run: func(context.Context, backend.RunRequest) (backend.RunResult, error) {
				return backend.RunResult{Value: json.RawMessage(`null`), ValueKind: backend.ValueJSON}, nil
			}},
			wantText: "null",
		},
		{
			name: "value-less null",
			rt: funcRuntime{lang: backend.TypeScript, run: func(context.Context, backend.RunRequest) (backend.RunResult, error) {
				return backend.RunResult{Value: json.RawMessage(`null`)}, nil
			}},
			wantText: "(no output)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rt backend.Runtime = registrytest.New(backend.TypeScript)
			if tt.rt != nil {
				rt = tt.rt
			}
			r := newReg(t, WithMode(ModeCode), WithRuntime(rt))
			mustRegister(t, r, failTool("fail", "disk full"))
			program := tt.program
			if program == "" {
				program = "(program)"
			}
			res := r.Execute(t.Context(), runCall("c", program))
			if res.IsError != tt.wantErr || res.Text() != tt.wantText {
				t.Fatalf("res = %v %q, want %v %q", res.IsError, res.Text(), tt.wantErr, tt.wantText)
			}
			if tt.wantKind != "" {
				var failed *CodeRunFailedError
				if !errors.As(res.Err, &failed) || failed.Kind != tt.wantKind || res.CodeRun == nil || res.CodeRun.Error == nil || failed.Message != res.CodeRun.Error.Message {
					t.Errorf("Err = %#v, want a %s CodeRunFailedError matching CodeRun", res.Err, tt.wantKind)
				}
			}
			if tt.check != nil {
				tt.check(t, res)
			} else if res.Card == nil || res.Card.Content != tt.wantText {
				t.Errorf("result card = %+v", res.Card)
			}
		})
	}
}

func TestCodeRunFailedErrorJSON(t *testing.T) {
	b, err := json.Marshal(&CodeRunFailedError{Kind: backend.FailureOOM, Message: "memory limit 256MiB"})
	if err != nil || string(b) != `{"kind":"oom","message":"memory limit 256MiB"}` {
		t.Fatalf("json = %s, %v", b, err)
	}
}

func TestRunCodeArguments(t *testing.T) {
	tests := []struct {
		args string
		want string
	}{
		{`{}`, `run_code needs arguments {"code": string}`},
		{`{"code": 42}`, `run_code needs arguments {"code": string}`},
		{`["code"]`, `run_code needs arguments {"code": string}`},
		{`{"code": " \n"}`, "run_code: code is empty"},
		{`{"code": NaN}`, "arguments are not lossless JSON"},
	}
	for _, tt := range tests {
		r, rt, _ := codeReg(t)
		res := r.Execute(t.Context(), Call{ID: "c", Name: RunCode, Arguments: json.RawMessage(tt.args)})
		if !res.IsError || !errdefs.IsInvalidArgument(res.Err) || !strings.Contains(res.Text(), tt.want) {
			t.Errorf("args %s: res = %q (%v), want invalid argument %q", tt.args, res.Text(), res.Err, tt.want)
		}
		if len(rt.Requests()) != 0 {
			t.Errorf("args %s: the program ran", tt.args)
		}
	}
	// Extra fields are ignored.
	r, _, _ := codeReg(t)
	if res := r.Execute(t.Context(), Call{ID: "c", Name: RunCode, Arguments: json.RawMessage(`{"code":"log hi","language":"ts"}`)}); res.IsError || res.Text() != "hi" {
		t.Errorf("extra field: %q", res.Text())
	}
}

// TestRunCodeRuntimeRequired: run_code fails loudly without a usable
// runtime, at execution as at assembly.
func TestRunCodeRuntimeRequired(t *testing.T) {
	tests := []struct {
		name string
		rt   backend.Runtime
		want string
	}{
		{"no runtime", nil, `tool mode "code" needs a code runtime and none is configured (known languages: python, typescript)`},
		{"unknown language", registrytest.New("lua"), `code runtime language "lua" has no SDK renderer (known languages: python, typescript)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []Option{WithMode(ModeCode)}
			if tt.rt != nil {
				opts = append(opts, WithRuntime(tt.rt))
			}
			res := newReg(t, opts...).Execute(t.Context(), runCall("c", "log x"))
			if !res.IsError || !errdefs.IsFailedPrecondition(res.Err) || res.Text() != "run_code: "+tt.want {
				t.Errorf("res = %q (%v)", res.Text(), res.Err)
			}
		})
	}
}

// TestRunCodeThroughPipeline: run_code itself and each sub-call traverse the
// hooks; a guard can read the program and deny it before it runs.
func TestRunCodeThroughPipeline(t *testing.T) {
	var seen []string
	r, rt, _ := codeReg(t,
		WithPreExecute(func(_ context.Context, exec Execution) error {
			seen = append(seen, "pre "+exec.CallID+" parent="+exec.Parent+" program="+exec.Program())
			return nil
		}),
		WithGuard(func(_ context.Context, exec Execution) error {
			if strings.Contains(exec.Program(), "forbidden") {
				return errors.New("program mentions forbidden")
			}
			return nil
		}),
		WithResultObserver(func(_ context.Context, exec Execution, res Result) {
			seen = append(seen, "result "+exec.CallID+" "+res.Text())
		}),
	)
	mustRegister(t, r, echoTool("e"))
	res := r.Execute(t.Context(), runCall("c", "call e\nreturn 1"))
	if res.IsError {
		t.Fatal(res.Text())
	}
	want := []string{
		"pre c parent= program=call e\nreturn 1",
		"pre c:code:1 parent=c program=",
		"result c:code:1 e {}",
		"result c e {}\n1",
	}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("pipeline saw\n%q\nwant\n%q", seen, want)
	}
	res = r.Execute(t.Context(), runCall("d", "log forbidden"))
	var denied *DeniedError
	if !res.IsError || !errors.As(res.Err, &denied) || denied.Tool != RunCode {
		t.Errorf("res = %q, want run_code denied", res.Text())
	}
	if len(rt.Requests()) != 1 {
		t.Errorf("the denied program ran")
	}
}

func TestRunCodeWithoutSink(t *testing.T) {
	rt := registrytest.New(backend.Python)
	r := newReg(t, WithMode(ModeBoth), WithRuntime(rt), WithEventSink(nil))
	mustRegister(t, r, echoTool("e"))
	res := r.Execute(t.Context(), runCall("c", "call e {\"x\":1}\ngo e\ngo e\nwait"))
	if res.IsError || res.Text() != "e {\"x\":1}\ne {}\ne {}" {
		t.Fatalf("res = %q", res.Text())
	}
	// Native calls still work in both mode.
	if res := r.Execute(t.Context(), Call{ID: "n", Name: "e"}); res.IsError {
		t.Fatal(res.Text())
	}
}

func TestEventJSON(t *testing.T) {
	ev := Event{Type: EventCodeDispatch, ParentCallID: "p", CallID: "p:code:1", Seq: 1, Tool: "t", Arguments: json.RawMessage(`{"a":1}`), IsError: true, Summary: "x"}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"tool/code-dispatch","parentCallId":"p","callId":"p:code:1","seq":1,"tool":"t","arguments":{"a":1},"isError":true,"summary":"x"}`
	if string(b) != want {
		t.Errorf("json = %s\nwant   %s", b, want)
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456789…"},
		{"ééééé", 3, "é…"}, // never splits a rune
		{"日本", 2, "…"},
	}
	for _, tt := range tests {
		if got := summarize(tt.in, tt.max); got != tt.want {
			t.Errorf("summarize(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

func TestPresentCall(t *testing.T) {
	r, _, _ := codeReg(t)
	program := "const x = await tools.read({path: 'a'})\nreturn x"
	got := r.PresentCall(runCall("c", program))
	want := &Card{Type: CardGeneric, Kind: KindExecute, Title: program, RawInput: program}
	if got == nil || *got != *want {
		t.Errorf("PresentCall = %+v, want %+v", got, want)
	}
	for _, c := range []Call{
		{ID: "c", Name: "read"},
		{ID: "c", Name: RunCode, Arguments: json.RawMessage(`{"code":1}`)},
		{ID: "c", Name: RunCode, Arguments: json.RawMessage(`{`)},
	} {
		if card := r.PresentCall(c); card != nil {
			t.Errorf("PresentCall(%s %s) = %+v, want nil", c.Name, c.Arguments, card)
		}
	}
	b, _ := json.Marshal(want)
	if string(b) != `{"type":"generic","kind":"execute","title":"const x = await tools.read({path: 'a'})\nreturn x","rawInput":"const x = await tools.read({path: 'a'})\nreturn x"}` {
		t.Errorf("card json = %s", b)
	}
}
