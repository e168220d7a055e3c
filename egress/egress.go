package egress

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
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

// ErrInvalidConfig is wrapped by every error New, Validate and Narrow
// return for a bad configuration or request.
var ErrInvalidConfig = errors.New("invalid egress configuration")

// Resolver looks names up. *net.Resolver satisfies it; tests map names
// with their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc connects to one checked address. nil means a net.Dialer.
type DialFunc func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)

// Config is the operator's egress configuration for runs. The policy
// file's egress section decodes into it (package policy, which checks it
// with Validate); New compiles it.
type Config struct {
	// Allow lists the permitted targets: "host:port" (exact name) or
	// "*.domain:port" (any name below domain, at any depth, not domain
	// itself). An entry is written as it matches: a lower-case DNS name
	// without a trailing dot, never an IP literal (see parsePattern). The
	// names a program connects to are matched case-insensitively, a
	// trailing dot ignored.
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
	// CAFile names a PEM file of extra certificate authorities the
	// program's HTTPS clients trust besides the system's (a test CA, an
	// enterprise CA). New reads it, at most MaxCABytes; it reaches every
	// run, pooled runners' included, in the run frame.
	CAFile string `json:"caFile,omitempty"`
	// CAPEM is the same bundle given inline, for a caller that holds it
	// (not with CAFile; the policy file has only caFile).
	CAPEM string `json:"caPem,omitempty"`

	// Resolver looks names up (nil: net.DefaultResolver).
	Resolver Resolver `json:"-"`
	// Dial connects to a checked address (nil: a net.Dialer).
	Dial DialFunc `json:"-"`
	// OnEvent receives one Event per connection. It is called from the
	// connection's goroutines and must not block.
	OnEvent func(Event) `json:"-"`
}

// Problem is one invalid entry of a Config.
type Problem struct {
	// Field is the entry's path in the Config as its JSON names it
	// ("allow[2]", "maxBytes"); a file that holds the Config in a section
	// puts the section first ("egress.allow[2]").
	Field string
	// Reason says what is wrong, quoting the entry.
	Reason string
}

// ConfigError is an invalid Config: every problem found, in field order.
// It wraps ErrInvalidConfig.
type ConfigError struct{ Problems []Problem }

func (e *ConfigError) Error() string { return ErrInvalidConfig.Error() + ": " + e.Describe("") }

func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// Describe lists the problems, each field after prefix:
// `egress.allow[0]: "api.github.com": want host:port …; egress.maxBytes: …`.
func (e *ConfigError) Describe(prefix string) string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = prefix + p.Field + ": " + p.Reason
	}
	return strings.Join(parts, "; ")
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

// Validate checks c as New does, without reading CAFile: every pattern,
// address, cap and the inline CA. Its error is a *ConfigError.
func (c Config) Validate() error {
	if _, _, problems := c.check(); len(problems) > 0 {
		return &ConfigError{Problems: problems}
	}
	return nil
}

// check parses c's allowlist and private addresses and reports every
// problem of c but CAFile's content.
func (c Config) check() (allow []pattern, private []netip.Prefix, problems []Problem) {
	bad := func(field, format string, args ...any) {
		problems = append(problems, Problem{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if len(c.Allow) == 0 {
		bad("allow", "at least one host:port is needed (without egress, leave the configuration out)")
	}
	if len(c.Allow) > MaxAllow {
		bad("allow", "%d entries, at most %d", len(c.Allow), MaxAllow)
	}
	for i, s := range c.Allow {
		pat, err := parsePattern(s)
		if err != nil {
			bad(fmt.Sprintf("allow[%d]", i), "%q: %v", clip(s), err)
			continue
		}
		allow = append(allow, pat)
	}
	if c.MaxBytes < 0 {
		bad("maxBytes", "must not be negative (0 means %d)", DefaultMaxBytes)
	}
	if c.MaxConnections < 0 {
		bad("maxConnections", "must not be negative (0 means %d)", DefaultMaxConnections)
	}
	for i, s := range c.AllowPrivate {
		pfx, err := parsePrefix(s)
		if err != nil {
			bad(fmt.Sprintf("allowPrivate[%d]", i), "%q: %v", clip(s), err)
			continue
		}
		private = append(private, pfx)
	}
	switch {
	case c.CAFile != "" && c.CAPEM != "":
		bad("caFile", "a CA bundle comes from a file or inline (CAPEM), not both")
	case c.CAPEM != "":
		if err := checkCA(c.CAPEM); err != nil {
			bad("caPem", "%v", err)
		}
	}
	return allow, private, problems
}

// New validates c, reads its CAFile and compiles it. Its error is a
// *ConfigError (wrapping ErrInvalidConfig) naming every offending entry.
func New(c Config) (*Policy, error) {
	allow, private, problems := c.check()
	p := &Policy{
		allow:          allow,
		private:        private,
		maxBytes:       c.MaxBytes,
		maxConnections: c.MaxConnections,
		ca:             c.CAPEM,
		resolver:       c.Resolver,
		dial:           c.Dial,
		onEvent:        c.OnEvent,
	}
	if c.CAFile != "" && c.CAPEM == "" {
		ca, err := readCAFile(c.CAFile)
		if err == nil {
			if err = checkCA(ca); err != nil {
				err = fmt.Errorf("%s: %w", c.CAFile, err)
			}
		}
		if err != nil {
			problems = append(problems, Problem{Field: "caFile", Reason: err.Error()})
		}
		p.ca = ca
	}
	if len(problems) > 0 {
		return nil, &ConfigError{Problems: problems}
	}
	if p.maxBytes == 0 {
		p.maxBytes = DefaultMaxBytes
	}
	if p.maxConnections == 0 {
		p.maxConnections = DefaultMaxConnections
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	return p, nil
}

// readCAFile reads a CA bundle of at most MaxCABytes.
func readCAFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxCABytes+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > MaxCABytes {
		return "", fmt.Errorf("%s is larger than %d bytes", path, MaxCABytes)
	}
	return string(b), nil
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
