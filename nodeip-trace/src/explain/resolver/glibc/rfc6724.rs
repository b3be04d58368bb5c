//! glibc's destination address sort (`rfc3484_sort` in glibc 2.36 `sysdeps/posix/getaddrinfo.c`),
//! as a pure function that also says which rule decided each pair, with the numbers.
//!
//! What glibc feeds the comparison, per getaddrinfo result (see [`Candidate`]):
//! - the source address: glibc `connect()`s a UDP socket to the destination and `getsockname()`s
//!   it; a failed connect makes the destination "unusable" (rule 1);
//! - from the RTM_GETADDR dump `__check_pf` made (`in6ai`), the row whose address equals the
//!   source: its prefix length, its flags (`IFA_F_DEPRECATED` or `IFA_F_OPTIMISTIC` → deprecated,
//!   `IFA_F_HOMEADDRESS` → home) and its interface index. The dump holds IPv4 addresses too (as
//!   `::ffff:a.b.c.d`), but glibc throws the whole dump away when the host has no IPv6 address
//!   other than `::1`: then no source is found, every prefix length is 0 and every index unknown.
//!
//! The comparison, rule by rule as glibc writes it:
//! 1. a destination with a source beats one without;
//! 2. (both have sources) matching scope of destination and source;
//! 3. source not deprecated; 4. source is a home address;
//! 5. label of destination equals label of source (labels from gai.conf, IPv4 as `::ffff:0:0/96`);
//! 6. higher precedence of the destination (even when neither has a source);
//! 7. the source's interface is native, i.e. not an ipip/sit/ip6tnl tunnel; only when the two
//!    sources' interface indexes differ, and an unknown index counts as not native;
//! 8. smaller destination scope;
//! 9. (same family) longer common prefix of destination and source. For IPv4 glibc counts the
//!    common leading bits only when the destination lies in the source's subnet (by the source's
//!    prefix length), else 0; a prefix length of 0 (source not found in the dump) computes the
//!    netmask as `0xffffffff << 32`, which x86-64 and arm64 evaluate as `0xffffffff`: then only a
//!    destination equal to its source scores (32). For IPv6 there is no such cap;
//! 10. the original order.
//!
//! glibc sorts with `qsort_r`, which in 2.36 is a top-down merge sort ([`sort`] reproduces it step
//! by step). That matters: with some gai.conf tables the comparison is not transitive (rule 9 only
//! compares within a family), and then the result depends on the algorithm.
use std::cmp::Ordering;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use thiserror::Error;

use super::gai_conf::GaiConf;

/// One getaddrinfo result as glibc's sort sees it.
///
/// glibc sorts every `addrinfo` it built, including the copies of one address for several socket
/// types (e.g. STREAM, DGRAM, RAW); pass them all, in glibc's order, to reproduce its result
/// exactly. Copies of one address get identical source data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Destination address (an IPv6 `::ffff:a.b.c.d` is an IPv6 destination, as in glibc).
    pub dest: IpAddr,
    /// The source the kernel picked for it; `None` when `connect()` failed (unusable).
    ///
    /// It is what a route lookup gives, with two kernel facts to keep in mind: for a local
    /// *secondary* IPv4 address the local route's `src` is the subnet's primary, not the address
    /// itself; and `connect()` fails where `ip route get` answers for a link-local IPv6
    /// destination without scope id (EINVAL) and for a broadcast route (EACCES).
    pub source: Option<IpAddr>,
    /// Prefix length of the `in6ai` row that matched the source; `None` when no row matched
    /// (glibc then uses 0).
    pub source_prefix_len: Option<u8>,
    /// Flags of that row (all false when no row matched).
    pub source_flags: SourceFlags,
    /// Interface of that row (`None` when no row matched).
    pub source_interface: Option<SourceInterface>,
    /// Position in the list glibc got from NSS before sorting (rule 10's key).
    pub original_index: usize,
}

/// The address flags glibc looks at (from `ifa_flags` of the RTM_GETADDR dump).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceFlags {
    /// `IFA_F_DEPRECATED` (preferred lifetime over).
    pub deprecated: bool,
    /// `IFA_F_OPTIMISTIC`: glibc treats it as deprecated.
    pub optimistic: bool,
    /// `IFA_F_HOMEADDRESS` (Mobile IPv6 home address).
    pub home: bool,
    /// `IFA_F_TEMPORARY` (privacy address). glibc 2.36 ignores it; kept for the report.
    pub temporary: bool,
}

impl SourceFlags {
    /// What glibc calls `in6ai_deprecated`.
    pub fn glibc_deprecated(&self) -> bool {
        self.deprecated || self.optimistic
    }
}

