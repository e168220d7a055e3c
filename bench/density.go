package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/dsh-container/dsh-container/backend/container"
)

// IdleMemory is the cgroup memory of idle pooled runners, averaged over
// the pool's sandboxes: Usage is the whole charge (page cache included),
// Anon the runner's own heap and stacks.
type IdleMemory struct {
	UsageMiB float64 `json:"usageMiB"`
	AnonMiB  float64 `json:"anonMiB"`
	// Runners is how many idle sandboxes were read.
	Runners int    `json:"runners"`
	Note    string `json:"note,omitempty"`
}

// idleMemory waits for rt's pool of n to be full and settled, then reads
// its sandboxes' memory.
func idleMemory(ctx context.Context, rt *container.Runtime, n int) *IdleMemory {
	waitIdle(rt, n, 10*time.Second)
	time.Sleep(time.Second) // let start-up garbage be collected
	ms, err := rt.IdleMemory(ctx)
	if err != nil {
		return &IdleMemory{Note: err.Error()}
	}
	if len(ms) == 0 {
		return &IdleMemory{Note: "no idle pooled runner to read"}
	}
	var m IdleMemory
	for _, u := range ms {
		m.UsageMiB += float64(u.Usage) / (1 << 20)
		m.AnonMiB += float64(u.Anon) / (1 << 20)
	}
	m.Runners = len(ms)
	m.UsageMiB /= float64(len(ms))
	m.AnonMiB /= float64(len(ms))
	return &m
}

func (m *IdleMemory) String() string {
	if m == nil {
		return "-"
	}
	if m.Runners == 0 {
		return "n/a: " + m.Note
	}
	return fmt.Sprintf("%.1f MiB (anon %.1f)", m.UsageMiB, m.AnonMiB)
}
