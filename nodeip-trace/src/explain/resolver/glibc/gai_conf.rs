//! `/etc/gai.conf`: the label, precedence and IPv4 scope tables that glibc's `getaddrinfo` sorts
//! by, read exactly the way glibc 2.36 reads them (`gaiconf_init` in
//! `sysdeps/posix/getaddrinfo.c`).
//!
//! glibc's semantics, which are not the obvious ones:
//! - A table named at least once in the file **replaces** the built-in one; it is not merged. If the
//!   file has `label` lines but no `label ::/0 …` line, glibc appends `::/0 → 1` (labels),
//!   `::/0 → 40` (precedence) or `0.0.0.0/0 → 14` (scopev4), so the table always matches.
//! - Entries are ordered by prefix length, longest first, with a stable sort: of two entries with
//!   the same length, the one earlier in the file wins.
//! - glibc **silently ignores** a line it cannot read (bad address, bad number, unknown keyword) and
//!   reads some odd lines in a surprising way: a missing value is read as `0`
//!   (`precedence ::1/128` gives precedence 0), an empty length after `/` as `/0`, and only the
//!   first two values count. [`GaiConf::parse_like_glibc`] builds the tables glibc builds and lists
//!   every such line; [`GaiConf::parse`] refuses them.
//! - A prefix without `/length` makes glibc 2.36 test an uninitialised pointer (`endp` in
//!   `add_prefixlist` and in the `scopev4` branch), so what happens is up to the stack. On
//!   Debian 12 x86-64 the line is ignored (checked against the real library), and that is what
//!   [`GaiConf::parse_like_glibc`] does; always write the length.
//! - `reload yes` makes glibc re-read the file when it changes; anything but `yes` means no.
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use thiserror::Error;

/// Largest value glibc accepts for a label, precedence or scope (`INT_MAX`).
const MAX_VALUE: u64 = i32::MAX as u64;

/// One row of the label or precedence table: IPv6 prefix → value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefixEntry {
    /// The prefix (IPv4 addresses are matched as `::ffff:a.b.c.d`).
    pub prefix: Ipv6Addr,
    /// Prefix length, 0..=128.
    pub bits: u8,
    /// The label or precedence.
    pub value: u32,
}

impl PrefixEntry {
    const fn new(prefix: Ipv6Addr, bits: u8, value: u32) -> Self {
        PrefixEntry {
            prefix,
            bits,
            value,
        }
    }

    /// Whether `addr` lies in this prefix (glibc's `match_prefix`).
    pub fn matches(&self, addr: &Ipv6Addr) -> bool {
        prefix_matches(self.prefix.octets(), addr.octets(), self.bits)
    }
}

impl fmt::Display for PrefixEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.prefix, self.bits)
    }
}

/// One row of the IPv4 scope table (`scopev4`): IPv4 prefix → scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScopeEntry {
    /// The network (already masked, as glibc stores it).
    pub network: Ipv4Addr,
    /// Prefix length, 0..=32.
    pub bits: u8,
    /// The scope (2 = link-local, 5 = site-local, 14 = global).
    pub scope: u32,
}

impl ScopeEntry {
    const fn new(network: Ipv4Addr, bits: u8, scope: u32) -> Self {
        ScopeEntry {
            network,
            bits,
            scope,
        }
    }

    fn netmask(&self) -> u32 {
        v4_netmask(self.bits)
    }

    /// Whether `addr` lies in this prefix.
    pub fn matches(&self, addr: Ipv4Addr) -> bool {
        u32::from(addr) & self.netmask() == u32::from(self.network)
    }
}

impl fmt::Display for ScopeEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.bits)
    }
}

/// The tables glibc sorts getaddrinfo results by.
///
/// Each table is kept in the order glibc searches it (longest prefix first); the first matching
/// row decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GaiConf {
    /// Label table (RFC 6724 rule 5).
    pub labels: Vec<PrefixEntry>,
    /// Precedence table (rule 6).
    pub precedences: Vec<PrefixEntry>,
    /// IPv4 scope table (`scopev4`; rules 2 and 8).
    pub scopes_v4: Vec<ScopeEntry>,
    /// `reload yes`: glibc re-reads the file whenever it changed.
    pub reload: bool,
}