/// The interface that holds the source address (rule 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceInterface {
    /// `ifa_index`.
    pub index: u32,
    /// Not a tunnel: glibc's `__check_native` calls a link native unless its type is
    /// `ARPHRD_TUNNEL`, `ARPHRD_TUNNEL6` or `ARPHRD_SIT`.
    pub native: bool,
}

/// The result of [`sort`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortOutcome {
    /// Indices into the candidates, in glibc's order.
    pub order: Vec<usize>,
    /// Why each adjacent pair of `order` is in that order.
    pub decisions: Vec<PairDecision>,
}

/// Why one destination came right before another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairDecision {
    /// The destination that came first.
    pub first: IpAddr,
    /// The destination right after it.
    pub second: IpAddr,
    /// The rule (1..=10) that decided between them.
    pub rule: u8,
    /// Its short name, e.g. "use longest matching prefix".
    pub rule_name: &'static str,
    /// Human text with the numbers.
    pub detail: String,
    /// False when the rule prefers `second`: possible in a faithful glibc order when the
    /// comparison is not transitive (custom gai.conf), otherwise a sign that the inputs are not
    /// what glibc saw.
    pub agrees: bool,
}

/// Failure to replay glibc's comparisons on a returned order.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum OrderReplayError {
    /// The returned order names an address that is not among the candidates.
    #[error("{0} is in the returned order but not among the candidates: gather the candidate list from the same getaddrinfo call")]
    UnknownAddress(IpAddr),
}

/// Short name of an RFC 6724 rule as glibc implements it (`""` outside 1..=10).
pub fn rule_name(rule: u8) -> &'static str {
    match rule {
        1 => "avoid unusable destinations",
        2 => "prefer matching scope",
        3 => "avoid deprecated addresses",
        4 => "prefer home addresses",
        5 => "prefer matching label",
        6 => "prefer higher precedence",
        7 => "prefer native transport",
        8 => "prefer smaller scope",
        9 => "use longest matching prefix",
        10 => "leave the order unchanged",
        _ => "",
    }
}

/// `addr` as glibc's tables see it: IPv4 as `::ffff:a.b.c.d`.
fn as_v6(addr: IpAddr) -> Ipv6Addr {
    match addr {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// glibc's `get_scope`.
fn scope(addr: IpAddr, conf: &GaiConf) -> u32 {
    match addr {
        IpAddr::V4(v4) => conf.scope_v4_of(v4).map_or(14, |e| e.scope),
        IpAddr::V6(v6) => {
            let o = v6.octets();
            if o[0] == 0xff {
                u32::from(o[1] & 0xf)
            } else if (o[0] == 0xfe && o[1] & 0xc0 == 0x80) || v6 == Ipv6Addr::LOCALHOST {
                2
            } else if o[0] == 0xfe && o[1] & 0xc0 == 0xc0 {
                5
            } else {
                14
            }
        }
    }
}

/// A value looked up in a gai.conf table, with the row that gave it.
#[derive(Clone, Copy, Debug)]
struct Lookup {
    value: u64,
    row: Option<(Ipv6Addr, u8)>,
}

impl fmt::Display for Lookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.row {
            Some((prefix, bits)) => write!(f, "{} ({prefix}/{bits})", self.value),
            None => write!(f, "{} (no row matches)", self.value),
        }
    }
}

/// glibc's `get_label`: no matching row gives `INT_MAX`.
fn label(addr: IpAddr, conf: &GaiConf) -> Lookup {
    match conf.label_of(&as_v6(addr)) {
        Some(e) => Lookup {
            value: u64::from(e.value),
            row: Some((e.prefix, e.bits)),
        },
        None => Lookup {
            value: i32::MAX as u64,
            row: None,
        },
    }
}

/// glibc's `get_precedence`: no matching row gives 0.
fn precedence(addr: IpAddr, conf: &GaiConf) -> Lookup {
    match conf.precedence_of(&as_v6(addr)) {
        Some(e) => Lookup {
            value: u64::from(e.value),
            row: Some((e.prefix, e.bits)),
        },
        None => Lookup {
            value: 0,
            row: None,
        },
    }
}

/// glibc's `fls`, which despite its name counts the leading zero bits (32 for 0).
fn leading_common(xor: u32) -> u32 {
    xor.leading_zeros()
}

/// IPv4 netmask as glibc computes it: `0xffffffff << (32 - prefixlen)`, where a shift by 32
/// leaves the value unchanged on the machines glibc's binaries run on (x86-64, arm64).
fn glibc_v4_netmask(prefix_len: u8) -> u32 {
    u32::MAX.wrapping_shl(32 - u32::from(prefix_len.min(32)))
}

/// Rule 9's score for one destination: the number glibc compares, and a text for it.
struct PrefixScore {
    bits: u32,
    text: String,
}

