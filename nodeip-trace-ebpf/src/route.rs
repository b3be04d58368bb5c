//! Route lookups (`fib:fib_table_lookup`, `fib6:fib6_table_lookup`) made while a thread decides
//! something (getaddrinfo, connect, a netlink request), and netlink error strings
//! (`netlink:netlink_extack`): raw tracepoint bytes, decoded in userspace from the format files.
//!
//! Minimum kernel: 4.14 (fib), 4.15 (fib6), 4.20 (netlink_extack).
use aya_ebpf::{
    helpers::{bpf_probe_read_kernel_buf, bpf_probe_read_kernel_str_bytes},
    macros::tracepoint,
    programs::TracePointContext,
    EbpfContext, Global,
};
use nodeip_trace_common::{
    counter, ExtackRecord, TracepointRecord, KIND_EXTACK, KIND_FIB4_LOOKUP, KIND_FIB6_LOOKUP,
};

use crate::{
    count, filter::traced, header, CONNECT_INFLIGHT, EVENTS, GAI_INFLIGHT, NETLINK_INFLIGHT,
    NETLINK_SOCKET_CALLS,
};

/// Whether the thread is making a decision we explain: inside getaddrinfo, a `connect()`, or a
/// netlink request (a route get is answered inside the sender's call). Per-packet lookups of
/// unconnected sockets and forwarding are not, and would cost every sendmsg a record.
#[inline(always)]
fn in_decision(pid_tgid: u64) -> bool {
    unsafe {
        GAI_INFLIGHT.get(pid_tgid).is_some()
            || CONNECT_INFLIGHT.get(pid_tgid).is_some()
            || NETLINK_INFLIGHT.get(pid_tgid).is_some()
            || NETLINK_SOCKET_CALLS.get(pid_tgid).is_some()
    }
}

/// Offsets of `dport` in the `fib_table_lookup` and `fib6_table_lookup` records, from their
/// format files (0: unknown).
#[unsafe(no_mangle)]
static ROUTE_DPORT_OFFSETS: Global<[u32; 2]> = Global::new([0; 2]);

/// A lookup for no destination port made inside a send syscall: the kernel answering a netlink
/// request in the sender's call (a route get, a gateway check of a new route). Needed where the
/// sock tracepoints capture netlink (no syscall entry marks the request: they fire after it was
/// answered); UDP's per-packet lookups carry their destination port and leave at the first test.
#[inline(always)]
fn netlink_request_lookup(ctx: &TracePointContext, kind: u32) -> bool {
    let offsets = ROUTE_DPORT_OFFSETS.load();
    let offset = if kind == KIND_FIB4_LOOKUP {
        offsets[0]
    } else {
        offsets[1]
    };
    offset != 0
        && unsafe { ctx.read_at::<u16>(offset as usize) } == Ok(0)
        && crate::netlink::in_send_syscall()
}

#[inline(always)]
fn copy_raw(ctx: &TracePointContext, kind: u32) -> u32 {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    if !in_decision(pid_tgid) && !netlink_request_lookup(ctx, kind) {
        count(counter::ROUTE_LOOKUPS_FILTERED, 1);
        return 0;
    }
    if !traced(pid_tgid) {
        return 0;
    }
    let Some(mut entry) = EVENTS.reserve::<TracepointRecord>(0) else {
        count(counter::ROUTE_RINGBUF_FULL, 1);
        return 0;
    };
    let rec = entry.as_mut_ptr();
    unsafe {
        (*rec).header = header(kind, pid_tgid);
        let src = (ctx.as_ptr() as *const u8).wrapping_add(8);
        if bpf_probe_read_kernel_buf(src, &mut (*rec).raw).is_err() {
            (*rec).raw = [0; nodeip_trace_common::TRACEPOINT_RAW_LEN];
        }
    }
    entry.submit(crate::submit_flags());
    0
}

/// `fib:fib_table_lookup`.
#[tracepoint]
pub fn fib_table_lookup(ctx: TracePointContext) -> u32 {
    copy_raw(&ctx, KIND_FIB4_LOOKUP)
}

/// `fib6:fib6_table_lookup`.
#[tracepoint]
pub fn fib6_table_lookup(ctx: TracePointContext) -> u32 {
    copy_raw(&ctx, KIND_FIB6_LOOKUP)
}

/// `netlink:netlink_extack`: the message is a `__data_loc` string at offset 8.
#[tracepoint]
pub fn netlink_extack(ctx: TracePointContext) -> u32 {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    if !traced(pid_tgid) {
        return 0;
    }
    let loc: u32 = unsafe { ctx.read_at(8) }.unwrap_or(0);
    let Some(mut entry) = EVENTS.reserve::<ExtackRecord>(0) else {
        count(counter::OTHER_RINGBUF_FULL, 1);
        return 0;
    };
    let rec = entry.as_mut_ptr();
    unsafe {
        (*rec).header = header(KIND_EXTACK, pid_tgid);
        (*rec).msg[0] = 0;
        let src = (ctx.as_ptr() as *const u8).wrapping_add((loc & 0xffff) as usize);
        if bpf_probe_read_kernel_str_bytes(src, &mut (*rec).msg).is_err() {
            (*rec).msg[0] = 0;
        }
    }
    entry.submit(crate::submit_flags());
    0
}
