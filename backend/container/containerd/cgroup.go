package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	cg1 "github.com/containerd/cgroups/v3/cgroup1/stats"
	cg2 "github.com/containerd/cgroups/v3/cgroup2/stats"
	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
)

// cgroupFiles are the accounting files of one task's cgroup on this host;
// "" where the host cannot see one (another cgroup namespace, gVisor).
type cgroupFiles struct {
	cpu        string // v1 cpuacct.usage or v2 cpu.stat
	memoryPeak string // v1 memory.max_usage_in_bytes or v2 memory.peak
	oom        string // v1 memory.oom_control or v2 memory.events: oom_kill
}

// cgroupFilesOf finds the files through the task's init process, which
// is in its cgroup from the moment the task is created.
func cgroupFilesOf(pid int, id string) cgroupFiles {
	if pid <= 0 {
		return cgroupFiles{}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return cgroupFiles{}
	}
	return findCgroupFiles("/sys/fs/cgroup", string(data), id)
}

// findCgroupFiles locates the files under the cgroup filesystem mounted
// at root, from a /proc/<pid>/cgroup text. Only cgroups named after the
// container's id count.
func findCgroupFiles(root, procCgroup, id string) cgroupFiles {
	var f cgroupFiles
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	v1 := func(controllers, dir, ctrl, file string) string {
		// A hierarchy is mounted under its joined controller list
		// ("cpu,cpuacct") or alone, usually with a link per controller.
		for _, mnt := range []string{controllers, ctrl} {
			if p := filepath.Join(root, mnt, dir, file); exists(p) {
				return p
			}
		}
		return ""
	}
	for _, line := range strings.Split(strings.TrimSpace(procCgroup), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || id == "" || !strings.Contains(parts[2], id) {
			continue
		}
		controllers, dir := parts[1], parts[2]
		if parts[0] == "0" && controllers == "" { // cgroup v2
			for _, c := range []struct {
				dst  *string
				file string
			}{{&f.cpu, "cpu.stat"}, {&f.memoryPeak, "memory.peak"}, {&f.oom, "memory.events"}} {
				if p := filepath.Join(root, dir, c.file); *c.dst == "" && exists(p) {
					*c.dst = p
				}
			}
			continue
		}
		for _, c := range strings.Split(controllers, ",") {
			switch {
			case c == "cpuacct" && f.cpu == "":
				f.cpu = v1(controllers, dir, c, "cpuacct.usage")
			case c == "memory" && f.memoryPeak == "":
				f.memoryPeak = v1(controllers, dir, c, "memory.max_usage_in_bytes")
				f.oom = v1(controllers, dir, c, "memory.oom_control")
			}
		}
	}
	return f
}

// CPUUsage implements container.CPUMeter from the task's cgroup file, or
// the task's cgroup metrics when the file is not visible.
func (d *Driver) CPUUsage(ctx context.Context, id string) (time.Duration, error) {
	if st := d.taskState(id); st != nil && st.cgroup.cpu != "" {
		if v, err := readCPUFile(st.cgroup.cpu); err == nil {
			return v, nil
		}
	}
	m, err := d.metrics(ctx, id)
	if err != nil {
		return 0, err
	}
	switch m := m.(type) {
	case *cg1.Metrics:
		if m.CPU != nil && m.CPU.Usage != nil {
			return time.Duration(m.CPU.Usage.Total), nil
		}
	case *cg2.Metrics:
		if m.CPU != nil {
			return time.Duration(m.CPU.UsageUsec) * time.Microsecond, nil
		}
	}
	return 0, fmt.Errorf("%w: the metrics of task %s carry no CPU usage", errdefs.ErrNotImplemented, id)
}

// MemoryPeak implements container.MemoryMeter: v1
// memory.max_usage_in_bytes or v2 memory.peak, else the v1 metrics'
// maximum usage. Sample it while the task runs.
func (d *Driver) MemoryPeak(ctx context.Context, id string) (int64, error) {
	if st := d.taskState(id); st != nil && st.cgroup.memoryPeak != "" {
		if v, err := readIntFile(st.cgroup.memoryPeak); err == nil {
			return v, nil
		}
	}
	m, err := d.metrics(ctx, id)
	if err != nil {
		return 0, err
	}
	if m, ok := m.(*cg1.Metrics); ok && m.Memory != nil && m.Memory.Usage != nil && m.Memory.Usage.Max > 0 {
		return int64(m.Memory.Usage.Max), nil
	}
	return 0, fmt.Errorf("%w: no peak memory for task %s: its cgroup is not visible from here and its metrics carry none (cgroup v2 needs memory.peak, Linux 5.19)", errdefs.ErrNotImplemented, id)
}

// oomKilled reads the kernel's OOM-kill count of the task's cgroup; the
// task has exited but is not deleted yet, so its cgroup is still there.
func (d *Driver) oomKilled(ctx context.Context, id string) bool {
	if st := d.taskState(id); st != nil && st.cgroup.oom != "" {
		if n, err := readKeyed(st.cgroup.oom, "oom_kill"); err == nil {
			return n > 0
		}
	}
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := d.metrics(mctx, id)
	if err != nil {
		return false
	}
	switch m := m.(type) {
	case *cg1.Metrics:
		return m.MemoryOomControl != nil && m.MemoryOomControl.OomKill > 0
	case *cg2.Metrics:
		return m.MemoryEvents != nil && m.MemoryEvents.OomKill > 0
	}
	return false
}

// metrics reads the task's cgroup metrics through containerd.
func (d *Driver) metrics(ctx context.Context, id string) (any, error) {
	resp, err := d.tasks.Metrics(d.nsCtx(ctx), &tasks.MetricsRequest{Filters: []string{"id==" + strconv.Quote(id)}})
	if err != nil {
		return nil, d.translate(fromGRPC(err))
	}
	if len(resp.Metrics) == 0 || resp.Metrics[0].Data == nil {
		return nil, fmt.Errorf("%w: no metrics for task %s", errdefs.ErrNotFound, id)
	}
	v, err := typeurl.UnmarshalAny(resp.Metrics[0].Data)
	if err != nil {
		return nil, fmt.Errorf("decoding the metrics of task %s: %w", id, err)
	}
	return v, nil
}

func readCPUFile(path string) (time.Duration, error) {
	if strings.HasSuffix(path, "cpuacct.usage") {
		ns, err := readIntFile(path)
		return time.Duration(ns), err
	}
	us, err := readKeyed(path, "usage_usec")
	return time.Duration(us) * time.Microsecond, err
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

// readKeyed reads "key value" from a flat keyed cgroup file.
func readKeyed(path, key string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", path, key)
}
