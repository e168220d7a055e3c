package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry/registrytest"
	"github.com/dsh-container/dsh-container/sdkgen"
)

// sourcedTool is an echo tool with a schema and a source.
func sourcedTool(name, source string) Tool {
	t := echoTool(name)
	t.Source = source
	t.Parameters = json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"What to look for."},"n":{"type":"integer"}},"required":["q"]}`)
	t.Description = "Find things named " + name + ". More detail the index leaves out."
	return t
}

// The view picks the SDK section and whether describe_tools is offered,
// in both languages and modes; native mode is untouched.
func TestSDKViewAssemble(t *testing.T) {
	tools := []Tool{sourcedTool("local", ""), sourcedTool("gh__issue", "gh"), sourcedTool("gh__pr", "gh")}
	sdk := sdkTools(tools)
	for _, lang := range []backend.Language{backend.TypeScript, backend.Python} {
		full, _ := sdkgen.Render(sdkgen.Language(lang), sdkgen.FormatPrompt, sdk)
		index, _ := sdkgen.Render(sdkgen.Language(lang), sdkgen.FormatIndex, sdk)
		for _, c := range []struct {
			mode    Mode
			opts    []Option
			section string
			wire    string
		}{
			{ModeCode, nil, full, "run_code"},
			{ModeCode, []Option{WithSDK(SDKFull)}, full, "run_code"},
			{ModeCode, []Option{WithSDK(SDKIndex)}, index, "run_code describe_tools"},
			{ModeBoth, []Option{WithSDK(SDKIndex)}, index, "gh__issue gh__pr local run_code describe_tools"},
			{ModeCode, []Option{WithSDK(SDKAuto)}, full, "run_code"},
			{ModeCode, []Option{WithSDK(SDKAuto), WithSDKAutoThreshold(len(full))}, full, "run_code"},
			{ModeCode, []Option{WithSDK(SDKAuto), WithSDKAutoThreshold(len(full) - 1)}, index, "run_code describe_tools"},
			{ModeNative, []Option{WithSDK(SDKIndex)}, "", "gh__issue gh__pr local"},
		} {
			name := fmt.Sprintf("%s/%s/%d", lang, c.mode, len(c.opts))
			r := newReg(t, append([]Option{WithMode(c.mode), WithRuntime(registrytest.New(lang))}, c.opts...)...)
			mustRegister(t, r, tools...)
			asm, err := r.Assemble(t.Context(), Scope{})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(wireNames(asm), " "); got != c.wire {
				t.Errorf("%s: wire tools %q, want %q", name, got, c.wire)
			}
			var section string
			if len(asm.Sections) > 0 {
				section = asm.Sections[0].Text
			}
			if section != c.section {
				t.Errorf("%s: section differs:\n%s", name, section)
			}
			for _, w := range asm.Tools {
				if w.Name == DescribeTools {
					if d := describeWireTool(lang); w.Description != d.Description || string(w.Parameters) != string(describeParameters) || !strings.Contains(w.Description, map[backend.Language]string{backend.TypeScript: "TypeScript", backend.Python: "Python"}[lang]) {
						t.Errorf("%s: describe_tools %+v", name, w)
					}
				}
			}
			// Over MCP, run_code's description carries the section.
			for _, m := range asm.MCPTools() {
				if m.Name == RunCode && c.section != "" && !strings.HasSuffix(m.Description, "\n\n"+c.section) {
					t.Errorf("%s: run_code's MCP description does not end with the section", name)
				}
			}
		}
	}
}

// The index groups tools by their Source.
func TestSDKIndexGroups(t *testing.T) {
	r, _, _ := codeReg(t, WithSDK(SDKIndex))
	mustRegister(t, r, sourcedTool("local", ""), sourcedTool("gh__issue", "gh"))
	asm, err := r.Assemble(t.Context(), Scope{})
	if err != nil {
		t.Fatal(err)
	}
	want := "// host tools\ntools[\"local\"]({q, n?}) — Find things named local.\n\n// from MCP server \"gh\"\ntools[\"gh__issue\"]({q, n?}) — Find things named gh__issue.\n"
	if !strings.Contains(asm.Sections[0].Text, want) {
		t.Errorf("index:\n%s\nwant it to contain:\n%s", asm.Sections[0].Text, want)
	}
}

func describeCall(id string, names any) Call {
	args, _ := json.Marshal(map[string]any{"names": names})
	return Call{ID: id, Name: DescribeTools, Arguments: args}
}

// describe_tools returns exactly the SDK rendered for the named tools, in
// the runtime's language, through the pipeline, seeing only what the
// call's scope sees.
func TestDescribeToolsExecute(t *testing.T) {
	tools := []Tool{sourcedTool("local", ""), sourcedTool("gh__issue", "gh"), sourcedTool("gh__pr", "gh"), structuredTool("typed", `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}
	for _, lang := range []backend.Language{backend.TypeScript, backend.Python} {
		var seen []string
		r := newReg(t, WithMode(ModeCode), WithRuntime(registrytest.New(lang)), WithSDK(SDKIndex),
			WithGuard(func(_ context.Context, e Execution) error {
				seen = append(seen, e.Name+" "+string(e.Arguments))
				return nil
			}))
		mustRegister(t, r, tools...)
		res := r.Execute(t.Context(), describeCall("d1", []string{"typed", "gh__issue", "typed"}))
		if res.IsError {
			t.Fatalf("%s: %s", lang, res.Text())
		}
		sel, _ := sdkgen.Select(sdkTools(tools), []string{"gh__issue", "typed"})
		want, _ := sdkgen.Render(sdkgen.Language(lang), sdkgen.FormatSource, sel)
		if res.Text() != want {
			t.Errorf("%s: describe_tools returned:\n%s\nwant:\n%s", lang, res.Text(), want)
		}
		if res.CallID != "d1" || res.Name != DescribeTools {
			t.Errorf("identity %q %q", res.CallID, res.Name)
		}
		if len(seen) != 1 || !strings.HasPrefix(seen[0], "describe_tools {") {
			t.Errorf("%s: the guard saw %q", lang, seen)
		}

		// A hidden tool is as unknown as a tool nobody registered.
		scope := Scope{}.Restrict(Deny("gh__pr"))
		hidden := r.Execute(t.Context(), Call{ID: "d2", Name: DescribeTools, Arguments: json.RawMessage(`{"names":["gh__pr"]}`), Scope: scope})
		missing := r.Execute(t.Context(), Call{ID: "d3", Name: DescribeTools, Arguments: json.RawMessage(`{"names":["nope"]}`), Scope: scope})
		if !hidden.IsError || !errdefs.IsNotFound(hidden.Err) || !missing.IsError ||
			strings.ReplaceAll(hidden.Text(), "gh__pr", "X") != strings.ReplaceAll(missing.Text(), "nope", "X") {
			t.Errorf("%s: hidden %q vs missing %q", lang, hidden.Text(), missing.Text())
		}
		// A restriction cannot hide describe_tools itself.
		if res := r.Execute(t.Context(), Call{ID: "d4", Name: DescribeTools, Arguments: json.RawMessage(`{"names":["local"]}`), Scope: Scope{}.Restrict(Allow())}); !res.IsError || !strings.Contains(res.Text(), `no tool named "local"`) {
			t.Errorf("%s: under Allow(): %q", lang, res.Text())
		}
		if res := r.Execute(t.Context(), Call{ID: "d5", Name: DescribeTools, Arguments: json.RawMessage(`{"names":["local"]}`), Scope: Scope{}.Restrict(Allow("local"))}); res.IsError {
			t.Errorf("%s: under Allow(local): %q", lang, res.Text())
		}
	}
}

