//! Netlink traffic at the socket layer, where the kernel offers fentry or kprobes: only netlink
//! sockets pay, unlike the syscall tracepoints that every `sendmsg`/`recvmsg` passes.
//!
//! Under fentry/fexit, two trampolines make the whole capture: a datagram is a request when
//! `netlink_unicast` sends it from a user socket (a non-zero `portid`; the kernel's own replies
//! leave from its sockets, whose `portid` is 0), and a received datagram when
//! `skb_recv_datagram` returns it on a netlink socket (its `sk` and `flags` are arguments, so a
//! `MSG_PEEK` is skipped and counted there). That is four trampoline runs per route get, where
//! remembering the calls at `netlink_sendmsg`/`netlink_recvmsg` entry and exit made ten.
//!
//! A kretprobe has no arguments, so under kprobes `netlink_sendmsg` entry remembers the
//! thread's socket and the datagram is copied at `netlink_unicast` only when it leaves from that
//! socket; `netlink_recvmsg` entry remembers the thread (a `MSG_PEEK` is skipped and counted) and
//! the datagram it takes is copied when `skb_recv_datagram` returns it. The remembered call also
//! marks route lookups made inside a request there (fexit kernels tell those by the syscall's
//! registers). Each datagram becomes chunk records like the syscall path's (flagged
//! `SOCKET_LAYER`), so userspace reassembles both the same way.
use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, bpf_probe_read_kernel, bpf_probe_read_kernel_buf},
    macros::{fentry, fexit, kprobe, kretprobe},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext},
};
use nodeip_trace_common::{
    chunk_flags, counter, socket_offset, syscall, NetlinkChunkHeader, NetlinkSocketCall,
    KIND_NETLINK_CHUNK, NETLINK_CHUNK_HEADER_LEN, NETLINK_CHUNK_LEN, SOCKET_MAX_CHUNKS,
};

use crate::{
    count,
    filter::traced,
    netlink::AF_NETLINK,
    netlink_capture::{close_call, offset, peeking, protocol_selected, send_chunk, ChunkSent},
    write_header, NETLINK_SOCKET_CALLS, SOCKET_SCRATCH,
};

/// The netlink protocol of `sk` when the tracer selects it; otherwise counted and `None`.
#[inline(always)]
fn selected_protocol(sk: u64) -> Option<u32> {
    let protocol: u16 = unsafe {
        bpf_probe_read_kernel((sk as usize + offset(socket_offset::SOCK_PROTOCOL)) as *const u16)
    }
    .unwrap_or(u16::MAX);
    if !protocol_selected(protocol as u32) {
        count(counter::NETLINK_FAMILY_FILTERED, 1);
        return None;
    }
    Some(protocol as u32)
}

/// `netlink_sendmsg`/`netlink_recvmsg` entry (kprobes): remember a traced thread's call on a
/// selected protocol.
#[inline(always)]
fn call_enter(sock: u64, direction: u32, flags: u64) {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    if sock == 0 || !traced(pid_tgid) {
        return;
    }
    let Ok(sk) = (unsafe {
        bpf_probe_read_kernel((sock as usize + offset(socket_offset::SOCKET_SK)) as *const u64)
    }) else {
        return;
    };
    let Some(protocol) = selected_protocol(sk) else {
        return;
    };
    if direction == syscall::RECVMSG && peeking(flags) {
        return;
    }
    let call = NetlinkSocketCall {
        start_ns: unsafe { bpf_ktime_get_ns() },
        sk,
        protocol,
        direction,
    };
    if crate::decision::begin(&NETLINK_SOCKET_CALLS, pid_tgid, &call).is_err() {
        count(counter::NETLINK_INFLIGHT_FULL, 1);
    }
}

/// The current thread when it is traced and `sk` is a socket (fentry/fexit): the first check,
/// so untraced threads pay no read and no counter.
#[inline(always)]
fn traced_thread(sk: u64) -> Option<u64> {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    (sk != 0 && traced(pid_tgid)).then_some(pid_tgid)
}

/// The call a datagram seen on `sk` belongs to, made where it is seen (fentry/fexit; its start is
/// the record's own time): `None` (counted) unless `sk`'s protocol is selected.
#[inline(always)]
fn call_at(sk: u64, direction: u32) -> Option<NetlinkSocketCall> {
    let protocol = selected_protocol(sk)?;
    Some(NetlinkSocketCall {
        start_ns: 0,
        sk,
        protocol,
        direction,
    })
}

