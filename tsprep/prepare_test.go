package tsprep

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// prepareTest prepares src with a stripper of its own; fail is the
// program's exception, if any.
func prepareTest(t *testing.T, src string) (p Prepared, fail *ProgramError) {
	t.Helper()
	s := NewStripper(1, Limits{})
	t.Cleanup(s.Close)
	p, err := s.Prepare(context.Background(), src)
	if errors.As(err, &fail) {
		return p, fail
	}
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	return p, nil
}

func TestPrepareSyntaxErrorNamesTheModelsLine(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want string
	}{
		{"const a = 1\nconst b = ;\n", "program.ts:2:11:"},
		{"let x = (", "program.ts:1:"},
		{"return 1\n}\n", "program.ts:3:1: Expected"},
	} {
		_, fail := prepareTest(t, tc.src)
		if fail == nil {
			t.Fatalf("%q: no failure", tc.src)
		}
		if !strings.HasPrefix(fail.Message, "SyntaxError: ") || !strings.Contains(fail.Message, tc.want) {
			t.Errorf("%q: got %q, want an exception containing %q", tc.src, fail.Message, tc.want)
		}
	}
}

func TestPrepareAllowsTopLevelAwaitAndReturn(t *testing.T) {
	p, fail := prepareTest(t, "interface A { a: number }\nconst x: A = { a: await Promise.resolve(1) }\nreturn x.a as number\n")
	if fail != nil {
		t.Fatal(fail)
	}
	if !strings.HasPrefix(p.Program, "(async () => {") || strings.Contains(p.Program, "interface") {
		t.Fatalf("unexpected program %q", p.Program)
	}
}

// The shifted map sends generated positions to the model's own lines.
func TestSourceMapPointsAtOriginalLines(t *testing.T) {
	src := "interface A {\n  a: string\n}\n\n\nthrow new Error('boom')\n"
	p, fail := prepareTest(t, src)
	if fail != nil {
		t.Fatal(fail)
	}
	var m struct {
		Sources  []string `json:"sources"`
		Mappings string   `json:"mappings"`
	}
	if err := json.Unmarshal([]byte(p.SourceMap), &m); err != nil {
		t.Fatal(err)
	}
	genLines := strings.Split(p.Program, "\n")
	throwGen := -1
	for i, l := range genLines {
		if strings.Contains(l, "throw") {
			throwGen = i
		}
	}
	if throwGen < 0 {
		t.Fatalf("no throw in %q", p.Program)
	}
	// Decode to absolute positions and find the segment on the throw line.
	srcLine := 0
	found := -1
	for li, line := range strings.Split(m.Mappings, ";") {
		for _, seg := range strings.Split(line, ",") {
			if seg == "" {
				continue
			}
			f, err := decodeVLQ(seg)
			if err != nil {
				t.Fatal(err)
			}
			if len(f) >= 4 {
				srcLine += f[2]
				if li == throwGen && found < 0 {
					found = srcLine
				}
			}
		}
	}
	if found != 5 { // zero-based: line 6 of the model's source
		t.Fatalf("throw maps to zero-based line %d, want 5 (map %s)", found, p.SourceMap)
	}
}

func TestVLQRoundTrip(t *testing.T) {
	for _, v := range []int{0, 1, -1, 15, 16, -16, 1000, -123456, 1 << 28} {
		var b strings.Builder
		encodeVLQ(&b, v)
		got, err := decodeVLQ(b.String())
		if err != nil || len(got) != 1 || got[0] != v {
			t.Errorf("%d → %q → %v %v", v, b.String(), got, err)
		}
	}
	for _, bad := range []string{"!", "g", "gggggggggg"} {
		if _, err := decodeVLQ(bad); err == nil {
			t.Errorf("decodeVLQ(%q) accepted", bad)
		}
	}
}
