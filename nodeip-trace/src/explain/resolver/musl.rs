//! musl's destination-address sort, replayed: `__lookup_name` in `src/network/lookup_name.c`
//! (musl 1.1.20 to 1.2.5; Debian 12 ships 1.2.3), as a pure function that says which rule
//! decided each adjacent pair, with the numbers.
//!
//! What musl does, and what the trace sees of it:
//! - It sorts only when there are at least two results, the family asked is not `AF_INET`, and
//!   at least one result is not IPv4. Otherwise the resolver's order (hosts file, DNS answer) is
//!   returned as it is — and musl opens no socket at all.
//! - For each result, in the resolver's order, it `connect()`s a UDP socket (`AF_INET` for IPv4
//!   since 1.1.20, port 65535) and `getsockname()`s it: the trace sees both. A failed connect
//!   makes the result unusable. With `AI_ADDRCONFIG` it first connects to 127.0.0.1 and ::1
//!   (those two connects are not candidates).
//! - One 31-bit key per result, sorted descending (`qsort`, keys are unique):
//!   `USABLE(bit 30) | MATCHING_SCOPE(29) | MATCHING_LABEL(28) | precedence << 20 |
//!   (15 - scope) << 16 | common prefix << 8 | (48 - index)`: RFC 6724 rules 1, 2, 5, 6, 8, 9
//!   and 10 ("Rules 3, 4, and 7 are omitted"). An IPv4 address is compared as
//!   `::ffff:a.b.c.d`, so rule 9 counts the common leading bits over all 128 bits with no cap at
//!   the source's prefix length — unlike glibc, which gives an IPv4 destination outside the
//!   source's subnet 0 — and every IPv4 address, 127/8 and 169.254/16 included, has global scope.
//! - Its policy table is RFC 6724's without `::/96`, `fec0::/10` and `3ffe::/16`; there is no
//!   `/etc/gai.conf`.
use std::cmp::Reverse;
use std::net::{IpAddr, Ipv6Addr};

use super::{connected_candidates, ResolverSort};
use crate::model::getaddrinfo::{CandidateWhy, GetaddrinfoWhy, PairWhy};
use crate::model::ip_text::ip_texts;
use crate::model::resolver_span::ResolverSpan;

/// `MAXADDRS` in musl's `lookup.h`: the index term is `48 - i`.
const MAX_ADDRS: u32 = 48;
const USABLE: u32 = 1 << 30;
const MATCHING_SCOPE: u32 = 1 << 29;
const MATCHING_LABEL: u32 = 1 << 28;
const PREC_SHIFT: u32 = 20;
const SCOPE_SHIFT: u32 = 16;
const PREFIX_SHIFT: u32 = 8;

/// One result as musl's sort sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MuslCandidate {
    /// The destination.
    pub dest: IpAddr,
    /// `connect()` succeeded (rule 1).
    pub connected: bool,
    /// The source `getsockname()` gave; `None` when it failed (the key then lacks the scope,
    /// label and prefix terms).
    pub source: Option<IpAddr>,
}

/// One row of musl's policy table: `len` whole bytes compared, then the next byte under `mask`.
struct Policy {
    addr: [u8; 16],
    len: usize,
    mask: u8,
    precedence: u32,
    label: u32,
}

const fn policy(prefix: &[u8], len: usize, mask: u8, precedence: u32, label: u32) -> Policy {
    let mut addr = [0u8; 16];
    let mut i = 0;
    while i < prefix.len() {
        addr[i] = prefix[i];
        i += 1;
    }
    Policy {
        addr,
        len,
        mask,
        precedence,
        label,
    }
}

/// musl's `defpolicy`: `::1`, `::ffff:0:0/96`, `2002::/16`, `2001::/32`, `fc00::/7`, `::/0`.
const POLICIES: [Policy; 6] = [
    policy(
        &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        15,
        0xff,
        50,
        0,
    ),
    policy(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff], 11, 0xff, 35, 4),
    policy(&[0x20, 0x02], 1, 0xff, 30, 2),
    policy(&[0x20, 0x01], 3, 0xff, 5, 5),
    policy(&[0xfc], 0, 0xfe, 3, 13),
    policy(&[], 0, 0, 40, 1),
];

