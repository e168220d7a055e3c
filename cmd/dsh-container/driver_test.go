package main

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend/container/containerd"
)

// The engine flags: which drivers they choose, and every combination that
// cannot apply refused as a usage error naming the flag.
func TestDriverFlags(t *testing.T) {
	good := []struct {
		flags driverFlags
		many  bool
		want  []string
	}{
		{driverFlags{}, false, []string{""}},
		{driverFlags{name: "docker"}, false, []string{"docker"}},
		{driverFlags{name: "containerd"}, false, []string{"containerd"}},
		{driverFlags{address: "/x.sock"}, false, []string{"containerd"}},
		{driverFlags{namespace: "ns"}, false, []string{"containerd"}},
		{driverFlags{name: "docker, containerd"}, true, []string{"docker", "containerd"}},
		{driverFlags{name: "containerd,docker", namespace: "ns"}, true, []string{"containerd", "docker"}},
	}
	for _, g := range good {
		got, err := g.flags.check(g.many)
		if err != nil || !slices.Equal(got, g.want) {
			t.Errorf("%+v: got %q %v, want %q", g.flags, got, err, g.want)
		}
	}
	bad := []struct {
		flags driverFlags
		many  bool
		want  string
	}{
		{driverFlags{name: "podman"}, false, `--driver "podman": use docker or containerd`},
		{driverFlags{name: "docker,containerd"}, false, "name one driver"},
		{driverFlags{name: "docker,docker"}, true, "names docker twice"},
		{driverFlags{name: "docker,"}, true, "an empty name"},
		{driverFlags{name: "docker", address: "/x.sock"}, false, "apply to --driver containerd"},
		{driverFlags{name: "docker", namespace: "ns"}, true, "apply to --driver containerd"},
	}
	for _, b := range bad {
		_, err := b.flags.check(b.many)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%+v: got %v, want a usage error with %q", b.flags, err, b.want)
		}
	}
}

// --driver containerd at a socket nobody serves: unavailable, naming the
// address and the fix (no engine needed).
func TestOpenContainerdUnreachable(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "c.sock")
	f := &factory{drv: driverFlags{name: "containerd", address: addr}}
	e, err := f.openDriver(context.Background())
	if e != nil || !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), containerd.DockerManagedAddress) {
		t.Fatalf("got %v, %v", e, err)
	}
}