/// `netlink_unicast(ssk, skb, …)` entry (fentry): a datagram a traced thread sends from a user
/// socket is a request; the kernel's replies (from its sockets, `portid` 0) are taken where they
/// are received, so they are passed over before the protocol is read or counted.
#[inline(always)]
fn request_sent(ssk: u64, skb: u64) {
    let Some(pid_tgid) = traced_thread(ssk) else {
        return;
    };
    let portid: u32 = unsafe {
        bpf_probe_read_kernel((ssk as usize + offset(socket_offset::NLK_PORTID)) as *const u32)
    }
    .unwrap_or(0);
    if portid == 0 {
        return;
    }
    if let Some(call) = call_at(ssk, syscall::SENDMSG) {
        copy_datagram(pid_tgid, &call, skb);
    }
}

/// `skb_recv_datagram(sk, flags, …)` returned `skb` (fexit): a datagram a traced thread takes
/// from a netlink socket (a peek is counted only for those).
#[inline(always)]
fn datagram_taken(sk: u64, flags: u64, skb: u64) {
    if skb == 0 {
        return;
    }
    let Some(pid_tgid) = traced_thread(sk) else {
        return;
    };
    let family: u16 = unsafe {
        bpf_probe_read_kernel((sk as usize + offset(socket_offset::SOCK_FAMILY)) as *const u16)
    }
    .unwrap_or(0);
    // A peek before the protocol read: every route get of iproute2 makes one.
    if family as u64 != AF_NETLINK || peeking(flags) {
        return;
    }
    if let Some(call) = call_at(sk, syscall::RECVMSG) {
        copy_datagram(pid_tgid, &call, skb);
    }
}

/// `netlink_unicast(ssk, skb, …)` (kprobe): a datagram leaving the remembered socket is the
/// request.
#[inline(always)]
fn unicast(ssk: u64, skb: u64) {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    let Some(call) = (unsafe { NETLINK_SOCKET_CALLS.get(pid_tgid) }).copied() else {
        return;
    };
    if call.direction != syscall::SENDMSG || call.sk != ssk {
        return;
    }
    // Kept until netlink_sendmsg returns: the kernel handles the request inside this call, and
    // its route lookups count as part of it (the kernel's own reply leaves from another socket).
    copy_datagram(pid_tgid, &call, skb);
}

/// `skb_recv_datagram` returned `skb` inside a remembered `netlink_recvmsg` (kretprobe).
#[inline(always)]
fn received(skb: u64) {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    let Some(call) = (unsafe { NETLINK_SOCKET_CALLS.get(pid_tgid) }).copied() else {
        return;
    };
    if call.direction != syscall::RECVMSG {
        return;
    }
    crate::decision::end(&NETLINK_SOCKET_CALLS, pid_tgid);
    if skb != 0 {
        copy_datagram(pid_tgid, &call, skb);
    }
}

/// `netlink_sendmsg`/`netlink_recvmsg` return (kretprobes): forget the call (nothing was sent or taken).
#[inline(always)]
fn call_exit() {
    crate::decision::end(
        &NETLINK_SOCKET_CALLS,
        aya_ebpf::helpers::bpf_get_current_pid_tgid(),
    );
}

