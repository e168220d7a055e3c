package seccomp

import (
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ForGVisor adapts p for gVisor (runsc with --oci-seccomp), which applies
// a container's profile inside its sandbox but ignores a rule's errnoRet:
// every SCMP_ACT_ERRNO rule answers EPERM. Docker's default, and so ours,
// answers clone3 with ENOSYS precisely so that the C library falls back
// to clone; answered with EPERM, no thread can be created and neither
// runner starts. ForGVisor therefore allows clone3 through the filter, to
// gVisor's own kernel, which does not implement it and answers ENOSYS
// itself. Every other rule is unchanged: what the profile denies stays
// denied (with EPERM). The result is a fresh profile; p is not changed.
// ForGVisor(nil) is nil.
func ForGVisor(p *specs.LinuxSeccomp) *specs.LinuxSeccomp {
	if p == nil {
		return nil
	}
	q := *p
	q.Syscalls = nil
	moved := false
	for _, r := range p.Syscalls {
		r.Names = slices.Clone(r.Names)
		r.Args = slices.Clone(r.Args)
		if r.Action == specs.ActErrno && len(r.Args) == 0 && slices.Contains(r.Names, "clone3") {
			r.Names = slices.DeleteFunc(r.Names, func(n string) bool { return n == "clone3" })
			moved = true
		}
		if len(r.Names) > 0 {
			q.Syscalls = append(q.Syscalls, r)
		}
	}
	if moved {
		q.Syscalls = append(q.Syscalls, specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActAllow})
	}
	q.Architectures = slices.Clone(p.Architectures)
	q.Flags = slices.Clone(p.Flags)
	return canonical(&q)
}

// IsGVisor reports whether an OCI runtime name, as registered with an
// engine, is gVisor's: runsc (Debian's package and gVisor's docs register
// it under that name, or a variant such as runsc-debug) or gvisor.
func IsGVisor(runtime string) bool {
	return runtime == "gvisor" || runtime == "runsc" || len(runtime) > 5 && runtime[:6] == "runsc-"
}
