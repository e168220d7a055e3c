package containerd

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/contrib/seccomp"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/dsh-container/dsh-container/backend/container"
	dshseccomp "github.com/dsh-container/dsh-container/backend/container/seccomp"
)

// preset is the Spec the runtime builds for every run (see
// container.Runtime.spec), with distinct values so a swapped field shows.
func preset() container.Spec {
	return container.Spec{
		Name: "dsh-0123456789abcdef", Hostname: "sandbox", Image: "dsh-container/ts-runner:abc",
		Cmd: []string{"node", "/opt/dsh/bootstrap.js", container.BridgeSocket},
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"}, User: "65532:65532", WorkingDir: "/tmp",
		Labels:          map[string]string{container.LabelManaged: "true", container.LabelOwner: "1.2.abcd"},
		BindDir:         "/run/user/0/dsh-container/s-0011223344556677",
		NetworkDisabled: true, ReadOnlyRoot: true, CapDropAll: true, NoNewPrivileges: true,
		Init: true, IPCPrivate: true, LogDriverNone: true,
		MemoryBytes: 256 << 20, NanoCPUs: 1_500_000_000, Pids: 128, TmpfsBytes: 64 << 20, NoFile: 256,
		Seccomp: dshseccomp.Profile(),
	}
}

var testOpts = SpecOptions{Namespace: "dsh-test", InitBinary: "/usr/bin/tini-static"}

// Every hardening field of the preset, read back field by field from the
// runtime-spec Spec BuildSpec returns (and from its JSON, as containerd
// stores it).
func TestBuildSpecCarriesThePreset(t *testing.T) {
	s := preset()
	built, err := BuildSpec(s, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	// What containerd stores is the JSON; read the fields from it.
	data, err := json.Marshal(built)
	if err != nil {
		t.Fatal(err)
	}
	var sp specs.Spec
	if err := json.Unmarshal(data, &sp); err != nil {
		t.Fatal(err)
	}
	check := func(ok bool, what string, v any) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %+v", what, v)
		}
	}
	p, l := sp.Process, sp.Linux

	check(sp.Hostname == "sandbox", "hostname", sp.Hostname)
	check(slices.Equal(p.Args, []string{InitPath, "--", "node", "/opt/dsh/bootstrap.js", container.BridgeSocket}), "args: the init, then the command", p.Args)
	check(slices.Equal(p.Env, s.Env), "environment: exactly PATH, HOME, LANG", p.Env)
	check(p.Cwd == "/tmp", "working dir", p.Cwd)
	check(p.User.UID == 65532 && p.User.GID == 65532, "uid:gid", p.User)
	check(len(p.User.AdditionalGids) <= 1 && (len(p.User.AdditionalGids) == 0 || p.User.AdditionalGids[0] == 65532), "no supplementary groups", p.User.AdditionalGids)
	check(!p.Terminal, "no terminal", p.Terminal)
	// oom_score_adj set, as Docker does: runc writes it privileged, so
	// the program cannot lower it (unset, it inherits the shim's).
	check(p.OOMScoreAdj != nil && *p.OOMScoreAdj == container.OOMScoreAdj, "oom_score_adj", p.OOMScoreAdj)

	// Read-only root.
	check(sp.Root != nil && sp.Root.Readonly && sp.Root.Path == "rootfs", "read-only root", sp.Root)

	// No capabilities in any set; no_new_privs.
	c := p.Capabilities
	check(c != nil && len(c.Bounding) == 0 && len(c.Effective) == 0 && len(c.Permitted) == 0 && len(c.Inheritable) == 0 && len(c.Ambient) == 0, "capabilities: none", c)
	check(p.NoNewPrivileges, "no_new_privs", p.NoNewPrivileges)

	// Namespaces: new pid, ipc, uts, mount, network; no host one (no
	// path), no user namespace (uids are the host's, like Docker's).
	want := map[specs.LinuxNamespaceType]bool{specs.PIDNamespace: true, specs.IPCNamespace: true, specs.UTSNamespace: true, specs.MountNamespace: true, specs.NetworkNamespace: true}
	for _, ns := range l.Namespaces {
		check(ns.Path == "", "namespace "+string(ns.Type)+" is new, not joined", ns.Path)
		check(want[ns.Type], "unexpected namespace", ns.Type)
		delete(want, ns.Type)
	}
	check(len(want) == 0, "missing namespaces", want)

	// Our seccomp profile, verbatim.
	check(reflect.DeepEqual(l.Seccomp, s.Seccomp), "seccomp: our profile", l.Seccomp != nil)

	// Limits: memory == memory+swap, CPU quota, pids.
	r := l.Resources
	check(r != nil && r.Memory != nil && r.Memory.Limit != nil && *r.Memory.Limit == s.MemoryBytes, "memory limit", r.Memory)
	check(r.Memory.Swap != nil && *r.Memory.Swap == s.MemoryBytes, "memory+swap = memory (no swap)", r.Memory.Swap)
	check(r.CPU != nil && r.CPU.Quota != nil && r.CPU.Period != nil && *r.CPU.Period == 100000 && *r.CPU.Quota == 150000, "CPU quota 1.5 CPUs", r.CPU)
	check(r.Pids != nil && r.Pids.Limit == 128, "pids", r.Pids)
	// The device cgroup denies everything but containerd's default
	// allowlist (the first rule denies all).
	check(len(r.Devices) > 0 && !r.Devices[0].Allow && r.Devices[0].Access == "rwm", "devices: deny by default", r.Devices)

	// Rlimits: nofile, soft = hard.
	var nofile []specs.POSIXRlimit
	for _, rl := range p.Rlimits {
		if rl.Type == "RLIMIT_NOFILE" {
			nofile = append(nofile, rl)
		}
	}
	check(len(nofile) == 1 && nofile[0].Soft == 256 && nofile[0].Hard == 256, "RLIMIT_NOFILE 256", nofile)

	// Masked and read-only paths: containerd's defaults.
	for _, m := range []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware", "/proc/sched_debug"} {
		check(slices.Contains(l.MaskedPaths, m), "masked "+m, l.MaskedPaths)
	}
	for _, m := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"} {
		check(slices.Contains(l.ReadonlyPaths, m), "read-only "+m, l.ReadonlyPaths)
	}

	// Mounts: the engine's own (proc, /dev, devpts, shm, mqueue, sysfs),
	// the /tmp tmpfs sized from the limits and noexec, the socket
	// directory read-only and the init binary read-only; no /run tmpfs,
	// no other bind mount, nothing writable but /tmp (and /dev/shm).
	binds := map[string]specs.Mount{}
	tmpfs := map[string]specs.Mount{}
	for _, m := range sp.Mounts {
		switch m.Type {
		case "bind":
			binds[m.Destination] = m
		case "tmpfs":
			tmpfs[m.Destination] = m
		}
		check(m.Destination != "/run", "no /run tmpfs", m)
	}
	tmp := tmpfs["/tmp"]
	check(slices.Equal(tmp.Options, []string{"rw", "noexec", "nosuid", "nodev", "mode=1777", fmt.Sprintf("size=%d", 64<<20)}), "/tmp tmpfs", tmp)
	check(len(tmpfs) == 3 && tmpfs["/dev"].Type == "tmpfs" && slices.Contains(tmpfs["/dev/shm"].Options, "noexec"), "tmpfs mounts: /tmp, /dev, /dev/shm", tmpfs)
	check(len(binds) == 2, "two bind mounts: the socket directory and the init", binds)
	sock := binds[container.BridgeDir]
	check(sock.Source == s.BindDir && slices.Contains(sock.Options, "ro") && slices.Contains(sock.Options, "noexec") && slices.Contains(sock.Options, "nosuid"), "socket directory: read-only", sock)
	init := binds[InitPath]
	check(init.Source == testOpts.InitBinary && slices.Contains(init.Options, "ro"), "init binary: read-only", init)

	// The cgroup lives under the namespace, named after the container.
	check(l.CgroupsPath == "/dsh-test/"+s.Name, "cgroup path", l.CgroupsPath)
	// Nothing that widens access.
	check(len(l.Devices) == 0 && len(l.UIDMappings) == 0 && l.IntelRdt == nil && len(l.Sysctl) == 0, "no devices, id maps, sysctls", l)
	check(sp.Hooks == nil, "no hooks", sp.Hooks)
}

