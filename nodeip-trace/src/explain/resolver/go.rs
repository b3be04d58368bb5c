//! Go's own resolver's destination-address sort, replayed: `sortByRFC6724withSrcs` in
//! `src/net/addrselect.go` (Go 1.19 to 1.27: the rules did not change, only the types of the
//! sources, `[]IP` then `[]netip.Addr`, and the sort call), as a pure function that says which
//! rule decided each adjacent pair.
//!
//! What Go does (checked against Go 1.19's and 1.27's sources, and judged by real Go binaries in
//! `tests/tests/resolver_orders.rs`):
//! - Sources: for each address, in the resolver's order (hosts file order, or DNS answers in
//!   arrival order), `DialUDP` to port 9 (53 from Go 1.23) and `LocalAddr`; a failed dial makes
//!   the address unusable (rule 1). No `/etc/gai.conf`, no netlink dump, no address flags.
//! - Rules 1, 2, 5, 6 and 8 with RFC 6724's default policy table (`::1`, `::ffff:0:0/96`,
//!   `::/96`, `2001::/32`, `2002::/16`, `3ffe::/16`, `fec0::/10`, `fc00::/7`, `::/0`; IPv4
//!   classified as `::ffff:a.b.c.d`); rule 9 **only when both destinations are IPv6**, with the
//!   common prefix counted over the first 64 bits at most ("applying this rule to IPv4 addresses
//!   causes problems (see issues 13283 and 18518), so limit to IPv6"); rules 3, 4 and 7 are not
//!   implemented (TODOs in Go). Scope: loopback and link-local (IPv4 127/8 and 169.254/16 too)
//!   2, IPv6 multicast its nibble, site-local 5, everything else global.
//! - A stable sort. An IPv4 address's precedence (35) equals no IPv6 one's, so every pair
//!   reaching rule 9 is of one family: the comparison is a total order and any stable sort gives
//!   Go's result.
//! - `net.LookupHost` on the hosts-file path returns the file's order unsorted; `net.LookupIP`
//!   and `(*Resolver).LookupIPAddr` sort.
use std::cmp::Ordering;
use std::net::IpAddr;

use super::ResolverSort;
// Go's `To4() != nil`: IPv4, or IPv6 in `::ffff:a.b.c.d` form.
use crate::explain::go_net::is_ipv4 as is_v4;
use crate::model::getaddrinfo::{CandidateWhy, GetaddrinfoWhy, PairWhy};
use crate::model::ip_text::ip_texts;
use crate::model::resolver_span::ResolverSpan;

/// One address as Go's sort sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoCandidate {
    /// The destination.
    pub dest: IpAddr,
    /// The source `DialUDP` + `LocalAddr` gave; `None` when the dial failed (unusable).
    pub source: Option<IpAddr>,
}

/// `(prefix, length, precedence, label)`, longest prefix first, as Go sorts its table.
const POLICY: [(u128, u32, u8, u8); 9] = [
    (1, 128, 50, 0),
    (0xffff_0000_0000, 96, 35, 4),
    (0, 96, 1, 3),
    (0x2001_u128 << 112, 32, 5, 5),
    (0x2002_u128 << 112, 16, 30, 2),
    (0x3ffe_u128 << 112, 16, 1, 12),
    (0xfec0_u128 << 112, 10, 1, 11),
    (0xfc00_u128 << 112, 7, 3, 13),
    (0, 0, 40, 1),
];

fn as_u128(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v4) => u128::from_be_bytes(v4.to_ipv6_mapped().octets()),
        IpAddr::V6(v6) => u128::from_be_bytes(v6.octets()),
    }
}

/// `(precedence, label)` from Go's policy table.
fn classify(a: IpAddr) -> (u8, u8) {
    let x = as_u128(a);
    POLICY
        .iter()
        .find(|(prefix, len, _, _)| *len == 0 || x >> (128 - len) == prefix >> (128 - len))
        .map_or((40, 1), |(_, _, p, l)| (*p, *l))
}

