package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/portproto"
	"github.com/dsh-container/dsh-container/tsprep"
)

func TestMain(m *testing.M) {
	tsprep.ServeWorkerIfRequested()
	goleak.VerifyTestMain(m)
}

func done(value string) string {
	if value == "" {
		return `{"type":"done","ok":true}`
	}
	return `{"type":"done","ok":true,"valueKind":"json","value":` + value + `}`
}

// Each case scripts the runner end; the host must reach the stated
// outcome, never panic, and leave nothing behind.
func TestRunScripted(t *testing.T) {
	type check func(t *testing.T, res backend.RunResult)
	wantFailure := func(kind backend.FailureKind, substr string) check {
		return func(t *testing.T, res backend.RunResult) {
			t.Helper()
			if res.Error == nil || res.Error.Kind != kind || !strings.Contains(res.Error.Message, substr) {
				t.Fatalf("got error %+v, want %s containing %q", res.Error, kind, substr)
			}
		}
	}
	cases := []struct {
		name   string
		limits func(*Limits)
		script func(ctx context.Context, r *fakeRunner) ExitStatus
		check  check
	}{
		{
			name: "value logs and a call round trip",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				run, err := r.handshake()
				if err != nil || run.Program == "" || len(run.Bindings) != 1 || strings.Join(run.Bindings[0].Functions, ",") != "block,echo,fail" {
					return ExitStatus{Code: 99}
				}
				r.send(`{"type":"log","source":"console","level":"info","text":"hi"}`)
				r.send(`{"type":"call","id":1,"global":"tools","name":"echo","args":{"a":[1,2]}}`)
				res, err := r.readResult()
				if err != nil || !res.OK || string(res.Value) != `{"a":[1,2]}` {
					return ExitStatus{Code: 98}
				}
				r.send(`{"type":"call","id":2,"global":"tools","name":"fail","args":null}`)
				res, err = r.readResult()
				if err != nil || res.OK || res.Message != "tool failed on purpose" {
					return ExitStatus{Code: 97}
				}
				r.send(done(`{"got":` + string(`{"a":[1,2]}`) + `}`))
				<-ctx.Done()
				return ExitStatus{Code: 137}
			},
			check: func(t *testing.T, res backend.RunResult) {
				if res.Error != nil {
					t.Fatal(res.Error)
				}
				if string(res.Value) != `{"got":{"a":[1,2]}}` || res.ValueKind != backend.ValueJSON {
					t.Fatalf("value %s %q", res.Value, res.ValueKind)
				}
				if len(res.Logs) != 1 || res.Logs[0].Text != "hi" || res.Logs[0].Level != backend.LevelInfo {
					t.Fatalf("logs %+v", res.Logs)
				}
				if res.Stats.Calls != 2 {
					t.Fatalf("calls %d", res.Stats.Calls)
				}
			},
		},
		{
			name: "unknown binding is a rejected call, not a crash",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.send(`{"type":"call","id":1,"global":"tools","name":"nope","args":{}}`)
				res, err := r.readResult()
				if err != nil || res.OK || !strings.Contains(res.Message, "unknown binding") {
					return ExitStatus{Code: 98}
				}
				r.send(`{"type":"call","id":2,"global":"other","name":"echo","args":{}}`)
				if res, err := r.readResult(); err != nil || res.OK {
					return ExitStatus{Code: 97}
				}
				r.send(done(`1`))
				<-ctx.Done()
				return ExitStatus{}
			},
			check: func(t *testing.T, res backend.RunResult) {
				if res.Error != nil || string(res.Value) != "1" {
					t.Fatalf("%+v", res)
				}
			},
		},
		{
			name: "duplicate call id breaks protocol",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.send(`{"type":"call","id":5,"global":"tools","name":"echo","args":{}}`)
				r.send(`{"type":"call","id":5,"global":"tools","name":"echo","args":{}}`)
				<-ctx.Done()
				return ExitStatus{Code: 137}
			},
			check: wantFailure(backend.FailureExit, "call id 5 after 5"),
		},
		{
			name: "malformed JSON breaks protocol",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.send(`{"type":"call",`)
				<-ctx.Done()
				return ExitStatus{Code: 137}
			},
			check: wantFailure(backend.FailureExit, "runner broke protocol"),
		},
		{
			name: "unknown message type breaks protocol",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.send(`{"type":"exec","cmd":"sh"}`)
				<-ctx.Done()
				return ExitStatus{Code: 137}
			},
			check: wantFailure(backend.FailureExit, "unknown message type"),
		},
		{
			name: "binary frame breaks protocol",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.Conn.WriteMessage(websocket.BinaryMessage, []byte{0, 1, 2})
				<-ctx.Done()
				return ExitStatus{Code: 137}
			},
			check: wantFailure(backend.FailureExit, "binary frames"),
		},
		{
			name:   "oversize frame breaks protocol",
			limits: func(l *Limits) { l.FrameBytes = 320 << 10 },
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.send(`{"type":"log","source":"stdout","text":"` + strings.Repeat("x", 400<<10) + `"}`)
				<-ctx.Done()
				return ExitStatus{Code: 137}
			},
			check: wantFailure(backend.FailureExit, "exceeds the"),
		},
		{
			name: "invalid UTF-8 breaks protocol",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.Conn.WriteMessage(websocket.TextMessage, []byte("{\"type\":\"log\",\"source\":\"stdout\",\"text\":\"\xff\"}"))
				<-ctx.Done()
				return ExitStatus{Code: 137}
			},
			// gorilla closes the connection on invalid UTF-8 in a text
			// frame, or the decoder rejects it: either way a broken runner.
			check: func(t *testing.T, res backend.RunResult) {
				if res.Error == nil || res.Error.Kind != backend.FailureExit {
					t.Fatalf("got %+v", res.Error)
				}
			},
		},
		{
			name: "frames after done are ignored",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.send(done(`"ok"`))
				for i := 1; i < 50; i++ {
					if r.send(`{"type":"call","id":`+itoa(i)+`,"global":"tools","name":"echo","args":{}}`) != nil {
						break
					}
				}
				<-ctx.Done()
				return ExitStatus{}
			},
			check: func(t *testing.T, res backend.RunResult) {
				if res.Error != nil || string(res.Value) != `"ok"` {
					t.Fatalf("%+v", res)
				}
			},
		},
		{
			name: "a second connection is closed unread",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				if _, _, err := dialBridge(r.Dir); err == nil {
					return ExitStatus{Code: 90}
				}
				r.send(done(`2`))
				<-ctx.Done()
				return ExitStatus{}
			},
			check: func(t *testing.T, res backend.RunResult) {
				if res.Error != nil || string(res.Value) != "2" {
					t.Fatalf("%+v", res)
				}
			},
		},
		{
			name: "thrown exception",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.send(`{"type":"done","ok":false,"error":{"name":"TypeError","message":"x","stack":"TypeError: x\n    at program.ts:3:9"}}`)
				<-ctx.Done()
				return ExitStatus{}
			},
			check: wantFailure(backend.FailureException, "program.ts:3:9"),
		},
		{
			name:   "wall budget",
			limits: func(l *Limits) { l.WallTime = 200 * time.Millisecond },
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				<-ctx.Done()
				return ExitStatus{Code: 137}
			},
			check: wantFailure(backend.FailureTimeout, "wall-clock budget"),
		},
		{
			name:   "slow-loris peer dies at the wall budget",
			limits: func(l *Limits) { l.WallTime = 300 * time.Millisecond },
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				w, err := r.Conn.NextWriter(websocket.TextMessage)
				if err != nil {
					return ExitStatus{}
				}
				for _, b := range []byte(`{"type":"log","source":"stdout","text":"`) {
					if _, err := w.Write([]byte{b}); err != nil {
						break
					}
					select {
					case <-ctx.Done():
						return ExitStatus{Code: 137}
					case <-time.After(50 * time.Millisecond):
					}
				}
				<-ctx.Done()
				return ExitStatus{Code: 137}
			},
			check: wantFailure(backend.FailureTimeout, "wall-clock budget"),
		},
		{
			name: "runner dies with OOM",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				return ExitStatus{Code: 137, OOMKilled: true}
			},
			check: wantFailure(backend.FailureOOM, "memory limit"),
		},
		{
			name: "runner exits early",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				return ExitStatus{Code: 3}
			},
			check: wantFailure(backend.FailureExit, "status 3"),
		},
		// Issue 24 §4: a program that exits before returning has not
		// completed, whatever the status, 0 included.
		{
			name: "an exit done frame is an exit, status 0 included",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.send(`{"type":"log","source":"console","level":"log","text":"before"}`)
				r.send(`{"type":"done","ok":false,"exit":{"status":0},"error":{"name":"Exit","message":"process.exit(0)","stack":"Exit: process.exit(0)\n    at program.ts:2:9"}}`)
				<-ctx.Done()
				return ExitStatus{}
			},
			check: func(t *testing.T, res backend.RunResult) {
				want := &backend.Failure{Kind: backend.FailureExit, Message: "the program exited with status 0 before returning (process.exit(0))\n    at program.ts:2:9"}
				if res.Error == nil || *res.Error != *want || res.ValueKind != backend.ValueNone {
					t.Fatalf("got %+v (value %s), want %+v", res.Error, res.Value, want)
				}
				if len(res.Logs) != 1 || res.Logs[0].Text != "before" {
					t.Fatalf("logs %+v", res.Logs)
				}
			},
		},
		{
			name: "a SystemExit's message stays in the failure",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.send(`{"type":"done","ok":false,"exit":{"status":1},"error":{"name":"SystemExit","message":"SystemExit: bye","stack":"Traceback (most recent call last):\n  File \"program.py\", line 2, in __dsh_main__\nSystemExit: bye\n"}}`)
				<-ctx.Done()
				return ExitStatus{}
			},
			check: func(t *testing.T, res backend.RunResult) {
				want := "the program exited with status 1 before returning (SystemExit: bye)\nTraceback (most recent call last):\n  File \"program.py\", line 2, in __dsh_main__\nSystemExit: bye"
				if res.Error == nil || res.Error.Kind != backend.FailureExit || res.Error.Message != want {
					t.Fatalf("got %+v, want exit %q", res.Error, want)
				}
			},
		},
		{
			name: "a runner that ends without a done is an exit stating status 0",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.send(`{"type":"log","source":"stdout","text":"bye\n"}`)
				// os.kill / posix._exit: the bridge breaks, then the
				// container's status arrives.
				r.Conn.Close()
				return ExitStatus{Code: 0}
			},
			check: wantFailure(backend.FailureExit, "the container exited with status 0 before the program returned"),
		},
		{
			name: "a runner a signal ended is an exit naming the signal",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				return ExitStatus{Code: 137}
			},
			check: wantFailure(backend.FailureExit, "the container exited with status 137 (128 + signal 9: killed) before the program returned"),
		},
		{
			name: "raw output is captured",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.Out.Write([]byte("raw line\n"))
				time.Sleep(50 * time.Millisecond)
				r.send(done(""))
				<-ctx.Done()
				return ExitStatus{}
			},
			check: func(t *testing.T, res backend.RunResult) {
				if res.Error != nil || len(res.Logs) != 1 || res.Logs[0].Source != backend.SourceStdout || res.Logs[0].Text != "raw line\n" {
					t.Fatalf("%+v", res)
				}
			},
		},
		{
			name: "empty entries are charged and counted",
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				for i := 0; i < MaxLogEntries+500; i++ {
					r.send(`{"type":"log","source":"console","level":"log","text":""}`)
				}
				r.send(done(""))
				<-ctx.Done()
				return ExitStatus{}
			},
			check: func(t *testing.T, res backend.RunResult) {
				if !res.LogsTruncated || len(res.Logs) != MaxLogEntries {
					t.Fatalf("truncated %v, %d entries", res.LogsTruncated, len(res.Logs))
				}
			},
		},
		{
			name:   "log cap truncates",
			limits: func(l *Limits) { l.LogBytes = 2*LogEntryOverhead + 10 },
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.send(`{"type":"log","source":"stdout","text":"12345678"}`)
				r.send(`{"type":"log","source":"stdout","text":"abcdefgh"}`)
				r.send(`{"type":"log","source":"stdout","text":"more"}`)
				r.send(done(""))
				<-ctx.Done()
				return ExitStatus{}
			},
			check: func(t *testing.T, res backend.RunResult) {
				if !res.LogsTruncated || len(res.Logs) != 2 || res.Logs[1].Text != "ab" {
					t.Fatalf("%+v", res)
				}
			},
		},
		{
			name:   "value cap truncates",
			limits: func(l *Limits) { l.ValueBytes = 5 },
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				r.send(done(`[1,2,3,4,5,6]`))
				<-ctx.Done()
				return ExitStatus{}
			},
			check: func(t *testing.T, res backend.RunResult) {
				if !res.ValueTruncated || string(res.Value) != `"[1,2,"` {
					t.Fatalf("%+v %s", res, res.Value)
				}
			},
		},
		{
			name:   "call flood beyond the pending cap is rejected",
			limits: func(l *Limits) { l.PendingCalls = 2 },
			script: func(ctx context.Context, r *fakeRunner) ExitStatus {
				r.handshake()
				for i := 1; i <= 3; i++ {
					r.send(`{"type":"call","id":` + itoa(i) + `,"global":"tools","name":"block","args":{}}`)
				}
				res, err := r.readResult()
				if err != nil || res.ID != 3 || res.OK || !strings.Contains(res.Message, "too many") {
					return ExitStatus{Code: 91}
				}
				r.send(done(`"flooded"`))
				<-ctx.Done()
				return ExitStatus{}
			},
			check: func(t *testing.T, res backend.RunResult) {
				if res.Error != nil || string(res.Value) != `"flooded"` {
					t.Fatalf("%+v", res)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newFakeDriver(t, tc.script)
			rt, dir := newTestRuntime(t, d, tc.limits)
			req := backend.RunRequest{Program: "return 1", Bindings: echoBindings()}
			req.Bindings[0].Functions["block"] = func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			res, err := rt.Run(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, res)
			d.checkNoLeaks(t, dir)
		})
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// A hot loop dies at the compute budget even while a decoy call is
// pending; a program idling on a slow binding survives to the wall budget.
func TestComputeBudget(t *testing.T) {
	pendingCall := func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		r.send(`{"type":"call","id":1,"global":"tools","name":"block","args":{}}`)
		<-ctx.Done()
		return ExitStatus{Code: 137}
	}
	block := func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	for _, tc := range []struct {
		name string
		cpu  func(time.Duration) time.Duration
		want string
	}{
		{"hot loop", func(e time.Duration) time.Duration { return e }, "compute budget"},
		{"idle", func(time.Duration) time.Duration { return 0 }, "wall-clock budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newFakeDriver(t, pendingCall)
			d.cpu = tc.cpu
			rt, dir := newTestRuntime(t, d, func(l *Limits) {
				l.ComputeTime = 150 * time.Millisecond
				l.WallTime = 600 * time.Millisecond
			})
			res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x", Bindings: []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{"block": block}}}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Error == nil || res.Error.Kind != backend.FailureTimeout || !strings.Contains(res.Error.Message, tc.want) {
				t.Fatalf("got %+v, want timeout %q", res.Error, tc.want)
			}
			d.checkNoLeaks(t, dir)
		})
	}
}

