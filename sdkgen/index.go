package sdkgen

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DescribeTool is the reserved tool that returns the full declarations of
// the tools an index names (see FormatIndex). Like ReservedTool it is
// never part of an SDK.
const DescribeTool = "describe_tools"

// MaxIndexSummary caps, in bytes, the description text of one index line
// (the first sentence of the description); a longer one is cut at a word
// boundary and ends with "…". One hostile or rambling description cannot
// grow the index by more than this.
const MaxIndexSummary = 200

// tsIndexInstructions is the fixed text in front of the TypeScript index.
const tsIndexInstructions = "The tools listed below are available to programs you run with the `" + ReservedTool + "` tool: pass the program as its `code` argument. " +
	"Only what the program returns or logs comes back to you.\n" +
	"\n" +
	"How to write the program:\n" +
	"- Write the body of an async function in erasable TypeScript: type annotations are fine, but no syntax that needs more than removing types " +
	"(no `enum`, `namespace`, parameter properties or decorators). Top-level `await` and `return` work.\n" +
	"- Call a tool with `await tools[\"name\"](args)`, quoting the name exactly as listed below, with one object argument. " + tsTextResult + "\n" +
	"- A failed tool call rejects with an `Error` whose `toolName` property names the tool. Catch it with `try`/`catch` when the program should go on after a failure.\n" +
	"- Tool calls run one at a time, in the order they are made, even under `Promise.all`.\n" +
	"- The types are advisory: they are stripped before the program runs, and nothing checks arguments against them but the tools themselves.\n" +
	"- Return or `console.log` only what you need to see. Intermediate results the program does not output never re-enter the conversation.\n" +
	"\n" +
	"The tools, one per line: `tools[\"name\"]({argument names, ? marking an optional one})`, then what the tool does; grouped by where the tools come from:\n" +
	"\n"

// pyIndexInstructions is the fixed text in front of the Python index.
const pyIndexInstructions = "The tools listed below are available to programs you run with the `" + ReservedTool + "` tool: pass the program as its `code` argument. " +
	"Only what the program returns or prints comes back to you.\n" +
	"\n" +
	"How to write the program:\n" +
	"- Write the body of an async function in Python 3. Top-level `await` and `return` work.\n" +
	"- Call a tool with `await tools[\"name\"](args)`, quoting the name exactly as listed below, with one `dict` argument " +
	"(`await tools.name(args)` works too for a tool the stubs declare as a method). " + pyTextResult + "\n" +
	"- The declarations `" + DescribeTool + "` returns are static stubs, for reading only. When the program runs, the only names bound apart from Python's builtins " +
	"and the modules you import are `tools` and `ToolCallError`: the other classes the stubs declare (`Tools` and the `TypedDict` classes, " +
	"such as the `...Args` ones) do not exist, nor do the `typing` names unless you import them.\n" +
	"- Pass arguments as plain `dict` and `list` values, such as `{\"path\": \"notes.txt\"}`; do not construct the `TypedDict` classes.\n" +
	"- A failed tool call raises `ToolCallError`, whose `tool_name` attribute names the tool. Catch it with `try`/`except` when the program should go on after a failure.\n" +
	"- Tool calls run one at a time, in the order they are made, even under `asyncio.gather`.\n" +
	"- Return or `print` only what you need to see. Intermediate results the program does not output never re-enter the conversation.\n" +
	"\n" +
	"The tools, one per line: `tools[\"name\"]({argument names, ? marking an optional one})`, then what the tool does; grouped by where the tools come from:\n" +
	"\n"

// tsIndexFooter and pyIndexFooter end the index: how to get the full
// declarations.
const (
	tsIndexFooter = "Before writing a program, call the `" + DescribeTool + "` tool with `{\"names\": [\"name\", ...]}` naming every tool the program will call: " +
		"it returns their full TypeScript declarations (argument and result types, documentation).\n"
	pyIndexFooter = "Before writing a program, call the `" + DescribeTool + "` tool with `{\"names\": [\"name\", ...]}` naming every tool the program will call: " +
		"it returns their full Python stubs (argument and return types, documentation).\n"
)

// TypeScriptIndex renders the TypeScript SDK index: the usage
// instructions, one line per tool grouped by source, and the instruction
// to get full declarations with DescribeTool. See FormatIndex.
func TypeScriptIndex(tools []Tool) string {
	return instructions(tsIndexInstructions, tsTextResult, tsOutputSentence, tools) +
		fence("ts", indexBlock(tools, "// ")) + "\n" + tsIndexFooter
}

