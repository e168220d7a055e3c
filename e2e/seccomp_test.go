package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	dcontainer "github.com/docker/docker/api/types/container"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/seccomp"
)

// seccompProbe is Python that defines probe(): raw system calls through
// ctypes, each reported as "ok" or its errno name, and every way we know
// for a program to execute an ELF it wrote, each reported as how it ended.
// The Python runner calls it in-process; the TypeScript runner, which
// cannot make raw system calls, runs it in a python3 child in the same
// container (the filter is the container's, inherited by every process).
const seccompProbe = `
import ctypes, errno, os, subprocess, sys

def probe():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    machine = os.uname().machine
    # name: (x86_64 number, aarch64 number, returns an fd, arguments)
    buf = ctypes.create_string_buffer(256)
    calls = {
        "io_uring_setup":  (425, 425, True,  (1, buf)),
        "userfaultfd":     (323, 282, True,  (0,)),
        "perf_event_open": (298, 241, True,  (buf, 0, -1, -1, 0)),
        "bpf":             (321, 280, True,  (0, buf, 128)),
        "keyctl":          (250, 219, False, (0, -3, 1)),
        "add_key":         (248, 217, False, (b"user", b"dsh", b"x", 1, -3)),
        # PTRACE_GETREGS of a pid that does not exist: ESRCH where ptrace
        # is allowed, and harmless.
        "ptrace":          (101, 117, False, (12, 999999, 0, 0)),
        "mount":           (165, 40,  False, (b"none", b"/tmp", b"tmpfs", 0, None)),
        "kexec_load":      (246, 104, False, (0, 0, None, 0)),
        "memfd_create":    (319, 279, True,  (b"dsh", 0)),
        "getpid":          (39,  172, False, ()),
    }
    out = {"machine": machine}
    for name, (x86, arm, fd, args) in calls.items():
        nr = {"x86_64": x86, "aarch64": arm}[machine]
        r = libc.syscall(ctypes.c_long(nr), *args)
        if r < 0:
            e = ctypes.get_errno()
            out[name] = errno.errorcode.get(e, str(e))
        else:
            out[name] = "ok"
            if fd:
                os.close(r)

    elf = open("/bin/true", "rb").read()
    def run(argv, fds=()):
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=10, pass_fds=fds)
        except OSError as e:
            return errno.errorcode.get(e.errno, str(e.errno))
        return "exit %d %s" % (r.returncode, (r.stdout + r.stderr).strip()[:80])
    try:
        fd = os.memfd_create("elf")
    except OSError as e:
        out["exec memfd"] = out["fexecve memfd"] = "memfd_create " + errno.errorcode.get(e.errno, str(e.errno))
    else:
        os.write(fd, elf)
        out["exec memfd"] = run(["/proc/self/fd/%d" % fd], (fd,))
        out["fexecve memfd"] = run([sys.executable, "-c", "import os; os.execve(%d, ['elf'], {})" % fd], (fd,))
        os.close(fd)
    ldso = {"x86_64": "/lib64/ld-linux-x86-64.so.2", "aarch64": "/lib/ld-linux-aarch64.so.1"}[machine]
    for d in ["/tmp", "/dev/shm"]:
        p = d + "/dsh-elf"
        with open(p, "wb") as f:
            f.write(elf)
        os.chmod(p, 0o755)
        out["exec " + p] = run([p])
        out["ld.so " + p] = run([ldso, p])
        os.unlink(p)
        try:
            fd = os.open(d, os.O_TMPFILE | os.O_RDWR, 0o755)
        except OSError as e:
            out["exec O_TMPFILE " + d] = "open " + errno.errorcode.get(e.errno, str(e.errno))
        else:
            os.write(fd, elf)
            out["exec O_TMPFILE " + d] = run(["/proc/self/fd/%d" % fd], (fd,))
            os.close(fd)
    return out
`

// seccompPrograms read the runner's own seccomp mode and run the probe.
func seccompPrograms() map[backend.Language]string {
	child, _ := json.Marshal(seccompProbe + "\nimport json\nprint(json.dumps(probe()))\n")
	return both(`
const cp = await import("node:child_process");
const fs = await import("node:fs");
const status = fs.readFileSync("/proc/self/status", "utf8").split("\n").find(l => l.startsWith("Seccomp:"));
const r = cp.spawnSync("python3", ["-c", `+string(child)+`], { encoding: "utf8", timeout: 60000 });
if (r.status !== 0) throw new Error("probe: " + r.status + " " + r.stderr);
return { status, probe: JSON.parse(r.stdout) };`, seccompProbe+`
status = next(l for l in open("/proc/self/status").read().splitlines() if l.startswith("Seccomp:"))
return {"status": status, "probe": probe()}`)
}

type seccompResult struct {
	Status string            `json:"status"`
	Probe  map[string]string `json:"probe"`
}

