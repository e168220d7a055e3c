package container

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// pool keeps pre-started sandboxes — container running, runner connected
// and said hello, interpreter loaded — waiting for a program. Each is used
// for exactly one program and then torn down like any other; the pool only
// moves the start-up cost off the request path. It refills in the
// background with bounded concurrency and replaces sandboxes that sat idle
// longer than the TTL or died while waiting.
type pool struct {
	// startFn starts one sandbox: the same start a cold run makes.
	startFn startFunc
	size    int
	ttl     time.Duration
	fill    int // concurrent starts
	log     *slog.Logger

	mu       sync.Mutex
	idle     []*sandbox
	starting int
	closed   bool

	wake chan struct{}
	stop context.CancelFunc
	ctx  context.Context
	wg   sync.WaitGroup
}

// Pool defaults.
const (
	defaultPoolTTL  = 5 * time.Minute
	defaultPoolFill = 2
	// poolRetryDelay spaces refill attempts after a failed start so a
	// missing image does not spin.
	poolRetryDelay = 2 * time.Second
)

// startFunc starts a sandbox whose runner has said hello.
type startFunc func(ctx context.Context, runID string, log *slog.Logger) (*sandbox, error)

func newPool(start startFunc, log *slog.Logger, size int, ttl time.Duration, fill int) *pool {
	if ttl <= 0 {
		ttl = defaultPoolTTL
	}
	if fill <= 0 {
		fill = defaultPoolFill
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{startFn: start, size: size, ttl: ttl, fill: fill, log: log.With("component", "pool"), wake: make(chan struct{}, 1), ctx: ctx, stop: cancel}
	p.wg.Add(1)
	go p.maintain()
	return p
}

// get returns a ready sandbox, or nil when none is ready. It never waits.
func (p *pool) get() *sandbox {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.poke()
	for len(p.idle) > 0 {
		sb := p.idle[0]
		p.idle = p.idle[1:]
		if sb.healthy() && time.Since(sb.readyAt) < p.ttl {
			return sb
		}
		p.discard(sb)
	}
	return nil
}

// healthy reports that an idle sandbox's container is running and its
// runner has sent nothing since hello (any frame or a closed connection
// while idle means it is unusable).
func (sb *sandbox) healthy() bool {
	select {
	case <-sb.exit:
		return false
	case <-sb.peer.frames:
		return false
	default:
		return true
	}
}

func (p *pool) discard(sb *sandbox) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		sb.teardown(context.Background(), p.log)
	}()
}

func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// maintain keeps idle+starting at size and evicts expired sandboxes.
func (p *pool) maintain() {
	defer p.wg.Done()
	tick := time.NewTicker(p.ttl / 4)
	defer tick.Stop()
	p.poke()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-tick.C:
			p.evict()
		case <-p.wake:
		}
		p.mu.Lock()
		need := p.size - len(p.idle) - p.starting
		if room := p.fill - p.starting; need > room {
			need = room
		}
		p.starting += max(need, 0)
		p.mu.Unlock()
		for i := 0; i < need; i++ {
			p.wg.Add(1)
			go p.start()
		}
	}
}

func (p *pool) evict() {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.idle[:0]
	for _, sb := range p.idle {
		if sb.healthy() && time.Since(sb.readyAt) < p.ttl {
			kept = append(kept, sb)
		} else {
			p.discard(sb)
		}
	}
	p.idle = kept
	p.poke()
}

func (p *pool) start() {
	defer p.wg.Done()
	runID := newRunID()
	sb, err := p.startFn(p.ctx, runID, p.log.With("run_id", runID))
	if err != nil && p.ctx.Err() == nil {
		// Count as starting while backing off, so a persistent failure
		// (a missing image) is retried at a bounded rate.
		p.log.Warn("warm pool could not start a sandbox", "err", err)
		select {
		case <-time.After(poolRetryDelay):
		case <-p.ctx.Done():
		}
	}
	p.mu.Lock()
	p.starting--
	if err == nil && !p.closed {
		p.idle = append(p.idle, sb)
		sb = nil
	}
	p.mu.Unlock()
	if err == nil && sb != nil {
		p.discard(sb)
	}
	p.poke()
}

// close stops refilling, tears every idle sandbox down and waits for
// in-progress starts and teardowns. A start it interrupts removes what it
// made (startSandbox); one that completes anyway is torn down (start).
// A removal that fails leaves the container with the runtime's orphans,
// which Runtime.Close retries.
func (p *pool) close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	p.stop()
	for _, sb := range idle {
		p.discard(sb)
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// idleCount reports ready sandboxes (for tests and metrics).
func (p *pool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
