//! Why one traced glibc getaddrinfo call returned its addresses in that order: glibc's RFC 6724
//! sort ([`rfc6724`]) fed with exactly what glibc fed it inside that call.
//!
//! glibc's `rfc3484_sort` inputs, and where a trace sees them:
//! - the order before sorting (the resolver's: hosts-file or DNS answer order): glibc
//!   `connect()`s a UDP socket to each distinct address in that order, so the `connect` calls
//!   made inside the call give it;
//! - each candidate's source: the `getsockname()` after a successful `connect()`; a failed
//!   `connect()` makes the candidate unusable (rule 1);
//! - prefix length and interface of the source: the row of the RTM_GETADDR dump glibc made
//!   inside the call (`__check_pf`), and link types from an RTM_GETLINK dump when glibc made one;
//! - the precedence/label tables: the process's `/etc/gai.conf` (defaults when absent).
//!
//! The result ([`GetaddrinfoWhy`]) carries the predicted order, the rule (with its numbers) that
//! decided each adjacent pair of the returned order, and whether prediction and reality agree.
pub mod gai_conf;
pub mod rfc6724;

use std::net::IpAddr;

use super::{connected_candidates, unmapped, ResolverSort};
use crate::model::getaddrinfo::{CandidateWhy, GaiSocketOp, GetaddrinfoWhy, PairWhy};
use crate::model::ip_text::ip_texts;
use crate::model::netlink::{af, ifa, rtm, MessageBody, NetlinkMessage};
use crate::model::resolver_span::ResolverSpan;
use gai_conf::GaiConf;
use rfc6724::{Candidate, SourceFlags, SourceInterface};

/// One row of glibc's `in6ai` list (`__check_pf`'s RTM_GETADDR dump).
struct In6aiRow {
    addr: IpAddr,
    prefix_len: u8,
    flags: SourceFlags,
    index: u32,
}

/// glibc's view of the node's addresses inside one call: the `in6ai` rows (IPv4 as IPv4 here)
/// and the link types of its `__check_native` RTM_GETLINK dump, when it made one.
struct In6ai {
    rows: Vec<In6aiRow>,
    /// glibc keeps the rows only when the dump had an IPv6 address other than `::1`.
    seen_ipv6: bool,
    seen_dump: bool,
    /// Interface index → native (not ipip/ip6tnl/sit), from link messages.
    native: Vec<(u32, bool)>,
}

/// `ARPHRD_TUNNEL`, `ARPHRD_TUNNEL6`, `ARPHRD_SIT`: what `__check_native` calls not native.
const NOT_NATIVE_LINK_TYPES: [u16; 3] = [768, 769, 776];

impl In6ai {
    fn from_dump(dump: &[&NetlinkMessage]) -> Self {
        let mut view = In6ai {
            rows: Vec::new(),
            seen_ipv6: false,
            seen_dump: false,
            native: Vec::new(),
        };
        for m in dump {
            match &m.body {
                MessageBody::Address(a) if m.header.type_id == rtm::NEWADDR => {
                    view.seen_dump = true;
                    let text = if af::id(&a.family) == Some(af::INET) {
                        a.local.as_ref().or(a.address.as_ref())
                    } else {
                        a.address.as_ref().or(a.local.as_ref())
                    };
                    let Some(addr) = text.and_then(|t| t.parse::<IpAddr>().ok()) else {
                        continue;
                    };
                    if addr.is_ipv6() && !addr.is_loopback() {
                        view.seen_ipv6 = true;
                    }
                    // glibc keeps these flags for IPv4 rows too (an IPv4 address with
                    // `preferred_lft 0` is deprecated for rule 3).
                    let flag = |bit: u32| a.flags_raw & bit != 0;
                    view.rows.push(In6aiRow {
                        addr,
                        prefix_len: a.prefix_len,
                        flags: SourceFlags {
                            deprecated: flag(ifa::DEPRECATED),
                            optimistic: flag(ifa::OPTIMISTIC),
                            home: flag(ifa::HOMEADDRESS),
                            temporary: false,
                        },
                        index: a.index,
                    });
                }
                MessageBody::Link(l) if m.header.type_id == rtm::NEWLINK => {
                    let native = !NOT_NATIVE_LINK_TYPES.contains(&l.link_type);
                    view.native.push((l.index, native));
                }
                _ => {}
            }
        }
        view
    }

