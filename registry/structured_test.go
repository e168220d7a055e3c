package registry

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/registry/registrytest"
)

// structuredTool returns a tool with an output schema whose result is the
// text "text:<args>" and the structured value out.
func structuredTool(name string, out string) Tool {
	return Tool{
		Name:         name,
		Parameters:   json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
		Annotations:  json.RawMessage(`{"readOnlyHint": true, "title": "T"}`),
		ExecuteOutput: func(_ context.Context, exec Execution) (Output, error) {
			return Output{Content: []Block{TextBlock("text:" + string(exec.Arguments))}, Structured: json.RawMessage(out)}, nil
		},
	}
}

// A tool with an output schema resolves a program's call to its structured
// value (canonical JSON, big integers kept exactly), not its text; a tool
// without one resolves to its text even when it returns a structured value;
// the event's summary is what the program got.
func TestRunCodeStructuredResults(t *testing.T) {
	r, rt, ev := codeReg(t)
	untyped := Tool{Name: "untyped", ExecuteOutput: func(context.Context, Execution) (Output, error) {
		return Output{Content: []Block{TextBlock("plain")}, Structured: json.RawMessage(`{"ignored":true}`)}, nil
	}}
	mustRegister(t, r, structuredTool("typed", `{ "n": 12345678901234567891, "b": [1, "x"] }`), untyped)
	const program = "typed then untyped"
	rt.Handle(program, func(ctx context.Context, env *registrytest.Env) (any, error) {
		v, err := env.Call("typed", json.RawMessage(`{}`))
		if err != nil {
			return nil, err
		}
		u, err := env.Call("untyped", json.RawMessage(`{}`))
		if err != nil {
			return nil, err
		}
		return []json.RawMessage{v, u}, nil
	})
	res := r.Execute(t.Context(), runCall("c", program))
	if res.IsError {
		t.Fatalf("run_code failed: %s", res.Text())
	}
	if got, want := string(res.CodeRun.Value), `[{"b":[1,"x"],"n":12345678901234567891},"plain"]`; got != want {
		t.Errorf("value = %s, want %s", got, want)
	}
	evs := ev.all()
	if len(evs) != 2 || evs[0].Summary != `{"b":[1,"x"],"n":12345678901234567891}` || evs[1].Summary != "plain" || evs[0].IsError {
		t.Errorf("events = %+v", evs)
	}
}

