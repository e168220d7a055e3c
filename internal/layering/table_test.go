package layering

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The layering's source of truth is docs/ARCHITECTURE.md, not this test:
// the test reads two markdown tables from it, each found by its header row
// (the first line of the table, spelled exactly as below, cells trimmed).
//
// The package table, one row per package of the module:
//
//	| package | role | may import (ours) | third-party |
//
//   - package: one module-relative import path in backquotes (`server`).
//   - role: free text, not empty (it is for readers; the test only
//     checks it is there).
//   - may import (ours): "—" or "-" (nothing of ours), "*" (everything),
//     or backquoted paths separated by commas, each a row of the table.
//     What a listed package may import comes with it.
//   - third-party: "std" (the standard library only), "any" (not
//     restricted by this table; the engine-client table still applies),
//     or backquoted import-path prefixes separated by commas (the
//     standard library is always allowed; `k8s.io/` allows everything
//     under k8s.io).
//
// The engine-client table, one row per container engine's client library:
//
//	| engine client | import paths | may be reached by |
//
//   - engine client: a name for messages ("the Docker client").
//   - import paths: backquoted import-path prefixes, separated by commas.
//   - may be reached by: backquoted packages, separated by commas, each a
//     row of the package table; no other package may depend on the
//     client, directly or through another package.
//
// A malformed cell, a repeated row or a missing table fails the test
// with the file's line number.

// archPath is docs/ARCHITECTURE.md from this package's directory (go test
// runs a package's tests there).
const archPath = "../../docs/ARCHITECTURE.md"

// docName is how messages name the document.
const docName = "docs/ARCHITECTURE.md"

var (
	packageHeader = []string{"package", "role", "may import (ours)", "third-party"}
	clientHeader  = []string{"engine client", "import paths", "may be reached by"}
)

// rule is one row of the package table.
type rule struct {
	// own lists the packages of ours (module-relative) it may import;
	// what they may import comes with them. "*" is everything.
	own []string
	// thirdParty, when not nil, lists the only third-party import path
	// prefixes it may depend on (empty: the standard library only). nil
	// ("any") leaves third-party imports to the engine-client table.
	thirdParty []string
	// line is the row's line in the document.
	line int
}

// client is one row of the engine-client table.
type client struct {
	name     string
	prefixes []string
	allowed  []string
	line     int
}

// layout is what the document says.
type layout struct {
	rules   map[string]rule
	clients []client
}

// loadLayout reads the tables from docs/ARCHITECTURE.md.
func loadLayout() (layout, error) {
	data, err := os.ReadFile(archPath)
	if err != nil {
		return layout{}, fmt.Errorf("the layering is %s's package table: %w", docName, err)
	}
	return parseLayout(string(data))
}

