package container

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container/seccomp"
	"github.com/dsh-container/dsh-container/egress"
)

// Limits are a run's budgets and caps. The host enforces every one of
// them; the runner only uses the caps it is told to avoid sending data the
// host would drop.
type Limits struct {
	// ComputeTime is the CPU time the container may use after the program
	// starts, metered from its cgroup. A hot loop dies at it even while a
	// binding call is pending.
	ComputeTime time.Duration
	// WallTime bounds the program's elapsed time, including time spent
	// awaiting bindings.
	WallTime time.Duration
	// StartupTime bounds the time from container creation to the runner's
	// hello; it is not charged to WallTime.
	StartupTime time.Duration
	// MemoryBytes is the container's memory limit; swap is disabled.
	MemoryBytes int64
	// NanoCPUs is the CPU rate limit in billionths of a CPU.
	NanoCPUs int64
	// Pids bounds the number of processes and threads.
	Pids int64
	// TmpfsBytes sizes the writable /tmp; at most MemoryBytes/2.
	TmpfsBytes int64
	// NoFile is the open-files ulimit.
	NoFile int64
	// LogBytes caps captured log output: each entry's text plus
	// LogEntryOverhead bytes per entry (at most MaxLogEntries entries).
	LogBytes int
	// ValueBytes caps the JSON text of the program's value.
	ValueBytes int
	// ProgramBytes caps the program source.
	ProgramBytes int
	// FrameBytes caps one protocol frame from the runner.
	FrameBytes int
	// PendingCalls caps binding calls in flight at once; more are rejected.
	PendingCalls int
}

// v8HeapMiB is the TypeScript runner's V8 old-space limit for a memory
// limit: three quarters of it, leaving the rest to Node itself (code, young
// generation, buffers). With the heap as large as the cgroup, a heap bomb
// fills the cgroup first and the kernel keeps reclaiming Node's own
// file-backed pages instead of killing it: the run thrashes until a time
// budget fires. With headroom V8 fails first, within a second or two, and
// the host reports it as oom (see sandbox.exitFailure).
func v8HeapMiB(memoryBytes int64) int64 { return memoryBytes * 3 / 4 >> 20 }

// DefaultLimits are the documented defaults.
func DefaultLimits() Limits {
	return Limits{
		ComputeTime:  10 * time.Second,
		WallTime:     30 * time.Second,
		StartupTime:  30 * time.Second,
		MemoryBytes:  256 << 20,
		NanoCPUs:     1e9,
		Pids:         128,
		TmpfsBytes:   64 << 20,
		NoFile:       256,
		LogBytes:     1 << 20,
		ValueBytes:   1 << 20,
		ProgramBytes: 256 << 10,
		FrameBytes:   4 << 20,
		PendingCalls: 256,
	}
}

// Validate reports the first limit out of range.
func (l Limits) Validate() error {
	var errs []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	check(l.ComputeTime >= 10*time.Millisecond, "compute time %v: must be at least 10ms", l.ComputeTime)
	check(l.WallTime >= 10*time.Millisecond, "wall time %v: must be at least 10ms", l.WallTime)
	check(l.StartupTime >= time.Second, "startup time %v: must be at least 1s", l.StartupTime)
	check(l.MemoryBytes >= 32<<20, "memory %d bytes: must be at least 32 MiB", l.MemoryBytes)
	check(l.NanoCPUs >= 1e7, "cpus %.3f: must be at least 0.01", float64(l.NanoCPUs)/1e9)
	check(l.Pids >= 8, "pids %d: must be at least 8", l.Pids)
	check(l.TmpfsBytes >= 1<<20 && l.TmpfsBytes <= l.MemoryBytes/2, "tmpfs %d bytes: must be between 1 MiB and half the memory limit (%d)", l.TmpfsBytes, l.MemoryBytes/2)
	check(l.NoFile >= 32, "nofile %d: must be at least 32", l.NoFile)
	check(l.LogBytes >= 0, "log bytes %d: must not be negative", l.LogBytes)
	check(l.ValueBytes >= 0, "value bytes %d: must not be negative", l.ValueBytes)
	check(l.ProgramBytes >= 1, "program bytes %d: must be positive", l.ProgramBytes)
	check(l.FrameBytes >= 64<<10, "frame bytes %d: must be at least 64 KiB", l.FrameBytes)
	check(l.FrameBytes >= l.ProgramBytes+64<<10, "frame bytes %d: must exceed program bytes by 64 KiB", l.FrameBytes)
	check(l.PendingCalls >= 1, "pending calls %d: must be positive", l.PendingCalls)
	if len(errs) > 0 {
		return fmt.Errorf("%w: invalid limits: %s", backend.ErrInvalidRequest, strings.Join(errs, "; "))
	}
	return nil
}

