package seccomp

import (
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ForGVisor adapts p for gVisor (runsc with --oci-seccomp), which applies
// a container's profile inside its sandbox, with two differences from the
// host kernel that the profile must make up for.
//
// Debian's runsc 20221219 ignores a rule's errnoRet: every SCMP_ACT_ERRNO
// rule answers EPERM (socket's refused families too). Docker's default,
// and so ours, answers clone3 with ENOSYS precisely so that the C library
// falls back to clone; answered with EPERM, no thread can be created and
// neither runner starts. ForGVisor therefore allows clone3 through the
// filter, to gVisor's own kernel, which does not implement it and answers
// ENOSYS itself.
//
// gVisor's kernel lets a program without CAP_MKNOD create character and
// block device nodes (mknod, mknodat), and does not apply a mount's nodev
// (runsc 20221219 honours only ro, noexec and noatime): a node made on
// /tmp opens the Sentry's device behind it. Under the host kernel both
// need CAP_MKNOD, which a program never has. ForGVisor allows mknod and
// mknodat for the other file types only (a regular file, a FIFO, a
// socket: the mode's S_IFMT bits); a device node falls to the profile's
// default, EPERM, as under runc.
//
// Every other rule is unchanged: what the profile denies stays denied
// (with EPERM). The result is a fresh profile; p is not changed.
// ForGVisor(nil) is nil.
func ForGVisor(p *specs.LinuxSeccomp) *specs.LinuxSeccomp {
	if p == nil {
		return nil
	}
	q := *p
	q.Syscalls = nil
	moved := false
	var mknod []string
	for _, r := range p.Syscalls {
		r.Names = slices.Clone(r.Names)
		r.Args = slices.Clone(r.Args)
		if r.Action == specs.ActErrno && len(r.Args) == 0 && slices.Contains(r.Names, "clone3") {
			r.Names = slices.DeleteFunc(r.Names, func(n string) bool { return n == "clone3" })
			moved = true
		}
		if r.Action == specs.ActAllow && len(r.Args) == 0 {
			r.Names = slices.DeleteFunc(r.Names, func(n string) bool {
				if _, found := mknodMode[n]; found {
					mknod = append(mknod, n)
					return true
				}
				return false
			})
		}
		if len(r.Names) > 0 {
			q.Syscalls = append(q.Syscalls, r)
		}
	}
	if moved {
		q.Syscalls = append(q.Syscalls, specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActAllow})
	}
	for _, name := range mknod {
		for _, t := range nodeTypes {
			q.Syscalls = append(q.Syscalls, specs.LinuxSyscall{Names: []string{name}, Action: specs.ActAllow,
				Args: []specs.LinuxSeccompArg{{Index: mknodMode[name], Value: sIFMT, ValueTwo: t, Op: specs.OpMaskedEqual}}})
		}
	}
	q.Architectures = slices.Clone(p.Architectures)
	q.Flags = slices.Clone(p.Flags)
	return canonical(&q)
}

// The file-type bits of a mode (stat.h), the same on every Linux.
const (
	sIFMT   = 0o170000
	sIFSOCK = 0o140000
	sIFREG  = 0o100000
	sIFBLK  = 0o060000
	sIFCHR  = 0o020000
	sIFIFO  = 0o010000
)

// nodeTypes are the file types ForGVisor lets mknod create: a regular
// file (S_IFREG, or 0, which mknod reads as S_IFREG), a FIFO and a
// socket; not S_IFCHR or S_IFBLK.
var nodeTypes = []uint64{0, sIFREG, sIFIFO, sIFSOCK}

// mknodMode is the index of the mode argument of each mknod call.
var mknodMode = map[string]uint{"mknod": 1, "mknodat": 2}

// IsGVisor reports whether an OCI runtime name, as registered with an
// engine, is gVisor's: runsc (Debian's package and gVisor's docs register
// it under that name, or a variant such as runsc-debug) or gvisor.
func IsGVisor(runtime string) bool {
	return runtime == "gvisor" || runtime == "runsc" || len(runtime) > 5 && runtime[:6] == "runsc-"
}
