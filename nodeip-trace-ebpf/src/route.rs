//! Route lookups (`fib_table_lookup`, `fib6_table_lookup`) made while a thread decides
//! something (getaddrinfo, connect, a netlink request), and netlink error strings
//! (`netlink:netlink_extack`).
//!
//! Route lookups are taken at the raw tracepoints where the kernel's BTF gives the offsets
//! (kernel >= 5.2): the program reads the destination port straight from the flow and leaves,
//! so a routed packet costs no tracepoint record; the few lookups kept are read from the
//! arguments into a [`RouteLookupRecord`]. Elsewhere the classic tracepoints' bytes are copied
//! and decoded in userspace from their format files (4.14 fib, 4.15 fib6).
//!
//! Minimum kernel: 4.14 (fib), 4.15 (fib6), 4.20 (netlink_extack).
use aya_ebpf::{
    helpers::{bpf_probe_read_kernel, bpf_probe_read_kernel_buf, bpf_probe_read_kernel_str_bytes},
    macros::{raw_tracepoint, tracepoint},
    programs::{RawTracePointContext, TracePointContext},
    EbpfContext, Global,
};
use nodeip_trace_common::{
    counter, route_lookup_flags, route_offset as off, ExtackRecord, RouteLookupRecord,
    TracepointRecord, KIND_EXTACK, KIND_FIB4_LOOKUP, KIND_FIB6_LOOKUP, KIND_ROUTE_LOOKUP4,
    KIND_ROUTE_LOOKUP6,
};

use crate::{count, decision::in_decision, filter::traced, write_header, EVENTS};

/// Offsets of `dport` in the `fib_table_lookup` and `fib6_table_lookup` records, from their
/// format files (0: unknown).
#[unsafe(no_mangle)]
static ROUTE_DPORT_OFFSETS: Global<[u32; 2]> = Global::new([0; 2]);

/// The destination port in a classic `fib`/`fib6` record (offsets from the format files).
#[inline(always)]
fn record_dport(ctx: &TracePointContext, kind: u32) -> Option<u16> {
    let offset = crate::global_at(&ROUTE_DPORT_OFFSETS, (kind != KIND_FIB4_LOOKUP) as usize);
    if offset == 0 {
        return None;
    }
    unsafe { ctx.read_at::<u16>(offset as usize) }.ok()
}

/// Whether a lookup is kept: the thread is deciding something, or it is a netlink request's
/// lookup — no destination port (`dport`, read only when needed) inside a send syscall: the
/// kernel answering a route get or checking a new route's gateway in the sender's call. The
/// sock tracepoints mark no netlink request before it is answered, and UDP's per-packet lookups
/// carry their port and leave at that test. Counts the lookups left out.
#[inline(always)]
fn keep_lookup(pid_tgid: u64, dport: impl FnOnce() -> Option<u16>) -> bool {
    if in_decision(pid_tgid) || (dport() == Some(0) && crate::netlink::in_send_syscall()) {
        return traced(pid_tgid);
    }
    count(counter::ROUTE_LOOKUPS_FILTERED, 1);
    false
}

