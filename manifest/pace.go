package manifest

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// relistCostFactor is how many times as long as a relisting and the
// rebuild it caused took the next relisting waits: a server whose tools
// change all the time gets at most 1/(1+relistCostFactor) of a core (and
// the garbage collector's share of that), whatever its list costs.
const relistCostFactor = 3

// collectAfterBytes is how many bytes of changed tools make the pacer
// collect garbage once the rebuild they caused is done (see release).
const collectAfterBytes = 1 << 20

// pacer spaces the work that changing tool lists cause by what it costs:
// each piece of work (a relisting, the subscribers' rebuild) is charged
// its duration, and the next relisting of any server waits until
// relistCostFactor times that has passed since the work ended — and until
// the rebuilds already asked for are done, so that no more than two
// generations of a list (the one offered, the one being built) are ever
// held at once.
type pacer struct {
	mu      sync.Mutex
	next    time.Time
	held    int           // rebuilds asked for and not done
	idle    chan struct{} // closed when held drops to 0
	changed int           // bytes of changed tools since the last collection
}

// charge records work that took d and ended now.
func (p *pacer) charge(d time.Duration) {
	if p == nil {
		return
	}
	t := time.Now().Add(relistCostFactor * d)
	p.mu.Lock()
	if t.After(p.next) {
		p.next = t
	}
	p.mu.Unlock()
}

// hold records a rebuild asked for, caused by bytes of changed tools.
func (p *pacer) hold(bytes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == 0 {
		p.idle = make(chan struct{})
	}
	p.held++
	p.changed += bytes
}

// addChanged counts bytes of changed tools whose rebuild was already
// asked for.
func (p *pacer) addChanged(bytes int) {
	p.mu.Lock()
	p.changed += bytes
	p.mu.Unlock()
}

// release records a rebuild done, which took d. After a rebuild of a
// large change it collects garbage: the generation the rebuild replaced
// is garbage now, and collecting it lets the heap's next goal follow the
// tools held rather than two generations of them (Go's collector lets the
// heap grow to twice what it found live).
func (p *pacer) release(d time.Duration) {
	p.charge(d)
	p.mu.Lock()
	p.held--
	collect := p.held == 0 && p.changed >= collectAfterBytes
	if collect {
		p.changed = 0
	}
	if p.held == 0 {
		close(p.idle)
	}
	p.mu.Unlock()
	if collect {
		runtime.GC()
	}
}

// wait returns once the rebuilds asked for are done and the work charged
// so far has been paid for, or with the context's error.
func (p *pacer) wait(ctx context.Context) error {
	if p == nil {
		return nil
	}
	for {
		p.mu.Lock()
		idle := p.idle
		if p.held == 0 {
			idle = nil
		}
		d := time.Until(p.next)
		p.mu.Unlock()
		if idle != nil {
			select {
			case <-idle:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}
