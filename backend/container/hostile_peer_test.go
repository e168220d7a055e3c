package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/portproto"
)

// Regression tests from a review of the host end against hostile runners.

func blockNS() []backend.BindingNamespace {
	return []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{
		"block": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}}}
}

// Arguments of waiting calls are bounded in bytes, not only in number.
func TestQueuedArgumentBytesAreCapped(t *testing.T) {
	// Nothing here waits without a deadline: a host that stops reading,
	// replying or settling fails the test, saying where it stuck, instead
	// of hanging it until the go test timeout.
	const deadline = 15 * time.Second
	arg := `"` + strings.Repeat("A", 150<<10) + `"`
	var rejected atomic.Int32
	var stuck atomic.Pointer[string]
	giveUp := func(format string, args ...any) ExitStatus {
		msg := fmt.Sprintf(format, args...)
		stuck.Store(&msg)
		return ExitStatus{Code: 90}
	}
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.Conn.SetReadDeadline(time.Now().Add(deadline))
		r.Conn.SetWriteDeadline(time.Now().Add(deadline))
		if _, err := r.handshake(); err != nil {
			return giveUp("runner: handshake: %v", err)
		}
		for i := 1; i <= 6; i++ {
			if err := r.send(fmt.Sprintf(`{"type":"call","id":%d,"global":"tools","name":"block","args":%s}`, i, arg)); err != nil {
				return giveUp("runner: sending call %d: %v", i, err)
			}
		}
		for i := 2; i <= 6; i++ { // call 1 waits in the binding
			res, err := r.readResult()
			if err != nil {
				return giveUp("runner: reading result %d of 5: %v", i-1, err)
			}
			if !res.OK && strings.Contains(res.Message, "bytes of arguments") {
				rejected.Add(1)
			}
		}
		if err := r.send(done(`"ok"`)); err != nil {
			return giveUp("runner: sending done: %v", err)
		}
		select {
		case <-ctx.Done():
			return ExitStatus{}
		case <-time.After(deadline):
			return giveUp("runner: the host did not remove the container within %v of done", deadline)
		}
	})
	// newTestRuntime's cleanup closes without a deadline; this one's has
	// one, so a stuck run cannot hang the cleanup either.
	dir, _ := shortDir(t)
	l := DefaultLimits()
	l.WallTime, l.StartupTime = 5*time.Second, 5*time.Second
	l.ProgramBytes, l.FrameBytes = 64<<10, 256<<10
	rt, err := New(d, WithImage("fake"), WithLimits(l), WithSocketDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	d.rt = rt
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		rt.Close(ctx)
	})
	type ran struct {
		res backend.RunResult
		err error
	}
	finished := make(chan ran, 1)
	go func() {
		res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x", Bindings: blockNS()})
		finished <- ran{res, err}
	}()
	why := func() string {
		if msg := stuck.Load(); msg != nil {
			return *msg
		}
		return "the runner saw nothing wrong"
	}
	var got ran
	select {
	case got = <-finished:
	case <-time.After(2 * deadline):
		buf := make([]byte, 1<<20)
		t.Fatalf("Run did not return within %v (%s); goroutines:\n%s", 2*deadline, why(), buf[:runtime.Stack(buf, true)])
	}
	if got.err != nil || got.res.Error != nil {
		t.Fatalf("%v %v (%s)", got.err, got.res.Error, why())
	}
	if rejected.Load() != 5 {
		t.Fatalf("%d of 5 over-cap calls rejected (%s)", rejected.Load(), why())
	}
	d.checkNoLeaks(t, dir)
}

// A runner that floods calls and never reads the replies cannot hold up
// the budgets: the compute budget still decides the outcome.
func TestFloodWithoutReadingKeepsBudgets(t *testing.T) {
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		go func() {
			for i := 1; i <= 200000; i++ {
				if r.send(`{"type":"call","id":`+itoa(i)+`,"global":"tools","name":"nope","args":null}`) != nil {
					return
				}
			}
		}()
		<-ctx.Done()
		return ExitStatus{Code: 137}
	})
	d.cpu = func(e time.Duration) time.Duration { return e } // a hot loop
	rt, dir := newTestRuntime(t, d, func(l *Limits) { l.ComputeTime = 200 * time.Millisecond; l.WallTime = 3 * time.Second })
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x", Bindings: blockNS()})
	if err != nil {
		t.Fatal(err)
	}
	// The budget decides; never a stall ending in a misreported broken
	// bridge.
	if res.Error == nil || res.Error.Kind != backend.FailureTimeout || !strings.Contains(res.Error.Message, "compute budget") {
		t.Fatalf("got %+v", res.Error)
	}
	d.checkNoLeaks(t, dir)
}

