package sdkgen

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzTypeScript renders arbitrary names, descriptions and schemas: the
// renderer must not panic, its output must pass the structural checks and
// must not depend on input order.
func FuzzTypeScript(f *testing.F) {
	fuzzRenderer(f, TypeScriptSource, checkTS)
}

// FuzzPython is FuzzTypeScript for the Python stubs.
func FuzzPython(f *testing.F) {
	fuzzRenderer(f, PythonSource, checkPython)
}

func fuzzRenderer(f *testing.F, render func([]Tool) string, check func(string) error) {
	for _, c := range goldenCases(f) {
		for _, t := range loadFixture(f, filepath.Join(goldenDir, c, "tools.json")) {
			f.Add(t.Name, t.Description, []byte(t.InputSchema), "other", []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`))
		}
	}
	f.Add("\xff\xfe", "\xff*/\n@x", []byte("{\"properties\":{\"\xff\":{}}}"), "\xff\xfd", []byte(`[`))
	f.Fuzz(func(t *testing.T, name, desc string, schema []byte, name2 string, schema2 []byte) {
		tools := []Tool{
			{Name: name, Description: desc, InputSchema: schema},
			{Name: name2, Description: desc, InputSchema: schema2, OutputSchema: schema},
			{Name: name + "2", Description: name2, InputSchema: schema2},
			{Name: strings.ToUpper(name), Description: "", InputSchema: schema, OutputSchema: schema2},
		}
		out := render(tools)
		if err := check(out); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		reversed := []Tool{tools[3], tools[2], tools[1], tools[0]}
		if again := render(reversed); again != out {
			t.Fatalf("output depends on input order:\n%s", lineDiff(out, again))
		}
	})
}