// The applied view (what Inspect reports) of a built spec is the preset.
func TestAppliedReadsTheBuiltSpec(t *testing.T) {
	s := preset()
	sp, err := BuildSpec(s, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	a := applied(sp)
	check := func(ok bool, what string, v any) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %+v", what, v)
		}
	}
	check(a.User == "65532:65532" && a.Hostname == "sandbox" && a.WorkingDir == "/tmp", "identity", a)
	check(slices.Equal(a.Cmd, s.Cmd) && a.Init, "command without the init, init reported", a.Cmd)
	check(slices.Equal(a.Env, s.Env), "env", a.Env)
	check(a.ReadOnlyRoot && a.NoNewPrivileges && len(a.Capabilities) == 0 && a.NetworkNone && a.IPCPrivate, "hardening flags", a)
	check(reflect.DeepEqual(a.Seccomp, s.Seccomp) && !a.SeccompDefault, "seccomp", a.SeccompDefault)
	check(a.MemoryBytes == s.MemoryBytes && a.MemorySwapBytes == s.MemoryBytes && a.NanoCPUs == s.NanoCPUs && a.Pids == s.Pids && a.NoFile == s.NoFile, "limits", a)
	check(len(a.Tmpfs) == 1 && slices.Contains(a.Tmpfs["/tmp"], "noexec"), "tmpfs", a.Tmpfs)
	check(len(a.Mounts) == 1 && a.Mounts[0] == container.AppliedMount{Source: s.BindDir, Destination: container.BridgeDir, ReadOnly: true}, "mounts", a.Mounts)

	// Without our profile: containerd's default, reported as the default.
	s.Seccomp = nil
	sp, err = BuildSpec(s, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	check(reflect.DeepEqual(sp.Linux.Seccomp, seccomp.DefaultProfile(sp)), "engine default profile", nil)
	a = applied(sp)
	check(a.SeccompDefault && a.Seccomp == nil, "default profile reported as default", a.SeccompDefault)
}

