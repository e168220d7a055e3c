package tsprep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// deep programs are the recursive constructs a parser descends into, each
// nested n times.
func deepPrograms(n int) map[string]string {
	r := strings.Repeat
	return map[string]string{
		"parens":      "return " + r("(", n) + "1" + r(")", n),
		"brackets":    "return " + r("[", n) + r("]", n),
		"braces":      "return " + r("{a:", n) + "1" + r("}", n),
		"blocks":      r("{", n) + r("}", n),
		"not":         "return " + r("!", n) + "1",
		"negation":    "return " + r("- ", n) + "1",
		"bitwise-not": "return " + r("~", n) + "1",
		"typeof":      "return " + r("typeof ", n) + "1",
		"void":        "return " + r("void ", n) + "1",
		"await":       "return " + r("await ", n) + "1",
		"new":         "return " + r("new ", n) + "X",
		"spread":      "return [" + r("...", n) + "x]",
		"assignment":  "let a; " + r("a=", n) + "1",
		"compound":    "let a = 1; " + r("a+=", n) + "1",
		"ternary":     "return " + r("a?b:", n) + "c",
		"arrow":       "const f = " + r("x=>", n) + "1",
		"exponent":    "return " + r("2**", n) + "1",
		"template":    "return " + r("`${", n) + "1" + r("}`", n),
		"if-else":     r("if (a) {} else ", n) + "{}",
		"nested-if":   r("if (a) ", n) + "b()",
		"while":       r("while (a) ", n) + "b()",
		"mixed":       "return " + r("!(a = `${-[b ? ", n/4) + "1" + r(" : c]}`)", n/4),
	}
}

func TestCheckNestingRejectsEveryRecursiveConstruct(t *testing.T) {
	for name, src := range deepPrograms(MaxNesting + 8) {
		err := checkProgram(src)
		var ne *nestingError
		if !errors.As(err, &ne) {
			t.Errorf("%s: not rejected (%v)", name, err)
			continue
		}
		if ne.line != 1 || ne.col < 1 || !strings.Contains(err.Error(), fmt.Sprintf("deeper than %d levels", MaxNesting)) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCheckNestingAcceptsModerateNesting(t *testing.T) {
	for name, src := range deepPrograms(MaxNesting / 4) {
		if err := checkProgram(src); err != nil {
			t.Errorf("%s at depth %d: %v", name, MaxNesting/4, err)
		}
	}
}

// Long flat programs are not deep, however many operators, statements or
// elements they hold, with or without semicolons.
func TestCheckNestingAcceptsLongFlatPrograms(t *testing.T) {
	var lines []string
	for i := 0; i < 5000; i++ {
		lines = append(lines, fmt.Sprintf("let v%d = !a && -b || typeof c === 'x' ? await f(v%d) : [1, -2, ...xs]", i, i))
	}
	noSemis := strings.Join(lines, "\n")
	elems := make([]string, 20000)
	for i := range elems {
		elems[i] = fmt.Sprintf("-%d", i)
	}
	conds := make([]string, 2000)
	for i := range conds {
		conds[i] = fmt.Sprintf("!x%d", i)
	}
	for name, src := range map[string]string{
		"statements without semicolons": noSemis,
		"statements with semicolons":    strings.ReplaceAll(noSemis, "\n", ";\n"),
		"array of negative numbers":     "const xs = [" + strings.Join(elems, ", ") + "]\nreturn xs.length",
		"long && chain of negations":    "return " + strings.Join(conds, " && "),
		"long + chain":                  "return " + strings.Repeat("x + ", 20000) + "1",
		"method chain":                  "return xs" + strings.Repeat(".map((x) => x + 1)", 2000),
		"else-if ladder of 100":         strings.Repeat("if (a) { b() } else ", 100) + "{ c() }",
		"brackets in strings":           `const s = "` + strings.Repeat("((((", 500) + `"; const t = '` + strings.Repeat("[[", 500) + `'; return s + t`,
		"brackets in comments":          "// " + strings.Repeat("(", 1000) + "\n/* " + strings.Repeat("{", 1000) + " */\nreturn 1",
		"brackets in a regexp":          "const re = /" + strings.Repeat(`\(`, 1000) + "[(]/g\nreturn re.test('x')",
		"brackets in template text":     "return `" + strings.Repeat("(", 1000) + "${1}" + strings.Repeat("[", 1000) + "`",
		"division is not a regexp":      "const a = b / c / d; return (a) / (2) / [3][0] / x++ / 2",
		"functions and classes":         "class A { #x = 1; static y = 2; m(a = 1, ...rest: number[]) { return this.#x + a } }\nfunction f<T>(x: T): T { return x }\nreturn new A().m() + f(2)",
		"postfix then line break":       "let i = 0\ni++\n!i\n" + strings.Repeat("i = i + 1\n", 2000),
	} {
		if err := checkProgram(src); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Every TypeScript program this repository ships passes the check.
func TestCheckNestingAcceptsTheRepositorysPrograms(t *testing.T) {
	files, _ := filepath.Glob("../examples/*/*.ts")
	if len(files) == 0 {
		t.Fatal("no example programs found")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkProgram(string(data)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestCheckNestingNamesThePlace(t *testing.T) {
	src := "const a = 1\nconst b = 2\nreturn " + strings.Repeat("(", MaxNesting+1) + "1" + strings.Repeat(")", MaxNesting+1)
	var ne *nestingError
	if err := checkProgram(src); !errors.As(err, &ne) || ne.line != 3 || ne.col != len("return ")+MaxNesting+1 {
		t.Fatalf("got %v (%+v)", err, ne)
	}
}

// The scan is linear: a program at the size cap of every shape is checked
// quickly (a parser would take minutes on some of these).
func BenchmarkCheckNesting(b *testing.B) {
	src := strings.Repeat("const f = (x) => x + 1; let y = !a && b ? c : `${d}`;\n", (256<<10)/56)
	b.SetBytes(int64(len(src)))
	for i := 0; i < b.N; i++ {
		if err := checkProgram(src); err != nil {
			b.Fatal(err)
		}
	}
}

// Every deep construct, as deep as a program at the runtime's default size
// cap (256 KiB) can be, is refused naming the limit, before a worker starts.
func TestPrepareRefusesDeepProgramsAtTheSizeCap(t *testing.T) {
	s := NewStripper(1, Limits{Handshake: time.Nanosecond}) // a worker would fail
	defer s.Close()
	for name := range deepPrograms(1) {
		n := 100000
		src := deepPrograms(n)[name]
		for len(src) > 256<<10 {
			n = n * 3 / 4
			src = deepPrograms(n)[name]
		}
		_, err := s.Prepare(context.Background(), src)
		var pe *ProgramError
		if !errors.As(err, &pe) || !strings.Contains(pe.Message, fmt.Sprintf("deeper than %d levels", MaxNesting)) {
			t.Fatalf("%s: got %v", name, err)
		}
	}
}
