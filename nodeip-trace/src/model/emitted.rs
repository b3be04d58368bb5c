//! What flows from the pipeline to the sinks: whole netlink frames (for captures) and timeline
//! events, in pipeline order, with the structure of resolver calls spelled out: a call's event
//! opens its span ([`Emitted::SpanBegin`]), what its thread did inside the call follows, and
//! [`Emitted::SpanEnd`] closes it.
use super::event::Event;
use super::frame::NetlinkFrame;

/// What the pipeline produces.
#[derive(Clone, Debug)]
pub enum Emitted {
    /// A whole netlink buffer (for pcap sinks), in capture order.
    Frame(NetlinkFrame),
    /// A timeline event.
    Event(Box<Event>),
    /// A resolver call's event, opening its span: the items up to [`Emitted::SpanEnd`] happened
    /// on its thread during the call.
    SpanBegin(Box<Event>),
    /// Closes the span the last [`Emitted::SpanBegin`] opened.
    SpanEnd,
}

impl Emitted {
    /// The event this item carries, if any (a span's call included).
    pub fn event(&self) -> Option<&Event> {
        match self {
            Emitted::Event(e) | Emitted::SpanBegin(e) => Some(e),
            Emitted::Frame(_) | Emitted::SpanEnd => None,
        }
    }
}
