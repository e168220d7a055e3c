// Package seccomp builds the seccomp profile every program's container runs
// under, with the OCI runtime-spec types so any driver can apply it: the
// Docker driver passes it as `seccomp=<json>`, a containerd driver puts it
// in the OCI spec.
//
// The profile starts from the one Docker ships (the moby default, from
// github.com/moby/profiles/seccomp), resolved the way a daemon resolves it
// for our containers — no capabilities (CapDrop ALL), a current kernel —
// but for both amd64 and arm64 at once, so the same bytes serve either
// host and the figures do not depend on the machine that computes them.
// From that it removes the system calls a Node or Python runner never
// makes and that widen the kernel surface a hostile program can reach:
// io_uring, userfaultfd, perf_event_open, bpf, the keyring, the ptrace
// family, the mount family, kexec, memfd_create (an ELF written to a
// memfd would execute despite /tmp being noexec) and x86's socketcall.
// Removed lists them; removed.go says why, one by one. A removed call
// fails with EPERM, the profile's default.
//
// It narrows socket(2) and socketpair(2) to the address families the
// runners use — AF_UNIX, AF_INET, AF_INET6, and AF_NETLINK with
// NETLINK_ROUTE only (SocketFamilies; sockets.go says why, from a trace of
// both runners): any other family fails with EAFNOSUPPORT, another netlink
// protocol with EPROTONOSUPPORT, the kernel's own answers, never a kill.
// And it admits the hosts' native ABIs only (x86_64, aarch64), not the
// 32-bit and x32 ones moby's default lists, whose multiplexed socketcall
// would pass socket's family where no filter reads it.
//
// ForGVisor adapts a profile to gVisor's kernel: clone3 passes through
// (runsc 20221219 answers every errno rule with EPERM, and clone3 must be
// ENOSYS), and mknod cannot make device nodes (the Sentry lets a program
// without CAP_MKNOD make them and ignores nodev).
//
// Default is the moby default resolved the same way, for comparison:
// Count(Profile()) next to Count(Default()) is what doctor and the README
// report. Both are deterministic: rules without argument conditions that
// share an action are merged, names sorted, rules in a fixed order.
//
// Docker's own profile format is a superset of runtime-spec's
// LinuxSeccomp; the fields this package emits (defaultAction,
// defaultErrnoRet, architectures, syscalls[].names/action/errnoRet/args)
// are the ones Docker 20.10 and later parse.
package seccomp