#[inline(always)]
fn copy_raw(ctx: &TracePointContext, kind: u32) -> u32 {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    if !keep_lookup(pid_tgid, || record_dport(ctx, kind)) {
        return 0;
    }
    let Some(mut entry) = EVENTS.reserve::<TracepointRecord>(0) else {
        count(counter::ROUTE_RINGBUF_FULL, 1);
        return 0;
    };
    let rec = entry.as_mut_ptr();
    unsafe {
        write_header(&mut (*rec).header, kind, pid_tgid);
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

/// Offsets the raw route-lookup programs follow, indexed by `route_offset::*` (set only when
/// all were found; the raw programs are not attached otherwise).
#[unsafe(no_mangle)]
static ROUTE_OFFSETS: Global<[u32; off::COUNT]> = Global::new([0; off::COUNT]);

/// Reads a `T` at `base + offset` in kernel memory.
#[inline(always)]
fn kernel_read<T>(base: *const u8, offset: u32) -> Option<T> {
    unsafe { bpf_probe_read_kernel(base.wrapping_add(offset as usize) as *const T) }.ok()
}

/// A [`RouteLookupRecord`] reserved with its header when the lookup is kept (see
/// [`keep_lookup`]), else `None`; a full ring buffer is counted.
#[inline(always)]
fn start_lookup(
    kind: u32,
    flow: *const u8,
    dport_offset: usize,
) -> Option<aya_ebpf::maps::ring_buf::RingBufEntry<RouteLookupRecord>> {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    let dport = || kernel_read::<u16>(flow, crate::global_at(&ROUTE_OFFSETS, dport_offset));
    if !keep_lookup(pid_tgid, dport) {
        return None;
    }
    let Some(mut entry) = EVENTS.reserve::<RouteLookupRecord>(0) else {
        count(counter::ROUTE_RINGBUF_FULL, 1);
        return None;
    };
    let rec = entry.as_mut_ptr();
    unsafe {
        crate::zero_words(rec);
        write_header(&mut (*rec).header, kind, pid_tgid);
    }
    Some(entry)
}

/// Copies `N` bytes at `base + offset` into the start of `dst`, in place; false (and those
/// bytes zeroed, as the helper leaves them) when unreadable.
#[inline(always)]
fn copy_field<const N: usize>(base: *const u8, offset: u32, dst: &mut [u8; 16]) -> bool {
    const { assert!(N <= 16) };
    unsafe { bpf_probe_read_kernel_buf(base.wrapping_add(offset as usize), &mut dst[..N]) }.is_ok()
}

/// Fills the next hop's device name and gateway from a `fib_nh_common` (may be NULL).
#[inline(always)]
fn fill_nexthop(rec: &mut RouteLookupRecord, nhc: *const u8, o: &[u32; off::COUNT]) {
    if nhc.is_null() {
        return;
    }
    rec.flags |= route_lookup_flags::NEXTHOP;
    let mut ok = true;
    if let Some(dev) = kernel_read::<*const u8>(nhc, o[off::NHC_DEV]) {
        if !dev.is_null() {
            let name = dev.wrapping_add(o[off::DEV_NAME] as usize);
            ok &= unsafe { bpf_probe_read_kernel_str_bytes(name, &mut rec.dev) }.is_ok();
        }
    } else {
        ok = false;
    }
    rec.gw_family = kernel_read::<u8>(nhc, o[off::NHC_GW_FAMILY]).unwrap_or(0);
    ok &= match rec.gw_family {
        2 => copy_field::<4>(nhc, o[off::NHC_GW], &mut rec.gw),
        10 => copy_field::<16>(nhc, o[off::NHC_GW], &mut rec.gw),
        _ => true,
    };
    if !ok {
        rec.flags |= route_lookup_flags::UNREADABLE;
    }
}

/// Raw `fib_table_lookup(u32 tb_id, const struct flowi4 *flp, const struct fib_nh_common *nhc,
/// int err)`.
#[raw_tracepoint(tracepoint = "fib_table_lookup")]
pub fn fib_table_lookup_raw(ctx: RawTracePointContext) -> i32 {
    let flow: *const u8 = ctx.arg(1);
    let Some(mut entry) = start_lookup(KIND_ROUTE_LOOKUP4, flow, off::FL4_DPORT) else {
        return 0;
    };
    let o = ROUTE_OFFSETS.load();
    let rec = unsafe { &mut *entry.as_mut_ptr() };
    rec.table = ctx.arg::<u64>(0) as u32;
    rec.err = ctx.arg::<u64>(3) as i32;
    if !(copy_field::<4>(flow, o[off::FL4_SADDR], &mut rec.src)
        && copy_field::<4>(flow, o[off::FL4_DADDR], &mut rec.dst))
    {
        rec.flags |= route_lookup_flags::UNREADABLE;
    }
    fill_nexthop(rec, ctx.arg(2), &o);
    entry.submit(crate::submit_flags());
    0
}

/// Raw `fib6_table_lookup(const struct net *net, const struct fib6_result *res, struct
/// fib6_table *table, const struct flowi6 *flp)`.
#[raw_tracepoint(tracepoint = "fib6_table_lookup")]
pub fn fib6_table_lookup_raw(ctx: RawTracePointContext) -> i32 {
    let flow: *const u8 = ctx.arg(3);
    let Some(mut entry) = start_lookup(KIND_ROUTE_LOOKUP6, flow, off::FL6_DPORT) else {
        return 0;
    };
    let o = ROUTE_OFFSETS.load();
    let rec = unsafe { &mut *entry.as_mut_ptr() };
    let table: *const u8 = ctx.arg(2);
    let result: *const u8 = ctx.arg(1);
    let mut ok = copy_field::<16>(flow, o[off::FL6_SADDR], &mut rec.src)
        && copy_field::<16>(flow, o[off::FL6_DADDR], &mut rec.dst);
    match kernel_read::<u32>(table, o[off::F6_TABLE_ID]) {
        Some(id) => rec.table = id,
        None => ok = false,
    }
    match kernel_read::<u8>(result, o[off::F6_RESULT_TYPE]) {
        Some(t) => rec.route_type = t,
        None => ok = false,
    }
    if !ok {
        rec.flags |= route_lookup_flags::UNREADABLE;
    }
    if let Some(nh) = kernel_read::<*const u8>(result, o[off::F6_RESULT_NH]) {
        if !nh.is_null() {
            fill_nexthop(rec, nh.wrapping_add(o[off::F6_NH_COMMON] as usize), &o);
        }
    }
    entry.submit(crate::submit_flags());
    0
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
        write_header(&mut (*rec).header, KIND_EXTACK, pid_tgid);
        (*rec).msg[0] = 0;
        let src = (ctx.as_ptr() as *const u8).wrapping_add((loc & 0xffff) as usize);
        if bpf_probe_read_kernel_str_bytes(src, &mut (*rec).msg).is_err() {
            (*rec).msg[0] = 0;
        }
    }
    entry.submit(crate::submit_flags());
    0
}
