package server

// Memory before admission: a request body or a session's start frame is
// read only into bytes the intake reserved for it first, per tenant and
// in total, so no number of requests makes the server hold more than its
// tenants' quotas allow while it reads, decodes and prepares them.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"

	"github.com/docker/go-units"
)

// DefaultMaxRequestBytes bounds the bytes of request bodies and session
// start frames the server holds at once, all tenants together, unless
// WithMaxRequestBytes says otherwise: 32 requests at the default body
// limit, thousands of ordinary ones.
const DefaultMaxRequestBytes = 64 << 20

// smallRequest is how much of a body of unknown length (a chunked POST, a
// session's start frame) is read before more is reserved for it: no more
// than a connection's own read buffer holds. When the request ends within
// it, exactly its bytes are reserved, else the body limit. A session
// reserves it at its upgrade, before it reads (a chunked POST after it),
// so a tenant's share bounds its sessions yet to send a start frame.
const smallRequest = 4 << 10

// intake reserves the bytes of requests before they are read. A request
// holds its reservation from before it is read (beyond its first
// smallRequest bytes when its length is not announced) until it ends: its
// run done, or it was refused.
//
// The total is divided among the tenants (shareOut): each tenant's
// requests hold at most its share, and every tenant's share is there for
// it whatever the others do, because the shares add up to no more than
// the total when the total has room for one request of the body limit
// per tenant. With more tenants than that the table is still taken (a
// warning is logged): each share is then one request and the total
// binds. A request that would take its tenant past its share is refused
// at once with 429 (as admission refuses a tenant at its quota), before
// its body is read. The total is checked too, for the moments the shares
// do not describe what is held (a new tenant table while requests under
// the old one still hold their bytes, or shares adding up to more than
// the total): beyond it a request waits,
// in order of arrival, within the body timeout, then gets 503.
type intake struct {
	total        int64
	unit         int64 // the body limit
	retryAfterMs int64
	// table is the tenants now, the same pointer while they do not
	// change (auth.go).
	table func() *[]Tenant

	mu      sync.Mutex
	used    int64
	holds   map[string]int64 // by tenant
	waiters []*intakeWaiter
	// shares are the shares of sharesOf, the table they were computed
	// for.
	sharesOf *[]Tenant
	shares   map[string]int64
}

type intakeWaiter struct {
	n       int64
	ready   chan struct{}
	granted bool
}

func newIntake(total, unit, retryAfterMs int64, table func() *[]Tenant) *intake {
	return &intake{total: total, unit: unit, retryAfterMs: retryAfterMs, table: table, holds: map[string]int64{}}
}

// tenantNeed is the most a tenant's requests can usefully hold: what its
// admitted and queued runs may carry plus one request being read,
// (maxRuns + queue + 1) × unit; -1 for a tenant without maxRuns (no bound
// of its own).
func tenantNeed(t Tenant, total, unit int64) int64 {
	if t.MaxRuns <= 0 {
		return -1
	}
	// From this many units on a need is more than the total: no bound
	// either (and no overflow).
	most := total/unit + 1
	if int64(t.MaxRuns) >= most || int64(t.Queue) >= most {
		return -1
	}
	if w := int64(t.MaxRuns) + int64(t.Queue) + 1; w < most {
		return w * unit
	}
	return -1
}

// shareOut divides total among tenants, max-min fairly: a tenant gets
// what it can use (tenantNeed) when that is less than an even split of
// what is left, and the tenants that can use more split the rest evenly.
// The shares add up to at most total when total is at least
// len(tenants) × unit. Each share is at least the smaller of its tenant's
// need and unit, so each tenant can send one request of the body limit
// even when the shares then add up to more than total (sharesWarning):
// total stays the daemon's bound, and requests past it wait, then get
// 503.
func shareOut(tenants []Tenant, total, unit int64) map[string]int64 {
	type need struct {
		name string
		n    int64 // -1: no bound
	}
	needs := make([]need, 0, len(tenants))
	for _, t := range tenants {
		needs = append(needs, need{t.Name, tenantNeed(t, total, unit)})
	}
	slices.SortStableFunc(needs, func(a, b need) int {
		switch {
		case a.n == b.n:
			return 0
		case a.n < 0:
			return 1
		case b.n < 0:
			return -1
		}
		return cmp.Compare(a.n, b.n)
	})
	shares := make(map[string]int64, len(needs))
	left := total
	for i, nd := range needs {
		s := left / int64(len(needs)-i)
		if nd.n >= 0 && nd.n < s {
			s = nd.n
		}
		floor := unit
		if nd.n >= 0 && nd.n < unit {
			floor = nd.n
		}
		s = max(s, floor)
		shares[nd.name] = s
		left = max(left-s, 0)
	}
	return shares
}

