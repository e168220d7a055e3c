package containertest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/seccomp"
)

// The kernel surface a program reaches beyond the system calls seccomp
// removes outright: the address families socket(2) creates, the foreign
// ABIs of the host (x86's 32-bit and x32 system calls), device nodes,
// /tmp's mount options and the OOM score. Each case runs in RunHostile
// with the others; RunSurface runs them alone.
//
// The probes are Python (raw system calls through ctypes): the Python
// runner runs them in its own process, the TypeScript runner, which
// cannot make raw system calls, in a python3 child in the same container
// (the filter is the container's, every process's). The foreign ABIs are
// tried in children in both languages: runc kills a thread that calls
// through an architecture the profile does not list.

// RunSurface runs the kernel-surface cases alone, in both languages, with
// RunHostile's checks (a typed outcome, the next program runs, nothing
// left behind).
func RunSurface(t *testing.T, cfg Config) {
	cfg.validate(t)
	runHostileCases(t, cfg, surfaceCases)
}

// namedFamilies are the address families the cases name in their
// reports (Linux's numbers); every other number is probed too.
var namedFamilies = map[int]string{
	0: "AF_UNSPEC", 3: "AF_AX25", 4: "AF_IPX", 5: "AF_APPLETALK", 7: "AF_BRIDGE", 9: "AF_X25", 15: "AF_KEY",
	17: "AF_PACKET", 21: "AF_RDS", 24: "AF_PPPOX", 26: "AF_LLC", 29: "AF_CAN", 30: "AF_TIPC", 31: "AF_BLUETOOTH",
	33: "AF_RXRPC", 35: "AF_PHONET", 36: "AF_IEEE802154", 38: "AF_ALG", 39: "AF_NFC", 40: "AF_VSOCK", 41: "AF_KCM",
	42: "AF_QIPCRTR", 43: "AF_SMC", 44: "AF_XDP", 45: "AF_MCTP",
}

// netlinkProtocols are netlink protocols other than NETLINK_ROUTE.
var netlinkProtocols = map[int]string{
	4: "NETLINK_SOCK_DIAG", 6: "NETLINK_XFRM", 9: "NETLINK_AUDIT", 12: "NETLINK_NETFILTER",
	15: "NETLINK_KOBJECT_UEVENT", 16: "NETLINK_GENERIC", 21: "NETLINK_CRYPTO",
}

// socketProbe defines socket_probe(): every address family from 0 to 63
// (and two with bits above the 32 the kernel reads), each with the
// stream, datagram, raw and seqpacket types, through the raw system call;
// NETLINK_ROUTE and the other netlink protocols; socketpair; and what the
// Python libraries do with the families they may use.
func socketProbe() string {
	allowed := []string{}
	for _, f := range seccomp.SocketFamilies() {
		allowed = append(allowed, fmt.Sprint(f.Value))
	}
	var protos []string
	for p := range netlinkProtocols {
		protos = append(protos, fmt.Sprint(p))
	}
	slices.Sort(protos)
	return `
import ctypes, errno, os, socket
def socket_probe():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    nr_socket, nr_pair = {"x86_64": (41, 53), "aarch64": (198, 199)}[os.uname().machine]
    def answer(r, fds=()):
        if r < 0:
            e = ctypes.get_errno()
            return errno.errorcode.get(e, str(e))
        for fd in fds or (r,):
            os.close(fd)
        return "ok"
    def sock(family, typ, proto=0):
        return answer(libc.syscall(ctypes.c_long(nr_socket), ctypes.c_long(family), ctypes.c_long(typ), ctypes.c_long(proto)))
    def pair(family):
        fds = (ctypes.c_int * 2)()
        r = libc.syscall(ctypes.c_long(nr_pair), ctypes.c_long(family), ctypes.c_long(1), ctypes.c_long(0), fds)
        return answer(r, (fds[0], fds[1]) if r >= 0 else ())
    allowed = [` + strings.Join(allowed, ", ") + `]
    out = {"refused": {}, "allowed": {}, "netlink": {}, "pair": {}}
    for family in list(range(64)) + [(1 << 32) | 1, (1 << 32) | 16]:
        if family not in allowed:
            out["refused"][str(family)] = sorted(set(sock(family, typ) for typ in (1, 2, 3, 5)))
    out["allowed"] = {"AF_UNIX stream": sock(1, 1), "AF_UNIX dgram": sock(1, 2), "AF_UNIX seqpacket": sock(1, 5),
                      "AF_INET stream": sock(2, 1), "AF_INET dgram": sock(2, 2), "AF_INET6 stream": sock(10, 1), "AF_INET6 dgram": sock(10, 2),
                      "AF_NETLINK NETLINK_ROUTE": sock(16, 3 | 0x80000, 0)}
    for proto in [` + strings.Join(protos, ", ") + `]:
        out["netlink"][str(proto)] = sorted(set(sock(16, typ, proto) for typ in (2, 3)))
    out["pair"] = {"1": pair(1), "2": pair(2), "10": pair(10), "16": pair(16), "0": pair(0), "38": pair(38)}
    # A numeric host: the sandbox's /etc/hosts is empty. AI_ADDRCONFIG
    # makes glibc read the configured addresses over NETLINK_ROUTE.
    try:
        out["getaddrinfo"] = sorted(set(a[4][0] for a in socket.getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG)))
    except OSError as e:
        out["getaddrinfo"] = str(e)
    try:
        out["if_nameindex"] = [n for _, n in socket.if_nameindex()]
    except OSError as e:
        out["if_nameindex"] = str(e)
    return out
`
}

