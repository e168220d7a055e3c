package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend/container"
)

func rep(name, driver, runtime string, coldTS float64, susCold float64) *DriverReport {
	return &DriverReport{Name: name, Driver: driver, Runtime: runtime, SustainedColdPerSec: susCold,
		Languages: map[string]LangReport{"typescript": {Cold: Dist{N: 1, P50: coldTS}, Warm: Dist{N: 1, P50: 10}}}}
}

// Each target is set against the first earlier one differing from it in
// the driver alone or the runtime alone; never against one differing in
// both.
func TestCompare(t *testing.T) {
	drs := []*DriverReport{
		rep("docker/runc", "docker", "runc", 400, 4),
		rep("docker/runsc", "docker", "runsc", 800, 2),
		rep("containerd/runc", "containerd", "runc", 200, 8),
		rep("containerd/runsc", "containerd", "runsc", 600, 3),
	}
	got := compare(drs)
	want := []struct {
		of, over string
		cold     float64
		sus      float64
	}{
		{"docker/runsc", "docker/runc", 2, 0.5},
		{"containerd/runc", "docker/runc", 0.5, 2},
		{"containerd/runsc", "docker/runsc", 0.75, 1.5},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i, w := range want {
		g := got[i]
		if g.Of != w.of || g.Over != w.over || g.ColdTS != w.cold || g.SustainedCold != w.sus || g.WarmTS != 1 {
			t.Errorf("%d: got %+v, want %+v", i, g, w)
		}
	}
	var out bytes.Buffer
	(&Report{Drivers: drs, Comparisons: got}).Text(&out)
	if !strings.Contains(out.String(), "containerd/runc / docker/runc: cold p50 TS 0.50") || !strings.Contains(out.String(), "cold TS ≤ 0.6 (met), sustained cold ≥ 1.6 (met), warm TS ≤ 1 (met)") {
		t.Errorf("text:\n%s", out.String())
	}
}

// A soak with a failure or anything left is an error naming the target
// and what was left; a clean one is not.
func TestSoakErr(t *testing.T) {
	clean := &Report{Drivers: []*DriverReport{{Name: "containerd", Soak: &Soak{Runs: 10}}, {Name: "docker"}}}
	if err := clean.SoakErr(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Soak{{Runs: 10, Failures: 1}, {Runs: 10, LeftOver: 1}, {Runs: 10, TasksLeft: 1}, {Runs: 10, SnapshotsLeft: 1}, {Runs: 10, DirsLeft: 1}} {
		r := &Report{Drivers: []*DriverReport{{Name: "containerd", Soak: &s}}}
		if err := r.SoakErr(); err == nil || !strings.Contains(err.Error(), "containerd:") {
			t.Errorf("%+v: got %v", s, err)
		}
	}
}

// fakeDriver is a driver with only runc; Run must skip a target asking
// for another runtime before touching the driver, and say so.
type fakeDriver struct{ Driver }

func (fakeDriver) Capabilities() container.Capabilities {
	return container.Capabilities{Name: "docker", Runtimes: []string{"runc"}, DefaultRuntime: "runc"}
}

func TestRunSkipsMissingRuntimes(t *testing.T) {
	_, err := Run(context.Background(), []Target{{Driver: fakeDriver{}, Runtime: "runsc"}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "docker/runsc: runtime runsc is not registered with the Docker daemon") {
		t.Fatalf("got %v", err)
	}
}
