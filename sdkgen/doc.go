// Package sdkgen renders the Code Mode SDK — the only view of the tools a
// model gets in Code Mode — from the tools' JSON Schemas, as TypeScript
// declarations or Python stubs, plus the usage instructions around them
// (seed 001 § "SDK prompt section", § "Codegen"; seed 004 § "The Python SDK
// renderer").
//
// Rendering is pure, total and deterministic. Any bytes are accepted as a
// schema: what is not understood ($ref, patternProperties, tuple items,
// boolean schemas, malformed values such as "type": 5, invalid JSON)
// degrades to unknown (TypeScript) or Any (Python), never to an error or to
// text that does not compile. Keywords that only narrow a type (allOf, not,
// formats, bounds, patterns) are ignored, which widens the type. Tools are shown in byte-wise lexicographic
// order of their names whatever the input order; ReservedTool is never
// shown; of several tools sharing a name only the first by (name,
// description, schema bytes) is kept; invalid UTF-8 in names and text is
// replaced by U+FFFD (so a registry should reject such names). The same
// tool set therefore always yields byte-identical text and the prompt
// prefix stays cacheable. Time is linear in the input: each schema node is
// visited once, nesting beyond MaxDepth renders as unknown, and JSON nested
// deeper than the renderer could use is skipped without recursion.
//
// # Memory
//
// An SDK text is rendered into one buffer sized from the tools before
// rendering starts and handed out as the string, without a copy: the SDK
// of a 15.5 MiB tool list allocates about its own size (BenchmarkRender
// reports alloc-B/sdk-B; it was some fifteen times), not an intermediate
// string per type, comment and tool. Each tool's schemas are parsed and
// mapped in an arena the next tool reuses, their strings read in place.
// Where the text depends on what follows — a union drops an alternative
// written like an earlier one, an index signature needs the properties'
// types, a fence must outrun the backticks inside — the renderer writes,
// then compares, cuts or inserts in place. RenderWith adds what a caller
// needs not to copy or overspend: a Prefix written first into the same
// string (run_code's description, over MCP), and a Limit past which it
// stops and reports Over, so that telling a large SDK is too long costs
// about the limit.
//
// # Text from the tools
//
// Names, descriptions, keys and values come from the tools' authors
// (upstream MCP servers among them) and may try to hide text from a
// reader or reorder what they see. No SDK text — declarations, stubs,
// prompts, index — holds a character that does not show as itself (see
// printable): the Unicode bidi controls (U+202A–U+202E, U+2066–U+2069,
// U+200E, U+200F, U+061C), other format characters (zero-width spaces and
// joiners, the byte order mark, the soft hyphen, tag characters), spaces
// other than U+0020, line separators and controls. In string literals
// (tool names, keys, enum and const values, sources) they are escaped, so
// the value stays exact; in free text (descriptions, as doc comments,
// docstrings, comments and index summaries) plainText turns a control
// into U+FFFD and any other such character into a space.
//
// # Schema mapping
//
// string, number, integer (number in TypeScript, int in Python), boolean,
// null, array with items, object with properties and required (other
// properties optional: `?:` / NotRequired), enum and const (literal unions;
// a non-primitive member makes the type unknown), type arrays (unions) and
// anyOf/oneOf (unions). An object's properties keep the schema's order; a
// key listed in required but not declared is typed unknown. An object with
// declared properties is closed unless additionalProperties is true or a
// schema (then TypeScript gets an index signature, typed unknown unless
// every declared property has exactly the schema's type, so that it is
// valid under --strict); an object without properties is a map,
// `{ [key: string]: T }` / dict[str, T]. Descriptions become JSDoc or
// Python docstrings and comments.
//
// # TypeScript
//
// TypeScriptSource declares `declare const tools: {...}` with every tool
// as a quoted key (no aliases: `tools["my-tool"](args)`), arguments as
// inline object types (keys that are not ASCII identifiers quoted) and
// results as Promise<string>, or, for a tool with an OutputSchema (MCP's
// outputSchema, the canonical output of seed 004), as a Promise of the type
// that schema describes. JSDoc text cannot close its comment ("*/" is
// written "*\/") and a line starting with "@" is written "\@" so that it
// is not read as a tag. String literals escape every non-printable
// character. The output passes `tsc --noEmit --strict`.
//
// # Python
//
// PythonSource follows seed 004: a TypedDict per argument shape, named from
// the PascalCased tool name plus "Args", and per output shape, named with
// "Output" (nested object shapes append their path: property names, "Item",
// "Value", "VariantN"); a method returns str, or the output schema's type
// for a tool with one; unique in the module,
// never a keyword, builtin or module name, and defined before use so the
// module also executes; class Tools with one `async def` per tool whose
// docstring is the first statement of its body; a tool whose name cannot be
// a method (see below) listed as a `# tools["name"](args: T) -> R`
// comment in its sorted place; an explicit `pass` when no method is
// emitted; list/dict nesting capped at MaxListNesting so no line nears
// CPython's 200-bracket limit; keys that cannot be class-body fields select
// the functional TypedDict syntax. A union's alternatives are deduplicated
// (literals merge into one Literal[...]) and written as an `A | B` chain,
// or, past 100 distinct alternatives, as one flat `Union[A, B, ...]`:
// CPython compiles a `|` chain recursively, one level per member, while a
// subscript's elements sit side by side, so a union of any length
// compiles; it is never truncated or degraded to Any for its length. The
// stubs target CPython 3.11+ (NotRequired).
//
// Python identifiers are restricted to ASCII on purpose: a name with any
// non-ASCII character is treated as a non-identifier (comment form, and
// dropped from derived class names). This sidesteps the Unicode-table skew
// seed 004 describes (Go's tables and the interpreter's may differ in
// XID_Start/XID_Continue membership and case mapping), so the output
// parses on any Python 3 whatever the Unicode version on either side. A
// tool name is also listed as a comment when it is a keyword, starts with
// "__" (dunder and mangled names would not be reachable as attributes), or
// is one of the names the stub annotations evaluate inside class Tools
// (Any, Literal, NotRequired, TypedDict, Union, str, int, float, bool,
// list, dict): a method of that name would shadow it. Such tools remain
// callable as tools["name"](args).
//
// Both instructions say a call resolves to the tool's text; when a visible
// tool declares an output schema they add one sentence saying such a tool
// resolves to its structured value instead (so a tool set without output
// schemas keeps its text byte for byte).
//
// # The index and declarations on demand
//
// FormatIndex (TypeScriptIndex, PythonIndex) is the SDK for a model that
// should not read every declaration up front: the same usage
// instructions, then one line per tool, `tools["name"]({a, b?})` (its
// argument names in schema order, "?" marking an optional one; `{}` for
// none, `{...}` for a map, `args` for a schema that is not an object) and
// the first sentence of its description on one line (see summary; at
// most MaxIndexSummary bytes), grouped by Tool.Source (the host's own
// tools first, then each MCP server in byte-wise order, tools in SDK
// order within a group), fenced, and last the instruction to call
// DescribeTool with the names the program will use. It is deterministic
// and byte-stable like the full SDK.
//
// What DescribeTool returns is FormatSource rendered for the tools Select
// picks: it compiles on its own, and each tool's TypeScript member is the
// full SDK's byte for byte. Python class names are derived and made unique
// within one module, so a tool whose class name needed a disambiguation
// suffix in the full SDK (two tools mapping to one name, as "foo-bar" and
// "foo_bar" both give FooBarArgs; or a class colliding with another
// tool's method name) may get another suffix alone: its classes and
// method then differ from the full SDK's in those names only.
//
// The Python instructions state the runtime contract of seed 004: the
// stubs are for reading only; when the program runs, the only names bound
// besides Python's builtins and its own imports are tools and
// ToolCallError, so the declared TypedDict classes (and class Tools) do not
// exist, and arguments are plain dict and list values.
package sdkgen
