package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"

	"github.com/dsh-container/dsh-container/backend/container/nodelocal"
)

// CPUUsage implements container.Driver: it reads the container's cgroup
// CPU accounting file directly when the host can see it (v1 cpuacct.usage
// or v2 cpu.stat), and falls back to the stats API.
func (d *Driver) CPUUsage(ctx context.Context, id string) (time.Duration, error) {
	if v, ok := d.cgroupFiles(ctx, id).ReadCPU(); ok {
		return v, nil
	}
	s, err := d.stats(ctx, id)
	if err != nil {
		return 0, err
	}
	return time.Duration(s.CPUStats.CPUUsage.TotalUsage), nil
}

// MemoryPeak returns the most memory the container has used at once since
// it started, in bytes: cgroup v1 memory.max_usage_in_bytes or v2
// memory.peak when the host can see them, else the stats API's
// memory_stats.max_usage. Sample it while the container runs: its cgroup,
// and with it the figure, goes away when it exits. On cgroup v2 without
// memory.peak (Linux before 5.19) seen only through the API, the daemon
// reports no peak and MemoryPeak fails with errdefs.ErrNotImplemented.
func (d *Driver) MemoryPeak(ctx context.Context, id string) (int64, error) {
	if v, ok := d.cgroupFiles(ctx, id).ReadMemoryPeak(); ok {
		return v, nil
	}
	s, err := d.stats(ctx, id)
	if err != nil {
		return 0, err
	}
	if s.MemoryStats.MaxUsage == 0 {
		return 0, fmt.Errorf("%w: no peak memory for container %s: its cgroup is not visible from here (or it has exited) and the daemon reports none (cgroup v2 needs memory.peak, Linux 5.19)", errdefs.ErrNotImplemented, id)
	}
	return int64(s.MemoryStats.MaxUsage), nil
}

// stats reads one sample from the daemon's stats API.
func (d *Driver) stats(ctx context.Context, id string) (dcontainer.StatsResponse, error) {
	var s dcontainer.StatsResponse
	r, err := d.api.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return s, translate(err, "")
	}
	defer r.Body.Close()
	if err := jsonDecode(r.Body, &s); err != nil {
		return s, fmt.Errorf("decoding stats of container %s: %w", id, err)
	}
	return s, nil
}

// cgroupFiles finds the accounting files of a running container once,
// through its init process's /proc/<pid>/cgroup, and remembers them until
// Remove.
func (d *Driver) cgroupFiles(ctx context.Context, id string) nodelocal.Cgroups {
	d.mu.Lock()
	files, known := d.cgroups[id]
	d.mu.Unlock()
	if known {
		return files
	}
	info, err := d.api.ContainerInspect(ctx, id)
	if err != nil || info.State == nil || info.State.Pid == 0 {
		return files // not running (yet): look again next time
	}
	files = nodelocal.CgroupsOf(info.State.Pid, info.ID)
	d.mu.Lock()
	d.cgroups[id] = files
	d.mu.Unlock()
	return files
}