fn v4_prefix_score(dest: Ipv4Addr, source: Ipv4Addr, prefix_len: Option<u8>) -> PrefixScore {
    let p = prefix_len.unwrap_or(0);
    let mask = glibc_v4_netmask(p);
    let (d, s) = (u32::from(dest), u32::from(source));
    if d & mask == s & mask {
        let bits = leading_common(d ^ s);
        PrefixScore {
            bits,
            text: format!(
                "{dest} shares {bits} bits with its source {source} (same /{} subnet)",
                mask.count_ones()
            ),
        }
    } else {
        let why = match prefix_len {
            Some(p) => format!("outside its source {source}'s /{p} subnet"),
            None => format!(
                "source {source} not in glibc's address list, so only an exact match counts"
            ),
        };
        PrefixScore {
            bits: 0,
            text: format!("{dest} counts 0 bits ({why})"),
        }
    }
}

fn v6_common_prefix(dest: Ipv6Addr, source: Ipv6Addr) -> u32 {
    let x = u128::from(dest) ^ u128::from(source);
    x.leading_zeros()
}

/// glibc's IPv6 rule 9: find the first 32-bit word where either pair differs and compare the
/// leading common bits of that word. Equivalent to comparing whole common prefix lengths, which
/// is what the explanation shows.
fn v6_rule9(a: (Ipv6Addr, Ipv6Addr), b: (Ipv6Addr, Ipv6Addr)) -> Ordering {
    let words = |x: Ipv6Addr| {
        let s = x.segments();
        [0, 1, 2, 3].map(|i| (u32::from(s[2 * i]) << 16) | u32::from(s[2 * i + 1]))
    };
    let (ad, as_, bd, bs) = (words(a.0), words(a.1), words(b.0), words(b.1));
    match (0..4).find(|&i| ad[i] != as_[i] || bd[i] != bs[i]) {
        Some(i) => leading_common(bd[i] ^ bs[i]).cmp(&leading_common(ad[i] ^ as_[i])),
        None => Ordering::Equal,
    }
}

/// What glibc's comparison concluded about a pair: the order, the rule, and a text.
struct Verdict {
    ordering: Ordering,
    rule: u8,
    detail: String,
}

fn decided(ordering: Ordering, rule: u8, detail: String) -> Option<Verdict> {
    (ordering != Ordering::Equal).then_some(Verdict {
        ordering,
        rule,
        detail,
    })
}

/// Which of two yes/no properties wins: `Less` when only `a` has it.
fn prefer(a_has: bool, b_has: bool) -> Ordering {
    b_has.cmp(&a_has)
}

fn show_source(c: &Candidate) -> String {
    c.source
        .map_or_else(|| "none".to_string(), |s| s.to_string())
}

/// `rfc3484_sort` for one pair, rule by rule.
fn compare(a: &Candidate, b: &Candidate, conf: &GaiConf) -> Verdict {
    rule_1(a, b)
        .or_else(|| rule_2(a, b, conf))
        .or_else(|| rule_3_4(a, b))
        .or_else(|| rule_5(a, b, conf))
        .or_else(|| rule_6(a, b, conf))
        .or_else(|| rule_7(a, b))
        .or_else(|| rule_8(a, b, conf))
        .or_else(|| rule_9(a, b))
        .unwrap_or_else(|| rule_10(a, b))
}

fn rule_1(a: &Candidate, b: &Candidate) -> Option<Verdict> {
    let ordering = prefer(a.source.is_some(), b.source.is_some());
    let (usable, unusable) = if ordering == Ordering::Less {
        (a, b)
    } else {
        (b, a)
    };
    decided(
        ordering,
        1,
        format!(
            "{} has source {}; {} is unusable (connect failed: no route or not allowed)",
            usable.dest,
            show_source(usable),
            unusable.dest
        ),
    )
}

fn rule_2(a: &Candidate, b: &Candidate, conf: &GaiConf) -> Option<Verdict> {
    let (sa, sb) = (a.source?, b.source?);
    let (ad, asrc, bd, bsrc) = (
        scope(a.dest, conf),
        scope(sa, conf),
        scope(b.dest, conf),
        scope(sb, conf),
    );
    decided(
        prefer(ad == asrc, bd == bsrc),
        2,
        format!(
            "{} scope {ad} vs source {sa} scope {asrc}; {} scope {bd} vs source {sb} scope {bsrc}",
            a.dest, b.dest
        ),
    )
}

