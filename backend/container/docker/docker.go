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
	cgroups map[string]cgroupAccounting // container id → its accounting files

	// imagesChecked holds the image references checkImage passed.
	imagesChecked sync.Map
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
	d := &Driver{api: dockerAPI{cli}, cli: cli, cgroups: map[string]cgroupAccounting{}}
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

// Create implements container.Driver. It runs to completion under a
// bounded, non-cancellable context: the daemon may create the container
// after a client gave up, and then nobody would know its id to remove it.
// When it fails anyway, the container is removed by its name (the daemon
// may have created it before a timeout); NotFound is the usual answer.
func (d *Driver) Create(ctx context.Context, s container.Spec) (string, error) {
	if err := d.checkSpec(ctx, s); err != nil {
		return "", err
	}
	if s.OCIRuntime != "" && d.runtimes != nil && !slices.Contains(d.runtimes, s.OCIRuntime) {
		return "", fmt.Errorf("%w: OCI runtime %q is not registered with the Docker daemon (it has %s); register it in /etc/docker/daemon.json", errdefs.ErrNotImplemented, s.OCIRuntime, strings.Join(d.runtimes, ", "))
	}
	cfg, hc := Translate(s)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	resp, err := d.api.ContainerCreate(cctx, cfg, hc, nil, nil, s.Name)
	if err != nil {
		if s.Name != "" {
			_ = d.api.ContainerRemove(cctx, s.Name, dcontainer.RemoveOptions{Force: true, RemoveVolumes: true})
		}
		return "", translate(err, s.Image)
	}
	if err := ctx.Err(); err != nil {
		_ = d.api.ContainerRemove(cctx, resp.ID, dcontainer.RemoveOptions{Force: true, RemoveVolumes: true})
		return "", err
	}
	return resp.ID, nil
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
	d.mu.Unlock()
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
		return fmt.Errorf("%w: runner image %s is missing; build it with `dsh-container images build` (or `make images`)", errdefs.ErrNotFound, image)
	}
	return err
}

func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
