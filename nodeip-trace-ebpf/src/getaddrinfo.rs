//! uprobe/uretprobe on libc `getaddrinfo` (glibc and musl share the `struct addrinfo` layout).
//!
//! Minimum kernel: 4.17 for uprobes via perf_event_open, 5.8 for ring buffers.
use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, bpf_probe_read_user, bpf_probe_read_user_str_bytes},
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use nodeip_trace_common::{
    counter, gai_flags, AddrinfoEntry, EventHeader, GetaddrinfoInflight, GetaddrinfoRecord,
    GAI_MAX_RESULTS, GAI_SOCKADDR_LEN, GETADDRINFO_FIXED_LEN, KIND_GETADDRINFO,
    KIND_GETADDRINFO_ENTRY,
};

use crate::{
    count, filter::traced, read_user_prefix, write_header, EVENTS, GAI_INFLIGHT, GAI_SCRATCH,
    GO_CGO_THREADS,
};

/// x86-64 glibc/musl `struct addrinfo`.
#[repr(C)]
struct Addrinfo {
    ai_flags: i32,
    ai_family: i32,
    ai_socktype: i32,
    ai_protocol: i32,
    ai_addrlen: u32,
    _pad: u32,
    ai_addr: u64,
    ai_canonname: u64,
    ai_next: u64,
}

/// `getaddrinfo(node, service, hints, res)` entry: remember the arguments.
#[uprobe]
pub fn getaddrinfo_entry(ctx: ProbeContext) -> u32 {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    if !traced(pid_tgid) {
        return 0;
    }
    let inflight = GetaddrinfoInflight {
        start_ns: unsafe { bpf_ktime_get_ns() },
        node: ctx.arg::<u64>(0).unwrap_or(0),
        service: ctx.arg::<u64>(1).unwrap_or(0),
        hints: ctx.arg::<u64>(2).unwrap_or(0),
        res: ctx.arg::<u64>(3).unwrap_or(0),
    };
    if crate::decision::begin(&GAI_INFLIGHT, pid_tgid, &inflight).is_err() {
        count(counter::GAI_INFLIGHT_FULL, 1);
        return 0;
    }
    // A small entry marker lets userspace group what the call does (netlink dumps, route
    // lookups) under it while it runs.
    if let Some(mut e) = EVENTS.reserve::<EventHeader>(0) {
        unsafe { write_header(e.as_mut_ptr(), KIND_GETADDRINFO_ENTRY, pid_tgid) };
        e.submit(crate::submit_flags());
    } else {
        count(counter::GAI_RINGBUF_FULL, 1);
    }
    0
}

/// `getaddrinfo` return in glibc: see [`gai_return`].
#[uretprobe]
pub fn getaddrinfo_return_glibc(ctx: RetProbeContext) -> u32 {
    gai_return(&ctx, nodeip_trace_common::resolver::GLIBC)
}

/// `getaddrinfo` return in musl (shared or linked into a static executable): see [`gai_return`].
#[uretprobe]
pub fn getaddrinfo_return_musl(ctx: RetProbeContext) -> u32 {
    gai_return(&ctx, nodeip_trace_common::resolver::MUSL)
}

