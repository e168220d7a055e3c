package containerd

import (
	"context"
	"fmt"
	"strconv"
	"time"

	cg1 "github.com/containerd/cgroups/v3/cgroup1/stats"
	cg2 "github.com/containerd/cgroups/v3/cgroup2/stats"
	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
)

// CPUUsage implements container.CPUMeter from the task's cgroup file, or
// the task's cgroup metrics when the file is not visible.
func (d *Driver) CPUUsage(ctx context.Context, id string) (time.Duration, error) {
	if st := d.taskState(id); st != nil {
		if v, ok := st.cgroup.ReadCPU(); ok {
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
	if st := d.taskState(id); st != nil {
		if v, ok := st.cgroup.ReadMemoryPeak(); ok {
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
	if st := d.taskState(id); st != nil {
		if n, ok := st.cgroup.ReadOOMKills(); ok {
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
