package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	containerdclient "github.com/containerd/containerd"
	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types"
	apitask "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/containers"
	ctrerrdefs "github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/identifiers"
	"github.com/containerd/containerd/leases"
	"github.com/containerd/containerd/mount"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/protobuf"
	"github.com/containerd/containerd/snapshots"
	"github.com/containerd/errdefs"
	"google.golang.org/grpc/status"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/nodelocal"
)

// Addresses and names.
const (
	// DefaultAddress is the standalone containerd's socket (Debian's
	// `containerd` package).
	DefaultAddress = "/run/containerd/containerd.sock"
	// DockerManagedAddress is the socket of the containerd a Docker daemon
	// starts and manages; our own namespace keeps us apart from Docker's
	// "moby" namespace.
	DockerManagedAddress = "/run/docker/containerd/containerd.sock"
	// DefaultNamespace is the containerd namespace the driver works in.
	DefaultNamespace = "dsh-container"
	// DefaultSnapshotter is containerd's default snapshotter on Linux.
	DefaultSnapshotter = "overlayfs"
)

// ResolveAddress returns addr, or when it is empty DefaultAddress, falling
// back to DockerManagedAddress when DefaultAddress does not exist and that
// one does.
func ResolveAddress(addr string) string {
	if addr != "" {
		return strings.TrimPrefix(addr, "unix://")
	}
	if _, err := os.Stat(DefaultAddress); err != nil {
		if _, err := os.Stat(DockerManagedAddress); err == nil {
			return DockerManagedAddress
		}
	}
	return DefaultAddress
}

// Options configure New. Zero values are the documented defaults.
type Options struct {
	// Address is containerd's socket (default: ResolveAddress("")).
	Address string
	// Namespace is the containerd namespace (default DefaultNamespace).
	Namespace string
	// Snapshotter names the snapshotter (default DefaultSnapshotter).
	Snapshotter string
	// StateDir holds the driver's host files: the per-container FIFO
	// directories and the runsc wrapper (default DefaultStateDir()).
	StateDir string
	// InitBinary is the static init mounted at InitPath when a Spec asks
	// for an init (default: docker-init or tini-static from PATH).
	InitBinary string
	// NodeRuntimes, when set, are the OCI runtimes the host running
	// containerd has (runc, crun, runsc), for a driver that runs in a
	// container and cannot see that host's binaries: the Kubernetes node
	// agent. The shims find them on that host's PATH; runsc runs through
	// the wrapper in StateDir, which must then be at the same path on that
	// host and in the driver's container. Without it the driver looks for
	// them on its own host.
	NodeRuntimes []string
	// DialTimeout bounds connecting to containerd (default 5s).
	DialTimeout time.Duration
	// Logger receives debug detail (default: discard).
	Logger *slog.Logger
}

// DefaultStateDir is where the driver keeps its host files by default.
func DefaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/run/dsh-container/containerd"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "dsh-container-containerd")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("dsh-container-containerd-%d", os.Getuid()))
}

// Driver drives containers through containerd.
type Driver struct {
	client    *containerdclient.Client
	address   string
	ns        string
	sn        string
	fifoRoot  string
	init      string
	runtimes  map[string]ociRuntime
	log       *slog.Logger
	snapshots snapshots.Snapshotter
	tasks     tasks.TasksClient
	ctrs      containers.Store
	leases    leases.Manager

	imagesMu sync.Mutex
	images   map[string]resolvedImage // ref → its snapshot parent

	mu    sync.Mutex
	state map[string]*taskState // container id → what this process holds for it
	// unsure holds, by id, the undo of each failed create whose own undo
	// failed (a *container.LeftError named it): Remove of that id runs
	// it again, removing only what the create made.
	unsure map[string]undoing

	// createHook, when set (tests only: export_test.go), sees each
	// engine answer of a Create — step "lease", "snapshot", "container",
	// "task" — and returns the one Create goes on with. It may end the
	// create's context first (end): an answer that arrives after the
	// deadline, with the engine's work done, deterministically.
	createHook func(ctx context.Context, end context.CancelFunc, step string, err error) error
}

