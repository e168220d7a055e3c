package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/docker"
)

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, stdin string, mod func(*factory), args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	f := &factory{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, connect: docker.New, imageFor: defaultImageFor}
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

// managedContainers counts containers carrying the managed label.
func managedContainers(t *testing.T) int {
	t.Helper()
	d, err := docker.New(context.Background())
	if err != nil {
		t.Fatalf("the Docker daemon is required: %v", err)
	}
	defer d.Close()
	list, err := d.Client().ContainerList(context.Background(), dcontainer.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", container.LabelManaged+"=true"))})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// Bad input: one clear line naming the fix, exit status 2, nothing left.
func TestBadInput(t *testing.T) {
	prog := write(t, "p.ts", "return 1")
	badManifest := write(t, "tools.json", `{"tools": [{"name": "x"`)
	reserved := write(t, "tools.json", `{"tools": [{"name": "run_code", "command": ["/bin/true"]}]}`)
	noCommand := write(t, "tools.json", `{"tools": [{"name": "x"}]}`)
	before := managedContainers(t)
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
			f.connect = func(ctx context.Context) (*docker.Driver, error) {
				old, had := os.LookupEnv("DOCKER_HOST")
				os.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
				defer func() {
					if had {
						os.Setenv("DOCKER_HOST", old)
					} else {
						os.Unsetenv("DOCKER_HOST")
					}
				}()
				return docker.New(ctx)
			}
		}, []string{"run", prog}, "cannot reach the Docker daemon"},
		{"missing image", func(f *factory) {
			f.imageFor = func(backend.Language) (string, error) { return "dsh-container/ts-runner:does-not-exist", nil }
		}, []string{"run", prog}, "images build"},
		{"sdk without tools", nil, []string{"sdk"}, "--tools FILE is required"},
		{"sdk bad format", nil, []string{"sdk", "--format", "html", "--tools", noCommand}, "--format"},
		{"sdk reserved name", nil, []string{"sdk", "--tools", reserved}, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, "", tc.mod, tc.args...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want 2; stderr %q", r.code, r.stderr)
			}
			if lines := strings.Count(strings.TrimRight(r.stderr, "\n"), "\n"); lines != 0 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("stderr %q: want one line containing %q", r.stderr, tc.want)
			}
		})
	}
	if after := managedContainers(t); after != before {
		t.Fatalf("bad input left containers: %d before, %d after", before, after)
	}
}

func TestRunJSON(t *testing.T) {
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
	r := runCLI(t, "raise ValueError('nope')\n", nil, "run", "--lang", "python", "-")
	if r.code != exitProgram || !strings.Contains(r.stderr, "error (exception)") || !strings.Contains(r.stderr, "nope") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestRunEvents(t *testing.T) {
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
