//! Sources: where netlink frames and events come from (live eBPF, captures, recordings).
//! Each source yields frames or events and knows nothing about decoding or output.
pub mod capture;
