package container

// Metering: CPU time against the compute budget, and peak memory for the
// outcome's classification.

import (
	"context"
	"sync"
	"time"
)

// computePoll is how often CPU usage is sampled. A compute budget expires
// at most one interval late. It is deliberately not configurable.
const computePoll = 20 * time.Millisecond

// meter samples a container's CPU usage in its own goroutine, against the
// baseline read as the program starts. Once usage since then reaches the
// limit, over receives it; if no sample succeeds for meterLoss, lost
// receives the last error: the run is stopped rather than left unmetered.
type meter struct {
	over   chan time.Duration
	lost   chan error
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	last   time.Duration
	// final takes stop's last sample (see stop); slow is set once a
	// sample took longer than finalSample.
	final func(context.Context) (time.Duration, error)
	slow  bool
}

// finalSample bounds stop's last sample: a run shorter than computePoll
// would otherwise report no CPU at all, and every run would miss what it
// used after the last tick.
const finalSample = 50 * time.Millisecond

// meterLoss is how long CPU samples may fail in a row before the run is
// stopped.
const meterLoss = 2 * time.Second

func (sb *sandbox) startMeter(ctx context.Context, base, limit time.Duration) *meter {
	ctx, cancel := context.WithCancel(ctx)
	m := &meter{over: make(chan time.Duration, 1), lost: make(chan error, 1), cancel: cancel, done: make(chan struct{})}
	m.final = func(ctx context.Context) (time.Duration, error) {
		cpu, err := sb.cpu.CPUUsage(ctx, sb.id)
		return cpu - base, err
	}
	go func() {
		defer close(m.done)
		tick, stopTick := sb.meterTicks()
		defer stopTick()
		lastOK := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick:
			}
			sb.sampleMemory(ctx)
			// A sample that hangs counts as failed: it must not stop
			// the meter from noticing that it has lost track.
			sctx, scancel := context.WithTimeout(ctx, meterLoss)
			began := time.Now()
			cpu, err := sb.cpu.CPUUsage(sctx, sb.id)
			scancel()
			if time.Since(began) > finalSample {
				m.mu.Lock()
				m.slow = true
				m.mu.Unlock()
			}
			if err != nil {
				if ctx.Err() == nil && time.Since(lastOK) >= meterLoss {
					m.lost <- err
					return
				}
				continue
			}
			lastOK = time.Now()
			used := cpu - base
			m.mu.Lock()
			// A dead container's usage may read as zero: never go back.
			if used > m.last {
				m.last = used
			}
			used = m.last
			m.mu.Unlock()
			if used >= limit {
				m.over <- used
				return
			}
		}
	}()
	return m
}

// meterTicks is when the meter samples: every computePoll, unless a test
// set the sandbox's meterTick.
func (sb *sandbox) meterTicks() (<-chan time.Time, func()) {
	if sb.meterTick != nil {
		return sb.meterTick()
	}
	t := time.NewTicker(computePoll)
	return t.C, t.Stop
}

// stop ends sampling and returns the CPU time used (0 when unmetered).
func (m *meter) stop() time.Duration {
	m.cancel() // also cuts short a slow sample
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	// One last sample, where samples are cheap (cgroup files, containerd's
	// metrics): what the program used since the last tick counts too.
	if !m.slow && m.final != nil {
		ctx, cancel := context.WithTimeout(context.Background(), finalSample)
		used, err := m.final(ctx)
		cancel()
		if err == nil && used > m.last {
			m.last = used
		}
		m.final = nil
	}
	return m.last
}

// sampleMemory records the container's peak memory use, when the driver
// can read it. The meter calls it every computePoll during a run; the
// cgroup, and with it the figure, goes when the container exits.
func (sb *sandbox) sampleMemory(ctx context.Context) {
	mm, ok := sb.driver.(MemoryMeter)
	if !ok {
		return
	}
	if v, err := mm.MemoryPeak(ctx, sb.id); err == nil && v > sb.peakMemory.Load() {
		sb.peakMemory.Store(v)
	}
}