// socketsResult is socket_probe's answer, with what Node itself does in
// the TypeScript program.
type socketsResult struct {
	Refused     map[string][]string `json:"refused"`
	Allowed     map[string]string   `json:"allowed"`
	Netlink     map[string][]string `json:"netlink"`
	Pair        map[string]string   `json:"pair"`
	GetAddrInfo json.RawMessage     `json:"getaddrinfo"`
	IfNameIndex json.RawMessage     `json:"if_nameindex"`
	Node        map[string]any      `json:"node"`
}

// foreignABIProbe is a python3 program that makes one system call
// through a foreign ABI of an x86_64 host, named by its argument, and
// prints what came back ("fd" or "pid" for a success, else the errno's
// name): x32 (the x86_64 call number with bit 30 set, through syscall())
// or 32-bit x86 (int 0x80 from machine code in an executable page below
// 4 GiB, the only way a 64-bit process reaches that ABI): socketcall(2)
// multiplexing socket(AF_VSOCK) with its arguments in memory, and the
// direct socket(AF_VSOCK). AF_VSOCK is a family the profile refuses and
// kernels commonly have. Its exit status tells a kill by the filter
// (SIGSYS) from a host without the 32-bit entry (SIGSEGV).
const foreignABIProbe = `
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def err():
    e = ctypes.get_errno()
    return errno.errorcode.get(e, str(e))
what = sys.argv[1]
if what == "x32 socket":
    r = libc.syscall(ctypes.c_long(0x40000000 | 41), ctypes.c_long(1), ctypes.c_long(1), ctypes.c_long(0))
    print("fd" if r >= 0 else err())
elif what == "x32 getpid":
    r = libc.syscall(ctypes.c_long(0x40000000 | 39))
    print("pid" if r >= 0 else err())
else:
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    # PROT_READ|WRITE|EXEC, MAP_PRIVATE|MAP_ANONYMOUS|MAP_32BIT
    page = libc.mmap(None, 4096, 7, 0x22 | 0x40, -1, 0)
    if page is None or page == ctypes.c_void_p(-1).value:
        print("mmap " + err())
        sys.exit(0)
    # int f(nr, a, b, c): push rbx; eax=nr; ebx=a; ecx=b; edx=c; int 0x80; pop rbx; ret
    code = bytes([0x53, 0x89, 0xf8, 0x89, 0xf3, 0x41, 0x89, 0xc8, 0x89, 0xd1, 0x44, 0x89, 0xc2, 0xcd, 0x80, 0x5b, 0xc3])
    ctypes.memmove(page, code, len(code))
    args = (ctypes.c_uint32 * 3).from_address(page + 256)
    args[0], args[1], args[2] = 40, 1, 0
    f = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32)(page)
    sys.stdout.flush()
    r = f(102, 1, page + 256, 0) if what == "i386 socketcall" else f(359, 40, 1, 0)
    print("fd" if r >= 0 else errno.errorcode.get(-r, str(-r)))
`

