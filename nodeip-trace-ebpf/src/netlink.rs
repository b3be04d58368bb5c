//! Netlink traffic of every process from tracepoints (no kprobes, no nlmon needed): on kernels
//! with `sock:sock_{send,recv}_length` (>= 6.3) those alone ([`sock_capture`]); otherwise the
//! syscall tracepoints, as follows.
//!
//! `socket(AF_NETLINK)` results and a start-up scan by userspace fill `NETLINK_FDS`; a send/recv
//! on a known fd is remembered at syscall entry, confirmed as AF_NETLINK by
//! `sock:sock_{send,recv}_length` (kernel >= 6.3; older kernels trust the fd table), and copied in
//! chunks at syscall exit. Non-netlink syscalls cost one hash lookup at entry and one at exit.
//!
//! Minimum kernel: 5.8 (ring buffer); 6.3 for the sock tracepoints used to confirm sockets.
use aya_ebpf::{
    helpers::{
        bpf_ktime_get_ns, bpf_probe_read_kernel, bpf_probe_read_user, bpf_probe_read_user_buf,
    },
    macros::{raw_tracepoint, tracepoint},
    maps::ProgramArray,
    programs::{RawTracePointContext, TracePointContext},
    EbpfContext, Global,
};
use nodeip_trace_common::{
    counter, socket_offset, syscall, NetlinkChunkHeader, NetlinkInflight, KIND_NETLINK_CHUNK,
    KIND_UNKNOWN_NETLINK_SOCKET, NETLINK_CHUNK_HEADER_LEN, NETLINK_CHUNK_LEN, NETLINK_MAX_IOV,
};

use crate::netlink_capture::{
    close_call, offset, peeking, protocol_selected, send_chunk, ChunkSent, MSG_PEEK,
};
use crate::{
    count, filter::traced, write_header, ChunkState, CHUNK_PROGRAMS, CHUNK_STATE, EVENTS,
    NETLINK_FDS, NETLINK_INFLIGHT, RAW_CHUNK_PROGRAMS, SCRATCH, SOCKET_INFLIGHT,
};

/// 1 when `sock:sock_{send,recv}_length` are attached and confirm each socket's family.
#[unsafe(no_mangle)]
static CONFIRM_WITH_SOCK_TP: Global<u32> = Global::new(1);

/// The netlink socket family.
pub(crate) const AF_NETLINK: u64 = 16;

/// `socket(family, type, protocol)` entry: remember AF_NETLINK requests.
#[tracepoint]
pub fn socket_enter(ctx: TracePointContext) -> u32 {
    let family: u64 = unsafe { ctx.read_at(16) }.unwrap_or(0);
    if family != AF_NETLINK {
        return 0;
    }
    let protocol: u64 = unsafe { ctx.read_at(32) }.unwrap_or(0);
    let _ = SOCKET_INFLIGHT.insert(
        aya_ebpf::helpers::bpf_get_current_pid_tgid(),
        protocol as u32,
        0,
    );
    0
}

/// `socket` exit: record the new fd's netlink protocol.
#[tracepoint]
pub fn socket_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    let Some(protocol) = (unsafe { SOCKET_INFLIGHT.get(pid_tgid) }).copied() else {
        return 0;
    };
    let _ = SOCKET_INFLIGHT.remove(pid_tgid);
    let fd: i64 = unsafe { ctx.read_at(16) }.unwrap_or(-1);
    if fd >= 0 {
        let _ = NETLINK_FDS.insert(((pid_tgid >> 32) << 32) | fd as u64, protocol, 0);
    }
    0
}

