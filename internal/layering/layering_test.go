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

// rule is one row of DESIGN.md's layout table.
type rule struct {
	// own lists the packages of ours (module-relative) it may import;
	// what they may import comes with them. "*" is everything.
	own []string
	// thirdParty, when not nil, lists the only third-party import path
	// prefixes it may depend on (empty: the standard library only). nil
	// leaves third-party imports to the table's prose and the client rules.
	thirdParty []string
}

var stdlibOnly = []string{}

// rules is DESIGN.md's layout table for the packages that exist, plus the
// subpackages it implies (seccomp and the runner contract belong to the
// container runtime, registrytest to the registry) and our test helpers. A package missing
// here fails the test: add its row to DESIGN.md and here.
var rules = map[string]rule{
	"backend":                         {thirdParty: stdlibOnly},
	"backend/container":               {own: []string{"backend", "portproto", "backend/container/seccomp", "backend/container/runner", "backend/container/egress"}},
	"backend/container/egress":        {thirdParty: stdlibOnly},
	"backend/container/seccomp":       {},
	"backend/container/runner":        {thirdParty: stdlibOnly},
	"backend/container/containertest": {own: []string{"backend", "backend/container", "backend/container/seccomp"}},
	"backend/container/docker":        {own: []string{"backend/container"}},
	"backend/container/containerd":    {own: []string{"backend/container"}},
	"portproto":                       {thirdParty: []string{"github.com/gorilla/websocket"}},
	"sdkgen":                          {thirdParty: stdlibOnly},
	"registry":                        {own: []string{"backend", "sdkgen"}},
	"registry/registrytest":           {own: []string{"registry"}},
	"manifest":                        {own: []string{"registry"}},
	"mcp":                             {own: []string{"registry"}},
	"policy":                          {own: []string{"registry"}},
	"server":                          {own: []string{"registry", "backend"}},
	"client":                          {thirdParty: []string{"github.com/gorilla/websocket"}},
	"images":                          {own: []string{"backend", "backend/container/runner"}},
	"bench":                           {own: []string{"*"}},
	"cmd/dsh-container":               {own: []string{"*"}},
	"e2e":                             {own: []string{"*"}},
	"internal/testenv":                {thirdParty: stdlibOnly},
	"deploy/kubernetes":               {thirdParty: []string{"k8s.io/", "sigs.k8s.io/"}},
	"internal/layering":               {thirdParty: stdlibOnly},
	"telemetry":                       {own: []string{"backend"}},
}

// clients are the container engines' client libraries and the packages
// that may reach them: the driver for that engine, and (for Docker) the
// Docker-only image build, plus the CLI, the benchmarks and e2e.
var clients = []struct {
	name     string
	prefixes []string
	allowed  []string
}{
	{"the Docker client", []string{"github.com/docker/docker/", "github.com/moby/moby/"}, []string{"backend/container/docker", "images", "bench", "cmd/dsh-container", "e2e"}},
	{"the containerd client", []string{"github.com/containerd/containerd/"}, []string{"backend/container/containerd", "bench", "cmd/dsh-container", "e2e"}},
}

// pkg is what `go list` says of one of our packages; paths of ours are
// module-relative.
type pkg struct {
	path    string
	imports []string // direct, ours only
	deps    []string // transitive, all
}

