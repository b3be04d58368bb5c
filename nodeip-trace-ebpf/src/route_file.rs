//! Route files: `/proc/net/route` and `/proc/net/ipv6_route` as the kernel lists them to a
//! reader. kubelet's default-route fallback (apimachinery's `ChooseHostInterface`) reads these
//! files, not netlink, so no netlink capture sees what it was told.
//!
//! The files' show functions (`fib_route_seq_show`, one call per route prefix, which may list
//! several routes; `ipv6_route_seq_show`, one call per route) are probed at entry and return,
//! like the netlink handlers: the entry remembers how much of the file's buffer was written, the
//! return copies what the call added. Only text that lists a default route (destination all
//! zeros) is sent, so a node with thousands of routes costs one comparison per prefix. A call
//! whose line did not fit (the buffer is full: the kernel writes it again into a bigger one) is
//! left for that second call. Offsets come from the kernel's BTF, as the handlers' do.
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_kernel, bpf_probe_read_kernel_buf},
    macros::{fentry, fexit, kprobe, kretprobe},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext},
};
use nodeip_trace_common::{
    counter, handler_function as f, handler_offset as o, hook_mode, route_file_flags,
    RouteFileRecord, KIND_ROUTE_FILE, ROUTE_FILE_TEXT_LEN,
};

use crate::handler::{offset, pointer_at};
use crate::{count, filter::traced, write_header, EVENTS, ROUTE_FILE_INFLIGHT, ROUTE_FILE_SCRATCH};

/// Reads the `u64` at `base + offset(index)`.
#[inline(always)]
fn u64_at(base: u64, index: usize) -> Option<u64> {
    let off = offset(index)?;
    unsafe { bpf_probe_read_kernel((base as usize + off) as *const u64) }.ok()
}

/// Show entry: remembers the file and how much of its buffer is written, keyed by thread.
#[inline(always)]
fn show_entry(seq: u64) {
    let pid_tgid = bpf_get_current_pid_tgid();
    if seq == 0 || !traced(pid_tgid) {
        return;
    }
    let Some(written) = u64_at(seq, o::SEQ_FILE_COUNT) else {
        return;
    };
    if ROUTE_FILE_INFLIGHT
        .insert(&pid_tgid, &[seq, written], 0)
        .is_err()
    {
        count(counter::HANDLER_INFLIGHT_FULL, 1);
    }
}

/// Whether `text` (its first `len` bytes valid) starts with a default route's line: for
/// `/proc/net/route` the field after the device name is `00000000`; for `/proc/net/ipv6_route`
/// the destination is 32 zeros and its prefix length `00`.
#[inline(always)]
fn lists_default_route(function: u32, text: &[u8; ROUTE_FILE_TEXT_LEN], len: usize) -> bool {
    let zeros = |from: usize, n: usize| {
        for i in 0..n {
            if text.get(from + i) != Some(&b'0') {
                return false;
            }
        }
        true
    };
    if function == f::IPV6_ROUTE_SEQ_SHOW {
        return len > 35 && zeros(0, 32) && text.get(32) == Some(&b' ') && zeros(33, 2);
    }
    // A device name is at most 15 bytes: its tab is within the first 16.
    let mut tab = None;
    for i in 0..16 {
        if text.get(i) == Some(&b'\t') {
            tab = Some(i);
            break;
        }
    }
    let Some(tab) = tab else {
        return false;
    };
    len > tab + 9 && zeros(tab + 1, 8) && text.get(tab + 9) == Some(&b'\t')
}

