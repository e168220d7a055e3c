package containerd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/typeurl/v2"
)

// Options.NodeRuntimes: the runtimes of containerd's host, found by the
// shims there, runsc through the wrapper in the state directory.
func TestNodeRuntimes(t *testing.T) {
	dir := t.TempDir()
	rts, err := nodeRuntimes(dir, []string{"runc", "crun", "runsc"})
	if err != nil {
		t.Fatal(err)
	}
	if rt := rts["runc"]; rt.shim != runcShim || rt.options != nil {
		t.Errorf("runc: %+v, want the runc shim's own binary", rt)
	}
	binary := func(name string) string {
		t.Helper()
		v, err := typeurl.UnmarshalAny(rts[name].options)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v.(*runcoptions.Options).BinaryName
	}
	if b := binary("crun"); b != "crun" {
		t.Errorf("crun's binary %q, want crun (the node's PATH)", b)
	}
	w := binary("runsc")
	if w != filepath.Join(dir, "runsc") {
		t.Errorf("runsc's binary %q, want the wrapper in %s", w, dir)
	}
	script, err := os.ReadFile(w)
	if err != nil || !strings.Contains(string(script), "exec runsc "+strings.Join(RunscArgs, " ")+` "$@"`) {
		t.Errorf("wrapper %q: %v", script, err)
	}
	if _, err := nodeRuntimes(dir, []string{"kata"}); err == nil || !strings.Contains(err.Error(), `node runtime "kata"`) {
		t.Errorf("kata: %v", err)
	}
}

// The static init is copied into the state directory, once, executable.
func TestCopyInit(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(t.TempDir(), "tini-static")
	os.WriteFile(src, []byte("\x7fELF static init"), 0o755)
	for range 2 {
		p, err := copyInit(dir, src)
		if err != nil || p != filepath.Join(dir, "init") {
			t.Fatalf("copyInit: %q %v", p, err)
		}
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o755 {
			t.Fatalf("the copy: %v %v", st.Mode(), err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("state directory holds %d entries, want the init alone", len(ents))
	}
	if _, err := copyInit(dir, filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "the static init") {
		t.Errorf("missing source: %v", err)
	}
}