// foreignABICalls are foreignABIProbe's arguments.
var foreignABICalls = []string{"x32 socket", "x32 getpid", "i386 socketcall", "i386 socket"}

// deviceProbe defines device_probe(): mknod of a character device, a
// block device, a FIFO and a regular file on /tmp; /tmp's and /proc's
// options in /proc/mounts; and the process's oom_score_adj lowered by one
// and raised by one (written with os.write, whose error is the kernel's).
const deviceProbe = `
import errno, os, stat
def device_probe():
    def attempt(f):
        try:
            f()
            return "ok"
        except OSError as e:
            return errno.errorcode.get(e.errno, str(e.errno))
    out = {}
    for name, mode, dev in (("chr", stat.S_IFCHR, os.makedev(1, 3)), ("blk", stat.S_IFBLK, os.makedev(7, 0)), ("fifo", stat.S_IFIFO, 0), ("reg", stat.S_IFREG, 0)):
        out["mknod " + name] = attempt(lambda: os.mknod("/tmp/dsh-node-" + name, mode | 0o666, dev))
    for line in open("/proc/mounts"):
        f = line.split()
        if f[1] in ("/tmp", "/proc"):
            out["mount " + f[1]] = sorted(f[3].split(","))
    def adj(v):
        def write():
            fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            try:
                os.write(fd, str(v).encode())
            finally:
                os.close(fd)
        return attempt(write)
    start = int(open("/proc/self/oom_score_adj").read())
    out["oom_score_adj"] = start
    out["oom lower"] = adj(start - 1)
    out["oom after lower"] = int(open("/proc/self/oom_score_adj").read())
    out["oom raise"] = adj(out["oom after lower"] + 1)
    return out
`

// deviceResult is device_probe's answer.
type deviceResult struct {
	MknodChr, MknodBlk, MknodFIFO, MknodReg string
	MountTmp, MountProc                     []string
	OOMScoreAdj, OOMAfterLower              int
	OOMLower, OOMRaise                      string
}

func (d *deviceResult) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	for k, p := range map[string]any{
		"mknod chr": &d.MknodChr, "mknod blk": &d.MknodBlk, "mknod fifo": &d.MknodFIFO, "mknod reg": &d.MknodReg,
		"mount /tmp": &d.MountTmp, "mount /proc": &d.MountProc, "oom_score_adj": &d.OOMScoreAdj,
		"oom after lower": &d.OOMAfterLower, "oom lower": &d.OOMLower, "oom raise": &d.OOMRaise,
	} {
		v, found := m[k]
		if !found {
			return fmt.Errorf("no %q in %s", k, b)
		}
		if err := json.Unmarshal(v, p); err != nil {
			return fmt.Errorf("%q: %w", k, err)
		}
	}
	return nil
}

// pyChild is TypeScript that runs Python source in a python3 child and
// parses its JSON output.
func pyChild(src string) string {
	b, _ := json.Marshal(src)
	return `
const cp = await import("node:child_process");
const child = cp.spawnSync("python3", ["-c", ` + string(b) + `], { encoding: "utf8", timeout: 60000 });
if (child.status !== 0) throw new Error("probe: " + child.status + " " + child.signal + " " + child.stderr);
const probe = JSON.parse(child.stdout);
`
}

