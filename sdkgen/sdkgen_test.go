package sdkgen

import (
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestParseJSON(t *testing.T) {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	tests := []struct {
		in   string
		want string // a rendering of the parsed value, see dump
	}{
		{`null`, "null"},
		{` true `, "true"},
		{`-0.5e+3`, "num(-0.5e+3)"},
		{`"a\u00e9\n\"\\\/"`, `str("aé\n\"\\/")`},
		{`"\ud83d\ude00"`, `str("😀")`},
		{`"\ud800x"`, `str("�x")`},
		{`"\udc00\ud800"`, `str("��")`},
		{`"\ud800\u0041"`, `str("�A")`},
		{"\"\xff\"", `str("�")`},
		{`{"a":1,"b":2,"a":3}`, "{a:num(3),b:num(2)}"},
		{`[1,[2,{}]]`, "[num(1),[num(2),{}]]"},
		// Past maxParseDepth values are skipped and kept as opaque markers.
		{deep, strings.Repeat("[", maxParseDepth) + "invalid" + strings.Repeat("]", maxParseDepth)},
		{`{"x":` + deep + `}`, "{x:" + strings.Repeat("[", maxParseDepth-1) + "invalid" + strings.Repeat("]", maxParseDepth-1) + "}"},
		{`{"x":` + strings.Repeat("[", 300) + `"]]"` + strings.Repeat("]", 300) + `}`, "{x:" + strings.Repeat("[", maxParseDepth-1) + "invalid" + strings.Repeat("]", maxParseDepth-1) + "}"},
		// Not JSON.
		{``, "invalid"},
		{`{`, "invalid"},
		{`{"a":1,}`, "invalid"},
		{`[1,]`, "invalid"},
		{`01`, "invalid"},
		{`1.`, "invalid"},
		{`.5`, "invalid"},
		{`-`, "invalid"},
		{`tru`, "invalid"},
		{`"a` + "\n" + `"`, "invalid"},
		{`"\x"`, "invalid"},
		{`"\u12"`, "invalid"},
		{`{"a" 1}`, "invalid"},
		{`{1:2}`, "invalid"},
		{`1 2`, "invalid"},
		{`{"x":` + strings.Repeat("[", 300) + strings.Repeat("}", 300) + `}`, "invalid"},
		{`{"x":` + strings.Repeat("[", 300) + `}`, "invalid"},
	}
	for _, tt := range tests {
		if got := dump(parseJSON([]byte(tt.in))); got != tt.want {
			in := tt.in
			if len(in) > 40 {
				in = in[:40] + "..."
			}
			t.Errorf("parseJSON(%q) = %.80s, want %.80s", in, got, tt.want)
		}
	}
}

func dump(v *jvalue) string {
	switch v.kind {
	case jNull:
		return "null"
	case jBool:
		return litText(v)
	case jNumber:
		return "num(" + v.s + ")"
	case jString:
		b, _ := json.Marshal(v.s)
		return "str(" + strings.ReplaceAll(string(b), `\ufffd`, "�") + ")"
	case jArray:
		parts := make([]string, len(v.arr))
		for i, e := range v.arr {
			parts[i] = dump(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case jObject:
		parts := make([]string, len(v.keys))
		for i, k := range v.keys {
			parts[i] = k + ":" + dump(v.vals[i])
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return "invalid"
}

func TestObjectIndexAfterManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 20 {
		b.WriteString(`"k` + string(rune('a'+i)) + `":` + string(rune('0'+i%10)) + ",")
	}
	b.WriteString(`"kc":"again"}`)
	v := parseJSON([]byte(b.String()))
	if len(v.keys) != 20 || v.keys[2] != "kc" {
		t.Fatalf("keys %v", v.keys)
	}
	if s, _ := v.get("kc").str(); s != "again" {
		t.Errorf("kc = %s, want the last value", dump(v.get("kc")))
	}
	if v.get("kt") == nil || v.get("zz") != nil {
		t.Error("lookup through the index")
	}
}

func TestQuote(t *testing.T) {
	tests := []struct{ in, ts, py string }{
		{`plain`, `"plain"`, `"plain"`},
		{`q"b\`, `"q\"b\\"`, `"q\"b\\"`},
		{"n\nr\rt\t", `"n\nr\rt\t"`, `"n\nr\rt\t"`},
		{"\x00\x1f\x7f", `"\u0000\u001F\u007F"`, `"\x00\x1f\x7f"`},
		{"\u0085\u2028\u2029\ufeff\u200b", `"\u0085\u2028\u2029\uFEFF\u200B"`, `"\x85\u2028\u2029\ufeff\u200b"`},
		{"\U000E0001", `"\uDB40\uDC01"`, `"\U000e0001"`},
		{"é日😀", `"é日😀"`, `"é日😀"`},
		{"bad\xffbyte", `"bad�byte"`, `"bad�byte"`},
	}
	for _, tt := range tests {
		if got := quoteTS(tt.in); got != tt.ts {
			t.Errorf("quoteTS(%q) = %s, want %s", tt.in, got, tt.ts)
		}
		if got := quotePy(tt.in); got != tt.py {
			t.Errorf("quotePy(%q) = %s, want %s", tt.in, got, tt.py)
		}
	}
}

func TestDocLines(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" \n\t\n ", nil},
		{"one", []string{"one"}},
		{"\n\n  a  \n\nb\t\n\n", []string{"  a", "", "b"}},
		{"a\r\nb\rc\u2028d\u2029e", []string{"a", "b", "c", "d", "e"}},
		{"x\x00y\x1bz\u0085w\tv", []string{"x�y�z�w\tv"}},
		{"a\u202eb\u2066c\u2069d\u200fe\u00a0f\U000E0041g", []string{"a b c d e f g"}},
		{"bad\xff", []string{"bad�"}},
	}
	for _, tt := range tests {
		got := docLines(tt.in)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("docLines(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTSDoc(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"One line.", "/** One line. */\n"},
		{"a */ b", "/** a *\\/ b */\n"},
		{"@param x", "/** \\@param x */\n"},
		{"x\n  @returns y\n\nz @see w", "/**\n * x\n *   \\@returns y\n *\n * z @see w\n */\n"},
	}
	for _, tt := range tests {
		var b strings.Builder
		writeTSDoc(&b, "", tt.in)
		if b.String() != tt.want {
			t.Errorf("writeTSDoc(%q) = %q, want %q", tt.in, b.String(), tt.want)
		}
	}
}

func TestPyDocstring(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"One.", `"""One."""` + "\n"},
		{`"`, `"""\""""` + "\n"},
		{`say "hi"`, `"""say "hi\""""` + "\n"},
		{`a """ b`, `"""a \"\"" b"""` + "\n"},
		{`C:\dir\n`, `"""C:\\dir\\n"""` + "\n"},
		{"a\tb\u200bc", `"""a\tb c"""` + "\n"},
		{"first \"\nsecond \"", "\"\"\"first \"\n  second \"\n  \"\"\"\n"},
	}
	for _, tt := range tests {
		var b strings.Builder
		writePyDocstring(&b, "  ", tt.in)
		want := tt.want
		if want != "" && !strings.HasPrefix(want, "  ") {
			want = "  " + want
		}
		if b.String() != want {
			t.Errorf("writePyDocstring(%q) = %q, want %q", tt.in, b.String(), want)
		}
	}
}

func TestCamel(t *testing.T) {
	tests := map[string]string{
		"read_file": "ReadFile", "readFile": "ReadFile", "my-tool": "MyTool", "a.b": "AB",
		"HTTPGet": "HTTPGet", "with space": "WithSpace", "café-menu": "CafMenu", "日本": "",
		"": "", "3d": "3d", "__proto__": "Proto", "x1y": "X1y",
	}
	for in, want := range tests {
		if got := camel(in); got != want {
			t.Errorf("camel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPyMethodName(t *testing.T) {
	for name, want := range map[string]bool{
		"read_file": true, "_private": true, "match": true, "type": true, "self": true, "Tools": true,
		"class": false, "None": false, "async": false, "__init__": false, "__x": false,
		"my-tool": false, "café": false, "": false, "1st": false, "str": false, "list": false, "Any": false, "Union": false,
	} {
		if got := pyMethodName(name); got != want {
			t.Errorf("pyMethodName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestVisible(t *testing.T) {
	tools := []Tool{
		{Name: "b", Description: "2", InputSchema: json.RawMessage(`{"b":1}`)},
		{Name: ReservedTool, Description: "transport"},
		{Name: "a\xff", Description: "bad\xfe"},
		{Name: "b", Description: "2", InputSchema: json.RawMessage(`{"a":1}`)},
		{Name: "b", Description: "1", InputSchema: json.RawMessage(`{"c":1}`)},
		{Name: "a\xfe", Description: "also bad"},
		{Name: "B"},
	}
	got := visible(tools)
	var names []string
	for _, t := range got {
		names = append(names, t.Name+"/"+t.Description+"/"+string(t.InputSchema))
	}
	want := []string{"B//", "a�/also bad/", "b/1/{\"c\":1}"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("visible = %q, want %q", names, want)
	}
	if tools[2].Name != "a\xff" {
		t.Error("visible modified its input")
	}
}

func TestReservedToolNeverShown(t *testing.T) {
	tools := []Tool{{Name: ReservedTool, Description: "transport", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	for _, out := range goldenOutputs {
		if got := out.render(tools); strings.Contains(got, `"`+ReservedTool+`"`) || strings.Contains(got, "def "+ReservedTool) {
			t.Errorf("%s shows %s:\n%s", out.file, ReservedTool, got)
		}
	}
}

func TestRender(t *testing.T) {
	tools := []Tool{{Name: "x", InputSchema: json.RawMessage(`{"type":"string"}`)}}
	for _, c := range []struct {
		lang   Language
		format Format
		want   string
	}{
		{TypeScript, FormatSource, TypeScriptSource(tools)},
		{TypeScript, FormatPrompt, TypeScriptPrompt(tools)},
		{TypeScript, "", TypeScriptPrompt(tools)},
		{Python, FormatSource, PythonSource(tools)},
		{Python, FormatPrompt, PythonPrompt(tools)},
	} {
		got, err := Render(c.lang, c.format, tools)
		if err != nil || got != c.want {
			t.Errorf("Render(%q, %q) = %q, %v", c.lang, c.format, got, err)
		}
	}
	if _, err := Render("ruby", FormatSource, tools); !errors.Is(err, ErrUnknownLanguage) {
		t.Errorf("unknown language: %v", err)
	}
	if _, err := Render(Python, "html", tools); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("unknown format: %v", err)
	}
	for _, l := range Languages() {
		if !l.Supported() {
			t.Errorf("%s not supported", l)
		}
	}
	if Language("ruby").Supported() {
		t.Error("ruby supported")
	}
}

func TestFence(t *testing.T) {
	if got := fence("ts", "x\n"); got != "```ts\nx\n```\n" {
		t.Errorf("fence = %q", got)
	}
	if got := fence("ts", "a ```` b\n"); got != "`````ts\na ```` b\n`````\n" {
		t.Errorf("fence = %q", got)
	}
}

// TestPromptEmbedsSource checks each prompt is the instructions followed
// by the source in a code block the source cannot close.
func TestPromptEmbedsSource(t *testing.T) {
	tools := []Tool{{Name: "x", Description: "```\n````` end", InputSchema: json.RawMessage(`{}`)}}
	if got, want := TypeScriptPrompt(tools), tsInstructions+"``````ts\n"+TypeScriptSource(tools)+"``````\n"; got != want {
		t.Errorf("TypeScriptPrompt = %q, want %q", got, want)
	}
	if got, want := PythonPrompt(tools), pyInstructions+"``````python\n"+PythonSource(tools)+"``````\n"; got != want {
		t.Errorf("PythonPrompt = %q, want %q", got, want)
	}
}

// TestPythonPromptBoundNames pins seed 004's runtime contract in the
// Python instructions: exactly tools and ToolCallError are bound when the
// program runs, and the stubs declare both; the declared TypedDict classes
// are not bound; arguments are plain dict and list values. The text must
// not claim that no declared class exists, since ToolCallError does.
func TestPythonPromptBoundNames(t *testing.T) {
	m := regexp.MustCompile("the only names bound [^`]*`([^`]+)` and `([^`]+)`").FindStringSubmatch(pyInstructions)
	if m == nil {
		t.Fatalf("the instructions do not name the bound names:\n%s", pyInstructions)
	}
	if bound := []string{m[1], m[2]}; !slices.Equal(bound, []string{"tools", "ToolCallError"}) {
		t.Errorf("bound names %q, want tools and ToolCallError", bound)
	}
	src := PythonSource([]Tool{{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}})
	for _, decl := range []string{"\nclass ToolCallError(Exception):\n", "\ntools: Tools\n", "\nclass ReadFileArgs(TypedDict):\n"} {
		if !strings.Contains(src, decl) {
			t.Errorf("the stubs do not declare %q", strings.TrimSpace(decl))
		}
	}
	for _, want := range []string{"the `TypedDict` classes", "do not exist", "plain `dict` and `list` values", "do not construct the `TypedDict` classes"} {
		if !strings.Contains(pyInstructions, want) {
			t.Errorf("the instructions do not say %q", want)
		}
	}
	if strings.Contains(pyInstructions, "none of their classes") {
		t.Error("the instructions say no declared class exists, but ToolCallError is bound")
	}
}
