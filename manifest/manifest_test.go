package manifest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		{"limits", `{"tools":[{"name":"a","timeoutMs":1,"maxOutputBytes":1},{"name":"b","timeoutMs":600000,"maxOutputBytes":16777216}]}`, Options{}, "", 2},
		{"limits in a bare tool", `{"name":"a","timeoutMs":5000,"maxOutputBytes":10}`, Options{AllowBare: true}, "", 1},
		{"zero timeout", `{"tools":[{"name":"z","timeoutMs":0}]}`, Options{}, `tool "z": timeoutMs is 0; it must be between 1 and 600000 (10 minutes); omit it for the default 30000`, 0},
		{"negative timeout", `{"tools":[{"name":"n","timeoutMs":-5}]}`, Options{}, `tool "n": timeoutMs is -5`, 0},
		{"long timeout", `{"tools":[{"name":"l","timeoutMs":600001}]}`, Options{}, `tool "l": timeoutMs is 600001`, 0},
		{"huge timeout", `{"tools":[{"name":"h","timeoutMs":9223372036854775807}]}`, Options{}, `tool "h": timeoutMs is 9223372036854775807`, 0},
		{"fractional timeout", `{"tools":[{"name":"f","timeoutMs":1.5}]}`, Options{}, "timeoutMs", 0},
		{"string timeout", `{"tools":[{"name":"s","timeoutMs":"30s"}]}`, Options{}, "timeoutMs", 0},
		{"zero output cap", `{"tools":[{"name":"z","maxOutputBytes":0}]}`, Options{}, `tool "z": maxOutputBytes is 0; it must be between 1 and 16777216 (16 MiB); omit it for the default 1048576`, 0},
		{"output cap over the maximum", `{"tools":[{"name":"o","maxOutputBytes":16777217}]}`, Options{}, `tool "o": maxOutputBytes is 16777217`, 0},
		{"unknown field in a bare tool", `{"name":"a","timeout":5}`, Options{AllowBare: true}, "unknown field", 0},
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
			// What parses, runs: Exec accepts the same limits.
			for _, tool := range m.Tools {
				if _, _, err := tool.limits(); err != nil {
					t.Fatalf("%s: %v", tool.Name, err)
				}
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

func TestLimitErrorMessage(t *testing.T) {
	_, err := Parse([]byte(`{"tools":[{"name":"slow","command":["/bin/true"],"timeoutMs":0}]}`), Options{})
	want := `invalid argument: tool "slow": timeoutMs is 0; it must be between 1 and 600000 (10 minutes); omit it for the default 30000`
	if err == nil || err.Error() != want || !errdefs.IsInvalidArgument(err) {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

func TestParseKeepsLimits(t *testing.T) {
	m, err := Parse([]byte(`{"tools":[{"name":"a","description":"d","inputSchema":{"type":"object"},"command":["/bin/true"],"timeoutMs":2500,"maxOutputBytes":4096},{"name":"b"}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := m.Tools[0], m.Tools[1]
	if a.Name != "a" || a.Description != "d" || string(a.InputSchema) != `{"type":"object"}` || len(a.Command) != 1 || a.TimeoutMs != 2500 || a.MaxOutputBytes != 4096 {
		t.Fatalf("%+v", a)
	}
	if timeout, maxOut, err := a.limits(); err != nil || timeout != 2500*time.Millisecond || maxOut != 4096 {
		t.Fatalf("a: %v %d %v", timeout, maxOut, err)
	}
	// Absent limits are the documented defaults.
	if timeout, maxOut, err := b.limits(); err != nil || timeout != 30*time.Second || maxOut != 1<<20 {
		t.Fatalf("b: %v %d %v", timeout, maxOut, err)
	}
}

func TestLimitsOfGoValues(t *testing.T) {
	// A Tool built in Go: zero is the default, out of range is refused.
	for _, tool := range []Tool{
		{Name: "t", TimeoutMs: -1},
		{Name: "t", TimeoutMs: int(MaxTimeout.Milliseconds()) + 1},
		{Name: "t", MaxOutputBytes: -1},
		{Name: "t", MaxOutputBytes: HardMaxOutputBytes + 1},
	} {
		if _, _, err := tool.limits(); err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), `tool "t"`) {
			t.Errorf("%+v: %v", tool, err)
		}
		tool.Command = []string{"/bin/true"}
		if _, err := Exec(context.Background(), tool, nil); err == nil || !errdefs.IsInvalidArgument(err) {
			t.Errorf("Exec %+v: %v", tool, err)
		}
	}
}