// taskState is what the driver holds for a container it created: the
// host end of its output and its cgroup files.
type taskState struct {
	pid       uint32
	io        *cio.DirectIO
	closeOnce sync.Once
	cgroup    nodelocal.Cgroups
}

func (t *taskState) closeIO() {
	t.closeOnce.Do(func() {
		if t.io != nil {
			t.io.Cancel()
			t.io.Close()
		}
	})
}

var (
	_ container.Driver         = (*Driver)(nil)
	_ container.CPUMeter       = (*Driver)(nil)
	_ container.MemoryMeter    = (*Driver)(nil)
	_ container.OutputAttacher = (*Driver)(nil)
	_ container.ImageChecker   = (*Driver)(nil)
	_ container.Describer      = (*Driver)(nil)
	_ container.Prober         = (*Driver)(nil)
	_ container.Inspector      = (*Driver)(nil)
)

// New connects to containerd and checks that it answers. An unreachable
// socket is errdefs.ErrUnavailable naming the address and the fix.
func New(ctx context.Context, o Options) (*Driver, error) {
	addr := ResolveAddress(o.Address)
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if err := identifiers.Validate(o.Namespace); err != nil {
		return nil, fmt.Errorf("%w: containerd namespace %q: %w", errdefs.ErrInvalidArgument, o.Namespace, err)
	}
	if o.Snapshotter == "" {
		o.Snapshotter = DefaultSnapshotter
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir()
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.InitBinary == "" {
		o.InitBinary = findInit()
	}
	if _, err := os.Stat(addr); err != nil {
		return nil, unreachable(addr, err)
	}
	client, err := containerdclient.New(addr,
		containerdclient.WithDefaultNamespace(o.Namespace),
		containerdclient.WithDefaultRuntime(runcShim),
		containerdclient.WithTimeout(o.DialTimeout))
	if err != nil {
		return nil, unreachable(addr, err)
	}
	d := &Driver{
		client:   client,
		address:  addr,
		ns:       o.Namespace,
		sn:       o.Snapshotter,
		fifoRoot: filepath.Join(o.StateDir, "fifo"),
		init:     o.InitBinary,
		log:      o.Logger,
		images:   map[string]resolvedImage{},
		state:    map[string]*taskState{},
	}
	d.snapshots = client.SnapshotService(d.sn)
	d.tasks = client.TaskService()
	d.ctrs = client.ContainerService()
	d.leases = client.LeasesService()
	vctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	if _, err := client.Version(d.nsCtx(vctx)); err != nil {
		client.Close()
		return nil, unreachable(addr, err)
	}
	// The state directory holds the runsc wrapper containerd executes as
	// root and the FIFOs of every program's output, and its default
	// outside XDG_RUNTIME_DIR is a predictable path under /tmp that
	// someone else could make first.
	if err := nodelocal.PrivateDir(o.StateDir); err != nil {
		client.Close()
		return nil, fmt.Errorf("the driver's state directory (Options.StateDir): %w", err)
	}
	if err := os.MkdirAll(d.fifoRoot, 0o700); err != nil {
		client.Close()
		return nil, fmt.Errorf("the driver's state directory: %w", err)
	}
	if o.NodeRuntimes != nil {
		if d.runtimes, err = nodeRuntimes(o.StateDir, o.NodeRuntimes); err != nil {
			client.Close()
			return nil, err
		}
	} else {
		d.runtimes = detectRuntimes(o.StateDir, d.log)
	}
	// The init is bind-mounted by containerd's host: from the state
	// directory, it is at a path that host has even when the driver runs
	// in a container sharing that directory (the Kubernetes agent).
	if d.init != "" {
		if d.init, err = copyInit(o.StateDir, d.init); err != nil {
			client.Close()
			return nil, err
		}
	}
	return d, nil
}

func unreachable(addr string, err error) error {
	return fmt.Errorf("%w: cannot reach containerd at %s (%v); start it (`systemctl start containerd`, or `containerd &` from Debian's containerd package), or point --containerd-address at a running one (a Docker host's containerd listens on %s)",
		errdefs.ErrUnavailable, addr, err, DockerManagedAddress)
}

// findInit looks for a static init on PATH.
func findInit() string {
	for _, name := range []string{"docker-init", "tini-static"} {
		if p, err := lookPath(name); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				return real
			}
			return p
		}
	}
	return ""
}

