package container

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/egress"
	"github.com/dsh-container/dsh-container/portproto"
)

type loopResolver struct{}

func (loopResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host == "up.test" {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// upstream is a TCP server on loopback: echo (or silent) per connection;
// closed counts connections it saw end.
type upstream struct {
	ln     net.Listener
	mu     sync.Mutex
	closed int
	wg     sync.WaitGroup
}

func newUpstream(t *testing.T, echo bool) *upstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{ln: ln}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				if echo {
					_, _ = io.Copy(c, c)
				} else {
					_, _ = io.Copy(io.Discard, c)
				}
				c.Close()
				u.mu.Lock()
				u.closed++
				u.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); u.wg.Wait() })
	return u
}

func (u *upstream) port() int { return u.ln.Addr().(*net.TCPAddr).Port }

func (u *upstream) waitClosed(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		u.mu.Lock()
		c := u.closed
		u.mu.Unlock()
		if c >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream saw %d of %d connections close", c, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testPolicy(t *testing.T, port int, events *[]egress.Event, mu *sync.Mutex) *egress.Policy {
	t.Helper()
	p, err := egress.New(egress.Config{
		Allow:          []string{fmt.Sprintf("up.test:%d", port)},
		AllowPrivate:   []string{"127.0.0.1"},
		MaxConnections: 100, // the open-streams cap is what TestEgressOpenStreamsAreCapped meets
		Resolver:       loopResolver{},
		OnEvent: func(e egress.Event) {
			mu.Lock()
			*events = append(*events, e)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// readHost reads the next host frame.
func (r *fakeRunner) readHost() (portproto.Message, error) {
	_, data, err := r.Conn.ReadMessage()
	if err != nil {
		return nil, err
	}
	return portproto.Decode(portproto.HostToRunner, data, 0)
}

func TestEgressStreams(t *testing.T) {
	exp, _ := inMemoryTracing(t)
	up := newUpstream(t, true)
	var (
		mu     sync.Mutex
		events []egress.Event
	)
	pol := testPolicy(t, up.port(), &events, &mu)
	var trace []string
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		run, err := r.handshake()
		if err != nil || run.Egress == nil || run.Egress.Window != streamWindow {
			trace = append(trace, fmt.Sprintf("handshake: %v %+v", err, run))
			return ExitStatus{Code: 90}
		}
		// A refused open, then an allowed one.
		r.send(fmt.Sprintf(`{"type":"open","stream":1,"host":"nope.test","port":%d}`, up.port()))
		r.send(fmt.Sprintf(`{"type":"open","stream":2,"host":"up.test","port":%d}`, up.port()))
		r.send(`{"type":"data","stream":2,"data":"cGluZw=="}`) // "ping", queued before opened
		var got []byte
		acked := false
		for len(got) < 4 || !acked {
			m, err := r.readHost()
			if err != nil {
				trace = append(trace, "read: "+err.Error())
				return ExitStatus{Code: 90}
			}
			switch m := m.(type) {
			case *portproto.Opened:
				trace = append(trace, fmt.Sprintf("opened %d %v %s", m.Stream, m.OK, m.Message))
			case *portproto.Ack:
				trace = append(trace, fmt.Sprintf("ack %d %d", m.Stream, m.Bytes))
				acked = true
			case *portproto.Data:
				got = append(got, m.Data...)
			}
		}
		trace = append(trace, "echo "+string(got))
		// A stream that overruns its window is closed by the host.
		r.send(fmt.Sprintf(`{"type":"open","stream":3,"host":"up.test","port":%d}`, up.port()))
		big := strings.Repeat("QUFB", (streamWindow+3)/3)
		r.send(`{"type":"data","stream":3,"data":"` + big + `"}`)
		for {
			m, err := r.readHost()
			if err != nil {
				trace = append(trace, "read: "+err.Error())
				return ExitStatus{Code: 90}
			}
			// Stream 1's refusal may come after stream 2's echo.
			if o, ok := m.(*portproto.Opened); ok {
				trace = append(trace, fmt.Sprintf("opened %d %v %s", o.Stream, o.OK, o.Message))
			}
			if c, ok := m.(*portproto.Close); ok && c.Stream == 3 {
				trace = append(trace, "closed 3: "+c.Message)
				break
			}
		}
		// Stream 2 stays open: settlement closes it.
		r.send(done(`"ok"`))
		<-ctx.Done()
		return ExitStatus{}
	})
	rt, dir := newTestRuntime(t, d, nil, WithEgress(pol))
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != nil {
		t.Fatalf("%+v; trace %q", res.Error, trace)
	}
	up.waitClosed(t, 2)
	want := []string{
		"opened 1 false egress refused: nope.test:",
		"opened 2 true",
		"ack 2 4",
		"echo ping",
		"closed 3: the runner sent more than the 131072-byte stream window",
	}
	joined := strings.Join(trace, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("trace lacks %q:\n%s", w, joined)
		}
	}
	rt.Close(context.Background())
	d.checkNoLeaks(t, dir)
	// One egress span per connection, under the program's span: the
	// refused one has error status, the echo carried 4 bytes each way.
	var spans []string
	for _, sp := range exp.GetSpans() {
		if sp.Name != SpanEgress {
			continue
		}
		var host string
		var allowed bool
		var in, out int64
		for _, kv := range sp.Attributes {
			switch kv.Key {
			case AttrEgressHost:
				host = kv.Value.AsString()
			case AttrEgressAllowed:
				allowed = kv.Value.AsBool()
			case AttrEgressBytesIn:
				in = kv.Value.AsInt64()
			case AttrEgressBytesOut:
				out = kv.Value.AsInt64()
			}
		}
		spans = append(spans, fmt.Sprintf("%s allowed=%v in=%d out=%d %s", host, allowed, in, out, sp.Status.Code))
	}
	slices.Sort(spans)
	joinedSpans := strings.Join(spans, "; ")
	if len(spans) != 3 || !strings.Contains(joinedSpans, "nope.test allowed=false in=0 out=0 Error") || !strings.Contains(joinedSpans, "up.test allowed=true in=4 out=4 Unset") {
		t.Errorf("egress spans: %s", joinedSpans)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 3 || events[0].Outcome != egress.OutcomeRefused {
		t.Fatalf("events %+v", events)
	}
	for _, ev := range events[1:] {
		if ev.Address != "127.0.0.1" || ev.Outcome == egress.OutcomeRefused {
			t.Errorf("event %+v", ev)
		}
	}
}

func TestEgressFramesAreProtocolViolations(t *testing.T) {
	up := newUpstream(t, true)
	for _, tc := range []struct {
		name   string
		egress bool
		frame  string
		want   string
	}{
		{"open without egress", false, `{"type":"open","stream":1,"host":"up.test","port":80}`, "a open frame in a run without egress"},
		{"data without egress", false, `{"type":"data","stream":1,"data":"eA=="}`, "a data frame in a run without egress"},
		{"data for a stream never opened", true, `{"type":"data","stream":7,"data":"eA=="}`, "never opened"},
		{"stream ids must increase", true, `{"type":"open","stream":1,"host":"x.test","port":80}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
				if _, err := r.handshake(); err != nil {
					return ExitStatus{Code: 90}
				}
				r.send(tc.frame)
				if tc.want == "" {
					r.send(tc.frame) // the same id again
				}
				<-ctx.Done()
				return ExitStatus{}
			})
			var opts []Option
			if tc.egress {
				var mu sync.Mutex
				var evs []egress.Event
				opts = append(opts, WithEgress(testPolicy(t, up.port(), &evs, &mu)))
			}
			rt, dir := newTestRuntime(t, d, nil, opts...)
			res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == "" {
				want = "stream id 1 after 1"
			}
			if res.Error == nil || res.Error.Kind != backend.FailureExit || !strings.Contains(res.Error.Message, want) {
				t.Fatalf("result %+v, want exit containing %q", res.Error, want)
			}
			rt.Close(context.Background())
			d.checkNoLeaks(t, dir)
		})
	}
}

// At most maxOpenStreams streams are open at once; one more is refused
// (and reported), and settlement closes every upstream connection.
func TestEgressOpenStreamsAreCapped(t *testing.T) {
	up := newUpstream(t, false)
	var (
		mu     sync.Mutex
		events []egress.Event
	)
	pol := testPolicy(t, up.port(), &events, &mu)
	var opened, refused int
	var refusal string
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := r.handshake(); err != nil {
			return ExitStatus{Code: 90}
		}
		for i := 1; i <= maxOpenStreams+1; i++ {
			r.send(fmt.Sprintf(`{"type":"open","stream":%d,"host":"up.test","port":%d}`, i, up.port()))
		}
		for opened+refused < maxOpenStreams+1 {
			m, err := r.readHost()
			if err != nil {
				return ExitStatus{Code: 90}
			}
			if o, ok := m.(*portproto.Opened); ok {
				if o.OK {
					opened++
				} else {
					refused++
					refusal = o.Message
				}
			}
		}
		r.send(done(`"ok"`))
		<-ctx.Done()
		return ExitStatus{}
	})
	rt, dir := newTestRuntime(t, d, nil, WithEgress(pol))
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
	if err != nil || res.Error != nil {
		t.Fatalf("%v %+v", err, res.Error)
	}
	if opened != maxOpenStreams || refused != 1 || !strings.Contains(refusal, "too many connections open at once") {
		t.Fatalf("opened %d, refused %d (%q)", opened, refused, refusal)
	}
	up.waitClosed(t, maxOpenStreams)
	rt.Close(context.Background())
	d.checkNoLeaks(t, dir)
	mu.Lock()
	defer mu.Unlock()
	if len(events) != maxOpenStreams+1 {
		t.Fatalf("%d events, want %d", len(events), maxOpenStreams+1)
	}
}

// digestUpstream is a TCP server on loopback that reads exactly n bytes
// of each connection, answers their SHA-256 in hex, then drains the
// connection until it closes.
func digestUpstream(t *testing.T, n int) *upstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{ln: ln}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				h := sha256.New()
				if _, err := io.CopyN(h, c, int64(n)); err == nil {
					_, _ = io.WriteString(c, hex.EncodeToString(h.Sum(nil)))
				}
				_, _ = io.Copy(io.Discard, c)
				c.Close()
				u.mu.Lock()
				u.closed++
				u.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); u.wg.Wait() })
	return u
}

// TestEgressUploadBeyondTheWindow: a runner that keeps to the window
// (never more than streamWindow bytes unacknowledged) uploads 1 MiB, eight
// windows, through one stream: every byte reaches upstream in order, is
// acknowledged, and the stream stays open — acknowledged bytes leave the
// window.
func TestEgressUploadBeyondTheWindow(t *testing.T) {
	const total = 1 << 20
	up := digestUpstream(t, total)
	var (
		mu     sync.Mutex
		events []egress.Event
	)
	pol := testPolicy(t, up.port(), &events, &mu)
	body := make([]byte, total)
	for i := range body {
		body[i] = byte(i % 251)
	}
	sum := sha256.Sum256(body)
	want := hex.EncodeToString(sum[:])
	var (
		trace          []string
		acked, maxOpen int
		got            []byte
	)
	d := newFakeDriver(t, func(ctx context.Context, r *fakeRunner) ExitStatus {
		r.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		run, err := r.handshake()
		if err != nil || run.Egress == nil {
			trace = append(trace, fmt.Sprintf("handshake: %v", err))
			return ExitStatus{Code: 90}
		}
		chunk := min(48<<10, (run.Limits.MaxFrameBytes-128)/4*3)
		r.send(fmt.Sprintf(`{"type":"open","stream":1,"host":"up.test","port":%d}`, up.port()))
		// One host frame: an ack frees window, a close ends the test.
		next := func() bool {
			m, err := r.readHost()
			if err != nil {
				trace = append(trace, "read: "+err.Error())
				return false
			}
			switch m := m.(type) {
			case *portproto.Opened:
				if !m.OK {
					trace = append(trace, "refused: "+m.Message)
					return false
				}
			case *portproto.Ack:
				acked += int(m.Bytes)
			case *portproto.Data:
				got = append(got, m.Data...)
			case *portproto.Close:
				trace = append(trace, "closed by the host: "+m.Message)
				return false
			}
			return true
		}
		for sent := 0; sent < total; {
			n := min(chunk, total-sent)
			if sent+n-acked > streamWindow {
				if !next() {
					return ExitStatus{Code: 90}
				}
				continue
			}
			r.send(portproto.Data{Type: portproto.TypeData, Stream: 1, Data: body[sent : sent+n]})
			sent += n
			maxOpen = max(maxOpen, sent-acked)
		}
		for len(got) < len(want) || acked < total {
			if !next() {
				return ExitStatus{Code: 90}
			}
		}
		r.send(`{"type":"close","stream":1}`)
		r.send(done(`"ok"`))
		<-ctx.Done()
		return ExitStatus{}
	})
	rt, dir := newTestRuntime(t, d, nil, WithEgress(pol))
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != nil {
		t.Fatalf("%+v; trace %q", res.Error, trace)
	}
	if string(got) != want || acked != total {
		t.Fatalf("upstream answered %q for the upload (want %q), %d of %d bytes acknowledged; trace %q", got, want, acked, total, trace)
	}
	if maxOpen > streamWindow || maxOpen < streamWindow/2 {
		t.Fatalf("at most %d bytes were unacknowledged: the test must fill the window and keep to it (%d)", maxOpen, streamWindow)
	}
	up.waitClosed(t, 1)
	rt.Close(context.Background())
	d.checkNoLeaks(t, dir)
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 || events[0].Outcome != egress.OutcomeOK || events[0].BytesUp != total || events[0].BytesDown != int64(len(want)) {
		t.Fatalf("events %+v", events)
	}
}
