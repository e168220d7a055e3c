package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
)

// Faults: the host process dying mid-run, the container killed from
// outside, the daemon restarting.

// buildFaultCLI builds bin/dsh-container into a temporary directory.
func buildFaultCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dsh-container")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/dsh-container")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// containersByOwnerPrefix lists managed containers whose owner label starts
// with prefix.
func containersByOwnerPrefix(t *testing.T, prefix string) []dcontainer.Summary {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), dcontainer.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", container.LabelManaged+"=true"))})
	if err != nil {
		t.Fatal(err)
	}
	var out []dcontainer.Summary
	for _, c := range list {
		if strings.HasPrefix(c.Labels[container.LabelOwner], prefix) {
			out = append(out, c)
		}
	}
	return out
}

// A host process SIGKILLed mid-run leaves its container and socket
// directory behind; `dsh-container gc` removes both.
func TestHostKilledThenGC(t *testing.T) {
	bin := buildFaultCLI(t)
	// Unix socket paths are short: a private, short XDG_RUNTIME_DIR.
	xdg, err := os.MkdirTemp("", "dshx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(xdg) })
	sockDir := filepath.Join(xdg, "dsh-container")
	prog := filepath.Join(xdg, "sleep.ts")
	if err := os.WriteFile(prog, []byte(`await new Promise(r => setTimeout(r, 120000))`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "XDG_RUNTIME_DIR="+xdg)

	run := exec.Command(bin, "run", "--wall-timeout", "3m", prog)
	run.Env = env
	var stderr bytes.Buffer
	run.Stderr = &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	prefix := container.OwnerOf(run.Process.Pid)
	t.Cleanup(func() {
		run.Process.Kill()
		for _, c := range containersByOwnerPrefix(t, prefix) {
			cli.ContainerRemove(context.Background(), c.ID, dcontainer.RemoveOptions{Force: true})
		}
	})

	// Wait until the run's container is up.
	var id string
	deadline := time.Now().Add(90 * time.Second)
	for id == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no running container for owner %s*; run's stderr: %s", prefix, stderr.String())
		}
		for _, c := range containersByOwnerPrefix(t, prefix) {
			if c.State == "running" {
				id = c.ID
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := run.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	run.Wait()
	if left := containersByOwnerPrefix(t, prefix); len(left) != 1 {
		t.Fatalf("after SIGKILL: %d containers of the dead owner, want the 1 it leaked", len(left))
	}
	// A socket directory and its owner file.
	dirs, _ := os.ReadDir(sockDir)
	if len(dirs) != 2 || !dirs[0].IsDir() || dirs[1].Name() != dirs[0].Name()+".owner" {
		t.Fatalf("after SIGKILL: socket directories %v, want the 1 it leaked and its owner file", dirs)
	}
	t.Logf("SIGKILLed run left container %.12s and socket dir %s", id, dirs[0].Name())

	gc := exec.Command(bin, "gc", "--socket-dir", sockDir)
	gc.Env = env
	out, err := gc.CombinedOutput()
	if err != nil {
		t.Fatalf("gc: %v\n%s", err, out)
	}
	t.Logf("gc: %s", strings.TrimSpace(string(out)))
	if left := containersByOwnerPrefix(t, prefix); len(left) != 0 {
		t.Fatalf("gc left %d container(s) of the dead owner", len(left))
	}
	if dirs, _ := os.ReadDir(sockDir); len(dirs) != 0 {
		t.Fatalf("gc left socket directories %v", dirs)
	}
	if !strings.Contains(string(out), "removed docker container "+id[:12]) {
		t.Fatalf("gc did not report the container: %s", out)
	}
}

// A container killed from outside mid-run ends the run with `exit`.
func TestContainerKilledFromOutside(t *testing.T) {
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			started := make(chan struct{}, 1)
			b := tools(map[string]backend.BindingFunc{"started": func(context.Context, json.RawMessage) (json.RawMessage, error) {
				started <- struct{}{}
				return json.RawMessage("1"), nil
			}})
			go func() {
				<-started
				time.Sleep(200 * time.Millisecond)
				for _, c := range e.containers(t) {
					if err := cli.ContainerKill(context.Background(), c.ID, "KILL"); err != nil {
						t.Errorf("docker kill: %v", err)
					}
				}
			}()
			prog := map[backend.Language]string{
				backend.TypeScript: `await tools.started({}); await new Promise(() => {})`,
				backend.Python:     "import asyncio\nawait tools.started({})\nawait asyncio.Event().wait()",
			}[lang]
			res := e.run(t, prog, b...)
			wantFailure(t, res, backend.FailureExit, "137")
			t.Logf("OUTCOME %s %s: exit: %s", lang, t.Name(), res.Error.Message)
			wantValue(t, e.run(t, "return 1"), "1")
		})
	}
}

