package containerd

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"

	cg1 "github.com/containerd/cgroups/v3/cgroup1/stats"
	cg2 "github.com/containerd/cgroups/v3/cgroup2/stats"

	"github.com/dsh-container/dsh-container/backend/container"
)

// MemoryUsage reads a task's current memory from its metrics: the usage and
// the anonymous part (cgroup v2 anon, v1 rss).
func (d *Driver) MemoryUsage(ctx context.Context, id string) (container.MemoryUsage, error) {
	m, err := d.metrics(ctx, id)
	if err != nil {
		return container.MemoryUsage{}, err
	}
	switch m := m.(type) {
	case *cg2.Metrics:
		if m.Memory != nil {
			return container.MemoryUsage{Usage: int64(m.Memory.Usage), Anon: int64(m.Memory.Anon)}, nil
		}
	case *cg1.Metrics:
		if m.Memory != nil && m.Memory.Usage != nil {
			return container.MemoryUsage{Usage: int64(m.Memory.Usage.Usage), Anon: int64(m.Memory.RSS)}, nil
		}
	}
	return container.MemoryUsage{}, fmt.Errorf("%w: no memory figures for task %s", errdefs.ErrNotImplemented, id)
}
