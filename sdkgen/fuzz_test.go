package sdkgen

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzTypeScript renders arbitrary names, descriptions and schemas: the
// renderer must not panic, its output must pass the structural checks and
// must not depend on input order, and neither it nor the index may hold a
// character that hides or reorders text (hiddenIn).
func FuzzTypeScript(f *testing.F) {
	fuzzRenderer(f, TypeScriptSource, TypeScriptIndex, checkTS)
}

// FuzzPython is FuzzTypeScript for the Python stubs.
func FuzzPython(f *testing.F) {
	fuzzRenderer(f, PythonSource, PythonIndex, checkPython)
}

func fuzzRenderer(f *testing.F, render, index func([]Tool) string, check func(string) error) {
	for _, c := range goldenCases(f) {
		for _, t := range loadFixture(f, filepath.Join(goldenDir, c, "tools.json")) {
			f.Add(t.Name, t.Description, []byte(t.InputSchema), "other", []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`))
		}
	}
	f.Add("\xff\xfe", "\xff*/\n@x", []byte("{\"properties\":{\"\xff\":{}}}"), "\xff\xfd", []byte(`[`))
	f.Add("rlo\u202e", "bidi \u2066isolate\u2069 \u200f\U000E0041", []byte(`{"properties":{"k\u202e":{"description":"\u202e","enum":["\u2067"]}}}`), "\u061c", []byte(`{"const":"\u200e"}`))
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
		for _, text := range []string{out, index(tools)} {
			if h, at, ok := hiddenIn(text); ok {
				t.Fatalf("%U at byte %d of\n%s", h, at, text)
			}
		}
		reversed := []Tool{tools[3], tools[2], tools[1], tools[0]}
		if again := render(reversed); again != out {
			t.Fatalf("output depends on input order:\n%s", lineDiff(out, again))
		}
	})
}
