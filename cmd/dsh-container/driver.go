package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/spf13/cobra"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/containerd"
	"github.com/dsh-container/dsh-container/backend/container/docker"
)

// engine is what the commands need of a container driver: the verbs, the
// image check, the engine's description and probes, and Close. Both the
// Docker and the containerd driver are one.
type engine interface {
	container.Driver
	container.ImageChecker
	container.Describer
	container.Prober
	Close() error
}

var (
	_ engine = (*docker.Driver)(nil)
	_ engine = (*containerd.Driver)(nil)
)

// Driver names.
const (
	driverDocker     = "docker"
	driverContainerd = "containerd"
)

// driverFlags choose the engine: --driver, --containerd-address,
// --containerd-namespace.
type driverFlags struct {
	name      string
	address   string
	namespace string
	// runtimes: --containerd-runtimes, nil when not given.
	runtimes []string
}

// addDriverFlags adds the engine flags to a command that talks to one.
func addDriverFlags(cmd *cobra.Command, f *factory) {
	fl := cmd.Flags()
	fl.StringVar(&f.drv.name, "driver", "", "container engine: docker|containerd (default: docker when its socket answers, else containerd)")
	fl.StringVar(&f.drv.address, "containerd-address", "", "containerd's socket; implies --driver containerd (default "+containerd.DefaultAddress+", else Docker's managed containerd at "+containerd.DockerManagedAddress+")")
	fl.StringVar(&f.drv.namespace, "containerd-namespace", "", "containerd namespace the runs live in (default "+containerd.DefaultNamespace+")")
	fl.StringSliceVar(&f.drv.runtimes, "containerd-runtimes", nil, "the OCI runtimes (runc,crun,runsc) containerd's host has, when this process runs in a container that cannot see that host's binaries (the Kubernetes agent; default: look on this host)")
}

// check returns the driver names the flags choose ("" alone: detect) and
// refuses engine flags that cannot apply: a driver name other than
// docker and containerd (several, comma-separated, only where many is
// true: bench), and the containerd flags with --driver docker alone.
func (d driverFlags) check(many bool) ([]string, error) {
	var names []string
	for _, n := range strings.Split(d.name, ",") {
		n = strings.TrimSpace(n)
		switch n {
		case driverDocker, driverContainerd:
		case "":
			if d.name == "" && (d.address != "" || d.namespace != "") {
				return []string{driverContainerd}, nil // the containerd flags choose it
			}
			if d.name == "" {
				return []string{""}, nil
			}
			return nil, usagef("--driver %q: an empty name in the list", d.name)
		default:
			return nil, usagef("--driver %q: use docker or containerd", n)
		}
		if slices.Contains(names, n) {
			return nil, usagef("--driver %q names %s twice", d.name, n)
		}
		names = append(names, n)
	}
	if len(names) > 1 && !many {
		return nil, usagef("--driver %q: name one driver, docker or containerd", d.name)
	}
	if len(names) == 1 && names[0] == driverDocker && (d.address != "" || d.namespace != "" || d.runtimes != nil) {
		return nil, usagef("--containerd-address, --containerd-namespace and --containerd-runtimes apply to --driver containerd, not docker")
	}
	return names, nil
}

// openDriver connects to the engine the flags name. Without --driver it
// takes Docker when its socket answers, else containerd; when neither
// answers, the error names both and their fixes.
func (f *factory) openDriver(ctx context.Context) (engine, error) {
	names, err := f.drv.check(false)
	if err != nil {
		return nil, err
	}
	switch names[0] {
	case driverDocker:
		return dockerConnect(ctx)
	case driverContainerd:
		c, err := f.openContainerd(ctx)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return c, nil
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	d, derr := docker.New(pctx)
	cancel()
	if derr == nil {
		return d, nil
	}
	if !errdefs.IsUnavailable(derr) {
		return nil, derr
	}
	c, cerr := f.openContainerd(ctx)
	if cerr == nil {
		return c, nil
	}
	return nil, fmt.Errorf("%w: no container engine answers: %w; and %w", errdefs.ErrUnavailable, derr, cerr)
}

// openAll connects to every engine that answers (for gc); it fails only
// when none does.
func (f *factory) openAll(ctx context.Context) ([]engine, error) {
	if _, err := f.drv.check(false); err != nil {
		return nil, err
	}
	var out []engine
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	d, derr := docker.New(pctx)
	cancel()
	if derr == nil {
		out = append(out, d)
	}
	c, cerr := f.openContainerd(ctx)
	if cerr == nil {
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no container engine answers: %w; and %w", errdefs.ErrUnavailable, derr, cerr)
	}
	return out, nil
}

func (f *factory) openContainerd(ctx context.Context) (*containerd.Driver, error) {
	return containerd.New(ctx, containerd.Options{Address: f.drv.address, Namespace: f.drv.namespace, NodeRuntimes: f.drv.runtimes, Logger: f.logger()})
}

// dockerConnect adapts docker.New to factory.connect (tests use it).
func dockerConnect(ctx context.Context) (engine, error) {
	d, err := docker.New(ctx)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// driverName names a driver for messages ("docker", "containerd").
func driverName(e engine) string { return e.Capabilities().Name }

// imagesBuildHint is the command that builds the runner images for e.
func imagesBuildHint(e engine) string {
	if driverName(e) == driverContainerd {
		return "dsh-container images build --driver containerd"
	}
	return "dsh-container images build"
}

// missingImage is the error for a runner image e lacks, naming the build
// command for e's engine.
func missingImage(e engine, tag string) error {
	if c, ok := e.(*containerd.Driver); ok {
		return containerd.ErrImageMissing(tag, c.Namespace())
	}
	return fmt.Errorf("%w: runner image %s is missing or stale; build it with `%s` (or `make images`)", errdefs.ErrNotFound, tag, imagesBuildHint(e))
}
