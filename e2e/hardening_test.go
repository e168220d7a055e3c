package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	dcontainer "github.com/docker/docker/api/types/container"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/seccomp"
)

// checkPreset compares a live container's inspect output with the
// hardening preset of DESIGN.md, field by field.
func checkPreset(info dcontainer.InspectResponse, e *env) error {
	var errs []error
	want := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	hc, cfg := info.HostConfig, info.Config
	l := e.rt.Limits()
	want(string(hc.NetworkMode) == "none", "network mode %q", hc.NetworkMode)
	want(cfg.NetworkDisabled, "network not disabled")
	want(hc.ReadonlyRootfs, "root not read-only")
	want(slices.Equal(hc.CapDrop, []string{"ALL"}), "cap drop %v", hc.CapDrop)
	want(len(hc.CapAdd) == 0, "cap add %v", hc.CapAdd)
	want(!hc.Privileged, "privileged")
	want(slices.Contains(hc.SecurityOpt, "no-new-privileges"), "security opts %v", hc.SecurityOpt)
	for _, o := range hc.SecurityOpt {
		want(!strings.Contains(o, "unconfined"), "security opt %q weakens the default profile", o)
	}
	// The seccomp profile is ours (the envs checked here keep the
	// runtime's default), as the daemon recorded it.
	var profiles []string
	for _, o := range hc.SecurityOpt {
		if p, ok := strings.CutPrefix(o, "seccomp="); ok {
			profiles = append(profiles, p)
		}
	}
	var profile specs.LinuxSeccomp
	want(len(profiles) == 1 && json.Unmarshal([]byte(profiles[0]), &profile) == nil && reflect.DeepEqual(&profile, seccomp.Profile()),
		"seccomp security opts %.120q: not exactly our profile (seccomp.Profile)", profiles)
	want(cfg.User == container.RunnerUser, "user %q", cfg.User)
	want(hc.PidsLimit != nil && *hc.PidsLimit == l.Pids, "pids limit %v", hc.PidsLimit)
	want(hc.Memory == l.MemoryBytes && hc.MemorySwap == l.MemoryBytes, "memory %d swap %d", hc.Memory, hc.MemorySwap)
	want(hc.NanoCPUs == l.NanoCPUs, "nano cpus %d", hc.NanoCPUs)
	want(string(hc.IpcMode) == "private" || string(hc.IpcMode) == "none", "ipc %q", hc.IpcMode)
	want(hc.Init != nil && *hc.Init, "init not set")
	tmpfs := hc.Tmpfs["/tmp"]
	for _, opt := range []string{"noexec", "nosuid", "nodev", fmt.Sprintf("size=%d", l.TmpfsBytes)} {
		want(slices.Contains(strings.Split(tmpfs, ","), opt), "tmpfs /tmp %q lacks %s", tmpfs, opt)
	}
	want(l.TmpfsBytes <= l.MemoryBytes/2, "tmpfs larger than half the memory")
	want(hc.LogConfig.Type == "none", "log driver %q", hc.LogConfig.Type)
	nofile := false
	for _, u := range hc.Ulimits {
		if u.Name == "nofile" && u.Hard == l.NoFile && u.Soft == l.NoFile {
			nofile = true
		}
	}
	want(nofile, "nofile ulimit %v", hc.Ulimits)
	want(len(cfg.Env) == 3, "env %v", cfg.Env)
	for _, v := range cfg.Env {
		k, _, _ := strings.Cut(v, "=")
		want(k == "PATH" || k == "HOME" || k == "LANG", "env variable %q", v)
	}
	want(cfg.WorkingDir == "/tmp", "working dir %q", cfg.WorkingDir)
	want(len(info.Mounts) == 1, "mounts %+v", info.Mounts)
	for _, m := range info.Mounts {
		want(string(m.Type) == "bind" && !m.RW && m.Destination == container.BridgeDir, "mount %+v", m)
		want(filepath.Dir(m.Source) == e.sockDir, "mount source %s is not a per-run directory under %s", m.Source, e.sockDir)
	}
	for k := range cfg.Labels {
		want(strings.HasPrefix(k, container.LabelPrefix), "label %q outside the reserved prefix", k)
	}
	want(cfg.Labels[container.LabelManaged] == "true" && cfg.Labels[container.LabelOwner] == e.owner, "labels %v", cfg.Labels)
	want(info.State != nil && info.State.Running, "not running")
	return errors.Join(errs...)
}

