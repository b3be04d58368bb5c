//! Sinks: where decoded events and captured frames go (terminal, JSON lines, pcap/pcapng).
//! Each sink writes to an `impl Write`; enrichment happens before a sink, never inside it.
pub mod pcap;