// Option configures a Runtime.
type Option func(*options)

type options struct {
	egress     *egress.Policy // nil: no egress (see WithEgress, RunRequest.Egress)
	language   backend.Language
	image      string
	ociRuntime string
	limits     Limits
	logger     *slog.Logger
	socketDir  string
	owner      string
	observer   Observer // telemetry.go

	// seccomp is the profile set by WithSeccomp; engineSeccomp records
	// WithSeccomp(nil). Neither set means seccomp.Profile().
	seccomp       *specs.LinuxSeccomp
	engineSeccomp bool

	poolSize    int
	poolTTL     time.Duration
	poolFill    int
	maxRuns     int
	queueLength int
}

// WithPool keeps size pre-started sandboxes ready (0, the default,
// disables the pool). Each serves exactly one program; an empty pool falls
// back to a cold start.
func WithPool(size int) Option { return func(o *options) { o.poolSize = size } }

// WithPoolTTL replaces idle pooled sandboxes older than ttl (default 5m).
func WithPoolTTL(ttl time.Duration) Option { return func(o *options) { o.poolTTL = ttl } }

// WithPoolFill bounds how many sandboxes the pool starts at once (default 2).
func WithPoolFill(n int) Option { return func(o *options) { o.poolFill = n } }

// WithAdmission caps concurrent runs at maxRuns, with at most queue runs
// waiting for a slot; beyond that Run fails fast with ErrOverloaded.
// maxRuns 0 (the default) admits everything. A slot is released when Run
// returns; the settled run's container, already cut off from the host, is
// then killed and removed in the background, so briefly more containers
// than maxRuns (plus the warm pool) may exist.
func WithAdmission(maxRuns, queue int) Option {
	return func(o *options) { o.maxRuns, o.queueLength = maxRuns, queue }
}

// WithLanguage selects the language (default typescript).
func WithLanguage(l backend.Language) Option { return func(o *options) { o.language = l } }

// WithImage sets the runner image reference (required).
func WithImage(ref string) Option { return func(o *options) { o.image = ref } }

// WithOCIRuntime selects the daemon's OCI runtime by name ("" = the
// daemon's default, usually runc; "crun"; "runsc" for gVisor).
func WithOCIRuntime(name string) Option { return func(o *options) { o.ociRuntime = name } }

// WithSeccomp sets the seccomp profile every container runs under. The
// default is seccomp.Profile(): the default profile Docker ships, resolved
// for a container without capabilities, minus the system calls the
// runners never need (io_uring, userfaultfd, bpf,
// ptrace, the mount family, memfd_create...; see seccomp.Removed).
// WithSeccomp(nil) keeps the engine's own default profile instead (the
// CLI's `--seccomp default`). The profile is shared by every container
// and must not be changed afterwards.
func WithSeccomp(p *specs.LinuxSeccomp) Option {
	return func(o *options) { o.seccomp, o.engineSeccomp = p, p == nil }
}

// SeccompFor is the profile a container gets under ociRuntime by default:
// seccomp.Profile, adapted by seccomp.ForGVisor under gVisor. Drivers'
// probes use it so that a probe runs as a program would.
func SeccompFor(ociRuntime string) *specs.LinuxSeccomp {
	if seccomp.IsGVisor(ociRuntime) {
		return seccomp.ForGVisor(seccomp.Profile())
	}
	return seccomp.Profile()
}

// seccompProfile is the profile for one container (nil: the engine's).
// Under gVisor it is adapted with seccomp.ForGVisor, which keeps every
// denial but answers clone3 through gVisor's own ENOSYS.
func (o *options) seccompProfile() *specs.LinuxSeccomp {
	var p *specs.LinuxSeccomp
	switch {
	case o.engineSeccomp:
		return nil
	case o.seccomp != nil:
		p = o.seccomp
	default:
		p = seccomp.Profile()
	}
	if seccomp.IsGVisor(o.ociRuntime) {
		return seccomp.ForGVisor(p)
	}
	return p
}

// WithLimits replaces the default limits.
func WithLimits(l Limits) Option { return func(o *options) { o.limits = l } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithSocketDir sets the host directory under which per-run socket
// directories are created (default: $XDG_RUNTIME_DIR/dsh-container or
// <tmp>/dsh-container-<uid>).
func WithSocketDir(dir string) Option { return func(o *options) { o.socketDir = dir } }

// WithOwner sets the owner label value used by the reaper to tell live
// owners apart (default: "<pid>.<start>.<host>", see reaper.go). It must be
// a valid label value; the reaper never judges owners of another form dead.
func WithOwner(owner string) Option { return func(o *options) { o.owner = owner } }

// DefaultSocketDir is where per-run socket directories live by default.
func DefaultSocketDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "dsh-container")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("dsh-container-%d", os.Getuid()))
}
