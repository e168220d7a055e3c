package container

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/dsh-container/dsh-container/backend/container/runner"
)

// Label keys. Every container the runtime creates carries LabelManaged and
// the rest, all under one reserved prefix, so the reaper can find and judge
// it after its owner died. Keys and values are valid Kubernetes labels (a
// DNS-subdomain prefix, a name and a value of at most 63 characters of
// [A-Za-z0-9._-]), so the same labels fit a Pod.
const (
	LabelPrefix  = "dsh-container.io/"
	LabelManaged = LabelPrefix + "managed" // "true"
	// LabelOwner identifies the owner process: "<pid>.<start>.<host>"
	// (see ownerID) unless WithOwner set another valid label value.
	LabelOwner = LabelPrefix + "owner"
	LabelRun   = LabelPrefix + "run" // run id
	// LabelBridge names the sandbox's bridge endpoint for the reaper:
	// for a Unix socket directory, the directory's name.
	LabelBridge = LabelPrefix + "bridge"
	LabelLang   = LabelPrefix + "language"
)

// Fixed in-container locations and identity: the runner contract
// (package runner), which the images are built to.
const (
	// BridgeDir is where a Unix-socket endpoint's directory is mounted.
	BridgeDir = runner.BridgeDir
	// BridgeSocket is the socket's path inside the container.
	BridgeSocket = runner.BridgeSocket
	// SocketName is the socket's file name in the per-run directory.
	SocketName = runner.SocketName
	// RunnerUser is the fixed non-root uid:gid programs run as.
	RunnerUser = runner.User
)

// OOMScoreAdj is the oom_score_adj every container's program starts with.
// Each driver sets it explicitly, and the OCI runtime writes it while it
// still holds CAP_SYS_RESOURCE, which makes it the process's
// oom_score_adj_min as well: the program, with no capabilities, may raise
// its score (offer itself to the host's OOM killer first), never lower it
// below this. Left unset, a runc container inherits the score and the
// minimum of whatever started it (containerd's shim, whose minimum the
// kernel did not raise), and its program could lower its own score. 0 is
// Docker's (dockerd always passes HostConfig.OomScoreAdj, 0 unless set):
// a sandbox weighs on the host's OOM killer by its memory alone, like
// any unadjusted process, the same under both drivers — its memory limit
// makes its own cgroup's OOM killer answer first anyway.
const OOMScoreAdj = 0

// Spec describes one container completely. The runtime fills it from its
// configuration — never from the request — with the hardening preset
// applied. A Driver applies every field; a field it cannot honour makes
// Create fail closed with errdefs.ErrNotImplemented naming the field,
// never silently dropped.
type Spec struct {
	Name string
	// Hostname is fixed so it reveals nothing about the run.
	Hostname   string
	Image      string
	Cmd        []string
	Env        []string // exactly these, never the host's
	User       string
	WorkingDir string
	Labels     map[string]string
	// BindDir is the host directory mounted read-only at BridgeDir (the
	// bridge endpoint's, for Unix-socket endpoints); the only mount
	// besides the /tmp tmpfs. Empty for endpoints that need no mount.
	BindDir string

	// Hardening. The runtime always sets these; they are fields so the
	// driver's translation can be tested field by field.
	NetworkDisabled bool
	ReadOnlyRoot    bool
	CapDropAll      bool
	NoNewPrivileges bool
	Init            bool
	IPCPrivate      bool
	LogDriverNone   bool

	MemoryBytes int64 // memory == memory+swap
	NanoCPUs    int64
	Pids        int64
	TmpfsBytes  int64
	NoFile      int64

	// OCIRuntime names the engine's runtime ("" = its default).
	OCIRuntime string

	// Seccomp is the seccomp profile the container runs under; nil keeps
	// the engine's default profile.
	Seccomp *specs.LinuxSeccomp
}

// ExitStatus is how a container ended.
type ExitStatus struct {
	Code      int
	OOMKilled bool
	// Err is set when the status could not be read.
	Err error
}

