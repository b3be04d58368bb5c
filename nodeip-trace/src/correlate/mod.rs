//! correlate: decoded events → related events. Reassembles netlink chunks into buffers
//! ([`chunks`]), pairs requests with replies into conversations ([`conversations`]), holds what a
//! thread does during a resolver call so the call can be explained with it ([`spans`]), and
//! filters by process ([`process_filter`]). Pure state machines over model types; the driver
//! (`pipeline`) feeds them.
pub mod chunks;
pub mod conversations;
pub mod process_filter;
pub mod spans;
