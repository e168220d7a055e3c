package seccomp

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/dsh-container/dsh-container/internal/testenv"
)

// The figures doctor and the README quote. A moby upgrade that moves them
// fails here: update both, and the README, together.
const (
	wantProfileCount = 368
	wantDefaultCount = 375
)

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rules flattens a profile into one line per (name, condition): what it
// does, apart from how the rules are grouped.
func rules(p *specs.LinuxSeccomp) []string {
	var out []string
	for _, r := range p.Syscalls {
		for _, n := range r.Names {
			out = append(out, n+" "+condition(r))
		}
	}
	slices.Sort(out)
	return out
}

func TestCounts(t *testing.T) {
	p, d := Profile(), Default()
	if got := Count(p); got != wantProfileCount {
		t.Errorf("Count(Profile()) = %d, want %d", got, wantProfileCount)
	}
	if got := Count(d); got != wantDefaultCount {
		t.Errorf("Count(Default()) = %d, want %d", got, wantDefaultCount)
	}
	inDefault := 0
	for _, n := range Removed() {
		if slices.Contains(Allowed(d), n) {
			inDefault++
		}
	}
	if Count(d)-Count(p) != inDefault {
		t.Errorf("Default allows %d more calls than Profile, but only %d removed calls are in Default", Count(d)-Count(p), inDefault)
	}
	t.Logf("Profile allows %d system calls, Default %d; removed from Default: %d of the %d in Removed", Count(p), Count(d), inDefault, len(Removed()))

	// Count counts names, once each, in allowing rules only.
	one := uint(38)
	hand := &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{
		{Names: []string{"read", "write"}, Action: specs.ActAllow},
		{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 1, Op: specs.OpEqualTo}}},
		{Names: []string{"socket", "write"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 2, Op: specs.OpEqualTo}}},
		{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &one},
		{Names: []string{"getpid"}, Action: specs.ActLog},
	}}
	if got, want := Allowed(hand), []string{"getpid", "read", "socket", "write"}; !slices.Equal(got, want) {
		t.Errorf("Allowed = %v, want %v", got, want)
	}
	if Count(hand) != 4 || Count(nil) != 0 {
		t.Errorf("Count = %d, Count(nil) = %d", Count(hand), Count(nil))
	}
}

func TestRemovedAppearInNoRule(t *testing.T) {
	p := Profile()
	for _, r := range p.Syscalls {
		for _, n := range r.Names {
			if slices.Contains(Removed(), n) {
				t.Errorf("removed %s in rule %s", n, condition(r))
			}
		}
	}
	// A removed call falls to the default action: EPERM.
	if p.DefaultAction != specs.ActErrno || p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != 1 {
		t.Errorf("default action %s errno %v, want SCMP_ACT_ERRNO with EPERM", p.DefaultAction, p.DefaultErrnoRet)
	}
}

// Profile is Default less the removed names, with moby's rules for socket
// and socketpair replaced by socketRules and the architectures cut to the
// native ones: every other rule, with its action, errno and argument
// conditions, is kept, and nothing else is added.
func TestEverythingElseKept(t *testing.T) {
	p, d := Profile(), Default()
	var want []string
	for _, line := range rules(d) {
		if name, _, _ := strings.Cut(line, " "); !slices.Contains(Removed(), name) && !isNarrowed(name) {
			want = append(want, line)
		}
	}
	want = append(want, rules(&specs.LinuxSeccomp{Syscalls: socketRules()})...)
	slices.Sort(want)
	if got := rules(p); !slices.Equal(got, want) {
		t.Errorf("Profile's rules differ from Default's less Removed, with our socket rules:\ngot  %d %v\nwant %d %v", len(got), got, len(want), want)
	}
	if p.DefaultAction != d.DefaultAction || !reflect.DeepEqual(p.DefaultErrnoRet, d.DefaultErrnoRet) {
		t.Errorf("Profile's default action differs from Default's")
	}
	if len(p.Flags) != 0 || p.ListenerPath != "" || p.ListenerMetadata != "" {
		t.Errorf("flags or listener set: %+v", p)
	}
	for _, need := range []string{"execve", "mmap", "mprotect", "clone", "futex", "epoll_pwait", "socket", "socketpair", "connect", "rseq", "madvise"} {
		if !slices.Contains(Allowed(p), need) {
			t.Errorf("%s, which the runners make, is not allowed", need)
		}
	}
}

// The profile admits the native ABIs only; moby's default also admits
// the 32-bit and x32 ones.
func TestArchitectures(t *testing.T) {
	if got, want := Profile().Architectures, []specs.Arch{specs.ArchX86_64, specs.ArchAARCH64}; !slices.Equal(got, want) {
		t.Errorf("Profile's architectures %v, want %v", got, want)
	}
	if got, want := Default().Architectures, []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32, specs.ArchAARCH64, specs.ArchARM}; !slices.Equal(got, want) {
		t.Errorf("Default's architectures %v, want %v", got, want)
	}
	// Architecture-specific rules of both arches are there.
	for _, n := range []string{"arch_prctl", "modify_ldt", "set_tls", "arm_fadvise64_64"} {
		if !slices.Contains(Allowed(Profile()), n) {
			t.Errorf("%s missing", n)
		}
	}
	for _, n := range []string{"s390_runtime_instr", "riscv_flush_icache", "swapcontext"} {
		if slices.Contains(Allowed(Profile()), n) {
			t.Errorf("%s, of another architecture, allowed", n)
		}
	}
	// x86's socket multiplexer, whose arguments no filter can read, is in
	// no rule even though the x86 ABI is gone; moby's default allows it.
	if !slices.Contains(Removed(), "socketcall") || !slices.Contains(Allowed(Default()), "socketcall") {
		t.Error("socketcall: not removed, or not in Default")
	}
}

