//! The resolver seam: each resolver whose address sort nodeip-trace can replay is one
//! implementation of [`ResolverSort`], and [`explain_span`] dispatches on the resolver a call
//! names. glibc's `rfc3484_sort` ([`glibc`]) is the first; adding a resolver means one new file
//! here and one arm in [`sort_for`].
pub mod glibc;

use crate::model::getaddrinfo::{GetaddrinfoWhy, ResolverKind, ResolverSpan};

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
    }
}

/// Explains one resolver call from its span (see [`ResolverSort::explain`]).
pub fn explain_span(span: &ResolverSpan) -> Option<GetaddrinfoWhy> {
    sort_for(span.call.resolver).explain(span)
}
