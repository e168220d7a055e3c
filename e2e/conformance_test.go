package e2e

import (
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/containertest"
	"github.com/dsh-container/dsh-container/images"
)

// The conformance suite (package containertest) runs here for every
// driver e2e has. Docker's runs as TestConformance, TestHardening,
// TestBudgets and TestHostile, so each can be run and quoted alone:
//
//	go test -count=1 -run TestHostile -v ./e2e/ | grep OUTCOME
//	go test -count=1 -run TestBudgets -v ./e2e/ | grep BUDGET

// suiteConfig is the suite's configuration for driver d: the runner
// images by their default tags (a language without one fails the suite),
// nothing engine-specific. Another driver's e2e test is one call of it —
// containerd's, in e2e/containerd_test.go:
//
//	func TestContainerdConformance(t *testing.T) {
//		d := ... // the containerd driver, its images imported
//		containertest.Run(t, suiteConfig(d))
//	}
func suiteConfig(d container.Driver) containertest.Config {
	imgs := map[backend.Language]string{}
	for _, lang := range langs {
		if im, err := images.RunnerFor(lang); err == nil {
			imgs[lang] = im.DefaultTag()
		}
	}
	return containertest.Config{Driver: d, Images: imgs}
}

// dockerConfig is suiteConfig for the Docker driver, with what only the
// Docker daemon can tell the suite: the default bridge's gateway as the
// host address a networked container would reach, the checks of its
// inspection that container.Applied does not carry, and its client's
// connection pool, which is not a leak.
func dockerConfig(t *testing.T) containertest.Config {
	cfg := suiteConfig(drv)
	cfg.HostAddress = bridgeGateway(t)
	cfg.InspectExtra = dockerInspectExtra
	cfg.CloseIdle = func() { cli.Close() } // closes idle connections only; the client stays usable
	cfg.IgnoreGoroutines = []string{"net/http.(*persistConn).readLoop", "net/http.(*persistConn).writeLoop"}
	return cfg
}

// TestConformance: the run lifecycle, failure kinds and cancellation,
// under Docker.
func TestConformance(t *testing.T) { containertest.RunConformance(t, dockerConfig(t)) }