// A binding result too large for a runner that stops reading never holds
// up settlement.
func TestBlockedResultWriteDoesNotHoldSettlement(t *testing.T) {
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		for i := 1; i <= 40; i++ {
			r.send(`{"type":"call","id":` + itoa(i) + `,"global":"tools","name":"big","args":null}`)
		}
		<-ctx.Done() // never reads
		return ExitStatus{Code: 137}
	})
	rt, dir := newTestRuntime(t, d, func(l *Limits) { l.WallTime = 300 * time.Millisecond })
	bigv := json.RawMessage(`"` + strings.Repeat("v", 1<<20) + `"`)
	ns := []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{
		"big": func(context.Context, json.RawMessage) (json.RawMessage, error) { return bigv, nil },
	}}}
	done := make(chan backend.RunResult, 1)
	go func() {
		res, _ := rt.Run(context.Background(), backend.RunRequest{Program: "x", Bindings: ns})
		done <- res
	}()
	select {
	case res := <-done:
		if res.Error == nil || res.Error.Kind != backend.FailureTimeout {
			t.Fatalf("got %+v", res.Error)
		}
	case <-time.After(writeTimeout - time.Second):
		t.Fatal("Run waited for a blocked write instead of settling at the wall budget")
	}
	d.checkNoLeaks(t, dir)
}

type slowRemove struct{ *fakeDriver }

func (s slowRemove) Remove(ctx context.Context, id string) error {
	time.Sleep(200 * time.Millisecond)
	return s.fakeDriver.Remove(ctx, id)
}

// The caller's log callback is never called after Run returns, even while
// the container is still being removed.
func TestNoLogCallbackAfterRunReturns(t *testing.T) {
	fd := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		for {
			select {
			case <-ctx.Done():
				return ExitStatus{Code: 137}
			case <-time.After(5 * time.Millisecond):
				fmt.Fprintf(r.Out, "tick\n")
			}
		}
	})
	rt, dir := newTestRuntime(t, slowRemove{fd}, func(l *Limits) { l.WallTime = 200 * time.Millisecond })
	fd.rt = rt
	var returned atomic.Bool
	var late atomic.Int64
	rt.Run(context.Background(), backend.RunRequest{Program: "x", Logs: func(backend.LogEntry) {
		if returned.Load() {
			late.Add(1)
		}
	}})
	returned.Store(true)
	fd.checkNoLeaks(t, dir)
	if n := late.Load(); n != 0 {
		t.Fatalf("%d log callbacks after Run returned", n)
	}
}

// The failure message reaches the model like logs do: it is capped.
func TestFailureMessageIsCapped(t *testing.T) {
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		r.send(`{"type":"done","ok":false,"error":{"name":"Error","message":"m","stack":"` + strings.Repeat("S", 1<<20) + `"}}`)
		<-ctx.Done()
		return ExitStatus{}
	})
	rt, dir := newTestRuntime(t, d, nil)
	res, _ := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
	if res.Error == nil || len(res.Error.Message) > maxFailureBytes+64 || !strings.Contains(res.Error.Message, "more bytes cut") {
		t.Fatalf("message of %d bytes", len(res.Error.Message))
	}
	d.checkNoLeaks(t, dir)
}

// A call queued behind a running binding never starts once the program
// is done.
func TestNoBindingStartsAfterSettlement(t *testing.T) {
	var bStarted atomic.Bool
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		r.send(`{"type":"call","id":1,"global":"tools","name":"a","args":null}`)
		r.send(`{"type":"call","id":2,"global":"tools","name":"b","args":null}`)
		r.send(done(`1`))
		<-ctx.Done()
		return ExitStatus{}
	})
	rt, dir := newTestRuntime(t, d, nil)
	ns := []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{
		"a": func(context.Context, json.RawMessage) (json.RawMessage, error) {
			time.Sleep(150 * time.Millisecond)
			return nil, nil
		},
		"b": func(context.Context, json.RawMessage) (json.RawMessage, error) { bStarted.Store(true); return nil, nil },
	}}}
	res, _ := rt.Run(context.Background(), backend.RunRequest{Program: "x", Bindings: ns})
	if res.Error != nil || bStarted.Load() {
		t.Fatalf("outcome %+v, b started after the program was done: %v", res.Error, bStarted.Load())
	}
	d.checkNoLeaks(t, dir)
}