func TestCancellationAborts(t *testing.T) {
	started := make(chan struct{})
	var bindingDone atomic.Bool
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		r.send(`{"type":"call","id":1,"global":"tools","name":"slow","args":{}}`)
		<-ctx.Done()
		return ExitStatus{Code: 137}
	})
	rt, dir := newTestRuntime(t, d, nil)
	ctx, cancel := context.WithCancel(context.Background())
	slow := func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond)
		bindingDone.Store(true)
		return nil, ctx.Err()
	}
	go func() { <-started; cancel() }()
	res, err := rt.Run(ctx, backend.RunRequest{Program: "x", Bindings: []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{"slow": slow}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Kind != backend.FailureAbort {
		t.Fatalf("got %+v, want abort", res.Error)
	}
	if !bindingDone.Load() {
		t.Fatal("Run returned before the in-flight binding finished")
	}
	d.checkNoLeaks(t, dir)
}

func TestCloseAbortsInFlightRunsAndRefusesNewOnes(t *testing.T) {
	ready := make(chan struct{})
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		close(ready)
		<-ctx.Done()
		return ExitStatus{Code: 137}
	})
	rt, dir := newTestRuntime(t, d, nil)
	out := make(chan backend.RunResult, 1)
	go func() {
		res, _ := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
		out <- res
	}()
	<-ready
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := <-out
	if res.Error == nil || res.Error.Kind != backend.FailureAbort || !strings.Contains(res.Error.Message, "runtime closed") {
		t.Fatalf("got %+v", res.Error)
	}
	if _, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"}); !errors.Is(err, backend.ErrClosed) {
		t.Fatalf("Run after Close: %v", err)
	}
	d.checkNoLeaks(t, dir)
}