func TestDeterministic(t *testing.T) {
	first := mustJSON(t, Profile())
	for range 3 {
		if got := mustJSON(t, Profile()); got != first {
			t.Fatal("two calls give different profiles")
		}
	}
	p := Profile()
	for _, r := range p.Syscalls {
		if !slices.IsSorted(r.Names) || len(slices.Compact(slices.Clone(r.Names))) != len(r.Names) {
			t.Errorf("names of rule %s not sorted or repeated: %v", condition(r), r.Names)
		}
	}
	// The order does not depend on the order the rules come in.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		q := Profile()
		rng.Shuffle(len(q.Syscalls), func(i, j int) { q.Syscalls[i], q.Syscalls[j] = q.Syscalls[j], q.Syscalls[i] })
		for _, r := range q.Syscalls {
			rng.Shuffle(len(r.Names), func(i, j int) { r.Names[i], r.Names[j] = r.Names[j], r.Names[i] })
		}
		if got := mustJSON(t, canonical(q)); got != first {
			t.Fatal("canonical depends on the input order")
		}
	}
	// Each call builds a fresh profile.
	p.Syscalls[0].Names[0] = "changed"
	p.Syscalls = p.Syscalls[:1]
	if mustJSON(t, Profile()) != first {
		t.Fatal("changing a returned profile changes the next one")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for name, p := range map[string]*specs.LinuxSeccomp{"Profile": Profile(), "Default": Default()} {
		b := mustJSON(t, p)
		var back specs.LinuxSeccomp
		if err := json.Unmarshal([]byte(b), &back); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(&back, p) {
			t.Errorf("%s does not survive a JSON round trip", name)
		}
		// Docker's own format reads it back too.
		got, err := mobyseccomp.LoadProfile(b, noCaps())
		if err != nil || !reflect.DeepEqual(got, p) {
			t.Errorf("%s: moby's loader reads something else (%v)", name, err)
		}
	}
}

func TestRemoved(t *testing.T) {
	r := Removed()
	if !slices.IsSorted(r) || len(slices.Compact(slices.Clone(r))) != len(r) {
		t.Fatalf("not sorted or repeated: %v", r)
	}
	for _, n := range []string{
		"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "perf_event_open", "bpf",
		"keyctl", "add_key", "request_key", "ptrace", "mount", "umount2", "fsopen", "kexec_load", "kexec_file_load", "memfd_create",
	} {
		if !slices.Contains(r, n) {
			t.Errorf("%s not removed", n)
		}
	}
	for _, n := range r {
		if Why(n) == "" {
			t.Errorf("%s: no reason given", n)
		}
	}
	if Why("read") != "" {
		t.Error("Why of a call that is kept")
	}
}

func noCaps() *specs.Spec {
	return &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
}

// For the machine's own architecture, resolve agrees with moby's own
// resolution (which reads runtime.GOARCH and the running kernel).
func TestResolveAgreesWithMoby(t *testing.T) {
	if !slices.Contains(arches, runtime.GOARCH) {
		testenv.Unsupported(t, "profiles are resolved for %v, not %s", arches, runtime.GOARCH)
	}
	moby, err := mobyseccomp.GetDefaultProfile(noCaps())
	if err != nil {
		t.Fatal(err)
	}
	ours := resolve(mobyseccomp.DefaultProfile(), []string{runtime.GOARCH})
	if got, want := mustJSON(t, ours), mustJSON(t, canonical(moby)); got != want {
		t.Errorf("resolve for %s differs from moby's:\nours %s\nmoby %s", runtime.GOARCH, got, want)
	}
}

// resolve understands every condition moby's rules can carry: a new kind
// of condition, or a kernel condition that is not the one we know, needs a
// decision here before the profile can follow it.
func TestMobyConditionsKnown(t *testing.T) {
	var fields []string
	for f := range reflect.TypeFor[mobyseccomp.Filter]().Fields() {
		fields = append(fields, f.Name)
	}
	if !slices.Equal(fields, []string{"Caps", "Arches", "MinKernel"}) {
		t.Errorf("moby's rule conditions are now %v", fields)
	}
	m := mobyseccomp.DefaultProfile()
	if len(m.Flags) != 0 || m.ListenerPath != "" || len(m.Architectures) != 0 {
		t.Errorf("moby's default sets flags, a listener or flat architectures: %+v", m.LinuxSeccomp)
	}
	for _, c := range m.Syscalls {
		if c.Excludes != nil && c.Excludes.MinKernel != nil {
			t.Errorf("rule %v excluded from kernel %s on", c.Names, c.Excludes.MinKernel)
		}
		if c.Includes != nil && c.Includes.MinKernel != nil {
			// Included on kernels from 4.8 on, which every host we support
			// runs; the rule (the ptrace family) is removed anyway.
			if fmt.Sprint(c.Includes.MinKernel) != "4.8" {
				t.Errorf("rule %v included from kernel %s on", c.Names, c.Includes.MinKernel)
			}
			for _, n := range c.Names {
				if !slices.Contains(Removed(), n) {
					t.Errorf("%s: allowed by Profile on a kernel condition", n)
				}
			}
		}
	}
}
