package sdkgen

import (
	"bytes"
	"strconv"
	"strings"
)

// MaxListNesting caps how many list[...] / dict[str, ...] subscripts nest
// in one Python annotation; a deeper one renders as Any. CPython's
// tokenizer rejects a line with more than 200 open brackets, and the stub
// block must always parse, so the cap keeps every line far below that
// (MaxDepth bounds the rest, and object shapes start a class of their own).
const MaxListNesting = 16

// maxChainedUnion caps the alternatives of a union written as an
// `A | B | ...` chain; a union with more distinct alternatives is written
// flat, as one `Union[A, B, ...]`. Nothing is dropped or degraded to Any
// for the count. CPython parses a `|` chain as a left-nested BinOp spine
// that its compiler walks recursively, one level per member (seed 004
// measured RecursionError at 5,000 members on 3.9; 3.13 fails near
// 10,000), while the elements of a subscript sit side by side. Short
// chains read best, and chains of at most 100 stay far below those limits
// even nested through MaxListNesting subscripts, each with its deepest
// operand holding the next (TestGoldenCompile checks 15 such levels).
// Literal members count as one: they merge into one flat Literal[...].
const maxChainedUnion = 100

// maxClassName caps the length of a derived class name before the suffix
// that makes it unique, so nested names cannot grow with depth.
const maxClassName = 80

// pyInstructions is the fixed text in front of the Python stubs.
const pyInstructions = "The tools below are available to programs you run with the `" + ReservedTool + "` tool: pass the program as its `code` argument. " +
	"Only what the program returns or prints comes back to you.\n" +
	"\n" +
	"How to write the program:\n" +
	"- Write the body of an async function in Python 3. Top-level `await` and `return` work.\n" +
	"- Call a tool with `await tools.name(args)` for a method declared below, or with `await tools[\"name\"](args)` for any tool; " +
	"a tool listed only as a comment must be called the second way. " + pyTextResult + "\n" +
	"- The declarations below are static stubs, for reading only. When the program runs, the only names bound apart from Python's builtins " +
	"and the modules you import are `tools` and `ToolCallError`: the other classes declared below (`Tools` and the `TypedDict` classes, " +
	"such as the `...Args` ones) do not exist, nor do the `typing` names unless you import them.\n" +
	"- Pass arguments as plain `dict` and `list` values, such as `{\"path\": \"notes.txt\"}`; do not construct the `TypedDict` classes.\n" +
	"- A failed tool call raises `ToolCallError`, whose `tool_name` attribute names the tool. Catch it with `try`/`except` when the program should go on after a failure.\n" +
	"- Tool calls run one at a time, in the order they are made, even under `asyncio.gather`.\n" +
	"- Return or `print` only what you need to see. Intermediate results the program does not output never re-enter the conversation.\n" +
	"\n" +
	"The `tools` object:\n" +
	"\n"

// pyTextResult is the sentence of pyInstructions that pyOutputSentence
// follows.
const pyTextResult = "A call returns the tool's text output as a `str`."

// pyOutputSentence explains results typed by an output schema; it is said
// only when a tool declares one.
const pyOutputSentence = " A tool declared with another return type (from its output schema) returns that structured value instead: " +
	"plain `dict`, `list`, `str`, `int`, `float`, `bool` and `None` values you can use directly, without `json.loads`."

const pyHeader = `from typing import Any, Literal, NotRequired, TypedDict, Union

class ToolCallError(Exception):
    """Raised when a tool call fails; tool_name names the tool."""

    tool_name: str

`

// pyKeywords are Python's hard keywords: never a name.
var pyKeywords = setOf("False", "None", "True", "and", "as", "assert", "async", "await",
	"break", "class", "continue", "def", "del", "elif", "else", "except", "finally", "for",
	"from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass",
	"raise", "return", "try", "while", "with", "yield")