#[inline(always)]
fn io_enter(ctx: &TracePointContext, call: u32) -> u32 {
    let fd: u64 = unsafe { ctx.read_at(16) }.unwrap_or(u64::MAX);
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    let key = ((pid_tgid >> 32) << 32) | (fd & 0xffff_ffff);
    let Some(protocol) = (unsafe { NETLINK_FDS.get(key) }).copied() else {
        return 0;
    };
    if !traced(pid_tgid) {
        return 0;
    }
    if !protocol_selected(protocol) {
        count(counter::NETLINK_FAMILY_FILTERED, 1);
        return 0;
    }
    let buf: u64 = unsafe { ctx.read_at(24) }.unwrap_or(0);
    let (size, flags): (u64, u64) = match call {
        syscall::SENDMSG | syscall::RECVMSG => (0, unsafe { ctx.read_at(32) }.unwrap_or(0)),
        _ => (
            unsafe { ctx.read_at(32) }.unwrap_or(0),
            unsafe { ctx.read_at(40) }.unwrap_or(0),
        ),
    };
    if (call == syscall::RECVMSG || call == syscall::RECVFROM) && peeking(flags) {
        return 0;
    }
    let inflight = NetlinkInflight {
        start_ns: unsafe { bpf_ktime_get_ns() },
        buf,
        size,
        fd: fd as i32,
        syscall: call,
        protocol,
        confirmed: if CONFIRM_WITH_SOCK_TP.load() != 0 {
            0
        } else {
            1
        },
    };
    if crate::decision::begin(&NETLINK_INFLIGHT, pid_tgid, &inflight).is_err() {
        count(counter::NETLINK_INFLIGHT_FULL, 1);
    }
    0
}

/// `sock:sock_send_length` / `sock_recv_length`: confirm the in-flight call is on AF_NETLINK,
/// and report netlink sockets we did not know about.
#[inline(always)]
fn sock_length(ctx: &TracePointContext) -> u32 {
    let family: u16 = unsafe { ctx.read_at(16) }.unwrap_or(0);
    if family as u64 != AF_NETLINK {
        return 0;
    }
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    match NETLINK_INFLIGHT.get_ptr_mut(pid_tgid) {
        Some(inflight) => unsafe { (*inflight).confirmed = 1 },
        None => {
            if !traced(pid_tgid) {
                return 0;
            }
            let protocol: u16 = unsafe { ctx.read_at(18) }.unwrap_or(0);
            let flags: i32 = unsafe { ctx.read_at(24) }.unwrap_or(0);
            if !protocol_selected(protocol as u32) || flags as u64 & MSG_PEEK != 0 {
                return 0;
            }
            count(counter::NETLINK_UNKNOWN_SOCKET, 1);
            if let Some(mut e) = EVENTS.reserve::<nodeip_trace_common::EventHeader>(0) {
                unsafe { write_header(e.as_mut_ptr(), KIND_UNKNOWN_NETLINK_SOCKET, pid_tgid) };
                e.submit(crate::submit_flags());
            } else {
                count(counter::OTHER_RINGBUF_FULL, 1);
            }
        }
    }
    0
}

/// x86-64 `struct user_msghdr` prefix.
#[repr(C)]
struct UserMsghdr {
    msg_name: u64,
    msg_namelen: i32,
    _pad: i32,
    msg_iov: u64,
    msg_iovlen: u64,
}

/// `struct iovec`.
#[repr(C)]
struct Iovec {
    base: u64,
    len: u64,
}

#[inline(always)]
fn io_exit(ctx: &TracePointContext) -> u32 {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    let Some(inflight) = (unsafe { NETLINK_INFLIGHT.get(pid_tgid) }).copied() else {
        return 0;
    };
    crate::decision::end(&NETLINK_INFLIGHT, pid_tgid);
    let ret: i64 = unsafe { ctx.read_at(16) }.unwrap_or(-1);
    if inflight.confirmed == 0 {
        // The fd is no longer a netlink socket (closed and reused): forget it.
        if ret >= 0 {
            let _ = NETLINK_FDS.remove(((pid_tgid >> 32) << 32) | inflight.fd as u32 as u64);
        }
        return 0;
    }
    let receiving = inflight.syscall == syscall::RECVMSG || inflight.syscall == syscall::RECVFROM;
    if receiving && ret <= 0 {
        return 0;
    }
    capture_call(ctx, &CHUNK_PROGRAMS, pid_tgid, &inflight, ret)
}