var surfaceCases = []hostileCase{
	{
		name: "socket address families",
		programs: progs(both(pyChild(socketProbe()+"\nimport json\nprint(json.dumps(socket_probe()))\n")+`
const os = await import("node:os");
const net = await import("node:net");
const node: Record<string, any> = {};
// libuv's getifaddrs reads NETLINK_ROUTE.
try { node.networkInterfaces = Object.keys(os.networkInterfaces()) } catch (e) { node.networkInterfaces = (e as any).code ?? String(e) }
const srv = net.createServer(s => s.end("hi"));
await new Promise<void>(r => srv.listen(0, "127.0.0.1", () => r()));
node.connect = await new Promise(r => {
  const c = net.connect((srv.address() as any).port, "127.0.0.1");
  c.on("data", d => r(String(d)));
  c.on("error", e => r((e as any).code));
});
srv.close();
return { ...probe, node };`, socketProbe()+`
return socket_probe()`)),
		checkWith: func(cfg Config) func(t *testing.T, lang backend.Language, res backend.RunResult) {
			return func(t *testing.T, lang backend.Language, res backend.RunResult) { checkSockets(t, cfg, lang, res) }
		},
	},
	{
		name: "foreign ABIs: x32 and 32-bit x86 system calls",
		programs: progs(func() map[backend.Language]string {
			child, _ := json.Marshal(foreignABIProbe)
			calls, _ := json.Marshal(foreignABICalls)
			return both(`
const cp = await import("node:child_process");
const os = await import("node:os");
if (os.machine() !== "x86_64") return { machine: os.machine() };
const out: Record<string, any> = { machine: os.machine() };
for (const what of `+string(calls)+`) {
  const r = cp.spawnSync("python3", ["-c", `+string(child)+`, what], { encoding: "utf8", timeout: 30000 });
  out[what] = { status: r.status, signal: r.signal, out: (r.stdout + r.stderr).trim().split("\n").pop() };
}
return out;`, `
import json, os, signal, subprocess
out = {"machine": os.uname().machine}
if out["machine"] == "x86_64":
    for what in `+string(calls)+`:
        r = subprocess.run(["python3", "-c", `+string(child)+`, what], capture_output=True, text=True, timeout=30)
        out[what] = {"status": r.returncode if r.returncode >= 0 else None,
                     "signal": signal.Signals(-r.returncode).name if r.returncode < 0 else None,
                     "out": (r.stdout + r.stderr).strip().split("\n")[-1]}
return out`)
		}()),
		checkWith: func(cfg Config) func(t *testing.T, lang backend.Language, res backend.RunResult) {
			return func(t *testing.T, lang backend.Language, res backend.RunResult) { checkForeignABIs(t, cfg, lang, res) }
		},
	},
	{
		name: "device nodes, /tmp's options and oom_score_adj",
		programs: progs(both(`
const fs = await import("node:fs");
`+pyChild(deviceProbe+"\nimport json\nprint(json.dumps(device_probe()))\n")+`
// The runner's own process: Node writes its oom_score_adj itself.
const adj = (v: number) => { try { fs.writeFileSync("/proc/self/oom_score_adj", String(v)); return "ok" } catch (e) { return (e as any).code } };
const start = Number(fs.readFileSync("/proc/self/oom_score_adj", "utf8"));
probe["oom_score_adj"] = start;
probe["oom lower"] = adj(start - 1);
probe["oom after lower"] = Number(fs.readFileSync("/proc/self/oom_score_adj", "utf8"));
probe["oom raise"] = adj(probe["oom after lower"] + 1);
return probe;`, deviceProbe+`
return device_probe()`)),
		checkWith: func(cfg Config) func(t *testing.T, lang backend.Language, res backend.RunResult) {
			return func(t *testing.T, lang backend.Language, res backend.RunResult) { checkDevices(t, cfg, lang, res) }
		},
	},
}

// refusedErrno is the answer a refused family gets: EAFNOSUPPORT, the
// profile's errnoRet, under runc; under gVisor the errnoRet runsc gives
// (Debian's 20221219 answers every errno rule with EPERM; later runsc
// honour errnoRet).
func (cfg Config) refusedErrnos(want string) []string {
	if cfg.gVisor() {
		return []string{"EPERM", want}
	}
	return []string{want}
}

