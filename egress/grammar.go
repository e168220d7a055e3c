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

// parsePattern parses "host:port" or "*.domain:port".
func parsePattern(s string) (pattern, error) {
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		return pattern{}, errors.New("want host:port or *.domain:port")
	}
	port, err := parsePort(portText)
	if err != nil {
		return pattern{}, err
	}
	var p pattern
	p.port = port
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		p.wildcard = true
		host = rest
	}
	name, err := normalizeName(host)
	if err != nil {
		return pattern{}, err
	}
	if p.wildcard && !strings.Contains(name, ".") {
		return pattern{}, errors.New("a wildcard needs a domain of at least two labels (*.example.com)")
	}
	p.host = name
	return p, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 || s[0] == '0' {
		return 0, fmt.Errorf("port %q: want 1..65535", clip(s))
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