impl Default for GaiConf {
    /// glibc 2.36's built-in tables (`default_labels`, `default_precedence`, `default_scopes`).
    ///
    /// These are RFC 3484's tables plus site-local, ULA and Teredo labels, not RFC 6724's: IPv4
    /// has precedence 10 against 40 for IPv6.
    fn default() -> Self {
        GaiConf {
            labels: vec![
                PrefixEntry::new(Ipv6Addr::LOCALHOST, 128, 0),
                PrefixEntry::new(v6([0x2002, 0, 0, 0, 0, 0, 0, 0]), 16, 2),
                PrefixEntry::new(Ipv6Addr::UNSPECIFIED, 96, 3),
                PrefixEntry::new(v6([0, 0, 0, 0, 0, 0xffff, 0, 0]), 96, 4),
                PrefixEntry::new(v6([0xfec0, 0, 0, 0, 0, 0, 0, 0]), 10, 5),
                PrefixEntry::new(v6([0xfc00, 0, 0, 0, 0, 0, 0, 0]), 7, 6),
                PrefixEntry::new(v6([0x2001, 0, 0, 0, 0, 0, 0, 0]), 32, 7),
                PrefixEntry::new(Ipv6Addr::UNSPECIFIED, 0, 1),
            ],
            precedences: vec![
                PrefixEntry::new(Ipv6Addr::LOCALHOST, 128, 50),
                PrefixEntry::new(v6([0x2002, 0, 0, 0, 0, 0, 0, 0]), 16, 30),
                PrefixEntry::new(Ipv6Addr::UNSPECIFIED, 96, 20),
                PrefixEntry::new(v6([0, 0, 0, 0, 0, 0xffff, 0, 0]), 96, 10),
                PrefixEntry::new(Ipv6Addr::UNSPECIFIED, 0, 40),
            ],
            scopes_v4: vec![
                ScopeEntry::new(Ipv4Addr::new(169, 254, 0, 0), 16, 2),
                ScopeEntry::new(Ipv4Addr::new(127, 0, 0, 0), 8, 2),
                ScopeEntry::new(Ipv4Addr::UNSPECIFIED, 0, 14),
            ],
            reload: false,
        }
    }
}

fn v6(segments: [u16; 8]) -> Ipv6Addr {
    let [a, b, c, d, e, f, g, h] = segments;
    Ipv6Addr::new(a, b, c, d, e, f, g, h)
}

/// glibc's `match_prefix` comparison: whole bytes, then the top bits of the next byte.
fn prefix_matches(prefix: [u8; 16], addr: [u8; 16], bits: u8) -> bool {
    let whole = usize::from(bits / 8);
    if prefix[..whole] != addr[..whole] {
        return false;
    }
    let rest = bits % 8;
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    prefix[whole] & mask == addr[whole] & mask
}

fn v4_netmask(bits: u8) -> u32 {
    if bits == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(bits))
    }
}

/// Which table a line adds to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// `label`
    Label,
    /// `precedence`
    Precedence,
    /// `scopev4`
    ScopeV4,
}

impl Table {
    fn keyword(self) -> &'static str {
        match self {
            Table::Label => "label",
            Table::Precedence => "precedence",
            Table::ScopeV4 => "scopev4",
        }
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.keyword())
    }
}

/// A gai.conf line that glibc ignores, or reads differently from what it seems to say.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("gai.conf line {line}: {kind}")]
pub struct GaiConfError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong and what to do.
    pub kind: GaiConfErrorKind,
}