func TestRunRejectsMisuse(t *testing.T) {
	d := newFakeDriver(t, nil)
	rt, _ := newTestRuntime(t, d, nil)
	fn := func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	for _, req := range []backend.RunRequest{
		{Bindings: []backend.BindingNamespace{{Global: "tools"}, {Global: "tools"}}},
		{Bindings: []backend.BindingNamespace{{Global: "not valid"}}},
		{Bindings: []backend.BindingNamespace{{Global: "console"}}},
		{Bindings: []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{"": fn}}}},
		{Bindings: []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{"x": nil}}}},
	} {
		if _, err := rt.Run(context.Background(), req); !errors.Is(err, backend.ErrInvalidRequest) {
			t.Errorf("%+v: got %v", req.Bindings, err)
		}
	}
	if d.created != 0 {
		t.Fatalf("misuse created %d containers", d.created)
	}
}

func TestSyntaxErrorStartsNoContainer(t *testing.T) {
	d := newFakeDriver(t, nil)
	rt, _ := newTestRuntime(t, d, nil)
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "const = ;"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Kind != backend.FailureException || !strings.Contains(res.Error.Message, "program.ts:1:") {
		t.Fatalf("got %+v", res.Error)
	}
	if d.created != 0 {
		t.Fatal("a syntax error created a container")
	}
}

