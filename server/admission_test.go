package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
)

func TestAdmission(t *testing.T) {
	ctx := context.Background()
	py := backend.Python
	alpha := Tenant{Name: "alpha", MaxRuns: 1, Queue: 1}
	beta := Tenant{Name: "beta", MaxRuns: 2, Queue: 2}
	// The server runs 2 at once and queues 2, whoever waits.
	a := newAdmission(2, 2, 1000)

	relA, err := a.acquire(ctx, alpha, py)
	if err != nil {
		t.Fatal(err)
	}
	// alpha at its quota waits (its queue has room) ...
	waitA := make(chan error, 1)
	go func() {
		rel, err := a.acquire(ctx, alpha, py)
		if err == nil {
			rel()
		}
		waitA <- err
	}()
	waitFor(t, func() bool { _, w := a.counts("alpha"); return w == 1 })
	// ... a third alpha request is refused ...
	_, err = a.acquire(ctx, alpha, py)
	var rf *refusal
	if !errors.As(err, &rf) || rf.status != http.StatusTooManyRequests || rf.retryAfter != 1000 || !strings.Contains(rf.msg, `tenant "alpha"`) {
		t.Fatalf("alpha over its queue: %v", err)
	}
	// ... while beta still runs: the server has a second slot.
	relB, err := a.acquire(ctx, beta, py)
	if err != nil {
		t.Fatalf("beta refused while alpha is at its quota: %v", err)
	}
	// The server is full now: beta waits in the server's queue, and the
	// next one is refused naming the server, not a tenant.
	waitB := make(chan error, 1)
	go func() {
		rel, err := a.acquire(ctx, beta, py)
		if err == nil {
			rel()
		}
		waitB <- err
	}()
	waitFor(t, func() bool { _, w := a.counts("beta"); return w == 1 })
	if _, err := a.acquire(ctx, beta, py); !errors.As(err, &rf) || !strings.Contains(rf.msg, "the server is running") {
		t.Fatalf("beta with the server full: %v", err)
	}
	// Releasing alpha's slot frees one of the server's: alpha's waiter,
	// the oldest, fits and runs; beta's follows when it is done.
	relA()
	if err := <-waitA; err != nil {
		t.Fatal(err)
	}
	if err := <-waitB; err != nil {
		t.Fatal(err)
	}
	relB()
	relB() // a second release does nothing
	for _, name := range []string{"alpha", "beta"} {
		if r, w := a.counts(name); r != 0 || w != 0 {
			t.Errorf("%s: %d running, %d waiting after every release", name, r, w)
		}
	}
}

func TestAdmissionWaiterCancelled(t *testing.T) {
	a := newAdmission(1, 1, 1000)
	rel, err := a.acquire(context.Background(), Tenant{Name: "a"}, backend.Python)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := a.acquire(ctx, Tenant{Name: "b", Queue: 1}, backend.Python)
		done <- err
	}()
	waitFor(t, func() bool { _, w := a.counts("b"); return w == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if r, w := a.counts("b"); r != 0 || w != 0 {
		t.Fatalf("b: %d running, %d waiting", r, w)
	}
	// The server's one queue place is free again while the slot is
	// still held: another tenant's request waits in it, not refused.
	waited := make(chan error, 1)
	go func() {
		rel, err := a.acquire(context.Background(), Tenant{Name: "c", Queue: 1}, backend.Python)
		if err == nil {
			rel()
		}
		waited <- err
	}()
	waitFor(t, func() bool {
		_, w := a.counts("c")
		select {
		case err := <-waited:
			t.Fatalf("c was not queued: %v", err)
		default:
		}
		return w == 1
	})
	if r, w := a.langCounts(backend.Python); r != 1 || w != 1 {
		t.Fatalf("python: %d running, %d waiting; want 1, 1", r, w)
	}
	rel()
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if r, w := a.langCounts(backend.Python); r != 0 || w != 0 {
		t.Fatalf("python: %d running, %d waiting after every release", r, w)
	}
}

// A waiter woken by another tenant's release still needs a slot of its
// own tenant: alpha at its maxRuns stays queued while the server's slot
// goes to beta.
func TestAdmissionWokenWaiterKeepsItsTenantsQuota(t *testing.T) {
	ctx := context.Background()
	py := backend.Python
	alpha := Tenant{Name: "alpha", MaxRuns: 1, Queue: 1}
	beta := Tenant{Name: "beta", MaxRuns: 2, Queue: 1}
	a := newAdmission(2, 4, 1000)
	relA, err := a.acquire(ctx, alpha, py)
	if err != nil {
		t.Fatal(err)
	}
	relB, err := a.acquire(ctx, beta, py)
	if err != nil {
		t.Fatal(err)
	}
	// alpha waits for its own slot (the server's are both held too).
	alphaDone := make(chan error, 1)
	go func() {
		rel, err := a.acquire(ctx, alpha, py)
		if err == nil {
			rel()
		}
		alphaDone <- err
	}()
	waitFor(t, func() bool { _, w := a.counts("alpha"); return w == 1 })
	// beta's release frees a server slot; alpha still has none of its own.
	relB()
	if r, w := a.counts("alpha"); r != 1 || w != 1 {
		t.Fatalf("alpha: %d running, %d waiting after beta's release; want 1 running (its maxRuns), 1 waiting", r, w)
	}
	relB2, err := a.acquire(ctx, beta, py)
	if err != nil {
		t.Fatalf("beta could not take the free slot: %v", err)
	}
	relB2()
	relA()
	if err := <-alphaDone; err != nil {
		t.Fatal(err)
	}
	if r, w := a.counts("alpha"); r != 0 || w != 0 {
		t.Fatalf("alpha: %d running, %d waiting after every release", r, w)
	}
}

// langCounts reports a language's running and waiting runs.
func (a *admission) langCounts(l backend.Language) (running, waiting int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.langs[l]; s != nil {
		return s.running, s.waiting
	}
	return 0, 0
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
	}
}
