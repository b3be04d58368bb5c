//! source: where records come from — the live eBPF ring buffer ([`live`]) and pcap/pcapng
//! captures ([`capture`]). Each source yields records or frames and knows nothing about decoding
//! or output.
pub mod capture;
pub mod live;
