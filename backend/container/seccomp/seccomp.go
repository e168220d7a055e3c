package seccomp

import (
	"cmp"
	"encoding/json"
	"slices"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// arches are the host architectures the profiles are resolved for, named
// as moby's rule filters name them.
var arches = []string{"amd64", "arm64"}

// archOf maps those names to the profile's architecture tokens; each also
// brings the sub-architectures moby's archMap lists for it (x86 and x32
// for amd64, arm for arm64).
var archOf = map[string]specs.Arch{
	"amd64": specs.ArchX86_64,
	"arm64": specs.ArchAARCH64,
}

// nativeArches are the architectures of Profile: the hosts' own ABIs,
// without the 32-bit (x86, arm) and x32 ones moby's default admits beside
// them. Neither runner is a 32-bit or x32 program, and those ABIs reach
// the kernel through its compat layer, whose system calls take their
// arguments in other shapes — socketcall(2), x86's multiplexer, passes
// socket's family in memory no filter reads, a way around socketRules. A
// system call made through an architecture a profile does not list is
// the OCI runtime's "bad architecture" case: runc (libseccomp) kills the
// calling thread, gVisor has no 32-bit ABIs at all.
var nativeArches = []specs.Arch{specs.ArchX86_64, specs.ArchAARCH64}

// Profile returns the profile every program's container runs under:
// Default without the calls of Removed, with socket and socketpair
// narrowed to the address families of SocketFamilies (any other answers
// EAFNOSUPPORT), for the hosts' native ABIs only. The result is freshly
// built; the caller may change it.
func Profile() *specs.LinuxSeccomp {
	p := Default()
	for i := range p.Syscalls {
		p.Syscalls[i].Names = slices.DeleteFunc(p.Syscalls[i].Names, func(n string) bool { return isRemoved(n) || isNarrowed(n) })
	}
	p.Syscalls = append(p.Syscalls, socketRules()...)
	p.Architectures = slices.Clone(nativeArches)
	return canonical(p)
}

// Default returns the profile Docker ships (moby's default) resolved as a
// daemon resolves it for a container with no capabilities on a current
// kernel, for amd64 and arm64 hosts alike. It is what `--seccomp default`
// amounts to on a daemon of the same moby release; it is here to be
// compared with Profile.
func Default() *specs.LinuxSeccomp {
	return resolve(mobyseccomp.DefaultProfile(), arches)
}

// Allowed returns the distinct system call names p lets through, without
// condition or under conditions on their arguments, sorted. It is meant
// for deny-by-default profiles such as Profile and Default; nil allows
// nothing.
func Allowed(p *specs.LinuxSeccomp) []string {
	if p == nil {
		return nil
	}
	var names []string
	for _, r := range p.Syscalls {
		if r.Action == specs.ActAllow || r.Action == specs.ActLog {
			names = append(names, r.Names...)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Count is len(Allowed(p)): how many system calls p allows, without
// condition or conditionally.
func Count(p *specs.LinuxSeccomp) int { return len(Allowed(p)) }

// resolve turns a moby profile, whose rules carry conditions on the
// architecture, the container's capabilities and the kernel version, into
// the runtime-spec profile for a container holding no capabilities on a
// current kernel, keeping every rule that applies to at least one of
// arches. It differs from moby's own resolution (GetDefaultProfile) only
// in what that reads from the machine: the architecture (runtime.GOARCH)
// and the kernel (uname), neither of which says anything about the host
// the daemon runs on.
func resolve(m *mobyseccomp.Seccomp, arches []string) *specs.LinuxSeccomp {
	p := &specs.LinuxSeccomp{DefaultAction: m.DefaultAction}
	if m.DefaultErrnoRet != nil {
		v := *m.DefaultErrnoRet
		p.DefaultErrnoRet = &v
	}
	if len(m.Architectures) > 0 {
		p.Architectures = slices.Clone(m.Architectures)
	} else {
		for _, a := range arches {
			for _, am := range m.ArchMap {
				if am.Arch == archOf[a] {
					p.Architectures = append(p.Architectures, am.Arch)
					p.Architectures = append(p.Architectures, am.SubArches...)
				}
			}
		}
	}
	for _, call := range m.Syscalls {
		if !applies(call, arches) {
			continue
		}
		r := specs.LinuxSyscall{
			Names:  slices.Clone(call.Names),
			Action: call.Action,
			Args:   slices.Clone(call.Args),
		}
		//lint:ignore SA1019 old JSON profiles name a call in the single-name field
		if name := call.Name; name != "" {
			r.Names = append(r.Names, name)
		}
		if call.ErrnoRet != nil {
			v := *call.ErrnoRet
			r.ErrnoRet = &v
		}
		p.Syscalls = append(p.Syscalls, r)
	}
	return canonical(p)
}

// applies reports whether a moby rule is part of the profile of a
// container that holds no capabilities, on a kernel at least as new as any
// the profile names, on at least one of arches.
func applies(c *mobyseccomp.Syscall, arches []string) bool {
	// A rule that needs a capability is out; one that a capability
	// excludes stays (we hold none).
	if c.Includes != nil && len(c.Includes.Caps) > 0 {
		return false
	}
	// Includes.MinKernel holds on a current kernel; Excludes.MinKernel
	// excludes the rule there.
	if c.Excludes != nil && c.Excludes.MinKernel != nil {
		return false
	}
	return slices.ContainsFunc(arches, func(a string) bool {
		if c.Includes != nil && len(c.Includes.Arches) > 0 && !slices.Contains(c.Includes.Arches, a) {
			return false
		}
		return c.Excludes == nil || !slices.Contains(c.Excludes.Arches, a)
	})
}

// canonical drops rules without names, merges the rules without argument
// conditions that share an action and errno, sorts each rule's names, and
// orders the rules: allowing ones first, those without argument conditions
// first, then by first name and by arguments. The same input
// set always yields the same bytes.
func canonical(p *specs.LinuxSeccomp) *specs.LinuxSeccomp {
	var rules []specs.LinuxSyscall
	index := map[string]int{}
	for _, r := range p.Syscalls {
		if len(r.Names) == 0 {
			continue
		}
		k := condition(r)
		if i, ok := index[k]; ok && len(r.Args) == 0 {
			rules[i].Names = append(rules[i].Names, r.Names...)
			continue
		}
		index[k] = len(rules)
		r.Names = slices.Clone(r.Names)
		rules = append(rules, r)
	}
	for i := range rules {
		slices.Sort(rules[i].Names)
		rules[i].Names = slices.Compact(rules[i].Names)
	}
	slices.SortFunc(rules, func(a, b specs.LinuxSyscall) int {
		return cmp.Or(
			cmp.Compare(rank(a.Action), rank(b.Action)),
			cmp.Compare(a.Action, b.Action),
			cmp.Compare(errno(a), errno(b)),
			cmp.Compare(len(a.Args), len(b.Args)),
			cmp.Compare(a.Names[0], b.Names[0]),
			slices.CompareFunc(a.Args, b.Args, compareArgs),
			slices.Compare(a.Names, b.Names),
		)
	})
	p.Syscalls = rules
	return p
}

// condition renders what a rule does apart from its names.
func condition(r specs.LinuxSyscall) string {
	b, _ := json.Marshal(specs.LinuxSyscall{Action: r.Action, ErrnoRet: r.ErrnoRet, Args: r.Args})
	return string(b)
}

func compareArgs(a, b specs.LinuxSeccompArg) int {
	return cmp.Or(
		cmp.Compare(a.Index, b.Index),
		cmp.Compare(a.Op, b.Op),
		cmp.Compare(a.Value, b.Value),
		cmp.Compare(a.ValueTwo, b.ValueTwo),
	)
}

func rank(a specs.LinuxSeccompAction) int {
	if a == specs.ActAllow {
		return 0
	}
	return 1
}

func errno(r specs.LinuxSyscall) int64 {
	if r.ErrnoRet == nil {
		return -1
	}
	return int64(*r.ErrnoRet)
}
