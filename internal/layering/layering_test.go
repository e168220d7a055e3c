package layering

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// pkg is what `go list` says of one of our packages; paths of ours are
// module-relative.
type pkg struct {
	path    string
	imports []string // direct, ours only
	deps    []string // transitive, all
}

// check returns every way pkgs break the layout's rules.
func check(module string, l layout, pkgs []pkg) []string {
	var problems []string
	ours := func(p string) (string, bool) {
		if p == module {
			return "", true
		}
		rel, ok := strings.CutPrefix(p, module+"/")
		return rel, ok
	}
	for _, p := range pkgs {
		r, found := l.rules[p.path]
		if !found {
			problems = append(problems, fmt.Sprintf("%s: not in %s's package table: add its row there (package, role, what it may import)", p.path, docName))
			continue
		}
		allowed := closure(l, p.path)
		for _, d := range p.deps {
			rel, mine := ours(d)
			switch {
			case mine && !allowed["*"] && !allowed[rel]:
				why := "imports it"
				if !slices.Contains(p.imports, rel) {
					why = "depends on it through " + strings.Join(via(p, module+"/"+rel, pkgs), ", ")
				}
				problems = append(problems, fmt.Sprintf("%s may not depend on %s (%s:%d allows %s); it %s", p.path, rel, docName, r.line, list(r.own), why))
			case !mine && !isStd(d) && r.thirdParty != nil && !hasPrefix(d, r.thirdParty):
				problems = append(problems, fmt.Sprintf("%s may not depend on %s (%s:%d allows %s)", p.path, d, docName, r.line, thirdList(r.thirdParty)))
			}
		}
		for _, c := range l.clients {
			if slices.Contains(c.allowed, p.path) {
				continue
			}
			for _, d := range p.deps {
				if hasPrefix(d, c.prefixes) {
					problems = append(problems, fmt.Sprintf("%s depends on %s (%s): only %s may (%s:%d)", p.path, c.name, d, strings.Join(c.allowed, ", "), docName, c.line))
					break
				}
			}
		}
	}
	return problems
}

// stale returns the rows of the package table that name no package of
// the module: a package renamed or removed must leave the table too.
func stale(l layout, pkgs []pkg) []string {
	exists := map[string]bool{}
	for _, p := range pkgs {
		exists[p.path] = true
	}
	var problems []string
	for name, r := range l.rules {
		if !exists[name] {
			problems = append(problems, fmt.Sprintf("%s:%d: package %s has a row but the module has no such package: remove the row, or fix its path", docName, r.line, name))
		}
	}
	slices.Sort(problems)
	return problems
}

// closure is what p may depend on of ours: its own list and, for each
// entry, what that entry may.
func closure(l layout, p string) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(q string) {
		for _, o := range l.rules[q].own {
			if !seen[o] {
				seen[o] = true
				walk(o)
			}
		}
	}
	walk(p)
	return seen
}

// via names p's direct imports of ours through which it reaches target (an
// import path).
func via(p pkg, target string, pkgs []pkg) []string {
	byPath := map[string]pkg{}
	for _, q := range pkgs {
		byPath[q.path] = q
	}
	var out []string
	for _, imp := range p.imports {
		q := byPath[imp]
		if slices.Contains(q.deps, target) {
			out = append(out, imp)
		}
	}
	if len(out) == 0 {
		return []string{"a dependency"}
	}
	return out
}

// isStd reports whether an import path is the standard library's: its
// first element has no dot.
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func hasPrefix(path string, prefixes []string) bool {
	for _, p := range prefixes {
		if path == strings.TrimSuffix(p, "/") || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

func list(own []string) string {
	if len(own) == 0 {
		return "nothing of ours"
	}
	return strings.Join(own, ", ") + " and what they may"
}

func thirdList(prefixes []string) string {
	if len(prefixes) == 0 {
		return "only the standard library"
	}
	return "the standard library and " + strings.Join(prefixes, ", ")
}

// goList lists the module's packages (non-test imports: the layering is
// about what ships; tests may import more).
func goList(t *testing.T) (string, []pkg) {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH (go test puts it there): %v", err)
	}
	out, err := exec.Command(gocmd, "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", stderr(err))
	}
	module := strings.TrimSpace(string(out))
	cmd := exec.Command(gocmd, "list", "-e", "-json=ImportPath,Imports,Deps,Error", module+"/...")
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", stderr(err))
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath    string
			Imports, Deps []string
			Error         *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		q := pkg{path: rel, deps: p.Deps}
		for _, imp := range p.Imports {
			if r, ok := strings.CutPrefix(imp, module+"/"); ok {
				q.imports = append(q.imports, r)
			}
		}
		pkgs = append(pkgs, q)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages of %s", len(pkgs), module)
	}
	return module, pkgs
}

func stderr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("%w: %s", err, ee.Stderr)
	}
	return err
}