func checkSockets(t *testing.T, cfg Config, lang backend.Language, res backend.RunResult) {
	v := decode[socketsResult](t, res)
	refused := cfg.refusedErrnos("EAFNOSUPPORT")
	for _, name := range []string{"AF_ALG", "AF_PACKET", "AF_VSOCK", "AF_KEY", "AF_XDP"} {
		found := false
		for n, named := range namedFamilies {
			found = found || named == name && v.Refused[fmt.Sprint(n)] != nil
		}
		if !found {
			t.Errorf("%s was not probed", name)
		}
	}
	if len(v.Refused) != 64-len(seccomp.SocketFamilies())+2 {
		t.Errorf("%d families probed, want every one of 0-63 but the allowed, and two with high bits", len(v.Refused))
	}
	// One subtest per refused family: the family, its answers.
	for _, fam := range slices.SortedFunc(maps.Keys(v.Refused), func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b)) }) {
		name := fam
		var n int
		if _, err := fmt.Sscan(fam, &n); err == nil && namedFamilies[n] != "" {
			name = fam + " " + namedFamilies[n]
		}
		t.Run("family "+name, func(t *testing.T) {
			got := v.Refused[fam]
			if len(got) != 1 || !slices.Contains(refused, got[0]) {
				t.Errorf("socket(%s, ...) answered %v, want %s for every type (refused by the profile, the process alive)", name, got, strings.Join(refused, " or "))
			}
		})
	}
	for k, got := range v.Allowed {
		if got != "ok" {
			t.Errorf("%s: %s, want a socket", k, got)
		}
	}
	protoRefused := cfg.refusedErrnos("EPROTONOSUPPORT")
	for p, got := range v.Netlink {
		var n int
		fmt.Sscan(p, &n)
		if len(got) != 1 || !slices.Contains(protoRefused, got[0]) {
			t.Errorf("socket(AF_NETLINK, ..., %s): %v, want %s", netlinkProtocols[n], got, strings.Join(protoRefused, " or "))
		}
	}
	for fam, got := range v.Pair {
		if want := map[bool][]string{true: {"ok"}, false: refused}[fam == "1"]; !slices.Contains(want, got) {
			t.Errorf("socketpair(%s, ...): %s, want %v", fam, got, want)
		}
	}
	// The libraries work with what is left: getaddrinfo with
	// AI_ADDRCONFIG and if_nameindex (netlink); in Node,
	// os.networkInterfaces (netlink) and a TCP connection on 127.0.0.1.
	var gai, ifs []string
	if json.Unmarshal(v.GetAddrInfo, &gai) != nil || !slices.Contains(gai, "127.0.0.1") {
		t.Errorf("getaddrinfo(127.0.0.1, AI_ADDRCONFIG): %s", v.GetAddrInfo)
	}
	if json.Unmarshal(v.IfNameIndex, &ifs) != nil || !slices.Contains(ifs, "lo") {
		t.Errorf("if_nameindex: %s", v.IfNameIndex)
	}
	if lang == backend.TypeScript {
		if ni, _ := json.Marshal(v.Node["networkInterfaces"]); !strings.Contains(string(ni), `"lo"`) {
			t.Errorf("os.networkInterfaces(): %s", ni)
		}
		if v.Node["connect"] != "hi" {
			t.Errorf("net.connect(127.0.0.1): %v", v.Node["connect"])
		}
	}
	samples := map[string][]string{}
	for _, n := range []int{38, 17, 40, 15, 44} {
		samples[namedFamilies[n]] = v.Refused[fmt.Sprint(n)]
	}
	outcome(t, lang, res, "%d families refused (%v), allowed %v, netlink protocols but ROUTE %v, socketpair %v",
		len(v.Refused), samples, v.Allowed, v.Netlink, v.Pair)
}

func checkForeignABIs(t *testing.T, cfg Config, lang backend.Language, res backend.RunResult) {
	v := decode[map[string]json.RawMessage](t, res)
	var machine string
	json.Unmarshal(v["machine"], &machine)
	if machine != "x86_64" {
		outcome(t, lang, res, "no foreign ABI to try on %s", machine)
		return
	}
	var summary []string
	for _, what := range foreignABICalls {
		var r shResult
		if err := json.Unmarshal(v[what], &r); err != nil {
			t.Fatalf("%s: %s", what, v[what])
		}
		sig, out := "", r.Out
		if r.Signal != nil {
			sig = *r.Signal
		}
		summary = append(summary, fmt.Sprintf("%s: %s%s", what, sig, out))
		switch {
		case out == "fd" || out == "pid":
			t.Errorf("%s went through: %s", what, r)
		case strings.HasPrefix(what, "x32"):
			// The filter decides, never the kernel: runc kills the
			// thread (x32 is not among the profile's architectures);
			// gVisor's filter knows native call numbers only and answers
			// with the default action. ENOSYS would be the kernel's
			// answer to a call the filter let through.
			if sig != "SIGSYS" && !(cfg.gVisor() && out == "EPERM") {
				t.Errorf("%s: %s, want killed by SIGSYS (the profile lists no x32 ABI)%s", what, r, map[bool]string{true: " or EPERM under gVisor"}[cfg.gVisor()])
			}
		default:
			// 32-bit x86: the filter kills the thread where the host
			// has the 32-bit entry (SIGSYS); a host or kernel without it
			// (gVisor; a hypervisor without compat segments) faults
			// (SIGSEGV). Either way no socket.
			if sig != "SIGSYS" && sig != "SIGSEGV" && out != "EPERM" {
				t.Errorf("%s: %s, want killed (SIGSYS by the filter, or SIGSEGV without a 32-bit entry) or EPERM", what, r)
			}
		}
	}
	outcome(t, lang, res, "%s", strings.Join(summary, "; "))
}

