package seccomp

import (
	"fmt"
	"math"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// matches reports whether a rule's conditions hold for a call's
// arguments, the way runc, crun and gVisor read a rule whose conditions
// are on distinct arguments: all must hold.
func matches(t *testing.T, r specs.LinuxSyscall, args [6]uint64) bool {
	t.Helper()
	seen := map[uint]bool{}
	for _, a := range r.Args {
		if seen[a.Index] {
			t.Fatalf("rule %s has two conditions on argument %d: runtimes read them as alternatives", condition(r), a.Index)
		}
		seen[a.Index] = true
		v := args[a.Index]
		var ok bool
		switch a.Op {
		case specs.OpEqualTo:
			ok = v == a.Value
		case specs.OpNotEqual:
			ok = v != a.Value
		case specs.OpGreaterThan:
			ok = v > a.Value
		case specs.OpGreaterEqual:
			ok = v >= a.Value
		case specs.OpLessThan:
			ok = v < a.Value
		case specs.OpLessEqual:
			ok = v <= a.Value
		case specs.OpMaskedEqual:
			ok = v&a.Value == a.ValueTwo
		default:
			t.Fatalf("rule %s: unknown operator %s", condition(r), a.Op)
		}
		if !ok {
			return false
		}
	}
	return true
}

// decide is the answer p gives to a call of name with args: the one rule
// that matches, or the default action. More than one matching rule fails
// t: the answer would then depend on how a runtime orders them.
func decide(t *testing.T, p *specs.LinuxSeccomp, name string, args [6]uint64) string {
	t.Helper()
	var hit []specs.LinuxSyscall
	for _, r := range p.Syscalls {
		if slices.Contains(r.Names, name) && matches(t, r, args) {
			hit = append(hit, r)
		}
	}
	switch len(hit) {
	case 0:
		return "default"
	case 1:
		if hit[0].Action == specs.ActAllow {
			return "allow"
		}
		return fmt.Sprintf("%s %d", hit[0].Action, errno(hit[0]))
	}
	var c []string
	for _, r := range hit {
		c = append(c, condition(r))
	}
	t.Fatalf("%s%v matches %d rules: %v", name, args, len(hit), c)
	return ""
}

// families are the values a test tries for an address family: every small
// one, and values a raw syscall can pass in the upper bits.
func families() []uint64 {
	var fs []uint64
	for f := range uint64(300) {
		fs = append(fs, f)
	}
	return append(fs, 1<<12, 1<<31, math.MaxUint32, 1<<32|afUnix, 1<<32|afInet, 1<<63|afUnix, math.MaxUint64)
}

func TestSocketRules(t *testing.T) {
	p := Profile()
	refused := fmt.Sprintf("%s %d", specs.ActErrno, EAFNOSUPPORT)
	allowed := map[uint64]bool{}
	for _, f := range SocketFamilies() {
		allowed[uint64(f.Value)] = true
	}
	if len(allowed) != 4 || !allowed[afUnix] || !allowed[afInet] || !allowed[afInet6] || !allowed[afNetlink] {
		t.Fatalf("families %v, want AF_UNIX, AF_INET, AF_INET6, AF_NETLINK", SocketFamilies())
	}
	for _, f := range families() {
		want := refused
		if allowed[f] {
			want = "allow"
		}
		// socket(family, SOCK_STREAM, 0): AF_NETLINK's protocol 0 is
		// NETLINK_ROUTE.
		if got := decide(t, p, "socket", [6]uint64{f, 1}); got != want {
			t.Errorf("socket(%#x, SOCK_STREAM, 0): %s, want %s", f, got, want)
		}
		want = refused
		if f == afUnix {
			want = "allow"
		}
		if got := decide(t, p, "socketpair", [6]uint64{f, 1}); got != want {
			t.Errorf("socketpair(%#x, ...): %s, want %s", f, got, want)
		}
	}
	// A family an allowed one's value in its low 32 bits is refused: the
	// kernel would read it as that family, the filter reads 64 bits.
	for _, f := range []uint64{1<<32 | afUnix, 1<<32 | afNetlink} {
		if got := decide(t, p, "socket", [6]uint64{f}); got != refused {
			t.Errorf("socket(%#x): %s", f, got)
		}
	}
	// AF_NETLINK: NETLINK_ROUTE only, whatever the type; any other
	// protocol answers EPROTONOSUPPORT.
	for _, proto := range []uint64{1, 2, 4, 9, 12, 15, 16, 21, 1 << 32, math.MaxUint64} {
		for _, typ := range []uint64{2, 3, 3 | 0x80000} {
			if got, want := decide(t, p, "socket", [6]uint64{afNetlink, typ, proto}), fmt.Sprintf("%s %d", specs.ActErrno, EPROTONOSUPPORT); got != want {
				t.Errorf("socket(AF_NETLINK, %#x, %d): %s, want %s", typ, proto, got, want)
			}
		}
	}
	if got := decide(t, p, "socket", [6]uint64{afNetlink, 3 | 0x80000, netlinkRoute}); got != "allow" {
		t.Errorf("socket(AF_NETLINK, SOCK_RAW|SOCK_CLOEXEC, NETLINK_ROUTE): %s", got)
	}
	// Other families take any type and protocol.
	for _, f := range []uint64{afUnix, afInet, afInet6} {
		for _, proto := range []uint64{0, 6, 17, 1 << 40} {
			if got := decide(t, p, "socket", [6]uint64{f, 3, proto}); got != "allow" {
				t.Errorf("socket(%d, SOCK_RAW, %d): %s", f, proto, got)
			}
		}
	}
	// Under gVisor the same rules hold (ForGVisor changes neither call).
	g := ForGVisor(p)
	for _, f := range families() {
		if decide(t, g, "socket", [6]uint64{f}) != decide(t, p, "socket", [6]uint64{f}) {
			t.Errorf("ForGVisor changed socket(%#x)", f)
		}
	}
}

func TestOutside(t *testing.T) {
	for _, values := range [][]uint64{{1}, {1, 2, 10, 16}, {0}, {0, 1, 2, 3}, {5}, {7, 8}, {63, 64}} {
		var rules []specs.LinuxSyscall
		for _, c := range outside(values) {
			rules = append(rules, specs.LinuxSyscall{Names: []string{"x"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{c}})
		}
		p := &specs.LinuxSeccomp{Syscalls: rules}
		for v := range uint64(200) {
			want := fmt.Sprintf("%s -1", specs.ActErrno)
			if slices.Contains(values, v) {
				want = "default"
			}
			if got := decide(t, p, "x", [6]uint64{v}); got != want {
				t.Errorf("outside(%v) at %d: %s, want %s", values, v, got, want)
			}
		}
	}
	// The blocks are as large as they can be: {1, 2, 10, 16} takes 7
	// conditions (0, 3, 4-7, 8-9, 11, 12-15, >16).
	if n := len(outside([]uint64{1, 2, 10, 16})); n != 7 {
		t.Errorf("outside({1, 2, 10, 16}): %d conditions, want 7", n)
	}
}

func TestSocketFamiliesCopy(t *testing.T) {
	f := SocketFamilies()
	*f[3].Protocol = 99
	f[0].Name = "changed"
	if g := SocketFamilies(); *g[3].Protocol != netlinkRoute || g[0].Name != "AF_UNIX" {
		t.Error("SocketFamilies returns the package's own slice")
	}
	for _, f := range SocketFamilies() {
		if f.Why == "" {
			t.Errorf("%s: no reason given", f.Name)
		}
	}
}
