package sdkgen

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// subsets returns deterministic subsets of tools' names: every single
// tool, all of them, and n random ones.
func subsets(tools []Tool, rng *rand.Rand, n int) [][]string {
	var names []string
	for _, t := range visible(tools) {
		names = append(names, t.Name)
	}
	var out [][]string
	for _, name := range names {
		out = append(out, []string{name})
	}
	if len(names) > 0 {
		out = append(out, slices.Clone(names))
	}
	for range n {
		var pick []string
		for _, name := range names {
			if rng.Intn(2) == 0 {
				pick = append(pick, name)
			}
		}
		rng.Shuffle(len(pick), func(i, j int) { pick[i], pick[j] = pick[j], pick[i] })
		out = append(out, pick)
	}
	return out
}

// describeSets returns the golden tool sets and generated ones, named.
func describeSets(t *testing.T) map[string][]Tool {
	sets := map[string][]Tool{}
	for _, c := range goldenCases(t) {
		sets[c] = loadFixture(t, filepath.Join(goldenDir, c, "tools.json"))
	}
	for i := range 100 {
		sets[fmt.Sprintf("generated_%03d", i)] = genTools(rand.New(rand.NewSource(int64(i))))
	}
	return sets
}

// tsMembers splits a TypeScriptSource into its members, one per tool.
func tsMembers(tools []Tool) map[string]string {
	out := map[string]string{}
	for _, t := range visible(tools) {
		var b strings.Builder
		writeTSMember(&b, t)
		out[t.Name] = b.String()
	}
	return out
}

// TestDescribeTypeScriptIdentity checks that the TypeScript declarations
// of any subset of a tool set (what describe_tools returns) are exactly
// the full SDK's declarations of those tools, byte for byte, between the
// same first and last lines: over every golden case and generated sets,
// each tool alone, all of them and random subsets.
func TestDescribeTypeScriptIdentity(t *testing.T) {
	rng := rand.New(rand.NewSource(19))
	for name, tools := range describeSets(t) {
		full := TypeScriptSource(tools)
		members := tsMembers(tools)
		for _, m := range members {
			if !strings.Contains(full, m) {
				t.Fatalf("%s: a member is not in the full SDK:\n%s", name, m)
			}
		}
		for _, names := range subsets(tools, rng, 5) {
			sel, unknown := Select(tools, names)
			if len(unknown) > 0 || len(sel) != len(names) {
				t.Fatalf("%s: Select(%q) = %d tools, unknown %q", name, names, len(sel), unknown)
			}
			got := TypeScriptSource(sel)
			sorted := slices.Clone(names)
			slices.Sort(sorted)
			want := "declare const tools: {};\n"
			if len(sorted) > 0 {
				want = "declare const tools: {\n"
				for _, n := range sorted {
					want += members[n]
				}
				want += "};\n"
			}
			if got != want {
				t.Errorf("%s: declarations of %q differ from the full SDK's:\n%s", name, names, lineDiff(want, got))
			}
		}
	}
}

// pyClassName matches the class names a stub module defines.
var pyClassName = regexp.MustCompile(`(?m)^(?:class ([A-Za-z0-9_]+)\(TypedDict\)|([A-Za-z0-9_]+) = TypedDict\()`)

// alphaRename replaces each class name a piece defines by its position.
func alphaRename(p pyPiece) (string, []string) {
	var names []string
	for _, m := range pyClassName.FindAllStringSubmatch(p.classes, -1) {
		names = append(names, m[1]+m[2])
	}
	text := p.classes + p.entry
	if len(names) == 0 {
		return text, nil
	}
	sorted := slices.Clone(names)
	slices.SortFunc(sorted, func(a, b string) int { return len(b) - len(a) }) // longest first
	pairs := []string{}
	for _, n := range sorted {
		pairs = append(pairs, n, fmt.Sprintf("\x00%d\x00", slices.Index(names, n)))
	}
	re := regexp.MustCompile(`\b(` + strings.Join(quoteAll(sorted), "|") + `)\b`)
	r := strings.NewReplacer(pairs...)
	return re.ReplaceAllStringFunc(text, r.Replace), names
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = regexp.QuoteMeta(s)
	}
	return out
}

var trailingDigits = regexp.MustCompile(`[0-9]+$`)

