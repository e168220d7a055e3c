package sdkgen

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// unionSchema returns {"anyOf": members}, each member the JSON text
// member(i).
func unionSchema(n int, member func(i int) string) string {
	var b strings.Builder
	b.WriteString(`{"anyOf":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(member(i))
	}
	b.WriteString(`]}`)
	return b.String()
}

// fiveShapes are five member schemas the shape builder keeps apart (they
// are not primitives) but that render as five distinct types in both
// languages: n members cycling through them reduce to 5.
var fiveShapes = []string{
	`{"type":"array","items":{"type":"string"}}`,
	`{"type":"object","additionalProperties":{"type":"integer"}}`,
	`{"type":"array","items":{"type":"boolean"}}`,
	`{"type":"object"}`,
	`{"type":"array","items":{"type":"null"}}`,
}

// Union inputs of n members, for the tests below, the timing tests and the
// real compilers.
func duplicateUnion(n int) string {
	return unionSchema(n, func(i int) string { return fiveShapes[i%len(fiveShapes)] })
}

func distinctListUnion(n int) string {
	return unionSchema(n, func(i int) string { return fmt.Sprintf(`{"type":"array","items":{"const":"k%d"}}`, i) })
}

func distinctRecordUnion(n int) string {
	return unionSchema(n, func(i int) string {
		return fmt.Sprintf(`{"type":"object","properties":{"k%d":{"type":"integer"}},"required":["k%d"]}`, i, i)
	})
}

// nestedUnion nests groups of 10 distinct members two anyOf levels deep:
// [[g0 g1 ...] [..] ...], n members in all.
func nestedUnion(n int) string {
	groups := (n + 9) / 10
	return unionSchema(groups, func(g int) string {
		return unionSchema(min(10, n-10*g), func(i int) string {
			return fmt.Sprintf(`{"type":"array","items":{"const":%d}}`, 10*g+i)
		})
	})
}

// deepChains nests levels unions of maxChainedUnion distinct members, each
// union's first member a list of the next: in Python, `|` chains whose
// deepest operands hold the next chain, the worst case for CPython's
// recursion.
func deepChains(levels int) string {
	inner := distinctListUnion(maxChainedUnion)
	for l := range levels - 1 {
		inner = unionSchema(maxChainedUnion, func(i int) string {
			if i == 0 {
				return `{"type":"array","items":` + inner + `}`
			}
			return fmt.Sprintf(`{"type":"array","items":{"const":"l%dm%d"}}`, l, i)
		})
	}
	return inner
}

// splitAlternatives splits a rendered union into its top-level
// alternatives: the elements of one Union[...] (Python), or the operands
// of a `|` chain at bracket depth 0 (both languages). String literals are
// skipped. A type that is not a union is one alternative.
func splitAlternatives(t string) []string {
	if strings.HasPrefix(t, "Union[") && strings.HasSuffix(t, "]") {
		return splitTop(t[len("Union["):len(t)-1], ", ")
	}
	return splitTop(t, " | ")
}

func splitTop(s, sep string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case c == '[' || c == '(' || c == '{':
			depth++
		case c == ']' || c == ')' || c == '}':
			depth--
		case depth == 0 && strings.HasPrefix(s[i:], sep):
			parts = append(parts, s[start:i])
			start = i + len(sep)
			i += len(sep) - 1
		}
	}
	return append(parts, s[start:])
}

// TestPythonUnionNeverAny checks seed 004's rule that a long union is
// flattened, never truncated: however many members a union has, and
// however many of them are duplicates, Python shows the same number of
// distinct alternatives as TypeScript, as an `A | B` chain up to
// maxChainedUnion and as one flat Union[...] beyond, never Any.
func TestPythonUnionNeverAny(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   int // distinct alternatives
	}{
		{"150 members reduce to 5", duplicateUnion(150), 5},
		{"5000 members reduce to 5", duplicateUnion(5000), 5},
		{"100 distinct", distinctListUnion(100), 100},
		{"101 distinct", distinctListUnion(101), 101},
		{"5000 distinct lists", distinctListUnion(5000), 5000},
		{"5000 distinct records", distinctRecordUnion(5000), 5000},
		{"5000 nested two levels deep", nestedUnion(5000), 5000},
		{"chains 15 levels deep", deepChains(15), maxChainedUnion},
		{"nested anyOf, oneOf and type arrays", `{"anyOf":[{"oneOf":[{"type":["string","null"]},{"type":"integer"}]},` +
			`{"anyOf":[{"type":"array","items":{"type":"string"}},{"anyOf":[{"type":"string"},{"type":"boolean"}]}]}]}`, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := buildShape(parseJSON([]byte(tt.schema)), 0)
			m := newPyModule()
			py := m.typ(s, "Args", 0)
			ts := tsType(s, "")
			pyAlts, tsAlts := splitAlternatives(py), splitAlternatives(ts)
			if len(pyAlts) != tt.want || len(tsAlts) != tt.want {
				t.Fatalf("Python shows %d alternatives, TypeScript %d, want %d\npython: %.300s\ntypescript: %.300s",
					len(pyAlts), len(tsAlts), tt.want, py, ts)
			}
			for _, a := range pyAlts {
				if a == "Any" || strings.HasPrefix(a, "Union[") {
					t.Fatalf("alternative %q in %.300s", a, py)
				}
			}
			if flat := strings.HasPrefix(py, "Union["); flat != (tt.want > maxChainedUnion) {
				t.Errorf("%d alternatives written as %.60s...", tt.want, py)
			}
			if tt.want > 1 && tt.want <= maxChainedUnion && !strings.Contains(py, " | ") {
				t.Errorf("%d alternatives not a chain: %.200s", tt.want, py)
			}
		})
	}
}

// TestPythonUnionInModule checks a flattened union in a whole module: the
// Union import is in the header, the classes of its record members are all
// declared, and the module passes the structural checks.
func TestPythonUnionInModule(t *testing.T) {
	tools := []Tool{{Name: "pick", InputSchema: json.RawMessage(`{"type":"object","properties":{"v":` +
		distinctRecordUnion(150) + `},"required":["v"]}`)}}
	src := PythonSource(tools)
	if err := checkPython(src); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(src, "from typing import Any, Literal, NotRequired, TypedDict, Union\n") {
		t.Errorf("header: %.80s", src)
	}
	for i := 1; i <= 150; i++ {
		if !strings.Contains(src, fmt.Sprintf("class PickArgsVVariant%d(TypedDict):\n    k%d: int\n", i, i-1)) {
			t.Fatalf("class PickArgsVVariant%d missing", i)
		}
	}
	if !strings.Contains(src, "    v: Union[PickArgsVVariant1, PickArgsVVariant2, ") ||
		!strings.Contains(src, ", PickArgsVVariant150]\n") {
		t.Errorf("the field is not one flat Union[...] of the 150 classes:\n%.2000s", src)
	}
}
