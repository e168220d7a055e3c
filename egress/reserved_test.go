package egress

import (
	"context"
	"encoding/csv"
	"errors"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// registryRow is one row of an IANA special-purpose registry snapshot.
type registryRow struct {
	file        string
	blocks      []netip.Prefix
	name        string
	terminated  bool
	forwardable string // "True", "False", "" (terminated)
	global      string // "True", "False", "N/A", "" (terminated)
}

var footnote = regexp.MustCompile(`\s*\[\d+\]$`)

// readRegistry reads one snapshot in IANA's CSV form.
func readRegistry(t *testing.T, file string) []registryRow {
	t.Helper()
	f, err := os.Open("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	want := []string{"Address Block", "Name", "RFC", "Allocation Date", "Termination Date", "Source", "Destination", "Forwardable", "Globally Reachable", "Reserved-by-Protocol"}
	if len(records) < 2 || !slices.Equal(records[0], want) {
		t.Fatalf("%s: header %q, want %q", file, records[0], want)
	}
	var rows []registryRow
	for _, rec := range records[1:] {
		cell := func(i int) string { return footnote.ReplaceAllString(strings.TrimSpace(rec[i]), "") }
		r := registryRow{file: file, name: rec[1], terminated: cell(4) != "N/A", forwardable: cell(7), global: cell(8)}
		for _, b := range strings.Split(cell(0), ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(b))
			if err != nil {
				t.Fatalf("%s: row %q: %v", file, rec[0], err)
			}
			r.blocks = append(r.blocks, p)
		}
		rows = append(rows, r)
	}
	return rows
}

func ianaRows(t *testing.T) []registryRow {
	return append(readRegistry(t, "iana-ipv4-special-registry-1.csv"), readRegistry(t, "iana-ipv6-special-registry-1.csv")...)
}

// probes are the first, a middle and the last address of p.
func probes(p netip.Prefix) []netip.Addr {
	first := p.Masked().Addr()
	b := first.AsSlice()
	last := slices.Clone(b)
	mid := slices.Clone(b)
	for i := p.Bits(); i < len(b)*8; i++ {
		last[i/8] |= 0x80 >> (i % 8)
	}
	if p.Bits() < len(b)*8 {
		mid[p.Bits()/8] |= 0x80 >> (p.Bits() % 8)
	}
	out := []netip.Addr{first}
	for _, s := range [][]byte{mid, last} {
		a, _ := netip.AddrFromSlice(s)
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// verdict dials a name resolving to a through a policy that names nothing
// in AllowPrivate: "" when the connection was made to a itself, else the
// refusal.
func verdict(t *testing.T, a netip.Addr) string {
	t.Helper()
	res := &mapResolver{answers: map[string][][]netip.Addr{"probe.test.dev": {{a}}}}
	p, rec := newPolicy(t, Config{Allow: []string{"probe.test.dev:443"}}, res)
	c, err := p.Session().Dial(context.Background(), "probe.test.dev", 443)
	if err != nil {
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Fatalf("%s: %v, want a connection or a refusal", a, err)
		}
		if len(rec.dialed) != 0 {
			t.Fatalf("%s: refused (%v) yet dialled %v", a, err, rec.dialed)
		}
		return re.Reason
	}
	c.Close()
	if len(rec.dialed) != 1 || rec.dialed[0].Addr() != a.Unmap() {
		t.Fatalf("%s: dialled %v", a, rec.dialed)
	}
	return ""
}

// How the policy treats registry rows that are not simply "not globally
// reachable, so refused".
const (
	refused  = "refused"
	allowed  = "allowed"
	embedded = "judged by the IPv4 address it embeds"
)

var (
	// Globally reachable rows refused anyway: each lies inside a range
	// refused whole (see reservedRanges).
	reachableRefused = map[netip.Prefix]string{
		pfx("192.0.0.9/32"):    "inside 192.0.0.0/24",
		pfx("192.0.0.10/32"):   "inside 192.0.0.0/24",
		pfx("2001:1::1/128"):   "inside 2001::/23",
		pfx("2001:1::2/128"):   "inside 2001::/23",
		pfx("2001:1::3/128"):   "inside 2001::/23",
		pfx("2001:3::/32"):     "inside 2001::/23",
		pfx("2001:4:112::/48"): "inside 2001::/23",
		pfx("2001:20::/28"):    "inside 2001::/23",
		pfx("2001:30::/28"):    "inside 2001::/23",
	}
	// Rows whose addresses are another address's form.
	forms = map[netip.Prefix]func(netip.Addr) netip.Addr{
		pfx("::ffff:0:0/96"): func(a netip.Addr) netip.Addr { return a.Unmap() },
		pfx("64:ff9b::/96"):  func(a netip.Addr) netip.Addr { b := a.As16(); return netip.AddrFrom4([4]byte(b[12:16])) },
		pfx("2002::/16"):     func(a netip.Addr) netip.Addr { b := a.As16(); return netip.AddrFrom4([4]byte(b[2:6])) },
	}
	// Globally Reachable "N/A" with forwarding: no rule in the registry.
	reachableNA = map[netip.Prefix]string{
		pfx("2001::/32"): refused, // Teredo
		pfx("2002::/16"): embedded,
	}
)

// TestReservedRangesFollowIANA: every block of the IANA special-purpose
// registries (dated snapshot in testdata/) gets the policy's answer for
// its first, a middle and its last address — refused when the registry
// says the block is not globally reachable (or N/A and not forwardable,
// or terminated), judged by the IPv4 address an IPv4 form embeds, and
// allowed when globally reachable unless a refused range holds it (listed
// above, so a change is deliberate).
func TestReservedRangesFollowIANA(t *testing.T) {
	rows := ianaRows(t)
	seen := map[netip.Prefix]bool{}
	for _, r := range rows {
		for _, b := range r.blocks {
			key := b
			seen[key] = true
			want := ""
			switch {
			case forms[key] != nil:
				want = embedded
			case r.terminated:
				want = refused
			case r.global == "False":
				want = refused
			case r.global == "N/A" && r.forwardable == "False":
				want = refused
			case r.global == "N/A":
				want = reachableNA[key]
			case r.global == "True" && reachableRefused[key] != "":
				want = refused
			case r.global == "True":
				want = allowed
			}
			if want == "" {
				t.Errorf("%s %s (%s): Globally Reachable %q, Forwardable %q: no rule for it", r.file, key, r.name, r.global, r.forwardable)
				continue
			}
			for _, a := range probes(b) {
				got := verdict(t, a)
				switch want {
				case refused:
					if got == "" {
						t.Errorf("%s (%s, %s): %s was dialled, want refused", key, r.name, r.file, a)
					}
				case allowed:
					if got != "" {
						t.Errorf("%s (%s, globally reachable): %s refused: %s", key, r.name, a, got)
					}
				case embedded:
					v4 := forms[key](a)
					inner := verdict(t, v4)
					if (got == "") != (inner == "") {
						t.Errorf("%s (%s): %s judged %q, but the IPv4 address it embeds, %s, %q", key, r.name, a, got, v4, inner)
					}
					if inner != "" && !strings.Contains(got, v4.String()) && key != pfx("::ffff:0:0/96") {
						t.Errorf("%s: refusal %q does not name the embedded %s", a, got, v4)
					}
				}
			}
		}
	}
	// The exceptions above name rows the snapshot has.
	for _, m := range []map[netip.Prefix]string{reachableRefused, reachableNA} {
		for k := range m {
			if !seen[k] {
				t.Errorf("the test names %s, a block the snapshot lacks", k)
			}
		}
	}
	for k := range forms {
		if !seen[k] {
			t.Errorf("the test names %s, a block the snapshot lacks", k)
		}
	}
}

// TestReservedTableIsAccountedFor: every entry of the code's table is a
// registry row or says why it is there; every entry is the most specific
// range for some address of its own, whose refusal names it (no entry is
// dead or hidden by another); and the explicit cases below cover every
// entry, so dropping one fails there.
func TestReservedTableIsAccountedFor(t *testing.T) {
	inRegistry := map[string]bool{}
	for _, r := range ianaRows(t) {
		for _, b := range r.blocks {
			inRegistry[b.String()] = true
		}
	}
	seen := map[netip.Prefix]bool{}
	for _, r := range reservedRanges {
		key := r.prefix.String()
		if r.prefix != r.prefix.Masked() {
			t.Errorf("%s: not a masked prefix", key)
		}
		if seen[r.prefix] {
			t.Errorf("%s: listed twice", key)
		}
		seen[r.prefix] = true
		switch {
		case inRegistry[key] && r.outside != "":
			t.Errorf("%s is a registry row, yet says why it is outside the registry: %q", key, r.outside)
		case !inRegistry[key] && r.outside == "":
			t.Errorf("%s is not in the IANA special-purpose registries and does not say why it is refused", key)
		}
		own := 0
		for _, a := range probes(r.prefix) {
			if most, _ := reservedFor(a); most.prefix != r.prefix {
				continue
			}
			own++
			why := refusal(a)
			if r.embedded != nil && why == "" {
				continue // an IPv4 form embedding a public address
			}
			if !strings.Contains(why, "("+key) || !strings.Contains(why, r.kind) {
				t.Errorf("%s: refusal %q does not name %s (%s)", a, why, key, r.kind)
			}
		}
		if own == 0 {
			t.Errorf("%s: more specific entries hide its first, middle and last address", key)
		}
	}
	covered := map[netip.Prefix]bool{}
	for _, c := range namedForms {
		r, ok := reservedFor(netip.MustParseAddr(c.addr).Unmap())
		if ok {
			covered[r.prefix] = true
		}
	}
	for _, r := range reservedRanges {
		if !covered[r.prefix] {
			t.Errorf("%s (%s): no case in namedForms", r.prefix, r.kind)
		}
	}
}

// namedForms are addresses a name may resolve to, each refused with the
// words its refusal must carry: one or more per entry of the table, the
// red team's three IPv6 forms of loopback, and IPv4 forms embedding
// private and loopback addresses.
var namedForms = []struct{ addr, want string }{
	{"0.1.2.3", "a this-network address (0.0.0.0/8)"},
	{"0.0.0.0", "an unspecified address (0.0.0.0/32)"},
	{"10.1.2.3", "a private address (10.0.0.0/8)"},
	{"100.100.100.200", "a CGNAT address (100.64.0.0/10, Alibaba"},
	{"127.0.0.1", "a loopback address (127.0.0.0/8)"},
	{"169.254.169.254", "a link-local address (169.254.0.0/16, cloud metadata"},
	{"172.31.255.255", "a private address (172.16.0.0/12)"},
	{"192.0.0.170", "an IETF protocol assignment address (192.0.0.0/24)"},
	{"192.0.2.1", "a documentation address (192.0.2.0/24)"},
	{"192.88.99.2", "a deprecated 6to4 relay anycast address (192.88.99.0/24)"},
	{"192.168.1.1", "a private address (192.168.0.0/16)"},
	{"198.19.0.1", "a benchmarking address (198.18.0.0/15)"},
	{"198.51.100.7", "a documentation address (198.51.100.0/24)"},
	{"203.0.113.9", "a documentation address (203.0.113.0/24)"},
	{"239.255.255.250", "a multicast address (224.0.0.0/4)"},
	{"240.0.0.1", "a reserved address (240.0.0.0/4)"},
	{"255.255.255.255", "a broadcast address (255.255.255.255/32)"},
	{"::", "an unspecified address (::/128)"},
	{"::1", "a loopback address (::1/128)"},
	{"::ffff:127.0.0.1", "a loopback address (127.0.0.0/8)"},
	{"::ffff:10.0.0.1", "a private address (10.0.0.0/8)"},
	// The red team's: IPv4-compatible, IPv4-translated, site-local.
	{"::127.0.0.1", "an IPv4-compatible address (::/96, deprecated)"},
	{"::ffff:0:127.0.0.1", "an IPv4-translated address (::ffff:0:0:0/96)"},
	{"fec0::1", "a site-local address (fec0::/10, deprecated)"},
	{"64:ff9b::127.0.0.1", "a NAT64 address (64:ff9b::/96) embedding 127.0.0.1, a loopback address (127.0.0.0/8)"},
	{"64:ff9b::169.254.169.254", "embedding 169.254.169.254, a link-local address"},
	{"64:ff9b:1::a00:1", "a local-use NAT64 address (64:ff9b:1::/48)"},
	{"100::1", "a discard-only address (100::/64)"},
	{"100:0:0:1::1", "a dummy address (100:0:0:1::/64)"},
	{"2001:2::1", "an IETF protocol assignment address (2001::/23)"},
	{"2001:0:c000:201::1", "a Teredo address (2001::/32"},
	{"2001:db8::1", "a documentation address (2001:db8::/32)"},
	{"2002:7f00:1::1", "a 6to4 address (2002::/16) embedding 127.0.0.1, a loopback address"},
	{"2002:a9fe:a9fe::1", "a 6to4 address (2002::/16) embedding 169.254.169.254"},
	{"3fff::1", "a documentation address (3fff::/20)"},
	{"5f00::1", "a segment routing (SRv6) SID address (5f00::/16)"},
	{"fd12:3456::1", "a private address (fc00::/7, unique local)"},
	{"fd00:ec2::254", "a cloud metadata address (fd00:ec2::254/128, AWS)"},
	{"fe80::1", "a link-local address (fe80::/10)"},
	{"ff02::1", "a multicast address (ff00::/8)"},
	{"1000::1", "a non-global-unicast address (::/3)"},
	{"4000::1", "a non-global-unicast address (4000::/2)"},
	{"8000::1", "a non-global-unicast address (8000::/1)"},
}

func TestNamedFormsAreRefused(t *testing.T) {
	for _, c := range namedForms {
		t.Run(c.addr, func(t *testing.T) {
			got := verdict(t, netip.MustParseAddr(c.addr))
			if !strings.Contains(got, c.want) {
				t.Fatalf("refusal %q, want it to contain %q", got, c.want)
			}
		})
	}
	// The same forms with a zone (a Resolver may answer so): a zone does
	// not hide an address from the table.
	for _, s := range []string{"fe80::1%eth0", "::1%lo", "64:ff9b::a00:1%eth0", "2001:db8::1%eth0", "fec0::1%1"} {
		if got := verdict(t, netip.MustParseAddr(s)); got == "" {
			t.Errorf("%s was dialled", s)
		}
	}
	// A resolver's zero answer is no address to dial.
	if got := verdict(t, netip.Addr{}); !strings.Contains(got, "not an address") {
		t.Errorf("the zero address: %q, want refused", got)
	}
	// IPv4 forms embedding a public address are that address.
	for _, s := range []string{"64:ff9b::5db8:d822", "2002:5db8:d822::1", "::ffff:93.184.216.34"} {
		if got := verdict(t, netip.MustParseAddr(s)); got != "" {
			t.Errorf("%s (a public IPv4 address's form) refused: %s", s, got)
		}
	}
}