/// Copies the buffers of a finished netlink call (`ret`: what it returned) as chunk records:
/// the header, then the chunk programs (`programs`, of the caller's program type) by tail call.
#[inline(always)]
fn capture_call<C: EbpfContext>(
    ctx: &C,
    programs: &ProgramArray,
    pid_tgid: u64,
    inflight: &NetlinkInflight,
    ret: i64,
) -> u32 {
    let (Some(scratch), Some(state)) = (SCRATCH.get_ptr_mut(0), CHUNK_STATE.get_ptr_mut(0)) else {
        return 0;
    };
    let hdr = unsafe { (*scratch).bytes.as_mut_ptr() } as *mut NetlinkChunkHeader;
    unsafe {
        let now = write_header(&mut (*hdr).header, KIND_NETLINK_CHUNK, pid_tgid);
        // 0: the call is taken whole at its end (sock tracepoints), so it starts now.
        (*hdr).call_start_ns = if inflight.start_ns == 0 {
            now
        } else {
            inflight.start_ns
        };
        (*hdr).fd = inflight.fd;
        (*hdr).protocol = inflight.protocol;
        (*hdr).syscall = inflight.syscall;
        (*hdr).ret = ret as i32;
        (*hdr).total_len = 0;
    }
    // Every count starts at zero (word stores; see `zero_words`).
    unsafe { crate::zero_words(state) };
    let st = unsafe { &mut *state };
    // The iovec list: one entry for sendto/recvfrom, the msghdr's for sendmsg/recvmsg.
    match inflight.syscall {
        syscall::SENDMSG | syscall::RECVMSG => {
            let m = unsafe { bpf_probe_read_user(inflight.buf as *const UserMsghdr) };
            st.iov_ptr = m.as_ref().map(|m| m.msg_iov).unwrap_or(0);
            st.iov_count = m.map(|m| m.msg_iovlen).unwrap_or(0);
        }
        _ => {
            st.iov_count = 1;
            st.single_base = inflight.buf;
            st.single_len = inflight.size;
        }
    }
    // Bytes the call moved; a failed send still shows the request it tried to send.
    st.total = if ret >= 0 { ret as u64 } else { u64::MAX };
    unsafe { programs.tail_call(ctx, 0) };
    // The tail call failed (not installed): close the call with nothing captured.
    finish_call(st, unsafe { &mut (*scratch).bytes }, hdr);
    0
}

/// Closes the call with a zero-length record carrying its totals (see [`close_call`]).
#[inline(always)]
fn finish_call(st: &mut ChunkState, scratch: &mut [u8], hdr: *mut NetlinkChunkHeader) {
    // A failed send's total is what it tried to send.
    let total = if st.total == u64::MAX {
        st.wanted
    } else {
        st.total
    };
    close_call(
        scratch,
        hdr,
        st.offset,
        0,
        total,
        st.captured,
        st.dropped != 0,
    );
}

/// One chunk of the current call per invocation; tail-calls itself for the next one, so the
/// verifier checks a short straight-line program instead of an unrolled loop. The kernel's tail
/// call limit (33) bounds a call at 32 chunks; beyond that the call is flagged CUT.
#[tracepoint]
pub fn netlink_chunk(ctx: TracePointContext) -> u32 {
    chunk_step(&ctx, &CHUNK_PROGRAMS)
}

/// [`netlink_chunk`] for the raw tracepoint capture.
#[raw_tracepoint]
pub fn netlink_chunk_raw(ctx: RawTracePointContext) -> i32 {
    chunk_step(&ctx, &RAW_CHUNK_PROGRAMS) as i32
}