// parseLayout reads the package table and the engine-client table from a
// markdown document.
func parseLayout(doc string) (layout, error) {
	lines := strings.Split(doc, "\n")
	var errs []string
	fail := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("%s:%d: %s", docName, line, fmt.Sprintf(format, args...)))
	}
	l := layout{rules: map[string]rule{}}

	pkgRows, at := findTable(lines, packageHeader)
	if at < 0 {
		return l, fmt.Errorf("%s: no package table (a table whose header is %s)", docName, headerLine(packageHeader))
	}
	for _, row := range pkgRows {
		if row.cells == nil {
			fail(row.line, "a row of the package table must have %d cells: %s", len(packageHeader), headerLine(packageHeader))
			continue
		}
		name, err := onePath(row.cells[0])
		if err != nil {
			fail(row.line, "package: %v", err)
			continue
		}
		if _, dup := l.rules[name]; dup {
			fail(row.line, "package %s has a row already (line %d)", name, l.rules[name].line)
			continue
		}
		r := rule{line: row.line}
		if strings.TrimSpace(row.cells[1]) == "" {
			fail(row.line, "package %s: the role is empty", name)
		}
		switch own := strings.TrimSpace(row.cells[2]); own {
		case "—", "-":
		case "*":
			r.own = []string{"*"}
		default:
			if r.own, err = paths(own); err != nil {
				fail(row.line, "package %s: may import (ours): %v", name, err)
			}
		}
		switch third := strings.TrimSpace(row.cells[3]); third {
		case "std":
			r.thirdParty = []string{}
		case "any":
		default:
			if r.thirdParty, err = paths(third); err != nil {
				fail(row.line, "package %s: third-party: %v (or std, or any)", name, err)
			}
		}
		l.rules[name] = r
	}
	for name, r := range l.rules {
		for _, o := range r.own {
			if _, ok := l.rules[o]; !ok && o != "*" {
				fail(r.line, "package %s may import %s, which has no row", name, o)
			}
		}
	}

	clientRows, at := findTable(lines, clientHeader)
	if at < 0 {
		errs = append(errs, fmt.Sprintf("%s: no engine-client table (a table whose header is %s)", docName, headerLine(clientHeader)))
	}
	for _, row := range clientRows {
		if row.cells == nil {
			fail(row.line, "a row of the engine-client table must have %d cells: %s", len(clientHeader), headerLine(clientHeader))
			continue
		}
		c := client{name: strings.TrimSpace(row.cells[0]), line: row.line}
		var err error
		if c.name == "" {
			fail(row.line, "engine client: the name is empty")
		}
		if c.prefixes, err = paths(row.cells[1]); err != nil {
			fail(row.line, "%s: import paths: %v", c.name, err)
		}
		if c.allowed, err = paths(row.cells[2]); err != nil {
			fail(row.line, "%s: may be reached by: %v", c.name, err)
		}
		for _, p := range c.allowed {
			if _, ok := l.rules[p]; !ok {
				fail(row.line, "%s may be reached by %s, which has no row in the package table", c.name, p)
			}
		}
		l.clients = append(l.clients, c)
	}
	if len(errs) > 0 {
		return l, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return l, nil
}

// tableRow is one body row of a markdown table.
type tableRow struct {
	line  int // 1-based
	cells []string
}

// findTable returns the body rows of the first table whose header row is
// header, and the header's index (-1 when there is none). The table ends
// at the first line that does not start with "|". A row whose number of
// cells differs from the header's comes back with cells nil.
func findTable(lines []string, header []string) ([]tableRow, int) {
	for i, ln := range lines {
		cells, ok := splitRow(ln)
		if !ok || !equalFold(cells, header) {
			continue
		}
		var rows []tableRow
		for j := i + 1; j < len(lines); j++ {
			cells, ok := splitRow(lines[j])
			if !ok {
				break
			}
			if j == i+1 && isDelimiter(cells) {
				continue
			}
			if len(cells) != len(header) {
				cells = nil
			}
			rows = append(rows, tableRow{line: j + 1, cells: cells})
		}
		return rows, i
	}
	return nil, -1
}

// splitRow splits a markdown table row into its trimmed cells; ok is
// false for a line that is not a row. "\|" is a literal bar.
func splitRow(ln string) ([]string, bool) {
	ln = strings.TrimSpace(ln)
	if !strings.HasPrefix(ln, "|") {
		return nil, false
	}
	ln = strings.TrimPrefix(ln, "|")
	if strings.HasSuffix(ln, "|") && !strings.HasSuffix(ln, `\|`) {
		ln = strings.TrimSuffix(ln, "|")
	}
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(ln); i++ {
		switch {
		case ln[i] == '\\' && i+1 < len(ln) && ln[i+1] == '|':
			cur.WriteByte('|')
			i++
		case ln[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(ln[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String())), true
}

func isDelimiter(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, ":-") != "" || !strings.Contains(c, "-") {
			return false
		}
	}
	return true
}

func equalFold(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !strings.EqualFold(a[i], b[i]) {
			return false
		}
	}
	return true
}

func headerLine(h []string) string { return "| " + strings.Join(h, " | ") + " |" }