// pyAnnotationNames are the names the stubs evaluate inside class Tools (in
// its annotations): a method with one of these names would shadow it for the
// methods after it, so such a tool is listed as a comment instead.
var pyAnnotationNames = setOf("Any", "Literal", "NotRequired", "TypedDict", "Union",
	"str", "int", "float", "bool", "list", "dict")

// pyReservedClassNames are names a derived class name never takes: the
// module's own names and every builtin that starts with an upper-case
// letter (derived names always do).
var pyReservedClassNames = setOf("Any", "Literal", "NotRequired", "TypedDict", "Union", "Tools", "ToolCallError",
	"ArithmeticError", "AssertionError", "AttributeError", "BaseException", "BaseExceptionGroup",
	"BlockingIOError", "BrokenPipeError", "BufferError", "BytesWarning", "ChildProcessError",
	"ConnectionAbortedError", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
	"DeprecationWarning", "EOFError", "Ellipsis", "EncodingWarning", "EnvironmentError", "Exception",
	"ExceptionGroup", "False", "FileExistsError", "FileNotFoundError", "FloatingPointError",
	"FutureWarning", "GeneratorExit", "IOError", "ImportError", "ImportWarning", "IndentationError",
	"IndexError", "InterruptedError", "IsADirectoryError", "KeyError", "KeyboardInterrupt",
	"LookupError", "MemoryError", "ModuleNotFoundError", "NameError", "None", "NotADirectoryError",
	"NotImplemented", "NotImplementedError", "OSError", "OverflowError", "PendingDeprecationWarning",
	"PermissionError", "ProcessLookupError", "PythonFinalizationError", "RecursionError",
	"ReferenceError", "ResourceWarning", "RuntimeError", "RuntimeWarning", "StopAsyncIteration",
	"StopIteration", "SyntaxError", "SyntaxWarning", "SystemError", "SystemExit", "TabError",
	"TimeoutError", "True", "TypeError", "UnboundLocalError", "UnicodeDecodeError",
	"UnicodeEncodeError", "UnicodeError", "UnicodeTranslateError", "UnicodeWarning", "UserWarning",
	"ValueError", "Warning", "ZeroDivisionError")

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// pyMethodName reports whether a tool can be declared as a method of
// class Tools: an ASCII identifier that is not a keyword, does not start
// with "__" (dunders and mangled names) and shadows no annotation name.
func pyMethodName(name string) bool {
	return isASCIIIdent(name, "_") && !pyKeywords[name] &&
		!strings.HasPrefix(name, "__") && !pyAnnotationNames[name]
}

// pyFieldName reports whether a key can be a field in a class-syntax
// TypedDict; any other key forces the functional syntax.
func pyFieldName(key string) bool {
	return isASCIIIdent(key, "_") && !pyKeywords[key] && !strings.HasPrefix(key, "__")
}

// PythonSource renders the Python stub block: a standalone module that
// CPython 3.11+ compiles and executes. It declares a TypedDict (or another
// type) for each tool's arguments, the ToolCallError class, and class Tools
// with one async method per tool whose name is a plain identifier; any
// other tool is listed as a `tools["name"]` comment in its sorted place.
func PythonSource(tools []Tool) string {
	return render(Python, FormatSource, tools, RenderOptions{}).Text
}

// PythonPrompt renders the whole Python SDK prompt section: usage
// instructions followed by the stub block in a Markdown code block.
func PythonPrompt(tools []Tool) string {
	return render(Python, FormatPrompt, tools, RenderOptions{}).Text
}

func (r *renderer) pyPrompt(ts []Tool) {
	r.w.instructions(pyInstructions, pyTextResult, pyOutputSentence, ts)
	r.w.fenced("python", func() { r.pySource(ts) })
}

// pyPiece is the text one tool contributes to a Python stub module: the
// class definitions its types need, in module order, and its entry in
// class Tools (a method, or the comment of a tool that cannot be one).
type pyPiece struct {
	name    string
	classes string
	entry   string
}

