package docker

import (
	"context"

	"github.com/dsh-container/dsh-container/backend/container"
)

// MemoryUsage reads a container's current memory from the daemon's stats
// API: the usage and the anonymous part (cgroup v2 "anon", v1 "rss").
func (d *Driver) MemoryUsage(ctx context.Context, id string) (container.MemoryUsage, error) {
	s, err := d.stats(ctx, id)
	if err != nil {
		return container.MemoryUsage{}, err
	}
	anon, ok := s.MemoryStats.Stats["anon"]
	if !ok {
		anon = s.MemoryStats.Stats["rss"]
	}
	return container.MemoryUsage{Usage: int64(s.MemoryStats.Usage), Anon: int64(anon)}, nil
}

// PrimeMeters looks up the container's cgroup accounting files now, so
// its first CPU reading (a run's baseline) does not pay for the inspect.
func (d *Driver) PrimeMeters(ctx context.Context, id string) {
	d.cgroupFiles(ctx, id)
}