// A deep program is an exception naming the limit, at the program size
// cap, and starts nothing; the runtime keeps serving (issue 10, class 1).
// tsprep's tests cover every deep construct.
func TestDeepProgramsAreExceptions(t *testing.T) {
	d := newFakeDriver(t, nil)
	rt, _ := newTestRuntime(t, d, nil)
	for name, unit := range map[string][2]string{"parens": {"(", ")"}, "not": {"!", ""}, "arrow": {"x=>", ""}, "template": {"`${", "}`"}} {
		n := (rt.Limits().ProgramBytes - 20) / len(unit[0]+unit[1])
		src := "return " + strings.Repeat(unit[0], n) + "1" + strings.Repeat(unit[1], n)
		res, err := rt.Run(context.Background(), backend.RunRequest{Program: src})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Error == nil || res.Error.Kind != backend.FailureException || !strings.Contains(res.Error.Message, fmt.Sprintf("deeper than %d levels", tsprep.MaxNesting)) {
			t.Fatalf("%s: got %+v", name, res.Error)
		}
	}
	if d.created != 0 {
		t.Fatal("a deep program created a container")
	}
}

func TestOversizeProgramStartsNoContainer(t *testing.T) {
	d := newFakeDriver(t, nil)
	rt, _ := newTestRuntime(t, d, func(l *Limits) { l.ProgramBytes = 10 })
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: strings.Repeat("1;", 10)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || !strings.Contains(res.Error.Message, "exceeds the 10-byte limit") || d.created != 0 {
		t.Fatalf("got %+v, created %d", res.Error, d.created)
	}
}

