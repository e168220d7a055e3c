// Package docker implements the container runtime's Driver on the Docker
// Engine API, negotiating the API version with the daemon (20.10 speaks
// 1.41). It translates a container.Spec faithfully — the hardening preset
// is decided by the runtime, not here — and translates transport errors
// once, at this edge, into errdefs classes with a fix in the message.
package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	dtypes "github.com/docker/docker/api/types"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dimage "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-units"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/nodelocal"
)

// apiClient is the part of the Docker client the driver uses, so tests
// can fake the transport.
type apiClient interface {
	ContainerCreate(ctx context.Context, config *dcontainer.Config, hostConfig *dcontainer.HostConfig, networkingConfig *network.NetworkingConfig, platform any, containerName string) (dcontainer.CreateResponse, error)
	ContainerAttach(ctx context.Context, container string, options dcontainer.AttachOptions) (dtypes.HijackedResponse, error)
	ContainerStart(ctx context.Context, container string, options dcontainer.StartOptions) error
	ContainerWait(ctx context.Context, container string, condition dcontainer.WaitCondition) (<-chan dcontainer.WaitResponse, <-chan error)
	ContainerInspect(ctx context.Context, container string) (dcontainer.InspectResponse, error)
	ContainerStatsOneShot(ctx context.Context, container string) (dcontainer.StatsResponseReader, error)
	ContainerKill(ctx context.Context, container, signal string) error
	ContainerRemove(ctx context.Context, container string, options dcontainer.RemoveOptions) error
	ContainerList(ctx context.Context, options dcontainer.ListOptions) ([]dcontainer.Summary, error)
	ImageList(ctx context.Context, options dimage.ListOptions) ([]dimage.Summary, error)
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (dimage.InspectResponse, error)
	Info(ctx context.Context) (system.Info, error)
	ServerVersion(ctx context.Context) (dtypes.Version, error)
	Ping(ctx context.Context) (dtypes.Ping, error)
}

// Driver drives containers through a Docker daemon.
type Driver struct {
	api apiClient
	cli *client.Client

	// runtimes are the daemon's registered OCI runtimes (nil when they
	// could not be read: then any name is passed on to the daemon).
	runtimes       []string
	defaultRuntime string

	mu      sync.Mutex
	cgroups map[string]nodelocal.Cgroups // container id → its accounting files
	// unsure holds, by name, the Spec of each failed create whose undo
	// could not look under the name (a *container.LeftError named it):
	// Remove of that name removes only a container the create made
	// (madeFrom), as the undo would have.
	unsure map[string]container.Spec

	// imageRefs maps an image ID checkImage passed to the reference it
	// was resolved from (imageName).
	imageRefs sync.Map

	// createHook, when set (tests only), sees the daemon's answer to a
	// create and returns the one Create goes on with; it may end the
	// create's context first (end), as a deadline passing while the
	// daemon worked would (see createHook in the containerd driver).
	createHook func(ctx context.Context, end context.CancelFunc, step string, err error) error
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

// New connects to the daemon named by the environment (DOCKER_HOST...,
// default unix:///var/run/docker.sock) and negotiates the API version.
func New(ctx context.Context) (*Driver, error) {
	// The client would trace every API call (CPU-meter polls included) on
	// the global provider; a run's spans are the runtime's own phases.
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation(), client.WithTraceProvider(noop.NewTracerProvider()))
	if err != nil {
		return nil, fmt.Errorf("%w: docker client: %w", errdefs.ErrInvalidArgument, err)
	}
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		return nil, translate(err, "")
	}
	d := &Driver{api: dockerAPI{cli}, cli: cli, cgroups: map[string]nodelocal.Cgroups{}}
	if info, err := cli.Info(ctx); err == nil {
		d.runtimes = slices.Sorted(maps.Keys(info.Runtimes))
		d.defaultRuntime = info.DefaultRuntime
	}
	return d, nil
}

// Client exposes the underlying client for the Docker-only image build
// (package images). Everything else goes through the driver's verbs.
func (d *Driver) Client() *client.Client { return d.cli }

// Capabilities implements container.Driver. The runtimes are read from the
// daemon when the driver connects.
func (d *Driver) Capabilities() container.Capabilities {
	return container.Capabilities{Name: "docker", Runtimes: d.runtimes, DefaultRuntime: d.defaultRuntime}
}

// Endpoint implements container.Driver: a Unix socket in a private
// directory, bind-mounted into the container.
func (d *Driver) Endpoint(_ context.Context, req container.EndpointRequest) (*container.Endpoint, error) {
	return container.NewUnixEndpoint(req.SocketDir)
}

