package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// fixedTable is a tenant table that changes only when the test sets it.
type fixedTable struct{ p atomic.Pointer[[]Tenant] }

func newTable(tenants ...Tenant) *fixedTable {
	tb := &fixedTable{}
	tb.set(tenants...)
	return tb
}

func (tb *fixedTable) set(tenants ...Tenant) { tb.p.Store(&tenants) }

// The total is divided max-min fairly: a tenant gets what its quota can
// use, (maxRuns + queue + 1) × the unit, when that is less than an even
// split of what is left; the others split the rest evenly.
func TestShareOut(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name    string
		tenants []Tenant
		total   int64
		want    map[string]int64
	}{
		{"serve's default: the anonymous tenant, maxRuns 2, queue 64", []Tenant{{Name: "anonymous", MaxRuns: 2, Queue: 64}}, 64 * mib, map[string]int64{"anonymous": 64 * mib}},
		{"no admission", []Tenant{{Name: "anonymous"}}, 64 * mib, map[string]int64{"anonymous": 64 * mib}},
		{"the issue's tenant: maxRuns 1, queue 0", []Tenant{{Name: "alpha", MaxRuns: 1}}, 64 * mib, map[string]int64{"alpha": 4 * mib}},
		{"the review's two tenants: maxRuns 1, queue 40", []Tenant{{Name: "alpha", MaxRuns: 1, Queue: 40}, {Name: "beta", MaxRuns: 1, Queue: 40}}, 64 * mib, map[string]int64{"alpha": 32 * mib, "beta": 32 * mib}},
		{"a small quota leaves the rest", []Tenant{{Name: "big", MaxRuns: 8, Queue: 64}, {Name: "small", MaxRuns: 1}}, 64 * mib, map[string]int64{"big": 60 * mib, "small": 4 * mib}},
		{"no maxRuns, and a huge quota", []Tenant{{Name: "free"}, {Name: "one", MaxRuns: 1}, {Name: "huge", MaxRuns: math.MaxInt, Queue: math.MaxInt}}, 64 * mib, map[string]int64{"one": 4 * mib, "free": 30 * mib, "huge": 30 * mib}},
		{"every need met", []Tenant{{Name: "a", MaxRuns: 1}, {Name: "b", MaxRuns: 2, Queue: 1}}, 64 * mib, map[string]int64{"a": 4 * mib, "b": 8 * mib}},
		{"an uneven split adds up to the total", []Tenant{{Name: "a"}, {Name: "b"}, {Name: "c"}}, 100, map[string]int64{"a": 33, "b": 33, "c": 34}},
		{"no tenants", nil, 64 * mib, map[string]int64{}},
		{"33 tenants in 64 MiB: each still gets one request, the shares add up to 66", thirtyThree(), 64 * mib, func() map[string]int64 {
			m := map[string]int64{}
			for _, tn := range thirtyThree() {
				m[tn.Name] = 2 * mib
			}
			return m
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			unit := int64(2 * mib)
			if c.total < unit {
				unit = 10
			}
			if got := shareOut(c.tenants, c.total, unit); !maps.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

// thirtyThree is a hosted platform's table one tenant past what the
// default 64 MiB gives 2 MiB each.
func thirtyThree() []Tenant {
	var tenants []Tenant
	for i := range 33 {
		tenants = append(tenants, Tenant{Name: fmt.Sprint("t", i), MaxRuns: 8, Queue: 8})
	}
	return tenants
}

// Whatever the tenants, each share is at least one request (unit) or the
// tenant's need if less. When the total has room for one request per
// tenant, the shares add up to at most the total (all of
// it while a tenant could use more), none is more than its tenant can
// use, and a tenant that gets less than it could use gets no less than
// any other but the rounding's byte: no tenant can be starved by the
// others' shares.
func FuzzShareOut(f *testing.F) {
	f.Add([]byte{1, 0, 1, 40, 1, 40}, uint32(64), uint8(2))
	f.Add([]byte{0, 0, 8, 64, 1, 0, 255, 255}, uint32(100), uint8(3))
	f.Fuzz(func(t *testing.T, quotas []byte, total uint32, unit uint8) {
		if unit == 0 || len(quotas) > 200 {
			return
		}
		var tenants []Tenant
		for i := 0; i+1 < len(quotas); i += 2 {
			tenants = append(tenants, Tenant{Name: fmt.Sprint(i), MaxRuns: int(quotas[i]), Queue: int(quotas[i+1])})
		}
		shares := shareOut(tenants, int64(total), int64(unit))
		for _, tn := range tenants {
			floor, need := int64(unit), tenantNeed(tn, int64(total), int64(unit))
			if need >= 0 && need < floor {
				floor = need
			}
			if shares[tn.Name] < floor {
				t.Fatalf("%+v: share %d, less than one request or its need, %d", tn, shares[tn.Name], floor)
			}
		}
		if int64(total) < int64(len(tenants))*int64(unit) {
			return // oversubscribed: the total binds (TestRequestsWaitForTheTotalAfterAReload)
		}
		var sum int64
		starved := int64(-1) // the least share of a tenant that could use more
		for _, tn := range tenants {
			s, need := shares[tn.Name], tenantNeed(tn, int64(total), int64(unit))
			sum += s
			if s < 0 || (need >= 0 && s > need) {
				t.Fatalf("%+v: share %d, need %d", tn, s, need)
			}
			if (need < 0 || s < need) && (starved < 0 || s < starved) {
				starved = s
			}
		}
		if len(shares) != len(tenants) || sum > int64(total) || (starved >= 0 && sum != int64(total)) {
			t.Fatalf("%d shares adding up to %d of %d: %v", len(shares), sum, total, shares)
		}
		for _, s := range shares {
			if starved >= 0 && s > starved+1 && s > 0 {
				// A share above a short tenant's is only a need met.
				for _, tn := range tenants {
					if shares[tn.Name] == s && tenantNeed(tn, int64(total), int64(unit)) != s {
						t.Fatalf("a tenant short of its need got %d while %+v got %d", starved, tn, s)
					}
				}
			}
		}
	})
}

// A tenant's requests hold at most its share; beyond that a request is
// refused at once, whatever the total has room for, and shrinking or
// releasing makes room again. Another tenant's share is its own. A tenant
// gone from the table has none (401).
func TestIntakeTenantShare(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a request waiting for the total fails
	defer cancel()
	alpha := Tenant{Name: "alpha", MaxRuns: 1, Queue: 0} // 200 bytes
	beta := Tenant{Name: "beta", MaxRuns: 1, Queue: 40}  // the rest
	table := newTable(alpha, beta)
	in := newIntake(1000, 100, 1000, table.p.Load)
	r1, err := in.reserve(ctx, alpha, 100)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := in.reserve(ctx, alpha, 100)
	if err != nil {
		t.Fatal(err)
	}
	_, err = in.reserve(ctx, alpha, 1)
	var rf *refusal
	if !errors.As(err, &rf) || rf.status != http.StatusTooManyRequests || rf.retryAfter != 1000 ||
		!strings.Contains(rf.msg, `tenant "alpha" is at its quota: its requests hold 200B, and a request of up to 1B would exceed its share of the server's request memory, 200B; retry later`) {
		t.Fatalf("over the share: %v", err)
	}
	// beta's share is the other 800 bytes, whatever alpha holds.
	var betas []*reservation
	for range 8 {
		r, err := in.reserve(ctx, beta, 100)
		if err != nil {
			t.Fatalf("beta within its share: %v", err)
		}
		betas = append(betas, r)
	}
	if _, err := in.reserve(ctx, beta, 1); !errors.As(err, &rf) || rf.status != http.StatusTooManyRequests || !strings.Contains(rf.msg, "its share of the server's request memory, 800B") {
		t.Fatalf("beta over its share: %v", err)
	}
	r1.shrink(40)
	r1.shrink(90) // never grows
	if total, a := in.held("alpha"); total != 940 || a != 140 {
		t.Fatalf("held %d, alpha %d; want 940, 140", total, a)
	}
	r3, err := in.reserve(ctx, alpha, 60)
	if err != nil {
		t.Fatalf("after a shrink: %v", err)
	}
	// A tenant the table no longer has gets no share.
	table.set(beta)
	if _, err := in.reserve(ctx, alpha, 1); !errors.As(err, &rf) || rf != unauthorized {
		t.Fatalf("a tenant gone from the table: %v", err)
	}
	for _, r := range append(betas, r1, r2, r3, r1) { // a second release does nothing
		r.release()
	}
	r2.shrink(0)                  // nor a shrink after release
	(*reservation)(nil).release() // nor a nil one's
	if total, a := in.held("alpha"); total != 0 || a != 0 || len(in.holds) != 0 {
		t.Fatalf("held %d, alpha %d, holds %v after every release", total, a, in.holds)
	}
}

// The shares add up to the total, so the total binds only while requests
// admitted under a replaced table hold more than the new shares leave:
// then a request within its share waits, oldest first (a small one does
// not overtake a large one), and gets 503 when its context ends.
func TestIntakeTotalWaits(t *testing.T) {
	ctx := context.Background()
	anon, b, c, d := Tenant{Name: "anonymous"}, Tenant{Name: "b"}, Tenant{Name: "c"}, Tenant{Name: "d"}
	table := newTable(anon) // anonymous's share: the whole 400
	in := newIntake(400, 100, 1000, table.p.Load)
	first, err := in.reserve(ctx, anon, 350)
	if err != nil {
		t.Fatal(err)
	}
	table.set(anon, b, c, d) // 100 each now
	var rf *refusal
	if _, err := in.reserve(ctx, anon, 1); !errors.As(err, &rf) || rf.status != http.StatusTooManyRequests {
		t.Fatalf("anonymous past its new share: %v", err)
	}
	type got struct {
		r   *reservation
		err error
	}
	large, small := make(chan got, 1), make(chan got, 1)
	go func() { r, err := in.reserve(ctx, b, 100); large <- got{r, err} }()
	waitFor(t, func() bool { in.mu.Lock(); defer in.mu.Unlock(); return len(in.waiters) == 1 })
	go func() { r, err := in.reserve(ctx, c, 10); small <- got{r, err} }()
	waitFor(t, func() bool { in.mu.Lock(); defer in.mu.Unlock(); return len(in.waiters) == 2 })
	// 10 bytes would fit now, but the 100 before them do not.
	select {
	case g := <-small:
		t.Fatalf("the small request overtook the large one: %v", g.err)
	default:
	}
	// One that gives up gets 503 and leaves the queue.
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = in.reserve(tctx, d, 100)
	cancel()
	if !errors.As(err, &rf) || rf.status != http.StatusServiceUnavailable || rf.retryAfter != 1000 || !strings.Contains(rf.msg, "holds as many request bytes as it may (400B") {
		t.Fatalf("a waiter whose context ended: %v", err)
	}
	if _, dHeld := in.held("d"); dHeld != 0 {
		t.Fatalf("d holds %d after it gave up", dHeld)
	}
	first.shrink(250) // 350 → 250: the large one fits, then the small one
	g1, g2 := <-large, <-small
	if g1.err != nil || g2.err != nil {
		t.Fatalf("%v %v", g1.err, g2.err)
	}
	if total, _ := in.held(""); total != 360 {
		t.Fatalf("held %d, want 360", total)
	}
	for _, r := range []*reservation{first, g1.r, g2.r} {
		r.release()
	}
	if total, _ := in.held(""); total != 0 || len(in.holds) != 0 || len(in.waiters) != 0 {
		t.Fatalf("held %d, holds %v, waiters %d after every release", total, in.holds, len(in.waiters))
	}
}

// readAtMost returns exactly what it read, in a buffer of that size, and
// stops past the limit. With reserve it reads no more than its first
// 4 KiB before reserve agreed: exactly the length when the input ends
// within them, else the limit; reserve's error is returned.
func TestReadAtMost(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, smallRequest - 1, smallRequest, smallRequest + 1, 64 << 10, 200<<10 + 7} {
		in := bytes.Repeat([]byte("abcdefg"), n/7+1)[:n]
		src := &countingReader{r: iotest.HalfReader(bytes.NewReader(in))}
		var reserved []int64
		read := -1
		got, err := readAtMost(src, 1<<20, func(m int64) error {
			reserved, read = append(reserved, m), src.n
			return nil
		})
		if err != nil || !bytes.Equal(got, in) || cap(got) != n {
			t.Fatalf("%d bytes: got %d (cap %d), %v", n, len(got), cap(got), err)
		}
		want := []int64{int64(n)}
		if n >= smallRequest {
			want = []int64{1 << 20}
		}
		if !slices.Equal(reserved, want) || read > smallRequest {
			t.Fatalf("%d bytes: reserved %v having read %d, want %v before more than %d", n, reserved, read, want, smallRequest)
		}
		if n > 0 {
			if _, err := readAtMost(bytes.NewReader(in), int64(n-1), nil); !errors.Is(err, errOverLimit) {
				t.Fatalf("%d bytes with a limit of %d: %v", n, n-1, err)
			}
		}
	}
	boom := errors.New("boom")
	if _, err := readAtMost(io.MultiReader(strings.NewReader("x"), iotest.ErrReader(boom)), 10, nil); !errors.Is(err, boom) {
		t.Fatalf("a read error: %v", err)
	}
	// A refusal stops the read at the first 4 KiB.
	src := &countingReader{r: bytes.NewReader(make([]byte, 1<<20))}
	no := &refusal{status: http.StatusTooManyRequests}
	if _, err := readAtMost(src, 2<<20, func(int64) error { return no }); err != no || src.n != smallRequest {
		t.Fatalf("refused: %v after %d bytes", err, src.n)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// unquote decodes string literals as encoding/json does.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`""`, `"x"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u20ac"`, `"\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`, `"\ud800\ud800\udc00"`, `"é\u2028"`, `1`, `null`, `"\x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		var want string
		werr := jsonUnmarshalString(lit, &want)
		got, ok := unquote(lit)
		if werr != nil {
			return // unquote is only given valid literals
		}
		if !ok || got != want {
			t.Fatalf("%q: unquote %q, %v; encoding/json %q", lit, got, ok, want)
		}
	})
}

// jsonUnmarshalString is json.Unmarshal of a string literal as the
// decoder hands it to rawRef: no space around it.
func jsonUnmarshalString(lit []byte, s *string) error {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return errors.New("not a string")
	}
	return json.Unmarshal(lit, s)
}
