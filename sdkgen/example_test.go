package sdkgen_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dsh-container/dsh-container/sdkgen"
)

var exampleTools = []sdkgen.Tool{
	{
		Name:        "read_file",
		Description: "Read a text file.",
		InputSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"path": {"type": "string", "description": "Relative to the workspace."},
				"encoding": {"enum": ["utf8", "base64"]}
			},
			"required": ["path"]
		}`),
	},
	{
		Name:        "my-tool",
		Description: "A name that is not an identifier.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}}`),
	},
	{Name: sdkgen.ReservedTool, Description: "Never shown."},
}

func ExampleTypeScriptSource() {
	fmt.Print(sdkgen.TypeScriptSource(exampleTools))
	// Output:
	// declare const tools: {
	//   /** A name that is not an identifier. */
	//   "my-tool": (args: {
	//     tags?: string[];
	//   }) => Promise<string>;
	//   /** Read a text file. */
	//   "read_file": (args: {
	//     /** Relative to the workspace. */
	//     path: string;
	//     encoding?: "utf8" | "base64";
	//   }) => Promise<string>;
	// };
}

func ExamplePythonSource() {
	fmt.Print(sdkgen.PythonSource(exampleTools))
	// Output:
	// from typing import Any, Literal, NotRequired, TypedDict, Union
	//
	// class ToolCallError(Exception):
	//     """Raised when a tool call fails; tool_name names the tool."""
	//
	//     tool_name: str
	//
	// class MyToolArgs(TypedDict):
	//     tags: NotRequired[list[str]]
	//
	// class ReadFileArgs(TypedDict):
	//     # Relative to the workspace.
	//     path: str
	//     encoding: NotRequired[Literal["utf8", "base64"]]
	//
	// class Tools:
	//     # tools["my-tool"](args: MyToolArgs) -> str
	//     #     A name that is not an identifier.
	//
	//     async def read_file(self, args: ReadFileArgs) -> str:
	//         """Read a text file."""
	//         ...
	//
	// tools: Tools
}

func ExampleTypeScriptPrompt() {
	fmt.Print(sdkgen.TypeScriptPrompt(exampleTools[:1]))
	// Output:
	// The tools below are available to programs you run with the `run_code` tool: pass the program as its `code` argument. Only what the program returns or logs comes back to you.
	//
	// How to write the program:
	// - Write the body of an async function in erasable TypeScript: type annotations are fine, but no syntax that needs more than removing types (no `enum`, `namespace`, parameter properties or decorators). Top-level `await` and `return` work.
	// - Call a tool with `await tools["name"](args)`, quoting the name exactly as declared below. A call resolves to the tool's text output as a string.
	// - A failed tool call rejects with an `Error` whose `toolName` property names the tool. Catch it with `try`/`catch` when the program should go on after a failure.
	// - Tool calls run one at a time, in the order they are made, even under `Promise.all`.
	// - The types are advisory: they are stripped before the program runs, and nothing checks arguments against them but the tools themselves.
	// - Return or `console.log` only what you need to see. Intermediate results the program does not output never re-enter the conversation.
	//
	// The `tools` object:
	//
	// ```ts
	// declare const tools: {
	//   /** Read a text file. */
	//   "read_file": (args: {
	//     /** Relative to the workspace. */
	//     path: string;
	//     encoding?: "utf8" | "base64";
	//   }) => Promise<string>;
	// };
	// ```
}

func ExamplePythonPrompt() {
	fmt.Print(sdkgen.PythonPrompt(nil))
	// Output:
	// The tools below are available to programs you run with the `run_code` tool: pass the program as its `code` argument. Only what the program returns or prints comes back to you.
	//
	// How to write the program:
	// - Write the body of an async function in Python 3. Top-level `await` and `return` work.
	// - Call a tool with `await tools.name(args)` for a method declared below, or with `await tools["name"](args)` for any tool; a tool listed only as a comment must be called the second way. A call returns the tool's text output as a `str`.
	// - The declarations below are static stubs, for reading only. When the program runs, the only names bound apart from Python's builtins and the modules you import are `tools` and `ToolCallError`: the other classes declared below (`Tools` and the `TypedDict` classes, such as the `...Args` ones) do not exist, nor do the `typing` names unless you import them.
	// - Pass arguments as plain `dict` and `list` values, such as `{"path": "notes.txt"}`; do not construct the `TypedDict` classes.
	// - A failed tool call raises `ToolCallError`, whose `tool_name` attribute names the tool. Catch it with `try`/`except` when the program should go on after a failure.
	// - Tool calls run one at a time, in the order they are made, even under `asyncio.gather`.
	// - Return or `print` only what you need to see. Intermediate results the program does not output never re-enter the conversation.
	//
	// The `tools` object:
	//
	// ```python
	// from typing import Any, Literal, NotRequired, TypedDict, Union
	//
	// class ToolCallError(Exception):
	//     """Raised when a tool call fails; tool_name names the tool."""
	//
	//     tool_name: str
	//
	// class Tools:
	//     pass
	//
	// tools: Tools
	// ```
}

func ExampleRender() {
	for _, lang := range sdkgen.Languages() {
		src, err := sdkgen.Render(lang, sdkgen.FormatSource, nil)
		fmt.Printf("%s: %q %v\n", lang, src[:strings.IndexByte(src, '\n')], err)
	}
	_, err := sdkgen.Render("ruby", sdkgen.FormatPrompt, nil)
	fmt.Println(errors.Is(err, sdkgen.ErrUnknownLanguage), err)
	// Output:
	// python: "from typing import Any, Literal, NotRequired, TypedDict, Union" <nil>
	// typescript: "declare const tools: {};" <nil>
	// true sdkgen: unknown language "ruby" (known: python, typescript)
}

// A tool with an output schema (MCP's outputSchema) resolves to the value
// that schema describes instead of its text.
func ExampleTypeScriptSource_outputSchema() {
	fmt.Print(sdkgen.TypeScriptSource([]sdkgen.Tool{{
		Name:         "weather",
		InputSchema:  json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`),
		OutputSchema: json.RawMessage(`{"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]}`),
	}}))
	// Output:
	// declare const tools: {
	//   "weather": (args: {
	//     city: string;
	//   }) => Promise<{
	//     celsius: number;
	//   }>;
	// };
}