/// Go's `classifyScope`.
fn scope(a: IpAddr) -> u8 {
    let link_local_or_loopback = match a {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.is_loopback() || v4.is_link_local(),
            None => v6.is_loopback() || v6.segments()[0] & 0xffc0 == 0xfe80,
        },
    };
    if link_local_or_loopback {
        return 2;
    }
    if let IpAddr::V6(v6) = a {
        if !is_v4(a) {
            let o = v6.octets();
            if o[0] == 0xff {
                return o[1] & 0xf;
            }
            if o[0] == 0xfe && o[1] & 0xc0 == 0xc0 {
                return 5;
            }
        }
    }
    0xe
}

/// Go's `commonPrefixLen` for two IPv6 addresses: at most the first 64 bits.
fn common_prefix_64(a: IpAddr, b: IpAddr) -> u32 {
    let x = (as_u128(a) >> 64) as u64 ^ (as_u128(b) >> 64) as u64;
    x.leading_zeros()
}

/// Whether Go orders `a` before `b`, and which rule said so (rule 10: neither).
fn compare(a: &GoCandidate, b: &GoCandidate) -> (Ordering, u8, String) {
    let (Some(sa), Some(sb)) = (a.source, b.source) else {
        let detail = |c: &GoCandidate| {
            if c.source.is_some() {
                format!("{} dialed", c.dest)
            } else {
                format!("{} could not be dialed", c.dest)
            }
        };
        let text = format!("{}, {}", detail(a), detail(b));
        return match (a.source.is_some(), b.source.is_some()) {
            (true, false) => (Ordering::Less, 1, text),
            (false, true) => (Ordering::Greater, 1, text),
            _ => (
                Ordering::Equal,
                10,
                "neither could be dialed: order kept".into(),
            ),
        };
    };
    let (da, db) = (a.dest, b.dest);
    let (scope_a, scope_b, src_scope_a, src_scope_b) = (scope(da), scope(db), scope(sa), scope(sb));
    if (scope_a == src_scope_a) != (scope_b == src_scope_b) {
        let text = format!(
            "scope {scope_a:#x} for {da} (source {sa}: {src_scope_a:#x}), {scope_b:#x} for {db} \
             (source {sb}: {src_scope_b:#x})"
        );
        let ord = if scope_a == src_scope_a {
            Ordering::Less
        } else {
            Ordering::Greater
        };
        return (ord, 2, text);
    }
    let ((prec_a, label_a), (prec_b, label_b)) = (classify(da), classify(db));
    let (src_label_a, src_label_b) = (classify(sa).1, classify(sb).1);
    if (label_a == src_label_a) != (label_b == src_label_b) {
        let text = format!(
            "label {label_a} for {da} (source {sa}: {src_label_a}), {label_b} for {db} (source \
             {sb}: {src_label_b})"
        );
        let ord = if label_a == src_label_a {
            Ordering::Less
        } else {
            Ordering::Greater
        };
        return (ord, 5, text);
    }
    if prec_a != prec_b {
        return (
            prec_b.cmp(&prec_a),
            6,
            format!("precedence {prec_a} for {da}, {prec_b} for {db} (Go's built-in table; Go reads no gai.conf)"),
        );
    }
    if scope_a != scope_b {
        return (
            scope_a.cmp(&scope_b),
            8,
            format!("scope {scope_a:#x} for {da}, {scope_b:#x} for {db}"),
        );
    }
    if !is_v4(da) && !is_v4(db) {
        let (ca, cb) = (common_prefix_64(sa, da), common_prefix_64(sb, db));
        if ca != cb {
            return (
                cb.cmp(&ca),
                9,
                format!(
                    "{da} shares {ca} bits with its source {sa}, {db} {cb} bits with {sb} (Go \
                     counts the first 64 bits only)"
                ),
            );
        }
    }
    let why = if is_v4(da) && is_v4(db) {
        "Go applies rule 9 (longest matching prefix) only to IPv6 destinations"
    } else {
        "no rule tells them apart"
    };
    (Ordering::Equal, 10, format!("{why}: order kept"))
}

