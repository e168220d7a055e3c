package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Event is one egress connection, reported when it ends (refused ones
// at once).
type Event struct {
	Type string `json:"type"` // always "egress"
	Host string `json:"host"`
	Port int    `json:"port"`
	// Address is the address dialled (empty when none was).
	Address   string `json:"address,omitempty"`
	BytesUp   int64  `json:"bytesUp"`
	BytesDown int64  `json:"bytesDown"`
	// Outcome is "ok" (the connection ran and closed), "refused" (policy
	// or cap: nothing was sent), "failed" (resolving or connecting failed,
	// or the connection broke), or "capped" (cut at the run's byte cap).
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	// DurationMs is how long the connection was open.
	DurationMs int64 `json:"durationMs"`
}

// Outcomes of an Event.
const (
	OutcomeOK      = "ok"
	OutcomeRefused = "refused"
	OutcomeFailed  = "failed"
	OutcomeCapped  = "capped"
)

// RefusedError is a connection the policy refused.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "egress refused: " + e.Reason }

// ErrByteCap is returned by a connection's Read or Write once the run's
// byte cap is reached.
var ErrByteCap = errors.New("egress: the run's byte cap is reached")

// Session is one run's egress: its counters under one Policy.
type Session struct {
	p     *Policy
	conns atomic.Int64
	bytes atomic.Int64
}

// Session starts a run's egress.
func (p *Policy) Session() *Session { return &Session{p: p} }

// Policy returns the session's policy.
func (s *Session) Policy() *Policy { return s.p }

// Dial checks and connects one target. The target is a name and a port as
// the program's CONNECT named them. It returns a *Conn that counts bytes
// against the run's cap and reports its Event when closed; a refusal is a
// *RefusedError and is reported at once.
func (s *Session) Dial(ctx context.Context, host string, port int) (*Conn, error) {
	start := time.Now()
	ev := Event{Type: "egress", Host: clip(host), Port: port}
	fail := func(outcome, reason string) error {
		ev.Outcome, ev.Reason = outcome, reason
		ev.DurationMs = time.Since(start).Milliseconds()
		s.p.emit(ev)
		if outcome == OutcomeRefused {
			return &RefusedError{Reason: reason}
		}
		return errors.New(reason)
	}
	if n := s.conns.Add(1); n > int64(s.p.maxConnections) {
		reason := fmt.Sprintf("the run's connection cap (%d) is reached", s.p.maxConnections)
		if n > int64(s.p.maxConnections)+1 {
			// Only the first attempt over the cap is an event: a run has
			// at most maxConnections+1 of them.
			return nil, &RefusedError{Reason: reason}
		}
		return nil, fail(OutcomeRefused, reason)
	}
	if port < 1 || port > 65535 {
		return nil, fail(OutcomeRefused, fmt.Sprintf("port %d is out of range", port))
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return nil, fail(OutcomeRefused, "a raw IP address is not allowed: egress goes to allowlisted names only")
	}
	name, err := normalizeName(host)
	if err != nil {
		return nil, fail(OutcomeRefused, err.Error())
	}
	allowed := false
	for _, a := range s.p.allow {
		allowed = allowed || a.matches(name, uint16(port))
	}
	if !allowed {
		return nil, fail(OutcomeRefused, fmt.Sprintf("%s is not on the egress allowlist", net.JoinHostPort(name, strconv.Itoa(port))))
	}
	if s.bytes.Load() >= s.p.maxBytes {
		return nil, fail(OutcomeRefused, fmt.Sprintf("the run's byte cap (%d) is reached", s.p.maxBytes))
	}
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	// Resolved once, here: the address dialled is one of these, checked.
	addrs, err := s.p.resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil, fail(OutcomeFailed, fmt.Sprintf("resolving %s: %v", name, err))
	}
	if len(addrs) == 0 {
		return nil, fail(OutcomeFailed, fmt.Sprintf("resolving %s: no addresses", name))
	}
	for _, a := range addrs {
		if why := s.p.checkAddr(a); why != "" {
			ev.Address = a.Unmap().String()
			return nil, fail(OutcomeRefused, fmt.Sprintf("%s resolves to %s, %s, which the policy's allowPrivate does not name", name, a.Unmap(), why))
		}
	}
	var lastErr error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
		c, err := s.p.dialAddr(ctx, ap)
		if err != nil {
			lastErr = err
			continue
		}
		ev.Address = ap.Addr().String()
		return &Conn{Conn: c, s: s, ev: ev, start: start, reported: make(chan struct{})}, nil
	}
	return nil, fail(OutcomeFailed, fmt.Sprintf("connecting to %s: %v", name, lastErr))
}