// PythonIndex renders the Python SDK index (see TypeScriptIndex).
func PythonIndex(tools []Tool) string {
	return instructions(pyIndexInstructions, pyTextResult, pyOutputSentence, tools) +
		fence("python", indexBlock(tools, "# ")) + "\n" + pyIndexFooter
}

// indexBlock renders the index lines: a comment line naming each source,
// then one line per tool of that source. The host's own tools (no Source)
// come first, then each source in byte-wise order; tools in SDK order.
func indexBlock(tools []Tool, comment string) string {
	ts := visible(tools)
	for i := range ts {
		ts[i].Source = validUTF8(ts[i].Source)
	}
	slices.SortStableFunc(ts, func(a, b Tool) int { return cmp.Compare(a.Source, b.Source) })
	var b strings.Builder
	for i, t := range ts {
		if i == 0 || t.Source != ts[i-1].Source {
			if i > 0 {
				b.WriteString("\n")
			}
			if t.Source == "" {
				b.WriteString(comment + "host tools\n")
			} else {
				b.WriteString(comment + "from MCP server " + quoteTS(t.Source) + "\n")
			}
		}
		b.WriteString(indexLine(t))
		b.WriteString("\n")
	}
	if len(ts) == 0 {
		b.WriteString(comment + "no tools\n")
	}
	return b.String()
}

// indexLine is one tool's index line: tools["name"]({a, b?}) — summary.
func indexLine(t Tool) string {
	var b strings.Builder
	b.WriteString("tools[" + quoteTS(t.Name) + "](")
	s := buildShape(parseJSON(t.InputSchema), 0)
	switch {
	case s.kind == kObject && len(s.fields) > 0:
		b.WriteString("{")
		for i, f := range s.fields {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(tsKey(f.key))
			if !f.required {
				b.WriteString("?")
			}
		}
		b.WriteString("}")
	case s.kind == kObject && s.extra.kind == kNever:
		b.WriteString("{}")
	case s.kind == kObject:
		b.WriteString("{...}")
	default:
		b.WriteString("args")
	}
	b.WriteString(")")
	if sum := summary(t.Description); sum != "" {
		b.WriteString(" — " + sum)
	}
	return b.String()
}

// summary returns the first sentence of a description on one line: the
// description's plainText up to the first blank line, whitespace collapsed
// to single spaces, cut after the first ".", "!" or "?" that ends the text
// or is followed by a space and a character other than a lower-case letter
// (so "e.g. this" goes on), and at most MaxIndexSummary bytes (cut at a
// word boundary, then "…").
func summary(desc string) string {
	desc = plainText(desc)
	for _, para := range strings.Split(desc, "\n\n") {
		if strings.TrimSpace(para) != "" {
			desc = para
			break
		}
	}
	desc = strings.Join(strings.Fields(desc), " ")
	for i := 0; i < len(desc); i++ {
		if c := desc[i]; (c == '.' || c == '!' || c == '?') && (i+1 == len(desc) || desc[i+1] == ' ' && !lowerAt(desc, i+2)) {
			desc = desc[:i+1]
			break
		}
	}
	if len(desc) <= MaxIndexSummary {
		return desc
	}
	cut := MaxIndexSummary - len("…")
	for cut > 0 && !utf8.RuneStart(desc[cut]) {
		cut--
	}
	if sp := strings.LastIndexByte(desc[:cut], ' '); sp > MaxIndexSummary/2 {
		cut = sp
	}
	return desc[:cut] + "…"
}

// lowerAt reports whether s has a lower-case letter at byte i.
func lowerAt(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsLower(r)
}

// Select returns the tools of tools named in names, in SDK order (each
// once), and the names that match none, in the order given (each once).
// Names match the tools' names as the SDK shows them (invalid UTF-8
// repaired); ReservedTool and DescribeTool never match.
func Select(tools []Tool, names []string) (selected []Tool, unknown []string) {
	byName := map[string]Tool{}
	for _, t := range visible(tools) {
		if t.Name != DescribeTool {
			byName[t.Name] = t
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if t, ok := byName[n]; ok {
			selected = append(selected, t)
		} else {
			unknown = append(unknown, n)
		}
	}
	slices.SortFunc(selected, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return selected, unknown
}