// TestDescribePythonIdentity checks that the Python stubs of any subset
// of a tool set are the full SDK's: the module is the fixed header, each
// selected tool's classes in order, class Tools with each selected tool's
// entry; and each tool's classes and entry are byte for byte the full
// SDK's, except where a class name takes a different disambiguation
// suffix (the full set has another tool whose class or method name
// collides, the subset does not, or the reverse). Those exceptions must
// differ in nothing but the suffixes; the test counts and logs them.
func TestDescribePythonIdentity(t *testing.T) {
	rng := rand.New(rand.NewSource(19))
	exceptions, checked := 0, 0
	for name, tools := range describeSets(t) {
		_, fullPieces := pythonSource(tools)
		full := map[string]pyPiece{}
		for _, p := range fullPieces {
			full[p.name] = p
		}
		for _, names := range subsets(tools, rng, 5) {
			sel, _ := Select(tools, names)
			src, pieces := pythonSource(sel)
			// The module is made of the pieces and nothing else.
			var classes, entries strings.Builder
			methods := 0
			for i, p := range pieces {
				classes.WriteString(p.classes)
				if i > 0 {
					entries.WriteString("\n")
				}
				entries.WriteString(p.entry)
				if strings.HasPrefix(p.entry, "    async def ") {
					methods++
				}
			}
			if methods == 0 {
				if len(pieces) > 0 {
					entries.WriteString("\n")
				}
				entries.WriteString("    pass\n")
			}
			if want := pyHeader + classes.String() + "class Tools:\n" + entries.String() + "\ntools: Tools\n"; src != want {
				t.Fatalf("%s %q: module is not its pieces:\n%s", name, names, lineDiff(want, src))
			}
			for _, p := range pieces {
				checked++
				f := full[p.name]
				if p == f {
					continue
				}
				gotText, gotNames := alphaRename(p)
				wantText, wantNames := alphaRename(f)
				if gotText != wantText || len(gotNames) != len(wantNames) {
					t.Errorf("%s %q: tool %q differs from the full SDK beyond class names:\n%s", name, names, p.name,
						lineDiff(f.classes+f.entry, p.classes+p.entry))
					continue
				}
				for i := range gotNames {
					if trailingDigits.ReplaceAllString(gotNames[i], "") != trailingDigits.ReplaceAllString(wantNames[i], "") {
						t.Errorf("%s %q: tool %q: class %s is %s in the full SDK: more than a suffix", name, names, p.name, gotNames[i], wantNames[i])
					}
				}
				exceptions++
				if exceptions <= 5 {
					t.Logf("disambiguation-suffix exception: %s, tool %q: classes %v in the subset, %v in the full SDK", name, p.name, gotNames, wantNames)
				}
			}
		}
	}
	t.Logf("%d tool declarations compared, %d differ only in a class name's disambiguation suffix", checked, exceptions)
	if checked == 0 {
		t.Fatal("nothing compared")
	}
}

// TestDescribeNoExceptionsInGoldenSets pins that in the golden tool sets
// (names as tools are really named) describe_tools output matches the full
// SDK exactly for every single tool: the suffix exception needs two tools
// whose names map to one class name.
func TestDescribeNoExceptionsInGoldenSets(t *testing.T) {
	for _, c := range []string{"basic", "descriptions", "nesting", "output", "sources", "types", "unions"} {
		tools := loadFixture(t, filepath.Join(goldenDir, c, "tools.json"))
		_, fullPieces := pythonSource(tools)
		for _, f := range fullPieces {
			sel, _ := Select(tools, []string{f.name})
			_, pieces := pythonSource(sel)
			if len(pieces) != 1 || pieces[0] != f {
				t.Errorf("%s: tool %q alone renders differently from the full SDK", c, f.name)
			}
		}
	}
}

// TestDescribeSuffixException shows the exception: two tools whose names
// both map to the class name FooBarArgs. In the full SDK the second takes
// FooBarArgs2; alone, it is FooBarArgs.
func TestDescribeSuffixException(t *testing.T) {
	tools := []Tool{
		{Name: "foo-bar", InputSchema: []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)},
		{Name: "foo_bar", InputSchema: []byte(`{"type":"object","properties":{"b":{"type":"string"}}}`)},
	}
	full := PythonSource(tools)
	if !strings.Contains(full, "class FooBarArgs2(TypedDict):") || !strings.Contains(full, "def foo_bar(self, args: FooBarArgs2)") {
		t.Fatalf("full SDK:\n%s", full)
	}
	sel, _ := Select(tools, []string{"foo_bar"})
	alone := PythonSource(sel)
	if !strings.Contains(alone, "def foo_bar(self, args: FooBarArgs)") {
		t.Fatalf("subset:\n%s", alone)
	}
	// TypeScript has no derived names: no exception there.
	if !strings.Contains(TypeScriptSource(tools), strings.TrimPrefix(strings.TrimSuffix(TypeScriptSource(sel), "};\n"), "declare const tools: {\n")) {
		t.Error("TypeScript subset differs from the full SDK")
	}
}