/// What is wrong with one gai.conf line.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum GaiConfErrorKind {
    /// The first word is not `label`, `precedence`, `scopev4` or `reload`.
    #[error("unknown keyword `{0}`: glibc ignores this line; use label, precedence, scopev4 or reload (keywords are case-sensitive)")]
    UnknownKeyword(String),
    /// The prefix is not an address glibc can read.
    #[error(
        "`{text}` is not an {expected} prefix: glibc ignores this line; write it like {example}"
    )]
    BadPrefix {
        /// The prefix as written (without `/len`).
        text: String,
        /// What was expected ("IPv6", "IPv4 or ::ffff:-mapped").
        expected: &'static str,
        /// An example of a valid prefix.
        example: &'static str,
    },
    /// The prefix length is not a number in range.
    #[error("prefix length `{text}` is not a number in {min}..={max}: glibc ignores this line")]
    BadPrefixLength {
        /// The length as written.
        text: String,
        /// Smallest accepted.
        min: u8,
        /// Largest accepted.
        max: u8,
    },
    /// A prefix without `/length`: undefined in glibc 2.36, ignored in practice.
    #[error("`{0}` has no /length: glibc 2.36 then reads an uninitialised pointer and in practice ignores the line; write the length, e.g. `{0}/{1}`")]
    MissingPrefixLength(String, u8),
    /// A `/` with nothing after it: glibc reads it as `/0`.
    #[error("empty prefix length after `/`: glibc reads it as /0 (matching every address); write the length or drop the `/`")]
    EmptyPrefixLength,
    /// The value is not a number in 0..=2147483647.
    #[error("value `{0}` is not a number in 0..=2147483647: glibc ignores this line")]
    BadValue(String),
    /// No value after the prefix: glibc reads it as 0.
    #[error("{0} line without a value: glibc reads the missing value as 0; write the value after the prefix")]
    MissingValue(Table),
    /// Words after the second value.
    #[error("`{0}` after the value is ignored by glibc; move it into a `#` comment")]
    TrailingWords(String),
    /// `reload` with something other than `yes`/`no`.
    #[error("`reload {0}` means `reload no` to glibc; write yes or no")]
    BadReload(String),
}

/// One finished line: what it adds, and what is odd about it.
struct LineOutcome {
    entry: Option<ParsedEntry>,
    problems: Vec<GaiConfErrorKind>,
}

enum ParsedEntry {
    Prefix(Table, PrefixEntry),
    Scope(ScopeEntry),
    Reload(bool),
}

/// C's `strtoul(s, &end, 10)` as glibc relies on it: optional sign, decimal digits; no digits
/// means value 0 with nothing consumed. Returns `None` on overflow (`ERANGE`).
fn c_strtoul(s: &str) -> Option<(u64, &str)> {
    let (negative, unsigned) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let digits = unsigned.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Some((0, s));
    }
    let mut value: u64 = 0;
    for d in unsigned[..digits].bytes() {
        value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    let value = if negative {
        value.wrapping_neg()
    } else {
        value
    };
    Some((value, &unsigned[digits..]))
}

/// A whole-word number in `min..=max` as glibc reads it, or `None` if glibc rejects it.
fn c_number(s: &str, max: u64) -> Option<u64> {
    match c_strtoul(s) {
        Some((v, "")) if v <= max => Some(v),
        _ => None,
    }
}

fn parse_prefix_entry(
    table: Table,
    val1: &str,
    val2: &str,
    problems: &mut Vec<GaiConfErrorKind>,
) -> Option<PrefixEntry> {
    let (addr_text, len_text) = match val1.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (val1, None),
    };
    let Ok(prefix) = addr_text.parse::<Ipv6Addr>() else {
        problems.push(GaiConfErrorKind::BadPrefix {
            text: addr_text.to_string(),
            expected: "IPv6",
            example: "::ffff:0:0/96",
        });
        return None;
    };
    let bits = match len_text {
        None => {
            problems.push(GaiConfErrorKind::MissingPrefixLength(
                addr_text.to_string(),
                128,
            ));
            return None;
        }
        Some(text) => {
            if text.is_empty() {
                problems.push(GaiConfErrorKind::EmptyPrefixLength);
            }
            let Some(bits) = c_number(text, 128) else {
                problems.push(GaiConfErrorKind::BadPrefixLength {
                    text: text.to_string(),
                    min: 0,
                    max: 128,
                });
                return None;
            };
            bits as u8
        }
    };
    let value = parse_value(table, val2, problems)?;
    Some(PrefixEntry::new(prefix, bits, value))
}