// A socket base others can read is closed to them; one others can write
// to (they may already have put something in it) or owned by another
// user is refused.
func TestSocketBaseIsPrivate(t *testing.T) {
	dir, _ := shortDir(t)
	os.Chmod(dir, 0o755)
	ep, err := NewUnixEndpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	newBridge(ep, 1<<20).close(context.Background())
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("base mode %v", fi.Mode().Perm())
	}
	os.Chmod(dir, 0o777)
	if _, err := NewUnixEndpoint(dir); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "no one else can write to") {
		t.Fatalf("world-writable base accepted: %v", err)
	}
	if os.Getuid() == 0 {
		other, _ := shortDir(t)
		if err := os.Chown(other, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if _, err := NewUnixEndpoint(other); err == nil || !strings.Contains(err.Error(), "owned by uid 12345") {
			t.Fatalf("foreign base accepted: %v", err)
		}
	}
}

// failingRemove fails the first removal of each container.
type failingRemove struct {
	*fakeDriver
	failed map[string]bool
}

func (f *failingRemove) Remove(ctx context.Context, id string) error {
	if !f.failed[id] && strings.HasPrefix(id, "fake-") {
		f.failed[id] = true
		return fmt.Errorf("removal of %s already in progress", id)
	}
	return f.fakeDriver.Remove(ctx, id)
}

// A container whose removal failed is retried by the next run and by
// Close: a long-lived process does not keep it.
func TestFailedRemovalIsRetried(t *testing.T) {
	fd := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		r.send(done(`1`))
		<-ctx.Done()
		return ExitStatus{}
	})
	d := &failingRemove{fakeDriver: fd, failed: map[string]bool{}}
	rt, dir := newTestRuntime(t, d, nil)
	fd.rt = rt
	if _, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"}); err != nil {
		t.Fatal(err)
	}
	fd.checkNoLeaks(t, dir) // Close retries the failed removal
}

// An honest program that issues many calls before reading any reply
// (Promise.all over thousands) is slowed down, not killed.
func TestManyCallsBeforeReadingComplete(t *testing.T) {
	const n = 500
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		for i := 1; i <= n; i++ {
			if r.send(`{"type":"call","id":`+itoa(i)+`,"global":"tools","name":"echo","args":`+itoa(i)+`}`) != nil {
				return ExitStatus{Code: 91}
			}
		}
		for i := 1; i <= n; i++ {
			if _, err := r.readResult(); err != nil {
				return ExitStatus{Code: 90}
			}
		}
		r.send(done(`"all answered"`))
		<-ctx.Done()
		return ExitStatus{}
	})
	rt, dir := newTestRuntime(t, d, func(l *Limits) { l.PendingCalls = 4 })
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x", Bindings: echoBindings()})
	if err != nil || res.Error != nil || string(res.Value) != `"all answered"` {
		t.Fatalf("%v %+v", err, res.Error)
	}
	d.checkNoLeaks(t, dir)
}

// Once the runner is connected, every further connection to the bridge
// socket is closed before the host reads from it: a flood of connections,
// each offering a megabyte of request head, costs the host no buffers and
// no goroutines, and the run goes on (issue 10, class 2).
func TestBridgeClosesEveryFurtherConnectionUnread(t *testing.T) {
	const conns = 500
	var closedUnread atomic.Int32
	var baseline atomic.Int32
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		baseline.Store(int32(runtime.NumGoroutine()))
		head := "GET /v1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nX-Pad: " + strings.Repeat("A", 1<<20)
		var open []net.Conn
		for i := 0; i < conns; i++ {
			c, err := net.Dial("unix", filepath.Join(r.Dir, SocketName))
			if err != nil {
				continue // refused outright is fine too
			}
			open = append(open, c)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			// The host closes it: a write eventually fails, a read sees EOF.
			_, werr := c.Write([]byte(head))
			var one [1]byte
			_, rerr := c.Read(one[:])
			if werr != nil || rerr == io.EOF || errors.Is(rerr, syscall.ECONNRESET) {
				closedUnread.Add(1)
			}
		}
		for _, c := range open {
			c.Close()
		}
		if n := runtime.NumGoroutine(); n > int(baseline.Load())+10 {
			r.send(done(fmt.Sprintf(`"goroutines grew from %d to %d"`, baseline.Load(), n)))
		} else {
			r.send(done(`"ok"`))
		}
		<-ctx.Done()
		return ExitStatus{}
	})
	rt, dir := newTestRuntime(t, d, nil)
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
	if err != nil || res.Error != nil || string(res.Value) != `"ok"` {
		t.Fatalf("%v %+v %s", err, res.Error, res.Value)
	}
	if closedUnread.Load() != conns {
		t.Fatalf("%d of %d further connections closed unread", closedUnread.Load(), conns)
	}
	d.checkNoLeaks(t, dir)
}

