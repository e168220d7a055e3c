package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	containerdclient "github.com/containerd/containerd"
	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/containerd"
	"github.com/dsh-container/dsh-container/backend/container/containertest"
	dimages "github.com/dsh-container/dsh-container/images"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// The containerd driver runs the same conformance suites as Docker's
// (package containertest), against the containerd this host has: the
// standalone one at containerd.DefaultAddress, else the one the Docker
// daemon manages. Its runner images must be in the namespace
// (`dsh-container images build --driver containerd` imports Docker's);
// without containerd or the images the tests skip naming the fix, and fail
// under DSH_TEST_DAEMON=require.
//
//	go test -count=1 -run 'TestContainerd' -v ./e2e/

var (
	ctrdOnce sync.Once
	ctrd     *containerd.Driver
	ctrdErr  error
)

// containerdDriver connects once; the TestMain of this package closes
// nothing of it (the process ends), but every test's resources are
// checked and removed by the suite.
func containerdDriver(t testing.TB) *containerd.Driver {
	t.Helper()
	testenv.UsesDaemon(t)
	ctrdOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ctrd, ctrdErr = containerd.New(ctx, containerd.Options{})
		if ctrdErr != nil {
			return
		}
		var missing []error
		for _, im := range dimages.Runners {
			if ok, err := ctrd.ImageExists(ctx, im.DefaultTag()); err != nil {
				missing = append(missing, err)
			} else if !ok {
				missing = append(missing, containerd.ErrImageMissing(im.DefaultTag(), ctrd.Namespace()))
			}
		}
		ctrdErr = errors.Join(missing...)
	})
	if ctrdErr != nil {
		testenv.Missing(t, "containerd: %v", ctrdErr)
	}
	return ctrd
}

// containerdConfig is the suite's configuration for the containerd
// driver: the same images by the same tags, the host's own address as the
// one a networked container would reach.
func containerdConfig(t *testing.T) containertest.Config {
	cfg := suiteConfig(containerdDriver(t))
	// The gRPC client's connection goroutines are its own, not leaks.
	cfg.IgnoreGoroutines = []string{"google.golang.org/grpc", "net/http.(*http2Client)"}
	return cfg
}

// TestContainerdConformance: the run lifecycle, failure kinds and
// cancellation, under containerd.
func TestContainerdConformance(t *testing.T) {
	containertest.RunConformance(t, containerdConfig(t))
}

// TestContainerdHardening: the preset, field by field, from containerd's
// stored OCI spec and from inside the live task.
func TestContainerdHardening(t *testing.T) { containertest.RunHardening(t, containerdConfig(t)) }

// TestContainerdBudgets: wall, compute and memory budgets fire on time.
func TestContainerdBudgets(t *testing.T) { containertest.RunBudgets(t, containerdConfig(t)) }

// TestContainerdHostile: the hostile programs, with OUTCOME lines.
func TestContainerdHostile(t *testing.T) { containertest.RunHostile(t, containerdConfig(t)) }

// ctrdLiar is the containerd driver dropping one setting of every Spec.
type ctrdLiar struct {
	*containerd.Driver
	lie func(*container.Spec)
}

func (d ctrdLiar) Create(ctx context.Context, s container.Spec) (string, error) {
	d.lie(&s)
	return d.Driver.Create(ctx, s)
}

// refusedLies are the lies the containerd driver cannot carry out at all:
// it has no capability set to grant and no network to attach, so it fails
// closed at Create (errdefs.NotImplemented naming the field) and no
// container exists to inspect.
var refusedLies = map[string]string{"keeps capabilities": "CapDropAll=false", "a network": "NetworkDisabled=false"}