// TestLayering holds the module to docs/ARCHITECTURE.md's package table
// and engine-client table: every package has a row, every row is a
// package, and every package depends only on what its row allows.
func TestLayering(t *testing.T) {
	l, err := loadLayout()
	if err != nil {
		t.Fatal(err)
	}
	module, pkgs := goList(t)
	for _, p := range check(module, l, pkgs) {
		t.Error(p)
	}
	for _, p := range stale(l, pkgs) {
		t.Error(p)
	}
}

// The check catches each kind of breach of the document's tables (so
// TestLayering can fail), and passes what they allow.
func TestLayeringCatches(t *testing.T) {
	l, err := loadLayout()
	if err != nil {
		t.Fatal(err)
	}
	const m = "example.com/m"
	for _, tc := range []struct {
		name string
		pkgs []pkg
		// want are the fragments one problem must hold, in order.
		want []string
	}{
		{"registry imports the runtime",
			[]pkg{{path: "registry", imports: []string{"backend/container"}, deps: []string{m + "/backend/container", m + "/backend"}}},
			[]string{"registry may not depend on backend/container (docs/ARCHITECTURE.md:", " allows backend, sdkgen and what they may); it imports it"}},
		{"registry reaches the runtime through another package",
			[]pkg{
				{path: "registry", imports: []string{"sdkgen"}, deps: []string{m + "/sdkgen", m + "/backend/container"}},
				{path: "sdkgen", imports: []string{"backend/container"}, deps: []string{m + "/backend/container"}},
			},
			[]string{"registry may not depend on backend/container (", "); it depends on it through sdkgen"}},
		{"backend imports something of ours",
			[]pkg{{path: "backend", imports: []string{"portproto"}, deps: []string{m + "/portproto"}}},
			[]string{"backend may not depend on portproto (docs/ARCHITECTURE.md:", " allows nothing of ours)"}},
		{"backend imports a third-party package",
			[]pkg{{path: "backend", deps: []string{"fmt", "github.com/containerd/errdefs"}}},
			[]string{"backend may not depend on github.com/containerd/errdefs (", " allows only the standard library)"}},
		{"the runtime imports the Docker client",
			[]pkg{{path: "backend/container", deps: []string{"github.com/docker/docker/client"}}},
			[]string{"backend/container depends on the Docker client (github.com/docker/docker/client): only backend/container/docker, images, bench, cmd/dsh-container, e2e may"}},
		{"server reaches the Docker client through images",
			[]pkg{{path: "server", deps: []string{"github.com/moby/moby/client"}}},
			[]string{"server depends on the Docker client (github.com/moby/moby/client)"}},
		{"the Docker driver reaches the containerd client",
			[]pkg{{path: "backend/container/docker", deps: []string{"github.com/containerd/containerd/oci"}}},
			[]string{"backend/container/docker depends on the containerd client"}},
		{"a package the table lacks",
			[]pkg{{path: "newthing"}},
			[]string{"newthing: not in docs/ARCHITECTURE.md's package table"}},
	} {
		problems := check(m, l, tc.pkgs)
		if !slices.ContainsFunc(problems, func(p string) bool { return holds(p, tc.want) }) {
			t.Errorf("%s: problems %q, want one holding %q", tc.name, problems, tc.want)
		}
	}
	// What the table allows passes: the driver on the runtime, server on
	// sdkgen through registry, the CLI on everything.
	ok := []pkg{
		{path: "backend/container/docker", imports: []string{"backend/container"}, deps: []string{m + "/backend/container", m + "/backend", m + "/portproto", "github.com/docker/docker/client"}},
		{path: "server", imports: []string{"registry", "sdkgen"}, deps: []string{m + "/registry", m + "/sdkgen", m + "/backend", "github.com/prometheus/client_golang/prometheus"}},
		{path: "cmd/dsh-container", imports: []string{"server"}, deps: []string{m + "/server", m + "/backend/container/docker", "github.com/docker/docker/client"}},
		{path: "portproto", deps: []string{"github.com/gorilla/websocket", "bytes"}},
	}
	if problems := check(m, l, ok); len(problems) != 0 {
		t.Errorf("allowed imports reported: %q", problems)
	}
	// A row whose package the module lacks is reported, once per row.
	pkgs := []pkg{}
	for name := range l.rules {
		if name != "telemetry" {
			pkgs = append(pkgs, pkg{path: name})
		}
	}
	if got := stale(l, pkgs); len(got) != 1 || !holds(got[0], []string{"docs/ARCHITECTURE.md:", ": package telemetry has a row but the module has no such package"}) {
		t.Errorf("stale rows with telemetry gone: %q", got)
	}
}

// holds reports whether s holds each fragment, in order.
func holds(s string, fragments []string) bool {
	for _, f := range fragments {
		i := strings.Index(s, f)
		if i < 0 {
			return false
		}
		s = s[i+len(f):]
	}
	return true
}