// A Spec field the driver cannot honour fails closed, naming the field.
func TestBuildSpecFailsClosed(t *testing.T) {
	for _, c := range []struct {
		name  string
		mod   func(*container.Spec)
		opts  SpecOptions
		field string
	}{
		{"network", func(s *container.Spec) { s.NetworkDisabled = false }, testOpts, "NetworkDisabled"},
		{"ipc", func(s *container.Spec) { s.IPCPrivate = false }, testOpts, "IPCPrivate"},
		{"capabilities", func(s *container.Spec) { s.CapDropAll = false }, testOpts, "CapDropAll"},
		{"log driver", func(s *container.Spec) { s.LogDriverNone = false }, testOpts, "LogDriverNone"},
		{"no init binary", func(*container.Spec) {}, SpecOptions{Namespace: "x"}, "Init"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := preset()
			c.mod(&s)
			_, err := BuildSpec(s, c.opts)
			if !errdefs.IsNotImplemented(err) || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("want NotImplemented naming %s, got %v", c.field, err)
			}
		})
	}
	// A User that is not a numeric uid:gid is bad input, refused before
	// any spec exists: the image's /etc/passwd never decides.
	for _, u := range []string{"nobody", "0", "abc", "-1", "4294967296", "4294967295:0", "1000:x", "99999999999:0", ""} {
		s := preset()
		s.User = u
		if sp, err := BuildSpec(s, testOpts); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "User") || sp != nil {
			t.Errorf("User %q: %v, want InvalidArgument naming User", u, err)
		}
	}
	// Without an init, no init binary is needed and none is mounted.
	s := preset()
	s.Init = false
	sp, err := BuildSpec(s, SpecOptions{Namespace: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if sp.Process.Args[0] != "node" || applied(sp).Init {
		t.Fatalf("args %v", sp.Process.Args)
	}
}

// Under gVisor /proc is mounted read-only (the Sentry lets a program
// lower its oom_score_adj and ignores readonlyPaths), and /tmp carries
// noexec, nosuid and nodev as under runc; under runc /proc is containerd's
// default.
func TestBuildSpecUnderGVisor(t *testing.T) {
	mount := func(sp *specs.Spec, dst string) specs.Mount {
		t.Helper()
		for _, m := range sp.Mounts {
			if m.Destination == dst {
				return m
			}
		}
		t.Fatalf("no %s mount in %+v", dst, sp.Mounts)
		return specs.Mount{}
	}
	for _, rt := range []string{"", "runc", "runsc", "runsc-debug", "gvisor"} {
		s := preset()
		s.OCIRuntime = rt
		sp, err := BuildSpec(s, testOpts)
		if err != nil {
			t.Fatal(err)
		}
		proc := mount(sp, "/proc")
		gvisor := dshseccomp.IsGVisor(rt)
		if slices.Contains(proc.Options, "ro") != gvisor || slices.Contains(proc.Options, "rw") {
			t.Errorf("runtime %q: /proc options %v, want ro only under gVisor", rt, proc.Options)
		}
		for _, o := range []string{"nosuid", "noexec", "nodev"} {
			if !slices.Contains(proc.Options, o) {
				t.Errorf("runtime %q: /proc options %v lack %s", rt, proc.Options, o)
			}
		}
		tmp := mount(sp, "/tmp")
		for _, o := range []string{"nosuid", "noexec", "nodev"} {
			if !slices.Contains(tmp.Options, o) {
				t.Errorf("runtime %q: /tmp options %v lack %s", rt, tmp.Options, o)
			}
		}
	}
}

func TestRuntimeName(t *testing.T) {
	for name, rt := range map[string]ociRuntime{
		"runc":  {name: "runc", shim: runcShim},
		"crun":  runcWith("crun", "/usr/bin/crun", nil),
		"runsc": runcWith("runsc", "/run/dsh-container/containerd/runsc", RunscArgs),
	} {
		if got := runtimeName(containerRuntime(rt)); got != name {
			t.Errorf("%s: read back as %q", name, got)
		}
	}
	if got := runtimeName(containerRuntime(ociRuntime{shim: runscShim})); got != "runsc" {
		t.Errorf("gVisor's shim: %q", got)
	}
}

func TestImageNames(t *testing.T) {
	if got := imageNames("dsh-container/ts-runner:abc"); !slices.Equal(got, []string{"dsh-container/ts-runner:abc", "docker.io/dsh-container/ts-runner:abc"}) {
		t.Fatal(got)
	}
	if got := imageNames("registry.example:5000/x:1"); len(got) != 1 {
		t.Fatal(got)
	}
	if familiar("docker.io/library/debian:trixie") != "debian:trixie" || familiar("docker.io/dsh-container/x:1") != "dsh-container/x:1" {
		t.Fatal("familiar")
	}
}