    /// The candidate glibc builds for `dest` whose socket's `getsockname` gave `source`.
    fn candidate(&self, dest: IpAddr, source: Option<IpAddr>, original_index: usize) -> Candidate {
        // The row is looked up by the source as glibc holds it: an IPv4 socket's loopback
        // source as 127.0.0.1 ("special case for lo"), a v4-mapped one as IPv4.
        let key = source.map(|s| match s {
            IpAddr::V4(v4) if v4.octets()[0] == 127 => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            other => unmapped(other),
        });
        let row = key
            .filter(|_| self.seen_ipv6)
            .and_then(|k| self.rows.iter().find(|r| r.addr == k));
        Candidate {
            dest,
            // glibc turns a v4-mapped source of an IPv4 candidate back into IPv4.
            source: source.map(|s| if dest.is_ipv4() { unmapped(s) } else { s }),
            source_prefix_len: row.map(|r| r.prefix_len),
            source_flags: row.map(|r| r.flags).unwrap_or_default(),
            source_interface: row.map(|r| SourceInterface {
                index: r.index,
                native: self
                    .native
                    .iter()
                    .find(|(i, _)| *i == r.index)
                    .is_none_or(|(_, n)| *n),
            }),
            original_index,
        }
    }
}

/// Explains one call. `returned` is every result entry's address in returned order (copies per
/// socket type included), `ops` the connect/getsockname calls made inside the call, `dump` the
/// netlink reply messages received inside it. `None` when there is nothing to explain (fewer
/// than two distinct addresses) or glibc did not sort (no connect seen: e.g. musl, or a glibc
/// that skipped the sort).
pub fn explain_call(
    returned: &[IpAddr],
    ops: &[GaiSocketOp],
    dump: &[&NetlinkMessage],
    conf: &GaiConf,
) -> Option<GetaddrinfoWhy> {
    let distinct = distinct_addresses(returned);
    if distinct.len() < 2 {
        return None;
    }
    let connected: Vec<(IpAddr, Option<IpAddr>)> = connected_candidates(ops, &distinct)
        .into_iter()
        .map(|c| (c.dest, c.source))
        .collect();
    if connected.is_empty() {
        return None;
    }
    let mut notes = Vec::new();
    let missing: Vec<String> = distinct
        .iter()
        .filter(|a| !connected.iter().any(|(d, _)| d == *a))
        .map(|a| a.to_string())
        .collect();
    if !missing.is_empty() {
        notes.push(format!(
            "no connect() seen for {}: their place before sorting is unknown (taken as last)",
            missing.join(", ")
        ));
    }
    let rows = In6ai::from_dump(dump);
    if !rows.seen_dump {
        notes.push(
            "no RTM_GETADDR dump seen inside the call: prefix lengths unknown (as glibc when its \
             dump fails)"
                .into(),
        );
    }
    // glibc sorts every addrinfo (one per socket type); copies of an address sit together.
    let mut resolver: Vec<(IpAddr, Option<IpAddr>)> = connected.clone();
    resolver.extend(
        distinct
            .iter()
            .filter(|a| !connected.iter().any(|(d, _)| d == *a))
            .map(|a| (*a, None)),
    );
    let mut candidates: Vec<Candidate> = Vec::new();
    for (dest, source) in &resolver {
        let copies = returned.iter().filter(|a| *a == dest).count().max(1);
        for _ in 0..copies {
            let index = candidates.len();
            candidates.push(rows.candidate(*dest, *source, index));
        }
    }
    let outcome = rfc6724::sort(&candidates, conf);
    // Every addrinfo in glibc's order; with a non-transitive gai.conf the copies of one address
    // can end up apart, so the whole sequence is what must match.
    let predicted_all: Vec<IpAddr> = outcome.order.iter().map(|i| candidates[*i].dest).collect();
    let mut predicted: Vec<IpAddr> = Vec::new();
    for a in &predicted_all {
        if !predicted.contains(a) {
            predicted.push(*a);
        }
    }
    let matches = if predicted_all.len() == returned.len() {
        predicted_all == returned
    } else {
        predicted == distinct
    };
    let pairs = rfc6724::explain_order(&candidates, &distinct, conf)
        .unwrap_or_default()
        .into_iter()
        .map(|d| PairWhy {
            first: d.first.to_string(),
            second: d.second.to_string(),
            rule: d.rule,
            rule_name: d.rule_name.to_string(),
            detail: d.detail,
            agrees: d.agrees,
        })
        .collect();
    Some(GetaddrinfoWhy {
        resolver_order: ip_texts(resolver.iter().map(|(d, _)| *d)),
        matches,
        predicted: ip_texts(predicted.iter().copied()),
        pairs,
        candidates: resolver
            .iter()
            .map(|(dest, _)| CandidateWhy {
                address: dest.to_string(),
                source: candidates
                    .iter()
                    .find(|c| c.dest == *dest)
                    .and_then(|c| c.source)
                    .map(|s| s.to_string()),
                prefix_len: candidates
                    .iter()
                    .find(|c| c.dest == *dest)
                    .and_then(|c| c.source_prefix_len),
                interface: candidates
                    .iter()
                    .find(|c| c.dest == *dest)
                    .and_then(|c| c.source_interface)
                    .map(|i| (i.index, i.native)),
            })
            .collect(),
        notes,
    })
}

