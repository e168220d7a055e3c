package sdkgen

import (
	"bytes"
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
	return render(TypeScript, FormatIndex, tools, RenderOptions{}).Text
}

// PythonIndex renders the Python SDK index (see TypeScriptIndex).
func PythonIndex(tools []Tool) string {
	return render(Python, FormatIndex, tools, RenderOptions{}).Text
}

// indexFlavor is what the index says in one language.
type indexFlavor struct {
	instructions, anchor, sentence string // see out.instructions
	lang, comment, footer          string // the code block's tag, a comment's start
}

var (
	tsIndex = indexFlavor{tsIndexInstructions, tsTextResult, tsOutputSentence, "ts", "// ", tsIndexFooter}
	pyIndex = indexFlavor{pyIndexInstructions, pyTextResult, pyOutputSentence, "python", "# ", pyIndexFooter}
)

// index writes the index of ts, visible tools, in flavor f.
func (r *renderer) index(ts []Tool, f indexFlavor) {
	r.w.instructions(f.instructions, f.anchor, f.sentence, ts)
	r.w.fenced(f.lang, func() { r.indexBlock(ts, f.comment) })
	if r.w.over {
		return
	}
	r.w.byte('\n')
	r.w.str(f.footer)
}

// indexBlock writes the index lines: a comment line naming each source,
// then one line per tool of that source. The host's own tools (no Source)
// come first, then each source in byte-wise order; tools in SDK order.
func (r *renderer) indexBlock(ts []Tool, comment string) {
	w := r.w
	for i := range ts {
		ts[i].Source = validUTF8(ts[i].Source)
	}
	slices.SortStableFunc(ts, func(a, b Tool) int { return cmp.Compare(a.Source, b.Source) })
	rest := indexEstimate(ts)
	for i, t := range ts {
		w.rest = rest + 64
		rest -= indexEstimate(ts[i : i+1])
		if i == 0 || t.Source != ts[i-1].Source {
			if i > 0 {
				w.byte('\n')
			}
			w.str(comment)
			if t.Source == "" {
				w.str("host tools\n")
			} else {
				w.str("from MCP server ")
				w.quoteTS(t.Source)
				w.byte('\n')
			}
		}
		r.indexLine(t)
		w.byte('\n')
		if w.full() {
			return
		}
	}
	if len(ts) == 0 {
		w.str(comment)
		w.str("no tools\n")
	}
}

// indexLine writes one tool's index line: tools["name"]({a, b?}) — summary.
func (r *renderer) indexLine(t Tool) {
	w := r.w
	r.a.reset()
	w.str("tools[")
	w.quoteTS(t.Name)
	w.str("](")
	s := r.a.shape(r.a.parse(t.InputSchema), 0)
	switch {
	case s.kind == kObject && len(s.fields) > 0:
		w.byte('{')
		for i, f := range s.fields {
			if i > 0 {
				w.str(", ")
			}
			w.tsKey(f.key)
			if !f.required {
				w.byte('?')
			}
		}
		w.byte('}')
	case s.kind == kObject && s.extra.kind == kNever:
		w.str("{}")
	case s.kind == kObject:
		w.str("{...}")
	default:
		w.str("args")
	}
	w.byte(')')
	if sum := r.summary(t.Description); len(sum) > 0 {
		w.str(" — ")
		w.bytes(sum)
	}
}

// summary returns the first sentence of a description on one line: the
// description's plainText up to the first blank line, whitespace collapsed
// to single spaces, cut after the first ".", "!" or "?" that ends the text
// or is followed by a space and a character other than a lower-case letter
// (so "e.g. this" goes on), and at most MaxIndexSummary bytes (cut at a
// word boundary, then "…"). The bytes are the renderer's, valid until its
// next summary.
//
// The first paragraph that is not blank runs from its first line that is
// not blank to the first empty line after it. Only its first
// MaxIndexSummary+8 bytes, collapsed, are read: a sentence that ends later
// is cut at MaxIndexSummary bytes all the same, and the few bytes beyond
// decide a sentence that ends just before.
func (r *renderer) summary(desc string) []byte {
	b := r.sum[:0]
	started, space := false, false
	for s := desc; len(b) < MaxIndexSummary+8; {
		line, rest, more := nextLine(s)
		if !started {
			started = !blank(line)
		}
		if started {
			if len(line) == 0 {
				break // an empty line ends the paragraph
			}
			b, space = appendWords(b, line, space, MaxIndexSummary+8)
			space = space || len(b) > 0 // the line break
		}
		if !more {
			break
		}
		s = rest
	}
	r.sum = b
	for i := 0; i < len(b); i++ {
		if c := b[i]; (c == '.' || c == '!' || c == '?') && (i+1 == len(b) || b[i+1] == ' ' && !lowerAt(b, i+2)) {
			b = b[:i+1]
			break
		}
	}
	if len(b) <= MaxIndexSummary {
		return b
	}
	cut := MaxIndexSummary - len("…")
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	if sp := bytes.LastIndexByte(b[:cut], ' '); sp > MaxIndexSummary/2 {
		cut = sp
	}
	return append(b[:cut], "…"...)
}

// appendWords appends the words of line, a line of free text as plainText
// shows it, to b, separated by single spaces, until b holds at least most
// bytes: space says a space is due before the next word, and is returned
// for the next line.
func appendWords(b []byte, line string, space bool, most int) ([]byte, bool) {
	for i := 0; i < len(line) && len(b) < most; {
		r, n := rune(line[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(line[i:])
		}
		i += n
		switch r = plainRune(r); r {
		case ' ', '\t':
			space = len(b) > 0
		default:
			if space {
				b = append(b, ' ')
				space = false
			}
			if r < utf8.RuneSelf && r != 0x7f && r >= 0x20 {
				b = append(b, byte(r))
			} else {
				b = utf8.AppendRune(b, r)
			}
		}
	}
	return b, space
}

// lowerAt reports whether s has a lower-case letter at byte i.
func lowerAt(s []byte, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRune(s[i:])
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
