package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/containertest"
	"github.com/dsh-container/dsh-container/backend/container/docker"
)

// TestHardening: the hardening preset from Docker's inspection of the live
// container and from inside it.
func TestHardening(t *testing.T) { containertest.RunHardening(t, dockerConfig(t)) }

// dockerInspectExtra checks what Docker's inspection says beyond
// container.Applied: no log driver (output comes over the bridge or an
// attach, both capped host-side), not privileged, no capability added,
// and no security option that weakens a default ("unconfined").
func dockerInspectExtra(ctx context.Context, id string) error {
	info, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		return err
	}
	hc := info.HostConfig
	var errs []error
	if hc.LogConfig.Type != "none" {
		errs = append(errs, fmt.Errorf("log driver %q, want none", hc.LogConfig.Type))
	}
	if hc.Privileged {
		errs = append(errs, errors.New("privileged"))
	}
	if len(hc.CapAdd) != 0 {
		errs = append(errs, fmt.Errorf("cap add %v", hc.CapAdd))
	}
	for _, o := range hc.SecurityOpt {
		if strings.Contains(o, "unconfined") {
			errs = append(errs, fmt.Errorf("security opt %q weakens a default profile", o))
		}
	}
	return errors.Join(errs...)
}

// lyingDriver is the Docker driver with one setting of every Spec dropped
// or bent before the real Create: what a driver that silently ignores a
// hardening field would do. Everything else — Inspect included — is the
// real driver's.
type lyingDriver struct {
	*docker.Driver
	lie func(*container.Spec)
}

func (d lyingDriver) Create(ctx context.Context, s container.Spec) (string, error) {
	d.lie(&s)
	return d.Driver.Create(ctx, s)
}

// The suite can fail: a driver that drops one hardening setting at a time
// is caught from Docker's own inspection, by name, with nothing else
// reported and nothing left behind (containertest.RunLies); an honest
// wrapper passes the same check. Besides the lies every engine must
// expose, Docker's log driver, which dockerInspectExtra checks.
func TestLyingDriver(t *testing.T) {
	lies := append(containertest.Lies(), containertest.Lie{
		Name: "a log driver", Apply: func(s *container.Spec) { s.LogDriverNone = false }, Finding: "log driver",
	})
	containertest.RunLies(t, dockerConfig(t), func(lie func(*container.Spec)) container.Driver { return lyingDriver{drv, lie} }, lies)
}

// leakyDriver is the Docker driver forgetting what it should remove: the
// first Remove of each container does nothing, and each endpoint's Close
// stops its listener but leaves its directory.
type leakyDriver struct {
	*docker.Driver
	mu     sync.Mutex
	forgot map[string]bool
}

func (d *leakyDriver) Remove(ctx context.Context, id string) error {
	d.mu.Lock()
	first := !d.forgot[id]
	d.forgot[id] = true
	d.mu.Unlock()
	if first {
		return nil
	}
	return d.Driver.Remove(ctx, id)
}

func (d *leakyDriver) Endpoint(ctx context.Context, req container.EndpointRequest) (*container.Endpoint, error) {
	ep, err := d.Driver.Endpoint(ctx, req)
	if err != nil {
		return nil, err
	}
	ep.Close = ep.Listener.Close
	return ep, nil
}

// The suite's leak check can fail: what a driver leaves behind is found
// through the driver (its container, by owner label) and in the socket
// directory, and reported — then removed, so the next case starts clean.
func TestLeakCheckCatches(t *testing.T) {
	d := &leakyDriver{Driver: drv, forgot: map[string]bool{}}
	cfg := dockerConfig(t)
	cfg.Driver = d
	cfg.Options = []container.Option{container.WithLogger(testLogger(t))}
	err := containertest.CheckPreset(context.Background(), cfg, backend.TypeScript)
	if err == nil {
		t.Fatal("a driver that leaves its container and socket directory behind passes the leak check")
	}
	t.Logf("caught: %v", err)
	for _, want := range []string{"leaked 1 container(s) of owner", "leaked in the socket directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not report %q", err, want)
		}
	}
	if len(d.forgot) != 1 {
		t.Fatalf("%d containers created, want 1", len(d.forgot))
	}
	for id := range d.forgot {
		if _, err := cli.ContainerInspect(context.Background(), id); !cerrdefs.IsNotFound(err) {
			t.Errorf("the leaked container %s is still there after the check: %v", id, err)
		}
	}
}
