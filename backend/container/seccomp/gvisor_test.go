package seccomp

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestForGVisorAllowsOnlyClone3(t *testing.T) {
	p := Profile()
	before := Allowed(p)
	if slices.Contains(before, "clone3") {
		t.Fatal("the profile already allows clone3: ForGVisor has nothing to do")
	}
	g := ForGVisor(p)
	after := Allowed(g)
	if !slices.Contains(after, "clone3") {
		t.Fatal("ForGVisor does not allow clone3")
	}
	if got := slices.DeleteFunc(slices.Clone(after), func(n string) bool { return n == "clone3" }); !slices.Equal(got, before) {
		t.Errorf("ForGVisor changed more than clone3: %d allowed, want %d", len(got), len(before))
	}
	if g.DefaultAction != p.DefaultAction || !slices.Equal(g.Architectures, p.Architectures) {
		t.Error("ForGVisor changed the default action or the architectures")
	}
	// Every denial but clone3's stays, and p itself is untouched.
	denied := func(q *specs.LinuxSeccomp) (names []string) {
		for _, r := range q.Syscalls {
			if r.Action == specs.ActErrno {
				names = append(names, r.Names...)
			}
		}
		slices.Sort(names)
		return names
	}
	if d := denied(p); !slices.Contains(d, "clone3") {
		t.Error("ForGVisor changed its argument")
	}
	if d := denied(g); slices.Contains(d, "clone3") || len(d) != len(denied(p))-1 {
		t.Errorf("denials after ForGVisor: %d, want %d (all but clone3)", len(d), len(denied(p))-1)
	}
	if ForGVisor(nil) != nil {
		t.Error("ForGVisor(nil) is not nil")
	}
}

func TestIsGVisor(t *testing.T) {
	for name, want := range map[string]bool{"runsc": true, "gvisor": true, "runsc-debug": true, "runc": false, "crun": false, "": false, "runscx": false} {
		if IsGVisor(name) != want {
			t.Errorf("IsGVisor(%q) = %v", name, !want)
		}
	}
}