/// One step of [`netlink_chunk`]: the next chunk, then a tail call through `programs`.
#[inline(always)]
fn chunk_step<C: EbpfContext>(ctx: &C, programs: &ProgramArray) -> u32 {
    let (Some(scratch), Some(state)) = (SCRATCH.get_ptr_mut(0), CHUNK_STATE.get_ptr_mut(0)) else {
        return 0;
    };
    let st = unsafe { &mut *state };
    let scratch = unsafe { &mut (*scratch).bytes };
    let hdr = scratch.as_mut_ptr() as *mut NetlinkChunkHeader;
    if st.iov_index >= st.iov_count
        || st.iov_index >= NETLINK_MAX_IOV as u64
        || st.offset >= st.total
    {
        finish_call(st, scratch, hdr);
        return 0;
    }
    let iov = if st.iov_ptr == 0 {
        Iovec {
            base: st.single_base,
            len: st.single_len,
        }
    } else {
        match unsafe {
            bpf_probe_read_user((st.iov_ptr as *const Iovec).wrapping_add(st.iov_index as usize))
        } {
            Ok(v) => v,
            Err(_) => {
                finish_call(st, scratch, hdr);
                return 0;
            }
        }
    };
    let in_iov = iov.len.saturating_sub(st.iov_offset);
    let left = st.total - st.offset;
    let seg = if in_iov < left { in_iov } else { left };
    if seg == 0 {
        st.iov_index += 1;
        st.iov_offset = 0;
    } else {
        let n = if seg > NETLINK_CHUNK_LEN as u64 {
            NETLINK_CHUNK_LEN as u64
        } else {
            seg
        };
        // Keep n in 1..=NETLINK_CHUNK_LEN in a form the verifier can follow.
        let n = (((n - 1) & (NETLINK_CHUNK_LEN as u64 - 1)) + 1) as usize;
        let payload =
            &mut scratch[NETLINK_CHUNK_HEADER_LEN..NETLINK_CHUNK_HEADER_LEN + NETLINK_CHUNK_LEN];
        let ok = unsafe {
            bpf_probe_read_user_buf((iov.base + st.iov_offset) as *const u8, &mut payload[..n])
                .is_ok()
        };
        let sent = send_chunk(
            scratch,
            hdr,
            st.offset,
            n,
            ok,
            0,
            st.total,
            st.captured,
            st.dropped != 0,
        );
        match sent {
            ChunkSent::Closed => return 0,
            ChunkSent::Lost => st.dropped = 1,
            ChunkSent::Sent if ok => st.captured += n as u64,
            ChunkSent::Sent => {}
        }
        st.wanted += n as u64;
        st.offset += n as u64;
        st.iov_offset += n as u64;
        if n as u64 == seg {
            st.iov_index += 1;
            st.iov_offset = 0;
        }
    }
    unsafe { programs.tail_call(ctx, 0) };
    // Tail-call limit reached: the rest of the call is not captured.
    finish_call(st, scratch, hdr);
    0
}

/// The syscall number and first three arguments of the current task's syscall, as its entry
/// saved them in `pt_regs` (`orig_rax`, `rdi`, `rsi`, `rdx`).
#[repr(C)]
pub struct SyscallArgs {
    /// Third argument (`pt_regs.dx`).
    pub rdx: u64,
    /// Second argument (`pt_regs.si`).
    pub rsi: u64,
    /// First argument (`pt_regs.di`).
    pub rdi: u64,
    /// The syscall number (`pt_regs.orig_ax`).
    pub orig_rax: u64,
}

/// The current task's syscall number and arguments ([`SyscallArgs`]) via `bpf_task_pt_regs`
/// (kernel >= 5.15, needs BTF); `None` without that helper. The four words are plain loads from
/// the BTF `pt_regs` pointer the helper returns (three times per route get on the hot path: no
/// helper call for the read).
#[inline(always)]
pub fn syscall_regs() -> Option<SyscallArgs> {
    if !crate::task_btf() {
        return None;
    }
    use aya_ebpf::bindings::pt_regs;
    // SAFETY: `bpf_task_pt_regs` returns a BTF `pt_regs` pointer; the verifier checks each
    // load's offset against that type and makes the loads faulting-safe.
    unsafe {
        let task = crate::current_task_btf() as *mut aya_ebpf::bindings::task_struct;
        let regs = aya_ebpf::helpers::generated::bpf_task_pt_regs(task) as *const pt_regs;
        Some(SyscallArgs {
            rdx: core::ptr::read_volatile(&raw const (*regs).rdx),
            rsi: core::ptr::read_volatile(&raw const (*regs).rsi),
            rdi: core::ptr::read_volatile(&raw const (*regs).rdi),
            orig_rax: core::ptr::read_volatile(&raw const (*regs).orig_rax),
        })
    }
}

