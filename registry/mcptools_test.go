package registry

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

// MCPTools is the assembly in MCP's shape: native tools as registered,
// run_code with the SDK section in its description and RunCodeOutputSchema.
func TestMCPTools(t *testing.T) {
	for _, mode := range []Mode{ModeNative, ModeCode, ModeBoth} {
		for _, lang := range []backend.Language{backend.TypeScript, backend.Python} {
			r := newReg(t, WithMode(mode), WithRuntime(registrytest.New(lang)))
			mustRegister(t, r, structuredTool("typed", `{}`), echoTool("plain"))
			asm, err := r.Assemble(t.Context(), Scope{})
			if err != nil {
				t.Fatal(err)
			}
			tools := asm.MCPTools()
			var names []string
			for _, m := range tools {
				names = append(names, m.Name)
			}
			want := map[Mode]string{ModeNative: "plain typed", ModeCode: "run_code", ModeBoth: "plain typed run_code"}[mode]
			if strings.Join(names, " ") != want {
				t.Fatalf("%s: tools %v, want %s", mode, names, want)
			}
			for i, m := range tools {
				w := asm.Tools[i]
				if m.Name == RunCode {
					if !strings.HasPrefix(m.Description, w.Description+"\n\n") || !strings.HasSuffix(m.Description, asm.Sections[0].Text) {
						t.Errorf("%s/%s: run_code description does not carry the SDK:\n%s", mode, lang, m.Description)
					}
					if !strings.Contains(m.Description, map[backend.Language]string{backend.TypeScript: "```ts", backend.Python: "```python"}[lang]) {
						t.Errorf("%s/%s: the SDK is not in %s", mode, lang, lang)
					}
					if string(m.InputSchema) != string(w.Parameters) || string(m.OutputSchema) != string(RunCodeOutputSchema) {
						t.Errorf("%s: run_code schemas %s %s", mode, m.InputSchema, m.OutputSchema)
					}
					continue
				}
				if m.Description != w.Description || string(m.InputSchema) != string(w.Parameters) || string(m.OutputSchema) != string(w.OutputSchema) || string(m.Annotations) != string(w.Annotations) {
					t.Errorf("%s: %+v from %+v", mode, m, w)
				}
			}
			b, err := json.Marshal(tools)
			if err != nil || !strings.Contains(string(b), `"inputSchema":`) || strings.Contains(string(b), `"parameters"`) {
				t.Errorf("JSON %s %v", b, err)
			}
		}
	}
}

// RunCodeOutputSchema is valid JSON and names every log source, level and
// failure kind there is; NewRunCodeOutput fills it.
func TestRunCodeOutput(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(RunCodeOutputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{
		string(backend.SourceConsole), string(backend.SourceStdout), string(backend.SourceStderr),
		string(backend.LevelLog), string(backend.LevelInfo), string(backend.LevelWarn), string(backend.LevelError), string(backend.LevelDebug),
		string(backend.FailureException), string(backend.FailureTimeout), string(backend.FailureAbort), string(backend.FailureOOM), string(backend.FailureExit),
	} {
		if !strings.Contains(string(RunCodeOutputSchema), `"`+v+`"`) {
			t.Errorf("the schema does not name %q", v)
		}
	}
	for _, c := range []struct {
		rr   backend.RunResult
		want string
	}{
		{backend.RunResult{}, `{"value":null,"logs":[],"error":null}`},
		{backend.RunResult{Value: json.RawMessage(`{"a":1}`), ValueKind: backend.ValueJSON, Logs: []backend.LogEntry{{Source: backend.SourceConsole, Level: backend.LevelLog, Text: "hi\n"}}},
			`{"value":{"a":1},"logs":[{"source":"console","level":"log","text":"hi\n"}],"error":null}`},
		{backend.RunResult{Value: json.RawMessage(`"Foo()"`), ValueKind: backend.ValueInspect}, `{"value":"Foo()","logs":[],"error":null}`},
		{backend.RunResult{Error: &backend.Failure{Kind: backend.FailureTimeout, Message: "wall"}}, `{"value":null,"logs":[],"error":{"kind":"timeout","message":"wall"}}`},
	} {
		b, err := json.Marshal(NewRunCodeOutput(&c.rr))
		if err != nil || string(b) != c.want {
			t.Errorf("got %s %v, want %s", b, err, c.want)
		}
	}
}
