package policy

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
)

// Egress defaults, for a section that leaves maxBytes or maxConnections
// out (or 0).
const (
	DefaultEgressMaxBytes       int64 = 10 << 20
	DefaultEgressMaxConnections       = 16
)

// Egress is the policy's egress section: the names a run's programs may
// reach through the host's CONNECT proxy, and the run's caps. This package
// only parses and validates it.
type Egress struct {
	// Allow lists "host:port" and "*.domain:port" patterns. A host is a
	// lower-case DNS name (IP literals are refused: name what you allow);
	// "*.example.com" matches every name under example.com, at any depth,
	// but not example.com itself. Ports are 1-65535.
	Allow []string `json:"allow"`
	// MaxBytes caps the bytes of all the run's connections, both ways.
	MaxBytes int64 `json:"maxBytes"`
	// MaxConnections caps the connections one run opens.
	MaxConnections int `json:"maxConnections"`
	// AllowPrivate lists the addresses or CIDR prefixes in private,
	// loopback, link-local or metadata ranges that allowed names may
	// resolve to ("10.1.2.3", "10.0.0.0/8"); any other such address is
	// refused.
	AllowPrivate []string `json:"allowPrivate,omitempty"`
	// CAFile names a PEM file of extra certificate authorities the
	// programs' HTTPS clients trust besides the system's (an enterprise
	// or test CA). It reaches every run, pooled runners' included, in
	// the run frame.
	CAFile string `json:"caFile,omitempty"`
}

// parseEgress decodes and validates the egress section.
func parseEgress(raw json.RawMessage) (*Egress, error) {
	fields, err := object("egress", raw, "allow", "maxBytes", "maxConnections", "allowPrivate", "caFile")
	if err != nil {
		return nil, err
	}
	e := &Egress{}
	if v, ok := fields["allow"]; ok {
		if err := json.Unmarshal(v, &e.Allow); err != nil {
			return nil, invalid("egress.allow", "must be an array of \"host:port\" strings")
		}
	}
	if v, ok := fields["maxBytes"]; ok {
		if err := json.Unmarshal(v, &e.MaxBytes); err != nil {
			return nil, invalid("egress.maxBytes", "must be an integer number of bytes")
		}
	}
	if v, ok := fields["maxConnections"]; ok {
		if err := json.Unmarshal(v, &e.MaxConnections); err != nil {
			return nil, invalid("egress.maxConnections", "must be an integer")
		}
	}
	if v, ok := fields["allowPrivate"]; ok {
		if err := json.Unmarshal(v, &e.AllowPrivate); err != nil {
			return nil, invalid("egress.allowPrivate", "must be an array of addresses or CIDR prefixes")
		}
	}
	if v, ok := fields["caFile"]; ok {
		if err := json.Unmarshal(v, &e.CAFile); err != nil || e.CAFile == "" {
			return nil, invalid("egress.caFile", "must be the path of a PEM file")
		}
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if e.MaxBytes == 0 {
		e.MaxBytes = DefaultEgressMaxBytes
	}
	if e.MaxConnections == 0 {
		e.MaxConnections = DefaultEgressMaxConnections
	}
	return e, nil
}

// Validate checks every pattern, address and cap. Zero caps are valid
// (they mean the defaults); negative ones are not. Errors wrap
// errdefs.ErrInvalidArgument and name the field.
func (e *Egress) Validate() error {
	for i, a := range e.Allow {
		if _, _, err := ParsePattern(a); err != nil {
			return invalid(fmt.Sprintf("egress.allow[%d]", i), "%v", err)
		}
	}
	if e.MaxBytes < 0 {
		return invalid("egress.maxBytes", "must not be negative (0 means %d)", DefaultEgressMaxBytes)
	}
	if e.MaxConnections < 0 {
		return invalid("egress.maxConnections", "must not be negative (0 means %d)", DefaultEgressMaxConnections)
	}
	for i, p := range e.AllowPrivate {
		if _, err := parsePrefix(p); err != nil {
			return invalid(fmt.Sprintf("egress.allowPrivate[%d]", i), "%v", err)
		}
	}
	return nil
}

// ParsePattern splits an allow pattern into its host part (a DNS name,
// or "*." and a domain) and port.
func ParsePattern(s string) (host string, port int, err error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("%q: want host:port (e.g. \"api.github.com:443\")", s)
	}
	host, ps := s[:i], s[i+1:]
	port, err = strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != ps {
		return "", 0, fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, ps)
	}
	name := strings.TrimPrefix(host, "*.")
	if strings.Contains(name, "*") {
		return "", 0, fmt.Errorf("%q: a wildcard is allowed only as a whole first label (\"*.example.com:443\")", s)
	}
	if _, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		return "", 0, fmt.Errorf("%q: an IP address cannot be allowlisted; name the host (private addresses go in allowPrivate)", s)
	}
	if err := checkDNSName(name); err != nil {
		return "", 0, fmt.Errorf("%q: %v", s, err)
	}
	if host != name && !strings.Contains(name, ".") {
		return "", 0, fmt.Errorf("%q: a wildcard must cover a domain with at least two labels", s)
	}
	return host, port, nil
}

