package containerd_test

// Tests against the real containerd and the real runner images in the
// driver's namespace. Without them they skip naming the fix, or fail
// under DSH_TEST_DAEMON=require (internal/testenv).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	containerdclient "github.com/containerd/containerd"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/containerd/snapshots"
	"github.com/containerd/errdefs"
	"go.uber.org/goleak"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/containerd"
	"github.com/dsh-container/dsh-container/images"
	"github.com/dsh-container/dsh-container/internal/testenv"
	"github.com/dsh-container/dsh-container/tsprep"
)

var (
	setupOnce sync.Once
	drv       *containerd.Driver
	// raw is an independent client for checking what is left in the
	// namespace.
	raw      *containerdclient.Client
	setupErr error
)

// driver connects once per test binary and checks the runner images are
// in the namespace.
func driver(t *testing.T) *containerd.Driver {
	t.Helper()
	testenv.UsesDaemon(t)
	setupOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		drv, setupErr = containerd.New(ctx, containerd.Options{})
		if setupErr != nil {
			return
		}
		raw, setupErr = containerdclient.New(drv.Address(), containerdclient.WithDefaultNamespace(drv.Namespace()))
		if setupErr != nil {
			return
		}
		var missing []error
		for _, im := range images.Runners {
			if ok, err := drv.ImageExists(ctx, im.DefaultTag()); err != nil || !ok {
				missing = append(missing, containerd.ErrImageMissing(im.DefaultTag(), drv.Namespace()))
			}
		}
		setupErr = errors.Join(missing...)
	})
	if setupErr != nil {
		testenv.Missing(t, "containerd: %v", setupErr)
	}
	return drv
}

func TestMain(m *testing.M) {
	tsprep.ServeWorkerIfRequested()
	code := m.Run()
	if drv != nil {
		drv.Close()
	}
	if raw != nil {
		raw.Close()
	}
	os.Exit(code)
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// env is one test's runtime over the driver, with a private socket
// directory and owner label, and a leak check registered for its end.
type env struct {
	rt      *container.Runtime
	owner   string
	sockDir string
}

func newEnv(t *testing.T, lang backend.Language, mod func(*container.Limits), opts ...container.Option) *env {
	t.Helper()
	d := driver(t)
	im, _ := images.RunnerFor(lang)
	l := container.DefaultLimits()
	l.WallTime = 20 * time.Second
	if mod != nil {
		mod(&l)
	}
	e := &env{owner: fmt.Sprintf("ctrd-test-%d-%d", os.Getpid(), time.Now().UnixNano()), sockDir: t.TempDir()}
	rt, err := container.New(d, append([]container.Option{
		container.WithLanguage(lang), container.WithImage(im.DefaultTag()), container.WithLimits(l),
		container.WithSocketDir(e.sockDir), container.WithOwner(e.owner), container.WithLogger(testLogger(t)),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.rt = rt
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		checkNothingLeft(t, container.LabelOwner, e.owner)
		if entries, _ := os.ReadDir(e.sockDir); len(entries) != 0 {
			t.Errorf("socket directories left: %v", entries)
		}
	})
	return e
}

// checkNothingLeft fails when a container, task or snapshot carrying
// label=value, or a FIFO directory of such a container, is left; it
// removes what it finds.
func checkNothingLeft(t *testing.T, label, value string) {
	t.Helper()
	ctx := namespaces.WithNamespace(context.Background(), drv.Namespace())
	filter := fmt.Sprintf("labels.%q==%q", label, value)
	list, err := raw.Containers(ctx, filter)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		t.Errorf("container left: %s", c.ID())
		if _, err := c.Task(ctx, nil); err == nil {
			t.Errorf("task left: %s", c.ID())
		}
		// The driver's removal: a runsc task left created refuses the
		// client's kill ("cannot signal container … in state created"),
		// and its container would stay after the test.
		if err := drv.Remove(ctx, c.ID()); err != nil {
			t.Errorf("removing %s: %v", c.ID(), err)
		}
	}
	sn := raw.SnapshotService(drv.Snapshotter())
	sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		t.Errorf("snapshot left: %s", info.Name)
		sn.Remove(ctx, info.Name)
		return nil
	}, filter)
	fifos, _ := filepath.Glob(filepath.Join(containerd.DefaultStateDir(), "fifo", "dsh-*"))
	for _, f := range fifos {
		if c, err := raw.LoadContainer(ctx, filepath.Base(f)); err == nil {
			if l, _ := c.Labels(ctx); l[label] != value {
				continue
			}
		}
		if slices.ContainsFunc(list, func(c containerdclient.Container) bool { return c.ID() == filepath.Base(f) }) {
			t.Errorf("FIFO directory left: %s", f)
		}
	}
}