// Close releases the client.
func (d *Driver) Close() error {
	if d.cli == nil {
		return nil
	}
	return d.cli.Close()
}

// dockerAPI adapts *client.Client to apiClient (ContainerCreate's platform
// parameter type differs).
type dockerAPI struct{ *client.Client }

func (a dockerAPI) ContainerCreate(ctx context.Context, config *dcontainer.Config, hostConfig *dcontainer.HostConfig, networkingConfig *network.NetworkingConfig, _ any, name string) (dcontainer.CreateResponse, error) {
	return a.Client.ContainerCreate(ctx, config, hostConfig, networkingConfig, nil, name)
}

// Translate maps a Spec onto the Docker API's container and host config.
func Translate(s container.Spec) (*dcontainer.Config, *dcontainer.HostConfig) {
	cfg := &dcontainer.Config{
		Image:           s.Image,
		Hostname:        s.Hostname,
		Cmd:             s.Cmd,
		Env:             s.Env,
		User:            s.User,
		WorkingDir:      s.WorkingDir,
		Labels:          s.Labels,
		NetworkDisabled: s.NetworkDisabled,
		AttachStdout:    true,
		AttachStderr:    true,
		// Clear any entrypoint the image declares: Cmd is the whole command.
		Entrypoint: []string{},
		// Nor does the image's HEALTHCHECK run: the daemon would exec it
		// in the container, beside the program, on the image's schedule.
		Healthcheck: &dcontainer.HealthConfig{Test: []string{"NONE"}},
	}
	nproc := s.Pids
	init := s.Init
	hc := &dcontainer.HostConfig{
		ReadonlyRootfs: s.ReadOnlyRoot,
		Init:           &init,
		Runtime:        s.OCIRuntime,
		// dockerd passes it on whatever it is; explicit, it is the
		// number both drivers promise.
		OomScoreAdj: container.OOMScoreAdj,
		Resources: dcontainer.Resources{
			Memory:     s.MemoryBytes,
			MemorySwap: s.MemoryBytes,
			NanoCPUs:   s.NanoCPUs,
			PidsLimit:  &nproc,
			Ulimits: []*units.Ulimit{
				{Name: "nofile", Soft: s.NoFile, Hard: s.NoFile},
			},
		},
		Tmpfs: map[string]string{
			"/tmp": "rw,noexec,nosuid,nodev,size=" + strconv.FormatInt(s.TmpfsBytes, 10),
		},
	}
	if s.NetworkDisabled {
		hc.NetworkMode = "none"
	}
	if s.CapDropAll {
		hc.CapDrop = []string{"ALL"}
	}
	if s.NoNewPrivileges {
		hc.SecurityOpt = append(hc.SecurityOpt, "no-new-privileges")
	}
	if s.Seccomp != nil {
		hc.SecurityOpt = append(hc.SecurityOpt, "seccomp="+seccompJSON(s.Seccomp))
	}
	if s.IPCPrivate {
		hc.IpcMode = "private"
	}
	if s.LogDriverNone {
		hc.LogConfig = dcontainer.LogConfig{Type: "none"}
	}
	if s.BindDir != "" {
		hc.Mounts = []mount.Mount{{
			Type:     mount.TypeBind,
			Source:   s.BindDir,
			Target:   container.BridgeDir,
			ReadOnly: true,
		}}
	}
	return cfg, hc
}

// seccompJSON renders a profile the way the daemon reads `seccomp=<json>`:
// Docker's profile format is a superset of runtime-spec's LinuxSeccomp
// (defaultAction, defaultErrnoRet, architectures, syscalls with names,
// action, errnoRet and args parse the same).
func seccompJSON(p *specs.LinuxSeccomp) string {
	b, err := json.Marshal(p)
	if err != nil {
		// Cannot happen: the type holds only strings, integers and
		// slices and pointers of them.
		panic(fmt.Sprintf("docker: encoding a seccomp profile: %v", err))
	}
	return string(b)
}

// createTimeout bounds a create, which is never cut short by the
// caller's cancellation (see Create).
const createTimeout = 30 * time.Second

// cleanupTimeout bounds the removal of what a failed create made. It runs
// under a context of its own: the create's may be what ended.
const cleanupTimeout = 30 * time.Second

