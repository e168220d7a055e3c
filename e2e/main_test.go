// Package e2e tests dsh-container against a real Docker daemon and the
// real runner images. Nothing here is faked. Without the daemon or an image
// the suite runs only TestEnvironment, which skips naming the fix, or fails
// under DSH_TEST_DAEMON=require (CI and `make test` set it; see
// internal/testenv).
package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/docker"
	"github.com/dsh-container/dsh-container/images"
	"github.com/dsh-container/dsh-container/internal/testenv"
	"github.com/dsh-container/dsh-container/tsprep"
)

var (
	drv *docker.Driver
	cli *client.Client
	// owner labels this test process's containers.
	owner string
	// unavailable is what the suite needs and the machine lacks, with the
	// fix; nil when everything is there.
	unavailable error
)

func TestMain(m *testing.M) {
	tsprep.ServeWorkerIfRequested()
	drv, unavailable = connect()
	if unavailable != nil {
		if err := testenv.RunOnly("TestEnvironment"); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			os.Exit(2)
		}
		os.Exit(m.Run())
	}
	cli = drv.Client()
	owner = fmt.Sprintf("e2e-%d", os.Getpid())
	code := m.Run()
	drv.Close()
	os.Exit(code)
}

// connect reaches the daemon and checks every runner image is there.
func connect() (*docker.Driver, error) {
	mode, err := testenv.CurrentMode()
	if err != nil {
		return nil, err
	}
	if mode == testenv.Off {
		return nil, fmt.Errorf("%s=%s: the e2e suite needs the Docker daemon", testenv.Var, testenv.Off)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := docker.New(ctx)
	if err != nil {
		return nil, err
	}
	var missing []error
	for _, im := range images.Runners {
		ok, err := images.Exists(ctx, d.Client(), im.DefaultTag())
		switch {
		case err != nil:
			missing = append(missing, fmt.Errorf("runner image %s: %w", im.DefaultTag(), err))
		case !ok:
			missing = append(missing, images.ErrMissing(im.DefaultTag()))
		}
	}
	if len(missing) > 0 {
		d.Close()
		return nil, errors.Join(missing...)
	}
	return d, nil
}

// TestEnvironment says whether the suite has what it needs. When it does
// not, TestMain runs only this test, which reports the problem: a skip, or
// under DSH_TEST_DAEMON=require a failure.
func TestEnvironment(t *testing.T) {
	if unavailable != nil {
		testenv.Missing(t, "e2e: %v", unavailable)
	}
	v, err := cli.ServerVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Docker %s (API %s), runner images present", v.Version, v.APIVersion)
}

// langs are the languages every conformance scenario runs in.
var langs = []backend.Language{backend.TypeScript, backend.Python}

// env is one test's runtime and the resources to check for leaks.
type env struct {
	rt      *container.Runtime
	sockDir string
	owner   string
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// newEnv builds a runtime for lang with a private socket directory and a
// unique owner label, and registers a leak check: after the test, no
// container with that owner and no socket directory may remain.
func newEnv(t testing.TB, lang backend.Language, mod func(*container.Limits), opts ...container.Option) *env {
	t.Helper()
	dir, err := os.MkdirTemp("", "dshe2e")
	if err != nil {
		t.Fatal(err)
	}
	im, _ := images.RunnerFor(lang)
	l := container.DefaultLimits()
	l.WallTime = 20 * time.Second
	if mod != nil {
		mod(&l)
	}
	e := &env{sockDir: dir, owner: fmt.Sprintf("%s-%s-%d", owner, lang, time.Now().UnixNano())}
	all := append([]container.Option{
		container.WithLanguage(lang),
		container.WithImage(im.DefaultTag()),
		container.WithLimits(l),
		container.WithSocketDir(dir),
		container.WithOwner(e.owner),
		container.WithLogger(testLogger(t)),
	}, opts...)
	e.rt, err = container.New(drv, all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.rt.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		e.checkNoLeaks(t)
		os.RemoveAll(dir)
	})
	return e
}

// containers lists this env's containers, running or not.
func (e *env) containers(t testing.TB) []dcontainer.Summary {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), dcontainer.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", container.LabelOwner+"="+e.owner))})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func (e *env) checkNoLeaks(t testing.TB) {
	t.Helper()
	if list := e.containers(t); len(list) != 0 {
		t.Errorf("leaked %d container(s): %v", len(list), list[0].Names)
		for _, c := range list {
			cli.ContainerRemove(context.Background(), c.ID, dcontainer.RemoveOptions{Force: true})
		}
	}
	entries, _ := os.ReadDir(e.sockDir)
	if len(entries) != 0 {
		t.Errorf("leaked socket directories: %v", entries)
	}
}

func (e *env) run(t testing.TB, program string, bindings ...backend.BindingNamespace) backend.RunResult {
	t.Helper()
	res, err := e.rt.Run(context.Background(), backend.RunRequest{Program: program, Bindings: bindings})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}
