//! A resolver call (getaddrinfo) as the trace saw it, the socket operations the resolver made
//! inside it to sort its answer, and the `why` of the order it returned: the resolver's own sort
//! replayed, with the rule that decided each adjacent pair.
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::ports::GaiConfText;

/// One candidate as glibc's sort saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateWhy {
    /// The destination address.
    pub address: String,
    /// The source the kernel chose (`getsockname`); null when `connect()` failed (unusable).
    pub source: Option<String>,
    /// The source's prefix length from glibc's address dump; null when no row matched.
    pub prefix_len: Option<u8>,
    /// The source's interface index from that row (rule 7), and whether it is native (not a
    /// tunnel); null when no row matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<(u32, bool)>,
}

/// Why one adjacent pair of the returned order is in that order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairWhy {
    /// The address that came first.
    pub first: String,
    /// The address right after it.
    pub second: String,
    /// RFC 6724 rule (1..=10) that decided.
    pub rule: u8,
    /// The rule's short name.
    pub rule_name: String,
    /// The numbers behind it.
    pub detail: String,
    /// False when the rule prefers `second` (see `explain::resolver::glibc::rfc6724::PairDecision::agrees`).
    pub agrees: bool,
}

/// The `why` of a getaddrinfo event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetaddrinfoWhy {
    /// The order before sorting (the resolver's order), from glibc's `connect()` calls.
    pub resolver_order: Vec<String>,
    /// The order glibc's rules give for these inputs.
    pub predicted: Vec<String>,
    /// `predicted` equals the returned order. False means a bug in nodeip-trace or a glibc
    /// whose sort it does not model.
    pub matches: bool,
    /// The rule deciding each adjacent pair of the returned order.
    pub pairs: Vec<PairWhy>,
    /// The candidates in resolver order.
    pub candidates: Vec<CandidateWhy>,
    /// What limits the explanation (e.g. no address dump seen), when anything does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A socket call glibc made inside getaddrinfo to sort its results (see `decode::addrinfo::decode_gai_socket`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GaiSocketOp {
    /// `connect` (true) or `getsockname` (false).
    pub connect: bool,
    /// The call's return value: 0, or -errno; `None` when it was seen before the kernel carried
    /// it out (a cgroup hook): then what follows on the socket says how it went.
    pub ret: Option<i32>,
    /// The socket: its descriptor (syscall hooks) or its cookie (cgroup hooks); the same
    /// socket has the same value within one call.
    pub socket: u64,
    /// The destination (connect) or the bound source (getsockname); `None` for `AF_UNSPEC`,
    /// other families or an unreadable address.
    pub addr: Option<IpAddr>,
}

impl GaiSocketOp {
    /// Whether the call is not known to have failed: it returned 0, or it was seen before the
    /// kernel carried it out.
    pub fn not_failed(&self) -> bool {
        self.ret.is_none_or(|ret| ret == 0)
    }
}

/// One `struct addrinfo` result entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddrinfoResult {
    /// The address, as text.
    pub address: String,
    /// `AF_INET` / `AF_INET6` / number.
    pub family: String,
    /// `SOCK_STREAM` / `SOCK_DGRAM` / `SOCK_RAW` / number.
    pub socktype: String,
    /// Protocol number (6 = TCP, 17 = UDP).
    pub protocol: u32,
    /// Port (host order).
    pub port: u16,
}

/// A completed getaddrinfo call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GetaddrinfoCall {
    /// `node` argument (null when NULL).
    pub node: Option<String>,
    /// `service` argument.
    pub service: Option<String>,
    /// `hints->ai_family` name (`AF_UNSPEC`, `AF_INET`, `AF_INET6`).
    pub family: String,
    /// `hints->ai_socktype` name.
    pub socktype: String,
    /// `hints->ai_flags` names (`AI_ADDRCONFIG`, ...).
    pub flags: Vec<String>,
    /// Return value name: `0` → `OK`, else `EAI_NONAME`, ...
    pub ret: String,
    /// Raw return value.
    pub ret_code: i32,
    /// Distinct addresses in the order first returned.
    pub addresses: Vec<String>,
    /// Every result entry in returned order.
    pub results: Vec<AddrinfoResult>,
    /// More results existed than were captured.
    pub results_truncated: bool,
    /// Entry time (same clock as `ts_ns`).
    pub start_ns: u64,
    /// Duration of the call.
    pub duration_ns: u64,
    /// How many of the events that follow this one happened on this thread during the call
    /// (the netlink dumps and route lookups libc made for it).
    #[serde(default)]
    pub during: u32,
    /// Which resolver made the call (absent: glibc).
    #[serde(default, skip_serializing_if = "ResolverKind::is_glibc")]
    pub resolver: ResolverKind,
    /// The runtime whose lookup this call was, when a runtime called the C library for it (a
    /// Go program's `net` through cgo); absent for a C program's own call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<ResolverCaller>,
    /// What the probe could not see of this call, when something (a Go version whose sort's
    /// sources nodeip-trace cannot read: the order is shown, not explained).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited: Option<String>,
    /// Why the order is what it is: glibc's RFC 6724 sort replayed on the inputs glibc had
    /// inside this call (absent when there was nothing to sort, or glibc did not sort).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<Box<GetaddrinfoWhy>>,
}

