package sdkgen

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/internal/testenv"
)

// compileImageEnv names the image TestGoldenCompile runs the compilers in.
// It needs `tsc` and `python3` on its PATH, e.g. (Debian trixie's
// node-typescript is TypeScript 4.9, its python3 is 3.13, as in the
// runner images):
//
//	printf 'FROM dsh-probe-base:trixie\nRUN apt-get update && apt-get install -y --no-install-recommends node-typescript && rm -rf /var/lib/apt/lists/*\n' \
//	  | docker build -t dsh-sdkgen-check:dev -
//	DSH_SDKGEN_COMPILE_IMAGE=dsh-sdkgen-check:dev go test ./sdkgen -run TestGoldenCompile
const compileImageEnv = "DSH_SDKGEN_COMPILE_IMAGE"

// generatedSets is how many random tool sets (genTools, seeds 0..n-1)
// TestGoldenCompile checks besides the golden cases.
const generatedSets = 200

// TestGoldenCompile checks every golden case with the real compilers, in a
// container without network:
//   - each TypeScript source passes `tsc --noEmit --strict` (and, all made
//     modules, --exactOptionalPropertyTypes --noUncheckedIndexedAccess);
//   - correct calls type-check against the SDK and deliberately wrong calls
//     (unknown property, wrong type, missing property, bad enum value,
//     unknown tool, run_code, wrong result type) do not;
//   - every tool of the adversarial-names case is reachable under its
//     exact name, and the adversarial-keys record accepts its exact keys;
//   - the same holds for generatedSets random tool sets (genTools);
//   - each Python source compiles and executes under python3, the methods
//     of class Tools are exactly the expected ones, each carries its
//     description as docstring, each TypedDict argument has exactly the
//     schema's required and optional keys, and each return annotation is
//     str for a text result or the output schema's type (a TypedDict with
//     exactly its keys for a record);
//   - the declarations of subsets of each golden case (what describe_tools
//     returns: each tool alone and random subsets) pass the same checks,
//     each a module of its own;
//   - structured results (the output case) type-check where used as their
//     output schema says and fail where misused.
func TestGoldenCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: runs the compilers in containers")
	}
	testenv.UsesDaemon(t)
	image := os.Getenv(compileImageEnv)
	if image == "" {
		testenv.Missing(t, "%s is unset: set it to a Docker image with tsc and python3 to type-check the golden outputs (`make sdk-check-image` builds one, `make test` sets it; see compile_test.go)", compileImageEnv)
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatalf("%s is set but docker is not available: %v", compileImageEnv, err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := goldenCases(t)
	fixtures := map[string][]Tool{}
	for _, c := range cases {
		tools := loadFixture(t, filepath.Join(goldenDir, c, "tools.json"))
		fixtures[c] = tools
		writeFile(t, filepath.Join(dir, "ts", c+".ts"), TypeScriptSource(tools))
		writeFile(t, filepath.Join(dir, "ts-modules", c+".ts"), TypeScriptSource(tools)+"export {};\n")
		writeFile(t, filepath.Join(dir, "py", "case_"+c+".py"), PythonSource(tools))
		writeFile(t, filepath.Join(dir, "py", "case_"+c+".json"), string(mustJSON(t, pyExpectations(tools))))
	}
	// What describe_tools returns: the declarations of subsets of each
	// golden case (each tool alone, two random subsets), each made a
	// module so that it declares its own tools, checked like a full SDK.
	subsetRNG := rand.New(rand.NewSource(19))
	for _, c := range cases {
		for i, names := range subsets(fixtures[c], subsetRNG, 2) {
			sel, _ := Select(fixtures[c], names)
			name := fmt.Sprintf("subset_%s_%02d", strings.ReplaceAll(c, "-", "_"), i)
			writeFile(t, filepath.Join(dir, "ts-modules", name+".ts"), TypeScriptSource(sel)+"export {};\n")
			writeFile(t, filepath.Join(dir, "py", "case_"+name+".py"), PythonSource(sel))
			writeFile(t, filepath.Join(dir, "py", "case_"+name+".json"), string(mustJSON(t, pyExpectations(sel))))
		}
	}
	// Random schema-shaped tool sets, checked like the golden ones (the
	// TypeScript ones only in the combined run).
	for i := range generatedSets {
		tools := genTools(rand.New(rand.NewSource(int64(i))))
		name := fmt.Sprintf("generated_%03d", i)
		writeFile(t, filepath.Join(dir, "ts-modules", name+".ts"), TypeScriptSource(tools)+"export {};\n")
		writeFile(t, filepath.Join(dir, "py", "case_"+name+".py"), PythonSource(tools))
		writeFile(t, filepath.Join(dir, "py", "case_"+name+".json"), string(mustJSON(t, pyExpectations(tools))))
	}
	// Unions of many members, each the argument type of one tool: written
	// flat as Union[...], they compile whatever their length, where an
	// `A | B` chain would not (CPython 3.13 gives up near 10,000 members,
	// 3.9 near 5,000); check.py counts the alternatives CPython sees. The
	// TypeScript ones join the combined run up to 5,000 members.
	for _, u := range bigUnionCases() {
		tools := []Tool{{Name: "pick", Description: u.name, InputSchema: json.RawMessage(u.schema)}}
		name := "union_" + u.name
		if u.want <= 5000 {
			writeFile(t, filepath.Join(dir, "ts-modules", name+".ts"), TypeScriptSource(tools)+"export {};\n")
		}
		want := pyExpectations(tools)
		e := want["methods"]["pick"]
		e.Alternatives = &u.want
		want["methods"]["pick"] = e
		writeFile(t, filepath.Join(dir, "py", "case_"+name+".py"), PythonSource(tools))
		writeFile(t, filepath.Join(dir, "py", "case_"+name+".json"), string(mustJSON(t, want)))
	}
	writeFile(t, filepath.Join(dir, "py", "check.py"), pyCheckScript)
	writeCallChecks(t, filepath.Join(dir, "calls"), fixtures)

	t.Run("typescript", func(t *testing.T) {
		// Each file on its own, exactly as rendered (each declares the
		// global tools), as many at a time as there are CPUs.
		out, err := dockerRun(t, dir, image, `cd /w/ts && ls *.ts | xargs -P "$(nproc)" -n 1 tsc --noEmit --strict`)
		if err != nil {
			t.Errorf("tsc --noEmit --strict rejected a golden source: %v\n%s", err, out)
		}
		// All at once, each made a module, under stricter options.
		out, err = dockerRun(t, dir, image, `cd /w/ts-modules && tsc --noEmit --strict --exactOptionalPropertyTypes --noUncheckedIndexedAccess *.ts`)
		if err != nil {
			t.Errorf("tsc --exactOptionalPropertyTypes rejected a golden source: %v\n%s", err, out)
		}
	})

	t.Run("calls", func(t *testing.T) {
		// One tsc run per group: sdk.ts, the ok*.ts files and the
		// wrong*.ts files (all modules) are checked together and each
		// diagnostic names its file.
		groups, err := os.ReadDir(filepath.Join(dir, "calls"))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			out, _ := dockerRun(t, dir, image, "cd /w/calls/"+g.Name()+
				" && tsc --noEmit --strict --target es2020 --lib es2020,dom sdk.ts ok*.ts wrong*.ts; echo \"=== rc $?\"")
			if !strings.Contains(out, "=== rc ") {
				t.Fatalf("%s: tsc did not run:\n%s", g.Name(), out)
			}
			files, err := os.ReadDir(filepath.Join(dir, "calls", g.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				var diags []string
				for _, l := range strings.Split(out, "\n") {
					if strings.HasPrefix(l, f.Name()+"(") && strings.Contains(l, "error TS") {
						diags = append(diags, l)
					}
				}
				switch wrong := strings.HasPrefix(f.Name(), "wrong"); {
				case !wrong && len(diags) > 0:
					t.Errorf("%s/%s must type-check:\n%s", g.Name(), f.Name(), strings.Join(diags, "\n"))
				case wrong && len(diags) == 0:
					t.Errorf("%s/%s type-checks but must not:\n%s", g.Name(), f.Name(), out)
				case wrong:
					t.Logf("%s/%s rejected: %s", g.Name(), f.Name(), diags[0])
				}
			}
		}
	})

	t.Run("python", func(t *testing.T) {
		out, err := dockerRun(t, dir, image, "python3 -I -X dev -W error /w/py/check.py /w/py")
		if err != nil {
			t.Errorf("python check failed: %v\n%s", err, out)
		} else {
			t.Logf("%d files ok under Python %s", countPrefix(out, "ok "), lastLine(out))
		}
	})
}

// dockerRunTimeout bounds one dockerRun.
var dockerRunTimeout = 5 * time.Minute

// dockerRun runs a shell script in a throwaway container with dir mounted
// read-only at /w and no network; after dockerRunTimeout the container
// is removed and the run fails.
func dockerRun(t *testing.T, dir, image, script string) (string, error) {
	t.Helper()
	var id [8]byte
	_, _ = crand.Read(id[:])
	return dockerRunNamed(t, dir, image, script, "dsh-sdkgen-check-"+hex.EncodeToString(id[:]))
}

// dockerRunNamed is dockerRun with the container's name.
func dockerRunNamed(t *testing.T, dir, image, script, name string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dockerRunTimeout)
	defer cancel()
	// Named, so that a timeout removes the container: killing the docker
	// client alone would leave it running.
	cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "--name", name, "--network", "none",
		"-v", dir+":/w:ro", image, "sh", "-c", script)
	cmd.Cancel = func() error {
		rm, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = exec.CommandContext(rm, "docker", "rm", "-f", name).Run()
		return cmd.Process.Kill()
	}
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

