package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// mapResolver answers from a table; answers[name] is consumed one answer
// per lookup, the last one repeating.
type mapResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	lookups int
}

func (r *mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups++
	a := r.answers[host]
	if len(a) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := a[0]
	if len(a) > 1 {
		r.answers[host] = a[1:]
	}
	return out, nil
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// recorder records events and dials into a pipe whose far end echoes.
type recorder struct {
	mu     sync.Mutex
	events []Event
	dialed []netip.AddrPort
}

func (r *recorder) onEvent(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) dial(_ context.Context, ap netip.AddrPort) (net.Conn, error) {
	r.mu.Lock()
	r.dialed = append(r.dialed, ap)
	r.mu.Unlock()
	a, b := net.Pipe()
	go func() {
		defer b.Close()
		_, _ = io.Copy(b, b)
	}()
	return a, nil
}

func newPolicy(t *testing.T, c Config, res *mapResolver) (*Policy, *recorder) {
	t.Helper()
	rec := &recorder{}
	c.Resolver, c.Dial, c.OnEvent = res, rec.dial, rec.onEvent
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p, rec
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string // "" = valid
	}{
		{"exact and wildcard", Config{Allow: []string{"api.github.com:443", "*.example.com:443"}}, ""},
		{"empty allow", Config{}, "at least one"},
		{"no port", Config{Allow: []string{"api.github.com"}}, "want host:port"},
		{"port zero", Config{Allow: []string{"a.com:0"}}, "from 1 to 65535"},
		{"port too big", Config{Allow: []string{"a.com:70000"}}, "from 1 to 65535"},
		{"raw ip", Config{Allow: []string{"10.0.0.1:443"}}, "IP address cannot be allowlisted"},
		{"raw ipv6", Config{Allow: []string{"[::1]:443"}}, "IP address cannot be allowlisted"},
		{"bare wildcard", Config{Allow: []string{"*:443"}}, "whole first label"},
		{"tld wildcard", Config{Allow: []string{"*.com:443"}}, "at least two labels"},
		{"numeric tail", Config{Allow: []string{"1.2.3.4.:443"}}, "IP address"},
		{"odd chars", Config{Allow: []string{"a b.com:443"}}, "not a DNS name"},
		{"bad private", Config{Allow: []string{"a.com:443"}, AllowPrivate: []string{"nope"}}, "allowPrivate"},
		{"negative bytes", Config{Allow: []string{"a.com:443"}, MaxBytes: -1}, "maxBytes"},
		{"negative conns", Config{Allow: []string{"a.com:443"}, MaxConnections: -1}, "maxConnections"},
		{"bad ca", Config{Allow: []string{"a.com:443"}, CAPEM: "hello"}, "caPem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.c)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidConfig containing %q", err, tc.want)
			}
		})
	}
}

func TestAllowlistMatching(t *testing.T) {
	res := &mapResolver{answers: map[string][][]netip.Addr{}}
	for _, n := range []string{"api.github.com", "a.example.com", "b.c.example.com", "example.com", "evil-example.com", "api.github.com.evil.org"} {
		res.answers[n] = [][]netip.Addr{addrs("93.184.216.34")}
	}
	p, _ := newPolicy(t, Config{Allow: []string{"api.github.com:443", "*.example.com:443"}, MaxConnections: 100}, res)
	s := p.Session()
	for _, tc := range []struct {
		host string
		port int
		ok   bool
	}{
		{"api.github.com", 443, true},
		{"API.GitHub.com.", 443, true},
		{"api.github.com", 80, false},
		{"a.example.com", 443, true},
		{"b.c.example.com", 443, true},
		{"example.com", 443, false},
		{"evil-example.com", 443, false},
		{"api.github.com.evil.org", 443, false},
		{"93.184.216.34", 443, false},
		{"[::1]", 443, false},
		{"::1", 443, false},
	} {
		c, err := s.Dial(context.Background(), tc.host, tc.port)
		if tc.ok != (err == nil) {
			t.Errorf("Dial(%q, %d) = %v, want ok=%v", tc.host, tc.port, err, tc.ok)
		}
		if err == nil {
			c.Close()
		} else if tc.ok == false {
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Errorf("Dial(%q, %d) error %v is not a RefusedError", tc.host, tc.port, err)
			}
		}
	}
}