/// Whether the current thread is inside a send syscall (`sendmsg`, `sendto`, `write`): with no
/// destination port in a route lookup, that is a netlink request being answered (a route get, a
/// gateway check of a new route), since datagrams that are routed have one.
#[inline(always)]
pub fn in_send_syscall() -> bool {
    syscall_regs().is_some_and(|r| matches!(r.orig_rax, nr::SENDMSG | nr::SENDTO | nr::WRITE))
}

/// x86-64 syscall numbers of the calls a netlink buffer can move through.
mod nr {
    pub const READ: u64 = 0;
    pub const WRITE: u64 = 1;
    pub const SENDTO: u64 = 44;
    pub const RECVFROM: u64 = 45;
    pub const SENDMSG: u64 = 46;
    pub const RECVMSG: u64 = 47;
}

/// `sock:sock_send_length` / `sock_recv_length` as the whole capture (kernel >= 6.3): the
/// tracepoint fires in `sock_sendmsg`/`sock_recvmsg` after the data moved, with the socket's
/// family and protocol, so non-netlink sockets cost one comparison and no syscall tracepoint is
/// needed; the buffers come from the syscall's own arguments in the task's user registers
/// (`bpf_task_pt_regs`, kernel >= 5.15). Calls whose buffers cannot be found that way
/// (sendmmsg/recvmmsg, io_uring) are counted, not captured.
///
/// Taken at the raw tracepoints where the BTF gave the socket offsets (no tracepoint record is
/// filled for every socket send and receive on the node), else at the classic ones.
#[inline(always)]
fn sock_capture<C: EbpfContext>(
    ctx: &C,
    programs: &ProgramArray,
    receiving: bool,
    read_protocol: impl Fn() -> u32,
    ret: i64,
    flags: u64,
) -> u32 {
    // A peek first: every route get of iproute2 makes one before its receive, and it needs
    // neither the filters nor the protocol read.
    if receiving && (peeking(flags) || ret <= 0) {
        return 0;
    }
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    if !traced(pid_tgid) {
        return 0;
    }
    let protocol = read_protocol();
    if !protocol_selected(protocol) {
        count(counter::NETLINK_FAMILY_FILTERED, 1);
        return 0;
    }
    let Some(regs) = syscall_regs() else {
        count(counter::NETLINK_CALL_UNSUPPORTED, 1);
        return 0;
    };
    let call = match (regs.orig_rax, receiving) {
        (nr::SENDMSG, false) => syscall::SENDMSG,
        (nr::SENDTO | nr::WRITE, false) => syscall::SENDTO,
        (nr::RECVMSG, true) => syscall::RECVMSG,
        (nr::RECVFROM | nr::READ, true) => syscall::RECVFROM,
        _ => {
            count(counter::NETLINK_CALL_UNSUPPORTED, 1);
            return 0;
        }
    };
    let inflight = NetlinkInflight {
        start_ns: 0,
        buf: regs.rsi,
        size: regs.rdx,
        fd: regs.rdi as i32,
        syscall: call,
        protocol,
        confirmed: 1,
    };
    capture_call(ctx, programs, pid_tgid, &inflight, ret)
}

