//! nodeip-trace: which process picked which node IP address, and why.
//!
//! Everything written to stderr goes through `message`, the one module every layer may use.
//!
//! The pipeline is visible in the modules and in their imports (checked by
//! `tests/tests/architecture.rs`: a module imports only modules below it):
//! - `model` — the floor: events, frames, the decoded netlink message, the getaddrinfo call and
//!   its `why`, conversation facts, nlmon framing, the ports live tracing plugs into, the clock;
//! - `decode` — raw ring-buffer records and netlink bytes → model types (pure);
//! - `correlate` — chunk reassembly, request↔reply pairing, resolver-call spans (pure state);
//! - `explain` — each resolver's sort replayed behind one seam (`explain::resolver`), the
//!   diagnoses of known failure patterns, the node address audit (pure);
//! - `sink` — text timeline, JSON lines, nlmon pcap/pcapng, behind one output switch;
//! - `host` — read-only inspection of the machine: ELF and Go binaries, libcs, BTF, the
//!   process table and pods, netlink sockets, the resolvers' files;
//! - `source` (ring buffer, pcap/pcapng reader) and `probe` (load/attach, kernel features,
//!   the exec watcher and the exec hold) — the I/O edges;
//! - `pipeline` — the driver: assemble → decode → correlate → explain, for live records and
//!   captured frames alike;
//! - `command` — the subcommands (trace, analyze, replay, doctor, explain), composing sources,
//!   the pipeline and sinks.
#![deny(missing_docs)]
#![deny(clippy::print_stderr)]

pub mod command;
pub mod correlate;
pub mod decode;
pub mod explain;
pub mod host;
pub mod message;
pub mod model;
pub mod pipeline;
pub mod probe;
pub mod sink;
pub mod source;

/// The workspace's one golden-file comparison, shared with the end-to-end tests.
#[cfg(test)]
#[path = "../../tests/src/golden.rs"]
pub(crate) mod golden;