func TestSelect(t *testing.T) {
	tools := []Tool{{Name: "b"}, {Name: "a"}, {Name: ReservedTool}, {Name: DescribeTool}, {Name: "bad\xff"}}
	sel, unknown := Select(tools, []string{"b", "nope", "a", "b", ReservedTool, DescribeTool, "nope", "bad\uFFFD"})
	var got []string
	for _, s := range sel {
		got = append(got, s.Name)
	}
	if !slices.Equal(got, []string{"a", "b", "bad\uFFFD"}) {
		t.Errorf("selected %q", got)
	}
	if !slices.Equal(unknown, []string{"nope", ReservedTool, DescribeTool}) {
		t.Errorf("unknown %q", unknown)
	}
	if sel, unknown := Select(tools, nil); len(sel) != 0 || len(unknown) != 0 {
		t.Errorf("Select(nil) = %v, %v", sel, unknown)
	}
}

func TestSummary(t *testing.T) {
	long := strings.Repeat("word ", 100)
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"Add two numbers.", "Add two numbers."},
		{"First. Second.", "First."},
		{"Really? Yes.", "Really?"},
		{"Stop! Now.", "Stop!"},
		{"No end", "No end"},
		{"Use e.g. this one. Then.", "Use e.g. this one."},
		{"Version 1.2 is out. More.", "Version 1.2 is out."},
		{"  lead\n  and   wrapped\tline.\n\nSecond paragraph.", "lead and wrapped line."},
		{"\n\n\nAfter blank lines. X", "After blank lines."},
		{"line\u2028sep\u0085nel\x07bell\u202eRLO\u2066LRI\u200bZWSP", "line sep\uFFFDnel\uFFFDbell RLO LRI ZWSP"},
		{"bad\xffutf8.", "bad\uFFFDutf8."},
		{"a.b.c", "a.b.c"},
		{long, strings.TrimSpace(strings.Repeat("word ", 39)) + "…"},
		{strings.Repeat("x", 300), strings.Repeat("x", MaxIndexSummary-len("…")) + "…"},
		{strings.Repeat("é", 300), strings.Repeat("é", (MaxIndexSummary-len("…"))/2) + "…"},
	} {
		got := summary(c.in)
		if got != c.want {
			t.Errorf("summary(%q) = %q, want %q", c.in, got, c.want)
		}
		if len(got) > MaxIndexSummary || strings.ContainsAny(got, "\n\r") {
			t.Errorf("summary(%q) = %q: too long or not one line", c.in, got)
		}
	}
}

// TestIndexLines checks the shape of the index for every golden case and
// generated set: exactly one line per visible tool, in order within its
// source group, no line but the group comments between the fences, and
// the describe instruction last.
func TestIndexLines(t *testing.T) {
	for name, tools := range describeSets(t) {
		for _, idx := range []struct {
			text, comment, footer string
		}{{TypeScriptIndex(tools), "// ", tsIndexFooter}, {PythonIndex(tools), "# ", pyIndexFooter}} {
			if !strings.HasSuffix(idx.text, "\n\n"+idx.footer) {
				t.Fatalf("%s: index does not end with the describe instruction:\n%s", name, idx.text)
			}
			open := strings.Index(idx.text, "\n```")
			block := idx.text[open+1:]
			block = block[strings.IndexByte(block, '\n')+1:]
			block = block[:strings.Index(block, "\n`")+1]
			var lines []string
			for _, l := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
				switch {
				case strings.HasPrefix(l, "tools["):
					lines = append(lines, l)
				case strings.HasPrefix(l, idx.comment) || l == "":
				default:
					t.Errorf("%s: stray line in the index: %q", name, l)
				}
			}
			vis := visible(tools)
			if len(lines) != len(vis) {
				t.Errorf("%s: %d index lines for %d tools:\n%s", name, len(lines), len(vis), block)
				continue
			}
			for _, tool := range vis {
				prefix := "tools[" + quoteTS(tool.Name) + "]("
				n := 0
				for _, l := range lines {
					if strings.HasPrefix(l, prefix) {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%s: %d lines for tool %q", name, n, tool.Name)
				}
			}
		}
	}
}

func TestRenderIndex(t *testing.T) {
	tools := []Tool{{Name: "a", Description: "A tool."}}
	for _, l := range Languages() {
		got, err := Render(l, FormatIndex, tools)
		if err != nil {
			t.Fatal(err)
		}
		want := TypeScriptIndex(tools)
		if l == Python {
			want = PythonIndex(tools)
		}
		if got != want {
			t.Errorf("Render(%s, index) differs from the %s index", l, l)
		}
	}
}

// Of two tools sharing a name, the index keeps the same one whatever the
// input order, source included.
func TestIndexDuplicateNamesDeterministic(t *testing.T) {
	a := Tool{Name: "x", Description: "Same.", Source: "a"}
	b := Tool{Name: "x", Description: "Same.", Source: "b"}
	if TypeScriptIndex([]Tool{a, b}) != TypeScriptIndex([]Tool{b, a}) {
		t.Error("the index depends on the input order")
	}
}