func TestPrivateRangesAreRefused(t *testing.T) {
	private := []string{
		"10.1.2.3", "172.16.0.1", "192.168.1.1", "127.0.0.1", "127.1.2.3", "0.0.0.0", "0.1.2.3",
		"169.254.169.254", "169.254.1.1", "100.64.0.1", "100.100.100.200", "224.0.0.1", "255.255.255.255",
		"::1", "::", "fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
		"64:ff9b::a00:1", "2002:a00:1::1", "198.18.0.1", "192.0.0.1",
	}
	for _, a := range private {
		t.Run(a, func(t *testing.T) {
			res := &mapResolver{answers: map[string][][]netip.Addr{"api.test.dev": {addrs(a)}}}
			p, rec := newPolicy(t, Config{Allow: []string{"api.test.dev:443"}}, res)
			_, err := p.Session().Dial(context.Background(), "api.test.dev", 443)
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("Dial to a name resolving to %s: %v, want refused", a, err)
			}
			if len(rec.dialed) != 0 {
				t.Fatalf("dialed %v", rec.dialed)
			}
			if len(rec.events) != 1 || rec.events[0].Outcome != OutcomeRefused || rec.events[0].Address == "" {
				t.Fatalf("events = %+v", rec.events)
			}
		})
	}
	// One private address among public ones refuses the name.
	res := &mapResolver{answers: map[string][][]netip.Addr{"mixed.test.dev": {addrs("93.184.216.34", "10.0.0.1")}}}
	p, _ := newPolicy(t, Config{Allow: []string{"mixed.test.dev:443"}}, res)
	if _, err := p.Session().Dial(context.Background(), "mixed.test.dev", 443); err == nil {
		t.Fatal("a name with a private address among public ones was allowed")
	}
	// Named in AllowPrivate: allowed, as an address or within a CIDR.
	for _, allow := range []string{"127.0.0.1", "127.0.0.0/8", "::ffff:127.0.0.1"} {
		res := &mapResolver{answers: map[string][][]netip.Addr{"local.test.dev": {addrs("127.0.0.1")}}}
		p, rec := newPolicy(t, Config{Allow: []string{"local.test.dev:8443"}, AllowPrivate: []string{allow}}, res)
		c, err := p.Session().Dial(context.Background(), "local.test.dev", 8443)
		if err != nil {
			t.Fatalf("allowPrivate %s: %v", allow, err)
		}
		c.Close()
		if rec.dialed[0] != netip.MustParseAddrPort("127.0.0.1:8443") {
			t.Fatalf("dialed %v", rec.dialed)
		}
	}
	// A public address passes.
	res = &mapResolver{answers: map[string][][]netip.Addr{"pub.test.dev": {addrs("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946")}}}
	p, _ = newPolicy(t, Config{Allow: []string{"pub.test.dev:443"}}, res)
	c, err := p.Session().Dial(context.Background(), "pub.test.dev", 443)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestAllowPrivateNamesOnlyWhatItNames: an allowPrivate entry lets its own