/// `getaddrinfo` return: copy the arguments and the result list, in order, to the ring buffer,
/// naming the C library (`resolver`) whose getaddrinfo this program is attached to — one program
/// per library rather than an attach cookie, which kernels before 5.15 lack. The record is built
/// in a per-CPU scratch and sent up to its last result.
#[inline(always)]
fn gai_return(ctx: &RetProbeContext, resolver: u32) -> u32 {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    let Some(inflight) = (unsafe { GAI_INFLIGHT.get(pid_tgid) }).copied() else {
        return 0;
    };
    crate::decision::end(&GAI_INFLIGHT, pid_tgid);
    crate::gai_conf::call_returned(pid_tgid);
    let Some(rec) = GAI_SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    let mut n: u32 = 0;
    unsafe {
        write_header(&mut (*rec).header, KIND_GETADDRINFO, pid_tgid);
        (*rec).start_ns = inflight.start_ns;
        (*rec).ret = ctx.ret::<i64>() as i32;
        (*rec).count = 0;
        (*rec).resolver = resolver;
        // A Go program's `net` marked this thread on its way into libc (cgo).
        if GO_CGO_THREADS.get(&pid_tgid).is_some() {
            (*rec).resolver |= nodeip_trace_common::resolver::VIA_GO_CGO;
            let _ = GO_CGO_THREADS.remove(&pid_tgid);
        }
        let mut flags = 0;
        (*rec).node[0] = 0;
        (*rec).service[0] = 0;
        if inflight.node == 0 {
            flags |= gai_flags::NODE_NULL;
        } else if bpf_probe_read_user_str_bytes(inflight.node as *const u8, &mut (*rec).node)
            .is_err()
        {
            (*rec).node[0] = 0;
        }
        if inflight.service == 0 {
            flags |= gai_flags::SERVICE_NULL;
        } else if bpf_probe_read_user_str_bytes(inflight.service as *const u8, &mut (*rec).service)
            .is_err()
        {
            (*rec).service[0] = 0;
        }
        (*rec).hints_flags = 0;
        (*rec).hints_family = 0;
        (*rec).hints_socktype = 0;
        (*rec).hints_protocol = 0;
        if inflight.hints == 0 {
            flags |= gai_flags::HINTS_NULL;
        } else if let Ok(h) = bpf_probe_read_user(inflight.hints as *const Addrinfo) {
            (*rec).hints_flags = h.ai_flags;
            (*rec).hints_family = h.ai_family;
            (*rec).hints_socktype = h.ai_socktype;
            (*rec).hints_protocol = h.ai_protocol;
        }
        let mut next: u64 = 0;
        if (*rec).ret == 0 && inflight.res != 0 {
            next = bpf_probe_read_user(inflight.res as *const u64).unwrap_or(0);
        }
        for i in 0..GAI_MAX_RESULTS {
            if next == 0 {
                break;
            }
            let Ok(ai) = bpf_probe_read_user(next as *const Addrinfo) else {
                flags |= gai_flags::RESULTS_UNREADABLE;
                break;
            };
            let out = &mut (*rec).results[i];
            out.family = ai.ai_family as u32;
            out.socktype = ai.ai_socktype as u32;
            out.protocol = ai.ai_protocol as u32;
            // The socket address as written, decoded in userspace: one read, its size bounded
            // by a mask and no branch, so a result costs the verifier one path. A NULL or
            // unreadable address reads as zeros (the kernel clears what it could not copy).
            out.sockaddr = [0; GAI_SOCKADDR_LEN];
            let len = ai.ai_addrlen & (GAI_SOCKADDR_LEN as u32 - 1);
            out.addrlen = len;
            // `len` is below GAI_SOCKADDR_LEN, as read_user_prefix needs.
            let _ = read_user_prefix(&mut out.sockaddr, ai.ai_addr, len);
            n += 1;
            next = ai.ai_next;
        }
        if next != 0 && n as usize == GAI_MAX_RESULTS {
            flags |= gai_flags::RESULTS_CUT;
            count(counter::GAI_RESULTS_CUT, 1);
        }
        (*rec).count = n;
        (*rec).flags = flags;
    }
    // `n` is at most GAI_MAX_RESULTS; the comparison keeps that visible to the verifier.
    let n = if n as usize > GAI_MAX_RESULTS {
        GAI_MAX_RESULTS
    } else {
        n as usize
    };
    let len = GETADDRINFO_FIXED_LEN + n * core::mem::size_of::<AddrinfoEntry>();
    // SAFETY: the scratch value is a whole GetaddrinfoRecord, `len` bytes of it at most.
    let bytes = unsafe {
        core::slice::from_raw_parts(rec as *const u8, core::mem::size_of::<GetaddrinfoRecord>())
    };
    if EVENTS
        .output::<[u8]>(&bytes[..len], crate::submit_flags())
        .is_err()
    {
        count(counter::GAI_RINGBUF_FULL, 1);
    }
    0
}