// Text a program prints never decides its outcome: a runner that prints
// V8's heap-exhaustion message and aborts is oom only when the host saw
// its memory near the heap cap (issue 10, class 7).
func TestOOMIsDecidedByHostFactsNotByText(t *testing.T) {
	const heap = 192 << 20 // v8HeapMiB of the default 256 MiB
	for _, tc := range []struct {
		name     string
		lang     backend.Language
		peak     int64
		status   ExitStatus
		wantKind backend.FailureKind
	}{
		{"message and abort, little memory", backend.TypeScript, 40 << 20, ExitStatus{Code: 134}, backend.FailureExit},
		{"message and abort, no memory figures", backend.TypeScript, -1, ExitStatus{Code: 134}, backend.FailureExit},
		{"abort near the heap cap", backend.TypeScript, heap - 4<<20, ExitStatus{Code: 134}, backend.FailureOOM},
		{"another status near the heap cap", backend.TypeScript, heap, ExitStatus{Code: 1}, backend.FailureExit},
		{"python abort near the cap", backend.Python, heap, ExitStatus{Code: 134}, backend.FailureExit},
		{"the kernel's OOM kill", backend.Python, 0, ExitStatus{Code: 137, OOMKilled: true}, backend.FailureOOM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.send(`{"type":"log","source":"console","level":"error","text":"FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory"}`)
				fmt.Fprintln(r.Err, "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory")
				time.Sleep(3 * computePoll) // the host samples memory meanwhile
				return tc.status
			})
			if tc.peak >= 0 {
				d.peak = func() int64 { return tc.peak }
			}
			rt, dir := newTestRuntime(t, d, nil, WithLanguage(tc.lang))
			res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Error == nil || res.Error.Kind != tc.wantKind {
				t.Fatalf("got %+v, want %s", res.Error, tc.wantKind)
			}
			d.checkNoLeaks(t, dir)
		})
	}
}

// What the host sends back is bounded like what it receives: a binding
// value too large for a frame, and an error message of any size, reach
// the runner as bounded rejections.
func TestRepliesAreBounded(t *testing.T) {
	var got []*portproto.Result
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		for i, name := range []string{"huge", "loud", "fine"} {
			r.send(fmt.Sprintf(`{"type":"call","id":%d,"global":"tools","name":%q,"args":{}}`, i+1, name))
			res, err := r.readResult()
			if err != nil {
				return ExitStatus{Code: 90}
			}
			got = append(got, res)
		}
		r.send(done(`"ok"`))
		<-ctx.Done()
		return ExitStatus{}
	})
	rt, dir := newTestRuntime(t, d, func(l *Limits) { l.ProgramBytes = 64 << 10; l.FrameBytes = 256 << 10 })
	ns := []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{
		"huge": func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.Marshal(strings.Repeat("x", 1<<20))
		},
		"loud": func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New(strings.Repeat("é", 1<<20))
		},
		"fine": func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`"fine"`), nil
		},
	}}}
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x", Bindings: ns})
	if err != nil || res.Error != nil || len(got) != 3 {
		t.Fatalf("%v %+v %d replies", err, res.Error, len(got))
	}
	if got[0].OK || !strings.Contains(got[0].Message, "exceeds the 262144-byte frame limit") {
		t.Errorf("huge value: %+v", got[0])
	}
	if got[1].OK || len(got[1].Message) > maxFailureBytes+64 || !strings.Contains(got[1].Message, "more bytes cut") || !utf8.ValidString(got[1].Message) {
		t.Errorf("loud error: ok %v, %d bytes", got[1].OK, len(got[1].Message))
	}
	if !got[2].OK || string(got[2].Value) != `"fine"` {
		t.Errorf("fine: %+v", got[2])
	}
	d.checkNoLeaks(t, dir)
}
