package containerd

import (
	"context"
	"fmt"
	"sync"

	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/leases"
	"github.com/containerd/errdefs"
)

// FailRecordCalls makes the next n calls of op ("get" or "delete") on d's
// container store fail with Unavailable, as an engine restarting would.
// Set it before the calls it should see, never during one.
func FailRecordCalls(d *Driver, op string, n int) {
	fs, ok := d.ctrs.(*failingStore)
	if !ok {
		fs = &failingStore{Store: d.ctrs, fail: map[string]int{}}
		d.ctrs = fs
	}
	fs.mu.Lock()
	fs.fail[op] = n
	fs.mu.Unlock()
}

type failingStore struct {
	containers.Store
	mu   sync.Mutex
	fail map[string]int
}

func (s *failingStore) failing(op, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail[op] <= 0 {
		return nil
	}
	s.fail[op]--
	return fmt.Errorf("%w: %s of container %s: the engine is restarting", errdefs.ErrUnavailable, op, id)
}

func (s *failingStore) Get(ctx context.Context, id string) (containers.Container, error) {
	if err := s.failing("get", id); err != nil {
		return containers.Container{}, err
	}
	return s.Store.Get(ctx, id)
}

func (s *failingStore) Delete(ctx context.Context, id string) error {
	if err := s.failing("delete", id); err != nil {
		return err
	}
	return s.Store.Delete(ctx, id)
}

// LoseLeaseAnswers makes d's next n lease creates lose their answer: the
// engine makes the lease, the caller hears Unavailable. made reports the
// ids of the leases so made.
func LoseLeaseAnswers(d *Driver, n int) (made func() []string) {
	ll := &losingLeases{Manager: d.leases, lose: n}
	d.leases = ll
	return func() []string {
		ll.mu.Lock()
		defer ll.mu.Unlock()
		return append([]string(nil), ll.made...)
	}
}

type losingLeases struct {
	leases.Manager
	mu   sync.Mutex
	lose int
	made []string
}

func (l *losingLeases) Create(ctx context.Context, opts ...leases.Opt) (leases.Lease, error) {
	lease, err := l.Manager.Create(ctx, opts...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil || l.lose <= 0 {
		return lease, err
	}
	l.lose--
	l.made = append(l.made, lease.ID)
	return leases.Lease{}, fmt.Errorf("%w: the connection to the engine was lost", errdefs.ErrUnavailable)
}