// addresses through and no other — a CIDR up to its edges, an address
// only itself — whatever else is refused stays refused.
func TestAllowPrivateNamesOnlyWhatItNames(t *testing.T) {
	for _, tc := range []struct {
		allow   []string
		through []string
		refused []string
	}{
		{[]string{"127.0.0.1"}, []string{"127.0.0.1", "::ffff:127.0.0.1"},
			[]string{"127.0.0.2", "127.255.255.255", "10.0.0.1", "192.168.1.1", "169.254.169.254", "::1", "::127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::1"}},
		{[]string{"10.1.0.0/16"}, []string{"10.1.0.0", "10.1.128.9", "10.1.255.255"},
			[]string{"10.0.255.255", "10.2.0.0", "172.16.0.1", "127.0.0.1", "fd00::1"}},
		{[]string{"fd00:1::/32", "192.168.7.7"}, []string{"fd00:1::1", "fd00:1:ffff::1", "192.168.7.7"},
			[]string{"fd00:2::1", "fd00:ec2::254", "192.168.7.8", "::1"}},
	} {
		for _, want := range []bool{true, false} {
			list := tc.refused
			if want {
				list = tc.through
			}
			for _, a := range list {
				res := &mapResolver{answers: map[string][][]netip.Addr{"svc.test.dev": {addrs(a)}}}
				p, rec := newPolicy(t, Config{Allow: []string{"svc.test.dev:443"}, AllowPrivate: tc.allow}, res)
				c, err := p.Session().Dial(context.Background(), "svc.test.dev", 443)
				switch {
				case want && err != nil:
					t.Errorf("allowPrivate %v: %s refused: %v", tc.allow, a, err)
				case want && (len(rec.dialed) != 1 || rec.dialed[0].Addr() != netip.MustParseAddr(a).Unmap()):
					t.Errorf("allowPrivate %v: %s: dialled %v", tc.allow, a, rec.dialed)
				case !want && err == nil:
					t.Errorf("allowPrivate %v: %s was dialled (%v); the policy names only its own entries", tc.allow, a, rec.dialed)
				}
				if c != nil {
					c.Close()
				}
			}
		}
	}
}

// TestRebinding: a resolver that answers public, then private. The proxy
// resolves once and dials the exact address it checked.
func TestRebinding(t *testing.T) {
	res := &mapResolver{answers: map[string][][]netip.Addr{"rebind.test.dev": {addrs("93.184.216.34"), addrs("127.0.0.1")}}}
	p, rec := newPolicy(t, Config{Allow: []string{"rebind.test.dev:443"}}, res)
	s := p.Session()
	c, err := s.Dial(context.Background(), "rebind.test.dev", 443)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if res.lookups != 1 || len(rec.dialed) != 1 || rec.dialed[0] != netip.MustParseAddrPort("93.184.216.34:443") {
		t.Fatalf("lookups %d, dialed %v: want one lookup and the checked public address", res.lookups, rec.dialed)
	}
	// The next connection resolves again, gets the private answer, and is
	// refused.
	if _, err := s.Dial(context.Background(), "rebind.test.dev", 443); err == nil {
		t.Fatal("the rebound (private) answer was dialled")
	}
	if len(rec.dialed) != 1 {
		t.Fatalf("dialed %v", rec.dialed)
	}
}

