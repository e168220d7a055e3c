package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/internal/testenv"
	"github.com/dsh-container/dsh-container/mcp"
	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/sdkgen"
)

// Progressive disclosure end to end, in both languages, over MCP on the
// real container runtime: tools/list offers run_code with the SDK index
// and describe_tools; the client asks describe_tools for the declarations
// of two tools, gets exactly what the full SDK declares for them, writes
// a program against them (for TypeScript, type-checked against the
// returned declarations when the compiler image is there) and runs it,
// calling those tools; the program cannot reach describe_tools itself.

// disclosureTools are a host tool and two tools of an upstream "gh".
func disclosureTools() []registry.Tool {
	issue := registry.Tool{
		Name: "gh__get_issue", Source: "gh",
		Description: "Get an issue of a repository. Returns its title and state.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"owner":{"type":"string","description":"Repository owner."},` +
			`"repo":{"type":"string"},"number":{"type":"integer"}},"required":["owner","repo","number"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"state":{"enum":["open","closed"]}},"required":["title","state"]}`),
		ExecuteOutput: func(_ context.Context, exec registry.Execution) (registry.Output, error) {
			var a struct {
				Owner, Repo string
				Number      int
			}
			if err := json.Unmarshal(exec.Arguments, &a); err != nil {
				return registry.Output{}, err
			}
			v, _ := json.Marshal(map[string]any{"title": a.Owner + "/" + a.Repo + "#" + itoa(a.Number), "state": "open"})
			return registry.Output{Content: []registry.Block{registry.TextBlock(string(v))}, Structured: v}, nil
		},
	}
	other := textTool("gh__list_issues", func(map[string]any) (string, error) { return "never called", nil })
	other.Source, other.Description = "gh", "List the issues of a repository."
	shout := textTool("shout", func(a map[string]any) (string, error) { return strings.ToUpper(a["text"].(string)) + "!", nil })
	shout.Description = "Shout a text back."
	shout.Parameters = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)
	return []registry.Tool{issue, other, shout}
}

func TestDisclosureDescribeThenCall(t *testing.T) {
	programs := map[backend.Language]string{
		backend.TypeScript: `
const issue = await tools["gh__get_issue"]({ owner: "acme", repo: "rocket", number: 7 });
const loud: string = await tools["shout"]({ text: issue.title });
return { loud, state: issue.state, describe: typeof (tools as any)["describe_tools"] };`,
		backend.Python: `
issue = await tools["gh__get_issue"]({"owner": "acme", "repo": "rocket", "number": 7})
loud = await tools.shout({"text": issue["title"]})
try:
    tools["describe_tools"]
    describe = "reachable"
except KeyError:
    describe = "undefined"
return {"loud": loud, "state": issue["state"], "describe": describe}`,
	}
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			srv, err := mcp.New(mcp.WithRuntime(e.rt), mcp.WithTools(disclosureTools()...), mcp.WithSDK(registry.SDKIndex), mcp.WithLogger(testLogger(t)))
			if err != nil {
				t.Fatal(err)
			}
			st, ct := sdk.NewInMemoryTransports()
			ss, err := srv.MCPServer().Connect(t.Context(), st, nil)
			if err != nil {
				t.Fatal(err)
			}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e"}, nil).Connect(t.Context(), ct, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				cs.Close()
				ss.Wait()
				srv.Close()
			})

			list, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			var runCodeDesc string
			for _, tool := range list.Tools {
				names = append(names, tool.Name)
				if tool.Name == registry.RunCode {
					runCodeDesc = tool.Description
				}
			}
			if strings.Join(names, " ") != "describe_tools run_code" {
				t.Fatalf("tools/list = %q", names)
			}
			for _, line := range []string{
				"// host tools\ntools[\"shout\"]({text}) — Shout a text back.\n",
				"// from MCP server \"gh\"\ntools[\"gh__get_issue\"]({owner, repo, number}) — Get an issue of a repository.\ntools[\"gh__list_issues\"]({...}) — List the issues of a repository.\n",
			} {
				if lang == backend.Python {
					line = strings.ReplaceAll(line, "// ", "# ")
				}
				if !strings.Contains(runCodeDesc, line) {
					t.Errorf("run_code's description lacks %q:\n%s", line, runCodeDesc)
				}
			}
			if strings.Contains(runCodeDesc, "Repository owner.") {
				t.Error("the index carries a parameter's documentation")
			}

			// The declarations of two tools: exactly the full SDK's.
			res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: registry.DescribeTools, Arguments: map[string]any{"names": []string{"shout", "gh__get_issue"}}})
			if err != nil || res.IsError {
				t.Fatalf("describe_tools: %v %+v", err, res)
			}
			decls := res.Content[0].(*sdk.TextContent).Text
			all := make([]sdkgen.Tool, 0, 3)
			for _, rt := range disclosureTools() {
				all = append(all, sdkgen.Tool{Name: rt.Name, Description: rt.Description, InputSchema: rt.Parameters, OutputSchema: rt.OutputSchema, Source: rt.Source})
			}
			sel, _ := sdkgen.Select(all, []string{"gh__get_issue", "shout"})
			want, _ := sdkgen.Render(sdkgen.Language(lang), sdkgen.FormatSource, sel)
			if decls != want {
				t.Errorf("describe_tools returned:\n%s\nwant:\n%s", decls, want)
			}
			full, _ := sdkgen.Render(sdkgen.Language(lang), sdkgen.FormatSource, all)
			for _, piece := range []string{"\"gh__get_issue\": (args: {", "/** Repository owner. */", "state: \"open\" | \"closed\";", "class GhGetIssueOutput(TypedDict):", "async def shout(self, args: ShoutArgs) -> str:"} {
				if strings.Contains(full, piece) && !strings.Contains(decls, piece) {
					t.Errorf("the declarations lack %q", piece)
				}
			}
			if strings.Contains(decls, "gh__list_issues") {
				t.Error("the declarations carry a tool nobody asked for")
			}
			if lang == backend.TypeScript {
				t.Run("typecheck", func(t *testing.T) { typecheckProgram(t, decls, programs[lang]) })
			}

			// The program calls the tools it was told about.
			res, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: registry.RunCode, Arguments: map[string]any{"code": programs[lang]}})
			if err != nil || res.IsError {
				t.Fatalf("run_code: %v %s", err, res.Content[0].(*sdk.TextContent).Text)
			}
			var out struct {
				Value struct{ Loud, State, Describe string }
			}
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			if out.Value.Loud != "ACME/ROCKET#7!" || out.Value.State != "open" || out.Value.Describe != "undefined" {
				t.Errorf("the program returned %s", b)
			}
		})
	}
}

// typecheckProgram type-checks program, as the body of an async function,
// against decls with tsc --strict in the compiler image sdkgen's tests use.
func typecheckProgram(t *testing.T, decls, program string) {
	image := os.Getenv("DSH_SDKGEN_COMPILE_IMAGE")
	if image == "" {
		testenv.Missing(t, "DSH_SDKGEN_COMPILE_IMAGE is unset: set it to the compiler image (`make sdk-check-image`) to type-check the program against the declarations")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := decls + "async function program() {\n" + program + "\n}\nexport {};\n"
	if err := os.WriteFile(filepath.Join(dir, "program.ts"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", "-v", dir+":/w:ro", image,
		"tsc", "--noEmit", "--strict", "--target", "es2020", "--lib", "es2020", "/w/program.ts").CombinedOutput()
	if err != nil {
		t.Errorf("the program does not type-check against the declarations describe_tools returned: %v\n%s\n%s", err, out, src)
	}
}