fn rule_3_4(a: &Candidate, b: &Candidate) -> Option<Verdict> {
    let (sa, sb) = (a.source?, b.source?);
    let (da, db) = (
        a.source_flags.glibc_deprecated(),
        b.source_flags.glibc_deprecated(),
    );
    let describe = |s: IpAddr, f: &SourceFlags| match (f.deprecated, f.optimistic) {
        (true, _) => format!("{s} is deprecated"),
        (false, true) => format!("{s} is optimistic (glibc counts it as deprecated)"),
        _ => format!("{s} is not deprecated"),
    };
    decided(
        prefer(!da, !db),
        3,
        format!(
            "source {}; source {}",
            describe(sa, &a.source_flags),
            describe(sb, &b.source_flags)
        ),
    )
    .or_else(|| {
        let home = |s: IpAddr, f: &SourceFlags| {
            format!(
                "{s} {} a home address",
                if f.home { "is" } else { "is not" }
            )
        };
        decided(
            prefer(a.source_flags.home, b.source_flags.home),
            4,
            format!(
                "source {}; source {}",
                home(sa, &a.source_flags),
                home(sb, &b.source_flags)
            ),
        )
    })
}

fn rule_5(a: &Candidate, b: &Candidate, conf: &GaiConf) -> Option<Verdict> {
    let (sa, sb) = (a.source?, b.source?);
    let (ad, asrc, bd, bsrc) = (
        label(a.dest, conf),
        label(sa, conf),
        label(b.dest, conf),
        label(sb, conf),
    );
    decided(
        prefer(ad.value == asrc.value, bd.value == bsrc.value),
        5,
        format!(
            "{} label {ad} vs source {sa} label {asrc}; {} label {bd} vs source {sb} label {bsrc}",
            a.dest, b.dest
        ),
    )
}

fn rule_6(a: &Candidate, b: &Candidate, conf: &GaiConf) -> Option<Verdict> {
    let (pa, pb) = (precedence(a.dest, conf), precedence(b.dest, conf));
    let op = if pa.value > pb.value { ">" } else { "<" };
    decided(
        pb.value.cmp(&pa.value),
        6,
        format!(
            "precedence of {} {pa} {op} precedence of {} {pb}",
            a.dest, b.dest
        ),
    )
}

fn rule_7(a: &Candidate, b: &Candidate) -> Option<Verdict> {
    a.source?;
    let index = |c: &Candidate| c.source_interface.map_or(u32::MAX, |i| i.index);
    if index(a) == index(b) {
        return None;
    }
    let native = |c: &Candidate| c.source_interface.is_some_and(|i| i.native);
    let describe = |c: &Candidate| match c.source_interface {
        Some(i) if i.native => format!("{} leaves via native interface #{}", c.dest, i.index),
        Some(i) => format!("{} leaves via tunnel interface #{}", c.dest, i.index),
        None => format!(
            "{} has no known source interface (glibc counts it as not native)",
            c.dest
        ),
    };
    decided(
        prefer(native(a), native(b)),
        7,
        format!("{}; {}", describe(a), describe(b)),
    )
}

fn rule_8(a: &Candidate, b: &Candidate, conf: &GaiConf) -> Option<Verdict> {
    let (sa, sb) = (scope(a.dest, conf), scope(b.dest, conf));
    let op = if sa < sb { "<" } else { ">" };
    decided(
        sa.cmp(&sb),
        8,
        format!("scope of {} {sa} {op} scope of {} {sb}", a.dest, b.dest),
    )
}

fn rule_9(a: &Candidate, b: &Candidate) -> Option<Verdict> {
    match (a.dest, a.source?, b.dest, b.source?) {
        (IpAddr::V4(ad), IpAddr::V4(asrc), IpAddr::V4(bd), IpAddr::V4(bsrc)) => {
            let (sa, sb) = (
                v4_prefix_score(ad, asrc, a.source_prefix_len),
                v4_prefix_score(bd, bsrc, b.source_prefix_len),
            );
            decided(
                sb.bits.cmp(&sa.bits),
                9,
                format!("{}; {}", sa.text, sb.text),
            )
        }
        (IpAddr::V6(ad), IpAddr::V6(asrc), IpAddr::V6(bd), IpAddr::V6(bsrc)) => {
            let describe = |d: Ipv6Addr, s: Ipv6Addr| {
                format!(
                    "{d} shares {} bits with its source {s}",
                    v6_common_prefix(d, s)
                )
            };
            decided(
                v6_rule9((ad, asrc), (bd, bsrc)),
                9,
                format!("{}; {}", describe(ad, asrc), describe(bd, bsrc)),
            )
        }
        _ => None,
    }
}

fn rule_10(a: &Candidate, b: &Candidate) -> Verdict {
    let ordering = match a.original_index.cmp(&b.original_index) {
        Ordering::Greater => Ordering::Greater,
        _ => Ordering::Less,
    };
    Verdict {
        ordering,
        rule: 10,
        detail: format!(
            "rules 1-9 tie; original order kept ({} was #{}, {} was #{})",
            a.dest, a.original_index, b.dest, b.original_index
        ),
    }
}

