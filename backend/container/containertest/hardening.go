package containertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/seccomp"
)

// presetLimits are the limits the preset is checked with: none is a
// default, so a driver that writes a default instead of the Spec's value
// is caught.
func presetLimits(l *container.Limits) {
	l.MemoryBytes = 200 << 20
	l.TmpfsBytes = 50 << 20
	l.NanoCPUs = 5e8
	l.Pids = 64
	l.NoFile = 300
}

// RunHardening asserts the hardening preset of docs/ARCHITECTURE.md in both
// languages, twice: from the driver's own account of the live container
// (CheckPreset; the driver must implement container.Inspector), and from
// inside it, as a program sees it.
func RunHardening(t *testing.T, cfg Config) {
	cfg.validate(t)
	for _, lang := range Languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Run("preset from the engine's inspection", func(t *testing.T) {
				if err := checkPreset(context.Background(), cfg, lang, testLogger(t)); err != nil {
					t.Fatal(err)
				}
			})
			t.Run("preset from inside", func(t *testing.T) { hardeningFromInside(t, cfg, lang) })
		})
	}
}

// CheckPreset runs one program in lang through a runtime over cfg's
// driver and, while it runs, compares the container's configuration as
// the driver's container.Inspector reports it with the hardening preset
// of docs/ARCHITECTURE.md, field by field, then checks nothing was left behind. It
// returns every difference, or nil. A driver without Inspector fails it:
// the preset must be shown by the engine's own account, not assumed.
//
// The limits are set away from their defaults (memory 200 MiB, tmpfs 50
// MiB, 0.5 CPU, 64 pids, 300 files) so that a driver writing a default
// instead of the Spec's value is caught.
func CheckPreset(ctx context.Context, cfg Config, lang backend.Language) error {
	return checkPreset(ctx, cfg, lang, discard)
}

func checkPreset(ctx context.Context, cfg Config, lang backend.Language, log *slog.Logger) (retErr error) {
	if err := cfg.check(); err != nil {
		return err
	}
	insp, isInspector := cfg.Driver.(container.Inspector)
	if !isInspector {
		return fmt.Errorf("the %s driver does not implement container.Inspector: the hardening preset cannot be checked from the engine's own account", cfg.driverName())
	}
	e, err := openEnv(cfg, lang, log, presetLimits)
	if err != nil {
		return err
	}
	defer func() { retErr = errors.Join(retErr, e.close()) }()
	checked := make(chan error, 1)
	b := tools(map[string]backend.BindingFunc{"inspect": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		select {
		case checked <- e.inspect(ctx, insp):
			return json.RawMessage(`"inspected"`), nil
		default:
			return nil, errors.New("inspect called twice")
		}
	}})
	res, err := e.rt.Run(ctx, backend.RunRequest{Program: `return await tools.inspect({})`, Bindings: b})
	switch {
	case err != nil:
		return fmt.Errorf("Run: %w", err)
	case res.Error != nil:
		return fmt.Errorf("the program failed: %s: %s", res.Error.Kind, res.Error.Message)
	case string(res.Value) != `"inspected"`:
		return fmt.Errorf("the program returned %s, want \"inspected\"", res.Value)
	}
	select {
	case err := <-checked:
		return err
	default:
		return errors.New("the program returned without the container being inspected")
	}
}

// inspect finds the env's one container through the driver, checks it
// runs, and checks its configuration as the driver reports it.
func (e *env) inspect(ctx context.Context, insp container.Inspector) error {
	list, err := e.cfg.Driver.List(ctx, container.LabelOwner, e.owner)
	if err != nil {
		return fmt.Errorf("listing the containers of owner %s: %w", e.owner, err)
	}
	if len(list) != 1 {
		return fmt.Errorf("%d containers of owner %s while the program runs, want 1", len(list), e.owner)
	}
	c := list[0]
	a, err := insp.Inspect(ctx, c.ID)
	if err != nil {
		return fmt.Errorf("inspecting %s: %w", c.ID, err)
	}
	p := e.want()
	p.id = c.ID
	errs := []error{checkApplied(a, p)}
	if !c.Running {
		errs = append(errs, fmt.Errorf("container %s is not running while its program runs", c.ID))
	}
	if e.cfg.InspectExtra != nil {
		errs = append(errs, e.cfg.InspectExtra(ctx, c.ID))
	}
	return errors.Join(errs...)
}

// want is the preset one container of e must show.
func (e *env) want() preset {
	return preset{
		lang:       e.lang,
		image:      e.cfg.Images[e.lang],
		owner:      e.owner,
		limits:     e.rt.Limits(),
		sockDir:    e.sockDir,
		ociRuntime: e.cfg.ociRuntime(),
	}
}

