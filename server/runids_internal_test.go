package server

import (
	"strconv"
	"testing"
	"time"
)

// The ids remembered are bounded in time (RunIDWindow), in number
// (RunIDMemory, the oldest go first) and per tenant.
func TestRunIDsBounds(t *testing.T) {
	now := time.Unix(1e9, 0)
	r := newRunIDs()
	r.now = func() time.Time { return now }
	if r.claim("a", "x") != nil {
		t.Fatal("a free id refused")
	}
	if rf := r.claim("a", "x"); rf == nil || rf.status != 409 {
		t.Fatal("an id being started claimed twice")
	}
	if r.claim("b", "x") != nil {
		t.Fatal("another tenant's id refused")
	}
	r.release("a", "x")
	if r.claim("a", "x") != nil {
		t.Fatal("a released id refused")
	}
	r.accept("a", "x")
	r.release("a", "x") // an accepted id stays
	now = now.Add(RunIDWindow - time.Second)
	if r.claim("a", "x") == nil {
		t.Fatal("an accepted id claimed again within the window")
	}
	now = now.Add(2 * time.Second)
	if r.claim("a", "x") != nil {
		t.Fatal("an id refused after the window")
	}
	r.accept("a", "x")
	for i := range RunIDMemory {
		if r.claim("c", strconv.Itoa(i)) != nil {
			t.Fatalf("id %d refused", i)
		}
		r.accept("c", strconv.Itoa(i))
	}
	if n := r.order.Len(); n != RunIDMemory || len(r.byKey) != RunIDMemory {
		t.Fatalf("%d ids remembered (%d keys), want %d", n, len(r.byKey), RunIDMemory)
	}
	if r.claim("a", "x") != nil {
		t.Fatal("the oldest id was not the one forgotten")
	}
	r.forget("a", "x")
	if _, ok := r.byKey[runIDKey("a", "x")]; ok {
		t.Fatal("forget kept the id")
	}
}
