package containertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
)

// The hostile-program suite: programs that try to exhaust, escape or
// outlive their container. Every case must end with a typed outcome, leave
// the host able to run the next program, and leave nothing behind (the
// env's leak check: containers, socket directories). RunHostile also
// checks that the process running it leaks no goroutine and no file
// descriptor.
//
// Each case logs one "OUTCOME <lang> <case>: ..." line so the suite's
// behaviour can be quoted:
//
//	go test -count=1 -run TestHostile -v ./e2e/ | grep OUTCOME

// tsSh runs a command from a TypeScript program and summarizes how it ended.
const tsSh = `
const cp = await import("node:child_process");
const sh = (cmd: string, ...args: string[]) => {
  const r = cp.spawnSync(cmd, args, { encoding: "utf8", timeout: 5000 });
  return { status: r.status, signal: r.signal, err: r.error ? (r.error as any).code : null,
           out: ((r.stdout ?? "") + (r.stderr ?? "")).trim().slice(0, 160) };
};
`

// pySh is the Python counterpart of tsSh, plus raw syscalls through ctypes.
const pySh = `
import subprocess, ctypes, errno as _errno
def sh(*args):
    try:
        r = subprocess.run(list(args), capture_output=True, text=True, timeout=5)
        return {"status": r.returncode, "signal": None, "err": None, "out": (r.stdout + r.stderr).strip()[:160]}
    except OSError as e:
        return {"status": None, "signal": None, "err": _errno.errorcode.get(e.errno, str(e.errno)), "out": str(e)}
libc = ctypes.CDLL(None, use_errno=True)
def rc(r):
    return "ok" if r >= 0 else _errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
`

// shResult is the JSON shape of sh() above.
type shResult struct {
	Status *int    `json:"status"`
	Signal *string `json:"signal"`
	Err    *string `json:"err"`
	Out    string  `json:"out"`
}

func (r shResult) succeeded() bool {
	return r.Err == nil && r.Signal == nil && r.Status != nil && *r.Status == 0
}

func (r shResult) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}

type hostileCase struct {
	name string
	// programs are the case's programs; the host address is one a
	// container with a network would reach.
	programs func(hostAddress string) map[backend.Language]string
	bindings func(t *testing.T) []backend.BindingNamespace
	limits   func(*container.Limits)
	// nativeLimits, when set, are applied after limits off gVisor, where
	// the host kernel's limit is what the case waits for.
	nativeLimits func(*container.Limits)
	check        func(t *testing.T, lang backend.Language, res backend.RunResult)
	// gVisorCheck, when set, replaces check under gVisor: the case
	// asserts what gVisor provides where its kernel answers differently.
	gVisorCheck func(t *testing.T, lang backend.Language, res backend.RunResult)
	// checkWith, when set, replaces both with a check that reads the
	// suite's configuration.
	checkWith func(cfg Config) func(t *testing.T, lang backend.Language, res backend.RunResult)
}

func progs(m map[backend.Language]string) func(string) map[backend.Language]string {
	return func(string) map[backend.Language]string { return m }
}

