package sdkgen_test

import (
	"fmt"
	"strings"

	"github.com/dsh-container/dsh-container/sdkgen"
)

func ExampleTypeScriptIndex() {
	tools := []sdkgen.Tool{
		{Name: "read_file", Description: "Read a text file. Binary files fail.",
			InputSchema: []byte(`{"type":"object","properties":{"path":{"type":"string"},"encoding":{"enum":["utf8","base64"]}},"required":["path"]}`)},
		{Name: "gh__get_issue", Source: "gh", Description: "Get an issue.",
			InputSchema: []byte(`{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"number":{"type":"integer"}},"required":["owner","repo","number"]}`)},
	}
	index := sdkgen.TypeScriptIndex(tools)
	fmt.Print(index[strings.Index(index, "```ts"):]) // after the usage instructions
	// Output:
	// ```ts
	// // host tools
	// tools["read_file"]({path, encoding?}) — Read a text file.
	//
	// // from MCP server "gh"
	// tools["gh__get_issue"]({owner, repo, number}) — Get an issue.
	// ```
	//
	// Before writing a program, call the `describe_tools` tool with `{"names": ["name", ...]}` naming every tool the program will call: it returns their full TypeScript declarations (argument and result types, documentation).
}

func ExampleSelect() {
	// What describe_tools returns for {"names": ["read_file"]}.
	selected, unknown := sdkgen.Select(exampleTools, []string{"read_file", "nope"})
	fmt.Printf("unknown: %q\n", unknown)
	fmt.Print(sdkgen.TypeScriptSource(selected))
	// Output:
	// unknown: ["nope"]
	// declare const tools: {
	//   /** Read a text file. */
	//   "read_file": (args: {
	//     /** Relative to the workspace. */
	//     path: string;
	//     encoding?: "utf8" | "base64";
	//   }) => Promise<string>;
	// };
}
