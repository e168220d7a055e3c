package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
)

// CPUUsage implements container.Driver: it reads the container's cgroup
// CPU accounting file directly when the host can see it (v1 cpuacct.usage
// or v2 cpu.stat), and falls back to the stats API.
func (d *Driver) CPUUsage(ctx context.Context, id string) (time.Duration, error) {
	if path := d.cgroupFiles(ctx, id).cpu; path != "" {
		if v, err := readCPUFile(path); err == nil {
			return v, nil
		}
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
	if path := d.cgroupFiles(ctx, id).memoryPeak; path != "" {
		if v, err := readIntFile(path); err == nil {
			return v, nil
		}
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

// cgroupAccounting are the accounting files of one container's cgroup on
// this host; "" where the host cannot see one.
type cgroupAccounting struct {
	cpu        string // v1 cpuacct.usage or v2 cpu.stat
	memoryPeak string // v1 memory.max_usage_in_bytes or v2 memory.peak
}

// cgroupFiles finds the accounting files of a running container once,
// through its init process's /proc/<pid>/cgroup, and remembers them until
// Remove.
func (d *Driver) cgroupFiles(ctx context.Context, id string) cgroupAccounting {
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
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", info.State.Pid)); err == nil {
		files = findCgroupFiles("/sys/fs/cgroup", string(data), info.ID)
	}
	d.mu.Lock()
	d.cgroups[id] = files
	d.mu.Unlock()
	return files
}

// findCgroupFiles locates the accounting files under the cgroup
// filesystem mounted at root of the container whose init process's
// /proc/<pid>/cgroup reads procCgroup. Only cgroups named after the
// container's id count: a daemon on another machine reports a pid that
// here may belong to an unrelated process. It finds nothing when the host
// cannot see the container's cgroups (another machine, another cgroup
// namespace).
func findCgroupFiles(root, procCgroup, containerID string) cgroupAccounting {
	var files cgroupAccounting
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	v1 := func(controllers, dir, ctrl, file string) string {
		// The hierarchy is mounted under the joined controller list
		// ("cpu,cpuacct"), usually with a link per controller.
		for _, mnt := range []string{controllers, ctrl} {
			if p := filepath.Join(root, mnt, dir, file); exists(p) {
				return p
			}
		}
		return ""
	}
	for _, line := range strings.Split(strings.TrimSpace(procCgroup), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		controllers, dir := parts[1], parts[2]
		if containerID == "" || !strings.Contains(dir, containerID) {
			continue
		}
		if parts[0] == "0" && controllers == "" { // cgroup v2
			if p := filepath.Join(root, dir, "cpu.stat"); files.cpu == "" && exists(p) {
				files.cpu = p
			}
			if p := filepath.Join(root, dir, "memory.peak"); files.memoryPeak == "" && exists(p) {
				files.memoryPeak = p
			}
			continue
		}
		for _, c := range strings.Split(controllers, ",") {
			switch {
			case c == "cpuacct" && files.cpu == "":
				files.cpu = v1(controllers, dir, c, "cpuacct.usage")
			case c == "memory" && files.memoryPeak == "":
				files.memoryPeak = v1(controllers, dir, c, "memory.max_usage_in_bytes")
			}
		}
	}
	return files
}

func readCPUFile(path string) (time.Duration, error) {
	if strings.HasSuffix(path, "cpuacct.usage") {
		ns, err := readIntFile(path)
		return time.Duration(ns), err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, fmt.Errorf("%s: no usage_usec", path)
}

// readIntFile reads a cgroup file holding one decimal integer.
func readIntFile(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
