package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// parsePrefix parses an AllowPrivate entry: an address or a CIDR prefix,
// IPv4 written as IPv4.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, errors.New("not a CIDR prefix")
		}
		if p.Addr().Is4In6() {
			return netip.Prefix{}, errors.New("write an IPv4 CIDR in IPv4 form")
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, errors.New("not an IP address or CIDR prefix")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// reserved is one range a name may not resolve to unless the policy's
// AllowPrivate names the address.
type reserved struct {
	prefix netip.Prefix
	// kind names the range in a refusal ("private", "loopback", …).
	kind string
	// note says more in the refusal ("" for nothing).
	note string
	// outside says why a range the IANA special-purpose registries do not
	// list is refused; "" for a registry row. TestReservedTableIsAccountedFor
	// holds every entry to one or the other against the dated snapshot in
	// testdata/.
	outside string
	// embedded, when set, makes the range a form of IPv4: an address in it
	// is judged by the IPv4 address it embeds.
	embedded func(netip.Addr) netip.Addr
}

// reservedRanges are the ranges a resolved address may not be in. The
// most specific range holding an address decides, so every entry shows
// in its own refusals (TestReservedTableIsAccountedFor holds each entry
// to that, and TestNamedFormsAreRefused has a case for each). The rows follow
// the IANA IPv4 and IPv6 Special-Purpose Address Registries (snapshot in
// testdata/, checked by TestReservedRangesFollowIANA): every block the
// registries mark not globally reachable is here, or inside an entry
// here. Beyond the registries: multicast, everything IPv6 outside
// 2000::/3 (the only space IANA allocates for global unicast — which
// takes in the deprecated IPv4-compatible ::/96, the IPv4-translated
// ::ffff:0:0:0/96 and site-local fec0::/10), and AWS's metadata address.
//
// A Go table rather than the CSV embedded and parsed at start: the table
// is what a reviewer reads, the registry's cells need judgement (N/A,
// footnotes, terminated rows, reachable rows we refuse anyway), and a
// newer snapshot that lists a block the table lacks fails the test
// instead of silently changing what egress lets through.
//
// IPv4-mapped addresses (::ffff:0:0/96) are not here: an address is
// unmapped first and judged as the IPv4 address it maps (Go's resolver
// answers A records in that form, net.Resolver.LookupNetIP).
var reservedRanges = func() []reserved {
	v4 := func(a netip.Addr, i int) netip.Addr {
		b := a.As16()
		return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]})
	}
	const notGlobal = "outside 2000::/3, the only IPv6 space IANA allocates for global unicast (IPv6 Address Space registry); takes in the deprecated IPv4-compatible ::/96, the IPv4-translated ::ffff:0:0:0/96 and site-local fec0::/10"
	return []reserved{
		// IPv4 Special-Purpose Address Registry.
		{kind: "this-network", prefix: pfx("0.0.0.0/8")},
		{kind: "unspecified", prefix: pfx("0.0.0.0/32")},
		{kind: "private", prefix: pfx("10.0.0.0/8")},
		{kind: "CGNAT", prefix: pfx("100.64.0.0/10"), note: "Alibaba Cloud's metadata is 100.100.100.200"},
		{kind: "loopback", prefix: pfx("127.0.0.0/8")},
		{kind: "link-local", prefix: pfx("169.254.0.0/16"), note: "cloud metadata lives here"},
		{kind: "private", prefix: pfx("172.16.0.0/12")},
		// The whole /24, its globally reachable PCP and TURN anycast
		// addresses included: neither is a service an allowlist names.
		{kind: "IETF protocol assignment", prefix: pfx("192.0.0.0/24")},
		{kind: "documentation", prefix: pfx("192.0.2.0/24")},
		// Terminated in 2015; the 6a44 relay anycast 192.88.99.2 (not
		// globally reachable) lies inside.
		{kind: "deprecated 6to4 relay anycast", prefix: pfx("192.88.99.0/24")},
		{kind: "private", prefix: pfx("192.168.0.0/16")},
		{kind: "benchmarking", prefix: pfx("198.18.0.0/15")},
		{kind: "documentation", prefix: pfx("198.51.100.0/24")},
		{kind: "documentation", prefix: pfx("203.0.113.0/24")},
		{kind: "reserved", prefix: pfx("240.0.0.0/4")},
		{kind: "broadcast", prefix: pfx("255.255.255.255/32")},
		{kind: "multicast", prefix: pfx("224.0.0.0/4"), outside: "IPv4 multicast (RFC 5771) has its own registry, not the special-purpose one"},

		// IPv6 Special-Purpose Address Registry.
		{kind: "unspecified", prefix: pfx("::/128")},
		{kind: "loopback", prefix: pfx("::1/128")},
		// The well-known NAT64 prefix is globally reachable, but it
		// reaches IPv4 addresses by another name (DNS64 answers in it):
		// judged by the IPv4 address it embeds (RFC 6052 forbids
		// non-global ones in it anyway).
		{kind: "NAT64", prefix: pfx("64:ff9b::/96"), embedded: func(a netip.Addr) netip.Addr { return v4(a, 12) }},
		{kind: "local-use NAT64", prefix: pfx("64:ff9b:1::/48")},
		{kind: "discard-only", prefix: pfx("100::/64")},
		{kind: "dummy", prefix: pfx("100:0:0:1::/64")},
		// The whole /23: its globally reachable rows (PCP, TURN and SRP
		// anycast, AMT, AS112, ORCHIDv2, drone DETs) are infrastructure
		// and overlay identifiers, never a service an allowlist names.
		{kind: "IETF protocol assignment", prefix: pfx("2001::/23")},
		{kind: "Teredo", prefix: pfx("2001::/32"), note: "a tunnel to IPv4 addresses it embeds"},
		{kind: "documentation", prefix: pfx("2001:db8::/32")},
		// 6to4 reaches the IPv4 address in bits 16-47: judged by it.
		{kind: "6to4", prefix: pfx("2002::/16"), embedded: func(a netip.Addr) netip.Addr { return v4(a, 2) }},
		{kind: "documentation", prefix: pfx("3fff::/20")},
		{kind: "segment routing (SRv6) SID", prefix: pfx("5f00::/16")},
		{kind: "private", prefix: pfx("fc00::/7"), note: "unique local"},
		{kind: "link-local", prefix: pfx("fe80::/10")},

		// Beyond the registries.
		{kind: "non-global-unicast", prefix: pfx("::/3"), outside: notGlobal},
		{kind: "non-global-unicast", prefix: pfx("4000::/2"), outside: notGlobal},
		{kind: "non-global-unicast", prefix: pfx("8000::/1"), outside: notGlobal},
		{kind: "IPv4-compatible", prefix: pfx("::/96"), note: "deprecated", outside: "RFC 4291 2.5.5.1 deprecated form; named for its reason (inside ::/3)"},
		{kind: "IPv4-translated", prefix: pfx("::ffff:0:0:0/96"), outside: "RFC 2765's form (obsolete); named for its reason (inside ::/3)"},
		{kind: "site-local", prefix: pfx("fec0::/10"), note: "deprecated", outside: "deprecated by RFC 3879, in the IPv6 Address Space registry; named for its reason (inside 8000::/1)"},
		{kind: "multicast", prefix: pfx("ff00::/8"), outside: "IPv6 multicast (RFC 4291) has its own registry; named for its reason (inside 8000::/1)"},
		{kind: "cloud metadata", prefix: pfx("fd00:ec2::254/128"), note: "AWS", outside: "AWS's instance metadata over IPv6; named for its reason (inside fc00::/7)"},
	}
}()

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// reservedFor returns the most specific reserved range holding a (an
// unmapped address without a zone).
func reservedFor(a netip.Addr) (reserved, bool) {
	best := -1
	for i, r := range reservedRanges {
		if r.prefix.Contains(a) && (best < 0 || r.prefix.Bits() > reservedRanges[best].prefix.Bits()) {
			best = i
		}
	}
	if best < 0 {
		return reserved{}, false
	}
	return reservedRanges[best], true
}