// Create implements container.Driver. It runs to completion under a
// bounded, non-cancellable context: the daemon may create the container
// after a client gave up, and then nobody would know its id to remove it.
//
// When the create fails anyway, what this call made is removed under a
// fresh bounded context (the create's own may have expired, which is how
// a create fails midway): after an answer that does not say whether the
// daemon made the container (a timeout, a lost connection), the container
// under the name is removed only if it is this call's — the name, image
// and every label of the Spec, the owner's included, must match. A name
// the daemon refused as taken (Conflict) is someone else's, and nothing is
// removed. A Spec needs a name: a container without one could not be found
// again.
func (d *Driver) Create(ctx context.Context, s container.Spec) (string, error) {
	if s.Name == "" {
		return "", fmt.Errorf("%w: the container has no name (Spec.Name): a create that fails midway finds what it made by its name", errdefs.ErrInvalidArgument)
	}
	image, err := d.checkSpec(ctx, s)
	if err != nil {
		return "", err
	}
	// The container is made from the image ID checked, not the reference
	// (which may move meanwhile); messages name the reference.
	ref := s.Image
	if image != "" {
		s.Image = image
	}
	if s.OCIRuntime != "" && d.runtimes != nil && !slices.Contains(d.runtimes, s.OCIRuntime) {
		return "", fmt.Errorf("%w: OCI runtime %q is not registered with the Docker daemon (it has %s); register it in /etc/docker/daemon.json", errdefs.ErrNotImplemented, s.OCIRuntime, strings.Join(d.runtimes, ", "))
	}
	cfg, hc := Translate(s)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	resp, err := d.api.ContainerCreate(cctx, cfg, hc, nil, nil, s.Name)
	if d.createHook != nil {
		err = d.createHook(cctx, cancel, "create", err)
	}
	switch {
	case errdefs.IsConflict(err):
		// The name is taken: the container under it is not this call's.
		return "", translate(err, ref)
	case err != nil:
		// The daemon may have made the container before the error.
		return "", d.undoCreate(ctx, s, "", translate(err, ref))
	}
	if err := ctx.Err(); err != nil {
		return "", d.undoCreate(ctx, s, resp.ID, err)
	}
	return resp.ID, nil
}

// undoCreate removes what a failed create of s made — container id, or
// when the answer did not say, the container named s.Name if it is this
// call's (madeFrom) — under a fresh bounded context, and returns err.
// When the removal (or the look under the name) fails, it returns a
// *container.LeftError naming the container — its id, or s.Name, which
// Remove then treats as the undo would — so the caller can retry it: the
// container carries its owner's labels, but the reaper spares a live
// owner's, and nobody else knows it is there.
func (d *Driver) undoCreate(ctx context.Context, s container.Spec, id string, err error) error {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	left, uerr := d.undo(uctx, s, id)
	if uerr == nil {
		return err
	}
	if left == s.Name {
		d.mu.Lock()
		if d.unsure == nil {
			d.unsure = map[string]container.Spec{}
		}
		d.unsure[s.Name] = s
		d.mu.Unlock()
	}
	return &container.LeftError{ID: left, Err: err, Undo: uerr}
}

