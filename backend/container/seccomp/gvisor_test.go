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

// Under gVisor, mknod and mknodat create regular files, FIFOs and sockets
// but no device node: those fall to the default action (EPERM), as the
// host kernel answers a caller without CAP_MKNOD. Under runc the profile
// leaves mknod to the kernel.
func TestForGVisorRefusesDeviceNodes(t *testing.T) {
	p := Profile()
	g := ForGVisor(p)
	for _, r := range g.Syscalls {
		for _, n := range r.Names {
			if (n == "mknod" || n == "mknodat") && len(r.Args) == 0 {
				t.Fatalf("%s allowed without condition under gVisor: %s", n, condition(r))
			}
		}
	}
	for _, name := range []string{"mknod", "mknodat"} {
		mode := mknodMode[name]
		for _, c := range []struct {
			mode uint64
			want string
		}{
			{0o644, "allow"}, {sIFREG | 0o644, "allow"}, {sIFIFO | 0o600, "allow"}, {sIFSOCK | 0o755, "allow"},
			{sIFCHR | 0o666, "default"}, {sIFBLK | 0o666, "default"}, {sIFCHR | 0o4777, "default"},
			{0o040000 | 0o755, "default"}, {sIFMT, "default"},
		} {
			var args [6]uint64
			args[mode] = c.mode
			if got := decide(t, g, name, args); got != c.want {
				t.Errorf("%s with mode %#o under gVisor: %s, want %s", name, c.mode, got, c.want)
			}
			// The profile for runc allows every mknod: the kernel refuses
			// a device node to a caller without CAP_MKNOD.
			if got := decide(t, p, name, args); got != "allow" {
				t.Errorf("%s with mode %#o under runc: %s, want allow", name, c.mode, got)
			}
		}
	}
	if g.DefaultAction != specs.ActErrno || *g.DefaultErrnoRet != 1 {
		t.Errorf("default %s %v: a device node would not be refused with EPERM", g.DefaultAction, g.DefaultErrnoRet)
	}
}