/// Show return: sends what the call wrote when it lists a default route.
#[inline(always)]
fn show_exit(function: u32, mode: u32) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(&[seq, before]) = (unsafe { ROUTE_FILE_INFLIGHT.get(&pid_tgid) }) else {
        return;
    };
    let _ = ROUTE_FILE_INFLIGHT.remove(&pid_tgid);
    let (Some(buf), Some(size), Some(after)) = (
        pointer_at(seq, o::SEQ_FILE_BUF),
        u64_at(seq, o::SEQ_FILE_SIZE),
        u64_at(seq, o::SEQ_FILE_COUNT),
    ) else {
        return;
    };
    // Full (`seq_has_overflowed`): the kernel drops this text and shows the entry again.
    if after <= before || after >= size {
        return;
    }
    let Some(scratch) = ROUTE_FILE_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    let rec = unsafe { &mut *scratch };
    let written = (after - before) as usize;
    let mut flags = 0;
    let n = if written > ROUTE_FILE_TEXT_LEN {
        flags |= route_file_flags::TEXT_CUT;
        ROUTE_FILE_TEXT_LEN
    } else {
        written
    };
    // Keep n in 1..=ROUTE_FILE_TEXT_LEN in a form the verifier can follow.
    let n = ((n - 1) & (ROUTE_FILE_TEXT_LEN - 1)) + 1;
    let from = (buf + before) as *const u8;
    if unsafe { bpf_probe_read_kernel_buf(from, &mut rec.text[..n]) }.is_err()
        || !lists_default_route(function, &rec.text, n)
    {
        return;
    }
    unsafe { write_header(&mut rec.header, KIND_ROUTE_FILE, pid_tgid) };
    rec.function = function;
    rec.mode = mode;
    rec.text_len = n as u32;
    rec.written = written.min(u32::MAX as usize) as u32;
    let netns = pointer_at(seq, o::SEQ_FILE_PRIVATE)
        .and_then(|private| pointer_at(private, o::SEQ_NET_PRIVATE_NET))
        .and_then(|net| {
            let inum = offset(o::NET_INUM)?;
            unsafe { bpf_probe_read_kernel((net as usize + inum) as *const u32) }.ok()
        });
    match netns {
        Some(ns) => rec.file_netns = ns,
        None => {
            rec.file_netns = 0;
            flags |= route_file_flags::NETNS_UNKNOWN;
        }
    }
    rec.flags = flags;
    if EVENTS
        .output::<RouteFileRecord>(rec, crate::submit_flags())
        .is_err()
    {
        count(counter::HANDLER_RINGBUF_FULL, 1);
    }
}

/// The fentry/fexit/kprobe/kretprobe programs of one show function (both take `(seq, v)`:
/// fexit finds the return value after them).
macro_rules! route_file_programs {
    ($($id:expr => $fentry:ident, $fexit:ident, $kprobe:ident, $kretprobe:ident;)*) => {
        $(
            #[doc = concat!("fentry of route file show function ", stringify!($id), ".")]
            #[fentry]
            pub fn $fentry(ctx: FEntryContext) -> u32 {
                show_entry(ctx.arg(0));
                0
            }
            #[doc = concat!("fexit of route file show function ", stringify!($id), ".")]
            #[fexit]
            pub fn $fexit(_ctx: FExitContext) -> u32 {
                show_exit($id, hook_mode::FENTRY);
                0
            }
            #[doc = concat!("kprobe of route file show function ", stringify!($id), ".")]
            #[kprobe]
            pub fn $kprobe(ctx: ProbeContext) -> u32 {
                show_entry(ctx.arg(0).unwrap_or(0));
                0
            }
            #[doc = concat!("kretprobe of route file show function ", stringify!($id), ".")]
            #[kretprobe]
            pub fn $kretprobe(_ctx: RetProbeContext) -> u32 {
                show_exit($id, hook_mode::KPROBE);
                0
            }
        )*
    };
}

route_file_programs! {
    f::FIB_ROUTE_SEQ_SHOW => fib_route_seq_show_fentry, fib_route_seq_show_fexit,
        fib_route_seq_show_kprobe, fib_route_seq_show_kretprobe;
    f::IPV6_ROUTE_SEQ_SHOW => ipv6_route_seq_show_fentry, ipv6_route_seq_show_fexit,
        ipv6_route_seq_show_kprobe, ipv6_route_seq_show_kretprobe;
}
