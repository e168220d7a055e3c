// Package egress is the host end of a run's egress: a CONNECT proxy that
// lets a program reach a few allowlisted names while its container keeps
// network "none".
//
// The runner inside the container listens on loopback and points
// HTTP_PROXY / HTTPS_PROXY at itself; each CONNECT it accepts travels to
// the host as a stream multiplexed in the run's bridge connection
// (portproto's open / opened / data / ack / close frames). The host side,
// this package, decides every connection itself:
//
//   - the target must match the allowlist (`host:port`, `*.domain:port`);
//     a raw IP address is never a target;
//   - the host resolves the name itself (a Resolver, replaceable for
//     tests) and refuses when any resolved address is in a reserved
//     range, unless the policy names the address in AllowPrivate. The
//     ranges follow the IANA special-purpose registries (every block not
//     globally reachable; a dated snapshot in testdata/ checks the
//     table) plus multicast, all IPv6 outside global unicast 2000::/3
//     (IPv4-compatible, IPv4-translated and site-local forms among it)
//     and cloud metadata. IPv4 in IPv6 clothes is judged as IPv4: an
//     IPv4-mapped address is unmapped, a NAT64 (64:ff9b::/96) or 6to4
//     (2002::/16) address is judged by the IPv4 address it embeds, and
//     Teredo is refused whole. A refusal names the range;
//   - it dials the exact address it checked, so a second DNS answer
//     (rebinding) is never consulted;
//   - bytes (both directions together) and connections are capped per run;
//   - every connection, refused ones included, ends as one Event.
//
// A Policy is compiled once from a Config (the operator's: the policy
// file's egress section decodes into it, and New reads its CA file, with
// the one set of defaults); a request may Narrow its allowlist, never
// widen it, in the same grammar. Each run gets its own Session,
// which holds the run's counters.
//
// Files: grammar.go, the allowlist patterns and names; address.go, the
// reserved ranges and why an address is refused; egress.go, Config, its
// defaults, New and Narrow; dial.go, the Session, its Conns, caps and
// Events.
package egress