// check returns every way pkgs break the rules.
func check(module string, pkgs []pkg) []string {
	var problems []string
	ours := func(p string) (string, bool) {
		if p == module {
			return "", true
		}
		rel, ok := strings.CutPrefix(p, module+"/")
		return rel, ok
	}
	for _, p := range pkgs {
		r, found := rules[p.path]
		if !found {
			problems = append(problems, fmt.Sprintf("%s: not in DESIGN.md's layout table: add its row there and to rules in internal/layering", p.path))
			continue
		}
		allowed := closure(p.path)
		for _, d := range p.deps {
			rel, mine := ours(d)
			switch {
			case mine && !allowed["*"] && !allowed[rel]:
				why := "imports it"
				if !slices.Contains(p.imports, rel) {
					why = "depends on it through " + strings.Join(via(p, module+"/"+rel, pkgs), ", ")
				}
				problems = append(problems, fmt.Sprintf("%s may not depend on %s (DESIGN.md allows %s); it %s", p.path, rel, list(r.own), why))
			case !mine && !isStd(d) && r.thirdParty != nil && !hasPrefix(d, r.thirdParty):
				problems = append(problems, fmt.Sprintf("%s may not depend on %s (DESIGN.md allows %s)", p.path, d, thirdList(r.thirdParty)))
			}
		}
		for _, c := range clients {
			if slices.Contains(c.allowed, p.path) {
				continue
			}
			for _, d := range p.deps {
				if hasPrefix(d, c.prefixes) {
					problems = append(problems, fmt.Sprintf("%s depends on %s (%s): only %s may", p.path, c.name, d, strings.Join(c.allowed, ", ")))
					break
				}
			}
		}
	}
	return problems
}

// closure is what p may depend on of ours: its own list and, for each
// entry, what that entry may.
func closure(p string) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(q string) {
		for _, o := range rules[q].own {
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
	if len(pkgs) < len(rules)/2 {
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

// TestLayering holds the module to DESIGN.md's layering.
func TestLayering(t *testing.T) {
	module, pkgs := goList(t)
	for _, p := range check(module, pkgs) {
		t.Error(p)
	}
}

// The check catches each kind of breach (so TestLayering can fail).
func TestLayeringCatches(t *testing.T) {
	const m = "example.com/m"
	for _, tc := range []struct {
		name string
		pkgs []pkg
		want string
	}{
		{"registry imports the runtime",
			[]pkg{{path: "registry", imports: []string{"backend/container"}, deps: []string{m + "/backend/container", m + "/backend"}}},
			"registry may not depend on backend/container (DESIGN.md allows backend, sdkgen and what they may); it imports it"},
		{"registry reaches the runtime through another package",
			[]pkg{
				{path: "registry", imports: []string{"sdkgen"}, deps: []string{m + "/sdkgen", m + "/backend/container"}},
				{path: "sdkgen", imports: []string{"backend/container"}, deps: []string{m + "/backend/container"}},
			},
			"registry may not depend on backend/container (DESIGN.md allows backend, sdkgen and what they may); it depends on it through sdkgen"},
		{"backend imports something of ours",
			[]pkg{{path: "backend", imports: []string{"portproto"}, deps: []string{m + "/portproto"}}},
			"backend may not depend on portproto (DESIGN.md allows nothing of ours)"},
		{"backend imports a third-party package",
			[]pkg{{path: "backend", deps: []string{"fmt", "github.com/containerd/errdefs"}}},
			"backend may not depend on github.com/containerd/errdefs (DESIGN.md allows only the standard library)"},
		{"the runtime imports the Docker client",
			[]pkg{{path: "backend/container", deps: []string{"github.com/docker/docker/client"}}},
			"backend/container depends on the Docker client (github.com/docker/docker/client): only backend/container/docker, images, bench, cmd/dsh-container, e2e may"},
		{"server reaches the Docker client through images",
			[]pkg{{path: "server", deps: []string{"github.com/moby/moby/client"}}},
			"server depends on the Docker client (github.com/moby/moby/client)"},
		{"a package the table lacks",
			[]pkg{{path: "newthing"}},
			"newthing: not in DESIGN.md's layout table"},
	} {
		problems := check(m, tc.pkgs)
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, tc.want) }) {
			t.Errorf("%s: problems %q, want one starting %q", tc.name, problems, tc.want)
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
	if problems := check(m, ok); len(problems) != 0 {
		t.Errorf("allowed imports reported: %q", problems)
	}
}