var hostileCases = []hostileCase{
	{
		name: "fork bomb",
		// The classic shell bomb runs in the background while the program
		// itself forks sleepers until the pids limit refuses one.
		programs: progs(both(`
const cp = await import("node:child_process");
const bomb = cp.spawn("sh", ["-c", "f(){ f | f & }; f"], { stdio: "ignore", detached: true });
bomb.on("error", () => {});
bomb.unref();
let started = 0, err = "";
while (!err && started < 1000) {
  err = await new Promise<string>(res => {
    const c = cp.spawn("sleep", ["1000"], { stdio: "ignore" });
    c.once("spawn", () => { started++; res("") });
    c.once("error", e => res((e as any).code ?? String(e)));
  });
}
return { started, err };`, `
import errno, os, subprocess, time
subprocess.Popen(["sh", "-c", "f(){ f | f & }; f"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
started, err = 0, ""
while not err and started < 1000:
    try:
        if os.fork() == 0:
            time.sleep(1000)
            os._exit(0)
        started += 1
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e))
return {"started": started, "err": err}`)),
		limits: func(l *container.Limits) { l.Pids = 64 },
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			v := decode[struct {
				Started int
				Err     string
			}](t, res)
			if v.Err != "EAGAIN" || v.Started >= 64 {
				t.Fatalf("fork bomb not stopped by the pids limit (64): %+v", v)
			}
			outcome(t, lang, res, "the program survived; %d forks, then %s", v.Started, v.Err)
		},
		// Under gVisor the limit is GVisorPids and holds the Sentry's
		// own host threads: the sandbox as a whole is stopped, either by
		// a fork failing with EAGAIN or by the Sentry dying when it can
		// create no more host threads (the run then fails as an exit).
		// Either way the bomb ends, in a typed outcome, and the next
		// program runs normally.
		gVisorCheck: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			if res.Error != nil {
				if res.Error.Kind != backend.FailureExit && res.Error.Kind != backend.FailureOOM {
					t.Fatalf("fork bomb under gVisor: %s: %s, want the sandbox stopped (exit) or EAGAIN", res.Error.Kind, res.Error.Message)
				}
				outcome(t, lang, res, "the sandbox was stopped at the pids limit (%d): %s", GVisorPids, firstLine(res.Error.Message))
				return
			}
			v := decode[struct {
				Started int
				Err     string
			}](t, res)
			if v.Err != "EAGAIN" || v.Started >= GVisorPids {
				t.Fatalf("fork bomb not stopped by the pids limit (%d) under gVisor: %+v", GVisorPids, v)
			}
			outcome(t, lang, res, "the program survived; %d forks, then %s", v.Started, v.Err)
		},
	},
	{
		name: "thread bomb",
		programs: progs(both(`
const { Worker } = await import("node:worker_threads");
const workers: any[] = [];
let error = "";
for (let i = 0; i < 500 && !error; i++) {
  try {
    const w = new Worker("setInterval(() => {}, 1000)", { eval: true });
    await new Promise<void>((res) => { w.once("online", () => res()); w.once("error", (e) => { error = String((e as any).code ?? e); res(); }); });
    workers.push(w);
  } catch (e) { error = String((e as any).code ?? e); }
}
const n = workers.length;
for (const w of workers) await w.terminate();
return { started: n, error };`, `
import threading
ev = threading.Event()
started, error = 0, ""
threads = []
while started < 5000:
    try:
        th = threading.Thread(target=ev.wait, daemon=True)
        th.start()
        threads.append(th)
        started += 1
    except RuntimeError as e:
        error = str(e)
        break
ev.set()
for th in threads:
    th.join()
return {"started": started, "error": error}`)),
		limits: func(l *container.Limits) { l.Pids = 64; l.MemoryBytes = 512 << 20 },
		// Off gVisor the pids limit must answer, never a budget: starting
		// Node's workers one by one to the limit took 22.8-27.1 s of wall
		// time (over the suite's 20 s: "wall-clock budget exceeded" on a
		// loaded machine) and 7.3-8.8 s of CPU (near the default 10 s).
		nativeLimits: func(l *container.Limits) { l.WallTime, l.ComputeTime = 5*time.Minute, time.Minute },
		check:        threadBombCheck(64),
		// Under gVisor a guest thread is a task of gVisor's kernel, not a
		// host thread: the pids limit (GVisorPids) holds the Sentry's
		// own threads, not the guest's. The bomb is then bounded by the
		// compute budget or the memory limit, or the sandbox dies at the
		// limit (an exit): any typed outcome, never a hang.
		gVisorCheck: gVisorThreadBombCheck,
	},
	{
		name: "memory bomb",
		programs: progs(both(`
const hog: number[][] = [];
for (;;) hog.push(Array.from({ length: 1 << 16 }, (_, i) => i + 0.5));`, `
hog = []
while True:
    hog.append(bytearray(1 << 20))`)),
		limits: func(l *container.Limits) { l.MemoryBytes = 128 << 20; l.TmpfsBytes = 16 << 20 },
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantFailure(t, res, backend.FailureOOM, "memory limit")
			outcome(t, lang, res, "%s", res.Error.Message)
		},
	},
	{
		name: "off-heap memory bomb",
		programs: progs(ts(`
const hog: Buffer[] = [];
for (;;) hog.push(Buffer.alloc(1 << 20, 1));`)),
		limits: func(l *container.Limits) { l.MemoryBytes = 128 << 20; l.TmpfsBytes = 16 << 20 },
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantFailure(t, res, backend.FailureOOM, "memory limit")
			outcome(t, lang, res, "%s", res.Error.Message)
		},
	},
	{
		name: "tmpfs fill",
		programs: progs(both(`
const fs = await import("node:fs");
const chunk = Buffer.alloc(1 << 20, 120);
let written = 0, error = "";
const fd = fs.openSync("/tmp/fill", "w");
try { for (;;) written += fs.writeSync(fd, chunk); } catch (e) { error = (e as any).code; }
fs.closeSync(fd);
fs.unlinkSync("/tmp/fill");
fs.writeFileSync("/tmp/after", "still works");
return { written, error, after: fs.readFileSync("/tmp/after", "utf8") };`, `
import errno, os
chunk = b"x" * (1 << 20)
written, error = 0, ""
with open("/tmp/fill", "wb", buffering=0) as f:
    try:
        while True:
            written += f.write(chunk)
    except OSError as e:
        error = errno.errorcode[e.errno]
os.unlink("/tmp/fill")
with open("/tmp/after", "w") as f:
    f.write("still works")
return {"written": written, "error": error, "after": open("/tmp/after").read()}`)),
		limits: func(l *container.Limits) { l.TmpfsBytes = 16 << 20 },
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			v := decode[struct {
				Written int64
				Error   string
				After   string
			}](t, res)
			if v.Error != "ENOSPC" || v.Written > 16<<20 || v.After != "still works" {
				t.Fatalf("tmpfs fill: %+v", v)
			}
			outcome(t, lang, res, "%d bytes written, then %s; /tmp usable after cleanup", v.Written, v.Error)
		},
	},
	{
		name: "writing to the root and kernel files",
		programs: progs(both(`
const fs = await import("node:fs");
const out: Record<string, string> = {};
for (const p of ["/etc/passwd", "/usr/bin/node", "/newfile", "/proc/sys/kernel/hostname", "/proc/sysrq-trigger", "/sys/fs/cgroup/pids.max", "/sys/kernel/uevent_helper", "/dev/kmsg"]) {
  try { fs.appendFileSync(p, "x"); out[p] = "written" } catch (e) { out[p] = (e as any).code }
}
return out;`, `
import errno
out = {}
for p in ["/etc/passwd", "/usr/bin/python3", "/newfile", "/proc/sys/kernel/hostname", "/proc/sysrq-trigger", "/sys/fs/cgroup/pids.max", "/sys/kernel/uevent_helper", "/dev/kmsg"]:
    try:
        with open(p, "a") as f:
            f.write("x")
        out[p] = "written"
    except OSError as e:
        out[p] = errno.errorcode.get(e.errno, str(e.errno))
return out`)),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			v := decode[map[string]string](t, res)
			for p, r := range v {
				if r == "written" {
					t.Fatalf("%s was writable (%v)", p, v)
				}
			}
			outcome(t, lang, res, "%v", v)
		},
	},
	{
		name: "output flood: one giant line",
		programs: progs(both(`
process.stdout.write("x".repeat(8 << 20));
console.log("y".repeat(8 << 20));
return "done";`, `
import sys
sys.stdout.write("x" * (8 << 20))
sys.stdout.flush()
print("y" * (8 << 20))
return "done"`)),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantValue(t, res, `"done"`)
			checkLogCap(t, res)
			outcome(t, lang, res, "%d entries kept", len(res.Logs))
		},
	},
	{
		name: "output flood: many lines",
		programs: progs(both(`
for (let i = 0; i < 200000; i++) console.log("line", i);
for (let i = 0; i < 50000; i++) process.stderr.write("err " + i + "\n");
return "done";`, `
import sys
for i in range(200000):
    print("line", i)
for i in range(50000):
    sys.stderr.write("err %d\n" % i)
return "done"`)),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantValue(t, res, `"done"`)
			checkLogCap(t, res)
			outcome(t, lang, res, "%d entries kept", len(res.Logs))
		},
	},
	{
		name:     "huge return value",
		programs: progs(both(`return { big: "v".repeat(16 << 20) }`, `return {"big": "v" * (16 << 20)}`)),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			ok(t, res)
			if !res.ValueTruncated || len(res.Value) > container.DefaultLimits().ValueBytes+64 {
				t.Fatalf("value of %d bytes, truncated=%v", len(res.Value), res.ValueTruncated)
			}
			var s string
			if err := json.Unmarshal(res.Value, &s); err != nil {
				t.Fatalf("truncated value is not a JSON string: %v", err)
			}
			outcome(t, lang, res, "%d-byte value kept", len(res.Value))
		},
	},
	{
		name: "network attempts",
		programs: func(gw string) map[backend.Language]string {
			return both(fmt.Sprintf(`
const net = await import("node:net");
const dgram = await import("node:dgram");
const dns = await import("node:dns/promises");
const tcp = (host: string, port: number) => new Promise<string>(res => {
  const s = net.connect({ host, port });
  s.on("connect", () => { s.destroy(); res("connected") });
  s.on("error", e => res((e as any).code));
  setTimeout(() => { s.destroy(); res("timeout") }, 3000);
});
const udp = (host: string, type: "udp4" | "udp6") => new Promise<string>(res => {
  const s = dgram.createSocket(type);
  s.on("error", e => { s.close(); res((e as any).code) });
  s.send("x", 53, host, e => { s.close(); res(e ? (e as any).code : "sent") });
});
return {
  "tcp 192.0.2.1:80": await tcp("192.0.2.1", 80),
  "tcp metadata 169.254.169.254:80": await tcp("169.254.169.254", 80),
  "tcp host %[1]s:2375": await tcp("%[1]s", 2375),
  "tcp6 [2001:db8::1]:80": await tcp("2001:db8::1", 80),
  "udp 192.0.2.1:53": await udp("192.0.2.1", "udp4"),
  "udp host %[1]s:53": await udp("%[1]s", "udp4"),
  "udp6 [2001:db8::1]:53": await udp("2001:db8::1", "udp6"),
  "dns dsh-probe.invalid": await dns.lookup("dsh-probe.invalid").then(() => "resolved", e => e.code),
};`, gw), fmt.Sprintf(`
import errno, socket
def attempt(family, kind, addr):
    s = socket.socket(family, kind)
    s.settimeout(3)
    try:
        if kind == socket.SOCK_STREAM:
            s.connect(addr)
            return "connected"
        s.sendto(b"x", addr)
        return "sent"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
    finally:
        s.close()
out = {
    "tcp 192.0.2.1:80": attempt(socket.AF_INET, socket.SOCK_STREAM, ("192.0.2.1", 80)),
    "tcp metadata 169.254.169.254:80": attempt(socket.AF_INET, socket.SOCK_STREAM, ("169.254.169.254", 80)),
    "tcp host %[1]s:2375": attempt(socket.AF_INET, socket.SOCK_STREAM, ("%[1]s", 2375)),
    "tcp6 [2001:db8::1]:80": attempt(socket.AF_INET6, socket.SOCK_STREAM, ("2001:db8::1", 80)),
    "udp 192.0.2.1:53": attempt(socket.AF_INET, socket.SOCK_DGRAM, ("192.0.2.1", 53)),
    "udp host %[1]s:53": attempt(socket.AF_INET, socket.SOCK_DGRAM, ("%[1]s", 53)),
    "udp6 [2001:db8::1]:53": attempt(socket.AF_INET6, socket.SOCK_DGRAM, ("2001:db8::1", 53)),
}
try:
    socket.getaddrinfo("dsh-probe.invalid", 80)
    out["dns dsh-probe.invalid"] = "resolved"
except socket.gaierror as e:
    out["dns dsh-probe.invalid"] = "gaierror %%d" %% e.errno
return out`, gw))
		},
		check: networkCheck(false),
		// gVisor's netstack has no route either, and answers every
		// attempt, IPv4 and IPv6, TCP and UDP, with EHOSTUNREACH where
		// the host kernel says ENETUNREACH (measured: runsc 20221219,
		// --network=none).
		gVisorCheck: networkCheck(true),
	},
	{
		name: "reading /proc/1/environ and host paths",
		programs: progs(both(`
const fs = await import("node:fs");
const out: Record<string, string> = {};
for (const p of ["/proc/1/environ", "/proc/self/environ"]) {
  try { out[p] = fs.readFileSync(p, "latin1").split("\0").filter(Boolean).map(s => s.split("=")[0]).sort().join(",") } catch (e) { out[p] = (e as any).code }
}
for (const p of ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock", "/var/lib/docker", "/var/lib/containerd", "/root", "/home", "/etc/shadow", "/proc/1/root/etc/hostname", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]) {
  try { fs.statSync(p); try { fs.readdirSync(p); out[p] = "listable" } catch { try { fs.readFileSync(p); out[p] = "readable" } catch (e) { out[p] = "exists " + (e as any).code } } }
  catch (e) { out[p] = (e as any).code }
}
// A daemon's socket or directories mounted in: a socket by name anywhere
// in the line, a directory by its mount point (not "containerd" anywhere:
// under containerd the root's overlay names its snapshot directories; not
// "docker" anywhere: Docker mounts its init at /usr/sbin/docker-init).
const daemonMount = (l: string) => l.includes("docker.sock") || l.includes("containerd.sock") ||
  /^\/(var\/)?(run|lib)\/(docker|containerd)(\/|$)/.test(l.split(" ")[1] ?? "");
out.mounts = fs.readFileSync("/proc/self/mounts", "utf8").split("\n").filter(daemonMount).join(";");
return out;`, `
import os, errno
out = {}
for p in ["/proc/1/environ", "/proc/self/environ"]:
    try:
        out[p] = ",".join(sorted(s.split(b"=")[0].decode() for s in open(p, "rb").read().split(b"\0") if s))
    except OSError as e:
        out[p] = errno.errorcode.get(e.errno)
for p in ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock", "/var/lib/docker", "/var/lib/containerd", "/root", "/home", "/etc/shadow", "/proc/1/root/etc/hostname", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]:
    try:
        os.stat(p)
    except OSError as e:
        out[p] = errno.errorcode.get(e.errno)
        continue
    try:
        os.listdir(p)
        out[p] = "listable"
    except OSError:
        try:
            open(p, "rb").read()
            out[p] = "readable"
        except OSError as e:
            out[p] = "exists " + errno.errorcode.get(e.errno, "")
import re
def daemon_mount(l):
    f = l.split(" ")
    return "docker.sock" in l or "containerd.sock" in l or (len(f) > 1 and re.match(r"^/(var/)?(run|lib)/(docker|containerd)(/|$)", f[1]) is not None)
out["mounts"] = ";".join(l for l in open("/proc/self/mounts").read().split("\n") if daemon_mount(l))
return out`)),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			v := decode[map[string]string](t, res)
			for _, p := range []string{"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock", "/var/lib/docker", "/var/lib/containerd"} {
				if v[p] != "ENOENT" {
					t.Fatalf("%s: %s, want ENOENT (%v)", p, v[p], v)
				}
			}
			if v["mounts"] != "" {
				t.Fatalf("daemon socket mounted: %s", v["mounts"])
			}
			for _, p := range []string{"/proc/1/environ", "/proc/self/environ"} {
				for _, k := range strings.Split(v[p], ",") {
					if k != "" && k != "PATH" && k != "HOME" && k != "LANG" && k != "HOSTNAME" && !strings.HasPrefix(k, "E") {
						t.Fatalf("%s holds %q (%s)", p, k, v[p])
					}
				}
				if strings.Contains(v[p], secretVar) {
					t.Fatalf("%s leaks the host environment", p)
				}
			}
			if v["/etc/shadow"] == "readable" || v["/root"] == "listable" {
				t.Fatalf("privileged files readable: %v", v)
			}
			outcome(t, lang, res, "%v", v)
		},
	},
	{
		name: "mount unshare keyctl bpf",
		programs: progs(both(tsSh+`
return {
  "unshare -r": sh("unshare", "-r", "true"),
  "unshare -m": sh("unshare", "-m", "true"),
  "unshare -n": sh("unshare", "-n", "true"),
  "unshare -p -f": sh("unshare", "-p", "-f", "true"),
  "mount tmpfs": sh("mount", "-t", "tmpfs", "none", "/tmp"),
  "mount proc": sh("mount", "-t", "proc", "proc", "/tmp"),
  "nsenter -t 1 -m": sh("nsenter", "-t", "1", "-m", "true"),
  "chroot": sh("chroot", "/", "true"),
  "raw syscalls (python ctypes)": sh("python3", "-c",
    "import ctypes,errno\nl=ctypes.CDLL(None,use_errno=True)\n" +
    "def rc(r): return 'ok' if r>=0 else errno.errorcode.get(ctypes.get_errno())\n" +
    "b=ctypes.create_string_buffer(128)\n" +
    "print(rc(l.unshare(0x10000000)), rc(l.mount(b'none',b'/tmp',b'tmpfs',0,None)), rc(l.syscall(250,0,-3,1)), rc(l.syscall(248,b'user',b'x',b'y',1,-3)), rc(l.syscall(321,0,b,128)), rc(l.syscall(101,0,0,0,0)))\nraise SystemExit(1)"),
};`, pySh+`
b = ctypes.create_string_buffer(128)
return {
    "unshare -r": sh("unshare", "-r", "true"),
    "unshare -m": sh("unshare", "-m", "true"),
    "unshare -n": sh("unshare", "-n", "true"),
    "unshare -p -f": sh("unshare", "-p", "-f", "true"),
    "mount tmpfs": sh("mount", "-t", "tmpfs", "none", "/tmp"),
    "mount proc": sh("mount", "-t", "proc", "proc", "/tmp"),
    "nsenter -t 1 -m": sh("nsenter", "-t", "1", "-m", "true"),
    "chroot": sh("chroot", "/", "true"),
    "unshare(CLONE_NEWUSER)": {"err": rc(libc.unshare(0x10000000))},
    "unshare(CLONE_NEWNS)": {"err": rc(libc.unshare(0x00020000))},
    "mount(2)": {"err": rc(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))},
    "keyctl(2)": {"err": rc(libc.syscall(250, 0, -3, 1))},
    "add_key(2)": {"err": rc(libc.syscall(248, b"user", b"x", b"y", 1, -3))},
    "bpf(2)": {"err": rc(libc.syscall(321, 0, b, 128))},
    "ptrace(PTRACE_TRACEME)": {"err": rc(libc.syscall(101, 0, 0, 0, 0))},
}`)),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			v := decode[map[string]shResult](t, res)
			var summary []string
			for k, r := range v {
				switch {
				case k == "ptrace(PTRACE_TRACEME)":
					// Docker's default profile allows ptrace on oneself;
					// ours removes ptrace altogether.
					if r.Err == nil || *r.Err != "EPERM" {
						t.Fatalf("%s: %v, want EPERM (our seccomp profile)", k, r)
					}
				case r.Status == nil && r.Err != nil && *r.Err == "ok":
					t.Fatalf("%s succeeded", k)
				case r.Status != nil && r.succeeded():
					t.Fatalf("%s succeeded: %v", k, r)
				}
				if k == "raw syscalls (python ctypes)" && strings.Contains(r.Out, "ok") && !strings.HasSuffix(r.Out, "ok") {
					t.Fatalf("a raw syscall succeeded: %s", r.Out)
				}
				if r.Err != nil {
					summary = append(summary, k+"="+*r.Err)
				} else {
					summary = append(summary, fmt.Sprintf("%s=%s", k, firstLine(r.Out)))
				}
			}
			outcome(t, lang, res, "%s", strings.Join(summary, "; "))
		},
	},
	{
		name: "setuid",
		programs: progs(both(tsSh+`
let setuid = "", setgid = "";
try { process.setuid!(0); setuid = "ok" } catch (e) { setuid = (e as any).code }
try { process.setgid!(0); setgid = "ok" } catch (e) { setgid = (e as any).code }
return { setuid, setgid, su: sh("su", "-c", "id"), setpriv: sh("setpriv", "--reuid=0", "true"), uid: process.getuid!(), euid: process.geteuid!() };`, pySh+`
import os, errno
def tryit(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno)
return {"setuid": tryit(lambda: os.setuid(0)), "setgid": tryit(lambda: os.setgid(0)),
        "su": sh("su", "-c", "id"), "setpriv": sh("setpriv", "--reuid=0", "true"),
        "uid": os.getuid(), "euid": os.geteuid()}`)),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			v := decode[struct {
				Setuid, Setgid string
				Su, Setpriv    shResult
				UID, EUID      int
			}](t, res)
			// Node refuses before the syscall in some contexts
			// (ERR_INVALID_STATE); Python reaches the kernel (EPERM).
			if v.Setuid == "ok" || v.Setgid == "ok" || (lang == backend.Python && (v.Setuid != "EPERM" || v.Setgid != "EPERM")) || v.Su.succeeded() || v.Setpriv.succeeded() || v.UID != 65532 || v.EUID != 65532 {
				t.Fatalf("setuid: %+v", v)
			}
			outcome(t, lang, res, "setuid(0)=%s setgid(0)=%s su=%s setpriv=%s", v.Setuid, v.Setgid, firstLine(v.Su.Out), firstLine(v.Setpriv.Out))
		},
	},
	{
		name: "clock changes",
		programs: progs(both(tsSh+`
return { date: sh("date", "-s", "2000-01-01"), settimeofday: sh("python3", "-c",
  "import time\ntry:\n  time.clock_settime(time.CLOCK_REALTIME, 946684800.0); print('ok')\nexcept OSError as e:\n  print(e.errno); raise SystemExit(1)") };`, pySh+`
import time, errno
try:
    time.clock_settime(time.CLOCK_REALTIME, 946684800.0)
    settime = "ok"
except OSError as e:
    settime = errno.errorcode.get(e.errno)
return {"date": sh("date", "-s", "2000-01-01"), "settimeofday": {"status": 1, "err": settime, "out": settime}}`)),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			v := decode[map[string]shResult](t, res)
			for k, r := range v {
				if r.succeeded() || (r.Err != nil && *r.Err == "ok") {
					t.Fatalf("%s succeeded: %v", k, r)
				}
			}
			if y := time.Now().Year(); y < 2020 {
				t.Fatalf("host clock changed: year %d", y)
			}
			outcome(t, lang, res, "date -s: %s; clock_settime: %s", firstLine(v["date"].Out), firstLine(v["settimeofday"].Out))
		},
	},
	{
		name: "sleeping forever",
		programs: progs(both(`Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)`,
			"import time\ntime.sleep(3600)")),
		limits: func(l *container.Limits) { l.WallTime = 2 * time.Second },
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantFailure(t, res, backend.FailureTimeout, "wall-clock budget")
			outcome(t, lang, res, "%s", res.Error.Message)
		},
	},
	{
		name: "double-forked daemon ignoring SIGTERM",
		programs: progs(both(`
const cp = await import("node:child_process");
const d = cp.spawn("sh", ["-c", "trap '' TERM HUP INT; (trap '' TERM HUP INT; while :; do sleep 1; done) & exit 0"], { detached: true, stdio: "ignore" });
d.unref();
await new Promise(r => setTimeout(r, 300));
return "daemonized";`, `
import os, signal, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while True:
        time.sleep(1)
os.waitpid(pid, 0)
return "daemonized"`)),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantValue(t, res, `"daemonized"`)
			outcome(t, lang, res, "the run ended; the daemon died with its container")
		},
	},
	{
		name:     "a program that kills its own runner",
		programs: progs(both(`process.kill(process.pid, "SIGKILL"); await new Promise(() => {})`, "import os\nos.kill(os.getpid(), 9)")),
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			wantFailure(t, res, backend.FailureExit, "137")
			outcome(t, lang, res, "%s", res.Error.Message)
		},
	},
	{
		name: "a program that floods calls",
		programs: progs(both(`
const rs = await Promise.allSettled(Array.from({ length: 2000 }, (_, i) => tools.slow({ i })));
const rejected = rs.filter(r => r.status === "rejected") as PromiseRejectedResult[];
return { fulfilled: rs.length - rejected.length, rejected: rejected.length, reason: rejected.length ? String(rejected[0].reason.message) : "" };`, `
import asyncio
rs = await asyncio.gather(*[tools.slow({"i": i}) for i in range(2000)], return_exceptions=True)
rejected = [r for r in rs if isinstance(r, BaseException)]
return {"fulfilled": len(rs) - len(rejected), "rejected": len(rejected), "reason": str(rejected[0]) if rejected else ""}`)),
		bindings: func(t *testing.T) []backend.BindingNamespace {
			var n atomic.Int64
			return tools(map[string]backend.BindingFunc{"slow": func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
				n.Add(1)
				select {
				case <-time.After(time.Millisecond):
				case <-ctx.Done():
				}
				return json.RawMessage(`true`), nil
			}})
		},
		limits: func(l *container.Limits) { l.PendingCalls = 16 },
		check: func(t *testing.T, lang backend.Language, res backend.RunResult) {
			v := decode[struct {
				Fulfilled, Rejected int
				Reason              string
			}](t, res)
			if v.Rejected == 0 || v.Fulfilled == 0 || v.Fulfilled+v.Rejected != 2000 || !strings.Contains(v.Reason, "too many binding calls in flight") {
				t.Fatalf("call flood: %+v", v)
			}
			outcome(t, lang, res, "%d served, %d rejected with %q", v.Fulfilled, v.Rejected, v.Reason)
		},
	},
}