// Streams are the container's raw stdout and stderr, read until the
// container exits. Close releases them early.
type Streams struct {
	Stdout io.Reader
	Stderr io.Reader
	Close  func() error
}

// ContainerInfo is what the reaper needs to judge a container.
type ContainerInfo struct {
	ID      string
	Labels  map[string]string
	Created time.Time
	Running bool
}

// Endpoint is one sandbox's end of the bridge, supplied by the driver:
// the host serves the bridge on Listener, and the runner dials
// RunnerAddress from inside the sandbox. A node-local driver (Docker,
// containerd) returns a Unix socket in a private directory the spec
// bind-mounts (NewUnixEndpoint); a driver whose sandboxes run elsewhere (a
// Pod) would return a TCP listener with mutual TLS and no mount.
type Endpoint struct {
	Listener net.Listener
	// RunnerAddress is what the runner dials: a socket path inside the
	// sandbox, or a URL.
	RunnerAddress string
	// BindDir is the host directory to mount read-only at BridgeDir, or
	// "" when the endpoint needs no mount.
	BindDir string
	// Label is LabelBridge's value: how the reaper finds the endpoint's
	// leftovers after a crash.
	Label string
	// Close stops the listener and removes what the endpoint created. It
	// is idempotent.
	Close func() error
}

// EndpointRequest asks a driver for one sandbox's endpoint.
type EndpointRequest struct {
	RunID string
	// SocketDir is where node-local endpoints put their per-run socket
	// directories (WithSocketDir); other endpoints ignore it.
	SocketDir string
}

// Capabilities say what a driver is and can do, for errors, doctor and
// benchmarks. Abilities beyond the verbs are the optional interfaces below,
// found by type assertion.
type Capabilities struct {
	// Name is the driver's name ("docker", "containerd").
	Name string
	// Runtimes are the OCI runtimes Spec.OCIRuntime may name.
	Runtimes []string
	// DefaultRuntime is what "" selects.
	DefaultRuntime string
}

// Driver is the narrow set of verbs the runtime needs from a container
// engine. Every verb honours ctx. NotFound errors from Kill and Remove
// must satisfy errdefs.IsNotFound so teardown can treat them as success.
type Driver interface {
	// Capabilities describes the driver.
	Capabilities() Capabilities
	// Endpoint creates the bridge endpoint of one sandbox, before Create.
	Endpoint(ctx context.Context, req EndpointRequest) (*Endpoint, error)
	// Create creates (but does not start) a container named spec.Name and
	// returns its id. It either creates the container or leaves nothing
	// behind, even when ctx ends midway — unless removing what a failed
	// create made fails too: then its error is a *LeftError naming what
	// Remove removes.
	Create(ctx context.Context, spec Spec) (string, error)
	// Wait returns a channel that yields the container's exit status once
	// it stops. Call it before Start.
	Wait(ctx context.Context, id string) (<-chan ExitStatus, error)
	// Start starts a created container.
	Start(ctx context.Context, id string) error
	// Kill sends SIGKILL to every process of the container.
	Kill(ctx context.Context, id string) error
	// Remove removes the container and everything the driver created for
	// it (its filesystem, its task). It kills what still runs.
	Remove(ctx context.Context, id string) error
	// List returns containers carrying label=value, running or not.
	List(ctx context.Context, label, value string) ([]ContainerInfo, error)
}

// LeftError is Create's error (and a Prober's) when the create failed and
// removing what it made failed too (or looking for what it may have made, after an answer
// that did not say): a container, or what the driver made for it (its
// filesystem, its task), may be left under ID — the container's id, or
// the name its Spec gave it — which Remove accepts. The runtime keeps ID
// among its orphans, retried before each run and by Close, which does not
// return nil while it is there. Err is the create's error (errors.Is and
// the errdefs classes see it), Undo the removal's.
type LeftError struct {
	ID   string
	Err  error
	Undo error
}

func (e *LeftError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("removing what it made failed, %s may be left: %v", e.ID, e.Undo)
	}
	return fmt.Sprintf("%v (and removing what it made failed, %s may be left: %v)", e.Err, e.ID, e.Undo)
}

