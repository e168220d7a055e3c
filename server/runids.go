package server

import (
	"container/list"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// A run's id is its identity: a daemon runs one id at most once. A client
// that lost its connection before it could read accepted does not know
// whether the run started, and retries under the same id; the daemon that
// accepted it refuses the retry (409) instead of running it again, so
// a server-side tool is never called twice for one run. The ids a daemon
// remembers are bounded (RunIDMemory, RunIDWindow); only explicit ids are
// remembered — an id the daemon made up cannot come back.
const (
	// RunIDWindow is how long an accepted id is remembered.
	RunIDWindow = 10 * time.Minute
	// RunIDMemory bounds the ids remembered: past it the oldest go.
	RunIDMemory = 16384
)

// CodeDuplicateRun names a start refused because its id was accepted
// before.
const CodeDuplicateRun = "duplicate-run"

// runIDs is the set of ids claimed (a run being admitted) or accepted (in
// the window), per tenant.
type runIDs struct {
	mu    sync.Mutex
	byKey map[string]*list.Element
	order *list.List // of *runIDEntry, oldest first
	now   func() time.Time
}

type runIDEntry struct {
	key      string
	accepted time.Time // zero while claimed
}

func newRunIDs() *runIDs {
	return &runIDs{byKey: map[string]*list.Element{}, order: list.New(), now: time.Now}
}

func runIDKey(tenant, id string) string { return tenant + "\x00" + id }

// claim reserves id for a run about to be admitted. It fails, with the
// refusal to send, when the id is claimed by a run being admitted or was
// accepted within RunIDWindow.
func (r *runIDs) claim(tenant, id string) *refusal {
	key := runIDKey(tenant, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if el, ok := r.byKey[key]; ok {
		e := el.Value.(*runIDEntry)
		if e.accepted.IsZero() {
			return &refusal{status: http.StatusConflict, msg: fmt.Sprintf("%s: run id %q is being started by another request; a run id runs at most once", CodeDuplicateRun, truncateName(id))}
		}
		if now.Sub(e.accepted) < RunIDWindow {
			return &refusal{status: http.StatusConflict, msg: fmt.Sprintf("%s: run id %q was accepted by this daemon %v ago; a run id runs at most once, so it is not run again (its outcome went to the connection that started it; use a new id for a new run)", CodeDuplicateRun, truncateName(id), now.Sub(e.accepted).Round(time.Millisecond))}
		}
		r.order.Remove(el)
		delete(r.byKey, key)
	}
	for r.order.Len() >= RunIDMemory {
		oldest := r.order.Front()
		r.order.Remove(oldest)
		delete(r.byKey, oldest.Value.(*runIDEntry).key)
	}
	r.byKey[key] = r.order.PushBack(&runIDEntry{key: key})
	return nil
}

// accept marks a claimed id accepted: remembered for RunIDWindow.
func (r *runIDs) accept(tenant, id string) {
	key := runIDKey(tenant, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.byKey[key]; ok {
		el.Value.(*runIDEntry).accepted = r.now()
		r.order.MoveToBack(el)
	}
}

// release forgets a claimed id whose run never started: it may be tried
// again. An accepted id stays.
func (r *runIDs) release(tenant, id string) {
	key := runIDKey(tenant, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.byKey[key]; ok && el.Value.(*runIDEntry).accepted.IsZero() {
		r.order.Remove(el)
		delete(r.byKey, key)
	}
}

// forget forgets an accepted id whose program never started (the runtime
// could not start it): nothing ran, so a retry may run it.
func (r *runIDs) forget(tenant, id string) {
	key := runIDKey(tenant, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.byKey[key]; ok {
		r.order.Remove(el)
		delete(r.byKey, key)
	}
}