func TestDescribeToolsBadArguments(t *testing.T) {
	r, _, _ := codeReg(t, WithSDK(SDKIndex))
	mustRegister(t, r, echoTool("a"))
	many := make([]string, MaxDescribeNames+1)
	for i := range many {
		many[i] = "a"
	}
	var unknown []string
	for i := range 12 {
		unknown = append(unknown, fmt.Sprintf("u%d", i)+strings.Repeat("x", 200*(i%2)))
	}
	for _, c := range []struct {
		args string
		want string
	}{
		{`{}`, `describe_tools needs arguments {"names": [string, ...]}`},
		{`{"names": null}`, `describe_tools needs arguments`},
		{`{"names": "a"}`, `describe_tools needs arguments`},
		{`{"names": [1]}`, `describe_tools needs arguments`},
		{`{"names": []}`, `names is empty`},
		{string(mustMarshal(t, map[string]any{"names": many})), fmt.Sprintf("%d names; ask for at most %d", len(many), MaxDescribeNames)},
		{`{"names": ["a", "run_code", "describe_tools"]}`, `no tools named "run_code", "describe_tools"`},
		{string(mustMarshal(t, map[string]any{"names": unknown})), "x…\", and 2 more; ask for tools by their names as the SDK index lists them"},
		{`[1]`, `describe_tools needs arguments`},
	} {
		res := r.Execute(t.Context(), Call{ID: "x", Name: DescribeTools, Arguments: json.RawMessage(c.args)})
		if !res.IsError || !strings.Contains(res.Text(), c.want) {
			t.Errorf("%s: %q, want it to contain %q", c.args, res.Text(), c.want)
		}
		if len(res.Text()) > 4096 {
			t.Errorf("%s: error message of %d bytes", c.args, len(res.Text()))
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// describe_tools is Code Mode's: unavailable in native mode, failing
// loudly without a runtime; it cannot be registered; programs never see
// it, whatever the view.
func TestDescribeToolsReserved(t *testing.T) {
	native := newReg(t, WithSDK(SDKIndex))
	mustRegister(t, native, echoTool("a"))
	if res := native.Execute(t.Context(), describeCall("n", []string{"a"})); !res.IsError || !errdefs.IsNotFound(res.Err) {
		t.Errorf("native: %q", res.Text())
	}
	noRuntime := newReg(t, WithMode(ModeCode), WithSDK(SDKIndex))
	if res := noRuntime.Execute(t.Context(), describeCall("n", []string{"a"})); !res.IsError || !errdefs.IsFailedPrecondition(res.Err) {
		t.Errorf("no runtime: %q", res.Text())
	}
	if err := native.Register(echoTool(DescribeTools)); !errdefs.IsInvalidArgument(err) {
		t.Errorf("Register(describe_tools) = %v", err)
	}

	r, rt, _ := codeReg(t, WithSDK(SDKIndex))
	mustRegister(t, r, echoTool("a"), echoTool("b"))
	rt.Handle("prog", registrytest.Program(func(_ context.Context, env *registrytest.Env) (any, error) {
		_, err := env.Call(DescribeTools, json.RawMessage(`{"names":["a"]}`))
		return nil, err
	}))
	res := r.Execute(t.Context(), runCall("r1", "prog"))
	reqs := rt.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d runs", len(reqs))
	}
	if got := slices.Sorted(maps.Keys(reqs[0].Bindings[0].Functions)); !slices.Equal(got, []string{"a", "b"}) || len(reqs[0].Bindings) != 1 {
		t.Errorf("the program's bindings are %q", got)
	}
	if !res.IsError {
		t.Errorf("a program reached describe_tools: %q", res.Text())
	}
}

func TestParseSDKView(t *testing.T) {
	for in, want := range map[string]SDKView{"": SDKFull, "full": SDKFull, "index": SDKIndex, "auto": SDKAuto} {
		if got, err := ParseSDKView(in); err != nil || got != want {
			t.Errorf("ParseSDKView(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseSDKView("Index"); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "full, index, auto") {
		t.Errorf("ParseSDKView(Index) = %v", err)
	}
	r := newReg(t, WithMode(ModeCode), WithRuntime(registrytest.New(backend.TypeScript)), WithSDK("bogus"))
	if _, err := r.Assemble(t.Context(), Scope{}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("Assemble with a bad view: %v", err)
	}
	if res := r.Execute(t.Context(), describeCall("x", []string{"a"})); !res.IsError || !errors.Is(res.Err, errdefs.ErrInvalidArgument) {
		t.Errorf("Execute with a bad view: %q", res.Text())
	}
}

// The per-language table of disclosure has the SDK language table's keys.
func TestDisclosureTables(t *testing.T) {
	want := slices.Sorted(maps.Keys(sdkLanguages))
	for name, keys := range map[string][]backend.Language{
		"describe": slices.Sorted(maps.Keys(describeFlavors)),
	} {
		if !slices.Equal(keys, want) {
			t.Errorf("%s table languages %q != %q", name, keys, want)
		}
	}
}
