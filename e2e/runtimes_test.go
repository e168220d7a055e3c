package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/system"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/containertest"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// runtimeSubset names the conformance cases that run under an OCI runtime
// that does not get the full suites (crun): capture, a tool call round
// trip, the network and filesystem checks, and the compute budget (cgroup
// metering).
var runtimeSubset = []string{
	"value and log capture",
	"binding round trip with arguments and a structured value",
	"no network: no interface but loopback, TCP, DNS and HTTP fail",
	"root is read-only, /tmp is writable but not executable, uid is not 0",
	"compute timeout on a hot loop",
}

// requiredRuntimesVar names the OCI runtimes this host must run, comma
// separated; .ci/run sets it to runc and each runtime it installed and
// registered. runc, the daemon's own, is always required.
const requiredRuntimesVar = "DSH_TEST_OCI_RUNTIMES"

// runscFlags are the flags the daemon must give runsc: the bridge is a
// host Unix socket (--host-uds=open), the sandbox has no network
// (--network=none), and the container's seccomp profile, ours, applies
// inside the sandbox (--oci-seccomp; without it runsc ignores it).
var runscFlags = []string{"--host-uds=open", "--network=none", "--oci-seccomp"}

// runtimesInfo is the OCI runtimes this host must run
// (requiredRuntimesVar) and the engine's information (its runtimes).
func runtimesInfo(t *testing.T) (map[string]bool, system.Info) {
	t.Helper()
	required, err := requiredRuntimes()
	if err != nil {
		t.Fatal(err)
	}
	info, err := cli.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return required, info
}

// requiredRuntimes parses requiredRuntimesVar; a name it does not know is
// an error, so a typo cannot turn a failure back into a skip.
func requiredRuntimes() (map[string]bool, error) {
	req := map[string]bool{"runc": true}
	for _, name := range strings.Split(os.Getenv(requiredRuntimesVar), ",") {
		switch name = strings.TrimSpace(name); name {
		case "":
		case "runc", "crun", containertest.GVisor:
			req[name] = true
		default:
			return nil, fmt.Errorf("%s=%q: unknown runtime %q (runc, crun or runsc)", requiredRuntimesVar, os.Getenv(requiredRuntimesVar), name)
		}
	}
	return req, nil
}

// TestOCIRuntimes runs the suites under each OCI runtime the daemon has,
// after checking each can start a container in both languages, the preset
// holds under it and the container runs under the runtime named
// (containertest.CheckPreset):
//
//   - runc: the conformance subset (the full suites run under the
//     daemon's default runtime as TestConformance, TestHardening,
//     TestBudgets and TestHostile);
//   - runsc (gVisor): every suite, whole — conformance, hardening,
//     budgets and hostile (containertest.Run) — with gVisor's differences
//     asserted, not skipped;
//   - crun: the conformance subset.
//
// A runtime named in DSH_TEST_OCI_RUNTIMES (and runc) that is missing,
// misconfigured or cannot start a container fails the test. Any other
// runtime the daemon lacks or cannot run here is the one skip CI allows:
// testenv.Unsupported logs it with its reason, and .ci/run prints it.
//
//	go test -count=1 -run TestOCIRuntimes -v ./e2e/ | grep -E 'RUNTIME|OUTCOME|BUDGET'
func TestOCIRuntimes(t *testing.T) {
	required, info := runtimesInfo(t)
	for _, name := range []string{"runc", containertest.GVisor, "crun"} {
		t.Run(name, func(t *testing.T) {
			unavailable := func(format string, args ...any) {
				t.Helper()
				if required[name] {
					t.Fatalf(format+" (%s requires %s: a failure, not a skip)", append(args, requiredRuntimesVar, name)...)
				}
				testenv.Unsupported(t, format, args...)
			}
			rt, found := info.Runtimes[name]
			if !found {
				unavailable("the daemon has no %q runtime (it has %v); .ci/run registers Debian's runsc and crun where the host can run them", name, keys(info.Runtimes))
			}
			if name == containertest.GVisor {
				if missing := missingFlags(rt.Args, runscFlags); len(missing) > 0 {
					unavailable("runsc is registered with args %q, without %q: the bridge needs --host-uds=open, isolation --network=none, our seccomp profile --oci-seccomp", rt.Args, missing)
				}
			}
			// A runtime can be registered and still unable to create
			// containers here (crun 1.8.1 on a hybrid cgroup layout).
			for _, lang := range langs {
				// A loaded machine is slow to start a container, not
				// unable to: startup gets the hostile suite's 90s.
				probe := newEnv(t, lang, func(l *container.Limits) { l.StartupTime = 90 * time.Second }, container.WithOCIRuntime(name))
				res, err := probe.rt.Run(context.Background(), backend.RunRequest{Program: "return 1"})
				if err == nil && res.Error != nil {
					err = fmt.Errorf("%s: %s", res.Error.Kind, res.Error.Message)
				}
				if err != nil {
					unavailable("runtime %s is registered but cannot run a %s container on this host (cgroup v%s): %v%s", name, lang, info.CgroupVersion, err, probeHint(name))
				}
				wantValue(t, res, "1")
			}
			cfg := dockerConfig(t)
			cfg.OCIRuntime = name
			cfg.Options = []container.Option{container.WithLogger(testLogger(t))}
			for _, lang := range langs {
				if err := containertest.CheckPreset(context.Background(), cfg, lang); err != nil {
					t.Fatalf("%s: %v", lang, err)
				}
			}
			cfg.Options = nil
			if name == containertest.GVisor {
				containertest.Run(t, cfg)
				return
			}
			cfg.Only = runtimeSubset
			containertest.RunConformance(t, cfg)
		})
	}
}

