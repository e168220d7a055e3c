package egress

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Defaults and bounds of a Config.
const (
	// DefaultMaxBytes caps a run's egress bytes (up and down together)
	// when a Config leaves MaxBytes zero.
	DefaultMaxBytes = 10 << 20
	// DefaultMaxConnections caps a run's connection attempts when a Config
	// leaves MaxConnections zero.
	DefaultMaxConnections = 16
	// MaxAllow bounds the allowlist's length.
	MaxAllow = 256
	// MaxCABytes bounds the extra CA bundle.
	MaxCABytes = 64 << 10
	// DialTimeout bounds resolving and connecting to one target.
	DialTimeout = 10 * time.Second
)

// ErrInvalidConfig is wrapped by every error New and Narrow return for a
// bad configuration or request.
var ErrInvalidConfig = errors.New("invalid egress configuration")

// Resolver looks names up. *net.Resolver satisfies it; tests map names
// with their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc connects to one checked address. nil means a net.Dialer.
type DialFunc func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)

// Config is the operator's egress configuration for runs.
type Config struct {
	// Allow lists the permitted targets: "host:port" (exact name) or
	// "*.domain:port" (any name below domain, not domain itself). Names
	// are matched case-insensitively, a trailing dot ignored.
	Allow []string `json:"allow"`
	// MaxBytes caps the bytes of a run's connections, both directions
	// together (0: DefaultMaxBytes).
	MaxBytes int64 `json:"maxBytes,omitempty"`
	// MaxConnections caps a run's connection attempts, refused ones
	// included (0: DefaultMaxConnections).
	MaxConnections int `json:"maxConnections,omitempty"`
	// AllowPrivate names addresses ("10.1.2.3", "::1") or CIDRs
	// ("10.0.0.0/8") a name may resolve to even though they are in a
	// refused range.
	AllowPrivate []string `json:"allowPrivate,omitempty"`
	// CAPEM is an optional extra CA bundle (PEM) the program's HTTPS
	// clients trust besides the system's: a test CA, an enterprise CA.
	CAPEM string `json:"caPem,omitempty"`

	// Resolver looks names up (nil: net.DefaultResolver).
	Resolver Resolver `json:"-"`
	// Dial connects to a checked address (nil: a net.Dialer).
	Dial DialFunc `json:"-"`
	// OnEvent receives one Event per connection. It is called from the
	// connection's goroutines and must not block.
	OnEvent func(Event) `json:"-"`
}

// Policy is a compiled Config.
type Policy struct {
	allow          []pattern
	private        []netip.Prefix
	maxBytes       int64
	maxConnections int
	ca             string
	resolver       Resolver
	dial           DialFunc
	onEvent        func(Event)
}

// New validates c and compiles it. Every error wraps ErrInvalidConfig and
// names the offending entry.
func New(c Config) (*Policy, error) {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	p := &Policy{
		maxBytes:       c.MaxBytes,
		maxConnections: c.MaxConnections,
		ca:             c.CAPEM,
		resolver:       c.Resolver,
		dial:           c.Dial,
		onEvent:        c.OnEvent,
	}
	if len(c.Allow) == 0 {
		bad("allow: at least one host:port is needed (without egress, leave the configuration out)")
	}
	if len(c.Allow) > MaxAllow {
		bad("allow: %d entries, at most %d", len(c.Allow), MaxAllow)
	}
	for _, s := range c.Allow {
		pat, err := parsePattern(s)
		if err != nil {
			bad("allow %q: %v", clip(s), err)
			continue
		}
		p.allow = append(p.allow, pat)
	}
	for _, s := range c.AllowPrivate {
		pfx, err := parsePrefix(s)
		if err != nil {
			bad("allowPrivate %q: %v", clip(s), err)
			continue
		}
		p.private = append(p.private, pfx)
	}
	switch {
	case c.MaxBytes < 0:
		bad("maxBytes %d: must not be negative", c.MaxBytes)
	case c.MaxBytes == 0:
		p.maxBytes = DefaultMaxBytes
	}
	switch {
	case c.MaxConnections < 0:
		bad("maxConnections %d: must not be negative", c.MaxConnections)
	case c.MaxConnections == 0:
		p.maxConnections = DefaultMaxConnections
	}
	if c.CAPEM != "" {
		if err := checkCA(c.CAPEM); err != nil {
			bad("caPem: %v", err)
		}
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(errs, "; "))
	}
	return p, nil
}

func checkCA(s string) error {
	if len(s) > MaxCABytes {
		return fmt.Errorf("%d bytes, at most %d", len(s), MaxCABytes)
	}
	rest := []byte(s)
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("a %q block: only CERTIFICATE blocks belong in a CA bundle", b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("certificate %d: %v", n+1, err)
		}
		n++
	}
	if n == 0 || strings.TrimSpace(string(rest)) != "" {
		return errors.New("not a PEM bundle of certificates")
	}
	return nil
}

// Narrow returns a policy whose allowlist is allow, after checking that
// the receiver's allowlist covers every entry: a request may narrow the
// operator's list, never widen it. An empty allow keeps the list.
func (p *Policy) Narrow(allow []string) (*Policy, error) {
	if len(allow) == 0 {
		return p, nil
	}
	if len(allow) > MaxAllow {
		return nil, fmt.Errorf("%w: allow: %d entries, at most %d", ErrInvalidConfig, len(allow), MaxAllow)
	}
	var errs []string
	var pats []pattern
	for _, s := range allow {
		q, err := parsePattern(s)
		if err != nil {
			errs = append(errs, fmt.Sprintf("allow %q: %v", clip(s), err))
			continue
		}
		covered := false
		for _, a := range p.allow {
			covered = covered || a.covers(q)
		}
		if !covered {
			errs = append(errs, fmt.Sprintf("allow %q is not within the server's allowlist: a request may narrow egress, never widen it", clip(s)))
			continue
		}
		pats = append(pats, q)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(errs, "; "))
	}
	n := *p
	n.allow = pats
	return &n, nil
}

// WithEvents returns a copy of p whose events also go to fn (after the
// receivers p already has): a run's own receiver besides the operator's.
func (p *Policy) WithEvents(fn func(Event)) *Policy {
	n := *p
	prev := p.onEvent
	switch {
	case fn == nil:
	case prev == nil:
		n.onEvent = fn
	default:
		n.onEvent = func(e Event) { prev(e); fn(e) }
	}
	return &n
}

// Allow reports the allowlist, normalized.
func (p *Policy) Allow() []string {
	out := make([]string, len(p.allow))
	for i, a := range p.allow {
		out[i] = a.String()
	}
	return out
}

// CAPEM is the extra CA bundle the runner trusts ("" for none).
func (p *Policy) CAPEM() string { return p.ca }

// MaxBytes and MaxConnections report the per-run caps.
func (p *Policy) MaxBytes() int64     { return p.maxBytes }
func (p *Policy) MaxConnections() int { return p.maxConnections }