/// `returned` without repeats (glibc returns an address once per socket type), in order.
fn distinct_addresses(returned: &[IpAddr]) -> Vec<IpAddr> {
    let mut distinct: Vec<IpAddr> = Vec::new();
    for a in returned {
        if !distinct.contains(a) {
            distinct.push(*a);
        }
    }
    distinct
}

/// glibc's sort, as the [`ResolverSort`] of glibc's getaddrinfo calls.
pub struct GlibcSort;

impl ResolverSort for GlibcSort {
    fn explain(&self, span: &ResolverSpan) -> Option<GetaddrinfoWhy> {
        let returned: Vec<IpAddr> = span
            .call
            .results
            .iter()
            .filter_map(|r| r.address.parse().ok())
            .collect();
        // One address has no order to explain: the tables are not even parsed.
        if distinct_addresses(&returned).len() < 2 {
            return None;
        }
        let replies: Vec<&NetlinkMessage> = span.replies().collect();
        // What glibc itself read wins; else the file as seen through /proc when the call began.
        let (conf, note) = match (&span.gai_conf.read_by_resolver, &span.gai_conf.at_start) {
            (Some(text), _) => (
                GaiConf::parse_like_glibc(&String::from_utf8_lossy(text)).0,
                None,
            ),
            (None, Some(seen)) => (
                seen.text
                    .as_deref()
                    .map_or_else(GaiConf::default, |t| GaiConf::parse_like_glibc(t).0),
                seen.note.clone(),
            ),
            (None, None) => (GaiConf::default(), None),
        };
        let mut why = explain_call(&returned, &span.socket_ops, &replies, &conf)?;
        why.notes.extend(note);
        Some(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::netlink::NetlinkDecoder;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn connect(fd: u64, dest: &str, ret: i32) -> GaiSocketOp {
        GaiSocketOp {
            connect: true,
            ret: Some(ret),
            socket: fd,
            addr: Some(ip(dest)),
        }
    }

    fn name(fd: u64, src: &str) -> GaiSocketOp {
        GaiSocketOp {
            connect: false,
            ret: Some(0),
            socket: fd,
            addr: Some(ip(src)),
        }
    }

    /// The same calls as a cgroup hook sees them: before the kernel carries them out.
    fn hooked(op: GaiSocketOp) -> GaiSocketOp {
        GaiSocketOp {
            ret: None,
            socket: op.socket + 0x5000_0000_0000,
            ..op
        }
    }

    /// RTM_NEWADDR messages (IPv4, index 2) as the kernel sends them in a dump.
    fn dump(rows: &[(&str, u8, bool)]) -> Vec<NetlinkMessage> {
        let mut bytes = Vec::new();
        for (addr, len, secondary) in rows {
            let a: std::net::Ipv4Addr = addr.parse().unwrap();
            let attrs: Vec<u8> = [1u16, 2u16] // IFA_ADDRESS, IFA_LOCAL
                .iter()
                .flat_map(|t| {
                    let mut v = 8u16.to_ne_bytes().to_vec();
                    v.extend(t.to_ne_bytes());
                    v.extend(a.octets());
                    v
                })
                .collect();
            let len_total = 16 + 8 + attrs.len();
            bytes.extend((len_total as u32).to_ne_bytes());
            bytes.extend(20u16.to_ne_bytes()); // RTM_NEWADDR
            bytes.extend(2u16.to_ne_bytes()); // NLM_F_MULTI
            bytes.extend(1u32.to_ne_bytes());
            bytes.extend(4242u32.to_ne_bytes());
            let flags = if *secondary { 0x01 } else { 0 };
            bytes.extend([2, *len, flags, 0]);
            bytes.extend(2u32.to_ne_bytes());
            bytes.extend(attrs);
        }
        NetlinkDecoder::new().decode(0, &bytes).messages
    }

    /// Seed 000: the alias .20 is the kernel's primary of a /27, the resolver lists .6 first;
    /// both candidates get source .20; no IPv6 so glibc drops its dump, and rule 9 counts only the
    /// exact match: .20 (32 bits) before .6 (0).
    #[test]
    fn seed_000_rule_9_reorder() {
        let returned = [ip("172.18.45.20"), ip("172.18.45.20"), ip("172.18.45.6")];
        let ops = [
            connect(3, "172.18.45.6", 0),
            name(3, "172.18.45.20"),
            connect(3, "172.18.45.20", 0),
            name(3, "172.18.45.20"),
        ];
        let messages = dump(&[("172.18.45.20", 27, false), ("172.18.45.6", 27, true)]);
        let why = explain_call(
            &returned,
            &ops,
            &messages.iter().collect::<Vec<_>>(),
            &GaiConf::default(),
        )
        .unwrap();
        assert_eq!(why.resolver_order, ["172.18.45.6", "172.18.45.20"]);
        assert_eq!(why.predicted, ["172.18.45.20", "172.18.45.6"]);
        assert!(why.matches);
        assert_eq!(why.pairs.len(), 1);
        assert_eq!(why.pairs[0].rule, 9, "{:?}", why.pairs[0]);
        assert!(
            why.pairs[0].detail.contains("32 bits"),
            "{}",
            why.pairs[0].detail
        );
    }

    /// Two results; the kernel cannot reach the first the resolver lists (ENETUNREACH).
    fn one_unreachable() -> ([IpAddr; 2], [GaiSocketOp; 3]) {
        let returned = [ip("10.0.0.1"), ip("10.9.9.9")];
        let ops = [
            connect(3, "10.9.9.9", -101),
            connect(3, "10.0.0.1", 0),
            name(3, "10.0.0.5"),
        ];
        (returned, ops)
    }

    #[test]
    fn failed_connect_is_unusable_and_sorted_last() {
        let (returned, ops) = one_unreachable();
        let why = explain_call(&returned, &ops, &[], &GaiConf::default()).unwrap();
        assert_eq!(why.resolver_order, ["10.9.9.9", "10.0.0.1"]);
        assert_eq!(why.candidates[0].source, None);
        assert_eq!(why.predicted, ["10.0.0.1", "10.9.9.9"]);
        assert!(why.matches);
        assert_eq!(why.pairs[0].rule, 1);
        assert!(why.notes.iter().any(|n| n.contains("no RTM_GETADDR dump")));
    }

    /// The cgroup hooks see each connect before the kernel answers it: a connect that failed
    /// is one no getsockname follows, and the explanation is the syscall hooks' own.
    #[test]
    fn calls_seen_before_their_outcome_explain_as_the_syscalls_do() {
        let (returned, ops) = one_unreachable();
        let hooked_ops: Vec<GaiSocketOp> = ops.iter().copied().map(hooked).collect();
        let conf = GaiConf::default();
        assert_eq!(
            explain_call(&returned, &hooked_ops, &[], &conf),
            explain_call(&returned, &ops, &[], &conf)
        );
        let connected = connected_candidates(&hooked_ops, &returned);
        assert!(
            !connected[0].connected,
            "no getsockname after it: it failed"
        );
        assert!(connected[1].connected);
        assert_eq!(connected[1].source, Some(ip("10.0.0.5")));
    }

    #[test]
    fn nothing_to_explain_for_one_address_or_no_connects() {
        let one = [ip("10.0.0.1"), ip("10.0.0.1")];
        assert_eq!(explain_call(&one, &[], &[], &GaiConf::default()), None);
        let two = [ip("10.0.0.1"), ip("10.0.0.2")];
        assert_eq!(explain_call(&two, &[], &[], &GaiConf::default()), None);
    }

    #[test]
    fn name_server_connects_and_v4_mapped_destinations() {
        let returned = [ip("10.0.0.2"), ip("10.0.0.1")];
        let ops = [
            connect(4, "192.0.2.53", 0), // the resolver's DNS socket
            connect(3, "::ffff:10.0.0.2", 0),
            name(3, "::ffff:10.0.0.9"),
            connect(3, "10.0.0.1", 0),
            name(3, "10.0.0.9"),
        ];
        let why = explain_call(&returned, &ops, &[], &GaiConf::default()).unwrap();
        assert_eq!(why.resolver_order, ["10.0.0.2", "10.0.0.1"]);
        assert_eq!(why.candidates[0].source.as_deref(), Some("10.0.0.9"));
        assert!(why.matches, "{why:?}");
    }

    #[test]
    fn a_mismatch_is_reported_not_hidden() {
        // glibc would keep the resolver order (rule 10); pretend it returned the reverse.
        let returned = [ip("10.0.0.2"), ip("10.0.0.1")];
        let ops = [
            connect(3, "10.0.0.1", 0),
            name(3, "10.0.0.9"),
            connect(3, "10.0.0.2", 0),
            name(3, "10.0.0.9"),
        ];
        let why = explain_call(&returned, &ops, &[], &GaiConf::default()).unwrap();
        assert!(!why.matches);
        assert_eq!(why.predicted, ["10.0.0.1", "10.0.0.2"]);
        assert!(!why.pairs[0].agrees);
    }
}
