//! model: the floor every stage stands on and that stands on nothing above it — the timeline
//! [`event::Event`], what flows between stages ([`emitted::Emitted`], [`frame::NetlinkFrame`]),
//! the decoded netlink message ([`netlink`]), who made an event ([`process`]), the getaddrinfo
//! call and its `why` ([`getaddrinfo`]), the facts a conversation's replies carry ([`facts`]),
//! the nlmon framing a capture is read and written in ([`nlmon`]), the ports live tracing plugs
//! into ([`ports`]), kernel time → wall clock ([`clock`]), addresses as text ([`ip_text`]),
//! and maps keyed by kernel ids ([`id_hash`]).
//!
//! Types only, and the pure functions that belong to them: no I/O, no decoding of bytes
//! (except the 16-byte nlmon header), no policy.
pub mod clock;
pub mod emitted;
pub mod event;
pub mod facts;
pub mod frame;
pub mod getaddrinfo;
pub mod id_hash;
pub mod ip_text;
pub mod netlink;
pub mod nlmon;
pub mod ports;
pub mod process;
pub mod resolver_span;

// The types that move through the pipeline once per event stay small: large, rare parts are
// boxed. Sizes on 64-bit targets.
const _: () = assert!(std::mem::size_of::<event::EventBody>() <= 128);
const _: () = assert!(std::mem::size_of::<event::Event>() <= 208);
const _: () = assert!(std::mem::size_of::<emitted::Emitted>() <= 96);
const _: () = assert!(std::mem::size_of::<netlink::NetlinkMessage>() <= 200);