// probeHint is what is known to stop runtime name from running a runner.
func probeHint(name string) string {
	switch name {
	case containertest.GVisor:
		return "; known cause: Debian's runsc 20221219 with --oci-seccomp answers EPERM, not our profile's ENOSYS, for clone3, so glibc creates no thread and Node cannot start (README, \"OCI runtimes\")"
	case "crun":
		return "; crun 1.8.1 refuses a hybrid cgroup layout with controllers in v2 (dsh-container doctor)"
	}
	return ""
}

// missingFlags are the flags of want that args lack.
func missingFlags(args, want []string) []string {
	var missing []string
	for _, f := range want {
		if !slices.Contains(args, f) {
			missing = append(missing, f)
		}
	}
	return missing
}

func TestRequiredRuntimes(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want []string
		err  bool
	}{
		{"", []string{"runc"}, false},
		{"runc,runsc", []string{"runc", "runsc"}, false},
		{" runsc , crun ,", []string{"crun", "runc", "runsc"}, false},
		{"runc,gvisor", nil, true},
	} {
		t.Setenv(requiredRuntimesVar, tc.env)
		got, err := requiredRuntimes()
		if (err != nil) != tc.err {
			t.Fatalf("%q: error %v, want error %v", tc.env, err, tc.err)
		}
		if err == nil && !slices.Equal(keys(got), tc.want) {
			t.Fatalf("%q: %v, want %v", tc.env, keys(got), tc.want)
		}
	}
	if got := missingFlags([]string{"--network=none", "--host-uds=open"}, runscFlags); !slices.Equal(got, []string{"--oci-seccomp"}) {
		t.Fatalf("missing flags %v, want [--oci-seccomp]", got)
	}
}

func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// On a hybrid cgroup host with controllers in v2 (this CI machine), doctor
// explains why crun cannot run here and what host set-up would make it
// usable, whether or not crun is installed (issue 20, item 3).
func TestDoctorExplainsCrunOnHybridCgroups(t *testing.T) {
	testenv.UsesDaemon(t)
	data, err := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	if err != nil || len(strings.Fields(string(data))) == 0 {
		testenv.Unsupported(t, "not a hybrid cgroup host with controllers in v2 (%v): crun's refusal does not apply", err)
	}
	bin := buildCLI(t)
	_, out := cliRun(t, bin, "doctor")
	for _, want := range []string{"crun cannot run containers here", "hybrid", "systemd.unified_cgroup_hierarchy=1", strings.Fields(string(data))[0]} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor does not say %q:\n%s", want, out)
		}
	}
}

// underEachRuntime runs fn under the engine's default OCI runtime (runc)
// and under gVisor: the suites other issues added — egress, sessions, MCP
// — run under runsc too, not only the conformance and hostile suites
// (issue 20). fn gets "" for the default and "runsc". A runsc missing or
// registered without the flags we need fails when DSH_TEST_OCI_RUNTIMES
// requires it (CI, where its package installs), and is an Unsupported
// skip with its reason elsewhere.
func underEachRuntime(t *testing.T, fn func(t *testing.T, ociRuntime string)) {
	t.Helper()
	t.Run("default", func(t *testing.T) { fn(t, "") })
	t.Run(containertest.GVisor, func(t *testing.T) {
		requireGVisor(t)
		fn(t, containertest.GVisor)
	})
}

// requireGVisor checks the engine has runsc with runscFlags.
func requireGVisor(t *testing.T) {
	t.Helper()
	testenv.UsesDaemon(t)
	required, info := runtimesInfo(t)
	why := ""
	if rt, found := info.Runtimes[containertest.GVisor]; !found {
		why = fmt.Sprintf("the daemon has no %q runtime (it has %v)", containertest.GVisor, keys(info.Runtimes))
	} else if missing := missingFlags(rt.Args, runscFlags); len(missing) > 0 {
		why = fmt.Sprintf("runsc is registered with args %q, without %q", rt.Args, missing)
	}
	if why == "" {
		return
	}
	if required[containertest.GVisor] {
		t.Fatalf("%s (%s requires runsc: a failure, not a skip)", why, requiredRuntimesVar)
	}
	testenv.Unsupported(t, "%s", why)
}

// runtimeFlag is the CLI's --runtime for underEachRuntime's ociRuntime
// (none for the default).
func runtimeFlag(ociRuntime string) []string {
	if ociRuntime == "" {
		return nil
	}
	return []string{"--runtime", ociRuntime}
}
