//! The resolver seam: each resolver whose address sort nodeip-trace can replay is one
//! implementation of [`ResolverSort`], and [`explain_span`] dispatches on the resolver a call
//! names: glibc's `rfc3484_sort` ([`glibc`]), musl's 31-bit key sort ([`musl`]), Go's
//! `addrselect.go` sort and its unsorted `LookupHost` answers from `/etc/hosts` ([`go`]). Adding a
//! resolver means one new file here, one [`ResolverKind`] variant and one arm in [`sort_for`].
pub mod glibc;
pub mod go;
pub mod go_choice;
pub mod musl;

use std::net::IpAddr;

use crate::model::getaddrinfo::{GaiSocketOp, GetaddrinfoWhy, ResolverKind};
use crate::model::resolver_span::ResolverSpan;

/// A resolver's destination-address sort, replayed on what a trace saw inside one call.
pub trait ResolverSort {
    /// The `why` of the call's order: the resolver's own sort replayed on its inputs, with the
    /// rule that decided each adjacent pair. `None` when there was nothing to sort, or the
    /// resolver did not sort.
    fn explain(&self, span: &ResolverSpan) -> Option<GetaddrinfoWhy>;
}

/// The sort of the resolver `kind`. A call whose resolver is not known is explained as glibc's,
/// as every libc hooked before resolvers were told apart was.
pub fn sort_for(kind: ResolverKind) -> &'static dyn ResolverSort {
    match kind {
        ResolverKind::Glibc | ResolverKind::Unknown => &glibc::GlibcSort,
        ResolverKind::Musl => &musl::MuslSort,
        ResolverKind::Go => &go::GoSort,
        ResolverKind::GoHosts => &go::GoHostsOrder,
    }
}

/// Explains one resolver call from its span (see [`ResolverSort::explain`]).
pub fn explain_span(span: &ResolverSpan) -> Option<GetaddrinfoWhy> {
    sort_for(span.call.resolver).explain(span)
}

/// `::ffff:a.b.c.d` as `a.b.c.d`, so a v4-mapped connect matches an IPv4 result.
pub(crate) fn unmapped(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

/// One destination a resolver `connect()`ed a UDP socket to while sorting, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConnectedCandidate {
    /// The destination (an IPv4 result connected v4-mapped is given as IPv4).
    pub dest: IpAddr,
    /// The `connect()` succeeded (the destination is usable: rule 1).
    pub connected: bool,
    /// The source `getsockname()` gave after it; `None` when the connect failed or no
    /// getsockname followed.
    pub source: Option<IpAddr>,
}

/// The distinct destinations the resolver connected to, in order, each with its source. Only
/// returned addresses count: a DNS resolver's own connect to its name server is not a
/// candidate.
pub(crate) fn connected_candidates(
    ops: &[GaiSocketOp],
    returned: &[IpAddr],
) -> Vec<ConnectedCandidate> {
    let mut found: Vec<ConnectedCandidate> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        // A v4-mapped result is connected as itself; an IPv4 one may be connected v4-mapped.
        let Some(dest) = op.addr.map(|a| {
            if returned.contains(&a) {
                a
            } else {
                unmapped(a)
            }
        }) else {
            continue;
        };
        if !op.connect || !returned.contains(&dest) || found.iter().any(|c| c.dest == dest) {
            continue;
        }
        // A connect seen before the kernel carried it out (a cgroup hook) worked when a
        // getsockname of the same socket follows: glibc and musl ask only after one that did.
        let source = op
            .not_failed()
            .then(|| {
                ops[i + 1..]
                    .iter()
                    .take_while(|next| !(next.connect && next.socket == op.socket))
                    .find(|next| !next.connect && next.socket == op.socket && next.not_failed())
                    .and_then(|next| next.addr)
            })
            .flatten();
        found.push(ConnectedCandidate {
            dest,
            connected: op.ret.map_or(source.is_some(), |ret| ret == 0),
            source,
        });
    }
    found
}
