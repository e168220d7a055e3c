package containerd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	apitasks "github.com/containerd/containerd/api/services/tasks/v1"
	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/contrib/seccomp"
	"github.com/containerd/containerd/leases"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/containerd/protobuf"
	"github.com/containerd/containerd/snapshots"
	"github.com/containerd/containerd/version"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/dsh-container/dsh-container/backend/container"
)

// Ping implements container.Describer.
func (d *Driver) Ping(ctx context.Context) error {
	if _, err := d.client.Version(d.nsCtx(ctx)); err != nil {
		return d.translate(fromGRPC(err))
	}
	return nil
}

// Describe implements container.Describer: containerd's version, the
// snapshotter (and whether containerd reports it usable) and the OCI
// runtimes this host can run.
func (d *Driver) Describe(ctx context.Context) (container.EngineInfo, error) {
	ctx = d.nsCtx(ctx)
	v, err := d.client.Version(ctx)
	if err != nil {
		return container.EngineInfo{}, d.translate(fromGRPC(err))
	}
	info := container.EngineInfo{
		Engine:         "containerd " + v.Version,
		API:            fmt.Sprintf("containerd gRPC at %s, namespace %s (client %s)", d.address, d.ns, version.Version),
		CgroupVersion:  cgroupVersion(),
		CgroupDriver:   "cgroupfs",
		Storage:        d.sn,
		Runtimes:       map[string][]string{},
		DefaultRuntime: "runc",
		Seccomp:        kernelSeccomp(),
	}
	for name, rt := range d.runtimes {
		info.Runtimes[name] = slices.Clone(rt.args)
	}
	return info, nil
}

// SnapshotterStatus reports whether containerd's snapshotter plugin of the
// driver's snapshotter loaded ("ok"), or why not.
func (d *Driver) SnapshotterStatus(ctx context.Context) (string, error) {
	// One filter: its terms AND; several filters would OR.
	resp, err := d.client.IntrospectionService().Plugins(d.nsCtx(ctx), []string{`type=="io.containerd.snapshotter.v1",id==` + strconv.Quote(d.sn)})
	if err != nil {
		return "", d.translate(fromGRPC(err))
	}
	if len(resp.Plugins) == 0 {
		return "", fmt.Errorf("%w: containerd has no snapshotter %q", errdefs.ErrNotFound, d.sn)
	}
	p := resp.Plugins[0]
	if p.InitErr != nil {
		return "error: " + p.InitErr.Message, nil
	}
	return "ok", nil
}

func cgroupVersion() string {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err == nil && st.Type == 0x63677270 { // CGROUP2_SUPER_MAGIC
		return "2"
	}
	return "1"
}

func kernelSeccomp() bool {
	data, err := os.ReadFile("/proc/self/status")
	return err == nil && strings.Contains(string(data), "\nSeccomp:")
}

