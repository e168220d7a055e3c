package containertest

import (
	"context"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/seccomp"
)

// A Lie is one way a driver could silently drop or bend a setting of the
// hardening preset: Apply changes the Spec the runtime built before the
// real Create sees it, and CheckPreset must then report exactly one
// finding, containing Finding.
type Lie struct {
	Name    string
	Apply   func(*container.Spec)
	Finding string
}

// Lies are the lies every engine must expose through its driver's
// Inspector. Two are left out because an engine may truthfully apply the
// preset without the Spec asking: a daemon whose default IPC mode is
// private (Docker 20.10's), and a runner image whose USER is the runner
// user. CheckPreset's own unit test covers those fields.
func Lies() []Lie {
	return []Lie{
		{"keeps capabilities", func(s *container.Spec) { s.CapDropAll = false }, "capabilities: bounding set"},
		{"writable root", func(s *container.Spec) { s.ReadOnlyRoot = false }, "read-only root"},
		{"no no_new_privs", func(s *container.Spec) { s.NoNewPrivileges = false }, "no_new_privs"},
		{"the engine's seccomp profile", func(s *container.Spec) { s.Seccomp = nil }, "seccomp"},
		{"the engine's default profile, spelled out", func(s *container.Spec) { s.Seccomp = seccomp.Default() }, "seccomp"},
		{"a network", func(s *container.Spec) { s.NetworkDisabled = false }, "network: not none"},
		{"no init", func(s *container.Spec) { s.Init = false }, "init: not set"},
		{"root", func(s *container.Spec) { s.User = "0:0" }, "user"},
		{"another working directory", func(s *container.Spec) { s.WorkingDir = "/" }, "working dir"},
		{"the engine's hostname", func(s *container.Spec) { s.Hostname = "" }, "hostname"},
		{"twice the memory", func(s *container.Spec) { s.MemoryBytes *= 2 }, "memory"},
		{"no CPU limit", func(s *container.Spec) { s.NanoCPUs = 0 }, "CPU"},
		{"no pids limit", func(s *container.Spec) { s.Pids = 0 }, "pids limit"},
		{"another nofile", func(s *container.Spec) { s.NoFile *= 4 }, "nofile"},
		{"a larger /tmp", func(s *container.Spec) { s.TmpfsBytes *= 2 }, "tmpfs /tmp size"},
		{"a host variable", func(s *container.Spec) { s.Env = append(s.Env, "DSH_HOST_SECRET=x") }, "env"},
		{"a label outside the prefix", func(s *container.Spec) { s.Labels["app"] = "x" }, "outside the reserved prefix"},
	}
}

// RunLies shows the preset check can fail: for each lie, liar returns
// cfg's driver with that lie applied to every Spec before its Create, and
// CheckPreset must report exactly the lie's finding and leave nothing
// behind. An honest liar (a no-op lie) must pass first. Languages
// alternate between lies.
func RunLies(t *testing.T, cfg Config, liar func(lie func(*container.Spec)) container.Driver, lies []Lie) {
	cfg.validate(t)
	honest := Lie{Name: "honest", Apply: func(*container.Spec) {}}
	for i, l := range append([]Lie{honest}, lies...) {
		t.Run(l.Name, func(t *testing.T) {
			lcfg := cfg
			lcfg.Driver = liar(l.Apply)
			lang := Languages[i%len(Languages)]
			err := checkPreset(context.Background(), lcfg, lang, testLogger(t))
			if l.Finding == "" {
				if err != nil {
					t.Fatalf("%s: the honest wrapper fails the check: %v", lang, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s: not caught", lang)
			}
			t.Logf("LIE %s %s %q caught: %v", cfg.driverName(), lang, l.Name, err)
			if lines := strings.Split(err.Error(), "\n"); len(lines) != 1 || !strings.Contains(lines[0], l.Finding) {
				t.Fatalf("%s: caught as %q; want exactly one finding, naming %q", lang, err, l.Finding)
			}
		})
	}
}