// Address is the socket the driver talks to; Namespace its namespace.
func (d *Driver) Address() string   { return d.address }
func (d *Driver) Namespace() string { return d.ns }

// Snapshotter names the snapshotter containers' root filesystems come from.
func (d *Driver) Snapshotter() string { return d.sn }

// Close releases the client. Containers are not touched.
func (d *Driver) Close() error {
	if d.client == nil {
		return nil
	}
	return d.client.Close()
}

func (d *Driver) nsCtx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, d.ns)
}

// Capabilities implements container.Driver.
func (d *Driver) Capabilities() container.Capabilities {
	return container.Capabilities{Name: "containerd", Runtimes: runtimeNames(d.runtimes), DefaultRuntime: "runc"}
}

// Endpoint implements container.Driver: a Unix socket in a private
// directory, bind-mounted into the container.
func (d *Driver) Endpoint(_ context.Context, req container.EndpointRequest) (*container.Endpoint, error) {
	return container.NewUnixEndpoint(req.SocketDir)
}

// createTimeout bounds a create, which the caller's cancellation never
// cuts short (see Create).
const createTimeout = 30 * time.Second

// cleanupTimeout bounds the removal of what a failed create made. It runs
// under a context of its own: the create's may be what ended.
const cleanupTimeout = 30 * time.Second

// leaseExpiry bounds how long a lease protects a snapshot being prepared:
// if this process dies mid-create, containerd's garbage collector frees
// the lease after it, and the reaper removes the labelled snapshot.
const leaseExpiry = 5 * time.Minute

