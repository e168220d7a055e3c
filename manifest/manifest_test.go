package manifest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		opts     Options
		want     string // error substring; "" = ok
		tools    int
	}{
		{"manifest", `{"tools":[{"name":"a","command":["/bin/true"]}]}`, Options{RequireCommand: true}, "", 1},
		{"empty list", `{"tools":[]}`, Options{}, "", 0},
		{"bare array", `[{"name":"a"},{"name":"b"}]`, Options{AllowBare: true}, "", 2},
		{"bare array refused", `[{"name":"a"}]`, Options{}, "expected a JSON object", 0},
		{"single tool", `{"name":"a","description":"d"}`, Options{AllowBare: true}, "", 1},
		{"single tool refused", `{"name":"a"}`, Options{}, `"tools" array`, 0},
		{"empty", "  ", Options{}, "empty file", 0},
		{"not json", `{"tools": [`, Options{}, "not valid JSON", 0},
		{"unknown field", `{"tools":[{"name":"a","cmd":["x"]}]}`, Options{}, "unknown field", 0},
		{"no name", `{"tools":[{"description":"x"}]}`, Options{}, "name is required", 0},
		{"reserved", `{"tools":[{"name":"run_code"}]}`, Options{}, "reserved", 0},
		{"duplicate", `{"tools":[{"name":"a"},{"name":"a"}]}`, Options{}, "duplicate tool name", 0},
		{"missing command", `{"tools":[{"name":"a"}]}`, Options{RequireCommand: true}, "command is required", 0},
		{"empty argv0", `{"tools":[{"name":"a","command":[""]}]}`, Options{}, "command[0] is empty", 0},
		{"trailing", `{"tools":[]} {}`, Options{}, "", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.in), tc.opts)
			if tc.tools == -1 {
				if err == nil {
					t.Fatal("trailing data accepted")
				}
				return
			}
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !errdefs.IsInvalidArgument(err) {
					t.Fatalf("got %v, want invalid argument containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Tools) != tc.tools {
				t.Fatalf("%d tools", len(m.Tools))
			}
		})
	}
}

func TestLoadResolvesRelativeCommands(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tools.json")
	os.WriteFile(p, []byte(`{"tools":[{"name":"a","command":["/bin/sh","./x.sh","-v"]}]}`), 0o644)
	m, err := Load(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Tools[0].Command; got[0] != "/bin/sh" || got[1] != filepath.Join(dir, "x.sh") || got[2] != "-v" {
		t.Fatalf("%v", got)
	}
	if _, err := Load(filepath.Join(dir, "missing.json"), Options{}); err == nil || !errdefs.IsInvalidArgument(err) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestExec(t *testing.T) {
	ctx := context.Background()
	out, err := Exec(ctx, Tool{Name: "cat", Command: []string{"/bin/cat"}}, json.RawMessage(`{"a":1}`))
	if err != nil || out != `{"a":1}` {
		t.Fatalf("%q %v", out, err)
	}
	_, err = Exec(ctx, Tool{Name: "f", Command: []string{"/bin/sh", "-c", "echo nope >&2; exit 3"}}, nil)
	if err == nil || err.Error() != "nope" {
		t.Fatalf("stderr as message: %v", err)
	}
	_, err = Exec(ctx, Tool{Name: "q", Command: []string{"/bin/sh", "-c", "exit 4"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "status 4") {
		t.Fatalf("silent failure: %v", err)
	}
	_, err = Exec(ctx, Tool{Name: "m", Command: []string{"/nonexistent"}}, nil)
	if err == nil {
		t.Fatal("missing binary ran")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Exec(cctx, Tool{Name: "s", Command: []string{"/bin/sleep", "5"}}, nil); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("cancelled: %v", err)
	}
	// The host environment is passed through (tools run with the host's
	// authority); the sandbox never sees it.
	t.Setenv("DSH_TOOL_ENV", "visible")
	out, err = Exec(ctx, Tool{Name: "e", Command: []string{"/bin/sh", "-c", "printf %s \"$DSH_TOOL_ENV\""}}, nil)
	if err != nil || out != "visible" {
		t.Fatalf("%q %v", out, err)
	}
}