// preset is what the hardening preset requires of one container.
type preset struct {
	lang   backend.Language
	image  string
	owner  string
	limits container.Limits
	// sockDir holds the per-run bridge directory, the one bind mount.
	sockDir string
	// ociRuntime is the runtime the container must run under; "" when
	// the driver does not say what its default is.
	ociRuntime string
	// id is the container's id, which its hostname must not reveal.
	id string
}

// checkApplied compares a container's configuration as its engine
// reports it with the hardening preset of docs/ARCHITECTURE.md, field by field.
func checkApplied(a container.Applied, p preset) error {
	var errs []error
	want := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	l := p.limits

	// Identity and what the container runs.
	want(a.User == container.RunnerUser, "user %q, want %s", a.User, container.RunnerUser)
	want(a.Image == p.image, "image %q, want %q (never from the request)", a.Image, p.image)
	want(a.WorkingDir == "/tmp", "working dir %q, want /tmp", a.WorkingDir)
	host, _ := os.Hostname()
	run := a.Labels[container.LabelRun]
	want(a.Hostname != "" && a.Hostname != host && (run == "" || !strings.Contains(a.Hostname, run)) && !strings.HasPrefix(p.id, a.Hostname),
		"hostname %q: want a fixed name that says nothing of the host (%q), the run or the container", a.Hostname, host)
	want(len(a.Cmd) > 0, "no command")

	// Isolation.
	want(a.ReadOnlyRoot, "read-only root: not set")
	want(len(a.Capabilities) == 0, "capabilities: bounding set %v, want empty", a.Capabilities)
	want(a.NoNewPrivileges, "no_new_privs: not set")
	want(a.NetworkNone, "network: not none (a namespace of its own with only lo)")
	want(a.IPCPrivate, "IPC: not private")
	want(a.Init, "init: not set")
	want(!a.SeccompDefault && reflect.DeepEqual(a.Seccomp, ourProfile(a.OCIRuntime)),
		"seccomp: %s, want exactly our profile (seccomp.Profile, adapted by seccomp.ForGVisor under gVisor)", describeSeccomp(a))
	want(p.ociRuntime == "" || a.OCIRuntime == p.ociRuntime, "OCI runtime %q, want %q", a.OCIRuntime, p.ociRuntime)

	// Resources.
	want(a.MemoryBytes == l.MemoryBytes, "memory %d, want %d", a.MemoryBytes, l.MemoryBytes)
	want(a.MemorySwapBytes == a.MemoryBytes, "memory+swap %d, want memory (%d): no swap", a.MemorySwapBytes, a.MemoryBytes)
	want(a.NanoCPUs == l.NanoCPUs, "CPU %d nano-CPUs, want %d", a.NanoCPUs, l.NanoCPUs)
	want(a.Pids == l.Pids, "pids limit %d, want %d", a.Pids, l.Pids)
	want(a.NoFile == l.NoFile, "nofile ulimit %d, want %d (soft = hard)", a.NoFile, l.NoFile)

	// Filesystems: a small noexec /tmp, the bridge directory read-only,
	// nothing else.
	tmp, found := a.Tmpfs["/tmp"]
	want(found, "tmpfs: no /tmp in %v", a.Tmpfs)
	if found {
		for _, opt := range []string{"noexec", "nosuid", "nodev"} {
			want(slices.Contains(tmp, opt), "tmpfs /tmp %v lacks %s", tmp, opt)
		}
		size, err := tmpfsSize(tmp)
		want(err == nil && size == l.TmpfsBytes, "tmpfs /tmp size: %v (options %v), want %d", sizeOrErr(size, err), tmp, l.TmpfsBytes)
		want(err == nil && size <= a.MemoryBytes/2, "tmpfs /tmp size %d: more than half the memory limit %d", size, a.MemoryBytes)
	}
	for path := range a.Tmpfs {
		want(path == "/tmp" || path == "/dev" || strings.HasPrefix(path, "/dev/"), "tmpfs %s: only /tmp (and the engine's /dev) may be a tmpfs", path)
	}
	want(len(a.Mounts) == 1, "bind mounts %+v, want exactly the bridge directory", a.Mounts)
	for _, m := range a.Mounts {
		want(m.Destination == container.BridgeDir && m.ReadOnly, "bind mount %+v: want the bridge directory, read-only at %s", m, container.BridgeDir)
		want(filepath.Dir(m.Source) == p.sockDir, "bind mount source %s is not a per-run directory under %s", m.Source, p.sockDir)
		want(a.Labels[container.LabelBridge] == filepath.Base(m.Source), "label %s=%q, want the bridge directory's name %q", container.LabelBridge, a.Labels[container.LabelBridge], filepath.Base(m.Source))
		want(slices.Contains(a.Cmd, container.BridgeSocket), "command %q does not give the runner the bridge socket %s", a.Cmd, container.BridgeSocket)
	}

	// Environment: exactly PATH, HOME and LANG, never the host's.
	var keys []string
	for _, v := range a.Env {
		k, _, _ := strings.Cut(v, "=")
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want(slices.Equal(keys, []string{"HOME", "LANG", "PATH"}), "env %q, want exactly PATH, HOME and LANG", a.Env)

	// Labels: all under our prefix with valid Kubernetes label keys; the
	// runtime's own with valid values too, naming the owner, the run and
	// the language. (An engine may report the image's labels among the
	// container's, as Docker does; their values are the image build's.)
	for k, v := range a.Labels {
		name, under := strings.CutPrefix(k, container.LabelPrefix)
		want(under, "label %q outside the reserved prefix %s", k, container.LabelPrefix)
		want(!under || name != "" && validLabelValue(name), "label key %q is not a valid Kubernetes label key", k)
		if runtimeLabels[k] {
			want(validLabelValue(v), "label %s=%q: not a valid Kubernetes label value", k, v)
		}
	}
	want(a.Labels[container.LabelManaged] == "true", "label %s=%q, want true", container.LabelManaged, a.Labels[container.LabelManaged])
	want(a.Labels[container.LabelOwner] == p.owner, "label %s=%q, want %q", container.LabelOwner, a.Labels[container.LabelOwner], p.owner)
	want(a.Labels[container.LabelLang] == string(p.lang), "label %s=%q, want %q", container.LabelLang, a.Labels[container.LabelLang], p.lang)
	want(a.Labels[container.LabelRun] != "", "label %s missing", container.LabelRun)
	return errors.Join(errs...)
}

// runtimeLabels are the labels the runtime sets on every container.
var runtimeLabels = map[string]bool{
	container.LabelManaged: true, container.LabelOwner: true, container.LabelRun: true,
	container.LabelBridge: true, container.LabelLang: true,
}

// ourProfile is the profile a container under ociRuntime must carry.
func ourProfile(ociRuntime string) *specs.LinuxSeccomp {
	if seccomp.IsGVisor(ociRuntime) {
		return seccomp.ForGVisor(seccomp.Profile())
	}
	return seccomp.Profile()
}

// describeSeccomp says which profile a reports, briefly.
func describeSeccomp(a container.Applied) string {
	switch {
	case a.SeccompDefault:
		return "the engine's default"
	case a.Seccomp == nil:
		return "none"
	}
	ours := seccomp.Allowed(ourProfile(a.OCIRuntime))
	got := seccomp.Allowed(a.Seccomp)
	var extra, missing []string
	for _, n := range got {
		if !slices.Contains(ours, n) {
			extra = append(extra, n)
		}
	}
	for _, n := range ours {
		if !slices.Contains(got, n) {
			missing = append(missing, n)
		}
	}
	return fmt.Sprintf("a profile (default action %s) allowing %d calls; beyond ours %q, lacking %q", a.Seccomp.DefaultAction, len(got), extra, missing)
}

// tmpfsSize reads a tmpfs size= option: bytes, or with a k, m or g suffix.
func tmpfsSize(opts []string) (int64, error) {
	for _, o := range opts {
		v, found := strings.CutPrefix(o, "size=")
		if !found {
			continue
		}
		mult := int64(1)
		switch strings.ToLower(v[len(v)-min(len(v), 1):]) {
		case "k":
			mult = 1 << 10
		case "m":
			mult = 1 << 20
		case "g":
			mult = 1 << 30
		}
		if mult != 1 {
			v = v[:len(v)-1]
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("size option %q: %w", o, err)
		}
		return n * mult, nil
	}
	return 0, errors.New("no size option")
}

func sizeOrErr(n int64, err error) any {
	if err != nil {
		return err
	}
	return n
}

// prctlProbe prints what the kernel answers PR_GET_NO_NEW_PRIVS (39) and
// PR_GET_SECCOMP (21): "1 2" under the preset, whatever /proc says.
const prctlProbe = `import ctypes
libc = ctypes.CDLL(None)
print(libc.prctl(39, 0, 0, 0, 0), libc.prctl(21, 0, 0, 0, 0))`

// hardeningFromInside asserts the preset as a program sees it: checks on
// the engine's configuration pass even when the property is missing at
// runtime (uid 65532 gets EACCES anyway), so each property is asserted
// from inside the container: no capability in the bounding, effective or
// permitted set, no_new_privs set, a seccomp filter, a read-only root
// even where the uid could otherwise write (/var/tmp is world-writable in
// the image), and no network interface but lo.
//
// no_new_privs and the seccomp mode are read twice: from /proc/self/status
// and from prctl(2). Under gVisor, whose /proc is the Sentry's, the status
// file has no NoNewPrivs line at all, and says "Seccomp: 2" only because
// runsc runs with --oci-seccomp (without it, 0: gVisor ignores the
// container's profile); prctl answers 1 and 2 there as under runc. The
// program also says which kernel it met: gVisor's /proc has a
// sentry-meminfo file, the host kernel's does not, so a runtime that is
// silently runc where runsc was asked for is caught from inside.
func hardeningFromInside(t *testing.T, cfg Config, lang backend.Language) {
	programs := both(`const fs = await import("node:fs");
const cp = await import("node:child_process");
const probe = cp.spawnSync("python3", ["-c", `+"`"+prctlProbe+"`"+`], { encoding: "utf8", timeout: 10000 });
const prctl = probe.error ? String((probe.error as any).code) : (probe.stdout + probe.stderr).trim();
const sentry = fs.existsSync("/proc/sentry-meminfo");
const status = fs.readFileSync("/proc/self/status", "utf8");
const field = (k: string) => (status.match(new RegExp("^" + k + ":\\s*(\\S+)", "m")) ?? [])[1] ?? null;
let rootWrite = "ok";
try { fs.writeFileSync("/var/tmp/probe", "x") } catch (e) { rootWrite = (e as any).code }
let mkdir = "ok";
try { fs.mkdirSync("/var/tmp/probe.d") } catch (e) { mkdir = (e as any).code }
return { capbnd: field("CapBnd"), capeff: field("CapEff"), capprm: field("CapPrm"), nnp: field("NoNewPrivs"), seccomp: field("Seccomp"),
         prctl, sentry, rootWrite, mkdir, varTmpMode: (fs.statSync("/var/tmp").mode & 0o7777).toString(8),
         nets: fs.readdirSync("/sys/class/net").sort(), uid: process.getuid!() }`, `
import os, errno, ctypes
libc = ctypes.CDLL(None)
prctl = "%d %d" % (libc.prctl(39, 0, 0, 0, 0), libc.prctl(21, 0, 0, 0, 0))
sentry = os.path.exists("/proc/sentry-meminfo")
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
        "prctl": prctl, "sentry": sentry, "rootWrite": root_write, "mkdir": mkdir, "varTmpMode": oct(os.stat("/var/tmp").st_mode & 0o7777)[2:],
        "nets": sorted(os.listdir("/sys/class/net")), "uid": os.getuid()}`)
	type view struct {
		CapBnd, CapEff, CapPrm, NNP, Seccomp string
		Prctl                                string
		Sentry                               bool
		RootWrite, Mkdir, VarTmpMode         string
		Nets                                 []string
		UID                                  int
	}
	e := newEnv(t, cfg, lang, nil)
	v := decode[view](t, e.run(t, programs[lang]))
	zero := "0000000000000000"
	want := func(ok bool, format string, args ...any) {
		t.Helper()
		if !ok {
			t.Errorf(format, args...)
		}
	}
	want(v.CapBnd == zero && v.CapEff == zero && v.CapPrm == zero, "capabilities: bounding %s, effective %s, permitted %s; want all 0", v.CapBnd, v.CapEff, v.CapPrm)
	want(v.Prctl == "1 2", "prctl(PR_GET_NO_NEW_PRIVS), prctl(PR_GET_SECCOMP): %q, want \"1 2\" (no_new_privs set, a seccomp filter)", v.Prctl)
	want(v.Seccomp == "2", "/proc/self/status Seccomp %q, want 2 (a filter; under gVisor only with runsc --oci-seccomp)", v.Seccomp)
	if cfg.gVisor() {
		// gVisor's /proc/self/status has no NoNewPrivs line; prctl
		// above is what says no_new_privs holds.
		want(v.NNP == "" || v.NNP == "1", "/proc/self/status NoNewPrivs %q under gVisor, want no line (or 1)", v.NNP)
		want(v.Sentry, "no /proc/sentry-meminfo: the program did not run in gVisor's Sentry, though the runtime is %s", cfg.ociRuntime())
	} else {
		want(v.NNP == "1", "/proc/self/status NoNewPrivs %q, want 1", v.NNP)
		want(!v.Sentry, "/proc/sentry-meminfo exists: the program ran under gVisor, though the runtime is %q", cfg.ociRuntime())
	}
	want(v.VarTmpMode == "1777", "/var/tmp mode %s: the probe needs a world-writable directory on the root", v.VarTmpMode)
	want(v.RootWrite == "EROFS" && v.Mkdir == "EROFS", "writes to /var/tmp: %s, %s; want EROFS (a read-only root, not a permission error)", v.RootWrite, v.Mkdir)
	want(slices.Equal(v.Nets, []string{"lo"}), "network interfaces %v, want only lo", v.Nets)
	want(v.UID == 65532, "uid %d", v.UID)
	t.Logf("from inside: %+v", v)
}
