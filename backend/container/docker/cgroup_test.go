package docker

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"

	"github.com/dsh-container/dsh-container/backend/container/nodelocal"
)

const testID = "fb327dbd5fc8a70f81297073673173d972d02debb812e22069fa36b6a2589654"

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
	d := &Driver{api: api, cgroups: map[string]nodelocal.Cgroups{}}

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
