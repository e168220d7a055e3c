package sdkgen

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// invisibleRunes are characters that hide or reorder text: the bidi
// embeddings, overrides and isolates, the direction marks (Trojan Source,
// CVE-2021-42574), and other invisible format characters and spaces.
var invisibleRunes = []rune{
	0x202A, 0x202B, 0x202C, 0x202D, 0x202E, // LRE RLE PDF LRO RLO
	0x2066, 0x2067, 0x2068, 0x2069, // LRI RLI FSI PDI
	0x200E, 0x200F, 0x061C, // LRM RLM ALM
	0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD, 0x180E, // zero-width, word joiner, BOM, soft hyphen, Mongolian vowel separator
	0xE0001, 0xE0041, 0xE007F, // tag characters (invisible text)
	0x00A0, 0x3000, // spaces other than U+0020
}

// hiddenIn finds a character in an SDK text that does not show as itself:
// a format character (every bidi control is one), a private-use code
// point, a line or paragraph separator, or a space other than U+0020,
// tab or line feed. It does not use the renderer's own printable, so that
// a fault there cannot hide from it.
func hiddenIn(s string) (rune, int, bool) {
	for i, r := range s {
		switch {
		case r == '\n' || r == '\t' || r == ' ':
		case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Co, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r),
			unicode.IsSpace(r), unicode.IsControl(r):
			return r, i, true
		}
	}
	return 0, 0, false
}

// renderers is every SDK text a tool set becomes.
var renderers = []struct {
	name   string
	render func([]Tool) string
}{
	{"TypeScriptSource", TypeScriptSource}, {"TypeScriptPrompt", TypeScriptPrompt}, {"TypeScriptIndex", TypeScriptIndex},
	{"PythonSource", PythonSource}, {"PythonPrompt", PythonPrompt}, {"PythonIndex", PythonIndex},
}

// TestInvisibleNeverReachesSDKText puts each invisible character into
// every place an upstream tool's text reaches an SDK text — its name, its
// description (one line and several; as a Python method's docstring and
// as the comment of a tool that cannot be a method), a property's key and
// description (class and functional TypedDict syntax, nested, in the
// output schema), enum and const values, the source it comes from — and
// checks that no SDK text holds it: free text shows a space in its place,
// string literals its escape, and the text around it is kept.
func TestInvisibleNeverReachesSDKText(t *testing.T) {
	for _, r := range invisibleRunes {
		c := string(r)
		desc := func(s string) string { return "Doc" + s + "before" + c + "after." }
		prop := fmt.Sprintf(`{"type":"string","description":%s}`, jsonText(desc("prop")))
		tools := []Tool{
			{Name: "plain", Description: desc("tool") + "\nSecond" + c + "line.", Source: "up" + c + "stream",
				InputSchema: []byte(fmt.Sprintf(`{"type":"object","properties":{"p":%s,"list":{"type":"array","items":{"type":"object","properties":{"q":%s}}},`+
					`"mode":{"enum":[%s,"x"]},"fixed":{"const":%s},%s:{"type":"integer"}},"required":["p"]}`, prop, prop, jsonText("a"+c+"b"), jsonText("k"+c+"v"), jsonText("key"+c+"name"))),
				OutputSchema: []byte(fmt.Sprintf(`{"type":"object","properties":{"out":%s,"kind":{"enum":[%s]}}}`, prop, jsonText("o"+c+"k")))},
			{Name: "not-a-method", Description: desc("comment"),
				InputSchema: []byte(fmt.Sprintf(`{"type":"object","properties":{"my-key":%s}}`, prop))},
			{Name: "name" + c + "d", Description: desc("named"), InputSchema: []byte(`{"type":"object"}`)},
		}
		for _, rd := range renderers {
			out := rd.render(tools)
			if h, at, ok := hiddenIn(out); ok {
				t.Errorf("%U: %s holds %U at byte %d: %q", r, rd.name, h, at, out[max(0, at-40):min(len(out), at+40)])
			}
			// The free text around the character is kept, apart.
			if !strings.Contains(out, "before after.") {
				t.Errorf("%U: %s lost the text around the character:\n%s", r, rd.name, out)
			}
		}
		// Names, keys and values are string literals: escaped, exact.
		ts, py := quoteTS("name"+c+"d"), quotePy("name"+c+"d")
		for _, want := range []struct{ name, out, lit string }{
			{"TypeScriptSource", TypeScriptSource(tools), ts},
			{"TypeScriptIndex", TypeScriptIndex(tools), ts},
			{"PythonSource", PythonSource(tools), py},
			{"PythonIndex", PythonIndex(tools), ts},
			{"TypeScriptSource", TypeScriptSource(tools), quoteTS("key" + c + "name")},
			{"TypeScriptSource", TypeScriptSource(tools), quoteTS("a" + c + "b")},
			{"TypeScriptSource", TypeScriptSource(tools), quoteTS("k" + c + "v")},
			{"TypeScriptSource", TypeScriptSource(tools), quoteTS("o" + c + "k")},
			{"PythonSource", PythonSource(tools), quotePy("key" + c + "name")},
			{"PythonSource", PythonSource(tools), quotePy("a" + c + "b")},
			{"PythonSource", PythonSource(tools), quotePy("o" + c + "k")},
			{"TypeScriptIndex", TypeScriptIndex(tools), quoteTS("up" + c + "stream")},
		} {
			if !strings.Contains(want.lit, `\u`) && !strings.Contains(want.lit, `\U`) && !strings.Contains(want.lit, `\x`) {
				t.Errorf("%U: the literal %s does not escape it", r, want.lit)
			}
			if !strings.Contains(want.out, want.lit) {
				t.Errorf("%U: %s does not hold the literal %s", r, want.name, want.lit)
			}
		}
	}
}

// jsonText is s as a JSON string.
func jsonText(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// plainText is the one place free text is neutralised: the index line and
// each doc line show the same characters.
func TestPlainText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"a\u202Eb\u2066c\u2069d", "a b c d"},
		{"tab\tand\nline", "tab\tand\nline"},
		{"cr\r\nlf\rls\u2028ps\u2029end", "cr\nlf\nls\nps\nend"},
		{"bell\x07esc\x1bnel\u0085del\x7f", "bell\uFFFDesc\uFFFDnel\uFFFDdel\uFFFD"},
		{"nbsp\u00A0ideo\u3000", "nbsp ideo "},
		{"tag\U000E0041\U000E0042s", "tag  s"},
		{"bad\xffutf8", "bad\uFFFDutf8"},
		{"é日😀\uFE0F", "é日😀\uFE0F"}, // a variation selector is a mark: it shows
	} {
		if got := plainText(tc.in); got != tc.want {
			t.Errorf("plainText(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !utf8.ValidString(plainText(tc.in)) {
			t.Errorf("plainText(%q) is not UTF-8", tc.in)
		}
	}
}