fn parse_value(table: Table, val2: &str, problems: &mut Vec<GaiConfErrorKind>) -> Option<u32> {
    if val2.is_empty() {
        problems.push(GaiConfErrorKind::MissingValue(table));
    }
    match c_number(val2, MAX_VALUE) {
        Some(v) => Some(v as u32),
        None => {
            problems.push(GaiConfErrorKind::BadValue(val2.to_string()));
            None
        }
    }
}

/// `scopev4` takes `a.b.c.d[/0..32]` or `::ffff:a.b.c.d[/96..128]`.
fn parse_scope_entry(
    val1: &str,
    val2: &str,
    problems: &mut Vec<GaiConfErrorKind>,
) -> Option<ScopeEntry> {
    let (addr_text, len_text) = match val1.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (val1, None),
    };
    let (addr, offset, min, max) = if let Ok(v6addr) = addr_text.parse::<Ipv6Addr>() {
        match v6addr.to_ipv4_mapped() {
            Some(v4) => (v4, 96u8, 96u8, 128u8),
            None => {
                problems.push(bad_scope_prefix(addr_text));
                return None;
            }
        }
    } else if let Ok(v4) = addr_text.parse::<Ipv4Addr>() {
        (v4, 0, 0, 32)
    } else {
        problems.push(bad_scope_prefix(addr_text));
        return None;
    };
    let bits = match len_text {
        None => {
            problems.push(GaiConfErrorKind::MissingPrefixLength(
                addr_text.to_string(),
                max,
            ));
            return None;
        }
        Some(text) => {
            if text.is_empty() {
                problems.push(GaiConfErrorKind::EmptyPrefixLength);
            }
            match c_number(text, u64::from(max)) {
                Some(b) if b >= u64::from(min) => b as u8,
                _ => {
                    problems.push(GaiConfErrorKind::BadPrefixLength {
                        text: text.to_string(),
                        min,
                        max,
                    });
                    return None;
                }
            }
        }
    };
    let scope = parse_value(Table::ScopeV4, val2, problems)?;
    let v4_bits = bits - offset;
    let network = Ipv4Addr::from(u32::from(addr) & v4_netmask(v4_bits));
    Some(ScopeEntry::new(network, v4_bits, scope))
}

fn bad_scope_prefix(text: &str) -> GaiConfErrorKind {
    GaiConfErrorKind::BadPrefix {
        text: text.to_string(),
        expected: "IPv4 or ::ffff:-mapped",
        example: "169.254.0.0/16 or ::ffff:169.254.0.0/112",
    }
}

/// Read one line the way `gaiconf_init` does: `#` starts a comment; a keyword and up to two
/// values separated by whitespace; the rest ignored.
fn parse_line(raw: &str) -> LineOutcome {
    let text = raw.split('#').next().unwrap_or("");
    let mut words = text.split_ascii_whitespace();
    let mut problems = Vec::new();
    let Some(cmd) = words.next() else {
        return LineOutcome {
            entry: None,
            problems,
        };
    };
    let val1 = words.next().unwrap_or("");
    let val2 = words.next().unwrap_or("");
    let rest: Vec<&str> = words.collect();
    if !rest.is_empty() {
        problems.push(GaiConfErrorKind::TrailingWords(rest.join(" ")));
    }
    let entry = match cmd {
        "label" => parse_prefix_entry(Table::Label, val1, val2, &mut problems)
            .map(|e| ParsedEntry::Prefix(Table::Label, e)),
        "precedence" => parse_prefix_entry(Table::Precedence, val1, val2, &mut problems)
            .map(|e| ParsedEntry::Prefix(Table::Precedence, e)),
        "scopev4" => parse_scope_entry(val1, val2, &mut problems).map(ParsedEntry::Scope),
        "reload" => {
            if val1 != "yes" && val1 != "no" {
                problems.push(GaiConfErrorKind::BadReload(val1.to_string()));
            }
            if !val2.is_empty() {
                problems.push(GaiConfErrorKind::TrailingWords(val2.to_string()));
            }
            Some(ParsedEntry::Reload(val1 == "yes"))
        }
        other => {
            problems.push(GaiConfErrorKind::UnknownKeyword(other.to_string()));
            None
        }
    };
    LineOutcome { entry, problems }
}