// Probe implements container.Prober: a bare container (its own network
// namespace, no bridge, the runtime's default spec otherwise) running cmd
// under an OCI runtime, started, waited for and removed — on every path,
// under a fresh bounded context, with its lease; a removal that fails is
// the probe's error (a *container.LeftError naming it). It carries the
// runtime's managed label and this process as owner, so the reaper
// removes it if this process dies first.
func (d *Driver) Probe(ctx context.Context, image string, cmd []string, runtime string) (retErr error) {
	ctx, cancel := context.WithTimeout(d.nsCtx(ctx), 60*time.Second)
	defer cancel()
	rt, err := d.runtimeFor(runtime)
	if err != nil {
		return err
	}
	img, err := d.resolveImage(ctx, image)
	if err != nil {
		return err
	}
	id := "dsh-probe-" + randomHex(8)
	labels := map[string]string{container.LabelManaged: "true", container.LabelOwner: container.OwnerOf(os.Getpid()), container.LabelPrefix + "probe": "true"}
	sp, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: id}, oci.WithProcessArgs(cmd...), oci.WithEnv([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}), oci.WithoutRunMount, oci.WithRootFSReadonly())
	if err != nil {
		return err
	}
	specAny, err := protobuf.MarshalAnyToProto(sp)
	if err != nil {
		return err
	}
	// The lease's id is chosen here, so that a lease the engine made
	// before an error (an answer lost) is deleted too. Both cleanups run
	// whatever the outcome, under a fresh bounded context: the probe's
	// own may have ended.
	_, err = d.leases.Create(ctx, leases.WithID(id), leases.WithExpiration(leaseExpiry), leases.WithLabels(labels))
	defer func() {
		uctx, cancel := d.cleanupCtx(ctx)
		defer cancel()
		if err := d.leases.Delete(uctx, leases.Lease{ID: id}); err != nil && !errdefs.IsNotFound(err) {
			d.log.Warn("lease delete after a probe", "lease", id, "err", err)
		}
	}()
	if err != nil {
		return d.translate(fromGRPC(err))
	}
	lctx := leases.WithLease(ctx, id)
	defer func() {
		uctx, cancel := d.cleanupCtx(ctx)
		defer cancel()
		// The id is this probe's alone (random): whatever is under it
		// is what the probe made.
		if err := d.remove(uctx, id); err != nil && !errdefs.IsNotFound(err) {
			retErr = &container.LeftError{ID: id, Err: retErr, Undo: err}
		}
	}()
	mounts, err := d.snapshots.Prepare(lctx, id, img.chainID, snapshots.WithLabels(labels))
	if err != nil {
		return d.translate(fromGRPC(err))
	}
	if _, err := d.ctrs.Create(lctx, containers.Container{ID: id, Labels: labels, Image: image, Runtime: containerRuntime(rt), Spec: specAny, SnapshotKey: id, Snapshotter: d.sn}); err != nil {
		return d.translate(fromGRPC(err))
	}
	st, err := d.newTask(ctx, id, rt, mounts, nil)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.state[id] = st
	d.mu.Unlock()
	go discard(st.io.Stdout)
	go discard(st.io.Stderr)
	exit, err := d.Wait(ctx, id)
	if err != nil {
		return err
	}
	if err := d.start(ctx, id); err != nil {
		return err
	}
	select {
	case s := <-exit:
		if s.Err != nil {
			return s.Err
		}
		if s.Code != 0 {
			return fmt.Errorf("the probe exited with status %d", s.Code)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Inspect implements container.Inspector from the container's record as
// containerd stores it: its labels, image and runtime, and the OCI spec
// it holds (decoded from the record, not rebuilt from a Spec).
func (d *Driver) Inspect(ctx context.Context, id string) (container.Applied, error) {
	c, err := d.ctrs.Get(d.nsCtx(ctx), id)
	if err != nil {
		return container.Applied{}, d.translate(fromGRPC(err))
	}
	if c.Spec == nil {
		return container.Applied{}, fmt.Errorf("container %s has no OCI spec in containerd", id)
	}
	v, err := typeurl.UnmarshalAny(c.Spec)
	if err != nil {
		return container.Applied{}, fmt.Errorf("decoding the OCI spec of %s: %w", id, err)
	}
	sp, ok := v.(*specs.Spec)
	if !ok || sp.Process == nil || sp.Linux == nil || sp.Root == nil {
		return container.Applied{}, fmt.Errorf("container %s holds %T, not a Linux OCI spec", id, v)
	}
	a := applied(sp)
	a.Image, a.Labels = c.Image, c.Labels
	a.OCIRuntime = runtimeName(c.Runtime)
	return a, nil
}

// applied reads the hardening-relevant configuration out of an OCI spec.
func applied(sp *specs.Spec) container.Applied {
	p, l := sp.Process, sp.Linux
	a := container.Applied{
		User:            fmt.Sprintf("%d:%d", p.User.UID, p.User.GID),
		Hostname:        sp.Hostname,
		WorkingDir:      p.Cwd,
		Cmd:             slices.Clone(p.Args),
		Env:             slices.Clone(p.Env),
		ReadOnlyRoot:    sp.Root.Readonly,
		NoNewPrivileges: p.NoNewPrivileges,
		Tmpfs:           map[string][]string{},
	}
	if p.Capabilities != nil {
		a.Capabilities = slices.Sorted(slices.Values(p.Capabilities.Bounding))
	}
	for _, ns := range l.Namespaces {
		switch ns.Type {
		case specs.NetworkNamespace:
			// A new network namespace (no path) holds only lo: there is
			// no CNI on this path.
			a.NetworkNone = ns.Path == ""
		case specs.IPCNamespace:
			a.IPCPrivate = ns.Path == ""
		}
	}
	initMounted := false
	for _, m := range sp.Mounts {
		switch {
		case m.Type == "tmpfs" && m.Destination != "/dev" && m.Destination != "/dev/shm":
			// /dev and /dev/shm are the engine's own, as under Docker,
			// which does not list them either.
			a.Tmpfs[m.Destination] = slices.Clone(m.Options)
		case m.Type == "bind" && m.Destination == InitPath:
			initMounted = true
		case m.Type == "bind":
			a.Mounts = append(a.Mounts, container.AppliedMount{Source: m.Source, Destination: m.Destination, ReadOnly: slices.Contains(m.Options, "ro")})
		}
	}
	if initMounted && len(a.Cmd) >= 2 && a.Cmd[0] == InitPath && a.Cmd[1] == "--" {
		a.Init = true
		a.Cmd = a.Cmd[2:]
	}
	if l.Seccomp != nil {
		if sameJSON(l.Seccomp, seccomp.DefaultProfile(sp)) {
			a.SeccompDefault = true
		} else {
			a.Seccomp = l.Seccomp
		}
	}
	if r := l.Resources; r != nil {
		if r.Memory != nil {
			if r.Memory.Limit != nil {
				a.MemoryBytes = *r.Memory.Limit
			}
			if r.Memory.Swap != nil {
				a.MemorySwapBytes = *r.Memory.Swap
			}
		}
		if r.CPU != nil && r.CPU.Quota != nil && r.CPU.Period != nil && *r.CPU.Period > 0 {
			a.NanoCPUs = *r.CPU.Quota * 1e9 / int64(*r.CPU.Period)
		}
		if r.Pids != nil {
			a.Pids = r.Pids.Limit
		}
	}
	for _, rl := range p.Rlimits {
		if rl.Type == "RLIMIT_NOFILE" && rl.Soft == rl.Hard {
			a.NoFile = int64(rl.Hard)
		}
	}
	return a
}

// runtimeName names the OCI runtime a container record selects, as
// Spec.OCIRuntime does.
func runtimeName(r containers.RuntimeInfo) string {
	switch r.Name {
	case runscShim:
		return "runsc"
	case runcShim:
	default:
		return r.Name
	}
	if r.Options == nil || len(r.Options.GetValue()) == 0 {
		return "runc"
	}
	v, err := typeurl.UnmarshalAny(r.Options)
	if err != nil {
		return r.Name
	}
	o, ok := v.(*runcoptions.Options)
	if !ok || o.BinaryName == "" {
		return "runc"
	}
	return o.BinaryName[strings.LastIndexByte(o.BinaryName, '/')+1:]
}

// Leftovers counts the tasks and snapshots of containers carrying
// label=value (bench's soak and tests: nothing may be left).
func (d *Driver) Leftovers(ctx context.Context, label, value string) (tasks, snapshots int, err error) {
	ctx = d.nsCtx(ctx)
	filter := "labels." + strconv.Quote(label) + "==" + strconv.Quote(value)
	list, err := d.ctrs.List(ctx, filter)
	if err != nil {
		return 0, 0, d.translate(err)
	}
	for _, c := range list {
		if _, err := d.tasks.Get(ctx, &apitasks.GetRequest{ContainerID: c.ID}); err == nil {
			tasks++
		}
	}
	err = d.snapshots.Walk(ctx, func(context.Context, snapshotInfo) error { snapshots++; return nil }, filter)
	return tasks, snapshots, d.translate(fromGRPC(err))
}

// RuntimeArgs are the arguments each OCI runtime runs with, for doctor.
func (d *Driver) RuntimeArgs() map[string][]string {
	out := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(d.runtimes)) {
		out[name] = d.runtimes[name].args
	}
	return out
}

func discard(r interface{ Read([]byte) (int, error) }) {
	buf := make([]byte, 32<<10)
	for {
		if _, err := r.Read(buf); err != nil {
			return
		}
	}
}

// sameJSON compares two values as containerd stores them: as JSON (a
// stored spec's empty lists come back as nil).
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

type snapshotInfo = snapshots.Info