// pythonSource renders the stub module and returns the piece of each
// visible tool, in module order.
func pythonSource(tools []Tool) (string, []pyPiece) {
	ts := visible(tools)
	pieces := []pyPiece{}
	r := &renderer{w: newOut(estimate(ts), 0), pieces: &pieces}
	r.pySource(ts)
	return r.w.String(), pieces
}

// pySource writes the stub module of ts, visible tools: the classes their
// argument and result types need, the tools' entries in class Tools after
// them. The annotations of each tool's entry are kept from the first pass
// over the tools, which writes the classes, for the second, which writes
// the entries.
func (r *renderer) pySource(ts []Tool) {
	w := r.w
	m := &pyModule{r: r, w: w, used: map[string]bool{}, next: map[string]int{}}
	for n := range pyReservedClassNames {
		m.used[n] = true
	}
	methods := 0
	for _, t := range ts {
		if pyMethodName(t.Name) {
			m.used[t.Name] = true // a class named like a method would be shadowed
			methods++
		}
	}
	w.str(pyHeader)
	type signature struct{ args, ret string }
	sigs := make([]signature, len(ts))
	classesAt := make([]int, len(ts)+1)
	rest := estimate(ts)
	for i, t := range ts {
		w.rest = rest
		classesAt[i] = len(w.b)
		sigs[i].args, sigs[i].ret = r.pySignature(m, t)
		if w.full() {
			return
		}
		rest -= toolEstimate(t)
	}
	classesAt[len(ts)] = len(w.b)
	w.str("class Tools:\n")
	for i, t := range ts {
		w.rest = rest
		if i > 0 {
			w.byte('\n')
		}
		entryAt := len(w.b)
		r.pyEntry(t, sigs[i].args, sigs[i].ret)
		if r.pieces != nil {
			*r.pieces = append(*r.pieces, pyPiece{name: t.Name, classes: string(w.b[classesAt[i]:classesAt[i+1]]), entry: string(w.since(entryAt))})
		}
		if w.full() {
			return
		}
		rest -= pyEntryEstimate(t)
	}
	if methods == 0 {
		if len(ts) > 0 {
			w.byte('\n')
		}
		w.str("    pass\n")
	}
	w.str("\ntools: Tools\n")
}

// pySignature writes the classes t's argument and result types need and
// returns the types' annotations.
func (r *renderer) pySignature(m *pyModule, t Tool) (args, ret string) {
	r.a.reset()
	base := camel(t.Name)
	if base == "" || base[0] >= '0' && base[0] <= '9' {
		base = "Tool" + base
	}
	args = m.typ(r.a.shape(r.a.parse(t.InputSchema), 0), base[:min(len(base), maxClassName-len("Args"))]+"Args", 0)
	ret = "str"
	if t.hasOutput() {
		ret = m.typ(r.a.shape(r.a.parse(t.OutputSchema), 0), base[:min(len(base), maxClassName-len("Output"))]+"Output", 0)
	}
	return args, ret
}

// pyEntryEstimate is the part of toolEstimate for t's entry in class
// Tools.
func pyEntryEstimate(t Tool) int {
	return 3*len(t.Name) + len(t.Description) + 8*strings.Count(t.Description, "\n") + 160
}

// pyEntry writes t's entry in class Tools: a method, or the comment of a
// tool that cannot be one.
func (r *renderer) pyEntry(t Tool, args, ret string) {
	w := r.w
	if !pyMethodName(t.Name) {
		w.str("    # tools[")
		w.quotePy(t.Name)
		w.str("](args: ")
		w.str(args)
		w.str(") -> ")
		w.str(ret)
		w.byte('\n')
		r.pyComment(w, "    #     ", t.Description)
		return
	}
	w.str("    async def ")
	w.str(t.Name)
	w.str("(self, args: ")
	w.str(args)
	w.str(") -> ")
	w.str(ret)
	w.str(":\n")
	r.pyDocstring(w, 8, t.Description)
	w.str("        ...\n")
}

