//! What both netlink capture backends share — the syscall/tracepoint capture (`netlink`) and
//! the socket-layer capture (`netlink_socket`): which protocols are selected, the socket member
//! offsets from the kernel's BTF, and how a chunk is sent and a call closed (by its last chunk,
//! or by a zero-length closing record), its losses counted.
//! Both backends import this module; it imports neither.
use aya_ebpf::Global;
use nodeip_trace_common::{
    chunk_flags, counter, socket_offset, NetlinkChunkHeader, NETLINK_CHUNK_HEADER_LEN,
};

use crate::{count, EVENTS};

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

/// `MSG_PEEK` in a receive's flags.
pub(crate) const MSG_PEEK: u64 = 2;

/// Whether a receive's `flags` only peek (the datagram is taken again without `MSG_PEEK`):
/// counted, not captured.
#[inline(always)]
pub(crate) fn peeking(flags: u64) -> bool {
    let peek = flags & MSG_PEEK != 0;
    if peek {
        count(counter::NETLINK_PEEK_SKIPPED, 1);
    }
    peek
}

/// The member offset `index` (`socket_offset::*`) in the running kernel.
#[inline(always)]
pub(crate) fn offset(index: usize) -> usize {
    crate::global_at(&SOCKET_OFFSETS, index) as usize
}

/// What became of a chunk handed to [`send_chunk`].
pub(crate) enum ChunkSent {
    /// It went out and closed its call (the call's losses are counted).
    Closed,
    /// It went out; the call goes on.
    Sent,
    /// The ring buffer was full: the chunk is lost and the call goes on.
    Lost,
}

/// Sends the chunk assembled in `scratch`: its header `hdr` (at the start of `scratch`), then
/// `n` payload bytes of the call from `offset` (none when `read_ok` is false: READ_FAILED).
/// `base_flags` are the backend's own (`SOCKET_LAYER` or 0). The chunk that reaches a known
/// `total` (`u64::MAX`: unknown) closes the call — LAST with the totals, `captured` counting
/// the bytes sent before it — and counts the call's losses (`dropped`: an earlier chunk was
/// lost), so a small message costs one record.
#[allow(
    clippy::too_many_arguments,
    reason = "each capture backend passes the call's facts it holds; always inlined"
)]
#[inline(always)]
pub(crate) fn send_chunk(
    scratch: &[u8],
    hdr: *mut NetlinkChunkHeader,
    offset: u64,
    n: usize,
    read_ok: bool,
    base_flags: u32,
    total: u64,
    captured: u64,
    dropped: bool,
) -> ChunkSent {
    let out_len = if read_ok { n } else { 0 };
    let closes = total != u64::MAX && offset + n as u64 >= total;
    unsafe {
        (*hdr).offset = offset as u32;
        (*hdr).len = out_len as u32;
        (*hdr).flags = base_flags | if read_ok { 0 } else { chunk_flags::READ_FAILED };
        (*hdr).total_len = 0;
    }
    if closes {
        mark_last(hdr, total, captured + out_len as u64);
    }
    let sent = EVENTS
        .output::<[u8]>(
            &scratch[..NETLINK_CHUNK_HEADER_LEN + out_len],
            crate::submit_flags(),
        )
        .is_ok();
    if !sent {
        ChunkSent::Lost
    } else if closes {
        count_call_end(total, captured + out_len as u64, dropped);
        ChunkSent::Closed
    } else {
        ChunkSent::Sent
    }
}

/// Sends the zero-length record that closes a call its last chunk did not close (that chunk
/// was lost, the call had more chunks than are kept, or nothing was captured): LAST with the
/// totals at `offset`, `base_flags` as in [`send_chunk`]; counts the call's losses.
#[inline(always)]
pub(crate) fn close_call(
    scratch: &[u8],
    hdr: *mut NetlinkChunkHeader,
    offset: u64,
    base_flags: u32,
    total: u64,
    captured: u64,
    dropped: bool,
) {
    unsafe {
        (*hdr).offset = offset as u32;
        (*hdr).len = 0;
        (*hdr).flags = base_flags;
    }
    mark_last(hdr, total, captured);
    let closed = EVENTS
        .output::<[u8]>(&scratch[..NETLINK_CHUNK_HEADER_LEN], crate::submit_flags())
        .is_ok();
    count_call_end(total, captured, dropped);
    // A lost closing record alone is not a lost call (userspace still has every byte and closes
    // the call at shutdown, flagged as cut).
    if !dropped && !closed {
        count(counter::OTHER_RINGBUF_FULL, 1);
    }
}

/// Makes the chunk header `hdr` close its call: LAST, CUT when fewer than `total` bytes were
/// captured, and the call's total length.
#[inline(always)]
fn mark_last(hdr: *mut NetlinkChunkHeader, total: u64, captured: u64) {
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
fn count_call_end(total: u64, captured: u64, dropped: bool) {
    if captured < total {
        count(counter::NETLINK_BYTES_CUT, total - captured);
    }
    if dropped {
        count(counter::NETLINK_RINGBUF_FULL, 1);
    }
}