// checkDNSName accepts lower-case LDH names of at most 253 bytes with
// labels of 1-63 bytes that do not start or end with a hyphen.
func checkDNSName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("host name must be 1 to 253 bytes")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("host name %q has an empty or over-long label", name)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("host name %q has a label starting or ending with '-'", name)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("host name %q: only lower-case letters, digits, '-' and '.' are allowed", name)
			}
		}
	}
	return nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q: not a CIDR prefix: %v", s, err)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q: not an IP address or CIDR prefix", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Allows reports whether host:port is on the allowlist. host is compared
// lower-cased, without a trailing dot; an IP literal never matches.
func (e *Egress) Allows(host string, port int) bool {
	if e == nil {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return false
	}
	for _, a := range e.Allow {
		ph, pp, err := ParsePattern(a)
		if err != nil || pp != port {
			continue
		}
		if covers(ph, host) {
			return true
		}
	}
	return false
}

// covers reports whether pattern host ph (a name or "*.domain") covers
// host h (a name or, when narrowing, another "*.domain").
func covers(ph, h string) bool {
	if ph == h {
		return true
	}
	if dom, ok := strings.CutPrefix(ph, "*."); ok {
		name := strings.TrimPrefix(h, "*.")
		return strings.HasSuffix(name, "."+dom)
	}
	return false
}

// AllowsPrivate reports whether AllowPrivate names addr.
func (e *Egress) AllowsPrivate(addr netip.Addr) bool {
	if e == nil {
		return false
	}
	addr = addr.Unmap()
	for _, s := range e.AllowPrivate {
		if p, err := parsePrefix(s); err == nil && p.Contains(addr) {
			return true
		}
	}
	return false
}

// Narrow returns the egress a run gets when it asks for req under e (the
// server's policy): req may only narrow. Every pattern of req.Allow must
// be covered by one of e's (same port; a wildcard covers names and
// narrower wildcards under it); its caps must not exceed e's (0 takes
// e's); every AllowPrivate prefix must lie inside one of e's. A nil req
// gets e as it is. With no server egress (e nil) any request is refused.
// Errors wrap errdefs.ErrPermissionDenied (widening) or
// errdefs.ErrInvalidArgument (a malformed request).
func (e *Egress) Narrow(req *Egress) (*Egress, error) {
	if req == nil {
		if e == nil {
			return nil, nil
		}
		out := e.clone()
		return &out, nil
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if e == nil {
		return nil, fmt.Errorf("%w: egress: the server's policy allows no egress", errdefs.ErrPermissionDenied)
	}
	out := req.clone()
	for i, a := range req.Allow {
		rh, rp, _ := ParsePattern(a)
		ok := false
		for _, s := range e.Allow {
			sh, sp, err := ParsePattern(s)
			if err == nil && sp == rp && covers(sh, rh) {
				ok = true
				break
			}
		}
		if !ok {
			return nil, fmt.Errorf("%w: egress.allow[%d]: %q is not within the server's allowlist", errdefs.ErrPermissionDenied, i, a)
		}
	}
	switch {
	case req.MaxBytes == 0:
		out.MaxBytes = e.MaxBytes
	case req.MaxBytes > e.MaxBytes:
		return nil, fmt.Errorf("%w: egress.maxBytes %d exceeds the server's %d", errdefs.ErrPermissionDenied, req.MaxBytes, e.MaxBytes)
	}
	switch {
	case req.MaxConnections == 0:
		out.MaxConnections = e.MaxConnections
	case req.MaxConnections > e.MaxConnections:
		return nil, fmt.Errorf("%w: egress.maxConnections %d exceeds the server's %d", errdefs.ErrPermissionDenied, req.MaxConnections, e.MaxConnections)
	}
	for i, s := range req.AllowPrivate {
		rp, _ := parsePrefix(s)
		ok := false
		for _, t := range e.AllowPrivate {
			sp, err := parsePrefix(t)
			if err == nil && sp.Bits() <= rp.Bits() && sp.Contains(rp.Addr()) {
				ok = true
				break
			}
		}
		if !ok {
			return nil, fmt.Errorf("%w: egress.allowPrivate[%d]: %q is not within the server's allowPrivate", errdefs.ErrPermissionDenied, i, s)
		}
	}
	return &out, nil
}

func (e *Egress) clone() Egress {
	out := *e
	out.Allow = append([]string(nil), e.Allow...)
	out.AllowPrivate = append([]string(nil), e.AllowPrivate...)
	return out
}