// pyComment writes desc as comment lines, each starting with lead (which
// ends in spaces, dropped from an empty line).
func (r *renderer) pyComment(b *out, lead, desc string) {
	span, _ := docSpan(desc)
	for span != "" {
		line, rest, more := nextLine(span)
		if l := r.docLine(line); len(l) == 0 {
			b.str(strings.TrimRight(lead, " "))
		} else {
			b.str(lead)
			b.bytes(l)
		}
		b.byte('\n')
		if !more {
			break
		}
		span = rest
	}
}

// pyDocstring writes desc as a docstring indented by indent spaces,
// escaped (see pyDocLine) so that nothing in it can close the string early
// or form an escape sequence.
func (r *renderer) pyDocstring(b *out, indent int, desc string) {
	span, oneLine := docSpan(desc)
	if span == "" {
		return
	}
	b.spaces(indent)
	b.str(`"""`)
	line, rest, _ := nextLine(span)
	b.pyDocLine(r.docLine(line), oneLine)
	if oneLine {
		b.str(`"""` + "\n")
		return
	}
	b.byte('\n')
	for span = rest; ; {
		line, rest, more := nextLine(span)
		if l := r.docLine(line); len(l) > 0 {
			b.spaces(indent)
			b.pyDocLine(l, false)
		}
		b.byte('\n')
		if !more {
			break
		}
		span = rest
	}
	b.spaces(indent)
	b.str(`"""` + "\n")
}

// pyDocLine writes one docstring line. A double quote is escaped only
// where it could help close the string: when another quote follows it, or
// when it ends a line that the closing quotes follow (last). Backslashes,
// tabs and non-printable characters are always escaped.
func (w *out) pyDocLine(line []byte, last bool) {
	for len(line) > 0 {
		i := bytes.IndexByte(line, '"')
		if i < 0 {
			w.pyEscaped(bytesString(line))
			return
		}
		w.pyEscaped(bytesString(line[:i]))
		if i+1 < len(line) && line[i+1] == '"' || i+1 == len(line) && last {
			w.str(`\"`)
		} else {
			w.byte('"')
		}
		line = line[i+1:]
	}
}

// pyModule collects the class definitions of one stub module.
type pyModule struct {
	r    *renderer
	w    *out            // the module: definitions, each followed by a blank line
	used map[string]bool // names taken (or reserved) in the module
	next map[string]int  // next numeric suffix to try per base name
}

// name returns a fresh class name derived from base.
func (m *pyModule) name(base string) string {
	if len(base) > maxClassName {
		base = base[:maxClassName]
	}
	if !m.used[base] {
		m.used[base] = true
		return base
	}
	n := max(m.next[base], 2)
	for m.used[base+strconv.Itoa(n)] {
		n++
	}
	m.next[base] = n + 1
	name := base + strconv.Itoa(n)
	m.used[name] = true
	return name
}

// typ renders s as a Python annotation. path is the class name an object
// shape at this position derives its name from; nest counts the enclosing
// list/dict subscripts.
func (m *pyModule) typ(s *shape, path string, nest int) string {
	switch s.kind {
	case kString:
		return "str"
	case kNumber:
		return "float"
	case kInteger:
		return "int"
	case kBoolean:
		return "bool"
	case kNull:
		return "None"
	case kLiteral:
		return m.union([]*shape{s}, path, nest)
	case kArray:
		if nest >= MaxListNesting {
			return "Any"
		}
		return "list[" + m.typ(s.elem, path+"Item", nest+1) + "]"
	case kObject:
		if len(s.fields) > 0 {
			return m.class(s, path)
		}
		if nest >= MaxListNesting {
			return "Any"
		}
		return "dict[str, " + m.typ(s.extra, path+"Value", nest+1) + "]"
	case kUnion:
		return m.union(s.members, path, nest)
	}
	return "Any" // unknown, never
}

