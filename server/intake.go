package server

// Memory before admission: a request body or a session's start frame is
// read only into bytes the intake reserved for it first, per tenant and
// in total, so no number of requests makes the server hold more than its
// tenants' quotas allow while it reads, decodes and prepares them.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/docker/go-units"
)

// DefaultMaxRequestBytes bounds the bytes of request bodies and session
// start frames the server holds at once, all tenants together, unless
// WithMaxRequestBytes says otherwise: 32 requests at the default body
// limit, thousands of ordinary ones.
const DefaultMaxRequestBytes = 64 << 20

// intake reserves the bytes of requests before they are read. A request
// holds its reservation from before its first byte is read until it
// ends: its run done, or it was refused. A tenant's requests hold at most
// its budget, (maxRuns + queue + 1) × the body limit — what its admitted
// and queued runs may carry plus one request being read — and beyond it a
// request is refused at once with 429, as admission refuses a tenant at
// its quota. A tenant without maxRuns has no budget of its own. All
// requests together hold at most the total; beyond it a request waits,
// in order of arrival, within the body timeout, then gets 503.
type intake struct {
	total        int64
	unit         int64 // the body limit
	retryAfterMs int64

	mu      sync.Mutex
	used    int64
	tenants map[string]int64
	waiters []*intakeWaiter
}

type intakeWaiter struct {
	n       int64
	ready   chan struct{}
	granted bool
}

func newIntake(total, unit, retryAfterMs int64) *intake {
	return &intake{total: total, unit: unit, retryAfterMs: retryAfterMs, tenants: map[string]int64{}}
}

// budget is the most t's requests may hold at once, 0 for no bound but
// the total.
func (in *intake) budget(t Tenant) int64 {
	if t.MaxRuns <= 0 {
		return 0
	}
	return int64(t.MaxRuns+t.Queue+1) * in.unit
}

// reservation is the bytes one request holds.
type reservation struct {
	in     *intake
	tenant string
	n      int64
	done   bool
}

// reserve takes n bytes (at most the body limit) for one of t's requests.
// It returns a *refusal: 429 when t's requests hold its budget, 503 when
// ctx ends while the request waits for the total.
func (in *intake) reserve(ctx context.Context, t Tenant, n int64) (*reservation, error) {
	in.mu.Lock()
	held := in.tenants[t.Name]
	if b := in.budget(t); b > 0 && held+n > b {
		in.mu.Unlock()
		return nil, &refusal{status: http.StatusTooManyRequests, retryAfter: in.retryAfterMs,
			msg: fmt.Sprintf("tenant %q is at its quota: its requests hold %s, and a request of up to %s would exceed the %s its quota allows (maxRuns %d + queue %d + 1 requests of up to %s); retry later",
				t.Name, units.BytesSize(float64(held)), units.BytesSize(float64(n)), units.BytesSize(float64(b)), t.MaxRuns, t.Queue, units.BytesSize(float64(in.unit)))}
	}
	in.tenants[t.Name] = held + n
	r := &reservation{in: in, tenant: t.Name, n: n}
	if len(in.waiters) == 0 && in.used+n <= in.total {
		in.used += n
		in.mu.Unlock()
		return r, nil
	}
	w := &intakeWaiter{n: n, ready: make(chan struct{})}
	in.waiters = append(in.waiters, w)
	in.mu.Unlock()

	select {
	case <-w.ready:
		return r, nil
	case <-ctx.Done():
	}
	in.mu.Lock()
	if w.granted { // granted as ctx ended: give it back
		in.mu.Unlock()
		r.release()
	} else {
		for i, x := range in.waiters {
			if x == w {
				in.waiters = append(in.waiters[:i], in.waiters[i+1:]...)
				break
			}
		}
		in.untake(t.Name, n, false)
		in.mu.Unlock()
	}
	return nil, &refusal{status: http.StatusServiceUnavailable, retryAfter: in.retryAfterMs,
		msg: fmt.Sprintf("the server holds as many request bytes as it may (%s, serve --max-request-memory); retry later", units.BytesSize(float64(in.total)))}
}

// untake gives back n of tenant's bytes (and of the total when counted)
// and lets waiters in; mu is held.
func (in *intake) untake(tenant string, n int64, counted bool) {
	if left := in.tenants[tenant] - n; left > 0 {
		in.tenants[tenant] = left
	} else {
		delete(in.tenants, tenant)
	}
	if counted {
		in.used -= n
	}
	// Oldest first; one that does not fit holds up those behind it.
	for len(in.waiters) > 0 && in.used+in.waiters[0].n <= in.total {
		w := in.waiters[0]
		in.waiters[0] = nil
		in.waiters = in.waiters[1:]
		in.used += w.n
		w.granted = true
		close(w.ready)
	}
}

// shrink lowers the reservation to n bytes, once the request is read and
// its size known.
func (r *reservation) shrink(n int64) {
	in := r.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if r.done || n >= r.n {
		return
	}
	in.untake(r.tenant, r.n-n, true)
	r.n = n
}

// release gives the reservation back; calls after the first do nothing.
func (r *reservation) release() {
	in := r.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	in.untake(r.tenant, r.n, true)
}

// held reports the bytes held, in total and by tenant (for tests and
// metrics).
func (in *intake) held(tenant string) (total, ofTenant int64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.used, in.tenants[tenant]
}

// errOverLimit is a body or frame longer than the limit readAtMost was
// given.
var errOverLimit = errors.New("over the limit")

// readAtMost reads r to its end into a buffer of exactly its length and
// returns errOverLimit once it has more than limit bytes. It allocates
// about twice the length: chunks while it reads (doubling from 512 bytes
// to 64 KiB), then the result (io.ReadAll allocates five times a large
// input growing its buffer by a quarter at a time, and leaves up to a
// quarter unused).
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	const first, most = 512, 64 << 10
	var (
		chunks [][]byte
		total  int64
		size   = int64(first)
	)
	buf := make([]byte, min(size, limit+1))
	for {
		n, err := io.ReadFull(r, buf)
		total += int64(n)
		if total > limit {
			return nil, errOverLimit
		}
		if n > 0 {
			chunks = append(chunks, buf[:n])
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		size = min(2*size, most)
		buf = make([]byte, min(size, limit+1-total))
	}
	switch len(chunks) {
	case 0:
		return []byte{}, nil
	case 1:
		return chunks[0], nil
	}
	out := make([]byte, 0, total)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out, nil
}
