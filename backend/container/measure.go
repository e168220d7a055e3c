package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/containerd/errdefs"
)

// MemoryUsage is a container's current cgroup memory: Usage is the whole
// charge (memory.current, or v1 usage_in_bytes: page cache included), Anon
// the anonymous part (the process's own heap and stacks).
type MemoryUsage struct {
	Usage int64 `json:"usageBytes"`
	Anon  int64 `json:"anonBytes"`
}

// MemoryUsageMeter is the optional ability to read a container's current
// memory (benchmarks report an idle pooled runner's size with it).
type MemoryUsageMeter interface {
	MemoryUsage(ctx context.Context, id string) (MemoryUsage, error)
}

// IdleMemory reads the current memory of every idle pooled sandbox: what a
// warm runner costs while it waits. It returns nothing without a pool, and
// an error wrapping errdefs.ErrNotImplemented from a driver that cannot
// read memory.
func (r *Runtime) IdleMemory(ctx context.Context) ([]MemoryUsage, error) {
	mm, ok := r.driver.(MemoryUsageMeter)
	if !ok {
		return nil, fmt.Errorf("%w: the %s driver cannot read a container's memory", errdefs.ErrNotImplemented, r.driver.Capabilities().Name)
	}
	if r.pool == nil {
		return nil, nil
	}
	r.pool.mu.Lock()
	var ids []string
	for _, sb := range r.pool.idle {
		ids = append(ids, sb.id)
	}
	r.pool.mu.Unlock()
	var out []MemoryUsage
	for _, id := range ids {
		m, err := mm.MemoryUsage(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// maxCommandOutput bounds the stderr RunCommand keeps for its error.
const maxCommandOutput = 4 << 10

// RunCommand runs argv in a container made exactly as a run's sandbox is —
// the runtime's image, hardening preset, limits, seccomp profile and OCI
// runtime, the labels the reaper finds, a fresh bridge endpoint mounted
// read-only — with the endpoint's in-container address appended as the
// last argument, and calls serve with the endpoint's listener. No bridge
// protocol is spoken: it is for measurements that must share a run's
// conditions (bench's socket floors). It returns once serve has returned
// and the container has exited: serve's error, or the container's when it
// exited non-zero or did not exit within the runtime's startup time after
// serve. The container and the endpoint are removed in every case,
// cancellation included.
func (r *Runtime) RunCommand(ctx context.Context, argv []string, serve func(ctx context.Context, ln net.Listener) error) (retErr error) {
	if len(argv) == 0 {
		return errors.New("RunCommand: an empty command")
	}
	if err := r.enter(); err != nil {
		return err
	}
	defer r.runs.Done()
	runID := newRunID()
	ep, err := r.driver.Endpoint(ctx, EndpointRequest{RunID: runID, SocketDir: r.opts.socketDir})
	if err != nil {
		return fmt.Errorf("the bridge endpoint: %w", err)
	}
	defer ep.Close()
	spec := r.spec(runID, ep)
	spec.Cmd = append(slices.Clone(argv), ep.RunnerAddress)
	id, err := r.driver.Create(ctx, spec)
	if err != nil {
		r.orphans.createFailed(err)
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := r.driver.Remove(rctx, id); err != nil && !errdefs.IsNotFound(err) {
			r.orphans.failed(id, err) // Close retries it
			retErr = errors.Join(retErr, fmt.Errorf("removing container %s: %w", id, err))
		}
	}()
	exit, err := r.driver.Wait(ctx, id)
	if err != nil {
		return err
	}
	var stderr tailBuffer
	var readers sync.WaitGroup
	if oa, ok := r.driver.(OutputAttacher); ok {
		st, err := oa.StartAttached(ctx, id)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, s := range []io.Reader{st.Stdout, st.Stderr} {
			if s != nil {
				readers.Add(1)
				go func() { defer readers.Done(); io.Copy(&stderr, s) }()
			}
		}
	} else if err := r.driver.Start(ctx, id); err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- serve(sctx, ep.Listener) }()
	var serveErr error
	var st ExitStatus
	exited := false
	select {
	case serveErr = <-errc:
	case st = <-exit:
		// The command is gone: serve must not wait for it.
		exited = true
		cancel()
		ep.Listener.Close()
		serveErr = <-errc
	case <-ctx.Done():
		cancel()
		ep.Listener.Close()
		<-errc
		return ctx.Err()
	}
	if !exited {
		select {
		case st = <-exit:
		case <-time.After(r.opts.limits.StartupTime):
			return errors.Join(serveErr, fmt.Errorf("the command did not exit within %v after serving", r.opts.limits.StartupTime))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if st.Err == nil && st.Code != 0 || st.OOMKilled {
		r.driver.Kill(context.WithoutCancel(ctx), id)
		waitTimeout(&readers, time.Second)
		return errors.Join(serveErr, fmt.Errorf("the command exited with status %d (oom %v): %s", st.Code, st.OOMKilled, bytes.TrimSpace(stderr.bytes())))
	}
	return errors.Join(serveErr, st.Err)
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// tailBuffer keeps the last maxCommandOutput bytes written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - maxCommandOutput; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.b)
}

// MeterPrimer is the optional ability to find a container's accounting
// ahead of its first reading (Docker: an inspect call to learn its cgroup).
type MeterPrimer interface {
	PrimeMeters(ctx context.Context, id string)
}

// primeMeters lets the driver find a sandbox's accounting while it starts,
// off the request path: otherwise a warm run's first CPU reading, the
// compute budget's baseline, pays for it (≈4 ms on a loaded machine).
func primeMeters(ctx context.Context, d Driver, id string) {
	if p, ok := d.(MeterPrimer); ok {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		p.PrimeMeters(ctx, id)
	}
}