// Create implements container.Driver: a snapshot of the image, the
// container record with the OCI spec, and its task (created, not started)
// with stdout and stderr on FIFOs. It runs to completion under a bounded,
// non-cancellable context and, when anything fails, removes everything it
// made, snapshot included; a caller that gave up meanwhile gets ctx's
// error and nothing left behind.
//
// The removal runs under a fresh bounded context (the create's own may
// have expired, which is how a create fails midway), and touches only
// what this call made: a snapshot or record the engine refused as
// existing (AlreadyExists) is someone else's. After an answer that does
// not say whether the engine made the thing (a timeout, a lost
// connection), the snapshot or record under the name is removed only if
// it carries every label of the Spec, the owner's included.
func (d *Driver) Create(ctx context.Context, s container.Spec) (_ string, retErr error) {
	rt, err := d.runtimeFor(s.OCIRuntime)
	if err != nil {
		return "", err
	}
	sp, err := BuildSpec(s, SpecOptions{Namespace: d.ns, InitBinary: d.init})
	if err != nil {
		return "", err
	}
	specAny, err := protobuf.MarshalAnyToProto(sp)
	if err != nil {
		return "", fmt.Errorf("encoding the OCI spec: %w", err)
	}
	id := s.Name
	if err := ctx.Err(); err != nil {
		// A caller that gave up before anything was made: make nothing
		// (a create runs to completion once begun, then is undone).
		return "", err
	}
	cctx, cancel := context.WithTimeout(d.nsCtx(context.WithoutCancel(ctx)), createTimeout)
	defer cancel()
	answer := func(step string, err error) error {
		if d.createHook != nil {
			return d.createHook(cctx, cancel, step, err)
		}
		return err
	}
	img, err := d.resolveImage(cctx, s.Image)
	if err != nil {
		return "", err
	}

	// The lease's id is chosen here, so that a lease the engine made
	// before an error can still be deleted.
	leaseID := "dsh-create-" + randomHex(8)
	_, err = d.leases.Create(cctx, leases.WithID(leaseID), leases.WithExpiration(leaseExpiry), leases.WithLabels(s.Labels))
	defer func() {
		// The container record now holds the snapshot (or nothing was
		// left to hold).
		uctx, cancel := d.cleanupCtx(ctx)
		defer cancel()
		if err := d.leases.Delete(uctx, leases.Lease{ID: leaseID}); err != nil && !errdefs.IsNotFound(err) {
			d.log.Warn("lease delete after a create", "lease", leaseID, "err", err)
		}
	}()
	if err := answer("lease", err); err != nil {
		return "", d.translate(err)
	}
	lctx := leases.WithLease(cctx, leaseID)
	var made createMade
	defer func() {
		if retErr == nil {
			return
		}
		if err := d.undoCreate(ctx, s, made); err != nil {
			d.log.Warn("cleanup after a failed create", "container_id", id, "err", err)
			d.mu.Lock()
			if d.unsure == nil {
				d.unsure = map[string]undoing{}
			}
			d.unsure[id] = undoing{s, made}
			d.mu.Unlock()
			retErr = &container.LeftError{ID: id, Err: retErr, Undo: err}
		}
	}()

	t0 := time.Now()
	mounts, err := d.snapshots.Prepare(lctx, id, img.chainID, snapshots.WithLabels(s.Labels))
	if errdefs.IsNotFound(err) {
		// The image's snapshots went (image removed, content pruned):
		// resolve it afresh once.
		d.forgetImage(s.Image)
		if img, err = d.resolveImage(cctx, s.Image); err != nil {
			return "", err
		}
		mounts, err = d.snapshots.Prepare(lctx, id, img.chainID, snapshots.WithLabels(s.Labels))
	}
	if err = answer("snapshot", err); err != nil {
		if errdefs.IsAlreadyExists(err) {
			return "", fmt.Errorf("%w: a snapshot %s already exists in containerd namespace %s", errdefs.ErrAlreadyExists, id, d.ns)
		}
		made.snapshot = maybeMade
		return "", fmt.Errorf("preparing the root filesystem of %s: %w", id, d.translate(err))
	}
	made.snapshot = wasMade
	_, err = d.ctrs.Create(lctx, containers.Container{
		ID:          id,
		Labels:      s.Labels,
		Image:       s.Image,
		Runtime:     containerRuntime(rt),
		Spec:        specAny,
		SnapshotKey: id,
		Snapshotter: d.sn,
	})
	if err = answer("container", err); err != nil {
		if !errdefs.IsAlreadyExists(err) {
			made.record = maybeMade
		}
		return "", fmt.Errorf("creating container %s: %w", id, d.translate(err))
	}
	// From here the record is this call's: its removal takes the task
	// too, whatever tasks.Create answered.
	made.record = wasMade
	t2 := time.Now()
	st, err := d.newTask(cctx, id, rt, mounts, answer)
	if err != nil {
		return "", err
	}
	d.log.Debug("containerd create", "container_id", id, "snapshot_and_record", t2.Sub(t0), "task", time.Since(t2))
	d.mu.Lock()
	d.state[id] = st
	d.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return id, nil
}

// made says whether a create made a thing: not (the zero value), surely,
// or maybe — the engine's answer was an error that does not say (a
// timeout, a lost connection).
type made int

const (
	notMade made = iota
	wasMade
	maybeMade
)

// createMade is what a create made, by the name its Spec gives them all
// (a record made is removed with its task, if any).
type createMade struct{ snapshot, record made }

// cleanupCtx is a fresh context, in the driver's namespace, bounded by
// cleanupTimeout and not cancelled with ctx.
func (d *Driver) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(d.nsCtx(context.WithoutCancel(ctx)), cleanupTimeout)
}

// undoing is a failed create's undo, kept to be retried by Remove.
type undoing struct {
	spec container.Spec
	made createMade
}

// undoCreate removes what a failed create of s made, under a fresh bounded
// context. What it maybe made is removed only when it carries every label
// of s: the name may be someone else's.
func (d *Driver) undoCreate(ctx context.Context, s container.Spec, m createMade) error {
	uctx, cancel := d.cleanupCtx(ctx)
	defer cancel()
	return d.undo(uctx, s, m)
}