func TestCaps(t *testing.T) {
	res := &mapResolver{answers: map[string][][]netip.Addr{"api.test.dev": {addrs("93.184.216.34")}}}
	t.Run("connections", func(t *testing.T) {
		p, rec := newPolicy(t, Config{Allow: []string{"api.test.dev:443"}, MaxConnections: 2}, res)
		s := p.Session()
		for i := 0; i < 2; i++ {
			c, err := s.Dial(context.Background(), "api.test.dev", 443)
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
		}
		_, err := s.Dial(context.Background(), "api.test.dev", 443)
		if err == nil || !strings.Contains(err.Error(), "connection cap (2)") {
			t.Fatalf("third connection: %v", err)
		}
		for i := 0; i < 10; i++ {
			if _, err := s.Dial(context.Background(), "api.test.dev", 443); err == nil {
				t.Fatal("a connection over the cap")
			}
		}
		if n := len(rec.events); n != 3 {
			t.Fatalf("%d events, want 3: only the first attempt over the cap is one", n)
		}
		// Refused attempts count too.
		p2, _ := newPolicy(t, Config{Allow: []string{"api.test.dev:443"}, MaxConnections: 1}, res)
		s2 := p2.Session()
		_, _ = s2.Dial(context.Background(), "nope.test.dev", 443)
		if _, err := s2.Dial(context.Background(), "api.test.dev", 443); err == nil {
			t.Fatal("a refused attempt did not count")
		}
		if rec.events[2].Outcome != OutcomeRefused {
			t.Fatalf("events %+v", rec.events)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		p, rec := newPolicy(t, Config{Allow: []string{"api.test.dev:443"}, MaxBytes: 10}, res)
		s := p.Session()
		c, err := s.Dial(context.Background(), "api.test.dev", 443)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := c.Write([]byte("hello")); n != 5 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		// 10 bytes used: the next write is cut.
		if n, err := c.Write([]byte("x")); n != 0 || !errors.Is(err, ErrByteCap) {
			t.Fatalf("Write past the cap = %d, %v", n, err)
		}
		c.Close()
		if _, err := s.Dial(context.Background(), "api.test.dev", 443); err == nil || !strings.Contains(err.Error(), "byte cap") {
			t.Fatalf("a connection after the cap: %v", err)
		}
		ev := rec.events[0]
		if ev.Outcome != OutcomeCapped || ev.BytesUp != 5 || ev.BytesDown != 5 || ev.Address != "93.184.216.34" || ev.Host != "api.test.dev" || ev.Port != 443 {
			t.Fatalf("event %+v", ev)
		}
	})
}

func TestNarrow(t *testing.T) {
	p, err := New(Config{Allow: []string{"api.github.com:443", "*.example.com:443"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		allow []string
		ok    bool
	}{
		{[]string{"api.github.com:443"}, true},
		{[]string{"a.example.com:443", "*.b.example.com:443"}, true},
		{[]string{"*.example.com:443"}, true},
		{[]string{"example.com:443"}, false},
		{[]string{"api.github.com:80"}, false},
		{[]string{"*.github.com:443"}, false},
		// An exact name covers itself, not the names below it.
		{[]string{"*.api.github.com:443"}, false},
		{[]string{"x.api.github.com:443"}, false},
		{[]string{"*.a.example.com:443", "b.a.example.com:443"}, true},
		{[]string{"*.example.com:8443"}, false},
		{[]string{"evil.org:443"}, false},
		{[]string{"a.example.com:443", "evil.org:443"}, false},
	} {
		n, err := p.Narrow(tc.allow)
		if tc.ok != (err == nil) {
			t.Errorf("Narrow(%v) = %v, want ok=%v", tc.allow, err, tc.ok)
			continue
		}
		if err == nil && len(n.Allow()) != len(tc.allow) {
			t.Errorf("Narrow(%v).Allow() = %v", tc.allow, n.Allow())
		}
	}
	// A narrowed policy refuses what it dropped.
	res := &mapResolver{answers: map[string][][]netip.Addr{"api.github.com": {addrs("93.184.216.34")}}}
	p2, _ := newPolicy(t, Config{Allow: []string{"api.github.com:443", "*.example.com:443"}}, res)
	n, err := p2.Narrow([]string{"a.example.com:443"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Session().Dial(context.Background(), "api.github.com", 443); err == nil {
		t.Fatal("a narrowed policy allowed a dropped name")
	}
}

func TestWithEventsChains(t *testing.T) {
	res := &mapResolver{answers: map[string][][]netip.Addr{}}
	p, rec := newPolicy(t, Config{Allow: []string{"api.test.dev:443"}}, res)
	var mine []Event
	q := p.WithEvents(func(e Event) { mine = append(mine, e) })
	_, _ = q.Session().Dial(context.Background(), "nope.test.dev", 443)
	if len(mine) != 1 || len(rec.events) != 1 || mine[0].Outcome != OutcomeRefused || mine[0].Type != "egress" {
		t.Fatalf("run's %+v, operator's %+v", mine, rec.events)
	}
	// The original policy is unchanged.
	_, _ = p.Session().Dial(context.Background(), "nope.test.dev", 443)
	if len(mine) != 1 || len(rec.events) != 2 {
		t.Fatalf("run's %d, operator's %d", len(mine), len(rec.events))
	}
}

// inFlightConn is an upstream connection whose Read and Write have moved
// their bytes but return only once the connection is closed and the
// Event is out — or, where Close rightly waits for them, a moment later.
type inFlightConn struct {
	net.Conn
	entered, closed, emitted chan struct{}
	once                     sync.Once
	err                      error // what the I/O in flight fails with
}

func (c *inFlightConn) hold() {
	close(c.entered)
	<-c.closed
	select {
	case <-c.emitted: // the Event went out before the I/O counted
	case <-time.After(200 * time.Millisecond): // Close waits for the I/O: bounds that wait, never the verdict
	}
}

func (c *inFlightConn) Write(b []byte) (int, error) {
	c.hold()
	if c.err != nil {
		return 0, c.err
	}
	return len(b), nil
}

func (c *inFlightConn) Read(b []byte) (int, error) {
	c.hold()
	if c.err != nil {
		return 0, c.err
	}
	return copy(b, "pong"), nil
}
func (c *inFlightConn) Close() error { c.once.Do(func() { close(c.closed) }); return nil }

// TestEventCountsBytesInFlightAtClose: a Read and a Write in flight when
// the connection closes (the tunnel closes it from another goroutine once
// the run settles) count in the Event: it is taken after they counted.
// I/O that fails because of that closing does not make the connection
// "failed".
func TestEventCountsBytesInFlightAtClose(t *testing.T) {
	for _, op := range []string{"write", "read", "write cut by the close", "read cut by the close"} {
		t.Run(op, func(t *testing.T) {
			inner := &inFlightConn{entered: make(chan struct{}), closed: make(chan struct{}), emitted: make(chan struct{})}
			if strings.HasSuffix(op, "cut by the close") {
				inner.err = io.ErrClosedPipe
			}
			var ev Event
			res := &mapResolver{answers: map[string][][]netip.Addr{"api.test.dev": {addrs("93.184.216.34")}}}
			p, err := New(Config{Allow: []string{"api.test.dev:443"}, Resolver: res,
				Dial:    func(context.Context, netip.AddrPort) (net.Conn, error) { return inner, nil },
				OnEvent: func(e Event) { ev = e; close(inner.emitted) }})
			if err != nil {
				t.Fatal(err)
			}
			c, err := p.Session().Dial(context.Background(), "api.test.dev", 443)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				var err error
				if strings.HasPrefix(op, "write") {
					_, err = c.Write([]byte("hello"))
				} else {
					_, err = c.Read(make([]byte, 16))
				}
				done <- err
			}()
			<-inner.entered
			c.Close()
			if err := <-done; err != inner.err {
				t.Fatal(err)
			}
			if ev.Outcome != OutcomeOK || ev.Reason != "" || (inner.err == nil && ev.BytesUp+ev.BytesDown == 0) {
				t.Fatalf("event %+v after a %s in flight at Close: want ok, counting the bytes that crossed", ev, op)
			}
			if up, down, _ := c.Result(); up != ev.BytesUp || down != ev.BytesDown {
				t.Fatalf("event %+v, connection %d up %d down", ev, up, down)
			}
		})
	}
}

// TestEveryCloseReturnsAfterTheEvent: the tunnel closes a connection from
// two goroutines (the run's settlement and the stream's own end); the
// run counts as over when the stream's goroutine returns, so its Close
// must not return before the first one has reported the Event.
func TestEveryCloseReturnsAfterTheEvent(t *testing.T) {
	inner := &inFlightConn{entered: make(chan struct{}), closed: make(chan struct{}), emitted: make(chan struct{})}
	var (
		mu sync.Mutex
		ev []Event
	)
	res := &mapResolver{answers: map[string][][]netip.Addr{"api.test.dev": {addrs("93.184.216.34")}}}
	p, err := New(Config{Allow: []string{"api.test.dev:443"}, Resolver: res,
		Dial: func(context.Context, netip.AddrPort) (net.Conn, error) { return inner, nil },
		OnEvent: func(e Event) {
			mu.Lock()
			ev = append(ev, e)
			mu.Unlock()
			close(inner.emitted)
		}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Session().Dial(context.Background(), "api.test.dev", 443)
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		_, _ = c.Write([]byte("hello"))
	}()
	<-inner.entered
	first := make(chan struct{})
	go func() {
		defer close(first)
		c.Close() // waits for the Write in flight
	}()
	<-inner.closed // the first Close is under way
	c.Close()
	mu.Lock()
	n := len(ev)
	mu.Unlock()
	<-first
	<-wrote
	if n != 1 {
		t.Fatalf("the second Close returned with %d events reported, want the one", n)
	}
	if len(ev) != 1 || ev[0].BytesUp != 5 {
		t.Fatalf("events %+v", ev)
	}
}