// A tool with an output schema whose result has no structured content, or
// invalid structured content, rejects the program's call with a message
// saying so; the run goes on.
func TestRunCodeStructuredMissing(t *testing.T) {
	r, rt, ev := codeReg(t)
	missing := structuredTool("missing", "")
	bad := structuredTool("bad", `{"a":1,"a":2}`)
	mustRegister(t, r, missing, bad)
	const program = "call missing, then bad"
	rt.Handle(program, func(ctx context.Context, env *registrytest.Env) (any, error) {
		_, err1 := env.Call("missing", nil)
		_, err2 := env.Call("bad", nil)
		return []string{errString(err1), errString(err2)}, nil
	})
	res := r.Execute(t.Context(), runCall("c", program))
	if res.IsError {
		t.Fatalf("run_code failed: %s", res.Text())
	}
	var msgs []string
	if err := json.Unmarshal(res.CodeRun.Value, &msgs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msgs[0], `tool "missing" declares an output schema but its result has no structured content; its text: text:{}`) {
		t.Errorf("missing: %q", msgs[0])
	}
	if !strings.Contains(msgs[1], `tool "bad" returned structured content that is not lossless JSON`) || !strings.Contains(msgs[1], "duplicate") {
		t.Errorf("bad: %q", msgs[1])
	}
	if evs := ev.all(); len(evs) != 2 || !evs[0].IsError || !evs[1].IsError {
		t.Errorf("events = %+v", evs)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A post-execute hook that replaces the structured value with invalid JSON
// rejects the call rather than handing the runtime invalid JSON.
func TestRunCodeStructuredAfterHook(t *testing.T) {
	rt := registrytest.New("typescript")
	r := newReg(t, WithMode(ModeCode), WithRuntime(rt), WithPostExecute(func(_ context.Context, exec Execution, res Result) Result {
		if exec.Name == "typed" {
			res.StructuredContent = json.RawMessage(`{oops`)
		}
		return res
	}))
	mustRegister(t, r, structuredTool("typed", `{"n":1}`))
	rt.Handle("p", func(ctx context.Context, env *registrytest.Env) (any, error) {
		_, err := env.Call("typed", nil)
		return errString(err), nil
	})
	res := r.Execute(t.Context(), runCall("c", "p"))
	if !strings.Contains(string(res.CodeRun.Value), "structured content is not lossless JSON") {
		t.Errorf("value = %s", res.CodeRun.Value)
	}
}

// A native call of a structured tool carries its structured value in the
// result, canonical, next to the content; observers get their own copy.
func TestExecuteStructuredNative(t *testing.T) {
	var seen []byte
	r := newReg(t, WithResultObserver(func(_ context.Context, _ Execution, res Result) {
		seen = res.StructuredContent
		res.StructuredContent[0] = 'X' // must not reach the caller
	}))
	mustRegister(t, r, structuredTool("typed", ` {"n": 1} `))
	res := r.Execute(t.Context(), Call{ID: "1", Name: "typed"})
	if res.IsError || string(res.StructuredContent) != `{"n":1}` || res.Text() != "text:{}" {
		t.Fatalf("result = %+v", res)
	}
	if string(seen) != `X"n":1}` {
		t.Errorf("observer saw %s", seen)
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `"structuredContent":{"n":1}`) {
		t.Errorf("JSON = %s", b)
	}
}

// Register validates the new fields: exactly one of Execute and
// ExecuteOutput, an output schema that is a JSON object or boolean,
// annotations that are a JSON object; both are compacted.
func TestRegisterOutputSchemaAndAnnotations(t *testing.T) {
	exec := func(context.Context, Execution) ([]Block, error) { return nil, nil }
	execOut := func(context.Context, Execution) (Output, error) { return Output{}, nil }
	for _, c := range []struct {
		name string
		tool Tool
		want string // "" for success
	}{
		{"both executes", Tool{Name: "a", Execute: exec, ExecuteOutput: execOut}, "both Execute and ExecuteOutput"},
		{"output only", Tool{Name: "a", ExecuteOutput: execOut}, ""},
		{"array output schema", Tool{Name: "a", Execute: exec, OutputSchema: json.RawMessage(`[]`)}, "output schema must be a JSON object or boolean"},
		{"bad output schema", Tool{Name: "a", Execute: exec, OutputSchema: json.RawMessage(`{"a":1,"a":1}`)}, "output schema"},
		{"boolean output schema", Tool{Name: "a", Execute: exec, OutputSchema: json.RawMessage(`true`)}, ""},
		{"string annotations", Tool{Name: "a", Execute: exec, Annotations: json.RawMessage(`"x"`)}, "annotations must be a JSON object"},
		{"invalid annotations", Tool{Name: "a", Execute: exec, Annotations: json.RawMessage(`{`)}, "annotations"},
	} {
		err := New().Register(c.tool)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errdefs.IsInvalidArgument(err)):
			t.Errorf("%s: err = %v, want invalid argument containing %q", c.name, err, c.want)
		}
	}
}

// Assemble carries output schemas and annotations to the wire tool list
// (compacted) and output schemas into the SDK's result types.
func TestAssembleOutputSchema(t *testing.T) {
	r, _, _ := codeReg(t, WithMode(ModeBoth))
	mustRegister(t, r, structuredTool("typed", `{}`), echoTool("plain"))
	asm, err := r.Assemble(t.Context(), Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if len(asm.Tools) != 3 {
		t.Fatalf("tools = %+v", asm.Tools)
	}
	plain, typed := asm.Tools[0], asm.Tools[1]
	if plain.OutputSchema != nil || plain.Annotations != nil {
		t.Errorf("plain = %+v", plain)
	}
	if string(typed.OutputSchema) != `{"type":"object","properties":{"n":{"type":"integer"}}}` || string(typed.Annotations) != `{"readOnlyHint":true,"title":"T"}` {
		t.Errorf("typed = %s %s", typed.OutputSchema, typed.Annotations)
	}
	b, _ := json.Marshal(plain)
	if strings.Contains(string(b), "outputSchema") || strings.Contains(string(b), "annotations") {
		t.Errorf("plain wire tool JSON = %s", b)
	}
	sdk := asm.Sections[0].Text
	if !strings.Contains(sdk, `"typed": (args: { [key: string]: unknown }) => Promise<{`) || !strings.Contains(sdk, `"plain": (args: { [key: string]: unknown }) => Promise<string>`) {
		t.Errorf("SDK:\n%s", sdk)
	}
}

// A tool returning an error through ExecuteOutput is an error result like
// any other.
func TestExecuteOutputError(t *testing.T) {
	r := newReg(t)
	mustRegister(t, r, Tool{Name: "x", ExecuteOutput: func(context.Context, Execution) (Output, error) {
		return Output{Structured: json.RawMessage(`{}`)}, errors.New("boom")
	}})
	res := r.Execute(t.Context(), Call{ID: "1", Name: "x"})
	if !res.IsError || res.Text() != "boom" || res.StructuredContent != nil {
		t.Errorf("result = %+v", res)
	}
}
