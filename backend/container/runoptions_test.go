package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/egress"
	"github.com/dsh-container/dsh-container/portproto"
)

func TestLimitsLower(t *testing.T) {
	base := DefaultLimits()
	cases := []struct {
		name string
		rl   backend.Limits
		want func(l *Limits)
		err  []string
	}{
		{name: "zero keeps everything", want: func(*Limits) {}},
		{
			name: "every field lowered",
			rl:   backend.Limits{WallTime: time.Second, ComputeTime: 500 * time.Millisecond, MemoryBytes: 64 << 20, NanoCPUs: 5e8, Pids: 32},
			want: func(l *Limits) {
				l.WallTime, l.ComputeTime, l.MemoryBytes, l.NanoCPUs, l.Pids = time.Second, 500*time.Millisecond, 64<<20, 5e8, 32
				l.TmpfsBytes = 32 << 20 // at most half the memory
			},
		},
		{name: "equal is not raising", rl: backend.Limits{MemoryBytes: base.MemoryBytes, Pids: base.Pids}, want: func(*Limits) {}},
		{
			name: "raising names each limit",
			rl:   backend.Limits{WallTime: time.Hour, MemoryBytes: 1 << 30, NanoCPUs: 4e9},
			err:  []string{"limits.wallTimeoutMs 3600000 exceeds the runtime's 30000", "limits.memoryBytes 1073741824 exceeds", "limits.cpus 4 exceeds the runtime's 1: a request may lower a limit, never raise it"},
		},
		{name: "negative", rl: backend.Limits{Pids: -1}, err: []string{"limits.pids -1 must be positive"}},
		{name: "below the minimum", rl: backend.Limits{MemoryBytes: 1 << 20}, err: []string{"memory 1048576 bytes: must be at least 32 MiB"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := base.Lower(c.rl)
			if c.err != nil {
				if !errors.Is(err, backend.ErrInvalidRequest) {
					t.Fatalf("got %v, want an invalid request", err)
				}
				for _, s := range c.err {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := base
			c.want(&want)
			if got != want {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

// A run whose RunRequest.Limits lowers only time budgets takes a pooled
// container and meets its own wall budget; one that lowers a container
// setting gets a cold container created with it; neither changes the
// runtime's own limits; one that raises a limit is refused by Run and by
// CheckRequest alike, before any container.
func TestRunRequestLimits(t *testing.T) {
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		if _, err := r.handshake(); err != nil {
			return ExitStatus{Code: 99}
		}
		<-ctx.Done() // never finishes: only a budget ends the run
		return ExitStatus{Code: 137}
	})
	rec := &recordingDriver{fakeDriver: d}
	rt, dir := newTestRuntime(t, rec, nil, WithPool(1))
	d.rt = rt
	defer d.checkNoLeaks(t, dir)
	waitIdle := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); rt.PoolIdle() < 1; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the pool never filled")
			}
		}
	}
	ctx := context.Background()
	req := backend.RunRequest{Program: "return 1"}

	waitIdle()
	start := time.Now()
	req.Limits = backend.Limits{WallTime: 300 * time.Millisecond}
	res, err := rt.Run(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Kind != backend.FailureTimeout || !strings.Contains(res.Error.Message, "300ms") {
		t.Fatalf("got %+v, want a timeout at the lowered 300ms wall budget", res.Error)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("the lowered wall budget fired after %v", el)
	}
	if !res.Stats.Warm {
		t.Error("a run lowering only time budgets did not take the pooled container")
	}

	waitIdle()
	req.Limits = backend.Limits{WallTime: 200 * time.Millisecond, MemoryBytes: 64 << 20, Pids: 16}
	res, err = rt.Run(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.Warm {
		t.Error("a run lowering the memory limit took a pooled container")
	}
	rec.mu.Lock()
	var lowered, other int
	for _, s := range rec.specs {
		switch {
		case s.MemoryBytes == 64<<20 && s.Pids == 16 && s.TmpfsBytes == 32<<20:
			lowered++
		case s.MemoryBytes == DefaultLimits().MemoryBytes && s.Pids == DefaultLimits().Pids:
			other++
		default:
			t.Errorf("a container with unexpected settings: %+v", s)
		}
	}
	rec.mu.Unlock()
	if lowered != 1 || other < 2 {
		t.Errorf("%d containers with the lowered settings (want 1), %d with the runtime's (want at least 2)", lowered, other)
	}
	if rt.Limits() != newLimitsForTest() {
		t.Errorf("the runtime's limits changed: %+v", rt.Limits())
	}

	rec.mu.Lock()
	created := len(rec.specs)
	rec.mu.Unlock()
	req.Limits = backend.Limits{Pids: 1 << 20}
	_, runErr := rt.Run(ctx, req)
	checkErr := rt.CheckRequest(req)
	for _, err := range []error{runErr, checkErr} {
		if !errors.Is(err, backend.ErrInvalidRequest) || !strings.Contains(err.Error(), "limits.pids 1048576 exceeds the runtime's 128: a request may lower a limit, never raise it") {
			t.Fatalf("raising pids: got %v, want an invalid request naming pids", err)
		}
	}
	if runErr.Error() != checkErr.Error() {
		t.Errorf("Run said %q, CheckRequest %q", runErr, checkErr)
	}
	if err := rt.CheckRequest(backend.RunRequest{Limits: backend.Limits{Pids: 16}}); err != nil {
		t.Errorf("CheckRequest of a lower limit: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.specs) != created {
		t.Errorf("a refused run created %d containers", len(rec.specs)-created)
	}
}

// recordingDriver records the spec of every container created.
type recordingDriver struct {
	*fakeDriver
	mu    sync.Mutex
	specs []Spec
}

func (d *recordingDriver) Create(ctx context.Context, s Spec) (string, error) {
	d.mu.Lock()
	d.specs = append(d.specs, s)
	d.mu.Unlock()
	return d.fakeDriver.Create(ctx, s)
}

// newLimitsForTest are newTestRuntime's limits.
func newLimitsForTest() Limits {
	l := DefaultLimits()
	l.WallTime = 30 * time.Second
	l.StartupTime = 30 * time.Second
	return l
}

// RunRequest.Egress narrows the runtime's egress policy for one run and
// RunRequest.Events receives the run's egress events as their JSON; an
// entry outside the runtime's allowlist is an invalid request, Egress on
// a runtime without egress is not implemented; Run and CheckRequest say
// the same.
func TestRunRequestEgress(t *testing.T) {
	up := newUpstream(t, true)
	var (
		mu       sync.Mutex
		operator []egress.Event
	)
	pol, err := egress.New(egress.Config{
		Allow:        []string{fmt.Sprintf("up.test:%d", up.port()), "other.test:443"},
		AllowPrivate: []string{"127.0.0.1"},
		Resolver:     loopResolver{},
		OnEvent: func(e egress.Event) {
			mu.Lock()
			operator = append(operator, e)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan string, 4)
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		if _, err := r.handshake(); err != nil {
			return ExitStatus{Code: 90}
		}
		r.send(fmt.Sprintf(`{"type":"open","stream":1,"host":"up.test","port":%d}`, up.port()))
		for {
			m, err := r.readHost()
			if err != nil {
				return ExitStatus{Code: 90}
			}
			if o, ok := m.(*portproto.Opened); ok {
				opened <- fmt.Sprintf("%v %s", o.OK, o.Message)
				break
			}
		}
		r.send(`{"type":"close","stream":1}`)
		r.send(done(`"ok"`))
		<-ctx.Done()
		return ExitStatus{}
	})
	rt, dir := newTestRuntime(t, d, nil, WithEgress(pol))
	defer d.checkNoLeaks(t, dir)
	ctx := context.Background()

	// Narrowed to the other entry: the program's connection is refused,
	// and the run's sink gets the event as JSON.
	var got []json.RawMessage
	req := backend.RunRequest{Program: "x", Egress: &backend.Egress{Allow: []string{"other.test:443"}},
		Events: func(e json.RawMessage) {
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
		}}
	if err := rt.CheckRequest(req); err != nil {
		t.Fatal(err)
	}
	res, err := rt.Run(ctx, req)
	if err != nil || res.Error != nil {
		t.Fatalf("%v %+v", err, res.Error)
	}
	if o := <-opened; !strings.HasPrefix(o, "false egress refused") {
		t.Fatalf("narrowed run: opened %q, want a refusal", o)
	}
	mu.Lock()
	if len(got) != 1 || !strings.Contains(string(got[0]), `"type":"egress"`) || !strings.Contains(string(got[0]), `"outcome":"refused"`) || len(operator) != 1 {
		t.Errorf("the run's sink got %s, the operator's %d events", got, len(operator))
	}
	mu.Unlock()

	// Not narrowed: the runtime's own allowlist.
	if res, err := rt.Run(ctx, backend.RunRequest{Program: "x"}); err != nil || res.Error != nil {
		t.Fatalf("%v %+v", err, res.Error)
	}
	if o := <-opened; o != "true " {
		t.Fatalf("run with the runtime's egress: opened %q", o)
	}

	for _, c := range []struct {
		allow []string
		want  string
	}{
		{[]string{"evil.test:443"}, `allow "evil.test:443" is not within the server's allowlist: a request may narrow egress, never widen it`},
		{[]string{}, "egress: the allowlist must have at least one entry"},
	} {
		req := backend.RunRequest{Program: "x", Egress: &backend.Egress{Allow: c.allow}}
		_, runErr := rt.Run(ctx, req)
		checkErr := rt.CheckRequest(req)
		for _, err := range []error{runErr, checkErr} {
			if !errors.Is(err, backend.ErrInvalidRequest) || !strings.Contains(fmt.Sprint(err), c.want) {
				t.Errorf("allow %q: got %v, want an invalid request saying %q", c.allow, err, c.want)
			}
		}
	}

	// A runtime without egress cannot honour Egress.
	d2 := newFakeDriver(t, func(context.Context, *fakeRunner) ExitStatus { return ExitStatus{Code: 90} })
	plain, dir2 := newTestRuntime(t, d2, nil)
	defer d2.checkNoLeaks(t, dir2)
	req = backend.RunRequest{Program: "x", Egress: &backend.Egress{Allow: []string{"up.test:443"}}}
	_, runErr := plain.Run(ctx, req)
	checkErr := plain.CheckRequest(req)
	for _, err := range []error{runErr, checkErr} {
		if !errdefs.IsNotImplemented(err) || !errors.Is(err, backend.ErrNotImplemented) || !strings.Contains(fmt.Sprint(err), "egress: the typescript runtime of this server offers no egress") {
			t.Errorf("egress on a runtime without it: got %v, want not implemented naming egress", err)
		}
	}
}
