package seccomp

import "slices"

// removal is one system call the profile takes away, and why.
type removal struct {
	name string
	why  string
}

// removals are the calls no rule of Profile allows, whatever the moby
// default would. Several are already denied by that default once resolved
// without capabilities (it gates bpf, perf_event_open and the mount family
// on CAP_SYS_ADMIN and friends, and omits io_uring since Docker 25, the
// keyring and userfaultfd); listing them here keeps them denied if a later
// moby release, or a caller resolving with capabilities, lets them back in.
// Docker 20.10's built-in default still allows io_uring.
var removals = []removal{
	// io_uring: an asynchronous interface to much of the kernel with a long
	// record of privilege-escalation bugs; its submitted operations are not
	// seen by seccomp. libuv (Node) treats it as an optional fast path for
	// file I/O and falls back to its thread pool; CPython never uses it.
	{"io_uring_setup", "io_uring: large, bug-prone kernel surface whose operations bypass seccomp; libuv falls back to its thread pool"},
	{"io_uring_enter", "io_uring (see io_uring_setup)"},
	{"io_uring_register", "io_uring (see io_uring_setup)"},

	{"userfaultfd", "lets a program stall the kernel's page faults at will, the usual way to win a kernel race; no runner handles faults in user space"},

	{"perf_event_open", "performance counters: a large, bug-prone kernel surface and a timing side channel; runners never profile"},

	{"bpf", "loads programs into the kernel; runners never do"},

	// The kernel keyring is not namespaced: keys are per user id, shared
	// with every container running as the same uid.
	{"add_key", "kernel keyring, not namespaced: shared with every container of the same uid"},
	{"keyctl", "kernel keyring (see add_key)"},
	{"request_key", "kernel keyring (see add_key); can also call out to a host upcall"},

	// The ptrace family reads and writes other processes; the runner and
	// the program are one process, nothing in the container debugs another.
	{"ptrace", "debugging other processes, historically a way around seccomp; runners never trace"},
	{"process_vm_readv", "reads another process's memory (ptrace family)"},
	{"process_vm_writev", "writes another process's memory (ptrace family)"},
	{"kcmp", "compares kernel objects of two processes (ptrace family)"},
	{"pidfd_getfd", "steals a file descriptor from another process (ptrace family)"},
	{"process_madvise", "advises on another process's memory (ptrace family)"},

	// The mount family: the container's mounts are fixed by the runtime.
	{"mount", "mount family: a program never changes its mounts"},
	{"umount", "mount family"},
	{"umount2", "mount family"},
	{"mount_setattr", "mount family"},
	{"move_mount", "mount family"},
	{"open_tree", "mount family"},
	{"fsopen", "mount family (new mount API)"},
	{"fsconfig", "mount family (new mount API)"},
	{"fsmount", "mount family (new mount API)"},
	{"fspick", "mount family (new mount API)"},
	{"pivot_root", "mount family"},
	{"listmount", "mount family: new (Linux 6.8) mount queries; /proc/self/mountinfo answers anything a runner asks"},
	{"statmount", "mount family (see listmount)"},

	{"kexec_load", "loads a new kernel"},
	{"kexec_file_load", "loads a new kernel"},

	// memfd_create makes an anonymous file that execveat(fd, "",
	// AT_EMPTY_PATH) or execve("/proc/self/fd/N") runs: an ELF the program
	// writes there executes although /tmp (the only writable place besides
	// /dev/shm, also noexec) is mounted noexec. Neither Node nor CPython
	// needs it to run.
	{"memfd_create", "an ELF written to a memfd executes, bypassing noexec on /tmp and /dev/shm; neither runner needs it"},

	// socketcall is the 32-bit x86 multiplexer of the socket calls: its
	// arguments sit in memory, where no filter reads them, so a
	// socket(AF_ALG) made through it would pass any rule on socket's
	// family. Profile does not list the 32-bit ABIs at all; this keeps
	// the multiplexer out if they come back.
	{"socketcall", "x86's socket multiplexer: its arguments are in memory, out of a filter's reach, a way around the rules on socket's address family; the runners are 64-bit"},
}

// Removed returns the system calls Profile takes away from Default, sorted.
// None of them appears in any rule of Profile; each fails with EPERM.
func Removed() []string {
	names := make([]string, len(removals))
	for i, r := range removals {
		names[i] = r.name
	}
	slices.Sort(names)
	return names
}

// Why says why name is removed, or "" when it is not.
func Why(name string) string {
	for _, r := range removals {
		if r.name == name {
			return r.why
		}
	}
	return ""
}

// isRemoved reports whether name is one of removals.
func isRemoved(name string) bool {
	return slices.ContainsFunc(removals, func(r removal) bool { return r.name == name })
}
