package seccomp

import (
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Linux's numbers, the same on amd64 and arm64 (the package builds on any
// OS, so it does not take them from x/sys/unix).
const (
	afUnix       = 1
	afInet       = 2
	afInet6      = 10
	afNetlink    = 16
	netlinkRoute = 0

	// EAFNOSUPPORT is what socket(2) and socketpair(2) answer for an
	// address family the profile refuses: the kernel's own answer for a
	// family it was built without, which every C library and runtime
	// already handles.
	EAFNOSUPPORT = 97
	// EPROTONOSUPPORT is what socket(AF_NETLINK, ...) answers for a
	// netlink protocol other than NETLINK_ROUTE: the kernel's answer for a
	// netlink protocol it does not have.
	EPROTONOSUPPORT = 93
)

// SocketFamily is an address family socket(2) may create under Profile.
type SocketFamily struct {
	Name  string
	Value int
	// Protocol, when not nil, is the one protocol the family may be used
	// with; another is refused with EPROTONOSUPPORT.
	Protocol *int
	// Why the runners need it.
	Why string
}

func ptr(n int) *int { return &n }

// socketFamilies are the families a Node or Python runner creates, found
// by tracing both (strace -f -e trace=socket,socketpair inside the runner
// images: start, the bridge, the egress proxy, a fetch, getaddrinfo, a TCP
// connection to a name, os.networkInterfaces, socket.if_nameindex).
// Everything else — AF_PACKET, AF_KEY, AF_ALG, AF_VSOCK, AF_XDP, AF_TIPC,
// AF_RDS, AF_CAN, AF_BLUETOOTH, AF_KCM, AF_SMC... each its own protocol
// code in the kernel, several with a record of privilege escalations — is
// refused with EAFNOSUPPORT, as if the kernel had been built without it.
var socketFamilies = []SocketFamily{
	{Name: "AF_UNIX", Value: afUnix, Why: "the bridge socket (ws in Node, websockets in Python); glibc's nscd probe; socketpair for asyncio's self-pipe and Node's child-process pipes"},
	{Name: "AF_INET", Value: afInet, Why: "the egress proxy listens on 127.0.0.1 and a program's fetch, urllib or socket connects to it; getaddrinfo ranks its answers by connecting a UDP socket of each family (RFC 6724), without sending"},
	{Name: "AF_INET6", Value: afInet6, Why: "getaddrinfo's ranking (see AF_INET) and a program's own sockets to ::1"},
	{Name: "AF_NETLINK", Value: afNetlink, Protocol: ptr(netlinkRoute), Why: "glibc's getaddrinfo with AI_ADDRCONFIG (Node's net.connect and fetch to a host name) and getifaddrs (os.networkInterfaces, socket.if_nameindex) read the container's own links and addresses over NETLINK_ROUTE, which needs no capability to read and CAP_NET_ADMIN to change; the other netlink protocols (sock_diag, audit, uevents, generic netlink, netfilter, xfrm, crypto) are refused"},
}

// SocketFamilies returns the address families socket(2) may create under
// Profile, in the order of their numbers. Every other family fails with
// EAFNOSUPPORT; socketpair(2) takes AF_UNIX only.
func SocketFamilies() []SocketFamily {
	out := slices.Clone(socketFamilies)
	for i := range out {
		if p := out[i].Protocol; p != nil {
			out[i].Protocol = ptr(*p)
		}
	}
	return out
}

// narrowed are the calls whose moby rules Profile replaces with its own
// (socketRules).
var narrowed = []string{"socket", "socketpair"}

func isNarrowed(name string) bool { return slices.Contains(narrowed, name) }

// socketRules are Profile's rules for socket and socketpair: allow the
// families of socketFamilies (AF_NETLINK with its one protocol), answer
// every other family with EAFNOSUPPORT and another netlink protocol with
// EPROTONOSUPPORT. No value of the arguments matches two rules, so the
// order in which an OCI runtime tries them (libseccomp builds one decision
// tree; gVisor takes the first rule that matches) cannot change the
// answer, and none falls through to the profile's default.
//
// Each rule holds at most one condition per argument: runc, crun and
// gVisor read several conditions on the same argument as alternatives, not
// as all required.
func socketRules() []specs.LinuxSyscall {
	var rules []specs.LinuxSyscall
	var values []uint64
	for _, f := range socketFamilies {
		values = append(values, uint64(f.Value))
		args := []specs.LinuxSeccompArg{{Index: 0, Value: uint64(f.Value), Op: specs.OpEqualTo}}
		if f.Protocol != nil {
			args = append(args, specs.LinuxSeccompArg{Index: 2, Value: uint64(*f.Protocol), Op: specs.OpEqualTo})
			rules = append(rules, errnoRule("socket", EPROTONOSUPPORT,
				specs.LinuxSeccompArg{Index: 0, Value: uint64(f.Value), Op: specs.OpEqualTo},
				specs.LinuxSeccompArg{Index: 2, Value: uint64(*f.Protocol), Op: specs.OpNotEqual}))
		}
		rules = append(rules, specs.LinuxSyscall{Names: []string{"socket"}, Action: specs.ActAllow, Args: args})
	}
	for _, c := range outside(values) {
		rules = append(rules, errnoRule("socket", EAFNOSUPPORT, c))
	}
	rules = append(rules, specs.LinuxSyscall{Names: []string{"socketpair"}, Action: specs.ActAllow,
		Args: []specs.LinuxSeccompArg{{Index: 0, Value: afUnix, Op: specs.OpEqualTo}}})
	for _, c := range outside([]uint64{afUnix}) {
		rules = append(rules, errnoRule("socketpair", EAFNOSUPPORT, c))
	}
	return rules
}

func errnoRule(name string, errno uint, args ...specs.LinuxSeccompArg) specs.LinuxSyscall {
	return specs.LinuxSyscall{Names: []string{name}, Action: specs.ActErrno, ErrnoRet: &errno, Args: args}
}

// outside returns conditions on argument 0, one per rule, that together
// match every 64-bit value except those of values (which are small): for
// each largest aligned block of 0..max(values) that holds none of them, a
// masked comparison (value & ^(size-1) == start), and "greater than
// max(values)" for the rest.
func outside(values []uint64) []specs.LinuxSeccompArg {
	top := slices.Max(values)
	var out []specs.LinuxSeccompArg
	for v := uint64(0); v <= top; {
		if slices.Contains(values, v) {
			v++
			continue
		}
		size := uint64(1)
		// Grow the block while it stays aligned, within 0..top, and free.
		for v%(size*2) == 0 && v+size*2-1 <= top && !slices.ContainsFunc(values, func(x uint64) bool { return x >= v && x < v+size*2 }) {
			size *= 2
		}
		if size == 1 {
			out = append(out, specs.LinuxSeccompArg{Index: 0, Value: v, Op: specs.OpEqualTo})
		} else {
			out = append(out, specs.LinuxSeccompArg{Index: 0, Value: ^(size - 1), ValueTwo: v, Op: specs.OpMaskedEqual})
		}
		v += size
	}
	return append(out, specs.LinuxSeccompArg{Index: 0, Value: top, Op: specs.OpGreaterThan})
}