func countPrefix(s, prefix string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeCallChecks writes one folder per check group: sdk.ts (a golden
// source) plus ok*.ts files that must type-check against it and wrong*.ts
// files that must not.
func writeCallChecks(t *testing.T, dir string, fixtures map[string][]Tool) {
	t.Helper()
	basic := filepath.Join(dir, "basic")
	writeFile(t, filepath.Join(basic, "sdk.ts"), TypeScriptSource(fixtures["basic"]))
	writeFile(t, filepath.Join(basic, "ok.ts"), `export async function program(): Promise<unknown> {
  const text: string = await tools["read_file"]({ path: "a.txt" });
  await tools["read_file"]({ path: "a.txt", offset: 1, limit: 10 });
  await tools["write_file"]({ path: "b.txt", content: text.toUpperCase(), mode: "append" });
  const [x, y] = await Promise.all([
    tools["search"]({ pattern: "x", paths: ["a", "b"], options: { ignoreCase: true, maxResults: null } }),
    tools["search"]({ pattern: "y", options: { maxResults: 3 } }),
  ]);
  try {
    await tools["read_file"]({ path: "missing" });
  } catch (err) {
    console.log((err as Error & { toolName: string }).toolName);
  }
  return x.length + y.length;
}
`)
	wrong := map[string]string{
		"wrong_prop.ts":     `tools["read_file"]({ path: "a.txt", wrongProp: 1 });`,
		"wrong_type.ts":     `tools["read_file"]({ path: 1 });`,
		"wrong_missing.ts":  `tools["write_file"]({ path: "b.txt" });`,
		"wrong_enum.ts":     `tools["write_file"]({ path: "b.txt", content: "", mode: "truncate" });`,
		"wrong_nested.ts":   `tools["search"]({ pattern: "x", options: { ignoreCase: "yes" } });`,
		"wrong_closed.ts":   `tools["write_file"]({ path: "b.txt", content: "", extra: true });`,
		"wrong_name.ts":     `tools["no_such_tool"]({});`,
		"wrong_reserved.ts": `tools["run_code"]({ code: "return 1" });`,
		"wrong_result.ts":   `const n: Promise<number> = tools["search"]({ pattern: "x" });`,
		"wrong_args.ts":     `tools["read_file"]();`,
	}
	for f, body := range wrong {
		writeFile(t, filepath.Join(basic, f), "export {};\n"+body+"\n")
	}

	// Structured results: each call resolves to the type its output schema
	// describes, and misuse of that type does not type-check.
	output := filepath.Join(dir, "output")
	writeFile(t, filepath.Join(output, "sdk.ts"), TypeScriptSource(fixtures["output"]))
	writeFile(t, filepath.Join(output, "ok.ts"), `export async function program(): Promise<unknown> {
  const r = await tools["count_words"]({ text: "a b" });
  const n: number = r.count;
  const w: string[] = r.words;
  const l: string | null | undefined = r.longest;
  const issues = await tools["list-issues"]({});
  const titles: string[] = issues.map((i) => i.title + i.id.toFixed(0));
  const weather = await tools["weather"]({ city: "Oslo" });
  const unit: "C" | "F" = weather.unit;
  const speed: number = weather.wind.speed;
  const hits: { [key: string]: number } = await tools["search"]({ q: "x" });
  const anything: unknown = await tools["opaque"]({});
  const text: string = await tools["plain_text"]({});
  return [n, w, l, titles, unit, speed, hits, anything, text];
}
`)
	outputWrong := map[string]string{
		"wrong_string.ts":   `const s: Promise<string> = tools["count_words"]({ text: "a" });`,
		"wrong_field.ts":    `tools["count_words"]({ text: "a" }).then((r) => r.total);`,
		"wrong_type.ts":     `tools["count_words"]({ text: "a" }).then((r) => { const s: string = r.count; return s; });`,
		"wrong_closed.ts":   `tools["weather"]({ city: "a" }).then((r) => r.humidity);`,
		"wrong_nested.ts":   `tools["weather"]({ city: "a" }).then((r) => { const s: string = r.wind.speed; return s; });`,
		"wrong_enum.ts":     `tools["weather"]({ city: "a" }).then((r) => { const u: "K" = r.unit; return u; });`,
		"wrong_array.ts":    `tools["list-issues"]({}).then((r) => r.title);`,
		"wrong_map.ts":      `tools["search"]({ q: "x" }).then((r) => { const s: string = r["a"]; return s; });`,
		"wrong_unknown.ts":  `tools["opaque"]({}).then((r) => r.anything);`,
		"wrong_textcall.ts": `tools["plain_text"]({}).then((r) => r.count);`,
	}
	for f, body := range outputWrong {
		writeFile(t, filepath.Join(output, f), "export {};\n"+body+"\n")
	}

	// Every adversarial name is reachable as written.
	names := filepath.Join(dir, "names")
	writeFile(t, filepath.Join(names, "sdk.ts"), TypeScriptSource(fixtures["names"]))
	var calls strings.Builder
	calls.WriteString("export {};\n")
	for i, tool := range visible(fixtures["names"]) {
		fmt.Fprintf(&calls, "const c%d: Promise<string> = tools[%s]({});\n", i, quoteTS(tool.Name))
	}
	writeFile(t, filepath.Join(names, "ok.ts"), calls.String())
	writeFile(t, filepath.Join(names, "wrong_alias.ts"), "export {};\ntools[\"my_tool\"]({});\n")

	// The adversarial keys are accepted exactly as written, and a near miss
	// is not.
	keys := filepath.Join(dir, "keys")
	writeFile(t, filepath.Join(keys, "sdk.ts"), TypeScriptSource(fixtures["keys"]))
	var tool Tool
	for _, tl := range fixtures["keys"] {
		if tl.Name == "adversarial_keys" {
			tool = tl
		}
	}
	var obj strings.Builder
	for _, f := range buildShape(parseJSON(tool.InputSchema), 0).fields {
		fmt.Fprintf(&obj, "  [%s]: \"v\",\n", quoteTS(f.key))
	}
	writeFile(t, filepath.Join(keys, "ok.ts"), "export {};\ntools[\"adversarial_keys\"]({\n"+obj.String()+"});\n")
	writeFile(t, filepath.Join(keys, "wrong_key.ts"), "export {};\ntools[\"adversarial_keys\"]({\n"+
		strings.Replace(obj.String(), `["a.b"]`, `["a_b"]`, 1)+"});\n")
}

// pyExpectation is what check.py verifies for one method of class Tools.
type pyExpectation struct {
	Doc      *string  `json:"doc"`      // the docstring as written (compared after inspect.cleandoc)
	Required []string `json:"required"` // nil: the argument is not a TypedDict
	Optional []string `json:"optional"`
	// Alternatives, when set, is how many alternatives the argument's
	// union type has (typing.get_args).
	Alternatives *int `json:"alternatives,omitempty"`
	// Return is what the return annotation must be.
	Return pyReturn `json:"return"`
}

// pyReturn is a method's expected return annotation: "str" for a tool
// without an output schema (or with one of type string); for one with an
// output schema whose shape is a record, "typeddict" with its required and
// optional keys; "other" for any other declared shape (checked to be
// neither str nor missing).
type pyReturn struct {
	Kind     string   `json:"kind"`
	Required []string `json:"required,omitempty"`
	Optional []string `json:"optional,omitempty"`
}

// recordKeys splits a record shape's keys into required and optional.
func recordKeys(s *shape) (required, optional []string) {
	required, optional = []string{}, []string{}
	for _, f := range s.fields {
		if f.required {
			required = append(required, f.key)
		} else {
			optional = append(optional, f.key)
		}
	}
	return required, optional
}

// bigUnion is a long union TestGoldenCompile checks, with the number of
// distinct alternatives CPython must see.
type bigUnion struct {
	name   string
	schema string
	want   int
}

func bigUnionCases() []bigUnion {
	return []bigUnion{
		{"5000_to_5", duplicateUnion(5000), 5},
		{"5000_records", distinctRecordUnion(5000), 5000},
		{"5000_lists", distinctListUnion(5000), 5000},
		{"5000_nested", nestedUnion(5000), 5000},
		{"20000_lists", distinctListUnion(20000), 20000},
		{"chains_15_deep", deepChains(15), maxChainedUnion},
	}
}

// pyExpectations lists, per method of class Tools, its docstring and, when
// its argument is a record, the keys that record must have.
func pyExpectations(tools []Tool) map[string]map[string]pyExpectation {
	methods := map[string]pyExpectation{}
	for _, t := range visible(tools) {
		if !pyMethodName(t.Name) {
			continue
		}
		var e pyExpectation
		if lines := docLines(t.Description); len(lines) > 0 {
			doc := lines[0]
			if len(lines) > 1 {
				doc += "\n" + strings.Join(lines[1:], "\n") + "\n"
			}
			e.Doc = &doc
		}
		if s := buildShape(parseJSON(t.InputSchema), 0); s.kind == kObject && len(s.fields) > 0 {
			e.Required, e.Optional = recordKeys(s)
		}
		e.Return.Kind = "str"
		if t.hasOutput() {
			switch s := buildShape(parseJSON(t.OutputSchema), 0); {
			case s.kind == kObject && len(s.fields) > 0:
				e.Return.Kind = "typeddict"
				e.Return.Required, e.Return.Optional = recordKeys(s)
			case s.kind != kString: // an output schema of type string is str too
				e.Return.Kind = "other"
			}
		}
		methods[t.Name] = e
	}
	return map[string]map[string]pyExpectation{"methods": methods}
}

const pyCheckScript = `import inspect, json, os, sys, typing

def main(d):
    failures = 0
    for name in sorted(os.listdir(d)):
        if not name.startswith("case_") or not name.endswith(".py"):
            continue
        path = os.path.join(d, name)
        with open(path, encoding="utf-8") as f:
            src = f.read()
        with open(path[:-3] + ".json", encoding="utf-8") as f:
            want = json.load(f)["methods"]
        problems = []
        try:
            ns = {"__name__": "sdk_" + name[:-3]}
            exec(compile(src, path, "exec"), ns)
        except BaseException as e:
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
            failures += 1
            continue
        tools_cls = ns["Tools"]
        got = {k: v for k, v in vars(tools_cls).items() if inspect.iscoroutinefunction(v)}
        if sorted(got) != sorted(want):
            problems.append("methods %r, want %r" % (sorted(got), sorted(want)))
        for m, w in want.items():
            f = got.get(m)
            if f is None:
                continue
            doc = f.__doc__
            if (doc is None) != (w["doc"] is None) or doc is not None and inspect.cleandoc(doc) != inspect.cleandoc(w["doc"]):
                problems.append("%s: docstring %r, want %r" % (m, doc, w["doc"]))
            args = f.__annotations__["args"]
            if w["required"] is not None:
                if not typing.is_typeddict(args):
                    problems.append("%s: args %r is not a TypedDict" % (m, args))
                elif set(args.__required_keys__) != set(w["required"]) or set(args.__optional_keys__) != set(w["optional"]):
                    problems.append("%s: keys %r / %r, want %r / %r" % (m, sorted(args.__required_keys__), sorted(args.__optional_keys__), w["required"], w["optional"]))
            if w.get("alternatives") is not None and len(typing.get_args(args)) != w["alternatives"]:
                problems.append("%s: %d alternatives, want %d" % (m, len(typing.get_args(args)), w["alternatives"]))
            ret, wr = f.__annotations__.get("return", "missing"), w["return"]
            if wr["kind"] == "str" and ret is not str:
                problems.append("%s: return annotation %r, want str" % (m, ret))
            elif wr["kind"] == "typeddict":
                if not typing.is_typeddict(ret):
                    problems.append("%s: return %r is not a TypedDict" % (m, ret))
                elif set(ret.__required_keys__) != set(wr.get("required", [])) or set(ret.__optional_keys__) != set(wr.get("optional", [])):
                    problems.append("%s: return keys %r / %r, want %r / %r" % (m, sorted(ret.__required_keys__), sorted(ret.__optional_keys__), wr.get("required"), wr.get("optional")))
            elif wr["kind"] == "other" and (ret is str or ret == "missing"):
                problems.append("%s: return annotation %r for a tool with an output schema" % (m, ret))
        err = ns["ToolCallError"]
        if not issubclass(err, Exception) or err.__annotations__.get("tool_name") is not str:
            problems.append("ToolCallError stub")
        if ns["__annotations__"].get("tools") is not tools_cls:
            problems.append("tools: Tools annotation")
        for p in problems:
            print("FAIL %s: %s" % (name, p))
        failures += len(problems)
        if not problems:
            print("ok %s (%d methods)" % (name, len(got)))
    print(sys.version.split()[0])
    return failures

sys.exit(1 if main(sys.argv[1]) else 0)
`

// TestDockerRunTimeout checks that a compiler run past its time is
// stopped and its container removed, not left running.
func TestDockerRunTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: runs a container")
	}
	testenv.UsesDaemon(t)
	image := os.Getenv(compileImageEnv)
	if image == "" {
		testenv.Missing(t, "%s is unset: set it to the compiler image (`make sdk-check-image`)", compileImageEnv)
	}
	defer func(d time.Duration) { dockerRunTimeout = d }(dockerRunTimeout)
	dockerRunTimeout = 3 * time.Second
	name := fmt.Sprintf("dsh-sdkgen-check-timeout-%d", time.Now().UnixNano())
	start := time.Now()
	if _, err := dockerRunNamed(t, t.TempDir(), image, "sleep 300", name); err == nil {
		t.Fatal("a run past its time succeeded")
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("the run took %v to stop", d)
	}
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "name=^"+name+"$").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		exec.Command("docker", "rm", "-f", name).Run()
		t.Errorf("the container is left behind: %q %v", out, err)
	}
}