// sharesWarning says, for serve's log, when total cannot give each of
// the tenants room for one request of the body limit, unit: the table is
// taken anyway, each tenant's share is then at least one request
// (shareOut), the shares add up to more than total, and total binds
// (requests wait, then get 503). It is "" when the table fits.
func sharesWarning(tenants []Tenant, total, unit int64) string {
	if n := int64(len(tenants)); n > 0 && total/n < unit {
		return fmt.Sprintf("%d tenants would need a request memory (serve --max-request-memory) of %s, %d × the %s a request may be, for each to have room for one whatever the others hold; it is %s: each tenant's share is raised to one request, and past the total requests wait, then get 503",
			n, units.BytesSize(float64(n*unit)), n, units.BytesSize(float64(unit)), units.BytesSize(float64(total)))
	}
	return ""
}

// shareOf is the share of the tenant named name in the table now, and
// false when the table no longer has it; mu is held.
func (in *intake) shareOf(name string) (int64, bool) {
	if t := in.table(); t != in.sharesOf {
		in.shares, in.sharesOf = shareOut(*t, in.total, in.unit), t
	}
	s, ok := in.shares[name]
	return s, ok
}

// reservation is the bytes one request holds.
type reservation struct {
	in     *intake
	tenant string
	n      int64
	done   bool
}

// reserve takes n bytes (at most the body limit) for one of t's requests.
// It returns a *refusal: 429 when they would take t's requests past its
// share, 401 when t is no longer in the tenant table, 503 when ctx ends
// while the request waits for the total.
func (in *intake) reserve(ctx context.Context, t Tenant, n int64) (*reservation, error) {
	in.mu.Lock()
	share, known := in.shareOf(t.Name)
	if !known {
		in.mu.Unlock()
		return nil, unauthorized
	}
	held := in.holds[t.Name]
	if held+n > share {
		in.mu.Unlock()
		// Its share and what it holds only: not how many tenants there
		// are, nor the daemon's total.
		return nil, &refusal{status: http.StatusTooManyRequests, retryAfter: in.retryAfterMs,
			msg: fmt.Sprintf("tenant %q is at its quota: its requests hold %s, and a request of up to %s would exceed its share of the server's request memory, %s; retry later",
				t.Name, units.BytesSize(float64(held)), units.BytesSize(float64(n)), units.BytesSize(float64(share)))}
	}
	in.holds[t.Name] = held + n
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
	if left := in.holds[tenant] - n; left > 0 {
		in.holds[tenant] = left
	} else {
		delete(in.holds, tenant)
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

// grow raises the reservation to n bytes, taking the difference as
// reserve takes a request's (the tenant's share full: 429; the total
// full: wait for it until ctx ends, then 503); it does nothing when the
// reservation already holds n.
func (r *reservation) grow(ctx context.Context, t Tenant, n int64) error {
	if n <= r.n {
		return nil
	}
	more, err := r.in.reserve(ctx, t, n-r.n)
	if err != nil {
		return err
	}
	in := r.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if r.done { // released meanwhile: give the difference back too
		more.done = true
		in.untake(more.tenant, more.n, true)
		return nil
	}
	more.done = true
	r.n += more.n
	return nil
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

// release gives the reservation back; calls after the first do nothing,
// nor does a nil reservation's.
func (r *reservation) release() {
	if r == nil {
		return
	}
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
	return in.used, in.holds[tenant]
}

// errOverLimit is a body or frame longer than the limit readAtMost was
// given.
var errOverLimit = errors.New("over the limit")

// readAtMost reads r to its end into a buffer of exactly its length and
// returns errOverLimit once it has more than limit bytes. It allocates
// about twice the length: chunks while it reads (doubling from
// smallRequest to 64 KiB), then the result (io.ReadAll allocates five
// times a large input growing its buffer by a quarter at a time, and
// leaves up to a quarter unused).
//
// With reserve, nothing past the first smallRequest bytes is read before
// reserve returned nil: it is called once, with the length when r ends
// within them, else with limit (the caller shrinks the reservation to the
// length read). Its error is returned as it is.
func readAtMost(r io.Reader, limit int64, reserve func(n int64) error) ([]byte, error) {
	const first, most = smallRequest, 64 << 10
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
		end := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !end {
			return nil, err
		}
		if reserve != nil { // after the first read
			want := limit
			if end {
				want = total
			}
			if err := reserve(want); err != nil {
				return nil, err
			}
			reserve = nil
		}
		if end {
			break
		}
		size = min(2*size, most)
		buf = make([]byte, min(size, limit+1-total))
	}
	switch len(chunks) {
	case 0:
		return []byte{}, nil
	case 1:
		if c := chunks[0]; len(c) == cap(c) {
			return c, nil
		}
	}
	out := make([]byte, 0, total)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out, nil
}