// The daemon restarting mid-run fails the run with a typed outcome (or a
// classified error), and the next run works. Restarting the daemon
// disrupts everyone using it: opt in with DSH_E2E_DAEMON_RESTART=1. CI
// (.ci/run) does, in a step of its own after the main test run, where the
// daemon is its own and nothing else runs.
//
// On the machines this was written on, dockerd runs as a plain process
// (no systemd): the test stops it with SIGTERM and starts the same command
// line again with the same environment, detached, logging to
// /tmp/dockerd-e2e.log.
func TestDaemonRestartMidRun(t *testing.T) {
	if os.Getenv("DSH_E2E_DAEMON_RESTART") != "1" {
		t.Skip("restarting the shared Docker daemon is disruptive; set DSH_E2E_DAEMON_RESTART=1 to run this test (.ci/run does, after the main run)")
	}
	d := dockerdProcess(t)
	e := newEnv(t, backend.TypeScript, nil)
	started := make(chan struct{}, 1)
	b := tools(map[string]backend.BindingFunc{"started": func(context.Context, json.RawMessage) (json.RawMessage, error) {
		started <- struct{}{}
		return json.RawMessage("1"), nil
	}})
	restarted := make(chan error, 1)
	go func() {
		select {
		case <-started:
			restarted <- restartDockerd(d)
		case <-time.After(30 * time.Second): // past the run's 20s wall budget
			restarted <- errors.New("the program never called started; the daemon was not restarted")
		}
	}()
	res, err := e.rt.Run(context.Background(), backend.RunRequest{Program: `await tools.started({}); await new Promise(() => {})`, Bindings: b})
	if rerr := <-restarted; rerr != nil {
		t.Fatalf("restarting dockerd: %v (start it by hand: %s)", rerr, strings.Join(d.args, " "))
	}
	switch {
	case err != nil:
		t.Logf("OUTCOME daemon restart: error %v", err)
	case res.Error == nil:
		t.Fatalf("the run survived a daemon restart with value %s", res.Value)
	default:
		t.Logf("OUTCOME daemon restart: %s: %s", res.Error.Kind, res.Error.Message)
		if res.Error.Kind != backend.FailureExit && res.Error.Kind != backend.FailureTimeout {
			t.Fatalf("daemon restart: %s: %s", res.Error.Kind, res.Error.Message)
		}
	}
	wantValue(t, e.run(t, "return 1"), "1")
}

// dockerd is the running daemon process: how to start it again.
type dockerd struct {
	pid  int
	args []string
	env  []string
	dir  string
}

// dockerdProcess finds the running dockerd. The test was asked to restart
// it: a daemon this machine cannot see (a remote one) fails the test.
func dockerdProcess(t *testing.T) dockerd {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if filepath.Base(args[0]) != "dockerd" {
			continue
		}
		d := dockerd{pid: pid, args: args, dir: "/"}
		// Its own environment and directory: PATH must find containerd and
		// runc as it did.
		if env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ")); err == nil && len(env) > 0 {
			d.env = strings.Split(strings.TrimRight(string(env), "\x00"), "\x00")
		} else {
			t.Fatalf("cannot read dockerd's environment (pid %d): %v", pid, err)
		}
		if dir, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil {
			d.dir = dir
		}
		return d
	}
	t.Fatal("DSH_E2E_DAEMON_RESTART=1 but no dockerd process is visible from here (a remote daemon?): cannot restart it")
	return dockerd{}
}

// restartDockerd stops dockerd with SIGTERM, starts the same command line
// again in its own session and waits for the API to answer.
func restartDockerd(d dockerd) error {
	if err := syscall.Kill(d.pid, syscall.SIGTERM); err != nil {
		return err
	}
	// Gone, or a zombie its parent has yet to reap.
	running := func() bool {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.pid))
		if err != nil {
			return false
		}
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		return len(fields) > 0 && fields[0] != "Z"
	}
	for i := 0; i < 300 && running(); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if running() {
		return fmt.Errorf("dockerd (pid %d) did not exit within 30s of SIGTERM", d.pid)
	}
	logf, err := os.OpenFile("/tmp/dockerd-e2e.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(d.args[0], d.args[1:]...)
	cmd.Env, cmd.Dir = d.env, d.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaped if it ever exits while we run
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if _, err := cli.Ping(ctx); err == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the restarted dockerd exited: %v (see /tmp/dockerd-e2e.log)", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("dockerd did not answer within 60s after restart (see /tmp/dockerd-e2e.log)")
}