/// Rule names as RFC 6724 numbers them, for the rules Go applies.
pub fn rule_name(rule: u8) -> &'static str {
    match rule {
        1 => "avoid unusable destinations",
        2 => "prefer matching scope",
        5 => "prefer matching label",
        6 => "prefer higher precedence",
        8 => "prefer smaller scope",
        9 => "use longest matching prefix (IPv6 only, first 64 bits)",
        10 => "otherwise, leave the order unchanged",
        _ => "",
    }
}

/// Go's order of `candidates` (given in the resolver's order), as indices.
pub fn sort(candidates: &[GoCandidate]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by(|&i, &j| compare(&candidates[i], &candidates[j]).0);
    order
}

/// Explains the order Go returned (`returned`: distinct addresses) for candidates in the
/// resolver's order: the predicted order and the rule behind each adjacent pair of `returned`.
pub fn explain(candidates: &[GoCandidate], returned: &[IpAddr]) -> GetaddrinfoWhy {
    let predicted: Vec<IpAddr> = sort(candidates)
        .into_iter()
        .map(|i| candidates[i].dest)
        .collect();
    let find = |a: &IpAddr| candidates.iter().find(|c| c.dest == *a);
    let pairs = returned
        .windows(2)
        .filter_map(|w| {
            let (a, b) = (find(&w[0])?, find(&w[1])?);
            let (ord, rule, detail) = compare(a, b);
            Some(PairWhy {
                first: a.dest.to_string(),
                second: b.dest.to_string(),
                rule,
                rule_name: rule_name(rule).into(),
                detail,
                agrees: ord != Ordering::Greater,
            })
        })
        .collect();
    GetaddrinfoWhy {
        resolver_order: ip_texts(candidates.iter().map(|c| c.dest)),
        matches: predicted == returned,
        predicted: ip_texts(predicted.iter().copied()),
        pairs,
        candidates: candidates
            .iter()
            .map(|c| CandidateWhy {
                address: c.dest.to_string(),
                source: c.source.map(|s| s.to_string()),
                prefix_len: None,
                interface: None,
            })
            .collect(),
        notes: Vec::new(),
    }
}

/// Go's sort, as the [`ResolverSort`] of Go's own resolver: explained from the sort's own
/// arguments (the probe read the exact sources it used).
pub struct GoSort;

impl ResolverSort for GoSort {
    fn explain(&self, span: &ResolverSpan) -> Option<GetaddrinfoWhy> {
        let inputs = span.sort_inputs.as_ref()?;
        // Sources not read (an unknown layout): nothing to replay.
        if inputs.sources.len() != inputs.order.len() {
            return None;
        }
        let candidates: Vec<GoCandidate> = inputs
            .order
            .iter()
            .zip(&inputs.sources)
            .map(|(dest, source)| GoCandidate {
                dest: *dest,
                source: *source,
            })
            .collect();
        let returned: Vec<IpAddr> = span
            .call
            .addresses
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect();
        if candidates.len() < 2 {
            return None;
        }
        Some(explain(&candidates, &returned))
    }
}

/// Go's `LookupHost` answered from `/etc/hosts`, as a [`ResolverSort`]: nothing is sorted,
/// the file's order is returned. Its why says so, so a reader comparing it with glibc's sorted
/// answer for the same name sees which order is which.
pub struct GoHostsOrder;

/// The note of a host lookup answered from `/etc/hosts`.
pub const HOSTS_ORDER_NOTE: &str = "Go's LookupHost returns the /etc/hosts entries in the \
                                    file's order, unsorted: only LookupIP-style lookups (and \
                                    LookupHost answers from DNS) go through Go's RFC 6724 sort";