/// glibc's finishing step for one table: keep file order, add the catch-all row if no row has
/// length 0, then sort stably by prefix length, longest first.
fn finish<T: Copy>(rows: Vec<T>, catch_all: T, bits: impl Fn(&T) -> u8) -> Vec<T> {
    let mut rows = rows;
    if !rows.iter().any(|r| bits(r) == 0) {
        rows.push(catch_all);
    }
    rows.sort_by_key(|r| std::cmp::Reverse(bits(r)));
    rows
}

impl GaiConf {
    /// Parse gai.conf text, refusing any line glibc would ignore or read in a surprising way.
    ///
    /// Use [`GaiConf::parse_like_glibc`] to get the tables glibc really uses from a file that
    /// has such lines.
    pub fn parse(text: &str) -> Result<GaiConf, GaiConfError> {
        let (conf, mut problems) = GaiConf::parse_like_glibc(text);
        if problems.is_empty() {
            Ok(conf)
        } else {
            Err(problems.remove(0))
        }
    }

    /// Build the tables exactly as glibc 2.36 would from this text, and list every line glibc
    /// ignored or read differently from what it seems to say (in line order).
    pub fn parse_like_glibc(text: &str) -> (GaiConf, Vec<GaiConfError>) {
        let mut labels = Vec::new();
        let mut precedences = Vec::new();
        let mut scopes = Vec::new();
        let mut reload = false;
        let mut problems = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let outcome = parse_line(raw);
            problems.extend(outcome.problems.into_iter().map(|kind| GaiConfError {
                line: index + 1,
                kind,
            }));
            match outcome.entry {
                Some(ParsedEntry::Prefix(Table::Label, e)) => labels.push(e),
                Some(ParsedEntry::Prefix(_, e)) => precedences.push(e),
                Some(ParsedEntry::Scope(e)) => scopes.push(e),
                Some(ParsedEntry::Reload(r)) => reload = r,
                None => {}
            }
        }
        let defaults = GaiConf::default();
        let conf = GaiConf {
            labels: if labels.is_empty() {
                defaults.labels
            } else {
                finish(labels, PrefixEntry::new(Ipv6Addr::UNSPECIFIED, 0, 1), |e| {
                    e.bits
                })
            },
            precedences: if precedences.is_empty() {
                defaults.precedences
            } else {
                finish(
                    precedences,
                    PrefixEntry::new(Ipv6Addr::UNSPECIFIED, 0, 40),
                    |e| e.bits,
                )
            },
            scopes_v4: if scopes.is_empty() {
                defaults.scopes_v4
            } else {
                finish(scopes, ScopeEntry::new(Ipv4Addr::UNSPECIFIED, 0, 14), |e| {
                    e.bits
                })
            },
            reload,
        };
        (conf, problems)
    }

    /// The label row that matches `addr` (IPv4 as `::ffff:a.b.c.d`), if any.
    pub fn label_of(&self, addr: &Ipv6Addr) -> Option<&PrefixEntry> {
        self.labels.iter().find(|e| e.matches(addr))
    }

    /// The precedence row that matches `addr`, if any.
    pub fn precedence_of(&self, addr: &Ipv6Addr) -> Option<&PrefixEntry> {
        self.precedences.iter().find(|e| e.matches(addr))
    }

    /// The scopev4 row that matches `addr`, if any.
    pub fn scope_v4_of(&self, addr: Ipv4Addr) -> Option<&ScopeEntry> {
        self.scopes_v4.iter().find(|e| e.matches(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn default_tables_match_glibc() {
        let conf = GaiConf::default();
        assert_eq!(
            conf.precedence_of(&addr("::ffff:10.0.0.1")).unwrap().value,
            10
        );
        assert_eq!(conf.precedence_of(&addr("2001:db8::1")).unwrap().value, 40);
        assert_eq!(conf.precedence_of(&addr("::1")).unwrap().value, 50);
        assert_eq!(conf.precedence_of(&addr("2002::1")).unwrap().value, 30);
        assert_eq!(conf.label_of(&addr("fd00::1")).unwrap().value, 6);
        assert_eq!(conf.label_of(&addr("fec0::1")).unwrap().value, 5);
        assert_eq!(conf.label_of(&addr("2001:0:1::1")).unwrap().value, 7);
        assert_eq!(conf.label_of(&addr("2001:db8::1")).unwrap().value, 1);
        assert_eq!(
            conf.scope_v4_of(Ipv4Addr::new(169, 254, 1, 1))
                .unwrap()
                .scope,
            2
        );
        assert_eq!(
            conf.scope_v4_of(Ipv4Addr::new(127, 0, 0, 5)).unwrap().scope,
            2
        );
        assert_eq!(
            conf.scope_v4_of(Ipv4Addr::new(10, 0, 0, 5)).unwrap().scope,
            14
        );
    }

    #[test]
    fn debian_example_file_is_all_comments() {
        let text = "# Configuration for getaddrinfo(3).\n#\n#label ::1/128 0\n#precedence ::ffff:0:0/96 100\n\n";
        assert_eq!(GaiConf::parse(text).unwrap(), GaiConf::default());
    }

    #[test]
    fn one_precedence_line_replaces_the_whole_table() {
        let conf = GaiConf::parse("precedence ::ffff:0:0/96 100\n").unwrap();
        assert_eq!(
            conf.precedences,
            vec![
                PrefixEntry::new(addr("::ffff:0:0"), 96, 100),
                PrefixEntry::new(Ipv6Addr::UNSPECIFIED, 0, 40),
            ]
        );
        // ::1 is no longer special: it falls through to the added ::/0 row.
        assert_eq!(conf.precedence_of(&Ipv6Addr::LOCALHOST).unwrap().value, 40);
        assert_eq!(conf.labels, GaiConf::default().labels);
    }

    #[test]
    fn rows_sorted_longest_first_and_stable() {
        let conf = GaiConf::parse(
            "label ::/0 9\nlabel 2001:db8::/32 3 # doc\n  label 2001:db8::/32 4\nlabel ::1/128 1\n",
        )
        .unwrap();
        let rows: Vec<(u8, u32)> = conf.labels.iter().map(|e| (e.bits, e.value)).collect();
        assert_eq!(rows, vec![(128, 1), (32, 3), (32, 4), (0, 9)]);
        assert_eq!(conf.label_of(&addr("2001:db8::5")).unwrap().value, 3);
    }

    #[test]
    fn scopev4_both_notations() {
        let conf =
            GaiConf::parse("scopev4 ::ffff:169.254.0.0/112 2\nscopev4 10.1.2.3/8 5\nreload yes\n")
                .unwrap();
        assert_eq!(
            conf.scopes_v4,
            vec![
                ScopeEntry::new(Ipv4Addr::new(169, 254, 0, 0), 16, 2),
                ScopeEntry::new(Ipv4Addr::new(10, 0, 0, 0), 8, 5),
                ScopeEntry::new(Ipv4Addr::UNSPECIFIED, 0, 14),
            ]
        );
        assert!(conf.reload);
        // 127/8 lost its default scope 2: the table was replaced.
        assert_eq!(
            conf.scope_v4_of(Ipv4Addr::new(127, 0, 0, 1)).unwrap().scope,
            14
        );
    }

    #[test]
    fn prefix_without_length_is_ignored_like_glibc_on_debian() {
        let (conf, problems) = GaiConf::parse_like_glibc(
            "precedence 2001:db8::1 200\nscopev4 192.0.2.1 3\nprecedence ::/0 40\n",
        );
        assert_eq!(
            conf.precedences,
            vec![PrefixEntry::new(Ipv6Addr::UNSPECIFIED, 0, 40)]
        );
        assert_eq!(conf.scopes_v4, GaiConf::default().scopes_v4);
        assert_eq!(
            problems[0].kind,
            GaiConfErrorKind::MissingPrefixLength("2001:db8::1".into(), 128)
        );
        assert_eq!(
            problems[1].kind,
            GaiConfErrorKind::MissingPrefixLength("192.0.2.1".into(), 32)
        );
        assert!(
            problems[0].to_string().contains("e.g. `2001:db8::1/128`"),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn errors_name_the_line() {
        let err = GaiConf::parse("# ok\nlabel ::1/128 0\nprecedense ::/0 1\n").unwrap_err();
        assert_eq!(err.line, 3);
        assert_eq!(
            err.kind,
            GaiConfErrorKind::UnknownKeyword("precedense".into())
        );
        assert!(err
            .to_string()
            .starts_with("gai.conf line 3: unknown keyword `precedense`"));

        let err = GaiConf::parse("label 10.0.0.0/8 3\n").unwrap_err();
        assert!(
            matches!(err.kind, GaiConfErrorKind::BadPrefix { .. }),
            "{err}"
        );
        let err = GaiConf::parse("label ::/129 3\n").unwrap_err();
        assert!(
            matches!(err.kind, GaiConfErrorKind::BadPrefixLength { .. }),
            "{err}"
        );
        let err = GaiConf::parse("label ::/0 -1\n").unwrap_err();
        assert_eq!(err.kind, GaiConfErrorKind::BadValue("-1".into()));
        let err = GaiConf::parse("scopev4 ::ffff:10.0.0.0/90 3\n").unwrap_err();
        assert!(
            matches!(err.kind, GaiConfErrorKind::BadPrefixLength { min: 96, .. }),
            "{err}"
        );
        let err = GaiConf::parse("scopev4 2001:db8::/32 3\n").unwrap_err();
        assert!(
            matches!(err.kind, GaiConfErrorKind::BadPrefix { .. }),
            "{err}"
        );
        let err = GaiConf::parse("reload maybe\n").unwrap_err();
        assert_eq!(err.kind, GaiConfErrorKind::BadReload("maybe".into()));
        let err = GaiConf::parse("label ::/0 1 extra\n").unwrap_err();
        assert_eq!(err.kind, GaiConfErrorKind::TrailingWords("extra".into()));
    }

    #[test]
    fn glibc_reads_odd_lines_its_own_way() {
        let text = "precedence ::1/128\nlabel ::/ 5\nlabel nonsense 3\nfoo bar baz\n";
        let (conf, problems) = GaiConf::parse_like_glibc(text);
        // Missing value → 0; empty length → /0; the bad lines are skipped.
        assert_eq!(
            conf.precedences[0],
            PrefixEntry::new(Ipv6Addr::LOCALHOST, 128, 0)
        );
        assert_eq!(
            conf.labels,
            vec![PrefixEntry::new(Ipv6Addr::UNSPECIFIED, 0, 5)]
        );
        let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, vec![1, 2, 3, 4]);
        assert_eq!(
            problems[0].kind,
            GaiConfErrorKind::MissingValue(Table::Precedence)
        );
    }

    #[test]
    fn strtoul_like_c() {
        assert_eq!(c_number("+5", 10), Some(5));
        assert_eq!(c_number("007", 10), Some(7));
        assert_eq!(c_number("", 10), Some(0));
        assert_eq!(c_number("0x10", 100), None);
        assert_eq!(c_number("99999999999999999999999", u64::MAX), None);
        assert_eq!(c_number("-0", 10), Some(0));
    }

    #[test]
    fn partial_byte_prefixes() {
        let ula = PrefixEntry::new(addr("fc00::"), 7, 6);
        assert!(ula.matches(&addr("fd12::1")));
        assert!(!ula.matches(&addr("fe80::1")));
        let site = PrefixEntry::new(addr("fec0::"), 10, 5);
        assert!(site.matches(&addr("feff::1")));
        assert!(!site.matches(&addr("fe80::1")));
    }
}
