package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/docker"
	"github.com/dsh-container/dsh-container/images"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, stdin string, mod func(*factory), args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	f := &factory{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, connect: dockerConnect, imageFor: defaultImageFor}
	if mod != nil {
		mod(f)
	}
	code := f.main(args)
	return result{code, out.String(), errb.String()}
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// daemon is this test process's connection to the Docker daemon, made
// once.
var daemon = sync.OnceValues(func() (*docker.Driver, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return docker.New(ctx)
})

// requireDaemon returns the Docker daemon, or skips t naming the fix (a
// failure under DSH_TEST_DAEMON=require; see internal/testenv).
func requireDaemon(t *testing.T) *docker.Driver {
	t.Helper()
	testenv.UsesDaemon(t)
	d, err := daemon()
	if err != nil {
		testenv.Missing(t, "%v", err)
	}
	return d
}

// requireRunners is requireDaemon plus the runner images of langs, and
// checks that t's runs leave no container behind.
func requireRunners(t *testing.T, langs ...backend.Language) {
	t.Helper()
	d := requireDaemon(t)
	for _, l := range langs {
		tag, err := defaultImageFor(l)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := images.Exists(context.Background(), d.Client(), tag)
		if err != nil {
			t.Fatalf("runner image %s: %v", tag, err)
		}
		if !ok {
			testenv.Missing(t, "%v", images.ErrMissing(tag))
		}
	}
	checkOwnContainers(t, d, true)
}

// cliOwner is the owner label the CLI puts on its containers: the
// runtime's default for this process (the tests run the CLI in-process).
var cliOwner = sync.OnceValues(func() (string, error) {
	if owner := container.OwnerOf(os.Getpid()); owner != "" {
		return owner, nil
	}
	return "", fmt.Errorf("cannot read this process's start time")
})

// checkOwnContainers registers the leak check of t: when t ends, no
// container of this process's CLI runs may be left, and t's runs created
// some (wantRuns) or none. Only this process's containers count: other
// processes on the daemon come and go as they like.
func checkOwnContainers(t *testing.T, d *docker.Driver, wantRuns bool) {
	t.Helper()
	owner, err := cliOwner()
	if err != nil {
		t.Fatal(err)
	}
	label := filters.Arg("label", container.LabelOwner+"="+owner)
	since := time.Now()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		left, err := d.Client().ContainerList(ctx, dcontainer.ListOptions{All: true, Filters: filters.NewArgs(label)})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range left {
			t.Errorf("left container %.12s %v (owner %s)", c.ID, c.Names, owner)
			d.Client().ContainerRemove(ctx, c.ID, dcontainer.RemoveOptions{Force: true})
		}
		// The daemon's event log says what this process created meanwhile.
		msgs, errs := d.Client().Events(ctx, events.ListOptions{
			Since:   fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()),
			Until:   fmt.Sprintf("%d.%09d", time.Now().Unix(), time.Now().Nanosecond()),
			Filters: filters.NewArgs(label, filters.Arg("type", string(events.ContainerEventType)), filters.Arg("event", string(events.ActionCreate))),
		})
		created := 0
	read:
		for {
			select {
			case <-msgs:
				created++
			case err := <-errs:
				if !errors.Is(err, io.EOF) {
					t.Fatalf("daemon events: %v", err)
				}
				break read
			}
		}
		switch {
		case wantRuns && created == 0:
			t.Errorf("no container with owner label %q was created: the CLI's owner label is not what cliOwner says, so this leak check sees nothing", owner)
		case !wantRuns && created != 0:
			t.Errorf("created %d container(s), want none", created)
		}
	})
}