// undo removes container id, or when id is "", the container named s.Name
// if a create of s made it. On failure it returns what may be left: the
// id, or s.Name when it could not look.
func (d *Driver) undo(ctx context.Context, s container.Spec, id string) (string, error) {
	if id == "" {
		info, err := d.api.ContainerInspect(ctx, s.Name)
		switch {
		case errdefs.IsNotFound(err):
			return "", nil
		case err != nil:
			return s.Name, fmt.Errorf("looking for a container named %s: %w", s.Name, translate(err, ""))
		case !madeFrom(info, s):
			return "", nil
		}
		id = info.ID
	}
	if err := d.api.ContainerRemove(ctx, id, dcontainer.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !errdefs.IsNotFound(err) {
		return id, fmt.Errorf("removing container %s: %w", id, translate(err, ""))
	}
	return "", nil
}

// madeFrom says whether the container info describes is one a create of s
// made: its name (the daemon also finds a container by an id prefix), its
// image and every label of s. The owner label names this process and the
// name is unique to the run, so another's container under the name fails
// the test.
func madeFrom(info dcontainer.InspectResponse, s container.Spec) bool {
	if info.ContainerJSONBase == nil || info.Name != "/"+s.Name || info.Config == nil || info.Config.Image != s.Image {
		return false
	}
	for k, v := range s.Labels {
		if got, ok := info.Config.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// StartAttached implements container.OutputAttacher: it attaches to the
// container's output, then starts it, so no byte is missed.
func (d *Driver) StartAttached(ctx context.Context, id string) (container.Streams, error) {
	st, err := d.attach(ctx, id)
	if err != nil {
		return container.Streams{}, err
	}
	if err := d.Start(ctx, id); err != nil {
		st.Close()
		return container.Streams{}, err
	}
	return st, nil
}

func (d *Driver) attach(ctx context.Context, id string) (container.Streams, error) {
	hj, err := d.api.ContainerAttach(ctx, id, dcontainer.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return container.Streams{}, translate(err, "")
	}
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(outW, errW, hj.Reader)
		outW.CloseWithError(err)
		errW.CloseWithError(err)
	}()
	var once sync.Once
	return container.Streams{
		Stdout: outR,
		Stderr: errR,
		Close: func() error {
			once.Do(func() {
				hj.Close()
				outR.Close()
				errR.Close()
			})
			return nil
		},
	}, nil
}

// Start implements container.Driver.
func (d *Driver) Start(ctx context.Context, id string) error {
	if err := d.api.ContainerStart(ctx, id, dcontainer.StartOptions{}); err != nil {
		return translate(err, "")
	}
	return nil
}

// Wait implements container.Driver. The status carries OOMKilled from an
// inspect after the container stops.
func (d *Driver) Wait(ctx context.Context, id string) (<-chan container.ExitStatus, error) {
	// The wait outlives the call that set it up: it ends when the
	// container stops or is removed. Setting it up (a synchronous request)
	// still honours ctx, so a wedged daemon cannot hold the caller.
	waitCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	resCh, errCh := d.api.ContainerWait(waitCtx, id, dcontainer.WaitConditionNextExit)
	if !stop() {
		cancel()
		return nil, translate(ctx.Err(), "")
	}
	out := make(chan container.ExitStatus, 1)
	go func() {
		defer cancel()
		var st container.ExitStatus
		select {
		case r := <-resCh:
			st.Code = int(r.StatusCode)
			if r.Error != nil && r.Error.Message != "" {
				st.Err = errors.New(r.Error.Message)
			}
		case err := <-errCh:
			st.Code = -1
			st.Err = translate(err, "")
		}
		ictx, cancel := context.WithTimeout(waitCtx, 10*time.Second)
		defer cancel()
		if info, err := d.api.ContainerInspect(ictx, id); err == nil && info.State != nil {
			st.OOMKilled = info.State.OOMKilled
			if st.Err != nil && !info.State.Running {
				st.Code, st.Err = info.State.ExitCode, nil
			}
		}
		out <- st
	}()
	return out, nil
}

// Kill implements container.Driver.
func (d *Driver) Kill(ctx context.Context, id string) error {
	if err := d.api.ContainerKill(ctx, id, "KILL"); err != nil {
		return translate(err, "")
	}
	return nil
}

// Remove implements container.Driver.
func (d *Driver) Remove(ctx context.Context, id string) error {
	d.mu.Lock()
	delete(d.cgroups, id)
	s, unsure := d.unsure[id]
	d.mu.Unlock()
	if unsure {
		// The name a failed create's *LeftError gave: what is under it
		// goes only if that create made it.
		if _, err := d.undo(ctx, s, ""); err != nil {
			return err
		}
		d.mu.Lock()
		delete(d.unsure, id)
		d.mu.Unlock()
		return nil
	}
	if err := d.api.ContainerRemove(ctx, id, dcontainer.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		return translate(err, "")
	}
	return nil
}

// List implements container.Driver.
func (d *Driver) List(ctx context.Context, label, value string) ([]container.ContainerInfo, error) {
	list, err := d.api.ContainerList(ctx, dcontainer.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", label+"="+value))})
	if err != nil {
		return nil, translate(err, "")
	}
	out := make([]container.ContainerInfo, 0, len(list))
	for _, c := range list {
		out = append(out, container.ContainerInfo{
			ID:      c.ID,
			Labels:  c.Labels,
			Created: time.Unix(c.Created, 0),
			Running: c.State == "running",
		})
	}
	return out, nil
}

// translate classifies a Docker client error once, with a fix.
func translate(err error, image string) error {
	if err == nil {
		return nil
	}
	switch {
	case client.IsErrConnectionFailed(err), isDial(err):
		return fmt.Errorf("%w: cannot reach the Docker daemon (%v); start it (e.g. `systemctl start docker` or `dockerd &`) or set DOCKER_HOST", errdefs.ErrUnavailable, err)
	case errdefs.IsNotFound(err) && image != "" && strings.Contains(strings.ToLower(err.Error()), "image"):
		return missingImage(image)
	}
	return err
}

func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