// union renders alternatives: literals merge into one Literal[...] at the
// place of the first, a literal number that is not an integer widens to
// float, duplicates are dropped. The distinct alternatives are written as
// an `A | B` chain, or, past maxChainedUnion of them, as one flat
// Union[...]: never truncated, never Any for their number.
func (m *pyModule) union(members []*shape, path string, nest int) string {
	records := 0
	for _, s := range members {
		switch {
		case s.kind == kObject && len(s.fields) > 0:
			records++
		case nest >= MaxListNesting && (s.kind == kArray || s.kind == kObject):
			return "Any" // decide before any class is emitted
		}
	}
	var parts, lits []string
	litAt := -1
	seen := map[string]bool{}
	add := func(t string) {
		if !seen[t] {
			seen[t] = true
			parts = append(parts, t)
		}
	}
	variant := 0
	for _, s := range members {
		if s.kind != kLiteral {
			p := path
			if records > 1 && s.kind == kObject && len(s.fields) > 0 {
				variant++
				p = path + "Variant" + strconv.Itoa(variant)
			}
			add(m.typ(s, p, nest))
			continue
		}
		switch s.lit.kind {
		case jString:
			lits = append(lits, quotePy(s.lit.s))
		case jBool:
			if s.lit.b {
				lits = append(lits, "True")
			} else {
				lits = append(lits, "False")
			}
		default: // a JSON number
			if strings.ContainsAny(s.lit.s, ".eE") {
				add("float") // Literal takes no floats
				continue
			}
			lits = append(lits, s.lit.s)
		}
		if litAt < 0 {
			litAt = len(parts)
			parts = append(parts, "") // placeholder
		}
	}
	if litAt >= 0 {
		parts[litAt] = "Literal[" + strings.Join(lits, ", ") + "]"
	}
	if len(parts) > maxChainedUnion {
		return "Union[" + strings.Join(parts, ", ") + "]"
	}
	return strings.Join(parts, " | ")
}

// class emits a TypedDict for a record shape (after the classes its fields
// need) and returns its name. Keys that cannot be class-body fields (not an
// ASCII identifier, a keyword, or starting with "__") select the functional
// TypedDict syntax.
func (m *pyModule) class(s *shape, path string) string {
	name := m.name(path)
	r := m.r
	mark := len(r.pyTypes)
	defer func() { r.pyTypes = r.pyTypes[:mark] }()
	functional := false
	for _, f := range s.fields {
		sub := "" // the name a class for the field's type starts from
		if k := f.typ.kind; k == kObject || k == kArray || k == kUnion {
			seg := camel(f.key)
			if seg == "" {
				seg = "Field"
			}
			sub = name + seg
		}
		r.pyTypes = append(r.pyTypes, m.typ(f.typ, sub, 0))
		functional = functional || !pyFieldName(f.key)
	}
	types := r.pyTypes[mark:]
	b := m.w
	typ := func(i int) {
		if s.fields[i].required {
			b.str(types[i])
			return
		}
		b.str("NotRequired[")
		b.str(types[i])
		b.byte(']')
	}
	if !functional {
		b.str("class ")
		b.str(name)
		b.str("(TypedDict):\n")
		for i, f := range s.fields {
			r.pyComment(b, "    # ", f.doc)
			b.str("    ")
			b.str(f.key)
			b.str(": ")
			typ(i)
			b.byte('\n')
		}
	} else {
		b.str(name)
		b.str(" = TypedDict(\n    ")
		b.quotePy(name)
		b.str(",\n    {\n")
		for i, f := range s.fields {
			r.pyComment(b, "        # ", f.doc)
			b.str("        ")
			b.quotePy(f.key)
			b.str(": ")
			typ(i)
			b.str(",\n")
		}
		b.str("    },\n)\n")
	}
	b.byte('\n')
	return name
}
