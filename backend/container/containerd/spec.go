package containerd

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/contrib/seccomp"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/dsh-container/dsh-container/backend/container"
	dshseccomp "github.com/dsh-container/dsh-container/backend/container/seccomp"
)

// InitPath is where the init binary is mounted when Spec.Init is set, the
// place Docker mounts its docker-init.
const InitPath = "/sbin/docker-init"

// cpuPeriod is the CFS period a CPU rate is expressed in (Docker's).
const cpuPeriod = 100_000

// SpecOptions are the host facts the OCI spec needs beyond a
// container.Spec.
type SpecOptions struct {
	// Namespace is the containerd namespace: the cgroup is
	// /<namespace>/<id>, as containerd's default spec places it.
	Namespace string
	// InitBinary is the host path of a static init (tini) mounted
	// read-only at InitPath when Spec.Init is set; "" makes Spec.Init
	// fail closed.
	InitBinary string
}

// BuildSpec builds the OCI runtime spec of s with containerd's oci options
// on containerd's default Linux spec (its masked and read-only paths, its
// device allowlist, new pid, ipc, uts, mount and network namespaces). It
// carries every hardening field of s or fails closed: a field it cannot
// honour is an errdefs.ErrNotImplemented naming the field.
func BuildSpec(s container.Spec, o SpecOptions) (*specs.Spec, error) {
	if s.Name == "" {
		return nil, fmt.Errorf("%w: the container needs a name (it is its containerd id)", errdefs.ErrInvalidArgument)
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	uid, gid, err := container.ParseUser(s.User)
	if err != nil {
		return nil, err
	}
	if !s.LogDriverNone {
		// containerd keeps no log: output is only what the attached
		// streams carry. A log driver is a Docker notion we cannot add.
		return nil, fmt.Errorf("%w: LogDriverNone=false: containerd has no log driver; the driver only captures output through its streams", errdefs.ErrNotImplemented)
	}
	if len(s.Cmd) == 0 {
		return nil, fmt.Errorf("%w: the container needs a command", errdefs.ErrInvalidArgument)
	}
	args := slices.Clone(s.Cmd)
	opts := []oci.SpecOpts{
		oci.WithHostname(s.Hostname),
		oci.WithProcessCwd(s.WorkingDir),
		oci.WithUIDGID(uid, gid),
		// The environment is exactly Spec.Env: oci.WithEnv would merge it
		// into the default spec's PATH.
		func(_ context.Context, _ oci.Client, _ *containers.Container, sp *oci.Spec) error {
			sp.Process.Env = slices.Clone(s.Env)
			return nil
		},
		// No /run tmpfs: like Docker, nothing writable but /tmp.
		oci.WithoutRunMount,
		withPids(s.Pids),
		withRlimit("RLIMIT_NOFILE", s.NoFile),
		withOOMScoreAdj(container.OOMScoreAdj),
	}
	if s.NetworkDisabled {
		// A network namespace of its own, no path: runc and crun bring up
		// lo and nothing else (there is no CNI here).
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace}))
	} else {
		return nil, fmt.Errorf("%w: NetworkDisabled=false: the containerd driver has no network to attach a container to", errdefs.ErrNotImplemented)
	}
	if s.IPCPrivate {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.IPCNamespace}))
	} else {
		return nil, fmt.Errorf("%w: IPCPrivate=false: the containerd driver always gives a container its own IPC namespace", errdefs.ErrNotImplemented)
	}
	if s.ReadOnlyRoot {
		opts = append(opts, oci.WithRootFSReadonly())
	}
	if s.CapDropAll {
		opts = append(opts, oci.WithCapabilities(nil), func(_ context.Context, _ oci.Client, _ *containers.Container, sp *oci.Spec) error {
			sp.Process.Capabilities.Inheritable = nil
			sp.Process.Capabilities.Ambient = nil
			return nil
		})
	} else {
		return nil, fmt.Errorf("%w: CapDropAll=false: the containerd driver grants no capabilities", errdefs.ErrNotImplemented)
	}
	if s.NoNewPrivileges {
		opts = append(opts, oci.WithNoNewPrivileges)
	} else {
		opts = append(opts, oci.WithNewPrivileges)
	}
	if s.MemoryBytes > 0 {
		// Memory and memory+swap equal: no swap.
		opts = append(opts, oci.WithMemoryLimit(uint64(s.MemoryBytes)), oci.WithMemorySwap(s.MemoryBytes))
	}
	if s.NanoCPUs > 0 {
		opts = append(opts, oci.WithCPUCFS(s.NanoCPUs*cpuPeriod/1e9, cpuPeriod))
	}
	if dshseccomp.IsGVisor(s.OCIRuntime) {
		opts = append(opts, withReadOnlyProc)
	}
	if s.TmpfsBytes > 0 {
		opts = append(opts, oci.WithMounts([]specs.Mount{{
			Destination: "/tmp",
			Type:        "tmpfs",
			Source:      "tmpfs",
			Options:     []string{"rw", "noexec", "nosuid", "nodev", "mode=1777", "size=" + strconv.FormatInt(s.TmpfsBytes, 10)},
		}}))
	}
	if s.BindDir != "" {
		opts = append(opts, oci.WithMounts([]specs.Mount{{
			Destination: container.BridgeDir,
			Type:        "bind",
			Source:      s.BindDir,
			Options:     []string{"rbind", "ro", "nosuid", "nodev", "noexec"},
		}}))
	}
	if s.Init {
		if o.InitBinary == "" {
			return nil, fmt.Errorf("%w: Init: no static init binary on this host to mount at %s; install tini (`apt-get install tini`, which ships tini-static)", errdefs.ErrNotImplemented, InitPath)
		}
		opts = append(opts, oci.WithMounts([]specs.Mount{{
			Destination: InitPath,
			Type:        "bind",
			Source:      o.InitBinary,
			Options:     []string{"rbind", "ro", "nosuid", "nodev"},
		}}))
		args = append([]string{InitPath, "--"}, args...)
	}
	opts = append(opts, oci.WithProcessArgs(args...))
	if s.Seccomp != nil {
		p := *s.Seccomp
		opts = append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, sp *oci.Spec) error {
			sp.Linux.Seccomp = &p
			return nil
		})
	} else {
		// The engine's default: containerd's own profile, which follows
		// Docker's and is resolved against the spec's capabilities.
		opts = append(opts, seccomp.WithDefaultProfile())
	}

	ctx := namespaces.WithNamespace(context.Background(), o.Namespace)
	sp, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: s.Name}, opts...)
	if err != nil {
		return nil, fmt.Errorf("building the OCI spec: %w", err)
	}
	return sp, nil
}

