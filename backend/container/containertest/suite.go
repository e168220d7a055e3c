package containertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
)

// Config is what the suite runs against.
type Config struct {
	// Driver is the driver under test. The runtime needs it to implement
	// container.CPUMeter; RunHardening and CheckPreset need
	// container.Inspector and fail without it.
	Driver container.Driver
	// Images maps each language to its runner image as the driver's
	// engine names it. Both languages are required: every case runs in
	// both.
	Images map[backend.Language]string
	// OCIRuntime selects the engine's OCI runtime ("" = the driver's
	// default). The preset check expects the container to run under it.
	// Under GVisor ("runsc") the cases that differ assert gVisor's
	// behaviour instead; runsc must run with --oci-seccomp so the seccomp
	// profile applies inside the sandbox.
	OCIRuntime string
	// ReadOnlyProcUnderGVisor says the driver mounts /proc read-only
	// under gVisor, where the Sentry would otherwise let a program lower
	// its oom_score_adj (the containerd driver does; Docker's API sets no
	// option of /proc). The kernel-surface case then wants EROFS for
	// every write to oom_score_adj; without it, the Sentry's own score
	// lowered.
	ReadOnlyProcUnderGVisor bool
	// Options are added after the suite's own to every runtime it builds.
	// They must not weaken the hardening preset: RunHardening would
	// (rightly) fail.
	Options []container.Option
	// HostAddress is an address of the host that a container with a
	// network would reach (Docker's bridge gateway, a CNI bridge's); the
	// hostile network case asserts it is unreachable. Empty: the host's
	// first non-loopback IPv4 address.
	HostAddress string
	// InspectExtra, when set, checks a live container further, on the
	// engine's own terms, for what container.Applied does not carry (for
	// Docker: the log driver, no "unconfined" security option). It runs
	// beside the preset check, while the program runs.
	InspectExtra func(ctx context.Context, id string) error
	// CloseIdle, when set, drops the process's idle connections to the
	// engine before RunHostile counts file descriptors: pooled
	// connections are not leaks.
	CloseIdle func()
	// IgnoreGoroutines names the top functions of goroutines the driver's
	// client starts and stops on its own (its connection pool); RunHostile's
	// goroutine leak check ignores them.
	IgnoreGoroutines []string
	// Only, when not empty, makes RunConformance run only the cases so
	// named; a name the suite does not have fails it.
	Only []string
}

// Languages are the languages every case runs in.
var Languages = []backend.Language{backend.TypeScript, backend.Python}

// Run runs every suite against cfg's driver: RunConformance,
// RunHardening, RunBudgets and RunHostile, each as a subtest of its name.
func Run(t *testing.T, cfg Config) {
	t.Run("Conformance", func(t *testing.T) { RunConformance(t, cfg) })
	t.Run("Hardening", func(t *testing.T) { RunHardening(t, cfg) })
	t.Run("Budgets", func(t *testing.T) { RunBudgets(t, cfg) })
	t.Run("Hostile", func(t *testing.T) { RunHostile(t, cfg) })
}

// validate fails t when cfg cannot run the suite.
func (cfg Config) validate(t testing.TB) {
	t.Helper()
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
}

func (cfg Config) check() error {
	if cfg.Driver == nil {
		return errors.New("containertest: Config.Driver is nil")
	}
	var errs []error
	for _, lang := range Languages {
		if cfg.Images[lang] == "" {
			errs = append(errs, fmt.Errorf("containertest: Config.Images has no %s runner image: every case runs in both languages", lang))
		}
	}
	return errors.Join(errs...)
}

// driverName is the driver's name for log lines.
func (cfg Config) driverName() string {
	if n := cfg.Driver.Capabilities().Name; n != "" {
		return n
	}
	return fmt.Sprintf("%T", cfg.Driver)
}

// ociRuntime is the OCI runtime containers run under: the configured one
// or the driver's default ("" when the driver does not say).
func (cfg Config) ociRuntime() string {
	if cfg.OCIRuntime != "" {
		return cfg.OCIRuntime
	}
	return cfg.Driver.Capabilities().DefaultRuntime
}

// GVisor is the OCI runtime name of gVisor, the one runtime whose kernel
// is not the host's: where it differs, a case asserts what gVisor
// provides instead (see the README's "gVisor" paragraph).
const GVisor = "runsc"

// gVisor reports that the containers run under gVisor.
func (cfg Config) gVisor() bool { return cfg.ociRuntime() == GVisor }

