package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container/containertest"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// TestProgramExit: a program that ends its process before returning has
// not completed, whatever the status, 0 included (issue 24 §4) — an exit
// whose message states the status, in both languages, under Docker and
// containerd, runc and gVisor: exit 0 from the program's body, an exit
// from a callback or thread, and a process ended beneath the runner (no
// done frame: the host reports the container's status, which each engine
// and runtime must deliver). The conformance suite's exit cases
// (containertest.ExitScenarios), on each engine × runtime. A runtime an
// engine lacks skips, unless DSH_TEST_OCI_RUNTIMES requires it.
//
//	go test -count=1 -run TestProgramExit -v ./e2e/ | grep -E 'OUTCOME|RUNTIME'
func TestProgramExit(t *testing.T) {
	required, _ := runtimesInfo(t)
	for _, engine := range []struct {
		name string
		cfg  func(*testing.T) containertest.Config
	}{{"docker", dockerConfig}, {"containerd", containerdConfig}} {
		for _, runtime := range []string{"runc", containertest.GVisor} {
			t.Run(engine.name+"/"+runtime, func(t *testing.T) {
				cfg := engine.cfg(t)
				if has := cfg.Driver.Capabilities().Runtimes; !slices.Contains(has, runtime) {
					if required[runtime] {
						t.Fatalf("%s has no %s runtime (it has %v), and %s requires it", engine.name, runtime, has, requiredRuntimesVar)
					}
					testenv.Unsupported(t, "%s has no %s runtime (it has %v)", engine.name, runtime, has)
				}
				cfg.OCIRuntime = runtime
				cfg.Only = containertest.ExitScenarios
				containertest.RunConformance(t, cfg)
			})
		}
	}
}

// TestHostileExitCodes: an exit code whose methods raise, through the real
// runtime, is still an exit stating the status its interpreter would have
// exited with, keeping the code's text; the logs before it stay, nothing
// after it runs, and the runner never shows.
//
//	go test -count=1 -run TestHostileExitCodes -v ./e2e/ | grep OUTCOME
func TestHostileExitCodes(t *testing.T) {
	programs := both(`
console.log("before");
process.exit(3);
console.log("after");`, `
import sys
print("before")
class Code:
    def __eq__(self, other):
        raise RuntimeError("eq")
    def __index__(self):
        raise RuntimeError("index")
    def __str__(self):
        return "weird"
sys.exit(Code())`)
	want := map[backend.Language]string{
		backend.TypeScript: "the program exited with status 3 before returning (process.exit(3))\n    at program.ts:3:9",
		backend.Python:     "the program exited with status 1 before returning (SystemExit: weird)\nTraceback (most recent call last):\n",
	}
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			e := newEnv(t, lang, nil)
			res := e.run(t, programs[lang])
			wantFailure(t, res, backend.FailureExit)
			if !strings.HasPrefix(res.Error.Message, want[lang]) {
				t.Fatalf("failure %q, want it to start %q", res.Error.Message, want[lang])
			}
			if got := logTexts(res); len(got) != 1 || got[0] != "before" {
				t.Fatalf("logs %q, want only the line before the exit", got)
			}
			noRunnerTrace(t, res)
			outcome(t, lang, res, "%q", firstLine(res.Error.Message))
		})
	}
}