/// The resolver configuration a call's explanation uses, as the trace saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GaiConfSeen {
    /// `/etc/gai.conf` as the resolver itself read it during the trace (wins when present).
    pub read_by_resolver: Option<Vec<u8>>,
    /// The file as the live side read it when the call began (through `/proc/PID/root`).
    pub at_start: Option<GaiConfText>,
}

/// A sort's own inputs, as the resolver's sort function received them (Go's: its `addrs` and
/// `srcs` arguments): no replay of the sources is needed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SortInputs {
    /// The addresses in the resolver's order.
    pub order: Vec<IpAddr>,
    /// The source of each (`None`: none, the address is unusable).
    pub sources: Vec<Option<IpAddr>>,
}

/// Which resolver made a call: the libc whose `getaddrinfo` the probe hooked (the uprobe's attach
/// cookie says which), later Go's own resolver. Wording that names a resolver comes from here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolverKind {
    /// glibc's `getaddrinfo` (its `rfc3484_sort`, `/etc/gai.conf`).
    #[default]
    Glibc,
    /// musl's `getaddrinfo` (its 31-bit key sort; no gai.conf).
    Musl,
    /// Go's own resolver (`net`'s pure-Go lookups; its `addrselect.go` sort).
    Go,
    /// Go's own resolver answering a host lookup (`LookupHost`) from `/etc/hosts`: the file's
    /// order, which Go does not sort.
    GoHosts,
    /// Not told by the probe (kernels before 5.15 have no attach cookies).
    Unknown,
}

/// A runtime that called a C library's resolver for its own lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ResolverCaller {
    /// Go's `net` package through cgo (`GODEBUG=netdns=cgo`, or Go's own rules chose cgo).
    #[serde(rename = "go-cgo")]
    GoCgo,
}

impl GetaddrinfoCall {
    /// Whose lookup this was, as a path a person reads: `glibc`, `musl`, `go`,
    /// `go→cgo→glibc`.
    pub fn resolver_path(&self) -> String {
        match self.caller {
            Some(ResolverCaller::GoCgo) => format!("go→cgo→{}", self.resolver.name()),
            None => self.resolver.name().to_string(),
        }
    }
}

impl ResolverKind {
    /// The kind a getaddrinfo record's `resolver` field names (`nodeip_trace_common::RESOLVER_*`).
    pub fn from_record(code: u32) -> Self {
        match code & nodeip_trace_common::resolver::KIND_MASK {
            1 => ResolverKind::Glibc,
            2 => ResolverKind::Musl,
            _ => ResolverKind::Unknown,
        }
    }

    /// Whether this is glibc (not written in JSON, so recordings from before resolvers were told
    /// apart read back the same).
    pub fn is_glibc(&self) -> bool {
        *self == ResolverKind::Glibc
    }

    /// The resolver's name: "glibc".
    pub fn name(&self) -> &'static str {
        match self {
            ResolverKind::Glibc | ResolverKind::Unknown => "glibc",
            ResolverKind::Musl => "musl",
            ResolverKind::Go => "go",
            ResolverKind::GoHosts => "go LookupHost",
        }
    }

    /// The resolver's sort as a person names it: "glibc's RFC 6724 sort".
    pub fn sort_name(&self) -> &'static str {
        match self {
            ResolverKind::Glibc | ResolverKind::Unknown => "glibc's RFC 6724 sort",
            ResolverKind::Musl => "musl's RFC 6724 sort",
            ResolverKind::Go => "Go's RFC 6724 sort",
            ResolverKind::GoHosts => "Go's LookupHost (the /etc/hosts order, unsorted)",
        }
    }

    /// How to make this resolver prefer another address (for diagnoses).
    pub fn reorder_remedy(&self) -> &'static str {
        match self {
            ResolverKind::Glibc | ResolverKind::Unknown => {
                "list only the wanted address for the name, or give it a higher precedence in /etc/gai.conf"
            }
            ResolverKind::Musl => {
                "list only the wanted address for the name (musl reads no /etc/gai.conf: its precedences are fixed)"
            }
            ResolverKind::Go => {
                "list only the wanted address for the name (Go reads no /etc/gai.conf), or make the program use cgo (GODEBUG=netdns=cgo) if glibc's order is wanted"
            }
            ResolverKind::GoHosts => {
                "list the wanted address first for the name in /etc/hosts (Go's LookupHost returns the file's order), or only that address"
            }
        }
    }
}
