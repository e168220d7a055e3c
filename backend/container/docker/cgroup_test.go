package docker

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
)

const testID = "fb327dbd5fc8a70f81297073673173d972d02debb812e22069fa36b6a2589654"

// writeFiles lays out a fake cgroup filesystem under root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindCgroupFiles(t *testing.T) {
	v1 := "/docker/" + testID
	v2 := "/system.slice/docker-" + testID + ".scope"
	tests := []struct {
		name       string
		files      []string // relative to the cgroup root
		procCgroup string
		cpu, peak  string // expected, relative to the root ("" = none)
	}{
		{
			name:  "v1, controllers mounted apart (this project's CI host)",
			files: []string{"cpuacct" + v1 + "/cpuacct.usage", "memory" + v1 + "/memory.max_usage_in_bytes"},
			procCgroup: "9:name=systemd:" + v1 + "\n4:memory:" + v1 + "\n2:cpuacct:" + v1 + "\n1:cpu:" + v1 +
				"\n0::" + v1 + "\n", // hybrid: the unified line names a directory that is not there
			cpu: "cpuacct" + v1 + "/cpuacct.usage", peak: "memory" + v1 + "/memory.max_usage_in_bytes",
		},
		{
			name:       "v1, cpu and cpuacct co-mounted",
			files:      []string{"cpu,cpuacct" + v1 + "/cpuacct.usage", "memory" + v1 + "/memory.max_usage_in_bytes"},
			procCgroup: "4:memory:" + v1 + "\n3:cpu,cpuacct:" + v1,
			cpu:        "cpu,cpuacct" + v1 + "/cpuacct.usage", peak: "memory" + v1 + "/memory.max_usage_in_bytes",
		},
		{
			name:       "v1, co-mounted hierarchy reached through its per-controller link",
			files:      []string{"cpuacct" + v1 + "/cpuacct.usage"},
			procCgroup: "3:cpu,cpuacct:" + v1,
			cpu:        "cpuacct" + v1 + "/cpuacct.usage",
		},
		{
			name:       "v2 with memory.peak",
			files:      []string{v2 + "/cpu.stat", v2 + "/memory.peak"},
			procCgroup: "0::" + v2 + "\n",
			cpu:        v2 + "/cpu.stat", peak: v2 + "/memory.peak",
		},
		{
			name:       "v2 before Linux 5.19: no memory.peak",
			files:      []string{v2 + "/cpu.stat", v2 + "/memory.current"},
			procCgroup: "0::" + v2,
			cpu:        v2 + "/cpu.stat",
		},
		{
			name:       "a process outside the container's cgroups (a remote daemon's pid)",
			files:      []string{"user.slice/cpu.stat", "user.slice/memory.peak"},
			procCgroup: "0::/user.slice",
		},
		{
			name:       "cgroups not visible from here",
			procCgroup: "4:memory:" + v1 + "\n2:cpuacct:" + v1 + "\n0::" + v2,
		},
		{
			name:       "garbage",
			files:      []string{"cpuacct" + v1 + "/cpuacct.usage"},
			procCgroup: "not a cgroup file\n\n2-cpuacct-" + v1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{}
			for _, f := range tc.files {
				files[f] = "0\n"
			}
			writeFiles(t, root, files)
			got := findCgroupFiles(root, tc.procCgroup, testID)
			want := cgroupAccounting{}
			if tc.cpu != "" {
				want.cpu = filepath.Join(root, tc.cpu)
			}
			if tc.peak != "" {
				want.memoryPeak = filepath.Join(root, tc.peak)
			}
			if got != want {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestReadAccountingFiles(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cpuacct.usage":             "1500000000\n",
		"cpu.stat":                  "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
		"memory.max_usage_in_bytes": "104857600\n",
		"memory.peak":               "73400320\n",
		"bad/cpu.stat":              "user_usec 1\n",
		"bad/memory.peak":           "max\n",
	})
	p := func(name string) string { return filepath.Join(root, name) }
	if d, err := readCPUFile(p("cpuacct.usage")); err != nil || d != 1500*time.Millisecond {
		t.Errorf("cpuacct.usage: %v, %v", d, err)
	}
	if d, err := readCPUFile(p("cpu.stat")); err != nil || d != 2500*time.Millisecond {
		t.Errorf("cpu.stat: %v, %v", d, err)
	}
	if v, err := readIntFile(p("memory.max_usage_in_bytes")); err != nil || v != 100<<20 {
		t.Errorf("memory.max_usage_in_bytes: %v, %v", v, err)
	}
	if v, err := readIntFile(p("memory.peak")); err != nil || v != 70<<20 {
		t.Errorf("memory.peak: %v, %v", v, err)
	}
	if _, err := readCPUFile(p("bad/cpu.stat")); err == nil || !strings.Contains(err.Error(), "no usage_usec") {
		t.Errorf("cpu.stat without usage_usec: %v", err)
	}
	if _, err := readIntFile(p("bad/memory.peak")); err == nil || !strings.Contains(err.Error(), "memory.peak") {
		t.Errorf("memory.peak holding %q: %v", "max", err)
	}
	if _, err := readIntFile(p("missing")); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
}

// statsAPI fakes the two calls the accounting fallback makes.
type statsAPI struct {
	apiClient // nil: any other call panics
	stats     string
	err       error
	inspects  int
}

func (a *statsAPI) ContainerInspect(context.Context, string) (dcontainer.InspectResponse, error) {
	a.inspects++
	// Not running: no init pid, so no cgroup to read.
	return dcontainer.InspectResponse{ContainerJSONBase: &dcontainer.ContainerJSONBase{ID: testID, State: &dcontainer.State{}}}, nil
}

func (a *statsAPI) ContainerStatsOneShot(context.Context, string) (dcontainer.StatsResponseReader, error) {
	if a.err != nil {
		return dcontainer.StatsResponseReader{}, a.err
	}
	return dcontainer.StatsResponseReader{Body: io.NopCloser(strings.NewReader(a.stats))}, nil
}

// Without a visible cgroup, MemoryPeak and CPUUsage read the stats API;
// a daemon that reports no peak is an error, not a zero.
func TestAccountingFallsBackToTheStatsAPI(t *testing.T) {
	ctx := context.Background()
	api := &statsAPI{stats: `{"cpu_stats":{"cpu_usage":{"total_usage":3000000}},"memory_stats":{"usage":1000,"max_usage":52428800}}`}
	d := &Driver{api: api, cgroups: map[string]cgroupAccounting{}}

	if v, err := d.MemoryPeak(ctx, testID); err != nil || v != 50<<20 {
		t.Fatalf("MemoryPeak: %v, %v", v, err)
	}
	if v, err := d.CPUUsage(ctx, testID); err != nil || v != 3*time.Millisecond {
		t.Fatalf("CPUUsage: %v, %v", v, err)
	}
	if api.inspects != 2 {
		t.Fatalf("a container that is not running is looked up again on each call: %d inspects", api.inspects)
	}

	api.stats = `{"memory_stats":{"usage":1000}}` // cgroup v2 before memory.peak
	if _, err := d.MemoryPeak(ctx, testID); !errdefs.IsNotImplemented(err) || !strings.Contains(err.Error(), testID) {
		t.Fatalf("no peak reported: %v", err)
	}
	api.stats = `{"memory_stats":`
	if _, err := d.MemoryPeak(ctx, testID); err == nil || !strings.Contains(err.Error(), "decoding stats") {
		t.Fatalf("truncated stats: %v", err)
	}
	api.err = errdefs.ErrNotFound
	if _, err := d.MemoryPeak(ctx, testID); !errdefs.IsNotFound(err) {
		t.Fatalf("a removed container: %v", err)
	}
}