// undo is undoCreate's work under ctx, which must be in the driver's
// namespace.
func (d *Driver) undo(uctx context.Context, s container.Spec, m createMade) error {
	id := s.Name
	if m.record == maybeMade {
		c, err := d.ctrs.Get(uctx, id)
		switch {
		case errdefs.IsNotFound(err):
			m.record = notMade
		case err != nil:
			return fmt.Errorf("looking for container %s: %w", id, d.translate(err))
		case hasLabels(c.Labels, s.Labels) && c.SnapshotKey == id:
			m.record = wasMade
		default:
			m.record = notMade // someone else's
		}
	}
	if m.record == wasMade {
		// The task (if any), the record, the snapshot and the FIFOs.
		if err := d.remove(uctx, id); err != nil && !errdefs.IsNotFound(err) {
			return err
		}
		return nil
	}
	if m.snapshot == maybeMade {
		info, err := d.snapshots.Stat(uctx, id)
		switch {
		case errdefs.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("looking for snapshot %s: %w", id, d.translate(err))
		case !hasLabels(info.Labels, s.Labels):
			return nil // someone else's
		}
		m.snapshot = wasMade
	}
	if m.snapshot == wasMade {
		if err := d.snapshots.Remove(uctx, id); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("removing snapshot %s: %w", id, d.translate(err))
		}
	}
	return nil
}

// hasLabels says whether labels hold every label of want.
func hasLabels(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// newTask creates the container's task with its output on FIFOs in a
// directory of the container's own under the state directory. answer, when
// not nil, is Create's: it sees the engine's answer.
func (d *Driver) newTask(ctx context.Context, id string, rt ociRuntime, rootfs []mount.Mount, answer func(string, error) error) (_ *taskState, retErr error) {
	dir := filepath.Join(d.fifoRoot, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("the task's FIFO directory: %w", err)
	}
	fifos := cio.NewFIFOSet(cio.Config{
		Stdout: filepath.Join(dir, "stdout"),
		Stderr: filepath.Join(dir, "stderr"),
	}, func() error { return os.RemoveAll(dir) })
	dio, err := cio.NewDirectIO(context.WithoutCancel(ctx), fifos)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the task's FIFOs: %w", err)
	}
	st := &taskState{io: dio}
	defer func() {
		if retErr != nil {
			st.closeIO()
		}
	}()
	req := &tasks.CreateTaskRequest{
		ContainerID: id,
		Stdout:      fifos.Stdout,
		Stderr:      fifos.Stderr,
		Rootfs:      rootfsMounts(rootfs),
	}
	if rt.options != nil {
		req.Options = protobuf.FromAny(rt.options)
	}
	resp, err := d.tasks.Create(ctx, req)
	if answer != nil {
		err = answer("task", err)
	}
	if err != nil {
		return nil, d.shimError(rt, fromGRPC(err))
	}
	st.pid = resp.Pid
	st.cgroup = nodelocal.CgroupsOf(int(resp.Pid), id)
	return st, nil
}

func rootfsMounts(ms []mount.Mount) []*types.Mount {
	out := make([]*types.Mount, 0, len(ms))
	for _, m := range ms {
		out = append(out, &types.Mount{Type: m.Type, Source: m.Source, Target: m.Target, Options: m.Options})
	}
	return out
}

func (d *Driver) taskState(id string) *taskState {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state[id]
}

// StartAttached implements container.OutputAttacher: the task's output
// FIFOs were opened when it was created, so no byte is missed.
func (d *Driver) StartAttached(ctx context.Context, id string) (container.Streams, error) {
	st := d.taskState(id)
	if st == nil {
		return container.Streams{}, fmt.Errorf("%w: container %s was not created by this driver: its output cannot be attached", errdefs.ErrNotFound, id)
	}
	if err := d.start(ctx, id); err != nil {
		return container.Streams{}, err
	}
	return container.Streams{
		Stdout: st.io.Stdout,
		Stderr: st.io.Stderr,
		Close:  func() error { st.closeIO(); return nil },
	}, nil
}

