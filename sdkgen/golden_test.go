package sdkgen

import (
	"bytes"
	"encoding/json"
	"flag"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenDir holds one folder per case: tools.json (the input) and the
// expected outputs named in goldenOutputs.
const goldenDir = "testdata/golden"

// goldenOutputs maps each expected-output file to its renderer.
var goldenOutputs = []struct {
	file   string
	render func([]Tool) string
}{
	{"source.ts", TypeScriptSource},
	{"prompt-ts.md", TypeScriptPrompt},
	{"source.py", PythonSource},
	{"prompt-py.md", PythonPrompt},
	{"index-ts.md", TypeScriptIndex},
	{"index-py.md", PythonIndex},
}

// fixtureTool is one entry of a tools.json file. inputSchemaText and
// outputSchemaText, when set, are used verbatim as the schema bytes, for
// inputs that are not JSON.
type fixtureTool struct {
	Name             string          `json:"name"`
	Description      string          `json:"description"`
	InputSchema      json.RawMessage `json:"inputSchema"`
	InputSchemaText  *string         `json:"inputSchemaText"`
	OutputSchema     json.RawMessage `json:"outputSchema"`
	OutputSchemaText *string         `json:"outputSchemaText"`
	Source           string          `json:"source"`
}

func loadFixture(t testing.TB, path string) []Tool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fts []fixtureTool
	if err := json.Unmarshal(data, &fts); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tools := make([]Tool, len(fts))
	for i, ft := range fts {
		tools[i] = Tool{Name: ft.Name, Description: ft.Description, InputSchema: ft.InputSchema, OutputSchema: ft.OutputSchema, Source: ft.Source}
		if ft.InputSchemaText != nil {
			tools[i].InputSchema = json.RawMessage(*ft.InputSchemaText)
		}
		if ft.OutputSchemaText != nil {
			tools[i].OutputSchema = json.RawMessage(*ft.OutputSchemaText)
		}
	}
	return tools
}

// goldenCases returns the case folders, sorted.
func goldenCases(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	var cases []string
	for _, e := range entries {
		if e.IsDir() {
			cases = append(cases, e.Name())
		}
	}
	if len(cases) == 0 {
		t.Fatal("no golden cases")
	}
	return cases
}

// TestGolden renders every case in testdata/golden and compares the four
// outputs with the files there (go test -run TestGolden -update rewrites
// them). It also checks each output structurally and that the output does
// not depend on the order of the input.
func TestGolden(t *testing.T) {
	for _, name := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(goldenDir, name)
			tools := loadFixture(t, filepath.Join(dir, "tools.json"))
			for _, out := range goldenOutputs {
				got := out.render(tools)
				path := filepath.Join(dir, out.file)
				if *update {
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./sdkgen -run TestGolden -update)", err)
				}
				if got != string(want) {
					t.Errorf("%s differs from the golden file; diff:\n%s", out.file, lineDiff(string(want), got))
				}
			}
			if err := checkTS(TypeScriptSource(tools)); err != nil {
				t.Errorf("source.ts: %v", err)
			}
			if err := checkPython(PythonSource(tools)); err != nil {
				t.Errorf("source.py: %v", err)
			}
		})
	}
}

// TestDeterminism renders every golden case from shuffled inputs and
// checks the outputs are byte-identical, and that rendering does not
// modify its input.
func TestDeterminism(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, name := range goldenCases(t) {
		tools := loadFixture(t, filepath.Join(goldenDir, name, "tools.json"))
		for _, out := range goldenOutputs {
			want := out.render(tools)
			for range 5 {
				shuffled := slices.Clone(tools)
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				before := slices.Clone(shuffled)
				if got := out.render(shuffled); got != want {
					t.Errorf("%s/%s: output depends on input order:\n%s", name, out.file, lineDiff(want, got))
				}
				if !slices.EqualFunc(before, shuffled, toolEqual) {
					t.Errorf("%s/%s: renderer modified its input", name, out.file)
				}
			}
		}
	}
}

func toolEqual(a, b Tool) bool {
	return a.Name == b.Name && a.Description == b.Description && bytes.Equal(a.InputSchema, b.InputSchema) &&
		bytes.Equal(a.OutputSchema, b.OutputSchema) && a.Source == b.Source
}

// lineDiff returns the first differing lines of want and got, with a
// little context: enough to see what changed without a diff library.
func lineDiff(want, got string) string {
	wl, gl := bytes.Split([]byte(want), []byte("\n")), bytes.Split([]byte(got), []byte("\n"))
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g []byte
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if !bytes.Equal(w, g) || (i >= len(wl)) != (i >= len(gl)) {
			return "line " + strconv.Itoa(i+1) + ":\n- " + string(w) + "\n+ " + string(g)
		}
	}
	return "(no line differs)"
}