fn policy_of(a: &[u8; 16]) -> &'static Policy {
    POLICIES
        .iter()
        .find(|p| a[..p.len] == p.addr[..p.len] && a[p.len] & p.mask == p.addr[p.len])
        .unwrap_or(&POLICIES[POLICIES.len() - 1])
}

/// musl's `scopeof`: multicast by its scope nibble, link-local and `::1` 2, site-local 5, else
/// 14 (every IPv4 address, compared as `::ffff:a.b.c.d`).
fn scope_of(a: &[u8; 16]) -> u32 {
    let v6 = Ipv6Addr::from(*a);
    if a[0] == 0xff {
        u32::from(a[1] & 15)
    } else if a[0] == 0xfe && a[1] & 0xc0 == 0x80 || v6 == Ipv6Addr::LOCALHOST {
        2
    } else if a[0] == 0xfe && a[1] & 0xc0 == 0xc0 {
        5
    } else {
        14
    }
}

/// The address as musl compares it: IPv6, IPv4 as `::ffff:a.b.c.d`.
fn as_v6(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// musl's `prefixmatch`: common leading bits over all 128.
fn common_prefix(a: &[u8; 16], b: &[u8; 16]) -> u32 {
    let x = u128::from_be_bytes(*a) ^ u128::from_be_bytes(*b);
    x.leading_zeros()
}

/// The terms of one candidate's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KeyTerms {
    usable: bool,
    matching_scope: bool,
    matching_label: bool,
    precedence: u32,
    scope: u32,
    prefix: u32,
    index: u32,
}

impl KeyTerms {
    fn of(c: &MuslCandidate, index: usize) -> Self {
        let d = as_v6(c.dest);
        let dpolicy = policy_of(&d);
        let dscope = scope_of(&d);
        let source = c.source.filter(|_| c.connected).map(as_v6);
        KeyTerms {
            usable: c.connected,
            matching_scope: source.is_some_and(|s| scope_of(&s) == dscope),
            matching_label: source.is_some_and(|s| policy_of(&s).label == dpolicy.label),
            precedence: dpolicy.precedence,
            scope: dscope,
            prefix: source.map_or(0, |s| common_prefix(&s, &d)),
            index: MAX_ADDRS.saturating_sub(index as u32),
        }
    }

    fn key(&self) -> u32 {
        let bit = |on: bool, b: u32| if on { b } else { 0 };
        bit(self.usable, USABLE)
            | bit(self.matching_scope, MATCHING_SCOPE)
            | bit(self.matching_label, MATCHING_LABEL)
            | self.precedence << PREC_SHIFT
            | (15 - self.scope.min(15)) << SCOPE_SHIFT
            | self.prefix << PREFIX_SHIFT
            | self.index
    }
}

/// The 31-bit key musl gives `candidate`, the `index`-th in the resolver's order.
pub fn sort_key(candidate: &MuslCandidate, index: usize) -> u32 {
    KeyTerms::of(candidate, index).key()
}

/// Whether musl sorts this answer at all: two or more results, a family other than `AF_INET`
/// asked (`ipv4_only`), and a result that is not IPv4.
pub fn sorts(ipv4_only: bool, results: &[IpAddr]) -> bool {
    results.len() >= 2 && !ipv4_only && results.iter().any(|a| a.is_ipv6())
}

/// musl's order of `candidates` (given in the resolver's order), as indices.
pub fn sort(candidates: &[MuslCandidate]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by_key(|&i| Reverse(sort_key(&candidates[i], i)));
    order
}