func checkDevices(t *testing.T, cfg Config, lang backend.Language, res backend.RunResult) {
	v := decode[deviceResult](t, res)
	if v.MknodChr != "EPERM" || v.MknodBlk != "EPERM" {
		t.Errorf("mknod of a character device: %s, of a block device: %s; want EPERM (no CAP_MKNOD; under gVisor the profile)", v.MknodChr, v.MknodBlk)
	}
	if v.MknodFIFO != "ok" || v.MknodReg != "ok" {
		t.Errorf("mknod of a FIFO: %s, of a regular file: %s; want ok", v.MknodFIFO, v.MknodReg)
	}
	// /tmp: noexec everywhere. runsc 20221219 applies (and shows) only
	// ro, noexec and noatime of a mount's options; nodev's purpose holds
	// there because no device node can be made, nosuid's because nothing
	// on /tmp executes and no_new_privs is set.
	want := []string{"noexec", "nosuid", "nodev"}
	if cfg.gVisor() {
		want = []string{"noexec"}
	}
	for _, o := range want {
		if !slices.Contains(v.MountTmp, o) {
			t.Errorf("/tmp mounted %v, without %s", v.MountTmp, o)
		}
	}
	switch {
	case !cfg.gVisor():
		// The host kernel: the driver's score, written by the OCI runtime
		// with CAP_SYS_RESOURCE, is the program's minimum — lowering
		// needs CAP_SYS_RESOURCE, raising not. A driver that leaves the
		// score unset hands the program its engine's (the shim's), whose
		// minimum may be lower: then lowering works on some hosts only,
		// so the starting score itself is asserted.
		if v.OOMScoreAdj != container.OOMScoreAdj {
			t.Errorf("oom_score_adj %d at start, want the driver's %d (container.OOMScoreAdj, set in the OCI spec)", v.OOMScoreAdj, container.OOMScoreAdj)
		}
		if v.OOMLower != "EACCES" || v.OOMAfterLower != v.OOMScoreAdj || v.OOMRaise != "ok" {
			t.Errorf("oom_score_adj %d: lowering %s (now %d), raising %s; want EACCES, unchanged, ok", v.OOMScoreAdj, v.OOMLower, v.OOMAfterLower, v.OOMRaise)
		}
	case cfg.ReadOnlyProcUnderGVisor:
		if v.OOMLower != "EROFS" || v.OOMAfterLower != v.OOMScoreAdj || v.OOMRaise != "EROFS" || !slices.Contains(v.MountProc, "ro") {
			t.Errorf("oom_score_adj %d under gVisor with /proc %v: lowering %s (now %d), raising %s; want EROFS, unchanged, EROFS on a read-only /proc", v.OOMScoreAdj, v.MountProc, v.OOMLower, v.OOMAfterLower, v.OOMRaise)
		}
	default:
		// The driver cannot make gVisor's /proc read-only (Docker's API
		// sets no option of /proc): the Sentry takes the lowered score,
		// which is its own number, not a host process's.
		if v.OOMLower != "ok" || v.OOMAfterLower != v.OOMScoreAdj-1 {
			t.Errorf("oom_score_adj %d under gVisor with /proc %v: lowering %s (now %d); want the Sentry's own score lowered (Config.ReadOnlyProcUnderGVisor is false)", v.OOMScoreAdj, v.MountProc, v.OOMLower, v.OOMAfterLower)
		}
	}
	outcome(t, lang, res, "mknod chr %s blk %s fifo %s; /tmp %v; /proc %v; oom_score_adj %d: lower %s, raise %s",
		v.MknodChr, v.MknodBlk, v.MknodFIFO, v.MountTmp, v.MountProc, v.OOMScoreAdj, v.OOMLower, v.OOMRaise)
}
