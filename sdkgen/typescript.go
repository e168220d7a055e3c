package sdkgen

import (
	"strings"
)

// tsInstructions is the fixed text in front of the TypeScript declarations.
const tsInstructions = "The tools below are available to programs you run with the `" + ReservedTool + "` tool: pass the program as its `code` argument. " +
	"Only what the program returns or logs comes back to you.\n" +
	"\n" +
	"How to write the program:\n" +
	"- Write the body of an async function in erasable TypeScript: type annotations are fine, but no syntax that needs more than removing types " +
	"(no `enum`, `namespace`, parameter properties or decorators). Top-level `await` and `return` work.\n" +
	"- Call a tool with `await tools[\"name\"](args)`, quoting the name exactly as declared below. " + tsTextResult + "\n" +
	"- A failed tool call rejects with an `Error` whose `toolName` property names the tool. Catch it with `try`/`catch` when the program should go on after a failure.\n" +
	"- Tool calls run one at a time, in the order they are made, even under `Promise.all`.\n" +
	"- The types are advisory: they are stripped before the program runs, and nothing checks arguments against them but the tools themselves.\n" +
	"- Return or `console.log` only what you need to see. Intermediate results the program does not output never re-enter the conversation.\n" +
	"\n" +
	"The `tools` object:\n" +
	"\n"

// tsTextResult is the sentence of tsInstructions that tsOutputSentence
// follows.
const tsTextResult = "A call resolves to the tool's text output as a string."

// tsOutputSentence explains results typed by an output schema; it is said
// only when a tool declares one.
const tsOutputSentence = " A tool declared with another result type (from its output schema) resolves to that structured value instead: " +
	"a plain JSON value (objects, arrays, strings, numbers, booleans, null) you can use directly, without `JSON.parse`."

// TypeScriptSource renders the declaration block: a standalone TypeScript
// file that declares the global `tools`, one quoted key per tool, in
// lexicographic order, each a function from its arguments to
// Promise<string>, or, for a tool with an OutputSchema, to a Promise of the
// type that schema describes. `tsc --noEmit --strict` accepts it.
func TypeScriptSource(tools []Tool) string {
	var b strings.Builder
	ts := visible(tools)
	if len(ts) == 0 {
		return "declare const tools: {};\n"
	}
	b.WriteString("declare const tools: {\n")
	for _, t := range ts {
		writeTSMember(&b, t)
	}
	b.WriteString("};\n")
	return b.String()
}

// writeTSMember writes t's member of the tools object: its JSDoc, quoted
// name and function type.
func writeTSMember(b *strings.Builder, t Tool) {
	writeTSDoc(b, "  ", t.Description)
	b.WriteString("  ")
	b.WriteString(quoteTS(t.Name))
	b.WriteString(": (args: ")
	b.WriteString(tsType(buildShape(parseJSON(t.InputSchema), 0), "  "))
	b.WriteString(") => Promise<")
	if t.hasOutput() {
		b.WriteString(tsType(buildShape(parseJSON(t.OutputSchema), 0), "  "))
	} else {
		b.WriteString("string")
	}
	b.WriteString(">;\n")
}

// TypeScriptPrompt renders the whole TypeScript SDK prompt section: usage
// instructions followed by the declaration block in a Markdown code block.
func TypeScriptPrompt(tools []Tool) string {
	return instructions(tsInstructions, tsTextResult, tsOutputSentence, tools) + fence("ts", TypeScriptSource(tools))
}

// instructions returns the fixed text, with sentence added after anchor
// when a visible tool declares a structured result: a tool set without
// output schemas keeps its text byte for byte.
func instructions(text, anchor, sentence string, tools []Tool) string {
	if !anyOutput(visible(tools)) {
		return text
	}
	return strings.Replace(text, anchor, anchor+sentence, 1)
}

// writeTSDoc writes desc as a JSDoc comment at indent. "*/" cannot end the
// comment early (it is written "*\/"), and a line whose text starts with
// "@" is written "\@" so that it is not read as a block tag.
func writeTSDoc(b *strings.Builder, indent, desc string) {
	lines := docLines(desc)
	if len(lines) == 0 {
		return
	}
	for i, l := range lines {
		l = strings.ReplaceAll(l, "*/", `*\/`)
		if t := strings.TrimLeft(l, " \t"); strings.HasPrefix(t, "@") {
			l = l[:len(l)-len(t)] + `\` + t
		}
		lines[i] = l
	}
	if len(lines) == 1 {
		b.WriteString(indent + "/** " + lines[0] + " */\n")
		return
	}
	b.WriteString(indent + "/**\n")
	for _, l := range lines {
		if l == "" {
			b.WriteString(indent + " *\n")
		} else {
			b.WriteString(indent + " * " + l + "\n")
		}
	}
	b.WriteString(indent + " */\n")
}

// tsKey renders a property key: bare when it is an ASCII identifier,
// quoted otherwise.
func tsKey(k string) string {
	if isASCIIIdent(k, "_$") {
		return k
	}
	return quoteTS(k)
}

// tsType renders s; a multi-line result continues at indent (the
// indentation of the line the type starts on).
func tsType(s *shape, indent string) string {
	switch s.kind {
	case kNever:
		return "never"
	case kString:
		return "string"
	case kNumber, kInteger:
		return "number"
	case kBoolean:
		return "boolean"
	case kNull:
		return "null"
	case kLiteral:
		switch s.lit.kind {
		case jString:
			return quoteTS(s.lit.s)
		default:
			return litText(s.lit) // JSON numbers and booleans are TS literals
		}
	case kArray:
		e := tsType(s.elem, indent)
		if s.elem.kind == kUnion {
			e = "(" + e + ")"
		}
		return e + "[]"
	case kObject:
		return tsObject(s, indent)
	case kUnion:
		seen := make(map[string]bool, len(s.members))
		parts := make([]string, 0, len(s.members))
		for _, m := range s.members {
			t := tsType(m, indent)
			if !seen[t] {
				seen[t] = true
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, " | ")
	}
	return "unknown"
}

func tsObject(s *shape, indent string) string {
	if len(s.fields) == 0 {
		return "{ [key: string]: " + tsType(s.extra, indent) + " }"
	}
	inner := indent + "  "
	var b strings.Builder
	b.WriteString("{\n")
	types := make([]string, len(s.fields))
	for i, f := range s.fields {
		types[i] = tsType(f.typ, inner)
		writeTSDoc(&b, inner, f.doc)
		b.WriteString(inner)
		b.WriteString(tsKey(f.key))
		if !f.required {
			b.WriteByte('?')
		}
		b.WriteString(": ")
		b.WriteString(types[i])
		b.WriteString(";\n")
	}
	if s.extra != nil {
		// Under --strict every declared property must be assignable to the
		// index signature, an optional one with undefined. Keep the schema's
		// type only when that holds trivially (every property has exactly
		// that type); otherwise the signature says unknown.
		extra := tsType(s.extra, inner)
		if extra != "unknown" {
			optional := false
			for i, f := range s.fields {
				if types[i] != extra {
					extra = "unknown"
					break
				}
				optional = optional || !f.required
			}
			if optional && extra != "unknown" {
				extra += " | undefined"
			}
		}
		b.WriteString(inner + "[key: string]: " + extra + ";\n")
	}
	b.WriteString(indent + "}")
	return b.String()
}