// GVisorPids is the pids limit a case that lowers it (to 64, to show it
// holds) gets under gVisor instead. On the ptrace platform of Debian's
// runsc the container's pids cgroup holds the sandbox's own Sentry and
// gofer threads and one host thread per guest thread: measured here
// (runsc 20221219, cgroup v1), a sandbox with pids.max 64 cannot start, and
// one with 128 dies once its program forks about 20 children. A lowered
// limit still differs from the default (128), so a driver writing the
// default instead of the Spec's value is still caught.
const GVisorPids = 256

// pidsFor is the pids limit a case asking for pids gets under cfg.
func (cfg Config) pidsFor(pids int64) int64 {
	if cfg.gVisor() && pids < container.DefaultLimits().Pids {
		return GVisorPids
	}
	return pids
}

// env is one case's runtime and what to check for leaks after it.
type env struct {
	cfg     Config
	lang    backend.Language
	rt      *container.Runtime
	sockDir string
	owner   string
}

// ownerSeq tells apart the owners of one process.
var ownerSeq atomic.Int64

// labelValue is a valid Kubernetes label value.
var labelValue = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)?$`)

func validLabelValue(v string) bool { return len(v) <= 63 && labelValue.MatchString(v) }

// newOwner returns an owner label value no other env, of this process or
// an earlier one with the same pid, has used.
func newOwner(lang backend.Language) string {
	return fmt.Sprintf("ct-%d-%s-%d-%s", os.Getpid(), strconv.FormatInt(time.Now().UnixNano(), 36), ownerSeq.Add(1), lang)
}

// openEnv builds a runtime for lang over cfg's driver with the default
// limits (wall time 20s) changed by mod, a private socket directory and a
// unique owner label. Close it with close.
func openEnv(cfg Config, lang backend.Language, log *slog.Logger, mod func(*container.Limits), opts ...container.Option) (*env, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, lang: lang, owner: newOwner(lang)}
	if !validLabelValue(e.owner) {
		return nil, fmt.Errorf("containertest: owner %q is not a valid label value", e.owner)
	}
	dir, err := os.MkdirTemp("", "dshct")
	if err != nil {
		return nil, err
	}
	e.sockDir = dir
	l := container.DefaultLimits()
	l.WallTime = 20 * time.Second
	if mod != nil {
		mod(&l)
	}
	l.Pids = cfg.pidsFor(l.Pids)
	all := []container.Option{
		container.WithLanguage(lang),
		container.WithImage(cfg.Images[lang]),
		container.WithLimits(l),
		container.WithSocketDir(dir),
		container.WithOwner(e.owner),
		container.WithLogger(log),
	}
	if cfg.OCIRuntime != "" {
		all = append(all, container.WithOCIRuntime(cfg.OCIRuntime))
	}
	all = append(all, cfg.Options...)
	all = append(all, opts...)
	e.rt, err = container.New(cfg.Driver, all...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return e, nil
}

// close closes the runtime and reports what it left behind: containers
// carrying the env's owner label, found through the driver, and anything
// in the socket directory. Leaked containers are removed so one failure
// does not pollute the next case.
func (e *env) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if err := e.rt.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("close: %w", err))
	}
	list, err := e.cfg.Driver.List(ctx, container.LabelOwner, e.owner)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("listing the containers of owner %s: %w", e.owner, err))
	case len(list) != 0:
		ids := make([]string, len(list))
		for i, c := range list {
			ids[i] = c.ID
			if err := e.cfg.Driver.Remove(ctx, c.ID); err != nil {
				errs = append(errs, fmt.Errorf("removing leaked container %s: %w", c.ID, err))
			}
		}
		errs = append(errs, fmt.Errorf("leaked %d container(s) of owner %s: %v", len(list), e.owner, ids))
	}
	entries, err := os.ReadDir(e.sockDir)
	if err != nil {
		errs = append(errs, fmt.Errorf("socket directory: %w", err))
	}
	if len(entries) != 0 {
		names := make([]string, len(entries))
		for i, d := range entries {
			names[i] = d.Name()
		}
		errs = append(errs, fmt.Errorf("leaked in the socket directory %s: %v", e.sockDir, names))
	}
	if err := os.RemoveAll(e.sockDir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// newEnv is openEnv for a test: logs go to t, and the leak check runs
// when t ends.
func newEnv(t testing.TB, cfg Config, lang backend.Language, mod func(*container.Limits), opts ...container.Option) *env {
	t.Helper()
	cfg.validate(t)
	e, err := openEnv(cfg, lang, testLogger(t), mod, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

func (e *env) run(t testing.TB, program string, bindings ...backend.BindingNamespace) backend.RunResult {
	t.Helper()
	res, err := e.rt.Run(context.Background(), backend.RunRequest{Program: program, Bindings: bindings})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))