/// Copies `skb->data[..skb->len]` out as chunk records; the chunk that ends the datagram closes
/// the call too (LAST with the totals), as at the syscall layer, and a separate closing record
/// is sent only when that chunk could not be (a full ring buffer, more than
/// `SOCKET_MAX_CHUNKS` chunks, an empty datagram).
#[inline(always)]
fn copy_datagram(pid_tgid: u64, call: &NetlinkSocketCall, skb: u64) {
    let (Ok(data), Ok(len)) = (unsafe {
        (
            bpf_probe_read_kernel((skb as usize + offset(socket_offset::SKB_DATA)) as *const u64),
            bpf_probe_read_kernel((skb as usize + offset(socket_offset::SKB_LEN)) as *const u32),
        )
    }) else {
        return;
    };
    let Some(scratch) = SOCKET_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    let scratch = unsafe { &mut (*scratch).bytes };
    let hdr = scratch.as_mut_ptr() as *mut NetlinkChunkHeader;
    unsafe {
        let now = write_header(&mut (*hdr).header, KIND_NETLINK_CHUNK, pid_tgid);
        // A call made where its datagram is seen starts now (one clock read, not two).
        (*hdr).call_start_ns = if call.start_ns == 0 {
            now
        } else {
            call.start_ns
        };
        (*hdr).fd = -1;
        (*hdr).protocol = call.protocol;
        (*hdr).syscall = call.direction;
        (*hdr).ret = len as i32;
        (*hdr).total_len = 0;
    }
    let total = len as usize;
    let mut offset = 0usize;
    let mut captured = 0usize;
    let mut dropped = false;
    for _ in 0..SOCKET_MAX_CHUNKS {
        if offset >= total {
            break;
        }
        let left = total - offset;
        let n = if left > NETLINK_CHUNK_LEN {
            NETLINK_CHUNK_LEN
        } else {
            left
        };
        // Keep n in 1..=NETLINK_CHUNK_LEN in a form the verifier can follow.
        let n = ((n - 1) & (NETLINK_CHUNK_LEN - 1)) + 1;
        let payload =
            &mut scratch[NETLINK_CHUNK_HEADER_LEN..NETLINK_CHUNK_HEADER_LEN + NETLINK_CHUNK_LEN];
        let ok = unsafe {
            bpf_probe_read_kernel_buf((data as usize + offset) as *const u8, &mut payload[..n])
                .is_ok()
        };
        match send_chunk(
            scratch,
            hdr,
            offset as u64,
            n,
            ok,
            chunk_flags::SOCKET_LAYER,
            total as u64,
            captured as u64,
            dropped,
        ) {
            ChunkSent::Closed => return,
            ChunkSent::Lost => dropped = true,
            ChunkSent::Sent if ok => captured += n,
            ChunkSent::Sent => {}
        }
        offset += n;
    }
    close_call(
        scratch,
        hdr,
        offset as u64,
        chunk_flags::SOCKET_LAYER,
        total as u64,
        captured as u64,
        dropped,
    );
}

/// `netlink_unicast(ssk, skb, portid, nonblock)` entry (fentry): requests.
#[fentry]
pub fn netlink_unicast_fentry(ctx: FEntryContext) -> u32 {
    request_sent(ctx.arg(0), ctx.arg(1));
    0
}
/// `skb_recv_datagram(sk, flags, …)` return (fexit): the datagrams received.
#[fexit]
pub fn skb_recv_datagram_fexit(ctx: FExitContext) -> u32 {
    if let Ok(skb) = ctx.ret::<u64>() {
        datagram_taken(ctx.arg(0), ctx.arg(1), skb);
    }
    0
}

/// `netlink_sendmsg` entry (kprobe).
#[kprobe]
pub fn netlink_sendmsg_kprobe(ctx: ProbeContext) -> u32 {
    call_enter(ctx.arg(0).unwrap_or(0), syscall::SENDMSG, 0);
    0
}
/// `netlink_sendmsg` return (kretprobe).
#[kretprobe]
pub fn netlink_sendmsg_kretprobe(_ctx: RetProbeContext) -> u32 {
    call_exit();
    0
}
/// `netlink_recvmsg` entry (kprobe).
#[kprobe]
pub fn netlink_recvmsg_kprobe(ctx: ProbeContext) -> u32 {
    call_enter(
        ctx.arg(0).unwrap_or(0),
        syscall::RECVMSG,
        ctx.arg(3).unwrap_or(0),
    );
    0
}
/// `netlink_recvmsg` return (kretprobe).
#[kretprobe]
pub fn netlink_recvmsg_kretprobe(_ctx: RetProbeContext) -> u32 {
    call_exit();
    0
}
/// `netlink_unicast` entry (kprobe).
#[kprobe]
pub fn netlink_unicast_kprobe(ctx: ProbeContext) -> u32 {
    unicast(ctx.arg(0).unwrap_or(0), ctx.arg(1).unwrap_or(0));
    0
}
/// `skb_recv_datagram` return (kretprobe).
#[kretprobe]
pub fn skb_recv_datagram_kretprobe(ctx: RetProbeContext) -> u32 {
    received(ctx.ret::<u64>());
    0
}