// gVisorThreadBombCheck: under gVisor the thread bomb ends with a typed
// outcome — the compute budget, the memory limit, the sandbox's death, a
// failed thread creation — or stops itself after an error, or reaches the
// program's own cap (500 workers, 5000 threads): guest threads are the
// Sentry's tasks, bounded by the sandbox's memory and compute, and a fast
// enough machine fits the whole bomb inside both.
func gVisorThreadBombCheck(t *testing.T, lang backend.Language, res backend.RunResult) {
	if res.Error != nil {
		switch res.Error.Kind {
		case backend.FailureTimeout, backend.FailureOOM, backend.FailureExit, backend.FailureException:
			outcome(t, lang, res, "%s", firstLine(res.Error.Message))
			return
		}
		t.Fatalf("thread bomb: %s: %s", res.Error.Kind, res.Error.Message)
	}
	v := decode[struct {
		Started int
		Error   string
	}](t, res)
	if v.Error == "" {
		capped := map[backend.Language]int{backend.TypeScript: 500, backend.Python: 5000}[lang]
		if v.Started != capped {
			t.Fatalf("thread bomb finished without an error below its cap (%d): %+v", capped, v)
		}
		outcome(t, lang, res, "all %d threads/workers of the program's cap started inside the sandbox's memory and compute budget", v.Started)
		return
	}
	outcome(t, lang, res, "%d threads/workers started, then %q", v.Started, v.Error)
}

