//! `connect`/`getsockname`, recorded only while a getaddrinfo call is in flight on the thread:
//! glibc's and musl's RFC 6724 sorts `connect()` a UDP socket to each candidate and
//! `getsockname()` it to learn the source the kernel would use. Those pairs are the exact
//! inputs of the sort (order before sorting, source per candidate, unusable candidates), so the
//! userspace explainer does not have to model the kernel's source choice. Every other
//! `connect`/`getsockname` costs one hash lookup.
//!
//! Two ways in, chosen by the loader. Cgroup socket-address programs on the root cgroup
//! (`connect4/6`, `getsockname4/6`) run only inside those two calls: nothing else on the node
//! pays. A connect is seen there before the kernel carries it out, so its outcome is what
//! follows (a `getsockname` on the same socket: it worked). Syscall tracepoints are the
//! fallback (no cgroup v2, a kernel that refuses these helpers there): exact return values,
//! but while any syscall tracepoint is attached every system call of every task takes the
//! kernel's traced slow path (1.29× on a one-byte read/write loop, BENCHMARKS.md).
//!
//! Minimum kernel: 5.8 (ring buffers; cgroup `getsockname` hooks).
use aya_ebpf::{
    bindings::bpf_sock_addr,
    helpers::{bpf_get_current_pid_tgid, bpf_get_socket_cookie, bpf_probe_read_user_buf},
    macros::{cgroup_sock_addr, tracepoint},
    programs::{SockAddrContext, TracePointContext},
    EbpfContext,
};
use nodeip_trace_common::{
    counter, gai_socket_call, gai_socket_flags, GaiSocketInflight, GaiSocketRecord,
    KIND_GAI_SOCKET, SOCKADDR_LEN,
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
        (*rec).sockaddr = [0; SOCKADDR_LEN];
        (*rec).sockaddr_len = 0;
        (*rec).flags = 0;
        (*rec).socket_cookie = 0;
        if inflight.addr != 0
            && bpf_probe_read_user_buf(inflight.addr as *const u8, &mut (*rec).sockaddr).is_ok()
        {
            (*rec).sockaddr_len = SOCKADDR_LEN as u32;
        }
    }
    entry.submit(crate::submit_flags());
    0
}

/// A cgroup socket-address program lets every call go on: 1 (0 would refuse it with `EPERM`).
const ALLOW: i32 = 1;

/// The address family of a cgroup hook, as its context may be read: an IPv4 hook may read only
/// `user_ip4`, an IPv6 hook only `user_ip6`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum HookFamily {
    V4,
    V6,
}

/// Copies the hook's address into `dst` laid out as a `sockaddr_in`/`sockaddr_in6` (what the
/// syscall hooks copy); returns its length.
///
/// # Safety
/// `sa` is the program's context.
#[inline(always)]
unsafe fn copy_sockaddr(
    sa: *const bpf_sock_addr,
    family: HookFamily,
    dst: &mut [u8; SOCKADDR_LEN],
) -> u32 {
    // Context fields are read with one 4-byte load each, as the verifier rewrites them.
    let user_family = unsafe { core::ptr::read_volatile(&raw const (*sa).user_family) };
    let port = unsafe { core::ptr::read_volatile(&raw const (*sa).user_port) };
    dst[..2].copy_from_slice(&(user_family as u16).to_ne_bytes());
    // Network order in the low 16 bits: stored as they lie in memory.
    dst[2..4].copy_from_slice(&(port as u16).to_ne_bytes());
    match family {
        HookFamily::V4 => {
            let ip = unsafe { core::ptr::read_volatile(&raw const (*sa).user_ip4) };
            dst[4..8].copy_from_slice(&ip.to_ne_bytes());
            16
        }
        HookFamily::V6 => {
            for i in 0..4 {
                let word = unsafe { core::ptr::read_volatile(&raw const (*sa).user_ip6[i]) };
                dst[8 + 4 * i..12 + 4 * i].copy_from_slice(&word.to_ne_bytes());
            }
            SOCKADDR_LEN as u32
        }
    }
}

/// A cgroup hook's record of a call inside getaddrinfo.
#[inline(always)]
fn record_sock_addr(ctx: &SockAddrContext, family: HookFamily, call: u32, pid_tgid: u64) {
    let Some(mut entry) = EVENTS.reserve::<GaiSocketRecord>(0) else {
        count(counter::OTHER_RINGBUF_FULL, 1);
        return;
    };
    let rec = entry.as_mut_ptr();
    // SAFETY: a fresh reservation for a whole record; the context is this program's.
    unsafe {
        crate::zero_words(rec);
        crate::write_sock_addr_header(&mut (*rec).header, KIND_GAI_SOCKET, pid_tgid);
        (*rec).call = call;
        (*rec).fd = -1;
        (*rec).flags = gai_socket_flags::BEFORE_CALL;
        (*rec).socket_cookie = bpf_get_socket_cookie(ctx.as_ptr());
        (*rec).sockaddr_len = copy_sockaddr(ctx.sock_addr, family, &mut (*rec).sockaddr);
    }
    entry.submit(crate::submit_flags());
}

/// `connect()` of an IPv4 or IPv6 socket, at the cgroup hook: a traced thread's connect is a
/// source-address decision (the route lookups that follow on this CPU are kept); inside
/// getaddrinfo it is also one of the sort's probes.
#[inline(always)]
fn connect_hook(ctx: &SockAddrContext, family: HookFamily) -> i32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if traced(pid_tgid) {
        crate::decision::connect_began(pid_tgid);
    }
    if unsafe { GAI_INFLIGHT.get(pid_tgid) }.is_some() {
        record_sock_addr(ctx, family, gai_socket_call::CONNECT, pid_tgid);
    }
    ALLOW
}

/// `getsockname()` at the cgroup hook: the source the kernel bound, inside getaddrinfo.
#[inline(always)]
fn getsockname_hook(ctx: &SockAddrContext, family: HookFamily) -> i32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if unsafe { GAI_INFLIGHT.get(pid_tgid) }.is_some() {
        record_sock_addr(ctx, family, gai_socket_call::GETSOCKNAME, pid_tgid);
    }
    ALLOW
}

/// cgroup `connect4`.
#[cgroup_sock_addr(connect4)]
pub fn sort_connect4(ctx: SockAddrContext) -> i32 {
    connect_hook(&ctx, HookFamily::V4)
}

/// cgroup `connect6`.
#[cgroup_sock_addr(connect6)]
pub fn sort_connect6(ctx: SockAddrContext) -> i32 {
    connect_hook(&ctx, HookFamily::V6)
}

/// cgroup `getsockname4`.
#[cgroup_sock_addr(getsockname4)]
pub fn sort_getsockname4(ctx: SockAddrContext) -> i32 {
    getsockname_hook(&ctx, HookFamily::V4)
}

/// cgroup `getsockname6`.
#[cgroup_sock_addr(getsockname6)]
pub fn sort_getsockname6(ctx: SockAddrContext) -> i32 {
    getsockname_hook(&ctx, HookFamily::V6)
}
