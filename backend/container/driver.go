package container

import (
	"context"
	"io"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Label keys. Every container the runtime creates carries LabelManaged and
// the rest, all under one reserved prefix, so the reaper can find and judge
// it after its owner died.
const (
	LabelPrefix  = "io.dsh-container."
	LabelManaged = LabelPrefix + "managed" // "true"
	LabelOwner   = LabelPrefix + "owner"   // "<hostname>/<pid>" of the host process
	LabelRun     = LabelPrefix + "run"     // run id
	LabelSockDir = LabelPrefix + "sockdir" // host path of the per-run socket directory
	LabelLang    = LabelPrefix + "language"
)

// Fixed in-container locations and identity.
const (
	// BridgeDir is where the per-run socket directory is mounted.
	BridgeDir = "/run/dsh"
	// BridgeSocket is the socket's path inside the container.
	BridgeSocket = BridgeDir + "/bridge.sock"
	// SocketName is the socket's file name in the per-run directory.
	SocketName = "bridge.sock"
	// RunnerUser is the fixed non-root uid:gid programs run as.
	RunnerUser = "65532:65532"
)

// Spec describes one container completely. The runtime fills it from its
// configuration — never from the request — with the hardening preset
// applied; a Driver translates it faithfully and adds nothing.
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
	// BindDir is the host directory mounted read-only at BridgeDir; the
	// only mount besides the /tmp tmpfs.
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

	// OCIRuntime names the daemon runtime ("" = default).
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

// MemoryMeter is the optional ability to read the most memory a container
// has used at once since it started (cgroup v1 memory.max_usage_in_bytes,
// v2 memory.peak). The runtime samples it during a run: it is one of the
// facts an outcome is classified by (see sandbox.exitFailure).
type MemoryMeter interface {
	MemoryPeak(ctx context.Context, id string) (int64, error)
}

// Driver is the narrow set of verbs the runtime needs from a container
// engine. Every verb honours ctx. NotFound errors from Kill and Remove
// must satisfy errdefs.IsNotFound so teardown can treat them as success.
type Driver interface {
	// Create creates (but does not start) a container; it returns its id.
	Create(ctx context.Context, spec Spec) (string, error)
	// Attach connects to the container's stdout/stderr; call before Start.
	Attach(ctx context.Context, id string) (Streams, error)
	// Start starts a created container.
	Start(ctx context.Context, id string) error
	// Wait returns a channel that yields the container's exit status once
	// it stops. Call before Start.
	Wait(ctx context.Context, id string) (<-chan ExitStatus, error)
	// CPUUsage returns the cumulative CPU time the container has used.
	CPUUsage(ctx context.Context, id string) (time.Duration, error)
	// Kill sends SIGKILL.
	Kill(ctx context.Context, id string) error
	// Remove force-removes the container and its anonymous volumes.
	Remove(ctx context.Context, id string) error
	// List returns containers carrying label=value, running or not.
	List(ctx context.Context, label, value string) ([]ContainerInfo, error)
}
