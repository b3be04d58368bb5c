//! Decoders: pure functions from raw bytes (eBPF records, netlink buffers, tracepoint fields) to
//! the typed values in [`crate::model::event`]. No I/O here; every decoder is tested with bytes.
pub mod addrinfo;
pub mod cgroup;
pub mod go_sort;
pub mod kernel_handler;
pub mod netlink;
pub mod record;
pub mod route_file;
pub mod route_lookup;
pub mod tracepoint_format;