func TestRunnerThatNeverConnects(t *testing.T) {
	d := newFakeDriver(t, nil)
	// A "runner" that exits before connecting: Start's dial still happens
	// in the fake, so simulate with a script that returns at once without
	// a hello.
	d.script = func(ctx context.Context, r *fakeRunner) ExitStatus { return ExitStatus{Code: 1} }
	rt, dir := newTestRuntime(t, d, nil)
	_, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
	if err == nil || !strings.Contains(err.Error(), "exited with status 1") {
		t.Fatalf("got %v", err)
	}
	d.checkNoLeaks(t, dir)
}

func TestHelloFromTheWrongLanguage(t *testing.T) {
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.send(portproto.Hello{Type: portproto.TypeHello, Version: 1, Language: "python", Runner: "fake/1"})
		<-ctx.Done()
		return ExitStatus{}
	})
	rt, dir := newTestRuntime(t, d, nil)
	_, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
	if err == nil || !strings.Contains(err.Error(), "runs python programs") {
		t.Fatalf("got %v", err)
	}
	d.checkNoLeaks(t, dir)
}

func TestSpecIsHardened(t *testing.T) {
	d := newFakeDriver(t, nil)
	rt, _ := newTestRuntime(t, d, nil)
	s := rt.spec("abc", &Endpoint{RunnerAddress: BridgeSocket, BindDir: "/tmp/x", Label: "s-x"})
	if !s.NetworkDisabled || !s.ReadOnlyRoot || !s.CapDropAll || !s.NoNewPrivileges || !s.Init || !s.IPCPrivate || !s.LogDriverNone {
		t.Fatalf("hardening flag missing: %+v", s)
	}
	if s.User != RunnerUser || s.BindDir != "/tmp/x" || s.Labels[LabelManaged] != "true" || s.Labels[LabelRun] != "abc" || s.Labels[LabelBridge] != "s-x" {
		t.Fatalf("identity/labels: %+v", s)
	}
	if s.Cmd[len(s.Cmd)-1] != BridgeSocket {
		t.Fatalf("the runner is not told the endpoint's address: %v", s.Cmd)
	}
	// Every label is a valid Kubernetes label.
	key := regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	for k, v := range s.Labels {
		if !key.MatchString(k) {
			t.Errorf("label key %q is not a valid Kubernetes label key", k)
		}
		if err := checkLabelValue(k, v); err != nil {
			t.Error(err)
		}
	}
	if s.Seccomp == nil {
		t.Error("no seccomp profile in the spec")
	}
	if _, err := New(d, WithImage("x"), WithOwner("host/pid/start")); !errdefs.IsInvalidArgument(err) {
		t.Errorf("an owner that is not a label value: %v", err)
	}
	for _, e := range s.Env {
		if !strings.HasPrefix(e, "PATH=") && !strings.HasPrefix(e, "HOME=") && !strings.HasPrefix(e, "LANG=") {
			t.Fatalf("unexpected env %q", e)
		}
	}
}