impl ResolverSort for GoHostsOrder {
    fn explain(&self, span: &ResolverSpan) -> Option<GetaddrinfoWhy> {
        let order: Vec<String> = span
            .sort_inputs
            .as_ref()?
            .order
            .iter()
            .map(|a| a.to_string())
            .collect();
        if order.len() < 2 {
            return None;
        }
        Some(GetaddrinfoWhy {
            matches: order == span.call.addresses,
            candidates: order
                .iter()
                .map(|address| CandidateWhy {
                    address: address.clone(),
                    source: None,
                    prefix_len: None,
                    interface: None,
                })
                .collect(),
            resolver_order: order.clone(),
            predicted: order,
            pairs: Vec::new(),
            notes: vec![HOSTS_ORDER_NOTE.into()],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn c(dest: &str, source: &str) -> GoCandidate {
        GoCandidate {
            dest: ip(dest),
            source: Some(ip(source)),
        }
    }

    fn order(cands: &[GoCandidate]) -> Vec<String> {
        sort(cands)
            .into_iter()
            .map(|i| cands[i].dest.to_string())
            .collect()
    }

    /// research/resolvers.md §2, measured with Go 1.19 (pure): "multi4" keeps the hosts order,
    /// "mixed" gives 10.2.3.4, 10.1.0.9, fd00:1::9, 2001:db8:99::1.
    #[test]
    fn the_measured_layouts_come_out_in_go_s_order() {
        let multi4 = [
            c("10.2.3.4", "10.2.0.5"),
            c("10.1.0.9", "10.1.0.5"),
            c("192.168.7.7", "10.1.0.5"),
        ];
        assert_eq!(order(&multi4), ["10.2.3.4", "10.1.0.9", "192.168.7.7"]);
        let mixed = [
            c("10.2.3.4", "10.2.0.5"),
            c("2001:db8:99::1", "fd00:1::5"),
            c("10.1.0.9", "10.1.0.5"),
            c("fd00:1::9", "fd00:1::5"),
        ];
        assert_eq!(
            order(&mixed),
            ["10.2.3.4", "10.1.0.9", "fd00:1::9", "2001:db8:99::1"]
        );
        let returned: Vec<IpAddr> = sort(&mixed).into_iter().map(|i| mixed[i].dest).collect();
        let why = explain(&mixed, &returned);
        assert!(why.matches);
        assert_eq!(why.pairs[0].rule, 10, "{:?}", why.pairs[0]);
        assert!(why.pairs[0].detail.contains("only to IPv6"));
        assert_eq!(why.pairs[1].rule, 6);
        assert_eq!(why.pairs[2].rule, 5);
    }

    /// Seed 000's layout: the alias 172.18.45.20 is the primary; Go keeps the hosts order
    /// [.6, .20] where glibc's rule 9 puts .20 first.
    #[test]
    fn seed_000_keeps_the_hosts_order() {
        let cands = [
            c("172.18.45.6", "172.18.45.20"),
            c("172.18.45.20", "172.18.45.20"),
        ];
        assert_eq!(order(&cands), ["172.18.45.6", "172.18.45.20"]);
    }

    #[test]
    fn ipv6_prefix_counts_64_bits_and_undialable_goes_last() {
        let cands = [
            c("fd00:1::9", "fd00:2::5"),
            GoCandidate {
                dest: ip("fd00:3::1"),
                source: None,
            },
            c("fd00:2::9", "fd00:2::5"),
        ];
        assert_eq!(order(&cands), ["fd00:2::9", "fd00:1::9", "fd00:3::1"]);
        assert_eq!(common_prefix_64(ip("fd00:1::1"), ip("fd00:1::ffff")), 64);
        assert_eq!(scope(ip("127.0.0.1")), 2);
        assert_eq!(scope(ip("169.254.0.1")), 2);
        assert_eq!(scope(ip("fe80::1")), 2);
        assert_eq!(scope(ip("fec0::1")), 5);
        assert_eq!(classify(ip("10.0.0.1")), (35, 4));
        assert_eq!(classify(ip("::1")), (50, 0));
        assert_eq!(classify(ip("2001:db8::1")), (40, 1));
        assert_eq!(classify(ip("2001::1")), (5, 5));
        assert_eq!(classify(ip("fd00::1")), (3, 13));
    }
}
