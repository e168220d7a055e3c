package sdkgen

import (
	"bytes"
	"hash/maphash"
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
	return render(TypeScript, FormatSource, tools, RenderOptions{}).Text
}

// TypeScriptPrompt renders the whole TypeScript SDK prompt section: usage
// instructions followed by the declaration block in a Markdown code block.
func TypeScriptPrompt(tools []Tool) string {
	return render(TypeScript, FormatPrompt, tools, RenderOptions{}).Text
}

func (r *renderer) tsPrompt(ts []Tool) {
	r.w.instructions(tsInstructions, tsTextResult, tsOutputSentence, ts)
	r.w.fenced("ts", func() { r.tsSource(ts) })
}

// tsSource writes the declaration block of ts, visible tools.
func (r *renderer) tsSource(ts []Tool) {
	w := r.w
	if len(ts) == 0 {
		w.str("declare const tools: {};\n")
		return
	}
	w.str("declare const tools: {\n")
	rest := estimate(ts)
	for _, t := range ts {
		w.rest = rest + 64
		r.tsMember(t)
		if w.full() {
			return
		}
		rest -= toolEstimate(t)
	}
	w.rest = 64
	w.str("};\n")
}

// tsMember writes t's member of the tools object: its JSDoc, quoted name
// and function type.
func (r *renderer) tsMember(t Tool) {
	w := r.w
	r.a.reset()
	r.tsDoc(2, t.Description)
	w.str("  ")
	w.quoteTS(t.Name)
	w.str(": (args: ")
	r.tsType(r.a.shape(r.a.parse(t.InputSchema), 0), 2)
	w.str(") => Promise<")
	if t.hasOutput() {
		r.tsType(r.a.shape(r.a.parse(t.OutputSchema), 0), 2)
	} else {
		w.str("string")
	}
	w.str(">;\n")
}

// tsDoc writes desc as a JSDoc comment indented by indent spaces. "*/"
// cannot end the comment early (it is written "*\/"), and a line whose
// text starts with "@" is written "\@" so that it is not read as a block
// tag.
func (r *renderer) tsDoc(indent int, desc string) {
	w := r.w
	span, oneLine := docSpan(desc)
	if span == "" {
		return
	}
	w.spaces(indent)
	if oneLine {
		w.str("/** ")
		w.jsdocLine(r.docLine(span))
		w.str(" */\n")
		return
	}
	w.str("/**\n")
	for !w.full() {
		line, rest, more := nextLine(span)
		w.spaces(indent)
		if l := r.docLine(line); len(l) == 0 {
			w.str(" *\n")
		} else {
			w.str(" * ")
			w.jsdocLine(l)
			w.byte('\n')
		}
		if !more {
			break
		}
		span = rest
	}
	w.spaces(indent)
	w.str(" */\n")
}

// jsdocLine writes a doc line inside a JSDoc comment.
func (w *out) jsdocLine(l []byte) {
	if t := bytes.TrimLeft(l, " \t"); len(t) > 0 && t[0] == '@' {
		w.bytes(l[:len(l)-len(t)])
		w.byte('\\')
		l = t
	}
	for {
		i := bytes.Index(l, []byte("*/"))
		if i < 0 {
			w.bytes(l)
			return
		}
		w.bytes(l[:i])
		w.str(`*\/`)
		l = l[i+2:]
	}
}

// tsKey writes a property key: bare when it is an ASCII identifier,
// quoted otherwise.
func (w *out) tsKey(k string) {
	if isASCIIIdent(k, "_$") {
		w.str(k)
		return
	}
	w.quoteTS(k)
}

// tsType writes s; a multi-line type continues at indent (the indentation
// of the line the type starts on).
func (r *renderer) tsType(s *shape, indent int) {
	w := r.w
	switch s.kind {
	case kNever:
		w.str("never")
	case kString:
		w.str("string")
	case kNumber, kInteger:
		w.str("number")
	case kBoolean:
		w.str("boolean")
	case kNull:
		w.str("null")
	case kLiteral:
		if s.lit.kind == jString {
			w.quoteTS(s.lit.s)
		} else {
			w.str(litText(s.lit)) // JSON numbers and booleans are TS literals
		}
	case kArray:
		if s.elem.kind == kUnion {
			w.byte('(')
			r.tsType(s.elem, indent)
			w.byte(')')
		} else {
			r.tsType(s.elem, indent)
		}
		w.str("[]")
	case kObject:
		r.tsObject(s, indent)
	case kUnion:
		r.tsUnion(s, indent)
	default:
		w.str("unknown")
	}
}