var adder = []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{
	"add": func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
		var a struct{ A, B int }
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, err
		}
		return json.Marshal(a.A + a.B)
	},
}}}

func run(t *testing.T, e *env, program string) backend.RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := e.rt.Run(ctx, backend.RunRequest{Program: program, Bindings: adder})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// A program in each language runs through the runtime over the driver:
// its tool call crosses the bridge, its console and raw output are
// captured, its value returns, and nothing is left.
func TestRunBothLanguages(t *testing.T) {
	driver(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, c := range []struct {
		lang backend.Language
		prog string
	}{
		{backend.TypeScript, `console.log("to the console"); process.stdout.write("raw out\n"); process.stderr.write("raw err\n");
const env = Object.keys(process.env).sort().join(","); const uid = process.getuid();
return {sum: await tools.add({A: 2, B: 3}), env, uid}`},
		{backend.Python, `import os, sys
print("to stdout"); sys.stderr.write("raw err\n"); sys.stderr.flush()
return {"sum": await tools.add({"A": 2, "B": 3}), "env": ",".join(sorted(os.environ)), "uid": os.getuid()}`},
	} {
		t.Run(string(c.lang), func(t *testing.T) {
			e := newEnv(t, c.lang, nil)
			res := run(t, e, c.prog)
			if res.Error != nil {
				t.Fatalf("failure: %+v (logs %+v)", res.Error, res.Logs)
			}
			var v struct {
				Sum int
				Env string
				UID int
			}
			if err := json.Unmarshal(res.Value, &v); err != nil || v.Sum != 5 || v.UID != 65532 || v.Env != "HOME,LANG,PATH" {
				t.Fatalf("value %s (%v)", res.Value, err)
			}
			var sources []string
			for _, l := range res.Logs {
				sources = append(sources, string(l.Source)+":"+strings.TrimSpace(l.Text))
			}
			if !slices.Contains(sources, "stderr:raw err") {
				t.Errorf("raw stderr not captured: %q", sources)
			}
			if c.lang == backend.TypeScript && (!slices.Contains(sources, "stdout:raw out") || !slices.Contains(sources, "console:to the console")) {
				t.Errorf("output: %q", sources)
			}
		})
	}
}

// The preset as containerd holds it: Inspect reads the stored spec.
func TestInspectReadsTheStoredSpec(t *testing.T) {
	d := driver(t)
	ctx := context.Background()
	owner := fmt.Sprintf("ctrd-inspect-%d", os.Getpid())
	ep, err := d.Endpoint(ctx, container.EndpointRequest{SocketDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	im, _ := images.RunnerFor(backend.Python)
	s := container.Spec{
		Name: "dsh-inspect-" + fmt.Sprint(os.Getpid()), Hostname: "sandbox", Image: im.DefaultTag(),
		Cmd: []string{"python3", "-c", "0"}, Env: []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"},
		User: container.RunnerUser, WorkingDir: "/tmp", Labels: map[string]string{container.LabelManaged: "true", container.LabelOwner: owner},
		BindDir: ep.BindDir, NetworkDisabled: true, ReadOnlyRoot: true, CapDropAll: true, NoNewPrivileges: true,
		Init: true, IPCPrivate: true, LogDriverNone: true, MemoryBytes: 128 << 20, NanoCPUs: 5e8, Pids: 64, TmpfsBytes: 16 << 20, NoFile: 128,
	}
	id, err := d.Create(ctx, s)
	t.Cleanup(func() {
		d.Remove(context.Background(), s.Name)
		checkNothingLeft(t, container.LabelOwner, owner)
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.Inspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Image != s.Image || a.User != "65532:65532" || !a.ReadOnlyRoot || !a.NoNewPrivileges || len(a.Capabilities) != 0 || !a.NetworkNone || !a.IPCPrivate || !a.Init ||
		a.MemoryBytes != s.MemoryBytes || a.MemorySwapBytes != s.MemoryBytes || a.NanoCPUs != s.NanoCPUs || a.Pids != 64 || a.NoFile != 128 ||
		!slices.Equal(a.Cmd, s.Cmd) || !slices.Equal(a.Env, s.Env) || a.Labels[container.LabelOwner] != owner || a.OCIRuntime != "runc" || !a.SeccompDefault {
		t.Fatalf("applied: %+v", a)
	}
	if len(a.Mounts) != 1 || a.Mounts[0].Source != ep.BindDir || !a.Mounts[0].ReadOnly || len(a.Tmpfs) != 1 {
		t.Fatalf("mounts %+v tmpfs %v", a.Mounts, a.Tmpfs)
	}
	// A second Create with the same name fails and leaves the first.
	if _, err := d.Create(ctx, s); err == nil {
		t.Fatal("a second container with the same name")
	}
	if _, err := d.Inspect(ctx, id); err != nil {
		t.Fatalf("the first container went with the failed second: %v", err)
	}
}

// A program that exhausts its memory is an oom, decided by the kernel's
// OOM kill as the task's cgroup records it (Python, off any heap cap), or
// by V8's heap cap with the cgroup's peak (TypeScript).
func TestOOM(t *testing.T) {
	for lang, prog := range map[backend.Language]string{
		backend.Python:     "chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))",
		backend.TypeScript: "const a: Buffer[] = []; for (;;) a.push(Buffer.alloc(8 << 20, 1));",
	} {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, func(l *container.Limits) { l.MemoryBytes = 64 << 20; l.TmpfsBytes = 16 << 20 })
			res := run(t, e, prog)
			if res.Error == nil || res.Error.Kind != backend.FailureOOM {
				t.Fatalf("want oom, got %+v", res.Error)
			}
		})
	}
}

// A hot loop dies at its compute budget, metered from the task's cgroup:
// CPU time, not wall time. With half a core, 1 s of CPU takes at least
// 2 s of wall clock, so a budget metered on the wall would end the run at
// half the budget or less. Nothing asserted depends on the machine's
// speed: a starved container reaches its budget later (the wall-clock
// budget is some ten times what the loaded machine took), and the
// overshoot is bounded in CPU time, of which a starved container uses
// less while the meter is late (the old bound, 10 s of wall clock from
// the request, failed at 12.3 s with 1.0036 s of CPU).
func TestComputeBudget(t *testing.T) {
	const budget = time.Second
	e := newEnv(t, backend.Python, func(l *container.Limits) {
		l.ComputeTime = budget
		l.NanoCPUs = 5e8
		l.WallTime = 50 * time.Second // within run's minute: a meter that never fires meets it
	})
	res := run(t, e, "while True:\n    pass")
	t.Logf("CPU %v, wall %v, startup %v", res.Stats.CPU, res.Stats.Wall, res.Stats.Startup)
	if res.Error == nil || res.Error.Kind != backend.FailureTimeout || !strings.Contains(res.Error.Message, "compute budget") {
		t.Fatalf("want a compute timeout, got %+v", res.Error)
	}
	// The meter samples every 20 ms (computePoll): at half a core the
	// program runs 10 ms past the budget per sample the meter is late.
	if res.Stats.CPU < budget || res.Stats.CPU > budget*3/2 {
		t.Fatalf("CPU %v after %v of the program's wall clock: want the budget, %v, and at most half of it again", res.Stats.CPU, res.Stats.Wall, budget)
	}
}

// Cancelling a run kills its task: abort, nothing left.
func TestCancelKills(t *testing.T) {
	e := newEnv(t, backend.TypeScript, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(time.Second); cancel() }()
	res, err := e.rt.Run(ctx, backend.RunRequest{Program: "await new Promise(r => setTimeout(r, 60000))"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Kind != backend.FailureAbort {
		t.Fatalf("want abort, got %+v", res.Error)
	}
}

// Killing a running program's task ends the run as an exit.
func TestKill(t *testing.T) {
	d := driver(t)
	e := newEnv(t, backend.Python, nil)
	started := make(chan struct{})
	bindings := []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{
		"started": func(context.Context, json.RawMessage) (json.RawMessage, error) { close(started); return nil, nil },
	}}}
	done := make(chan backend.RunResult, 1)
	go func() {
		res, err := e.rt.Run(context.Background(), backend.RunRequest{Program: "import time\nawait tools.started(None)\ntime.sleep(60)", Bindings: bindings})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- res
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the program did not start")
	}
	ctx := context.Background()
	list, err := d.List(ctx, container.LabelOwner, e.owner)
	if err != nil || len(list) != 1 || !list[0].Running {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := d.Kill(ctx, list[0].ID); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Error == nil || res.Error.Kind != backend.FailureExit {
		t.Fatalf("want exit, got %+v", res.Error)
	}
	// Killing it again, and removing it twice, is NotFound at worst.
	if err := d.Kill(ctx, list[0].ID); err != nil && !errdefs.IsNotFound(err) {
		t.Fatalf("second kill: %v", err)
	}
}

// The reaper removes a dead owner's container, task, snapshot and socket
// directory, and a labelled snapshot whose container is gone; it leaves a
// live owner's and anything in the namespace that is not labelled ours.
func TestReaperRemovesADeadOwnersLeftovers(t *testing.T) {
	d := driver(t)
	ctx := namespaces.WithNamespace(context.Background(), d.Namespace())
	sockDir := t.TempDir()

	// An owner that was alive and is dead now.
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	dead := container.OwnerOf(sleeper.Process.Pid)
	sleeper.Process.Kill()
	sleeper.Wait()
	live := container.OwnerOf(os.Getpid())
	if dead == "" || live == "" {
		t.Fatal("owner labels")
	}

	im, _ := images.RunnerFor(backend.Python)
	mk := func(name, owner string) (string, *container.Endpoint) {
		ep, err := container.NewUnixEndpoint(sockDir)
		if err != nil {
			t.Fatal(err)
		}
		s := container.Spec{
			Name: name, Hostname: "sandbox", Image: im.DefaultTag(), Cmd: []string{"sleep", "60"},
			Env: []string{"PATH=/usr/bin:/bin"}, User: container.RunnerUser, WorkingDir: "/tmp",
			Labels:  map[string]string{container.LabelManaged: "true", container.LabelOwner: owner, container.LabelBridge: ep.Label},
			BindDir: ep.BindDir, NetworkDisabled: true, ReadOnlyRoot: true, CapDropAll: true, NoNewPrivileges: true,
			Init: true, IPCPrivate: true, LogDriverNone: true, MemoryBytes: 64 << 20, NanoCPUs: 1e8, Pids: 16, TmpfsBytes: 1 << 20, NoFile: 64,
		}
		id, err := d.Create(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.StartAttached(ctx, id); err != nil {
			t.Fatal(err)
		}
		return id, ep
	}
	suffix := fmt.Sprint(os.Getpid())
	deadID, deadEP := mk("dsh-reap-dead-"+suffix, dead)
	deadEP.Listener.Close() // the dead owner's listener died with it; its directory stays
	liveID, liveEP := mk("dsh-reap-live-"+suffix, live)
	t.Cleanup(func() {
		d.Remove(context.Background(), liveID)
		liveEP.Close()
		d.Remove(context.Background(), deadID)
		deadEP.Close()
	})

	// A snapshot left by a create that died between its snapshot and its
	// container record.
	orphan := "dsh-reap-orphan-" + suffix
	sn := raw.SnapshotService(d.Snapshotter())
	if _, err := sn.Prepare(ctx, orphan, "", snapshots.WithLabels(map[string]string{container.LabelManaged: "true", container.LabelOwner: dead})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sn.Remove(context.Background(), orphan) })

	// Another owner's container in the same namespace, without our
	// labels.
	foreign := "foreign-" + suffix
	if _, err := raw.NewContainer(ctx, foreign, containerdclient.WithNewSpec(oci.WithProcessArgs("true")), func(_ context.Context, _ *containerdclient.Client, c *containers.Container) error {
		c.Labels = map[string]string{"owner": "someone-else"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.ContainerService().Delete(context.Background(), foreign) })

	rep, err := container.Reap(ctx, d, container.ReapOptions{SocketDir: sockDir})
	if err != nil {
		t.Fatal(err)
	}
	// Another process's reaper on this host (an e2e test starting serve
	// at the same time) may have taken the dead owner's leftovers first:
	// what counts is that they are gone and the others are not.
	if slices.Contains(rep.Containers, liveID) || slices.Contains(rep.Containers, foreign) {
		t.Fatalf("reaped %v, which holds a live owner's or a foreign container", rep.Containers)
	}
	if _, err := raw.ContainerService().Get(ctx, deadID); !errdefs.IsNotFound(err) {
		t.Fatalf("the dead owner's container %s is still there (%v); reaped %v", deadID, err, rep.Containers)
	}
	if _, err := sn.Stat(ctx, orphan); !errdefs.IsNotFound(err) {
		t.Fatalf("the dead owner's orphan snapshot %s is still there (%v); reaped %v", orphan, err, rep.Containers)
	}
	if !slices.Contains(rep.SocketDirs, deadEP.BindDir) {
		t.Fatalf("socket dirs reaped %v, want %s", rep.SocketDirs, deadEP.BindDir)
	}
	checkNothingLeft(t, container.LabelOwner, dead)
	if _, err := raw.LoadContainer(ctx, liveID); err != nil {
		t.Fatalf("the live owner's container went: %v", err)
	}
	if _, err := raw.LoadContainer(ctx, foreign); err != nil {
		t.Fatalf("the foreign container went: %v", err)
	}
	if _, err := os.Stat(liveEP.BindDir); err != nil {
		t.Fatalf("the live owner's socket directory went: %v", err)
	}
}

// Bad input: an unreachable socket, a missing image, a runtime this host
// lacks.
func TestBadInput(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		addr := filepath.Join(t.TempDir(), "containerd.sock")
		_, err := containerd.New(context.Background(), containerd.Options{Address: addr})
		if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "start it") {
			t.Fatalf("got %v", err)
		}
		// A socket nobody listens on.
		if err := deadSocket(addr); err != nil {
			t.Fatal(err)
		}
		_, err = containerd.New(context.Background(), containerd.Options{Address: addr, DialTimeout: time.Second})
		if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), addr) {
			t.Fatalf("dead socket: got %v", err)
		}
	})
	t.Run("missing image", func(t *testing.T) {
		d := driver(t)
		rt, err := container.New(d, container.WithImage("dsh-container/ts-runner:nosuchtag"), container.WithSocketDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close(context.Background())
		_, err = rt.Run(context.Background(), backend.RunRequest{Program: "return 1"})
		if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "images build --driver containerd") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("runtime not installed", func(t *testing.T) {
		d := driver(t)
		for _, name := range []string{"nosuch", "crun", "runsc"} {
			if slices.Contains(d.Capabilities().Runtimes, name) {
				continue
			}
			rt, err := container.New(d, container.WithImage(images.Runners[0].DefaultTag()), container.WithOCIRuntime(name), container.WithSocketDir(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			_, err = rt.Run(context.Background(), backend.RunRequest{Program: "return 1"})
			rt.Close(context.Background())
			if !errdefs.IsNotImplemented(err) || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s: got %v", name, err)
			}
		}
	})
}

// Each installed OCI runtime runs a program, or says why not.
func TestRuntimes(t *testing.T) {
	d := driver(t)
	for _, name := range d.Capabilities().Runtimes {
		t.Run(name, func(t *testing.T) {
			if err := d.Probe(context.Background(), images.Runners[1].DefaultTag(), []string{"python3", "-c", "0"}, name); err != nil {
				if name == "runc" {
					t.Fatal(err)
				}
				testenv.Unsupported(t, "%s cannot start a container here: %v", name, err)
			}
			e := newEnv(t, backend.Python, nil, container.WithOCIRuntime(name))
			if res := run(t, e, "return await tools.add({'A': 1, 'B': 1})"); res.Error != nil || string(res.Value) != "2" {
				t.Fatalf("%+v %s", res.Error, res.Value)
			}
		})
	}
}

// deadSocket leaves a Unix socket file at path that nobody listens on.
func deadSocket(path string) error {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return syscall.Bind(fd, &syscall.SockaddrUnix{Name: path})
}

// SnapshotterStatus reports the driver's own snapshotter (containerd
// loads overlayfs here, and other snapshotters it could not load must not
// answer for it); a snapshotter containerd does not have is NotFound.
func TestSnapshotterStatus(t *testing.T) {
	d := driver(t)
	st, err := d.SnapshotterStatus(context.Background())
	if err != nil || st != "ok" {
		t.Fatalf("%s: %q %v", d.Snapshotter(), st, err)
	}
	other, err := containerd.New(context.Background(), containerd.Options{Address: d.Address(), Namespace: d.Namespace(), Snapshotter: "nosuch"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if st, err := other.SnapshotterStatus(context.Background()); !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Fatalf("got %q %v", st, err)
	}
}

// Leftovers counts the containers' tasks and snapshots by label: one live
// container counts one task and one snapshot, then none once removed.
func TestLeftovers(t *testing.T) {
	d := driver(t)
	ctx := context.Background()
	owner := fmt.Sprintf("ctrd-left-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { checkNothingLeft(t, container.LabelOwner, owner) })
	tasks, snaps, err := d.Leftovers(ctx, container.LabelOwner, owner)
	if err != nil || tasks != 0 || snaps != 0 {
		t.Fatalf("nothing made yet: %d tasks, %d snapshots, %v", tasks, snaps, err)
	}
	e := newEnv(t, backend.Python, nil, container.WithPool(1))
	deadline := time.Now().Add(30 * time.Second)
	for e.rt.PoolIdle() < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	tasks, snaps, err = d.Leftovers(ctx, container.LabelOwner, e.owner)
	if err != nil || tasks != 1 || snaps != 1 {
		t.Fatalf("a pooled container: %d tasks, %d snapshots, %v", tasks, snaps, err)
	}
	if err := e.rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tasks, snaps, err = d.Leftovers(ctx, container.LabelOwner, e.owner)
	if err != nil || tasks != 0 || snaps != 0 {
		t.Fatalf("after Close: %d tasks, %d snapshots, %v", tasks, snaps, err)
	}
}

// A state directory others can write to is refused: containerd runs the
// runsc wrapper in it as root. One others can only read or enter is
// closed to them: it lists every run's FIFOs.
func TestStateDirMustBePrivate(t *testing.T) {
	d := driver(t)
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := containerd.New(context.Background(), containerd.Options{Address: d.Address(), StateDir: dir})
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("a world-writable state directory: got %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "fifo")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the driver made its FIFO directory in a state directory it refused: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ok, err := containerd.New(context.Background(), containerd.Options{Address: d.Address(), StateDir: dir})
	if err != nil {
		t.Fatalf("a state directory others can read: %v", err)
	}
	ok.Close()
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("a state directory others could read is left open: %v, %v", fi.Mode(), err)
	}
}