/// Rule names as RFC 6724 numbers them, for the rules musl applies.
pub fn rule_name(rule: u8) -> &'static str {
    match rule {
        1 => "avoid unusable destinations",
        2 => "prefer matching scope",
        5 => "prefer matching label",
        6 => "prefer higher precedence",
        8 => "prefer smaller scope",
        9 => "use longest matching prefix",
        10 => "otherwise, leave the order unchanged",
        _ => "",
    }
}

/// Why `a` (the `ia`-th in the resolver's order) came right before `b` (the `ib`-th): the
/// highest key term in which they differ.
fn pair(a: &MuslCandidate, ia: usize, b: &MuslCandidate, ib: usize) -> PairWhy {
    let (ta, tb) = (KeyTerms::of(a, ia), KeyTerms::of(b, ib));
    let source = |c: &MuslCandidate| {
        c.source
            .map_or_else(|| "no source".to_string(), |s| format!("source {s}"))
    };
    let (rule, detail, agrees) = if ta.usable != tb.usable {
        (
            1,
            format!(
                "{} connect() {}, {} connect() {}",
                a.dest,
                if ta.usable { "succeeded" } else { "failed" },
                b.dest,
                if tb.usable { "succeeded" } else { "failed" }
            ),
            ta.usable,
        )
    } else if ta.matching_scope != tb.matching_scope {
        (
            2,
            format!(
                "{} scope {} {} its {}; {} scope {} {} its {}",
                a.dest,
                ta.scope,
                if ta.matching_scope {
                    "matches"
                } else {
                    "differs from"
                },
                source(a),
                b.dest,
                tb.scope,
                if tb.matching_scope {
                    "matches"
                } else {
                    "differs from"
                },
                source(b)
            ),
            ta.matching_scope,
        )
    } else if ta.matching_label != tb.matching_label {
        (
            5,
            format!(
                "{} label {} its {}; {} label {} its {}",
                a.dest,
                if ta.matching_label {
                    "matches"
                } else {
                    "differs from"
                },
                source(a),
                b.dest,
                if tb.matching_label {
                    "matches"
                } else {
                    "differs from"
                },
                source(b)
            ),
            ta.matching_label,
        )
    } else if ta.precedence != tb.precedence {
        (
            6,
            format!(
                "precedence {} for {}, {} for {} (musl's built-in table; musl reads no gai.conf)",
                ta.precedence, a.dest, tb.precedence, b.dest
            ),
            ta.precedence > tb.precedence,
        )
    } else if ta.scope != tb.scope {
        (
            8,
            format!(
                "scope {} for {}, {} for {}",
                ta.scope, a.dest, tb.scope, b.dest
            ),
            ta.scope < tb.scope,
        )
    } else if ta.prefix != tb.prefix {
        (
            9,
            format!(
                "{} shares {} bits with its {}; {} shares {} bits with its {} (musl counts over \
                 all 128 bits, IPv4 as ::ffff:a.b.c.d, with no cap at the source's prefix length)",
                a.dest,
                ta.prefix,
                source(a),
                b.dest,
                tb.prefix,
                source(b)
            ),
            ta.prefix > tb.prefix,
        )
    } else {
        (
            10,
            format!(
                "{} was {} and {} was {} in the resolver's order",
                a.dest,
                ordinal(ia),
                b.dest,
                ordinal(ib)
            ),
            ia < ib,
        )
    };
    PairWhy {
        first: a.dest.to_string(),
        second: b.dest.to_string(),
        rule,
        rule_name: rule_name(rule).into(),
        detail,
        agrees,
    }
}

fn ordinal(i: usize) -> String {
    match i + 1 {
        1 => "1st".into(),
        2 => "2nd".into(),
        3 => "3rd".into(),
        n => format!("{n}th"),
    }
}

