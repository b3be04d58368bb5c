//! The `nodeip-trace` binary: parses flags, calls the library's commands, maps errors to exit
//! codes. Broken pipes are not errors.
#![deny(clippy::print_stderr)]
mod cli;

use std::process::ExitCode;

/// mimalloc: the trace consumer and `analyze` allocate and free a few small objects per event;
/// glibc's malloc spent ≈ 28% of the consumer's time under a netlink burst (perf), mostly
/// consolidating and unlinking free chunks.
#[global_allocator]
static ALLOCATOR: Mimalloc = Mimalloc;

/// The alignment mimalloc's blocks have (`MI_MAX_ALIGN_SIZE` on x86-64 and aarch64): a block
/// of at least this size is aligned to it (mimalloc asserts so in `alloc.c`), a smaller one to
/// its size class, at least 8 and at least its size rounded up to a multiple of 8.
const MI_MAX_ALIGN_SIZE: usize = 16;

/// Whether a plain mimalloc block of `size` bytes has `align`: alignment up to
/// [`MI_MAX_ALIGN_SIZE`] and no more than the size (mimalloc's own fast-path condition in
/// `alloc-aligned.c`).
fn plain_block_fits(size: usize, align: usize) -> bool {
    align <= MI_MAX_ALIGN_SIZE && align <= size
}

/// mimalloc through its plain entry points wherever a layout asks for no more than its blocks
/// have. The `mimalloc` crate's `MiMalloc` calls the aligned ones (`mi_malloc_aligned`,
/// `mi_realloc_aligned`) for every allocation, which check and dispatch their way to the same
/// blocks: ≈ 66 instructions a call where `mi_malloc` takes ≈ 20 (callgrind, `analyze --format
/// json` of a route-get capture: allocation was 7% of all instructions).
struct Mimalloc;

use libmimalloc_sys as mi;

/// A block for `layout` from mimalloc's `plain` allocation function when its blocks fit the
/// layout, else from its `aligned` one.
///
/// # Safety
/// `layout` has a non-zero size; the block is freed with `mi_free`.
unsafe fn allocate(
    layout: std::alloc::Layout,
    plain: unsafe extern "C" fn(usize) -> *mut std::ffi::c_void,
    aligned: unsafe extern "C" fn(usize, usize) -> *mut std::ffi::c_void,
) -> *mut u8 {
    // SAFETY: mimalloc's allocation functions take any size and alignment.
    unsafe {
        if plain_block_fits(layout.size(), layout.align()) {
            plain(layout.size()).cast()
        } else {
            aligned(layout.size(), layout.align()).cast()
        }
    }
}

// SAFETY: every method hands the layout to mimalloc: the plain functions only when their
// blocks have the layout's alignment (`plain_block_fits`), the aligned ones otherwise; blocks
// are freed with `mi_free`, which takes both kinds.
unsafe impl std::alloc::GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe { allocate(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe { allocate(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from this allocator (see the impl).
        unsafe { libmimalloc_sys::mi_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if plain_block_fits(new_size, layout.align()) {
                mi::mi_realloc(ptr.cast(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
            }
        }
    }
}

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
            nodeip_trace::message::note(format_args!(
                "nodeip-trace: {}",
                nodeip_trace::command::error_text(error)
            ));
            nodeip_trace::command::Exit::Failed.into()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::alloc::{GlobalAlloc, Layout};

    use super::Mimalloc;

    /// Every block has its layout's alignment, allocated, zeroed or reallocated (grown and
    /// shrunk), by the plain and the aligned paths alike; zeroed blocks are zero and reallocated
    /// ones keep their bytes.
    #[test]
    fn blocks_have_their_layouts_alignment() {
        let aligned = |p: *mut u8, align: usize| (p as usize).is_multiple_of(align);
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in (1..=80).chain([100, 256, 1000, 5000, 70_000]) {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero sizes; each block is freed once, with its own layout.
                unsafe {
                    let p = Mimalloc.alloc(layout);
                    assert!(!p.is_null() && aligned(p, align), "{size} {align}");
                    p.write_bytes(0xa5, size);
                    let z = Mimalloc.alloc_zeroed(layout);
                    assert!(aligned(z, align), "zeroed {size} {align}");
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    Mimalloc.dealloc(z, layout);
                    let mut block = p;
                    let mut current = layout;
                    for new_size in [1, 3, 8, 15, 16, 17, 64, 200, 9000] {
                        let q = Mimalloc.realloc(block, current, new_size);
                        assert!(aligned(q, align), "{size} -> {new_size}, align {align}");
                        let kept = size.min(new_size).min(current.size());
                        assert!((0..kept).all(|i| *q.add(i) == 0xa5));
                        q.write_bytes(0xa5, new_size);
                        block = q;
                        current = Layout::from_size_align(new_size, align).unwrap();
                    }
                    Mimalloc.dealloc(block, current);
                }
            }
        }
    }
}