/// [`sock_capture`] from a classic `sock:sock_{send,recv}_length` record.
#[inline(always)]
fn sock_capture_tracepoint(ctx: &TracePointContext, receiving: bool) -> u32 {
    let family: u16 = unsafe { ctx.read_at(16) }.unwrap_or(0);
    if family as u64 != AF_NETLINK {
        return 0;
    }
    let ret = unsafe { ctx.read_at::<i32>(20) }.unwrap_or(-1) as i64;
    let flags = unsafe { ctx.read_at::<i32>(24) }.unwrap_or(0) as u64;
    let protocol = || unsafe { ctx.read_at::<u16>(18) }.unwrap_or(0) as u32;
    sock_capture(ctx, &CHUNK_PROGRAMS, receiving, protocol, ret, flags)
}

/// [`sock_capture`] from the raw tracepoint's arguments `(struct sock *sk, int ret, int flags)`.
#[inline(always)]
fn sock_capture_raw(ctx: &RawTracePointContext, receiving: bool) -> i32 {
    let sk: *const u8 = ctx.arg(0);
    let at = |index| sk.wrapping_add(offset(index));
    let family = unsafe { bpf_probe_read_kernel(at(socket_offset::SOCK_FAMILY) as *const u16) };
    if family.map(u64::from) != Ok(AF_NETLINK) {
        return 0;
    }
    let ret = ctx.arg::<u64>(1) as i32 as i64;
    let flags = ctx.arg::<u64>(2) as i32 as u64;
    let protocol = || {
        unsafe { bpf_probe_read_kernel(at(socket_offset::SOCK_PROTOCOL) as *const u16) }
            .map(u32::from)
            .unwrap_or(0)
    };
    sock_capture(ctx, &RAW_CHUNK_PROGRAMS, receiving, protocol, ret, flags) as i32
}

/// `sock:sock_send_length`, capturing (see [`sock_capture`]).
#[tracepoint]
pub fn sock_send_capture(ctx: TracePointContext) -> u32 {
    sock_capture_tracepoint(&ctx, false)
}

/// `sock:sock_recv_length`, capturing (see [`sock_capture`]).
#[tracepoint]
pub fn sock_recv_capture(ctx: TracePointContext) -> u32 {
    sock_capture_tracepoint(&ctx, true)
}

/// Raw `sock_send_length`, capturing (see [`sock_capture`]).
#[raw_tracepoint(tracepoint = "sock_send_length")]
pub fn sock_send_capture_raw(ctx: RawTracePointContext) -> i32 {
    sock_capture_raw(&ctx, false)
}

/// Raw `sock_recv_length`, capturing (see [`sock_capture`]).
#[raw_tracepoint(tracepoint = "sock_recv_length")]
pub fn sock_recv_capture_raw(ctx: RawTracePointContext) -> i32 {
    sock_capture_raw(&ctx, true)
}

/// `sendto` entry.
#[tracepoint]
pub fn sendto_enter(ctx: TracePointContext) -> u32 {
    io_enter(&ctx, syscall::SENDTO)
}
/// `sendmsg` entry.
#[tracepoint]
pub fn sendmsg_enter(ctx: TracePointContext) -> u32 {
    io_enter(&ctx, syscall::SENDMSG)
}
/// `recvfrom` entry.
#[tracepoint]
pub fn recvfrom_enter(ctx: TracePointContext) -> u32 {
    io_enter(&ctx, syscall::RECVFROM)
}
/// `recvmsg` entry.
#[tracepoint]
pub fn recvmsg_enter(ctx: TracePointContext) -> u32 {
    io_enter(&ctx, syscall::RECVMSG)
}
/// Exit of any of the four.
#[tracepoint]
pub fn netlink_io_exit(ctx: TracePointContext) -> u32 {
    io_exit(&ctx)
}
/// `sock:sock_send_length`.
#[tracepoint]
pub fn sock_send_length(ctx: TracePointContext) -> u32 {
    sock_length(&ctx)
}
/// `sock:sock_recv_length`.
#[tracepoint]
pub fn sock_recv_length(ctx: TracePointContext) -> u32 {
    sock_length(&ctx)
}