// refusal says why a resolved address, unmapped and without a zone, is
// refused ("" when it is not): "a private address (10.0.0.0/8)".
func refusal(a netip.Addr) string {
	if !a.IsValid() {
		return "not an address (a resolver's zero answer)"
	}
	r, ok := reservedFor(a)
	if !ok {
		return ""
	}
	if r.embedded != nil {
		v4 := r.embedded(a)
		why := refusal(v4)
		if why == "" {
			return ""
		}
		return fmt.Sprintf("%s address (%s) embedding %s, %s", article(r.kind), r.prefix, v4, why)
	}
	s := fmt.Sprintf("%s address (%s", article(r.kind), r.prefix)
	if r.note != "" {
		s += ", " + r.note
	}
	return s + ")"
}

// article puts "a" or "an" before a range's kind.
func article(kind string) string {
	if strings.ContainsRune("aeiouAEIOU", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

// checkAddr reports why a is refused under p ("" when it may be dialled).
// AllowPrivate names the address itself: an entry for 10.0.0.1 does not
// let 64:ff9b::a00:1 through.
func (p *Policy) checkAddr(a netip.Addr) string {
	// An IPv4 address in IPv4-mapped form is that address; a zone (which
	// a Resolver may add) would keep an address out of every prefix.
	a = a.Unmap().WithZone("")
	why := refusal(a)
	if why == "" {
		return ""
	}
	for _, named := range p.private {
		if named.Contains(a) {
			return ""
		}
	}
	return why
}
