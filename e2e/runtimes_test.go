package e2e

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// runtimeSubset names the conformance scenarios that run under every OCI
// runtime the daemon has: capture, a tool call round trip, the network and
// filesystem checks, and the compute budget (cgroup metering).
var runtimeSubset = []string{
	"value and log capture",
	"binding round trip with arguments and a structured value",
	"no network: no interface but loopback, TCP, DNS and HTTP fail",
	"root is read-only, /tmp is writable but not executable, uid is not 0",
	"compute timeout on a hot loop",
}

// TestOCIRuntimes runs the subset under runc, crun and runsc (gVisor). runc
// is the daemon's own and must work. crun or runsc that the daemon lacks,
// has with arguments the bridge cannot use, or has but cannot create a
// container with on this host (the daemon's error verbatim) is the one skip
// CI allows: testenv.Unsupported logs it with its reason, and .ci/run prints
// it after the run.
//
//	go test -count=1 -run TestOCIRuntimes -v ./e2e/
func TestOCIRuntimes(t *testing.T) {
	info, err := cli.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]scenario{}
	for _, sc := range scenarios {
		byName[sc.name] = sc
	}
	for _, name := range []string{"runc", "crun", "runsc"} {
		t.Run(name, func(t *testing.T) {
			rt, found := info.Runtimes[name]
			if !found && name == "runc" {
				t.Fatalf("the daemon has no runc runtime (it has %v)", keys(info.Runtimes))
			}
			if !found {
				testenv.Unsupported(t, "the daemon has no %q runtime (it has %v); .ci/run registers Debian's crun and runsc when it can", name, keys(info.Runtimes))
			}
			if name == "runsc" {
				args := strings.Join(rt.Args, " ")
				if !strings.Contains(args, "--host-uds=open") || !strings.Contains(args, "--network=none") {
					testenv.Unsupported(t, "runsc is registered with args %q; the bridge needs --host-uds=open and isolation --network=none", args)
				}
			}
			for _, lang := range langs {
				t.Run(string(lang), func(t *testing.T) {
					// Probe: a runtime can be registered and still unable to
					// create containers here.
					probe := newEnv(t, lang, nil, container.WithOCIRuntime(name))
					res, err := probe.rt.Run(context.Background(), backend.RunRequest{Program: "return 1"})
					if err != nil && name == "runc" {
						t.Fatalf("runc cannot run a container: %v", err)
					}
					if err != nil {
						testenv.Unsupported(t, "runtime %s is registered but cannot run a container on this host: %v", name, err)
					}
					wantValue(t, res, "1")
					for _, scName := range runtimeSubset {
						sc, found := byName[scName]
						if !found {
							t.Fatalf("scenario %q is gone from the conformance suite", scName)
						}
						prog, found := sc.programs[lang]
						if !found {
							continue
						}
						t.Run(sc.name, func(t *testing.T) {
							e := newEnv(t, lang, sc.limits, container.WithOCIRuntime(name))
							var b []backend.BindingNamespace
							if sc.bindings != nil {
								b = sc.bindings(t)
							}
							res := e.run(t, prog, b...)
							sc.check(t, lang, res)
							t.Logf("RUNTIME %s %s %q: ok (startup %v, wall %v, cpu %v)", name, lang, sc.name, res.Stats.Startup, res.Stats.Wall, res.Stats.CPU)
						})
					}
				})
			}
		})
	}
}

func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
