package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// A tenant's requests hold at most (maxRuns + queue + 1) × the body
// limit; beyond that a request is refused at once, whatever the total
// has room for, and shrinking or releasing makes room again.
func TestIntakeTenantBudget(t *testing.T) {
	ctx := context.Background()
	in := newIntake(1<<20, 100, 1000)
	alpha := Tenant{Name: "alpha", MaxRuns: 1, Queue: 0} // 200 bytes
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
	if !errors.As(err, &rf) || rf.status != http.StatusTooManyRequests || rf.retryAfter != 1000 || !strings.Contains(rf.msg, `tenant "alpha" is at its quota: its requests hold 200B`) {
		t.Fatalf("over the budget: %v", err)
	}
	// Another tenant is not affected.
	rb, err := in.reserve(ctx, Tenant{Name: "beta", MaxRuns: 1}, 100)
	if err != nil {
		t.Fatal(err)
	}
	r1.shrink(40)
	r1.shrink(90) // never grows
	if total, a := in.held("alpha"); total != 240 || a != 140 {
		t.Fatalf("held %d, alpha %d; want 240, 140", total, a)
	}
	r3, err := in.reserve(ctx, alpha, 60)
	if err != nil {
		t.Fatalf("after a shrink: %v", err)
	}
	for _, r := range []*reservation{r1, r2, r3, rb, r1} { // a second release does nothing
		r.release()
	}
	r2.shrink(0) // nor a shrink after release
	if total, a := in.held("alpha"); total != 0 || a != 0 || len(in.tenants) != 0 {
		t.Fatalf("held %d, alpha %d, tenants %v after every release", total, a, in.tenants)
	}
}

// Beyond the total a request waits, oldest first (a small one does not
// overtake a large one), and gets 503 when its context ends; a tenant
// without maxRuns is bounded by the total alone.
func TestIntakeTotalWaits(t *testing.T) {
	ctx := context.Background()
	in := newIntake(300, 100, 1000)
	anon := Tenant{Name: "anonymous"}
	first, err := in.reserve(ctx, anon, 250)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		r   *reservation
		err error
	}
	large, small := make(chan got, 1), make(chan got, 1)
	go func() { r, err := in.reserve(ctx, anon, 100); large <- got{r, err} }()
	waitFor(t, func() bool { in.mu.Lock(); defer in.mu.Unlock(); return len(in.waiters) == 1 })
	go func() { r, err := in.reserve(ctx, Tenant{Name: "other"}, 10); small <- got{r, err} }()
	waitFor(t, func() bool { in.mu.Lock(); defer in.mu.Unlock(); return len(in.waiters) == 2 })
	// 10 bytes would fit now, but the 100 before them do not.
	select {
	case g := <-small:
		t.Fatalf("the small request overtook the large one: %v", g.err)
	default:
	}
	// One that gives up gets 503 and leaves the queue.
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = in.reserve(tctx, anon, 100)
	cancel()
	var rf *refusal
	if !errors.As(err, &rf) || rf.status != http.StatusServiceUnavailable || rf.retryAfter != 1000 || !strings.Contains(rf.msg, "holds as many request bytes as it may (300B") {
		t.Fatalf("a waiter whose context ended: %v", err)
	}
	first.shrink(150) // 250 → 150: the large one fits, then the small one
	g1, g2 := <-large, <-small
	if g1.err != nil || g2.err != nil {
		t.Fatalf("%v %v", g1.err, g2.err)
	}
	if total, _ := in.held(""); total != 260 {
		t.Fatalf("held %d, want 260", total)
	}
	for _, r := range []*reservation{first, g1.r, g2.r} {
		r.release()
	}
	if total, _ := in.held(""); total != 0 || len(in.tenants) != 0 || len(in.waiters) != 0 {
		t.Fatalf("held %d, tenants %v, waiters %d after every release", total, in.tenants, len(in.waiters))
	}
}

// readAtMost returns exactly what it read, in a buffer of that size when
// it took several reads, and stops past the limit.
func TestReadAtMost(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, 64 << 10, 200<<10 + 7} {
		in := bytes.Repeat([]byte("abcdefg"), n/7+1)[:n]
		got, err := readAtMost(iotest.HalfReader(bytes.NewReader(in)), int64(n))
		if err != nil || !bytes.Equal(got, in) {
			t.Fatalf("%d bytes: got %d, %v", n, len(got), err)
		}
		if n > 512 && cap(got) != n {
			t.Fatalf("%d bytes in a buffer of %d", n, cap(got))
		}
		if n > 0 {
			if _, err := readAtMost(bytes.NewReader(in), int64(n-1)); !errors.Is(err, errOverLimit) {
				t.Fatalf("%d bytes with a limit of %d: %v", n, n-1, err)
			}
		}
	}
	boom := errors.New("boom")
	if _, err := readAtMost(io.MultiReader(strings.NewReader("x"), iotest.ErrReader(boom)), 10); !errors.Is(err, boom) {
		t.Fatalf("a read error: %v", err)
	}
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
