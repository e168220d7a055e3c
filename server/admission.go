package server

// Admission per tenant and in total: a run needs a slot of its tenant
// (the tenant's maxRuns) and a slot of its language (the server's
// maxRuns), or waits in both queues, or is refused with 429.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
)

// admission hands out run slots. Waiters are served first come, first
// served among those that fit: a tenant at its quota never holds up
// another tenant's request.
type admission struct {
	maxRuns, queue int // per language; maxRuns 0: no bound
	retryAfterMs   int64

	mu      sync.Mutex
	langs   map[backend.Language]*slots
	tenants map[string]*slots
	waiters []*waiter
}

// slots counts runs holding a slot and runs waiting for one.
type slots struct{ running, waiting int }

type waiter struct {
	tenant  string
	lang    backend.Language
	max     int // the tenant's maxRuns when it arrived
	ready   chan struct{}
	granted bool
}

func newAdmission(maxRuns, queue int, retryAfterMs int64) *admission {
	return &admission{maxRuns: maxRuns, queue: queue, retryAfterMs: retryAfterMs, langs: map[backend.Language]*slots{}, tenants: map[string]*slots{}}
}

// acquire waits for a slot for one of t's runs in lang. It returns a
// *refusal (429) when both the slot and the queue are full, and ctx's
// error when ctx ends while it waits. release must be called exactly once
// when the run ends.
func (a *admission) acquire(ctx context.Context, t Tenant, lang backend.Language) (release func(), err error) {
	a.mu.Lock()
	ts, ls := a.tenantSlots(t.Name), a.langSlots(lang)
	if a.fits(t.MaxRuns, ts, ls) {
		ts.running++
		ls.running++
		a.mu.Unlock()
		return a.releaser(t.Name, lang), nil
	}
	// Every waiter counts against the server's queue, whether it waits
	// for its tenant's slot or the server's: --queue bounds the total.
	tenantQueueFull := ts.waiting >= t.Queue
	serverQueueFull := a.maxRuns > 0 && ls.waiting >= a.queue
	if tenantQueueFull || serverQueueFull {
		r := &refusal{status: http.StatusTooManyRequests, retryAfter: a.retryAfterMs,
			msg: fmt.Sprintf("the server is running as many %s programs as it may and its queue is full; retry later", lang)}
		if tenantQueueFull && t.MaxRuns > 0 && ts.running >= t.MaxRuns {
			r.msg = fmt.Sprintf("tenant %q is at its quota: %d runs in flight and %d waiting (maxRuns %d, queue %d); retry later", t.Name, ts.running, ts.waiting, t.MaxRuns, t.Queue)
		}
		a.tidy(t.Name)
		a.mu.Unlock()
		return nil, r
	}
	w := &waiter{tenant: t.Name, lang: lang, max: t.MaxRuns, ready: make(chan struct{})}
	ts.waiting++
	ls.waiting++
	a.waiters = append(a.waiters, w)
	a.mu.Unlock()

	select {
	case <-w.ready:
		return a.releaser(t.Name, lang), nil
	case <-ctx.Done():
	}
	a.mu.Lock()
	if w.granted { // granted as ctx ended: give the slot back
		a.mu.Unlock()
		a.releaser(t.Name, lang)()
		return nil, ctx.Err()
	}
	for i, x := range a.waiters {
		if x == w {
			a.waiters = append(a.waiters[:i], a.waiters[i+1:]...)
			break
		}
	}
	a.tenantSlots(t.Name).waiting--
	a.langSlots(lang).waiting--
	a.tidy(t.Name)
	a.mu.Unlock()
	return nil, ctx.Err()
}

func (a *admission) fits(tenantMax int, ts, ls *slots) bool {
	return (tenantMax == 0 || ts.running < tenantMax) && (a.maxRuns == 0 || ls.running < a.maxRuns)
}

// releaser returns the release of one slot; calls after the first do
// nothing.
func (a *admission) releaser(tenant string, lang backend.Language) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.tenantSlots(tenant).running--
			a.langSlots(lang).running--
			// Grant every waiter that fits now, oldest first.
			kept := a.waiters[:0]
			for _, w := range a.waiters {
				ts, ls := a.tenantSlots(w.tenant), a.langSlots(w.lang)
				if a.fits(w.max, ts, ls) {
					ts.waiting--
					ls.waiting--
					ts.running++
					ls.running++
					w.granted = true
					close(w.ready)
					continue
				}
				kept = append(kept, w)
			}
			clear(a.waiters[len(kept):])
			a.waiters = kept
			a.tidy(tenant)
		})
	}
}

func (a *admission) tenantSlots(name string) *slots {
	s, ok := a.tenants[name]
	if !ok {
		s = &slots{}
		a.tenants[name] = s
	}
	return s
}

func (a *admission) langSlots(l backend.Language) *slots {
	s, ok := a.langs[l]
	if !ok {
		s = &slots{}
		a.langs[l] = s
	}
	return s
}

// tidy forgets a tenant with nothing running or waiting, so tenants that
// come and go (auth file reloads) leave nothing behind.
func (a *admission) tidy(name string) {
	if s := a.tenants[name]; s != nil && s.running == 0 && s.waiting == 0 {
		delete(a.tenants, name)
	}
}

// counts reports a tenant's running and waiting runs (for tests).
func (a *admission) counts(tenant string) (running, waiting int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.tenants[tenant]; s != nil {
		return s.running, s.waiting
	}
	return 0, 0
}

// refuseRun answers a POST /v1/run that admission refused (429 with
// Retry-After) or whose client left while it waited (an abort report, as
// the runtime gives a run cancelled in its own queue).
func (s *Server) refuseRun(w http.ResponseWriter, lang backend.Language, tenant Tenant, id string, err error) {
	var rf *refusal
	if errors.As(err, &rf) {
		s.metrics.observeRejected(lang, tenant.Name)
		if rf.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.FormatInt((rf.retryAfter+999)/1000, 10))
		}
		s.log.Warn("run not admitted", "call_id", id, "language", string(lang), "tenant", tenant.Name, "status", rf.status, "err", rf.msg)
		writeError(w, rf.status, rf.msg)
		return
	}
	res := &backend.RunResult{Error: &backend.Failure{Kind: backend.FailureAbort, Message: "run cancelled while it waited for admission: " + err.Error()}}
	s.metrics.observeRun(lang, tenant.Name, res)
	writeJSON(w, http.StatusOK, RunResponse{ID: id, Report: backend.NewReport(res), Events: []registry.Event{}})
}