// withReadOnlyProc mounts /proc read-only. Under gVisor /proc is the
// Sentry's, which lets a program lower its own oom_score_adj without
// CAP_SYS_RESOURCE (the host kernel answers EACCES) and ignores the spec's
// readonlyPaths and maskedPaths; a read-only mount it does honour, so
// every write to /proc fails with EROFS there. Neither runner writes to
// /proc. Under runc the host kernel's own checks apply (lowering
// oom_score_adj needs CAP_SYS_RESOURCE), and /proc stays as containerd's
// default spec has it.
func withReadOnlyProc(_ context.Context, _ oci.Client, _ *containers.Container, sp *oci.Spec) error {
	for i, m := range sp.Mounts {
		if m.Destination == "/proc" && m.Type == "proc" {
			sp.Mounts[i].Options = append(slices.DeleteFunc(slices.Clone(m.Options), func(o string) bool { return o == "rw" || o == "ro" }), "ro")
			return nil
		}
	}
	return fmt.Errorf("%w: the OCI spec has no /proc mount to make read-only", errdefs.ErrNotImplemented)
}

// withOOMScoreAdj sets the process's oom_score_adj, which the OCI runtime
// writes with CAP_SYS_RESOURCE (making it the program's minimum too; see
// container.OOMScoreAdj). containerd's default spec sets none, and runc
// then leaves the program the shim's score and minimum, below which the
// program could lower its own score (Docker always sets one).
func withOOMScoreAdj(n int) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, sp *oci.Spec) error {
		sp.Process.OOMScoreAdj = &n
		return nil
	}
}

// withRlimit sets one rlimit, soft and hard, replacing the default spec's.
func withRlimit(typ string, n int64) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, sp *oci.Spec) error {
		if n <= 0 {
			return nil
		}
		sp.Process.Rlimits = slices.DeleteFunc(sp.Process.Rlimits, func(r specs.POSIXRlimit) bool { return r.Type == typ })
		sp.Process.Rlimits = append(sp.Process.Rlimits, specs.POSIXRlimit{Type: typ, Soft: uint64(n), Hard: uint64(n)})
		return nil
	}
}

// withPids sets the pids limit (none when n is 0).
func withPids(n int64) oci.SpecOpts {
	return func(ctx context.Context, c oci.Client, ctr *containers.Container, sp *oci.Spec) error {
		if n <= 0 {
			return nil
		}
		return oci.WithPidsLimit(n)(ctx, c, ctr, sp)
	}
}