// The hardening preset as a program sees it (issue 18, item 12): checks
// on the engine's configuration pass even when the property is missing at
// runtime (uid 65532 gets EACCES anyway), so each property is asserted
// from inside the container: no capability in the bounding set,
// no_new_privs set, a seccomp filter, a read-only root even where the uid
// could otherwise write (/var/tmp is world-writable in the image), and no
// network interface but lo.
func TestHardeningFromInside(t *testing.T) {
	programs := both(`const fs = await import("node:fs");
const status = fs.readFileSync("/proc/self/status", "utf8");
const field = (k: string) => (status.match(new RegExp("^" + k + ":\\s*(\\S+)", "m")) ?? [])[1] ?? null;
let rootWrite = "ok";
try { fs.writeFileSync("/var/tmp/probe", "x") } catch (e) { rootWrite = (e as any).code }
let mkdir = "ok";
try { fs.mkdirSync("/var/tmp/probe.d") } catch (e) { mkdir = (e as any).code }
return { capbnd: field("CapBnd"), capeff: field("CapEff"), capprm: field("CapPrm"), nnp: field("NoNewPrivs"), seccomp: field("Seccomp"),
         rootWrite, mkdir, varTmpMode: (fs.statSync("/var/tmp").mode & 0o7777).toString(8),
         nets: fs.readdirSync("/sys/class/net").sort(), uid: process.getuid!() }`, `
import os, errno
status = open("/proc/self/status").read()
def field(k):
    for line in status.splitlines():
        if line.startswith(k + ":"):
            return line.split(":", 1)[1].split()[0]
    return None
def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
root_write = attempt(lambda: open("/var/tmp/probe", "w").write("x"))
mkdir = attempt(lambda: os.mkdir("/var/tmp/probe.d"))
return {"capbnd": field("CapBnd"), "capeff": field("CapEff"), "capprm": field("CapPrm"), "nnp": field("NoNewPrivs"), "seccomp": field("Seccomp"),
        "rootWrite": root_write, "mkdir": mkdir, "varTmpMode": oct(os.stat("/var/tmp").st_mode & 0o7777)[2:],
        "nets": sorted(os.listdir("/sys/class/net")), "uid": os.getuid()}`)
	type view struct {
		CapBnd, CapEff, CapPrm, NNP, Seccomp string
		RootWrite, Mkdir, VarTmpMode         string
		Nets                                 []string
		UID                                  int
	}
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			v := decode[view](t, e.run(t, programs[lang]))
			zero := "0000000000000000"
			want := func(ok bool, format string, args ...any) {
				t.Helper()
				if !ok {
					t.Errorf(format, args...)
				}
			}
			want(v.CapBnd == zero && v.CapEff == zero && v.CapPrm == zero, "capabilities: bounding %s, effective %s, permitted %s; want all 0", v.CapBnd, v.CapEff, v.CapPrm)
			want(v.NNP == "1", "NoNewPrivs %q, want 1", v.NNP)
			want(v.Seccomp == "2", "Seccomp %q, want 2 (a filter)", v.Seccomp)
			want(v.VarTmpMode == "1777", "/var/tmp mode %s: the probe needs a world-writable directory on the root", v.VarTmpMode)
			want(v.RootWrite == "EROFS" && v.Mkdir == "EROFS", "writes to /var/tmp: %s, %s; want EROFS (a read-only root, not a permission error)", v.RootWrite, v.Mkdir)
			want(slices.Equal(v.Nets, []string{"lo"}), "network interfaces %v, want only lo", v.Nets)
			want(v.UID == 65532, "uid %d", v.UID)
			t.Logf("from inside: %+v", v)
		})
	}
}