// TestContainerdLyingDriver: the suite catches a containerd driver that
// drops a hardening setting, from containerd's own stored spec; the two
// settings the driver refuses to drop fail closed, naming the field, and
// leave nothing.
func TestContainerdLyingDriver(t *testing.T) {
	cfg := containerdConfig(t)
	d := containerdDriver(t)
	var inspected []containertest.Lie
	for _, l := range containertest.Lies() {
		if _, ok := refusedLies[l.Name]; !ok {
			inspected = append(inspected, l)
		}
	}
	if len(inspected) != len(containertest.Lies())-len(refusedLies) {
		t.Fatalf("containertest.Lies() no longer has every refused lie %v", refusedLies)
	}
	containertest.RunLies(t, cfg, func(lie func(*container.Spec)) container.Driver { return ctrdLiar{d, lie} }, inspected)
	for _, l := range containertest.Lies() {
		field, ok := refusedLies[l.Name]
		if !ok {
			continue
		}
		t.Run(l.Name, func(t *testing.T) {
			owner := fmt.Sprintf("e2e-refused-%d-%d", os.Getpid(), time.Now().UnixNano())
			rt, err := container.New(ctrdLiar{d, l.Apply}, container.WithLanguage(backend.TypeScript), container.WithImage(cfg.Images[backend.TypeScript]),
				container.WithSocketDir(t.TempDir()), container.WithOwner(owner), container.WithLogger(testLogger(t)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = rt.Run(context.Background(), backend.RunRequest{Program: "return 1"})
			rt.Close(context.Background())
			if !errdefs.IsNotImplemented(err) || !strings.Contains(err.Error(), field) {
				t.Fatalf("got %v, want NotImplemented naming %s", err, field)
			}
			t.Logf("LIE containerd typescript %q refused: %v", l.Name, err)
			if left, err := d.List(context.Background(), container.LabelOwner, owner); err != nil || len(left) != 0 {
				t.Errorf("left: %v %v", left, err)
			}
			if tasks, snaps, err := d.Leftovers(context.Background(), container.LabelOwner, owner); err != nil || tasks+snaps != 0 {
				t.Errorf("left %d tasks, %d snapshots: %v", tasks, snaps, err)
			}
		})
	}
}

// cliRun runs the CLI binary and returns its exit status and output.
func cliRun(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("%v: %v\n%s", args, err, out)
	return 0, ""
}

// scratchNamespace is a containerd namespace of this test alone; its
// images, content and the namespace go when the test ends.
func scratchNamespace(t *testing.T, d *containerd.Driver) string {
	t.Helper()
	ns := fmt.Sprintf("dsh-e2e-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	t.Cleanup(func() {
		cl, err := containerdclient.New(d.Address(), containerdclient.WithDefaultNamespace(ns))
		if err != nil {
			t.Errorf("cleaning namespace %s: %v", ns, err)
			return
		}
		defer cl.Close()
		ctx := namespaces.WithNamespace(context.Background(), ns)
		is := cl.ImageService()
		list, _ := is.List(ctx)
		for _, im := range list {
			if err := is.Delete(ctx, im.Name, images.SynchronousDelete()); err != nil {
				t.Errorf("removing %s from %s: %v", im.Name, ns, err)
			}
		}
		// The garbage collector removes the unreferenced content and
		// snapshots; the namespace goes once they have.
		var err2 error
		for i := 0; i < 50; i++ {
			if err2 = cl.NamespaceService().Delete(ctx, ns); err2 == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("namespace %s not removed: %v", ns, err2)
	})
	return ns
}

// Bad input against the real containerd: each error exits 2 and names
// what is wrong and the fix.
func TestContainerdBadInput(t *testing.T) {
	d := containerdDriver(t)
	bin := buildCLI(t)
	dir := t.TempDir()
	prog := filepath.Join(dir, "p.ts")
	if err := os.WriteFile(prog, []byte("return 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(dir, "nobody.sock")
	empty := scratchNamespace(t, d)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"unreachable address", []string{"run", "--driver", "containerd", "--containerd-address", dead, prog},
			[]string{"cannot reach containerd at " + dead, "--containerd-address", containerd.DockerManagedAddress}},
		{"the address alone chooses containerd", []string{"run", "--containerd-address", dead, prog},
			[]string{"cannot reach containerd at " + dead}},
		{"image missing from the namespace", []string{"run", "--driver", "containerd", "--containerd-namespace", empty, prog},
			[]string{"missing from containerd namespace " + empty, "images build --driver containerd"}},
		{"runtime not installed", []string{"run", "--driver", "containerd", "--runtime", "nosuch", prog},
			[]string{`OCI runtime "nosuch" is not installed`, "have: "}},
		{"bad namespace", []string{"run", "--driver", "containerd", "--containerd-namespace", "Not/Valid", prog},
			[]string{`containerd namespace "Not/Valid"`}},
		{"unknown driver", []string{"run", "--driver", "podman", prog}, []string{`--driver "podman": use docker or containerd`}},
		{"two drivers for run", []string{"run", "--driver", "docker,containerd", prog}, []string{"name one driver"}},
		{"containerd flags with docker", []string{"run", "--driver", "docker", "--containerd-namespace", "x", prog},
			[]string{"apply to --driver containerd"}},
		{"doctor, unreachable", []string{"doctor", "--driver", "containerd", "--containerd-address", dead},
			[]string{"FAIL", dead, "fix: start containerd"}},
		{"doctor, empty namespace", []string{"doctor", "--driver", "containerd", "--containerd-namespace", empty},
			[]string{"is missing in containerd namespace " + empty, "fix: run `dsh-container images build --driver containerd`"}},
		{"images build --from docker with the Docker flag", []string{"images", "build", "--driver", "docker", "--from", "debian"},
			[]string{"apply to --driver containerd"}},
		{"images build --base-rootfs missing", []string{"images", "build", "--driver", "containerd", "--containerd-namespace", empty, "--from", "debian", "--base-rootfs", filepath.Join(dir, "none.tar")},
			[]string{"--base-rootfs", "no such file"}},
		{"bench, unknown driver in the list", []string{"bench", "--driver", "docker,cri-o"}, []string{`--driver "cri-o"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := cliRun(t, bin, c.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2\n%s", code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// images build --driver containerd, both ways, each into a namespace of
// its own: imported from the Docker daemon, and built offline as OCI
// images on a root filesystem (here exported from the Docker base image,
// standing in for mmdebstrap's), under the same content-hash tags; a
// program runs in each language from the result, and Docker's images are
// untouched.
func TestContainerdImagesBuild(t *testing.T) {
	d := containerdDriver(t)
	bin := buildCLI(t)
	dir := t.TempDir()
	progs := map[backend.Language]string{
		backend.TypeScript: "return [1, 2].map((x: number) => x * 21).reduce((a, b) => a + b)",
		backend.Python:     "return sum(x * 21 for x in [1, 2])",
	}
	files := map[backend.Language]string{}
	for l, p := range progs {
		files[l] = filepath.Join(dir, "p."+map[backend.Language]string{backend.TypeScript: "ts", backend.Python: "py"}[l])
		if err := os.WriteFile(files[l], []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dockerBefore := map[string]bool{}
	for _, im := range dimages.Runners {
		ok, err := drv.ImageExists(context.Background(), im.DefaultTag())
		if err != nil || !ok {
			t.Fatalf("Docker lacks %s: %v", im.DefaultTag(), err)
		}
		dockerBefore[im.DefaultTag()] = ok
	}

	check := func(t *testing.T, ns string) {
		t.Helper()
		for _, im := range dimages.Runners {
			code, out := cliRun(t, bin, "run", "--driver", "containerd", "--containerd-namespace", ns, files[im.Language])
			if code != 0 || strings.TrimSpace(out) != "63" {
				t.Errorf("%s from namespace %s: exit %d: %s", im.Language, ns, code, out)
			}
		}
		code, out := cliRun(t, bin, "doctor", "--driver", "containerd", "--containerd-namespace", ns)
		for _, im := range dimages.Runners {
			if !strings.Contains(out, im.DefaultTag()+" present and current") {
				t.Errorf("doctor (exit %d) does not find %s in %s:\n%s", code, im.DefaultTag(), ns, out)
			}
		}
	}

	t.Run("from docker", func(t *testing.T) {
		ns := scratchNamespace(t, d)
		code, out := cliRun(t, bin, "images", "build", "--driver", "containerd", "--containerd-namespace", ns, "--from", "docker")
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		for _, im := range dimages.Runners {
			if !strings.Contains(out, "importing "+im.DefaultTag()+" from the Docker daemon") {
				t.Errorf("no import of %s:\n%s", im.DefaultTag(), out)
			}
		}
		check(t, ns)
		// A second build finds them current and imports nothing.
		if code, out := cliRun(t, bin, "images", "build", "--driver", "containerd", "--containerd-namespace", ns); code != 0 || strings.Contains(out, "importing") {
			t.Errorf("second build: exit %d:\n%s", code, out)
		}
	})

	t.Run("offline OCI", func(t *testing.T) {
		ns := scratchNamespace(t, d)
		rootfs := filepath.Join(dir, "base.tar")
		name := fmt.Sprintf("dsh-e2e-rootfs-%d", os.Getpid())
		if out, err := exec.Command("docker", "create", "--name", name, "--label", container.LabelOwner+"="+owner, dimages.DefaultBase.Tag(), "true").CombinedOutput(); err != nil {
			t.Fatalf("docker create: %v: %s", err, out)
		}
		defer exec.Command("docker", "rm", "-f", name).Run()
		if out, err := exec.Command("docker", "export", "-o", rootfs, name).CombinedOutput(); err != nil {
			t.Fatalf("docker export: %v: %s", err, out)
		}
		code, out := cliRun(t, bin, "images", "build", "--driver", "containerd", "--containerd-namespace", ns, "--from", "debian", "--base-rootfs", rootfs)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		if strings.Contains(out, "importing") || strings.Contains(out, "mmdebstrap") {
			t.Errorf("the offline build used Docker's images or mmdebstrap:\n%s", out)
		}
		check(t, ns)
	})

	for tag := range dockerBefore {
		if ok, err := drv.ImageExists(context.Background(), tag); err != nil || !ok {
			t.Errorf("Docker lost %s: %v", tag, err)
		}
	}
}

// gc --driver containerd removes a dead owner's container, task and
// snapshot, and says so.
func TestContainerdGC(t *testing.T) {
	d := containerdDriver(t)
	bin := buildCLI(t)
	child := exec.Command("sleep", "300")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	deadOwner := container.OwnerOf(child.Process.Pid)
	rt, err := container.New(d, container.WithLanguage(backend.Python), container.WithImage(suiteConfig(d).Images[backend.Python]),
		container.WithSocketDir(t.TempDir()), container.WithOwner(deadOwner), container.WithPool(1), container.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for rt.PoolIdle() < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ctx := context.Background()
	list, err := d.List(ctx, container.LabelOwner, deadOwner)
	if err != nil || len(list) != 1 {
		t.Fatalf("the pooled container: %v %v", list, err)
	}
	child.Process.Kill()
	child.Wait()
	code, out := cliRun(t, bin, "gc", "--driver", "containerd")
	if code != 0 || !strings.Contains(out, "removed containerd container "+list[0].ID[:12]) || !strings.Contains(out, "gc (containerd):") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if after, err := d.List(ctx, container.LabelOwner, deadOwner); err != nil || len(after) != 0 {
		t.Errorf("left: %v %v", after, err)
	}
	if tasks, snaps, err := d.Leftovers(ctx, container.LabelOwner, deadOwner); err != nil || tasks != 0 || snaps != 0 {
		t.Errorf("left: %d tasks, %d snapshots, %v", tasks, snaps, err)
	}
	if err := rt.Close(ctx); err != nil {
		t.Logf("close after gc: %v", err)
	}
}
