//! The `nodeip-trace` binary: parses flags, calls the library's commands, maps errors to exit
//! codes. Broken pipes are not errors.
mod cli;

use std::process::ExitCode;

/// mimalloc: the trace consumer and `analyze` allocate and free a few small objects per event;
/// glibc's malloc spent ≈ 28% of the consumer's time under a netlink burst (perf), mostly
/// consolidating and unlinking free chunks.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` option (its number in mimalloc 3.x, pinned by the exact crate
/// version).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets mimalloc's purge delay to `ms`, unless mimalloc's own MIMALLOC_PURGE_DELAY is set
/// (then that wins).
fn set_purge_delay(ms: std::ffi::c_long) {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets an allocator option (mimalloc reads options at each use).
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, ms) };
    }
}

/// For `trace`, which stays on a node: freed memory goes back to the system at once, so the
/// start-up's transient allocations do not stay resident (peak RSS at start 88 → 46 MiB with
/// the 16 MiB ring buffer of then). Offline commands keep mimalloc's delay: re-faulting purged pages
/// cost `analyze` a third of its speed.
pub(crate) fn purge_freed_memory_at_once() {
    set_purge_delay(0);
}

/// mimalloc's purge delay (ms) for `trace` once it runs: freed memory goes back to the system a
/// second after. Purging every freed page at once made the consumer re-fault (and the kernel
/// zero, often as 2 MiB huge pages) the pages it reuses: a fifth of its CPU under a 100,000-pair
/// netlink burst (perf; 1.7 → 1.0-1.2 µs an event with `--pcap`, 3.5 → 3.0 with JSON). The
/// start-up's transients are returned by then.
const STEADY_PURGE_DELAY_MS: std::ffi::c_long = 1000;

/// Switches `trace` to [`STEADY_PURGE_DELAY_MS`] once start-up is over.
pub(crate) fn purge_freed_memory_after_a_delay() {
    set_purge_delay(STEADY_PURGE_DELAY_MS);
}

fn main() -> ExitCode {
    match cli::run() {
        Ok(exit) => exit.into(),
        Err(e) => {
            let error: &(dyn std::error::Error + 'static) = e.as_ref();
            eprintln!("nodeip-trace: {}", nodeip_trace::command::error_text(error));
            nodeip_trace::command::Exit::Failed.into()
        }
    }
}
