package containertest

import (
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/seccomp"
)

// goodApplied is what a faithful engine reports for p.
func goodApplied(p preset) container.Applied {
	l := p.limits
	bridge := "dsh-0123456789abcdef"
	return container.Applied{
		Image: p.image, User: container.RunnerUser, Hostname: "sandbox", WorkingDir: "/tmp",
		Cmd: []string{"node", "/opt/dsh/bootstrap.js", container.BridgeSocket},
		Env: []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"},
		Labels: map[string]string{
			container.LabelManaged: "true", container.LabelOwner: p.owner, container.LabelRun: "0123456789abcdef",
			container.LabelLang: string(p.lang), container.LabelBridge: bridge,
		},
		ReadOnlyRoot: true, NoNewPrivileges: true, NetworkNone: true, IPCPrivate: true, Init: true,
		Seccomp:     seccomp.Profile(),
		MemoryBytes: l.MemoryBytes, MemorySwapBytes: l.MemoryBytes, NanoCPUs: l.NanoCPUs, Pids: l.Pids, NoFile: l.NoFile,
		Tmpfs:      map[string][]string{"/tmp": {"rw", "noexec", "nosuid", "nodev", "size=52428800"}},
		Mounts:     []container.AppliedMount{{Source: p.sockDir + "/" + bridge, Destination: container.BridgeDir, ReadOnly: true}},
		OCIRuntime: p.ociRuntime,
	}
}

func testPreset() preset {
	l := container.DefaultLimits()
	presetLimits(&l)
	return preset{lang: backend.TypeScript, image: "ts-runner:abc", owner: "ct-1-x-1-typescript", limits: l, sockDir: "/tmp/dshct1", ociRuntime: "runc", id: "f00dfeed0123456789"}
}

