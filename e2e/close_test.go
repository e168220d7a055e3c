package e2e

import (
	"slices"
	"testing"

	"github.com/dsh-container/dsh-container/backend/container/containertest"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// TestCloseWhilePoolStarts: Close while the warm pool is starting a
// sandbox — its create or its start held until Close has begun — returns
// only when nothing of the runtime is left (containertest.
// RunCloseWhileStarting), on Docker and on containerd, under runc and
// under runsc. Issue 24: the bench's soak found a container, its task and
// its snapshot left after Close returned nil, on containerd under both.
// A runtime the engine lacks is skipped, unless DSH_TEST_OCI_RUNTIMES
// requires it.
func TestCloseWhilePoolStarts(t *testing.T) {
	required, info := runtimesInfo(t)
	for _, drv := range []string{"docker", "containerd"} {
		for _, name := range []string{"runc", containertest.GVisor} {
			t.Run(drv+"/"+name, func(t *testing.T) {
				var cfg containertest.Config
				var has bool
				switch drv {
				case "docker":
					cfg = dockerConfig(t)
					rt, ok := info.Runtimes[name]
					has = ok && (name != containertest.GVisor || len(missingFlags(rt.Args, runscFlags)) == 0)
				default:
					cfg = containerdConfig(t)
					has = slices.Contains(containerdDriver(t).Capabilities().Runtimes, name)
				}
				if !has {
					if required[name] {
						t.Fatalf("%s cannot run %s (%s requires it)", drv, name, requiredRuntimesVar)
					}
					testenv.Unsupported(t, "%s has no usable %s runtime", drv, name)
				}
				cfg.OCIRuntime = name
				containertest.RunCloseWhileStarting(t, cfg)
			})
		}
	}
}