// Start implements container.Driver. Output nobody attached to is read
// and discarded, so a container never blocks on a full FIFO.
func (d *Driver) Start(ctx context.Context, id string) error {
	if err := d.start(ctx, id); err != nil {
		return err
	}
	if st := d.taskState(id); st != nil {
		go discard(st.io.Stdout)
		go discard(st.io.Stderr)
	}
	return nil
}

func (d *Driver) start(ctx context.Context, id string) error {
	if _, err := d.tasks.Start(d.nsCtx(ctx), &tasks.StartRequest{ContainerID: id}); err != nil {
		return d.translate(fromGRPC(err))
	}
	return nil
}

// Wait implements container.Driver. The status carries OOMKilled from the
// task's cgroup, read when the task exits and before it is deleted.
func (d *Driver) Wait(ctx context.Context, id string) (<-chan container.ExitStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The wait outlives the call that set it up: it ends when the task
	// exits or the client closes.
	wctx := d.nsCtx(context.WithoutCancel(ctx))
	out := make(chan container.ExitStatus, 1)
	go func() {
		var st container.ExitStatus
		r, err := d.tasks.Wait(wctx, &tasks.WaitRequest{ContainerID: id})
		if err != nil {
			st.Code, st.Err = -1, d.translate(fromGRPC(err))
		} else {
			st.Code = int(r.ExitStatus)
		}
		st.OOMKilled = d.oomKilled(wctx, id)
		out <- st
	}()
	return out, nil
}

// Kill implements container.Driver: SIGKILL to every process of the task.
func (d *Driver) Kill(ctx context.Context, id string) error {
	ctx = d.nsCtx(ctx)
	_, err := d.tasks.Kill(ctx, &tasks.KillRequest{ContainerID: id, Signal: uint32(syscall.SIGKILL), All: true})
	if err == nil {
		return nil
	}
	err = d.translate(fromGRPC(err))
	if errdefs.IsNotFound(err) {
		return err
	}
	// A task whose shim is exiting answers "ttrpc: closed" rather than
	// NotFound: a task that is gone or stopped has nothing left to kill.
	if r, gerr := d.tasks.Get(ctx, &tasks.GetRequest{ContainerID: id}); (gerr != nil && errdefs.IsNotFound(fromGRPC(gerr))) ||
		(gerr == nil && r.Process != nil && r.Process.Status == apitask.Status_STOPPED) {
		return fmt.Errorf("%w: task %s has exited (kill: %v)", errdefs.ErrNotFound, id, err)
	}
	return err
}

// Remove implements container.Driver: the task (killed if it runs), the
// container record, its snapshot and its FIFO directory. It reports
// NotFound only when none of them existed. The id of a failed create whose
// undo failed (its *container.LeftError's) is that undo again: only what
// the create made goes, never another's record or snapshot under the name.
func (d *Driver) Remove(ctx context.Context, id string) error {
	d.mu.Lock()
	u, unsure := d.unsure[id]
	d.mu.Unlock()
	if !unsure {
		return d.remove(d.nsCtx(ctx), id)
	}
	if err := d.undo(d.nsCtx(ctx), u.spec, u.made); err != nil {
		return err
	}
	d.mu.Lock()
	delete(d.unsure, id)
	d.mu.Unlock()
	return nil
}

