//! What both netlink capture backends share — the syscall/tracepoint capture (`netlink`) and
//! the socket-layer capture (`netlink_socket`): which protocols are selected, the socket member
//! offsets from the kernel's BTF, and how a call's last chunk closes it and counts its losses.
//! Both backends import this module; it imports neither.
use aya_ebpf::Global;
use nodeip_trace_common::{chunk_flags, counter, socket_offset, NetlinkChunkHeader};

use crate::count;

/// Bit N set = capture netlink protocol N (NETLINK_ROUTE = 0, NETLINK_GENERIC = 16).
#[unsafe(no_mangle)]
static NETLINK_PROTOCOLS: Global<u64> = Global::new((1 << 0) | (1 << 16));
/// Whether netlink `protocol` is among those selected by userspace.
#[inline(always)]
pub fn protocol_selected(protocol: u32) -> bool {
    protocol < 64 && NETLINK_PROTOCOLS.load() & (1u64 << protocol) != 0
}

/// Member offsets indexed by `socket_offset::*` (from the kernel's BTF; userspace attaches these
/// programs only when it found all of them).
#[unsafe(no_mangle)]
static SOCKET_OFFSETS: Global<[u32; socket_offset::COUNT]> = Global::new([0; socket_offset::COUNT]);

/// The member offset `index` (`socket_offset::*`) in the running kernel.
#[inline(always)]
pub(crate) fn offset(index: usize) -> usize {
    crate::global_at(&SOCKET_OFFSETS, index) as usize
}

/// Makes the chunk header `hdr` close its call: LAST, CUT when fewer than `total` bytes were
/// captured, and the call's total length.
#[inline(always)]
pub(crate) fn mark_last(hdr: *mut NetlinkChunkHeader, total: u64, captured: u64) {
    unsafe {
        (*hdr).flags |= chunk_flags::LAST
            | if captured < total {
                chunk_flags::CUT
            } else {
                0
            };
        (*hdr).total_len = total as u32;
    }
}

/// Counts what a closed call lost: bytes not captured, and the call itself when a chunk of it
/// did not fit in the ring buffer.
#[inline(always)]
pub(crate) fn count_call_end(total: u64, captured: u64, dropped: bool) {
    if captured < total {
        count(counter::NETLINK_BYTES_CUT, total - captured);
    }
    if dropped {
        count(counter::NETLINK_RINGBUF_FULL, 1);
    }
}
