package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// pattern is one allowlist entry.
type pattern struct {
	wildcard bool   // "*.domain": any name strictly below domain
	host     string // lower case, no trailing dot (the domain for a wildcard)
	port     uint16
}

func (p pattern) String() string {
	h := p.host
	if p.wildcard {
		h = "*." + h
	}
	return net.JoinHostPort(h, strconv.Itoa(int(p.port)))
}

func (p pattern) matches(host string, port uint16) bool {
	if port != p.port {
		return false
	}
	if p.wildcard {
		return strings.HasSuffix(host, "."+p.host)
	}
	return host == p.host
}

// covers reports whether every target q allows, p allows too.
func (p pattern) covers(q pattern) bool {
	if p.port != q.port {
		return false
	}
	switch {
	case !p.wildcard:
		return !q.wildcard && q.host == p.host
	case q.wildcard:
		return q.host == p.host || strings.HasSuffix(q.host, "."+p.host)
	default:
		return strings.HasSuffix(q.host, "."+p.host)
	}
}

func clip(s string) string {
	if len(s) <= 256 {
		return s
	}
	return s[:256] + "…"
}

// parsePattern parses an allowlist entry, "host:port" or "*.domain:port",
// written as it matches: a lower-case name of letters, digits, '-' and
// dots, no label starting or ending with '-', no trailing dot, no IP
// literal and no name that looks like one (normalizeName), a port of
// 1..65535 without leading zeros. The names a program connects to are
// normalized before they are matched; a pattern is not normalized but
// refused when it is not already in that form, so an allowlist reads as
// it matches.
func parsePattern(s string) (pattern, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return pattern{}, errors.New(`want host:port or *.domain:port (e.g. "api.github.com:443")`)
	}
	host, portText := s[:i], s[i+1:]
	port, err := parsePort(portText)
	if err != nil {
		return pattern{}, err
	}
	p := pattern{port: port}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		p.wildcard = true
		host = rest
	}
	if strings.Contains(host, "*") {
		return pattern{}, errors.New(`a wildcard is allowed only as a whole first label ("*.example.com:443")`)
	}
	if _, err := netip.ParseAddr(strings.Trim(strings.TrimSuffix(host, "."), "[]")); err == nil {
		return pattern{}, errors.New("an IP address cannot be allowlisted: name the host (the private address it resolves to goes in allowPrivate)")
	}
	name, err := normalizeName(host)
	if err != nil {
		return pattern{}, err
	}
	if err := checkWritten(host); err != nil {
		return pattern{}, err
	}
	if p.wildcard && !strings.Contains(name, ".") {
		return pattern{}, errors.New("a wildcard must cover a domain with at least two labels (*.example.com)")
	}
	p.host = name
	return p, nil
}

// checkWritten refuses what normalizeName lets through but a pattern may
// not hold: a name normalizing would change (upper case, a trailing dot),
// '_', and labels starting or ending with '-'.
func checkWritten(h string) error {
	if strings.HasSuffix(h, ".") {
		return fmt.Errorf("%q ends with a dot: write the name without it", clip(h))
	}
	for _, label := range strings.Split(h, ".") {
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("%q: only lower-case letters, digits, '-' and '.' are allowed in an allowlisted name", clip(h))
			}
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q has a label starting or ending with '-'", clip(h))
		}
	}
	return nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 || s[0] == '0' {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", clip(s))
	}
	return uint16(n), nil
}

// normalizeName lower-cases a DNS name and drops a trailing dot; it
// refuses IP literals and anything that is not letters, digits, hyphens
// and dots in labels of 1..63 bytes.
func normalizeName(h string) (string, error) {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if _, err := netip.ParseAddr(h); err == nil {
		return "", errors.New("an IP address is not a name: egress goes to allowlisted names, never to raw addresses")
	}
	if h == "" || len(h) > 253 {
		return "", errors.New("a name must be 1..253 bytes")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return "", errors.New("a name's labels must be 1..63 bytes")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%q is not a DNS name (letters, digits, '-', '_' and dots only)", clip(h))
			}
		}
	}
	// A name whose last label is all digits would be taken for an IPv4
	// address by some resolvers ("1.2.3.4." or "0x7f.1" shapes).
	last := h[strings.LastIndexByte(h, '.')+1:]
	if strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") {
		return "", fmt.Errorf("%q looks like an address, not a name", clip(h))
	}
	return h, nil
}