/// Compare two candidates as glibc's `rfc3484_sort` does: `Less` means `a` goes first.
///
/// Returns the deciding rule (1..=10) and a text with the numbers. glibc never returns
/// `Equal`: rule 10 compares the original positions.
pub fn explain_pair(a: &Candidate, b: &Candidate, conf: &GaiConf) -> (Ordering, u8, String) {
    let v = compare(a, b, conf);
    (v.ordering, v.rule, v.detail)
}

fn pair_decision(first: &Candidate, second: &Candidate, conf: &GaiConf) -> PairDecision {
    let v = compare(first, second, conf);
    let agrees = v.ordering == Ordering::Less;
    let detail = if agrees {
        v.detail
    } else {
        format!("{} (this rule prefers {}: glibc's comparison is not transitive here, or the inputs differ from glibc's)", v.detail, second.dest)
    };
    PairDecision {
        first: first.dest,
        second: second.dest,
        rule: v.rule,
        rule_name: rule_name(v.rule),
        detail,
        agrees,
    }
}

/// glibc 2.36 `msort_with_tmp`: top-down merge sort, left half `n / 2`, ties to the left.
fn glibc_msort(items: &mut [usize], cmp: &mut impl FnMut(usize, usize) -> Ordering) {
    let n = items.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    glibc_msort(&mut items[..n1], cmp);
    glibc_msort(&mut items[n1..], cmp);
    let mut merged = Vec::with_capacity(n);
    let (mut i, mut j) = (0, n1);
    while i < n1 && j < n {
        if cmp(items[i], items[j]) != Ordering::Greater {
            merged.push(items[i]);
            i += 1;
        } else {
            merged.push(items[j]);
            j += 1;
        }
    }
    merged.extend_from_slice(&items[i..n1]);
    merged.extend_from_slice(&items[j..]);
    items.copy_from_slice(&merged);
}

/// Sort the candidates as glibc's getaddrinfo does, and explain each adjacent pair.
///
/// The candidates are taken in the order glibc had them before sorting.
pub fn sort(candidates: &[Candidate], conf: &GaiConf) -> SortOutcome {
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    glibc_msort(&mut order, &mut |x, y| {
        compare(&candidates[x], &candidates[y], conf).ordering
    });
    let decisions = order
        .windows(2)
        .map(|w| pair_decision(&candidates[w[0]], &candidates[w[1]], conf))
        .collect();
    SortOutcome { order, decisions }
}