// Calls the program issues at once are invoked one at a time, in order.
func TestBindingsRunInIssueOrder(t *testing.T) {
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		for i := 1; i <= 20; i++ {
			r.send(`{"type":"call","id":` + itoa(i) + `,"global":"tools","name":"rec","args":` + itoa(i) + `}`)
		}
		for i := 1; i <= 20; i++ {
			if _, err := r.readResult(); err != nil {
				return ExitStatus{Code: 90}
			}
		}
		r.send(done(""))
		<-ctx.Done()
		return ExitStatus{}
	})
	rt, dir := newTestRuntime(t, d, nil)
	var order []string
	var inFlight atomic.Int32
	rec := func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
		if inFlight.Add(1) != 1 {
			t.Error("two bindings ran at once")
		}
		time.Sleep(time.Millisecond)
		order = append(order, string(args))
		inFlight.Add(-1)
		return args, nil
	}
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x", Bindings: []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{"rec": rec}}}})
	if err != nil || res.Error != nil {
		t.Fatal(err, res.Error)
	}
	for i, got := range order {
		if got != itoa(i+1) {
			t.Fatalf("order %v", order)
		}
	}
	if len(order) != 20 {
		t.Fatalf("%d calls", len(order))
	}
	d.checkNoLeaks(t, dir)
}

// blockingCPU is a driver whose CPU sampling hangs until cancelled, like a
// stats API under load: frames must still flow.
// blockingCPU answers the baseline read, then hangs like a slow stats API.
type blockingCPU struct {
	*fakeDriver
	calls *atomic.Int32
}

func (b blockingCPU) CPUUsage(ctx context.Context, id string) (time.Duration, error) {
	if b.calls.Add(1) == 1 {
		return 0, nil
	}
	<-ctx.Done()
	return 0, ctx.Err()
}

// failingCPU fails every read after the first n.
type failingCPU struct {
	*fakeDriver
	calls *atomic.Int32
	n     int32
}

func (f failingCPU) CPUUsage(ctx context.Context, id string) (time.Duration, error) {
	if f.calls.Add(1) <= f.n {
		return 0, nil
	}
	return 0, errors.New("cgroup gone, stats API down")
}