// Refuse records a connection refused before the policy was asked (the
// caller's own bound, such as streams open at once): it counts against
// the connection cap and is reported as a refused Event.
func (s *Session) Refuse(host string, port int, reason string) error {
	if s.conns.Add(1) > int64(s.p.maxConnections)+1 {
		return &RefusedError{Reason: reason}
	}
	s.p.emit(Event{Type: "egress", Host: clip(host), Port: port, Outcome: OutcomeRefused, Reason: reason})
	return &RefusedError{Reason: reason}
}

func (p *Policy) dialAddr(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	if p.dial != nil {
		return p.dial(ctx, ap)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", ap.String())
}

func (p *Policy) emit(ev Event) {
	if p.onEvent != nil {
		p.onEvent(ev)
	}
}

// Conn is one allowed connection. Read and Write count bytes against the
// run's cap; past it they fail with ErrByteCap. Close reports the Event.
type Conn struct {
	net.Conn
	s     *Session
	start time.Time

	// io is held shared by each Read and Write until it has counted its
	// bytes, and exclusively by Close before it takes the Event: closing
	// the connection ends the I/O in flight, and the Event then counts
	// every byte that crossed (a Write that had sent its bytes but not
	// counted them was missing from it).
	io sync.RWMutex
	// reported is closed once the Event is out: every Close returns
	// after it.
	reported chan struct{}

	mu     sync.Mutex
	ev     Event
	capped bool
	broken string
	closed bool
}

// take reserves up to n bytes of the run's cap; it returns how many it
// got.
func (c *Conn) take(n int) int {
	for {
		used := c.s.bytes.Load()
		left := c.s.p.maxBytes - used
		if left <= 0 {
			return 0
		}
		k := int64(n)
		if k > left {
			k = left
		}
		if c.s.bytes.CompareAndSwap(used, used+k) {
			return int(k)
		}
	}
}

func (c *Conn) Read(b []byte) (int, error) {
	c.io.RLock()
	defer c.io.RUnlock()
	n, err := c.Conn.Read(b)
	if n > 0 {
		got := c.take(n)
		c.mu.Lock()
		c.ev.BytesDown += int64(got)
		if got < n {
			c.capped = true
		}
		c.mu.Unlock()
		if got < n {
			return got, ErrByteCap
		}
	}
	if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
		c.noteBroken(err)
	}
	return n, err
}

func (c *Conn) Write(b []byte) (int, error) {
	c.io.RLock()
	defer c.io.RUnlock()
	got := c.take(len(b))
	n, err := c.Conn.Write(b[:got])
	c.mu.Lock()
	c.ev.BytesUp += int64(n)
	if got < len(b) {
		c.capped = true
	}
	c.mu.Unlock()
	if err != nil {
		c.noteBroken(err)
		return n, err
	}
	if got < len(b) {
		return n, ErrByteCap
	}
	return n, nil
}

func (c *Conn) noteBroken(err error) {
	c.mu.Lock()
	if c.broken == "" && !c.closed {
		c.broken = err.Error()
	}
	c.mu.Unlock()
}

// Result is the connection's bytes each way so far, and why it ended
// badly ("" while it is fine): the byte cap, or a broken connection.
func (c *Conn) Result() (up, down int64, problem string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.capped:
		problem = fmt.Sprintf("the run's byte cap (%d) is reached", c.s.p.maxBytes)
	case c.broken != "":
		problem = c.broken
	}
	return c.ev.BytesUp, c.ev.BytesDown, problem
}

// Close closes the connection and reports its Event (once). When any
// Close returns, the Event has been reported.
func (c *Conn) Close() error {
	c.mu.Lock()
	already := c.closed
	c.closed = true // errors from here on are this closing's, not a broken connection
	c.mu.Unlock()
	err := c.Conn.Close()
	if already {
		<-c.reported
		return err
	}
	defer close(c.reported)
	c.io.Lock() // the Reads and Writes that were in flight have counted
	c.mu.Lock()
	ev := c.ev
	switch {
	case c.capped:
		ev.Outcome, ev.Reason = OutcomeCapped, fmt.Sprintf("the run's byte cap (%d) is reached", c.s.p.maxBytes)
	case c.broken != "":
		ev.Outcome, ev.Reason = OutcomeFailed, c.broken
	default:
		ev.Outcome = OutcomeOK
	}
	ev.DurationMs = time.Since(c.start).Milliseconds()
	c.mu.Unlock()
	c.io.Unlock()
	c.s.p.emit(ev)
	return err
}

// Stats reports the run's totals so far.
func (s *Session) Stats() (connections, bytes int64) {
	return min(s.conns.Load(), int64(s.p.maxConnections)), s.bytes.Load()
}