// A faithful report passes; each way a driver could drop or bend one
// setting of the preset is caught, naming the setting.
func TestCheckApplied(t *testing.T) {
	p := testPreset()
	if err := checkApplied(goodApplied(p), p); err != nil {
		t.Fatalf("a faithful report fails the check: %v", err)
	}
	// Docker reports the image's labels among the container's.
	a := goodApplied(p)
	a.Labels[container.LabelPrefix+"inputs"] = "ts-runner:1fb12a6f3c35"
	if err := checkApplied(a, p); err != nil {
		t.Fatalf("an image label under the prefix fails the check: %v", err)
	}
	mutations := []struct {
		name   string
		change func(*container.Applied)
		want   string
	}{
		{"root user", func(a *container.Applied) { a.User = "" }, "user"},
		{"another image", func(a *container.Applied) { a.Image = "evil:latest" }, "image"},
		{"working dir", func(a *container.Applied) { a.WorkingDir = "/" }, "working dir"},
		{"hostname names the run", func(a *container.Applied) { a.Hostname = "run-0123456789abcdef" }, "hostname"},
		{"hostname is the container's id", func(a *container.Applied) { a.Hostname = "f00dfeed0123" }, "hostname"},
		{"writable root", func(a *container.Applied) { a.ReadOnlyRoot = false }, "read-only root"},
		{"a capability kept", func(a *container.Applied) { a.Capabilities = []string{"CAP_NET_RAW"} }, "capabilities"},
		{"no no_new_privs", func(a *container.Applied) { a.NoNewPrivileges = false }, "no_new_privs"},
		{"a network", func(a *container.Applied) { a.NetworkNone = false }, "network"},
		{"shared IPC", func(a *container.Applied) { a.IPCPrivate = false }, "IPC"},
		{"no init", func(a *container.Applied) { a.Init = false }, "init"},
		{"the engine's seccomp profile", func(a *container.Applied) { a.Seccomp, a.SeccompDefault = nil, true }, "seccomp: the engine's default"},
		{"no seccomp profile", func(a *container.Applied) { a.Seccomp = nil }, "seccomp: none"},
		{"a wider seccomp profile", func(a *container.Applied) { a.Seccomp = seccomp.Default() }, "beyond ours"},
		{"a profile allowing everything", func(a *container.Applied) { a.Seccomp.DefaultAction = specs.ActAllow }, "seccomp"},
		{"another OCI runtime", func(a *container.Applied) { a.OCIRuntime = "crun" }, "OCI runtime"},
		{"memory", func(a *container.Applied) { a.MemoryBytes *= 2; a.MemorySwapBytes *= 2 }, "memory"},
		{"swap", func(a *container.Applied) { a.MemorySwapBytes = -1 }, "memory+swap"},
		{"CPU", func(a *container.Applied) { a.NanoCPUs = 0 }, "CPU"},
		{"pids", func(a *container.Applied) { a.Pids = 0 }, "pids"},
		{"nofile", func(a *container.Applied) { a.NoFile = 1 << 20 }, "nofile"},
		{"no /tmp", func(a *container.Applied) { delete(a.Tmpfs, "/tmp") }, "no /tmp"},
		{"exec on /tmp", func(a *container.Applied) {
			a.Tmpfs["/tmp"] = slices.DeleteFunc(a.Tmpfs["/tmp"], func(o string) bool { return o == "noexec" })
		}, "noexec"},
		{"suid on /tmp", func(a *container.Applied) { a.Tmpfs["/tmp"] = []string{"noexec", "nodev", "size=50m"} }, "nosuid"},
		{"/tmp size", func(a *container.Applied) { a.Tmpfs["/tmp"] = []string{"noexec", "nosuid", "nodev", "size=64m"} }, "size"},
		{"/tmp unbounded", func(a *container.Applied) { a.Tmpfs["/tmp"] = []string{"noexec", "nosuid", "nodev"} }, "no size option"},
		{"another tmpfs", func(a *container.Applied) { a.Tmpfs["/var/tmp"] = []string{"size=1m"} }, "tmpfs /var/tmp"},
		{"no bridge mount", func(a *container.Applied) { a.Mounts = nil }, "bind mounts"},
		{"a writable bridge", func(a *container.Applied) { a.Mounts[0].ReadOnly = false }, "read-only"},
		{"a host directory", func(a *container.Applied) {
			a.Mounts = append(a.Mounts, container.AppliedMount{Source: "/var/run", Destination: "/var/run", ReadOnly: true})
		}, "bind mounts"},
		{"the bridge elsewhere", func(a *container.Applied) { a.Mounts[0].Source = "/srv/x" }, "per-run directory"},
		{"a host variable", func(a *container.Applied) { a.Env = append(a.Env, "AWS_SECRET_ACCESS_KEY=x") }, "env"},
		{"no PATH", func(a *container.Applied) { a.Env = a.Env[1:] }, "env"},
		{"a label outside the prefix", func(a *container.Applied) { a.Labels["app"] = "x" }, "outside the reserved prefix"},
		{"an invalid label key", func(a *container.Applied) { a.Labels[container.LabelPrefix+"a b"] = "x" }, "not a valid Kubernetes label key"},
		{"an invalid label value", func(a *container.Applied) { a.Labels[container.LabelRun] = "a/b" }, "not a valid Kubernetes label value"},
		{"another owner", func(a *container.Applied) { a.Labels[container.LabelOwner] = "someone" }, container.LabelOwner},
		{"no managed label", func(a *container.Applied) { delete(a.Labels, container.LabelManaged) }, container.LabelManaged},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			a := goodApplied(p)
			m.change(&a)
			err := checkApplied(a, p)
			if err == nil {
				t.Fatal("not caught")
			}
			if !strings.Contains(err.Error(), m.want) {
				t.Fatalf("caught as %q, want it to name %q", err, m.want)
			}
		})
	}
}

func TestTmpfsSize(t *testing.T) {
	for _, c := range []struct {
		opts []string
		want int64
	}{
		{[]string{"rw", "size=52428800"}, 50 << 20},
		{[]string{"size=51200k"}, 50 << 20},
		{[]string{"size=50m", "noexec"}, 50 << 20},
		{[]string{"size=1G"}, 1 << 30},
	} {
		if got, err := tmpfsSize(c.opts); err != nil || got != c.want {
			t.Errorf("%v: %d, %v; want %d", c.opts, got, err, c.want)
		}
	}
	for _, opts := range [][]string{nil, {"size="}, {"size=m"}, {"size=12x"}, {"size=-"}} {
		if got, err := tmpfsSize(opts); err == nil {
			t.Errorf("%q: %d, want an error", opts, got)
		}
	}
}

func TestValidLabelValue(t *testing.T) {
	for _, v := range []string{"", "a", "ct-123-lq2-1-typescript", strings.Repeat("a", 63)} {
		if !validLabelValue(v) {
			t.Errorf("%q: invalid, want valid", v)
		}
	}
	for _, v := range []string{"-a", "a-", "a b", "a/b", strings.Repeat("a", 64)} {
		if validLabelValue(v) {
			t.Errorf("%q: valid, want invalid", v)
		}
	}
	if o := newOwner(backend.TypeScript); !validLabelValue(o) {
		t.Errorf("newOwner: %q is not a valid label value", o)
	}
}