// threadBombCheck: the thread bomb ends below the pids limit. Node may not
// survive failing to create a thread; dying is a typed outcome too, as
// long as the run ends.
func threadBombCheck(limit int) func(t *testing.T, lang backend.Language, res backend.RunResult) {
	return func(t *testing.T, lang backend.Language, res backend.RunResult) {
		if res.Error != nil {
			if res.Error.Kind != backend.FailureExit && res.Error.Kind != backend.FailureException {
				t.Fatalf("thread bomb: %s: %s", res.Error.Kind, res.Error.Message)
			}
			outcome(t, lang, res, "%s", firstLine(res.Error.Message))
			return
		}
		v := decode[struct {
			Started int
			Error   string
		}](t, res)
		if v.Error == "" || v.Started >= limit {
			t.Fatalf("thread bomb was not stopped by the pids limit (%d): %+v", limit, v)
		}
		outcome(t, lang, res, "%d threads/workers started, then %q", v.Started, v.Error)
	}
}

// networkCheck: no attempt to reach anything succeeds, each refused
// locally: the host kernel answers ENETUNREACH (IPv6 may be
// EADDRNOTAVAIL or EAFNOSUPPORT), gVisor's netstack EHOSTUNREACH.
func networkCheck(gVisor bool) func(t *testing.T, lang backend.Language, res backend.RunResult) {
	return func(t *testing.T, lang backend.Language, res backend.RunResult) {
		v := decode[map[string]string](t, res)
		for k, r := range v {
			switch {
			case strings.HasPrefix(k, "dns"):
				if r == "resolved" {
					t.Fatalf("%s resolved (%v)", k, v)
				}
			case gVisor:
				if r != "EHOSTUNREACH" {
					t.Fatalf("%s: %s, want EHOSTUNREACH from gVisor's netstack (%v)", k, r, v)
				}
			case strings.Contains(k, "6 "):
				// No IPv6 route at all: the kernel refuses locally.
				if r != "ENETUNREACH" && r != "EADDRNOTAVAIL" && r != "EAFNOSUPPORT" {
					t.Fatalf("%s: %s (%v)", k, r, v)
				}
			default:
				if r != "ENETUNREACH" {
					t.Fatalf("%s: %s, want ENETUNREACH (%v)", k, r, v)
				}
			}
		}
		outcome(t, lang, res, "%v", v)
	}
}