func (e *LeftError) Unwrap() error { return e.Err }

// CPUMeter is the ability to read the CPU time a container has used since
// it started. The compute budget needs it: a runtime over a driver without
// it refuses to run programs rather than leave the budget unenforced.
type CPUMeter interface {
	CPUUsage(ctx context.Context, id string) (time.Duration, error)
}

// MemoryMeter is the optional ability to read the most memory a container
// has used at once since it started (cgroup v1 memory.max_usage_in_bytes,
// v2 memory.peak). The runtime samples it during a run: it is one of the
// facts an outcome is classified by (see sandbox.exitFailure).
type MemoryMeter interface {
	MemoryPeak(ctx context.Context, id string) (int64, error)
}

// OutputAttacher is the optional ability to capture a container's raw
// stdout and stderr: StartAttached starts a created container with its
// output attached from the first byte. The runtime uses it instead of
// Start when present.
type OutputAttacher interface {
	StartAttached(ctx context.Context, id string) (Streams, error)
}

// ImageChecker is the optional ability to tell whether an image is
// present (for start-up checks and doctor) and to list the engine's image
// references (to find stale ones).
type ImageChecker interface {
	ImageExists(ctx context.Context, ref string) (bool, error)
	ImageRefs(ctx context.Context) ([]string, error)
}

// EngineInfo describes the engine behind a driver, for doctor.
type EngineInfo struct {
	// Engine is the engine and its version ("Docker Engine 20.10.24").
	Engine string
	// API is the API version in use.
	API string
	// CgroupVersion is "1" or "2"; CgroupDriver and Storage name the
	// cgroup driver and the storage driver or snapshotter.
	CgroupVersion, CgroupDriver, Storage string
	// Runtimes maps each registered OCI runtime to its arguments.
	Runtimes       map[string][]string
	DefaultRuntime string
	// Seccomp reports that the engine applies seccomp profiles.
	Seccomp bool
}

// Describer is the optional ability to describe the engine and to check
// that it answers (health checks).
type Describer interface {
	Describe(ctx context.Context) (EngineInfo, error)
	Ping(ctx context.Context) error
}

// Prober is the optional ability to start, wait for and remove a bare
// container (no bridge, network none) running cmd in image under an OCI
// runtime: doctor checks a registered runtime works, and benchmarks
// measure the engine's own start cost.
type Prober interface {
	Probe(ctx context.Context, image string, cmd []string, runtime string) error
}

// Applied is a container's configuration as its engine reports it, read
// back after Create: the conformance suite (package containertest)
// compares it with the hardening preset, so a driver that dropped a
// setting is caught by the engine's own account, not the driver's.
type Applied struct {
	Image, User, Hostname, WorkingDir string
	Cmd, Env                          []string
	Labels                            map[string]string

	ReadOnlyRoot    bool
	NoNewPrivileges bool
	// Capabilities is the bounding set.
	Capabilities []string
	// NetworkNone reports a network namespace of its own with no
	// interface but loopback.
	NetworkNone bool
	IPCPrivate  bool
	Init        bool
	// Seccomp is the profile applied; nil for the engine's default or
	// none (SeccompDefault tells which).
	Seccomp        *specs.LinuxSeccomp
	SeccompDefault bool

	MemoryBytes, MemorySwapBytes int64
	NanoCPUs                     int64
	Pids                         int64
	NoFile                       int64
	// Tmpfs maps each tmpfs mount point to its options.
	Tmpfs map[string][]string
	// Mounts are the bind mounts.
	Mounts []AppliedMount
	// OCIRuntime is the runtime the container runs under.
	OCIRuntime string
}

// AppliedMount is one bind mount of an Applied configuration.
type AppliedMount struct {
	Source, Destination string
	ReadOnly            bool
}

// Inspector is the optional ability to report a container's configuration
// as the engine holds it.
type Inspector interface {
	Inspect(ctx context.Context, id string) (Applied, error)
}