// paths reads "`a`, `b/c`": backquoted paths separated by commas, nothing
// else.
func paths(cell string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(cell, ",") {
		p, err := onePath(item)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// onePath reads one backquoted path.
func onePath(s string) (string, error) {
	s = strings.TrimSpace(s)
	p, ok := strings.CutPrefix(s, "`")
	if ok {
		p, ok = strings.CutSuffix(p, "`")
	}
	if !ok || p == "" || strings.ContainsAny(p, "` \t") {
		return "", fmt.Errorf("%q is not one path in backquotes", s)
	}
	return p, nil
}

// The tables' format: what parses, and each malformed table named with
// its line.
func TestTableFormat(t *testing.T) {
	const good = `# Title

Some prose | with a bar.

| package | role | may import (ours) | third-party |
|---|---|---|---|
| ` + "`a`" + ` | the seam | — | std |
| ` + "`a/b`" + ` | a driver \| with a bar | ` + "`a`" + ` | ` + "`example.com/x`, `k8s.io/`" + ` |
| ` + "`cmd`" + ` | the CLI | * | any |

| engine client | import paths | may be reached by |
|---|---|---|
| the X client | ` + "`example.com/x/`" + ` | ` + "`a/b`, `cmd`" + ` |
`
	l, err := parseLayout(good)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]rule{
		"a":   {thirdParty: []string{}, line: 7},
		"a/b": {own: []string{"a"}, thirdParty: []string{"example.com/x", "k8s.io/"}, line: 8},
		"cmd": {own: []string{"*"}, line: 9},
	}
	if !reflect.DeepEqual(l.rules, want) {
		t.Errorf("rules %+v, want %+v", l.rules, want)
	}
	wantClients := []client{{name: "the X client", prefixes: []string{"example.com/x/"}, allowed: []string{"a/b", "cmd"}, line: 13}}
	if !reflect.DeepEqual(l.clients, wantClients) {
		t.Errorf("clients %+v, want %+v", l.clients, wantClients)
	}

	for _, tc := range []struct {
		name      string
		old, new_ string
		want      string
	}{
		{"no package table", "| package | role |", "| pkg | role |", "docs/ARCHITECTURE.md: no package table (a table whose header is | package | role | may import (ours) | third-party |)"},
		{"no client table", "| engine client |", "| engine |", "docs/ARCHITECTURE.md: no engine-client table"},
		{"a row of three cells", "| the CLI | * | any |", "| the CLI * | any |", "docs/ARCHITECTURE.md:9: a row of the package table must have 4 cells"},
		{"a package without backquotes", "| `a` | the seam", "| a | the seam", "docs/ARCHITECTURE.md:7: package: \"a\" is not one path in backquotes"},
		{"a repeated row", "| `cmd` |", "| `a` |", "docs/ARCHITECTURE.md:9: package a has a row already (line 7)"},
		{"an empty role", "| the seam |", "|  |", "docs/ARCHITECTURE.md:7: package a: the role is empty"},
		{"may import a package without a row", "| `a` | `example.com", "| `a`, `c` | `example.com", "docs/ARCHITECTURE.md:8: package a/b may import c, which has no row"},
		{"prose in may import", "| `a` | `example.com", "| `a` and more | `example.com", "docs/ARCHITECTURE.md:8: package a/b: may import (ours): \"`a` and more\" is not one path in backquotes"},
		{"an unknown third-party word", "| — | std |", "| — | stdlib |", "docs/ARCHITECTURE.md:7: package a: third-party: \"stdlib\" is not one path in backquotes (or std, or any)"},
		{"a client reached by a package without a row", "`a/b`, `cmd` |", "`a/b`, `d` |", "docs/ARCHITECTURE.md:13: the X client may be reached by d, which has no row in the package table"},
	} {
		doc := strings.Replace(good, tc.old, tc.new_, 1)
		if doc == good {
			t.Fatalf("%s: %q is not in the document", tc.name, tc.old)
		}
		_, err := parseLayout(doc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one holding %q", tc.name, err, tc.want)
		}
	}
}
