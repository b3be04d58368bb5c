//! source: where records come from — the live eBPF ring buffer ([`live`]), pcap/pcapng captures
//! ([`capture`]) and JSON-lines recordings ([`recording`]).
pub mod live;
