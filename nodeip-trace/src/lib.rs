//! nodeip-trace: which process picked which node IP address, and why.
//!
//! The pipeline is visible in the modules:
//! `source` (live eBPF ring buffer, pcap/pcapng captures, JSON-lines recordings) →
//! `decode` (raw records and netlink bytes → [`event::Event`]) →
//! `correlate` (request↔reply pairing, getaddrinfo spans) →
//! `explain` (RFC 6724 as glibc applies it, diagnoses of known failure patterns) →
//! `sink` (text timeline, JSON lines, nlmon-compatible pcap/pcapng).
//! `probe` loads and attaches the eBPF programs and reports what the kernel offers (`doctor`).
#![deny(missing_docs)]

pub mod command;
pub mod correlate;
pub mod decode;
pub mod explain;
pub mod model;
pub mod pipeline;
pub mod probe;
pub mod sink;
pub mod source;

/// The workspace's one golden-file comparison, shared with the end-to-end tests.
#[cfg(test)]
#[path = "../../tests/src/golden.rs"]
pub(crate) mod golden;