// Bad input: one clear line naming the fix, exit status 2, nothing left.
func TestBadInput(t *testing.T) {
	prog := write(t, "p.ts", "return 1")
	badManifest := write(t, "tools.json", `{"tools": [{"name": "x"`)
	reserved := write(t, "tools.json", `{"tools": [{"name": "run_code", "command": ["/bin/true"]}]}`)
	noCommand := write(t, "tools.json", `{"tools": [{"name": "x"}]}`)
	// None of it may create a container. Without a daemon none can be, and
	// the one case that needs the daemon reports it missing.
	if mode, _ := testenv.CurrentMode(); mode != testenv.Off {
		if d, err := daemon(); err == nil {
			checkOwnContainers(t, d, false)
		}
	}
	for _, tc := range []struct {
		name string
		mod  func(*factory)
		args []string
		want string
	}{
		{"unknown language", nil, []string{"run", "--lang", "ruby", prog}, `unknown language "ruby"`},
		{"unknown extension", nil, []string{"run", write(t, "p.rb", "x")}, "pass --lang"},
		{"unreadable program", nil, []string{"run", "/nonexistent/p.ts"}, "cannot read the program"},
		{"malformed manifest", nil, []string{"run", "--tools", badManifest, prog}, "tool manifest"},
		{"reserved tool name", nil, []string{"run", "--tools", reserved, prog}, "reserved"},
		{"manifest without command", nil, []string{"run", "--tools", noCommand, prog}, "command is required"},
		{"bad memory", nil, []string{"run", "--memory", "lots", prog}, "--memory"},
		{"memory too small", nil, []string{"run", "--memory", "1m", prog}, "memory"},
		{"unknown flag", nil, []string{"run", "--frobnicate", prog}, "unknown flag"},
		{"unknown seccomp profile", nil, []string{"run", "--seccomp", "unconfined", prog}, `--seccomp "unconfined": use dsh`},
		{"serve: unknown seccomp profile", nil, []string{"serve", "--seccomp", "none"}, `--seccomp "none": use dsh`},
		{"no program", nil, []string{"run"}, "accepts 1 arg"},
		{"unknown command", nil, []string{"frob"}, "unknown command"},
		{"unreachable daemon", func(f *factory) {
			f.connect = func(ctx context.Context) (engine, error) {
				old, had := os.LookupEnv("DOCKER_HOST")
				os.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
				defer func() {
					if had {
						os.Setenv("DOCKER_HOST", old)
					} else {
						os.Unsetenv("DOCKER_HOST")
					}
				}()
				return dockerConnect(ctx)
			}
		}, []string{"run", prog}, "cannot reach the Docker daemon"},
		{"sdk without tools", nil, []string{"sdk"}, "--tools FILE is required"},
		{"sdk bad format", nil, []string{"sdk", "--format", "html", "--tools", noCommand}, "--format"},
		{"sdk reserved name", nil, []string{"sdk", "--tools", reserved}, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantUsage(t, runCLI(t, "", tc.mod, tc.args...), tc.want)
		})
	}
	// Only the daemon can say an image is missing.
	t.Run("missing image", func(t *testing.T) {
		requireDaemon(t)
		wantUsage(t, runCLI(t, "", func(f *factory) {
			f.imageFor = func(backend.Language) (string, error) { return "dsh-container/ts-runner:does-not-exist", nil }
		}, "run", prog), "images build")
	})
}

// wantUsage checks r is a usage error: exit status 2 and one line on
// stderr containing want.
func wantUsage(t *testing.T, r result, want string) {
	t.Helper()
	if r.code != exitUsage {
		t.Fatalf("exit %d, want 2; stderr %q", r.code, r.stderr)
	}
	if lines := strings.Count(strings.TrimRight(r.stderr, "\n"), "\n"); lines != 0 || !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr %q: want one line containing %q", r.stderr, want)
	}
}

func TestRunJSON(t *testing.T) {
	requireRunners(t, backend.TypeScript)
	manifest := write(t, "tools.json", `{"tools":[{"name":"shout","inputSchema":{"type":"object"},"command":["/bin/sh","-c","tr a-z A-Z"]}]}`)
	prog := write(t, "p.ts", `console.log("x"); return await tools.shout({ word: "hi" })`)
	r := runCLI(t, "", nil, "run", "--json", "--tools", manifest, prog)
	if r.code != exitOK {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	var out struct {
		Value string             `json:"value"`
		Logs  []backend.LogEntry `json:"logs"`
		Error *backend.Failure   `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if out.Value != `{"WORD":"HI"}` || out.Error != nil || len(out.Logs) != 1 || out.Logs[0].Text != "x" {
		t.Fatalf("%+v", out)
	}
}

func TestRunProgramFailureExitsOne(t *testing.T) {
	requireRunners(t, backend.Python)
	r := runCLI(t, "raise ValueError('nope')\n", nil, "run", "--lang", "python", "-")
	if r.code != exitProgram || !strings.Contains(r.stderr, "error (exception)") || !strings.Contains(r.stderr, "nope") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestRunEvents(t *testing.T) {
	requireRunners(t, backend.TypeScript)
	manifest := write(t, "tools.json", `{"tools":[{"name":"cat","command":["/bin/cat"]}]}`)
	r := runCLI(t, `await tools.cat({a: 1}); await tools.cat({a: 2})`, nil, "run", "--events", "--tools", manifest, "-")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 2 {
		t.Fatalf("events %q", r.stderr)
	}
	for i, l := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if e["type"] != "tool/code-dispatch" || e["callId"] != "cli:code:"+string(rune('1'+i)) {
			t.Fatalf("event %v", e)
		}
	}
}

func TestSDKCommand(t *testing.T) {
	bare := write(t, "tools.json", `[{"name":"b","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}},{"name":"a"}]`)
	single := write(t, "tool.json", `{"name":"only","description":"the one"}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sdk", "--tools", bare, "--format", "source"}, `"a"`},
		{[]string{"sdk", "--tools", bare, "--lang", "python", "--format", "source"}, "class Tools"},
		{[]string{"sdk", "--tools", single}, "the one"},
	} {
		r := runCLI(t, "", nil, tc.args...)
		if r.code != exitOK || !strings.Contains(r.stdout, tc.want) {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", tc.args, r.code, r.stdout, r.stderr)
		}
	}
}