/// Explains the order musl returned (`returned`: distinct addresses) for candidates given in the
/// resolver's order: the predicted order, and the rule behind each adjacent pair of `returned`.
pub fn explain(candidates: &[MuslCandidate], returned: &[IpAddr]) -> GetaddrinfoWhy {
    let predicted: Vec<IpAddr> = sort(candidates)
        .into_iter()
        .map(|i| candidates[i].dest)
        .collect();
    let position = |a: &IpAddr| candidates.iter().position(|c| c.dest == *a);
    let pairs = returned
        .windows(2)
        .filter_map(|w| {
            let (ia, ib) = (position(&w[0])?, position(&w[1])?);
            Some(pair(&candidates[ia], ia, &candidates[ib], ib))
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

/// The note of an answer musl does not sort.
const KEPT_ORDER: &str = "musl sorts only when a result is IPv6 and the family asked is not \
                          AF_INET: the resolver's order (hosts file or DNS answer) is returned \
                          as it is";

/// musl's sort, as the [`ResolverSort`] of musl's getaddrinfo calls.
pub struct MuslSort;

impl ResolverSort for MuslSort {
    fn explain(&self, span: &ResolverSpan) -> Option<GetaddrinfoWhy> {
        let mut returned: Vec<IpAddr> = Vec::new();
        for r in &span.call.results {
            if let Ok(a) = r.address.parse::<IpAddr>() {
                if !returned.contains(&a) {
                    returned.push(a);
                }
            }
        }
        if returned.len() < 2 {
            return None;
        }
        let ipv4_only = span.call.family == "AF_INET";
        if !sorts(ipv4_only, &returned) {
            let order: Vec<String> = returned.iter().map(|a| a.to_string()).collect();
            return Some(GetaddrinfoWhy {
                resolver_order: order.clone(),
                predicted: order,
                matches: true,
                pairs: Vec::new(),
                candidates: Vec::new(),
                notes: vec![KEPT_ORDER.into()],
            });
        }
        // With AI_ADDRCONFIG musl first probes 127.0.0.1 and ::1 with the same kind of connect.
        let probes = if span.call.flags.iter().any(|f| f == "AI_ADDRCONFIG") {
            span.socket_ops
                .iter()
                .filter(|op| op.connect)
                .take(2)
                .filter(|op| op.addr.is_some_and(|a| a.is_loopback()))
                .count()
        } else {
            0
        };
        let mut skipped = 0;
        let ops: Vec<_> = span
            .socket_ops
            .iter()
            .filter(|op| {
                if op.connect && skipped < probes {
                    skipped += 1;
                    return false;
                }
                true
            })
            .copied()
            .collect();
        let connected = connected_candidates(&ops, &returned);
        if connected.is_empty() {
            return None;
        }
        let mut candidates: Vec<MuslCandidate> = connected
            .iter()
            .map(|c| MuslCandidate {
                dest: c.dest,
                connected: c.connected,
                source: c.source,
            })
            .collect();
        let mut notes = Vec::new();
        let missing: Vec<IpAddr> = returned
            .iter()
            .filter(|a| !candidates.iter().any(|c| c.dest == **a))
            .copied()
            .collect();
        if !missing.is_empty() {
            notes.push(format!(
                "no connect() seen for {}: their place before sorting is unknown (taken as last)",
                missing
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            candidates.extend(missing.into_iter().map(|dest| MuslCandidate {
                dest,
                connected: false,
                source: None,
            }));
        }
        let mut why = explain(&candidates, &returned);
        why.notes = notes;
        Some(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn reachable(dest: &str, source: &str) -> MuslCandidate {
        MuslCandidate {
            dest: ip(dest),
            connected: true,
            source: Some(ip(source)),
        }
    }

    fn order(c: &[MuslCandidate]) -> Vec<String> {
        sort(c).into_iter().map(|i| c[i].dest.to_string()).collect()
    }

    /// The measured "mixed" layout (research/resolvers.md §2, musl 1.2.3): hosts order
    /// 10.2.3.4, 2001:db8:99::1, 10.1.0.9, fd00:1::9 on a node with 10.1.0.5/24, 10.2.0.5/16,
    /// fd00:1::5/64 and default routes; musl returned 10.1.0.9, 10.2.3.4, fd00:1::9,
    /// 2001:db8:99::1.
    #[test]
    fn the_measured_mixed_layout_comes_out_in_musls_order() {
        let c = [
            reachable("10.2.3.4", "10.2.0.5"),
            reachable("2001:db8:99::1", "fd00:1::5"),
            reachable("10.1.0.9", "10.1.0.5"),
            reachable("fd00:1::9", "fd00:1::5"),
        ];
        assert_eq!(
            order(&c),
            ["10.1.0.9", "10.2.3.4", "fd00:1::9", "2001:db8:99::1"]
        );
        let returned: Vec<IpAddr> = sort(&c).into_iter().map(|i| c[i].dest).collect();
        let why = explain(&c, &returned);
        assert!(why.matches);
        // IPv4 before the ULA: precedence 35 against 3.
        assert_eq!((why.pairs[1].rule, why.pairs[1].agrees), (6, true));
        // 10.1.0.9 before 10.2.3.4: 10.1.0.9 shares 124 bits with 10.1.0.5, 10.2.3.4 118 with
        // 10.2.0.5 (as ::ffff:a.b.c.d).
        assert_eq!(why.pairs[0].rule, 9, "{:?}", why.pairs[0]);
        assert!(
            why.pairs[0].detail.contains("124 bits"),
            "{}",
            why.pairs[0].detail
        );
    }

    #[test]
    fn an_ipv4_only_answer_is_not_sorted() {
        assert!(!sorts(false, &[ip("10.2.3.4"), ip("10.1.0.9")]));
        assert!(!sorts(true, &[ip("10.2.3.4"), ip("fd00::1")]));
        assert!(!sorts(false, &[ip("fd00::1")]));
        assert!(sorts(false, &[ip("10.2.3.4"), ip("fd00::1")]));
    }

    #[test]
    fn an_unusable_destination_goes_last_by_rule_1() {
        let c = [
            MuslCandidate {
                dest: ip("fd00:2::1"),
                connected: false,
                source: None,
            },
            reachable("10.1.0.9", "10.1.0.5"),
        ];
        assert_eq!(order(&c), ["10.1.0.9", "fd00:2::1"]);
        let why = explain(&c, &[ip("10.1.0.9"), ip("fd00:2::1")]);
        assert_eq!(why.pairs[0].rule, 1);
    }

    #[test]
    fn loopback_ipv4_is_global_scope_in_musl() {
        assert_eq!(scope_of(&as_v6(ip("127.0.0.1"))), 14);
        assert_eq!(scope_of(&as_v6(ip("169.254.1.1"))), 14);
        assert_eq!(scope_of(&as_v6(ip("::1"))), 2);
        assert_eq!(scope_of(&as_v6(ip("fe80::1"))), 2);
        assert_eq!(policy_of(&as_v6(ip("fd00::1"))).precedence, 3);
        assert_eq!(policy_of(&as_v6(ip("10.0.0.1"))).precedence, 35);
        assert_eq!(policy_of(&as_v6(ip("2001:db8::1"))).precedence, 40);
        assert_eq!(policy_of(&as_v6(ip("2001:0::1"))).precedence, 5);
        assert_eq!(policy_of(&as_v6(ip("2002::1"))).precedence, 30);
    }

    #[test]
    fn equal_keys_but_the_index_keep_the_resolver_order() {
        let c = [
            reachable("10.2.3.4", "10.9.9.9"),
            reachable("10.2.3.5", "10.9.9.9"),
        ];
        // Same prefix with the source (108 + 4 bits: 10.2.x vs 10.9.x), so rule 10 decides.
        assert_eq!(order(&c), ["10.2.3.4", "10.2.3.5"]);
        let why = explain(&c, &[ip("10.2.3.4"), ip("10.2.3.5")]);
        assert_eq!(why.pairs[0].rule, 10);
    }
}