/// Explain an order getaddrinfo returned (e.g. seen by the uprobe), pair by adjacent pair.
///
/// Consecutive copies of one address (one per socket type) are collapsed first; each address is
/// matched to the first candidate with that destination.
pub fn explain_order(
    candidates: &[Candidate],
    returned_order: &[IpAddr],
    conf: &GaiConf,
) -> Result<Vec<PairDecision>, OrderReplayError> {
    let mut distinct: Vec<IpAddr> = returned_order.to_vec();
    distinct.dedup();
    let matched = distinct
        .iter()
        .map(|addr| {
            candidates
                .iter()
                .find(|c| c.dest == *addr)
                .ok_or(OrderReplayError::UnknownAddress(*addr))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(matched
        .windows(2)
        .map(|w| pair_decision(w[0], w[1], conf))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// A reachable candidate whose source row is on interface 2 (native).
    fn reachable(index: usize, dest: &str, source: &str, prefix_len: u8) -> Candidate {
        Candidate {
            dest: ip(dest),
            source: Some(ip(source)),
            source_prefix_len: Some(prefix_len),
            source_flags: SourceFlags::default(),
            source_interface: Some(SourceInterface {
                index: 2,
                native: true,
            }),
            original_index: index,
        }
    }

    fn unreachable(index: usize, dest: &str) -> Candidate {
        Candidate {
            dest: ip(dest),
            source: None,
            source_prefix_len: None,
            source_flags: SourceFlags::default(),
            source_interface: None,
            original_index: index,
        }
    }

    fn sorted(candidates: &[Candidate], conf: &GaiConf) -> Vec<IpAddr> {
        sort(candidates, conf)
            .order
            .iter()
            .map(|&i| candidates[i].dest)
            .collect()
    }

    fn decisive_rule(a: &Candidate, b: &Candidate) -> (Ordering, u8, String) {
        explain_pair(a, b, &GaiConf::default())
    }

    #[test]
    fn rule_1_unusable_last() {
        let a = unreachable(0, "2001:db8::1");
        let b = reachable(1, "10.0.0.1", "10.0.0.2", 24);
        let (ord, rule, detail) = decisive_rule(&a, &b);
        assert_eq!((ord, rule), (Ordering::Greater, 1));
        assert!(detail.contains("2001:db8::1 is unusable"), "{detail}");
    }

    #[test]
    fn rule_2_matching_scope() {
        // Link-local destination reached from a global source: scope mismatch.
        let a = reachable(0, "fe80::1", "2001:db8::2", 64);
        let b = reachable(1, "2001:db8::1", "2001:db8::2", 64);
        let (ord, rule, detail) = decisive_rule(&a, &b);
        assert_eq!((ord, rule), (Ordering::Greater, 2), "{detail}");
        assert!(
            detail.contains("fe80::1 scope 2 vs source 2001:db8::2 scope 14"),
            "{detail}"
        );
    }

    #[test]
    fn rule_3_deprecated_and_optimistic() {
        let mut a = reachable(0, "2001:db8::1", "2001:db8::1", 64);
        a.source_flags.deprecated = true;
        let b = reachable(1, "2001:db8::2", "2001:db8::2", 64);
        assert_eq!(decisive_rule(&a, &b).1, 3);
        assert_eq!(decisive_rule(&a, &b).0, Ordering::Greater);
        a.source_flags = SourceFlags {
            optimistic: true,
            ..SourceFlags::default()
        };
        let (ord, rule, detail) = decisive_rule(&a, &b);
        assert_eq!((ord, rule), (Ordering::Greater, 3));
        assert!(detail.contains("optimistic"), "{detail}");
    }

    #[test]
    fn rule_4_home() {
        let a = reachable(0, "2001:db8::1", "2001:db8::1", 64);
        let mut b = reachable(1, "2001:db8::2", "2001:db8::2", 64);
        b.source_flags.home = true;
        let (ord, rule, detail) = decisive_rule(&a, &b);
        assert_eq!((ord, rule), (Ordering::Greater, 4), "{detail}");
    }

    #[test]
    fn rule_5_matching_label() {
        // ULA destination from a global source: labels 6 vs 1.
        let a = reachable(0, "fd00::1", "2001:db8::2", 64);
        let b = reachable(1, "2001:db8::1", "2001:db8::2", 64);
        let (ord, rule, detail) = decisive_rule(&a, &b);
        assert_eq!((ord, rule), (Ordering::Greater, 5), "{detail}");
        assert!(detail.contains("fd00::1 label 6 (fc00::/7)"), "{detail}");
    }

    #[test]
    fn rule_6_ipv6_before_ipv4_by_default() {
        let a = reachable(0, "10.0.0.1", "10.0.0.2", 24);
        let b = reachable(1, "2001:db8::1", "2001:db8::2", 64);
        let (ord, rule, detail) = decisive_rule(&a, &b);
        assert_eq!((ord, rule), (Ordering::Greater, 6));
        assert_eq!(
            detail,
            "precedence of 10.0.0.1 10 (::ffff:0.0.0.0/96) < precedence of 2001:db8::1 40 (::/0)"
        );
        // Rule 6 applies even when neither destination is usable.
        let (ord, rule, _) =
            decisive_rule(&unreachable(0, "10.0.0.1"), &unreachable(1, "2001:db8::1"));
        assert_eq!((ord, rule), (Ordering::Greater, 6));
    }

    #[test]
    fn rule_6_prefer_ipv4_with_gai_conf() {
        let conf = GaiConf::parse("precedence ::ffff:0:0/96 100\n").unwrap();
        let a = reachable(0, "2001:db8::1", "2001:db8::2", 64);
        let b = reachable(1, "10.0.0.1", "10.0.0.2", 24);
        assert_eq!(
            sorted(&[a, b], &conf),
            vec![ip("10.0.0.1"), ip("2001:db8::1")]
        );
    }

    #[test]
    fn rule_7_tunnel_and_unknown_interface() {
        let mut a = reachable(0, "2001:db8::1", "2001:db8::1", 64);
        a.source_interface = Some(SourceInterface {
            index: 5,
            native: false,
        });
        let b = reachable(1, "2001:db8:1::1", "2001:db8:1::1", 64);
        let (ord, rule, detail) = decisive_rule(&a, &b);
        assert_eq!((ord, rule), (Ordering::Greater, 7), "{detail}");
        // An unknown index counts as not native.
        a.source_interface = None;
        assert_eq!(decisive_rule(&a, &b).1, 7);
        // Same interface: rule 7 is skipped.
        a.source_interface = b.source_interface;
        assert_ne!(decisive_rule(&a, &b).1, 7);
    }

    #[test]
    fn rule_8_smaller_scope() {
        // Both IPv4, both matching scope with their sources; 127/8 has scope 2.
        let a = reachable(0, "10.0.0.1", "10.0.0.1", 24);
        let b = reachable(1, "127.0.0.1", "127.0.0.1", 8);
        let (ord, rule, detail) = decisive_rule(&a, &b);
        assert_eq!((ord, rule), (Ordering::Greater, 8), "{detail}");
        assert_eq!(detail, "scope of 10.0.0.1 14 > scope of 127.0.0.1 2");
    }

    #[test]
    fn rule_9_ipv4_only_inside_the_subnet() {
        // 10.1.0.9 shares 20 leading bits with 10.1.15.1, but is outside its /24.
        let a = reachable(0, "10.1.0.9", "10.1.15.1", 24);
        let b = reachable(1, "10.2.0.1", "10.2.0.2", 24);
        let (ord, rule, detail) = decisive_rule(&a, &b);
        assert_eq!((ord, rule), (Ordering::Greater, 9), "{detail}");
        assert!(
            detail.contains("10.1.0.9 counts 0 bits (outside its source 10.1.15.1's /24 subnet)"),
            "{detail}"
        );
        assert!(detail.contains("10.2.0.1 shares 30 bits"), "{detail}");
    }

    #[test]
    fn rule_9_ipv4_without_prefix_length_only_exact_match_counts() {
        let mut a = reachable(0, "10.0.0.9", "10.0.0.1", 24);
        let mut b = reachable(1, "10.0.0.1", "10.0.0.1", 24);
        a.source_prefix_len = None;
        b.source_prefix_len = None;
        let (ord, rule, detail) = decisive_rule(&a, &b);
        assert_eq!((ord, rule), (Ordering::Greater, 9), "{detail}");
        assert!(detail.contains("not in glibc's address list"), "{detail}");
    }

    #[test]
    fn rule_9_ipv6_has_no_cap() {
        let a = reachable(0, "2001:db8:0:1::1", "2001:db8::5", 64);
        let b = reachable(1, "2001:db8::9", "2001:db8::5", 64);
        let (ord, rule, detail) = decisive_rule(&a, &b);
        assert_eq!((ord, rule), (Ordering::Greater, 9));
        assert!(
            detail.contains("2001:db8:0:1::1 shares 63 bits")
                && detail.contains("2001:db8::9 shares 124 bits"),
            "{detail}"
        );
        // Agrees with the whole-prefix comparison when the difference is in a later word.
        assert_eq!(
            v6_rule9(
                (ip6("2001:db8::1"), ip6("2001:db8::1")),
                (ip6("2001:db8::2"), ip6("2001:db8::1"))
            ),
            Ordering::Less
        );
    }

    fn ip6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn rule_10_keeps_order() {
        let a = reachable(3, "10.0.0.1", "10.0.0.1", 24);
        let b = reachable(1, "10.0.0.2", "10.0.0.2", 24);
        let (ord, rule, _) = decisive_rule(&a, &b);
        assert_eq!((ord, rule), (Ordering::Greater, 10));
    }

    /// Seed 000: eth0 172.18.45.6/27 (primary) and the alias 172.18.45.20/27 (secondary), the
    /// node name listing both. Both are local, but the kernel's local route for a secondary
    /// address carries the primary as `src`, so the source of both destinations is the primary.
    /// Rule 9: the primary shares 32 bits with itself, the alias 27: the primary wins whatever
    /// the hosts order. (Checked against real glibc in nodeip-trace-tests.)
    #[test]
    fn seed_000_primary_wins_rule_9_against_its_alias() {
        let conf = GaiConf::default();
        for alias_first in [false, true] {
            let (ia, ip_) = if alias_first { (0, 1) } else { (1, 0) };
            let mut list = vec![
                reachable(ip_, "172.18.45.6", "172.18.45.6", 27),
                reachable(ia, "172.18.45.20", "172.18.45.6", 27),
            ];
            list.sort_by_key(|c| c.original_index);
            let out = sort(&list, &conf);
            assert_eq!(list[out.order[0]].dest, ip("172.18.45.6"));
            let d = &out.decisions[0];
            assert_eq!(
                (d.rule, d.rule_name, d.agrees),
                (9, "use longest matching prefix", true)
            );
            assert_eq!(
                d.detail,
                "172.18.45.6 shares 32 bits with its source 172.18.45.6 (same /27 subnet); 172.18.45.20 shares 27 bits with its source 172.18.45.6 (same /27 subnet)"
            );
        }
    }

    /// The incident's outcome: when the kernel holds .20 as the primary (added first, or the
    /// first address was re-added), every local destination's source is .20 and rule 9 puts
    /// .20 first, even though the hosts file lists .6 first.
    #[test]
    fn seed_000_alias_first_when_it_is_the_kernels_primary() {
        let conf = GaiConf::default();
        let list = [
            reachable(0, "172.18.45.6", "172.18.45.20", 27),
            reachable(1, "172.18.45.20", "172.18.45.20", 27),
        ];
        let out = sort(&list, &conf);
        assert_eq!(out.order, vec![1, 0]);
        assert_eq!(
            out.decisions[0].detail,
            "172.18.45.20 shares 32 bits with its source 172.18.45.20 (same /27 subnet); 172.18.45.6 shares 27 bits with its source 172.18.45.20 (same /27 subnet)"
        );
    }

    /// On a host without any IPv6 address but ::1, glibc drops its address dump: no prefix
    /// lengths, and rule 9 for IPv4 scores only a destination equal to its source.
    #[test]
    fn seed_000_without_ipv6_only_exact_matches_score() {
        let conf = GaiConf::default();
        let mut a = reachable(0, "172.18.45.6", "172.18.45.6", 27);
        let mut b = reachable(1, "172.18.45.20", "172.18.45.6", 27);
        for c in [&mut a, &mut b] {
            c.source_prefix_len = None;
            c.source_interface = None;
        }
        let (ord, rule, detail) = explain_pair(&b, &a, &conf);
        assert_eq!((ord, rule), (Ordering::Greater, 9), "{detail}");
        assert!(detail.starts_with("172.18.45.20 counts 0 bits"), "{detail}");
    }

    #[test]
    fn socket_type_copies_stay_together() {
        let conf = GaiConf::default();
        let mut list = Vec::new();
        for (i, (d, s)) in [
            ("10.0.0.9", "10.0.0.1"),
            ("2001:db8::1", "2001:db8::1"),
            ("10.0.0.1", "10.0.0.1"),
        ]
        .iter()
        .enumerate()
        {
            for k in 0..3 {
                list.push(reachable(
                    i * 3 + k,
                    d,
                    s,
                    if d.contains(':') { 64 } else { 24 },
                ));
            }
        }
        let got = sorted(&list, &conf);
        let mut distinct = got.clone();
        distinct.dedup();
        assert_eq!(
            distinct,
            vec![ip("2001:db8::1"), ip("10.0.0.1"), ip("10.0.0.9")]
        );
        assert_eq!(got.len(), 9);
    }

    /// With IPv4 and IPv6 at equal precedence the comparison is not transitive (rule 9 only
    /// compares within a family); the merge sort's exact steps decide.
    #[test]
    fn intransitive_comparison_follows_merge_sort() {
        let conf = GaiConf::parse("precedence ::ffff:0:0/96 40\n").unwrap();
        let a = reachable(0, "10.0.0.200", "10.0.0.1", 24); // 24 bits
        let c = reachable(1, "2001:db8::1", "2001:db8::1", 64);
        let b = reachable(2, "10.0.0.2", "10.0.0.1", 24); // 30 bits
                                                          // a<c (rule 10), c<b (rule 10), b<a (rule 9): a cycle.
        assert_eq!(explain_pair(&a, &c, &conf).1, 10);
        assert_eq!(explain_pair(&b, &a, &conf).1, 9);
        // glibc's merge sort: [a] | [c, b] (c before b by rule 10), then a before c by rule 10.
        let out = sort(&[a, c, b], &conf);
        assert_eq!(out.order, vec![0, 1, 2]);
        assert!(out.decisions.iter().all(|d| d.agrees));
    }

    #[test]
    fn explain_order_collapses_copies_and_reports_unknown() {
        let conf = GaiConf::default();
        let list = [
            reachable(0, "10.0.0.1", "10.0.0.1", 24),
            reachable(1, "2001:db8::1", "2001:db8::1", 64),
        ];
        let d = explain_order(
            &list,
            &[ip("2001:db8::1"), ip("2001:db8::1"), ip("10.0.0.1")],
            &conf,
        )
        .unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].rule, d[0].agrees), (6, true));
        let d = explain_order(&list, &[ip("10.0.0.1"), ip("2001:db8::1")], &conf).unwrap();
        assert!(!d[0].agrees);
        assert_eq!(
            explain_order(&list, &[ip("10.9.9.9")], &conf),
            Err(OrderReplayError::UnknownAddress(ip("10.9.9.9")))
        );
    }

    #[test]
    fn msort_matches_glibc_split() {
        // 5 elements: left half 2, right half 3 — a stable sort for a total order.
        let keys = [3, 1, 3, 0, 1];
        let mut items: Vec<usize> = (0..5).collect();
        glibc_msort(&mut items, &mut |x, y| keys[x].cmp(&keys[y]));
        assert_eq!(items, vec![3, 1, 4, 0, 2]);
    }
}
