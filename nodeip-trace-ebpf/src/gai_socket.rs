//! `connect`/`getsockname` syscall tracepoints, recorded only while a getaddrinfo call is in
//! flight on the thread: glibc's RFC 6724 sort `connect()`s a UDP socket to each candidate and
//! `getsockname()`s it to learn the source the kernel would use. Those pairs are the exact
//! inputs of the sort (order before sorting, source per candidate, unusable candidates), so the
//! userspace explainer does not have to model the kernel's source choice. Every other
//! `connect`/`getsockname` costs one hash lookup.
//!
//! Minimum kernel: 4.7 (syscall tracepoints for BPF), 5.8 for ring buffers.
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_user_buf},
    macros::tracepoint,
    programs::TracePointContext,
};
use nodeip_trace_common::{
    counter, gai_socket_call, GaiSocketInflight, GaiSocketRecord, KIND_GAI_SOCKET, SOCKADDR_LEN,
};

use crate::{
    count, filter::traced, write_header, CONNECT_INFLIGHT, EVENTS, GAI_INFLIGHT,
    GAI_SOCKET_INFLIGHT,
};

/// Entry of `connect(fd, addr, len)` / `getsockname(fd, addr, lenp)`: remember the arguments
/// when the thread is inside getaddrinfo.
#[inline(always)]
fn enter(ctx: &TracePointContext, call: u32) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if unsafe { GAI_INFLIGHT.get(pid_tgid) }.is_none() {
        return 0;
    }
    let fd: u64 = unsafe { ctx.read_at(16) }.unwrap_or(u64::MAX);
    let addr: u64 = unsafe { ctx.read_at(24) }.unwrap_or(0);
    let inflight = GaiSocketInflight {
        addr,
        call,
        fd: fd as i32,
    };
    if GAI_SOCKET_INFLIGHT.insert(pid_tgid, inflight, 0).is_err() {
        count(counter::GAI_INFLIGHT_FULL, 1);
    }
    0
}

/// `syscalls:sys_enter_connect`: any traced thread's connect is a source-address decision (its
/// route lookups are kept); inside getaddrinfo it is also one of glibc's sort probes.
#[tracepoint]
pub fn gai_connect_enter(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if traced(pid_tgid) {
        let _ = crate::decision::begin(&CONNECT_INFLIGHT, pid_tgid, &1);
    }
    enter(&ctx, gai_socket_call::CONNECT)
}

/// `syscalls:sys_enter_getsockname`.
#[tracepoint]
pub fn gai_getsockname_enter(ctx: TracePointContext) -> u32 {
    enter(&ctx, gai_socket_call::GETSOCKNAME)
}

/// Exit of either call: copy the socket address (after the call, so getsockname's is filled).
#[tracepoint]
pub fn gai_socket_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    crate::decision::end(&CONNECT_INFLIGHT, pid_tgid);
    let Some(inflight) = (unsafe { GAI_SOCKET_INFLIGHT.get(pid_tgid) }).copied() else {
        return 0;
    };
    let _ = GAI_SOCKET_INFLIGHT.remove(pid_tgid);
    let ret: i64 = unsafe { ctx.read_at(16) }.unwrap_or(-1);
    let Some(mut entry) = EVENTS.reserve::<GaiSocketRecord>(0) else {
        count(counter::OTHER_RINGBUF_FULL, 1);
        return 0;
    };
    let rec = entry.as_mut_ptr();
    unsafe {
        write_header(&mut (*rec).header, KIND_GAI_SOCKET, pid_tgid);
        (*rec).call = inflight.call;
        (*rec).ret = ret as i32;
        (*rec).fd = inflight.fd;
        (*rec)._pad = 0;
        (*rec).sockaddr = [0; SOCKADDR_LEN];
        (*rec).sockaddr_len = 0;
        if inflight.addr != 0
            && bpf_probe_read_user_buf(inflight.addr as *const u8, &mut (*rec).sockaddr).is_ok()
        {
            (*rec).sockaddr_len = SOCKADDR_LEN as u32;
        }
    }
    entry.submit(crate::submit_flags());
    0
}