// tsUnion writes the alternatives of a union, each once: an alternative
// written the same as an earlier one (number and integer, two records
// alike) is cut again.
func (r *renderer) tsUnion(s *shape, indent int) {
	w := r.w
	mark := len(r.spans)
	defer func() { r.spans = r.spans[:mark] }()
	var byHash map[uint64]int
	for i, m := range s.members {
		if i == 0 {
			from := len(w.b)
			r.tsType(m, indent)
			r.spans = append(r.spans, span{from: from, to: len(w.b)})
			continue
		}
		at := len(w.b)
		w.tentative++
		w.str(" | ")
		from := len(w.b)
		r.tsType(m, indent)
		w.tentative--
		if !r.keep(mark, from, &byHash) {
			w.cut(at)
		}
		if w.full() {
			return
		}
	}
}

// keep adds the text written from position from to the alternatives kept
// from mark on, unless it is the same as one of them; it reports whether
// it did. A long union looks its alternatives up by hash (byHash, made on
// the first need), a short one through them.
func (r *renderer) keep(mark, from int, byHash *map[uint64]int) bool {
	b := r.w.b
	text := b[from:]
	kept := r.spans[mark:]
	if *byHash == nil && len(kept) < smallSet {
		for _, k := range kept {
			if bytes.Equal(b[k.from:k.to], text) {
				return false
			}
		}
		r.spans = append(r.spans, span{from: from, to: len(b)})
		return true
	}
	if *byHash == nil {
		if r.seed == (maphash.Seed{}) {
			r.seed = maphash.MakeSeed()
		}
		*byHash = make(map[uint64]int, 2*len(kept))
		for i := range kept {
			kept[i].hash = maphash.Bytes(r.seed, b[kept[i].from:kept[i].to])
			(*byHash)[kept[i].hash] = i
		}
	}
	h := maphash.Bytes(r.seed, text)
	if i, ok := (*byHash)[h]; ok {
		if bytes.Equal(b[kept[i].from:kept[i].to], text) {
			return false
		}
		for _, k := range kept { // two texts with one hash: look through all
			if k.hash == h && bytes.Equal(b[k.from:k.to], text) {
				return false
			}
		}
	} else {
		(*byHash)[h] = len(kept)
	}
	r.spans = append(r.spans, span{from: from, to: len(b), hash: h})
	return true
}

func (r *renderer) tsObject(s *shape, indent int) {
	w := r.w
	if len(s.fields) == 0 {
		w.str("{ [key: string]: ")
		r.tsType(s.extra, indent)
		w.str(" }")
		return
	}
	inner := indent + 2
	mark := len(r.spans)
	defer func() { r.spans = r.spans[:mark] }()
	w.str("{\n")
	for _, f := range s.fields {
		r.tsDoc(inner, f.doc)
		w.spaces(inner)
		w.tsKey(f.key)
		if !f.required {
			w.byte('?')
		}
		w.str(": ")
		from := len(w.b)
		r.tsType(f.typ, inner)
		r.spans = append(r.spans, span{from: from, to: len(w.b)})
		w.str(";\n")
		if w.full() {
			return
		}
	}
	if s.extra != nil {
		// Under --strict every declared property must be assignable to the
		// index signature, an optional one with undefined. Keep the schema's
		// type only when that holds trivially (every property has exactly
		// that type); otherwise the signature says unknown.
		w.spaces(inner)
		w.str("[key: string]: ")
		from := len(w.b)
		w.tentative++
		r.tsType(s.extra, inner)
		w.tentative--
		if extra := w.since(from); string(extra) != "unknown" {
			optional := false
			for i, f := range s.fields {
				if k := r.spans[mark+i]; !bytes.Equal(w.b[k.from:k.to], extra) {
					w.cut(from)
					w.str("unknown")
					optional = false
					break
				}
				optional = optional || !f.required
			}
			if optional {
				w.str(" | undefined")
			}
		}
		w.str(";\n")
	}
	w.spaces(indent)
	w.byte('}')
}
