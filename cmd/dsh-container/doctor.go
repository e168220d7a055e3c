package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/containerd"
	"github.com/dsh-container/dsh-container/backend/container/seccomp"
	"github.com/dsh-container/dsh-container/images"
)

func newDoctorCmd(f *factory) *cobra.Command {
	var tools string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the daemon, runtimes and images; print each problem with its fix",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDoctor(cmd.Context(), f, tools)
		},
	}
	cmd.Flags().StringVar(&tools, "tools", "", "also start or reach each MCP server of this tool manifest and report it")
	addDriverFlags(cmd, f)
	return cmd
}

var errDoctor = errors.New("doctor found problems")

func runDoctor(ctx context.Context, f *factory, tools string) error {
	problems := checkMCPServers(ctx, f, tools)
	ok := func(format string, args ...any) { fmt.Fprintf(f.stdout, "ok    "+format+"\n", args...) }
	bad := func(fix, format string, args ...any) {
		problems++
		fmt.Fprintf(f.stdout, "FAIL  "+format+"\n      fix: %s\n", append(args, fix)...)
	}
	note := func(format string, args ...any) { fmt.Fprintf(f.stdout, "note  "+format+"\n", args...) }

	drv, err := f.connect(ctx)
	if err != nil {
		fix := "start the Docker daemon or set DOCKER_HOST; or start containerd and pass --driver containerd"
		switch names, _ := f.drv.check(false); {
		case len(names) == 1 && names[0] == driverDocker:
			fix = "start the Docker daemon or set DOCKER_HOST"
		case len(names) == 1 && names[0] == driverContainerd:
			fix = "start containerd (`systemctl start containerd`), or point --containerd-address at a running one (Docker's own: " + containerd.DockerManagedAddress + ")"
		}
		bad(fix, "engine: %v", err)
		return errDoctor
	}
	defer drv.Close()
	ctrd, isCtrd := drv.(*containerd.Driver)
	info, err := drv.Describe(ctx)
	if err != nil {
		bad("check the engine's health (`docker info`, or containerd's log)", "engine: %v", err)
		return errDoctor
	}
	ok("%s reachable, API %s", info.Engine, info.API)
	ok("cgroup version %s, driver %s, storage %s", info.CgroupVersion, info.CgroupDriver, info.Storage)
	if isCtrd {
		switch st, err := ctrd.SnapshotterStatus(ctx); {
		case err != nil:
			bad("use a containerd with the overlayfs snapshotter (the default on Linux)", "snapshotter %s: %v", ctrd.Snapshotter(), err)
		case st != "ok":
			bad("fix the snapshotter in containerd's config (overlayfs needs a kernel with overlay and a backing filesystem that supports it)", "snapshotter %s did not load: %s", ctrd.Snapshotter(), st)
		default:
			ok("snapshotter %s loaded", ctrd.Snapshotter())
		}
	}
	if !info.Seccomp {
		bad("run the engine on a kernel and build with seccomp support", "the engine does not apply seccomp profiles: the syscall filter would not apply")
	} else {
		ok("seccomp: programs run under our profile, %d syscalls allowed against %d in Docker's default (removed: %s); --seccomp default keeps the engine's",
			seccomp.Count(seccomp.Profile()), seccomp.Count(seccomp.Default()), strings.Join(seccomp.Removed(), " "))
	}
	ok("OCI runtimes registered: %s (default %s)", strings.Join(slices.Sorted(maps.Keys(info.Runtimes)), ", "), info.DefaultRuntime)
	if rsArgs, found := info.Runtimes["runsc"]; found {
		args := strings.Join(rsArgs, " ")
		if strings.Contains(args, "--host-uds=open") && strings.Contains(args, "--network=none") && strings.Contains(args, "--oci-seccomp") {
			ok("runsc is configured with --host-uds=open --network=none --oci-seccomp")
		} else {
			bad(`set "runtimeArgs": ["--host-uds=open", "--network=none", "--oci-seccomp"] for runsc in /etc/docker/daemon.json and send dockerd SIGHUP`,
				"runsc is registered with args %q; the bridge socket needs --host-uds=open, isolation --network=none, and our seccomp profile --oci-seccomp (without it gVisor ignores the profile)", args)
		}
	} else if isCtrd {
		note("runsc (gVisor) is not installed; --runtime runsc is unavailable (apt-get install runsc: the containerd driver runs it through gVisor's shim when installed, else through the runc shim)")
	} else {
		note("runsc (gVisor) is not registered; --runtime runsc is unavailable (apt-get install runsc, then register it in /etc/docker/daemon.json)")
	}
	if _, found := info.Runtimes["crun"]; !found {
		if isCtrd {
			note("crun is not installed; --runtime crun is unavailable (apt-get install crun)")
		} else {
			note("crun is not registered; --runtime crun is unavailable")
		}
	}

	// Whether or not crun is installed: an operator asking why it is
	// missing learns it would not work here either, and what would.
	if ctrls := hybridV2Controllers(); info.CgroupVersion == "1" && len(ctrls) > 0 {
		note("crun cannot run containers here (installed or not): this host's cgroups are hybrid (v1, with v2 mounted at /sys/fs/cgroup/unified holding the %s controller(s)), which crun 1.8.1 refuses "+
			"(\"cgroups in hybrid mode not supported, drop all controllers from cgroupv2\"), so .ci/run does not register it; for crun, boot with systemd.unified_cgroup_hierarchy=1 "+
			"(cgroup v2 only: /sys/fs/cgroup a cgroup2 mount) and restart the engine, or mount those controllers as v1 hierarchies while no v2 group uses them; or use runc or runsc", strings.Join(ctrls, ", "))
	}

	refs, err := drv.ImageRefs(ctx)
	if err != nil {
		bad("check the engine's health", "images: %v", err)
	}
	statuses := images.Check(refs, images.Runners)
	where := ""
	if isCtrd {
		where = " in containerd namespace " + ctrd.Namespace()
	}
	for _, st := range statuses {
		switch {
		case st.Present:
			ok("%s image %s present and current", st.Image.Language, st.Tag)
		case len(st.Stale) > 0:
			bad("run `"+imagesBuildHint(drv)+"`", "%s image is stale%s: have %s, need %s", st.Image.Language, where, strings.Join(st.Stale, ", "), st.Tag)
		default:
			bad("run `"+imagesBuildHint(drv)+"`", "%s image %s is missing%s", st.Image.Language, st.Tag, where)
		}
	}
	// A registered runtime may still be unusable on this host (crun refuses
	// a hybrid cgroup layout, for one): start a container under each.
	if len(statuses) > 0 && statuses[0].Present {
		for _, name := range []string{"runc", "crun", "runsc"} {
			if _, found := info.Runtimes[name]; !found {
				continue
			}
			switch err := drv.Probe(ctx, statuses[0].Tag, []string{"node", "-e", "0"}, name); {
			case err != nil && name == info.DefaultRuntime:
				bad("fix the engine's default OCI runtime (`docker info`; for containerd, `runc --version` and containerd's log)", "the default runtime %s cannot start a container here: %v", name, err)
			case err != nil:
				note("runtime %s is registered but cannot start a container here, so --runtime %s will fail: %v", name, name, err)
			default:
				ok("runtime %s starts containers", name)
			}
		}
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		note("mmdebstrap is not installed; building images offline needs it (apt-get install mmdebstrap)")
	}
	dir := container.DefaultSocketDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		bad("set XDG_RUNTIME_DIR or TMPDIR to a writable directory", "socket directory %s: %v", dir, err)
	} else {
		ok("socket directory %s writable", dir)
	}
	if problems > 0 {
		fmt.Fprintf(f.stdout, "%d problem(s)\n", problems)
		return errDoctor
	}
	fmt.Fprintln(f.stdout, "all checks passed")
	return nil
}

// hybridV2Controllers are the controllers of the v2 hierarchy of a hybrid
// cgroup layout (v1 under /sys/fs/cgroup, v2 at /sys/fs/cgroup/unified):
// crun refuses a hybrid layout unless this is empty. Nil on a v1-only or
// v2-only host.
func hybridV2Controllers() []string {
	const cgroup2Magic = 0x63677270 // CGROUP2_SUPER_MAGIC
	var root, unified syscall.Statfs_t
	if syscall.Statfs("/sys/fs/cgroup", &root) != nil || root.Type == cgroup2Magic ||
		syscall.Statfs("/sys/fs/cgroup/unified", &unified) != nil || unified.Type != cgroup2Magic {
		return nil
	}
	data, err := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}