// checkLogCap asserts the log cap held and was reported.
func checkLogCap(t *testing.T, res backend.RunResult) {
	t.Helper()
	total := 0
	for _, e := range res.Logs {
		total += len(e.Text)
	}
	if !res.LogsTruncated {
		t.Fatalf("logs not reported truncated (%d bytes in %d entries)", total, len(res.Logs))
	}
	if max := container.DefaultLimits().LogBytes; total > max {
		t.Fatalf("%d bytes of logs kept; cap %d", total, max)
	}
}

// hostAddress is cfg.HostAddress or, when empty, the host's first
// non-loopback IPv4 address: one a container with a network could reach.
func (cfg Config) hostAddress(t *testing.T) string {
	t.Helper()
	if cfg.HostAddress != "" {
		ip := net.ParseIP(cfg.HostAddress)
		if ip == nil || ip.To4() == nil {
			t.Fatalf("Config.HostAddress %q: want an IPv4 address", cfg.HostAddress)
		}
		return cfg.HostAddress
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, isNet := a.(*net.IPNet); isNet && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatal("the host has no non-loopback IPv4 address; set Config.HostAddress")
	return ""
}

// openFDs counts the process's open file descriptors, after dropping idle
// connections to the engine (they are pooled, not leaked).
func openFDs(t *testing.T, cfg Config) (int, []string) {
	if cfg.CloseIdle != nil {
		cfg.CloseIdle()
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, e := range entries {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if ino, isSocket := strings.CutPrefix(l, "socket:["); isSocket {
			l += unixSocketPath(strings.TrimSuffix(ino, "]"))
		}
		targets = append(targets, e.Name()+"->"+l)
	}
	return len(entries), targets
}

// unixSocketPath names a Unix socket by inode from /proc/net/unix.
func unixSocketPath(inode string) string {
	data, _ := os.ReadFile("/proc/net/unix")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 7 && f[6] == inode {
			if len(f) >= 8 {
				return " " + f[7]
			}
			return " (unnamed unix)"
		}
	}
	return ""
}

// checkProcessHealth records the goroutines and descriptors open now and
// registers a cleanup asserting both are back to that baseline at the end.
func checkProcessHealth(t *testing.T, cfg Config) {
	t.Helper()
	fds, before := openFDs(t, cfg)
	opts := []goleak.Option{goleak.IgnoreCurrent()}
	for _, f := range cfg.IgnoreGoroutines {
		opts = append(opts, goleak.IgnoreAnyFunction(f))
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		goleak.VerifyNone(t, opts...)
		var now int
		var after []string
		for i := 0; i < 50; i++ {
			if now, after = openFDs(t, cfg); now <= fds {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if now > fds {
			var stacks strings.Builder
			pprof.Lookup("goroutine").WriteTo(&stacks, 1)
			t.Errorf("file descriptors: %d before the suite, %d after\nbefore: %v\nafter:  %v\n%s", fds, now, before, after, stacks.String())
		} else {
			t.Logf("process healthy: no goroutine leaked; %d fds before, %d after", fds, now)
		}
	})
}

// RunHostile runs the hostile programs in both languages, each with a
// runtime of its own: after each, the same runtime must run the next
// program normally, and the leak check must find nothing. At the end,
// the process has the goroutines and file descriptors it started with.
// The kernel-surface cases (RunSurface) are among them.
func RunHostile(t *testing.T, cfg Config) {
	cfg.validate(t)
	runHostileCases(t, cfg, append(slices.Clone(hostileCases), surfaceCases...))
}

// runHostileCases runs cases as RunHostile describes.
func runHostileCases(t *testing.T, cfg Config, cases []hostileCase) {
	checkProcessHealth(t, cfg)
	t.Setenv(secretVar, "must-not-leak")
	host := cfg.hostAddress(t)
	for _, lang := range Languages {
		t.Run(string(lang), func(t *testing.T) {
			for _, hc := range cases {
				prog, found := hc.programs(host)[lang]
				if !found {
					continue
				}
				t.Run(hc.name, func(t *testing.T) {
					e := newEnv(t, cfg, lang, func(l *container.Limits) {
						// The suite may share a loaded machine: do not
						// confuse slow startup with a hostile program.
						l.StartupTime = 90 * time.Second
						if hc.limits != nil {
							hc.limits(l)
						}
						if hc.nativeLimits != nil && !cfg.gVisor() {
							hc.nativeLimits(l)
						}
					})
					var b []backend.BindingNamespace
					if hc.bindings != nil {
						b = hc.bindings(t)
					}
					check := hc.check
					if cfg.gVisor() && hc.gVisorCheck != nil {
						check = hc.gVisorCheck
					}
					if hc.checkWith != nil {
						check = hc.checkWith(cfg)
					}
					check(t, lang, e.run(t, prog, b...))
					// The host is healthy: the next program runs normally.
					wantValue(t, e.run(t, "return 1"), "1")
				})
			}
		})
	}
}
