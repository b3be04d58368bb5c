//! The eBPF crate's library target is empty: the programs are the `nodeip-trace` binary target
//! (`main.rs`, one module per event source), built by `nodeip-trace/build.rs` with aya-build and
//! embedded in the tool. This target exists so `cargo` can check the crate as a library too.
#![no_std]