func (d *Driver) remove(ctx context.Context, id string) error {
	d.mu.Lock()
	st := d.state[id]
	delete(d.state, id)
	d.mu.Unlock()

	found := false
	var errs []error
	note := func(what string, err error) {
		switch {
		case err == nil:
			found = true
		case errdefs.IsNotFound(err):
		default:
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	terr := d.deleteTask(ctx, id)
	note("delete task", terr)
	if st != nil {
		st.closeIO()
	}
	if terr != nil && !errdefs.IsNotFound(terr) {
		// Keep the container record while its task lives: the record
		// carries the labels the reaper finds it by, and a task whose
		// container is gone would hold its shim forever, unseen.
		return d.translate(errors.Join(errs...))
	}
	note("delete container", fromGRPC(d.ctrs.Delete(ctx, id)))
	note("remove snapshot", fromGRPC(d.snapshots.Remove(ctx, id)))
	dir := filepath.Join(d.fifoRoot, id)
	if _, err := os.Lstat(dir); err == nil {
		note("remove FIFO directory", os.RemoveAll(dir))
	}
	if err := errors.Join(errs...); err != nil {
		return d.translate(err)
	}
	if !found {
		return fmt.Errorf("%w: no container %s in containerd namespace %s", errdefs.ErrNotFound, id, d.ns)
	}
	return nil
}

// deleteTask deletes the task, killing it first when it still runs.
//
// A task already killed but not yet reaped refuses the delete, and its
// runtime may refuse the kill too (runsc: "sandbox is not running", an
// unknown error): the kill's failure is not the end — the task's exit
// decides, and the second delete reports. Giving up at the kill left the
// task, its container and its snapshot behind whenever a teardown met a
// gVisor sandbox that was dying (issue 24).
func (d *Driver) deleteTask(ctx context.Context, id string) error {
	_, err := d.tasks.Delete(ctx, &tasks.DeleteTaskRequest{ContainerID: id})
	err = fromGRPC(err)
	if err == nil || errdefs.IsNotFound(err) {
		return err
	}
	// Still running, created, or just killed and not yet reaped: kill,
	// wait for the exit, delete.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		_, err := d.tasks.Wait(wctx, &tasks.WaitRequest{ContainerID: id})
		waited <- fromGRPC(err)
	}()
	var errs []error
	if _, err := d.tasks.Kill(ctx, &tasks.KillRequest{ContainerID: id, Signal: uint32(syscall.SIGKILL), All: true}); err != nil && !errdefs.IsNotFound(fromGRPC(err)) {
		errs = append(errs, fmt.Errorf("kill: %w", fromGRPC(err)))
	}
	if err := <-waited; err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("waiting for the killed task: %w", err))
	}
	_, err = d.tasks.Delete(ctx, &tasks.DeleteTaskRequest{ContainerID: id})
	if err = fromGRPC(err); err == nil || errdefs.IsNotFound(err) {
		return err
	}
	return errors.Join(append(errs, err)...)
}

// List implements container.Driver: containers carrying label=value and,
// as leftovers of containers already gone, snapshots carrying it.
func (d *Driver) List(ctx context.Context, label, value string) ([]container.ContainerInfo, error) {
	ctx = d.nsCtx(ctx)
	filter := "labels." + strconv.Quote(label) + "==" + strconv.Quote(value)
	list, err := d.ctrs.List(ctx, filter)
	if err != nil {
		return nil, d.translate(fromGRPC(err))
	}
	running := map[string]bool{}
	if resp, err := d.tasks.List(ctx, &tasks.ListTasksRequest{}); err == nil {
		for _, t := range resp.Tasks {
			running[t.ID] = t.Status == apitask.Status_RUNNING
		}
	}
	out := make([]container.ContainerInfo, 0, len(list))
	seen := map[string]bool{}
	for _, c := range list {
		seen[c.ID] = true
		out = append(out, container.ContainerInfo{ID: c.ID, Labels: c.Labels, Created: c.CreatedAt, Running: running[c.ID]})
	}
	err = d.snapshots.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if !seen[info.Name] && info.Kind == snapshots.KindActive {
			out = append(out, container.ContainerInfo{ID: info.Name, Labels: info.Labels, Created: info.Created})
		}
		return nil
	}, filter)
	if err != nil {
		return nil, d.translate(fromGRPC(err))
	}
	return out, nil
}

// fromGRPC turns an error from a raw gRPC service (tasks) into the
// errdefs classes. The client's stores (containers, images, snapshots,
// leases) already return classified errors, which it leaves alone:
// containerd's own FromGRPC would make them ErrUnknown.
func fromGRPC(err error) error {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return ctrerrdefs.FromGRPC(err)
	}
	return err
}

// translate classifies a containerd error once, with a fix.
func (d *Driver) translate(err error) error {
	if err == nil {
		return nil
	}
	if errdefs.IsUnavailable(err) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) && strings.Contains(err.Error(), d.address) {
		return unreachable(d.address, err)
	}
	return err
}