// The compute budget is never silently unenforced (issue 18, item 5): a
// container whose CPU time cannot be read at the start is not given the
// program (an unavailable error, nothing left behind), and one whose
// samples keep failing is stopped.
func TestComputeMeterFailsClosed(t *testing.T) {
	t.Run("no baseline", func(t *testing.T) {
		d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
			r.hello()
			<-ctx.Done()
			return ExitStatus{}
		})
		rt, dir := newTestRuntime(t, failingCPU{d, new(atomic.Int32), 0}, nil)
		d.rt = rt
		res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
		if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "compute budget could not be enforced") {
			t.Fatalf("got %+v, %v; want an unavailable error", res, err)
		}
		d.checkNoLeaks(t, dir)
	})
	t.Run("samples lost", func(t *testing.T) {
		d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
			r.handshake()
			<-ctx.Done()
			return ExitStatus{}
		})
		rt, dir := newTestRuntime(t, failingCPU{d, new(atomic.Int32), 3}, func(l *Limits) { l.WallTime = 20 * time.Second })
		d.rt = rt
		start := time.Now()
		res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
		if err != nil || res.Error == nil || res.Error.Kind != backend.FailureExit || !strings.Contains(res.Error.Message, "could not read the program's CPU time") {
			t.Fatalf("got %+v, %v", res.Error, err)
		}
		if d := time.Since(start); d < meterLoss || d > meterLoss+3*time.Second {
			t.Errorf("stopped after %v, want about %v", d, meterLoss)
		}
		d.checkNoLeaks(t, dir)
	})
}

func TestSlowCPUSamplingNeverHoldsUpFrames(t *testing.T) {
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.handshake()
		for i := 1; i <= 10; i++ {
			r.send(`{"type":"call","id":` + itoa(i) + `,"global":"tools","name":"echo","args":1}`)
			if _, err := r.readResult(); err != nil {
				return ExitStatus{Code: 90}
			}
		}
		r.send(done(`"ok"`))
		<-ctx.Done()
		return ExitStatus{}
	})
	rt, dir := newTestRuntime(t, blockingCPU{d, new(atomic.Int32)}, func(l *Limits) { l.WallTime = 5 * time.Second })
	d.rt = rt
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x", Bindings: echoBindings()})
	if err != nil || res.Error != nil || string(res.Value) != `"ok"` {
		t.Fatalf("%v %+v", err, res.Error)
	}
	d.checkNoLeaks(t, dir)
}

// A runner exits right after its done frame; the exit status may reach
// the host first, and the done frame must still win.
func TestDoneRacingExit(t *testing.T) {
	for i := 0; i < 20; i++ {
		d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
			r.handshake()
			r.send(done(`7`))
			return ExitStatus{}
		})
		rt, dir := newTestRuntime(t, d, nil)
		res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
		if err != nil || res.Error != nil || string(res.Value) != "7" {
			t.Fatalf("iteration %d: %v %+v", i, err, res.Error)
		}
		d.checkNoLeaks(t, dir)
	}
}

// A run shorter than the meter's first tick still reports the CPU it
// used: stop takes one last sample. The meter's ticker never fires here,
// so the run is shorter than a tick by construction, however slow the
// machine: the base reading and stop's last sample are the only two.
func TestShortRunReportsCPU(t *testing.T) {
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		if _, err := r.handshake(); err != nil {
			return ExitStatus{Code: 90}
		}
		r.send(done(`1`))
		<-ctx.Done()
		return ExitStatus{}
	})
	// Every sample reads 3 ms more than the one before it.
	var mu sync.Mutex
	var used time.Duration
	var samples int
	d.cpu = func(time.Duration) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		samples++
		used += 3 * time.Millisecond
		return used
	}
	rt, dir := newTestRuntime(t, d, nil)
	rt.meterTick = func() (<-chan time.Time, func()) { return nil, func() {} }
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
	if err != nil || res.Error != nil {
		t.Fatalf("%+v %v", res.Error, err)
	}
	mu.Lock()
	n := samples
	mu.Unlock()
	if res.Stats.CPU != 3*time.Millisecond || n != 2 {
		t.Errorf("CPU %v from %d samples, want 3ms from the base and the last one", res.Stats.CPU, n)
	}
	rt.Close(context.Background())
	d.checkNoLeaks(t, dir)
}
