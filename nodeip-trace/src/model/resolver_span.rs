//! A resolver call with what its thread did inside it: the span correlate builds and every
//! resolver's explainer reads. Apart from `getaddrinfo.rs` (the call itself), so that the call
//! (inside events) and the span (holding events) do not import each other in a circle.
use super::emitted::Emitted;
use super::event::EventBody;
use super::frame::Direction;
use super::getaddrinfo::{GaiConfSeen, GaiSocketOp, GetaddrinfoCall, SortInputs};
use super::netlink::NetlinkMessage;

/// A resolver call with what its thread did inside it: what flows from correlate to explain.
#[derive(Clone, Debug)]
pub struct ResolverSpan {
    /// The call, as decoded (its `why` not yet filled).
    pub call: GetaddrinfoCall,
    /// Frames and events of the thread between the call's entry and return, in order.
    pub inside: Vec<Emitted>,
    /// The resolver's `connect`/`getsockname` calls for its sort, in order.
    pub socket_ops: Vec<GaiSocketOp>,
    /// Its configuration.
    pub gai_conf: GaiConfSeen,
    /// The sort's own inputs, when a probe read them (Go's resolver).
    pub sort_inputs: Option<SortInputs>,
}

impl ResolverSpan {
    /// Every netlink message received inside the call (the resolver's own dumps), in order.
    pub fn replies(&self) -> impl Iterator<Item = &NetlinkMessage> {
        self.inside
            .iter()
            .filter_map(|e| match e.event().map(|ev| &ev.body) {
                Some(EventBody::Netlink(n)) if n.direction == Direction::Recv => Some(&n.messages),
                _ => None,
            })
            .flatten()
            .map(|m| &**m)
    }

    /// Events (not frames) held inside the call.
    pub fn events_inside(&self) -> usize {
        self.inside.iter().filter(|e| e.event().is_some()).count()
    }
}
