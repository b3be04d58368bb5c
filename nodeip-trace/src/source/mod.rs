//! source: where records come from — the live eBPF ring buffer ([`live`]) and pcap/pcapng
//! captures ([`capture`]). The live source copies each ring record out in its typed form
//! (`decode::record`) before the ring slot is released; the capture reader yields netlink frames
//! framed as nlmon frames them (`model::nlmon`). Neither knows about correlation or output.
//! JSON-lines recordings are read back by `command::offline` (replay). A live trace also
//! listens to the kernel's address notices in its own namespace ([`address_notices`]).
pub mod address_notices;
pub mod capture;
pub mod live;