// Our profile, from inside real containers in both languages: the removed
// calls fail with EPERM, an ELF the program writes never executes; with
// WithSeccomp(nil) the engine's default applies instead and they differ.
func TestSeccompProfile(t *testing.T) {
	denied := []string{"io_uring_setup", "userfaultfd", "perf_event_open", "bpf", "keyctl", "add_key", "ptrace", "mount", "kexec_load", "memfd_create"}
	neverExec := []string{"exec memfd", "fexecve memfd", "exec /tmp/dsh-elf", "ld.so /tmp/dsh-elf", "exec O_TMPFILE /tmp",
		"exec /dev/shm/dsh-elf", "ld.so /dev/shm/dsh-elf", "exec O_TMPFILE /dev/shm"}
	for _, c := range denied {
		if !slices.Contains(seccomp.Removed(), c) {
			t.Fatalf("%s is not among seccomp.Removed()", c)
		}
	}
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			res := e.run(t, seccompPrograms()[lang])
			v := decode[seccompResult](t, res)
			t.Logf("ours: %s %v", v.Status, v.Probe)
			if v.Status != "Seccomp:\t2" {
				t.Errorf("runner's seccomp mode %q, want a filter (2)", v.Status)
			}
			for _, c := range denied {
				if v.Probe[c] != "EPERM" {
					t.Errorf("%s: %q, want EPERM", c, v.Probe[c])
				}
			}
			if v.Probe["getpid"] != "ok" {
				t.Errorf("getpid: %q: the probe itself is broken", v.Probe["getpid"])
			}
			for _, k := range neverExec {
				if r, ok := v.Probe[k]; !ok || strings.HasPrefix(r, "exit 0") {
					t.Errorf("%s: %q: a written ELF executed", k, r)
				}
			}
			if v.Probe["exec memfd"] != "memfd_create EPERM" {
				t.Errorf("exec memfd: %q", v.Probe["exec memfd"])
			}
		})
		t.Run(string(lang)+"/engine default", func(t *testing.T) {
			e := newEnv(t, lang, nil, container.WithSeccomp(nil))
			res := e.run(t, seccompPrograms()[lang])
			v := decode[seccompResult](t, res)
			t.Logf("engine default: %s %v", v.Status, v.Probe)
			if v.Status != "Seccomp:\t2" {
				t.Errorf("runner's seccomp mode %q: the engine's default profile should still filter", v.Status)
			}
			// What our profile takes away and every Docker default allows:
			// memfd_create, and with it an ELF that executes; ptrace reaches
			// the kernel (no such process) instead of EPERM.
			if v.Probe["memfd_create"] != "ok" || !strings.HasPrefix(v.Probe["exec memfd"], "exit 0") || !strings.HasPrefix(v.Probe["fexecve memfd"], "exit 0") {
				t.Errorf("memfd under the engine default: create %q, exec %q, fexecve %q", v.Probe["memfd_create"], v.Probe["exec memfd"], v.Probe["fexecve memfd"])
			}
			if v.Probe["ptrace"] != "ESRCH" {
				t.Errorf("ptrace under the engine default: %q, want ESRCH", v.Probe["ptrace"])
			}
			// Docker's default allowed io_uring until 25.0; a kernel can
			// also disable it for everyone (kernel.io_uring_disabled).
			if daemonAllowsIOUring(t) {
				if v.Probe["io_uring_setup"] != "ok" {
					t.Errorf("io_uring_setup under the engine default: %q, want ok", v.Probe["io_uring_setup"])
				}
			} else {
				t.Logf("this daemon or kernel denies io_uring itself: %q", v.Probe["io_uring_setup"])
			}
		})
	}
}

// daemonAllowsIOUring reports whether the engine's default profile and the
// kernel let an unprivileged io_uring_setup through.
func daemonAllowsIOUring(t *testing.T) bool {
	v, err := cli.ServerVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	major, _ := strconv.Atoi(strings.SplitN(v.Version, ".", 2)[0])
	disabled, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled")
	return major < 25 && (err != nil || strings.TrimSpace(string(disabled)) == "0")
}

// MemoryPeak reads a running container's peak memory: after the program
// touched 96 MiB and let go of it, the peak still shows it, and the stats
// API (read later) agrees.
func TestMemoryPeak(t *testing.T) {
	const touched = 96 << 20
	progs := both(`
const before = await tools.peak({});
let b: Buffer | null = Buffer.alloc(`+strconv.Itoa(touched)+`, 1);
b = null;
return { before, after: await tools.peak({}) };`, `
before = await tools.peak({})
b = b"\x01" * `+strconv.Itoa(touched)+`
del b
return {"before": before, "after": await tools.peak({})}`)
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			var statsMax []uint64
			b := tools(map[string]backend.BindingFunc{"peak": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
				list := e.containers(t)
				if len(list) != 1 {
					return nil, fmt.Errorf("%d containers", len(list))
				}
				peak, err := drv.MemoryPeak(ctx, list[0].ID)
				if err != nil {
					return nil, err
				}
				r, err := cli.ContainerStatsOneShot(ctx, list[0].ID)
				if err != nil {
					return nil, err
				}
				defer r.Body.Close()
				var s dcontainer.StatsResponse
				if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
					return nil, err
				}
				statsMax = append(statsMax, s.MemoryStats.MaxUsage)
				if s.MemoryStats.MaxUsage != 0 && s.MemoryStats.MaxUsage < uint64(peak) {
					return nil, fmt.Errorf("stats API max_usage %d below the peak read before it, %d", s.MemoryStats.MaxUsage, peak)
				}
				return json.Marshal(peak)
			}})
			v := decode[struct{ Before, After int64 }](t, e.run(t, progs[lang], b...))
			limit := e.rt.Limits().MemoryBytes
			t.Logf("peak before %.1f MiB, after touching %d MiB %.1f MiB (stats API max_usage %v, limit %d MiB)",
				float64(v.Before)/(1<<20), touched>>20, float64(v.After)/(1<<20), statsMax, limit>>20)
			if v.Before <= 0 || v.Before >= v.After {
				t.Errorf("peak before %d, after %d", v.Before, v.After)
			}
			if v.After < touched || v.After-v.Before < touched*3/4 {
				t.Errorf("peak %d after touching %d bytes (before: %d)", v.After, touched, v.Before)
			}
			if v.After > limit {
				t.Errorf("peak %d above the memory limit %d", v.After, limit)
			}
		})
	}
}
