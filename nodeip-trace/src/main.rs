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
/// version): freed memory goes back to the system at once instead of after a second, so the
/// start-up's transient allocations (the kernel's BTF, read twice) do not stay resident.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Milliseconds before freed memory is purged.
const PURGE_DELAY_MS: std::os::raw::c_long = 0;

fn main() -> ExitCode {
    // mimalloc's own MIMALLOC_PURGE_DELAY, when set, wins.
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets an allocator option; no allocation is in flight.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
    match cli::run() {
        Ok(code) => code,
        Err(e) => {
            let error: &(dyn std::error::Error + 'static) = e.as_ref();
            eprintln!("nodeip-trace: {}", nodeip_trace::command::error_text(error));
            ExitCode::from(2)
        }
    }
}
