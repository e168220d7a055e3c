package sdkgen

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestOutputSentence checks the instructions mention structured results
// exactly when a visible tool declares an output schema: the anchor
// sentence appears once in each text, a tool set without output schemas
// keeps the fixed text byte for byte, and run_code's own schema (never
// shown) does not count.
func TestOutputSentence(t *testing.T) {
	for _, c := range []struct{ text, anchor, sentence string }{
		{tsInstructions, tsTextResult, tsOutputSentence},
		{pyInstructions, pyTextResult, pyOutputSentence},
	} {
		if n := strings.Count(c.text, c.anchor); n != 1 {
			t.Fatalf("%q appears %d times in the instructions, want 1", c.anchor, n)
		}
	}
	text := []Tool{{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	hidden := append(text, Tool{Name: ReservedTool, OutputSchema: json.RawMessage(`{"type":"object"}`)})
	blank := []Tool{{Name: "a", OutputSchema: json.RawMessage(" \n")}}
	typed := []Tool{{Name: "a", OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}}
	for _, tools := range [][]Tool{text, hidden, blank} {
		if got := TypeScriptPrompt(tools); !strings.HasPrefix(got, tsInstructions+"```ts\n") || strings.Contains(got, tsOutputSentence) {
			t.Errorf("TypeScript instructions changed for a tool set without output schemas:\n%s", got)
		}
		if got := PythonPrompt(tools); !strings.HasPrefix(got, pyInstructions+"```python\n") || strings.Contains(got, pyOutputSentence) {
			t.Errorf("Python instructions changed for a tool set without output schemas:\n%s", got)
		}
	}
	if got := TypeScriptPrompt(typed); !strings.Contains(got, tsTextResult+tsOutputSentence+"\n") {
		t.Errorf("TypeScript instructions lack the structured-result sentence:\n%s", got)
	}
	if got := PythonPrompt(typed); !strings.Contains(got, pyTextResult+pyOutputSentence+"\n") {
		t.Errorf("Python instructions lack the structured-result sentence:\n%s", got)
	}
}

// TestOutputTypes pins how an output schema becomes the result type of
// one tool in each language; a blank output schema means a text result.
func TestOutputTypes(t *testing.T) {
	for _, c := range []struct {
		name, schema, ts, py string
	}{
		{"none", ``, "Promise<string>", "-> str:"},
		{"blank", "  ", "Promise<string>", "-> str:"},
		{"string", `{"type":"string"}`, "Promise<string>", "-> str:"},
		{"number", `{"type":"number"}`, "Promise<number>", "-> float:"},
		{"array", `{"type":"array","items":{"type":"integer"}}`, "Promise<number[]>", "-> list[int]:"},
		{"record", `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`, "Promise<{\n    n: number;\n  }>", "-> GetOutput:"},
		{"map", `{"type":"object"}`, "Promise<{ [key: string]: unknown }>", "-> dict[str, Any]:"},
		{"invalid", `{"type":`, "Promise<unknown>", "-> Any:"},
		{"boolean schema", `true`, "Promise<unknown>", "-> Any:"},
	} {
		tools := []Tool{{Name: "get", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(c.schema)}}
		if got := TypeScriptSource(tools); !strings.Contains(got, ") => "+c.ts+";\n") {
			t.Errorf("%s: TypeScript lacks %q:\n%s", c.name, c.ts, got)
		}
		got := PythonSource(tools)
		if !strings.Contains(got, "async def get(self, args: dict[str, Any]) "+c.py+"\n") {
			t.Errorf("%s: Python lacks %q:\n%s", c.name, c.py, got)
		}
		if err := checkTS(TypeScriptSource(tools)); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if err := checkPython(got); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestOutputClassNames checks output classes are named apart from the
// argument classes and from one another, even for long and colliding
// tool names.
func TestOutputClassNames(t *testing.T) {
	rec := json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)
	long := strings.Repeat("x", 200)
	tools := []Tool{
		{Name: "get", InputSchema: rec, OutputSchema: rec},
		{Name: "get_output", InputSchema: rec, OutputSchema: rec},
		{Name: long, InputSchema: rec, OutputSchema: rec},
	}
	src := PythonSource(tools)
	for _, want := range []string{
		"class GetArgs(TypedDict):", "class GetOutput(TypedDict):",
		"class GetOutputArgs(TypedDict):", "class GetOutputOutput(TypedDict):",
		"class X" + strings.Repeat("x", maxClassName-len("X")-len("Args")) + "Args(TypedDict):",
		"class X" + strings.Repeat("x", maxClassName-len("X")-len("Output")) + "Output(TypedDict):",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("missing %q in:\n%s", want, src)
		}
	}
	if err := checkPython(src); err != nil {
		t.Error(err)
	}
}
