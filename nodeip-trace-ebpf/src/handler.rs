//! Kernel netlink handlers: the rtnetlink functions behind RTM_GETROUTE and the address/link
//! dumps, and IPVS's generic-netlink command handler, each as fentry/fexit and as
//! kprobe/kretprobe programs (userspace attaches one pair per function, the best the kernel
//! allows).
//!
//! What they add over the syscall view: the namespace the kernel answered in
//! (`sock_net(skb->sk)`), the request exactly as the kernel parsed it (also for processes whose
//! buffers we did not catch), and the handler's own return value. Struct offsets come from the
//! running kernel's BTF (`HANDLER_OFFSETS`, set by userspace); an unknown offset only loses that
//! fact, flagged in the record.
use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, bpf_probe_read_kernel, bpf_probe_read_kernel_buf},
    macros::{fentry, fexit, kprobe, kretprobe},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext},
    Global,
};
use nodeip_trace_common::{
    counter, handler_flags, handler_function as f, handler_offset, hook_mode, KernelHandlerRecord,
    HANDLER_REQUEST_LEN, KIND_KERNEL_HANDLER,
};

use crate::{count, filter::traced, write_header, EVENTS, HANDLER_INFLIGHT, HANDLER_SCRATCH};

/// Member offsets indexed by `handler_offset::*` (from the kernel's BTF).
#[unsafe(no_mangle)]
static HANDLER_OFFSETS: Global<[u32; handler_offset::COUNT]> =
    Global::new([0; handler_offset::COUNT]);
/// Bit `i` set = `HANDLER_OFFSETS[i]` is known.
#[unsafe(no_mangle)]
static HANDLER_OFFSETS_KNOWN: Global<u32> = Global::new(0);

/// The offset at `index`, when userspace found it.
#[inline(always)]
pub(crate) fn offset(index: usize) -> Option<usize> {
    if HANDLER_OFFSETS_KNOWN.load() & (1 << index) == 0 {
        return None;
    }
    Some(crate::global_at(&HANDLER_OFFSETS, index) as usize)
}

/// Reads the pointer at `base + offset(index)`.
#[inline(always)]
pub(crate) fn pointer_at(base: u64, index: usize) -> Option<u64> {
    let off = offset(index)?;
    if base == 0 {
        return None;
    }
    let p = unsafe { bpf_probe_read_kernel((base as usize + off) as *const u64) }.ok()?;
    (p != 0).then_some(p)
}

/// `sock_net(skb->sk)->ns.inum`.
#[inline(always)]
fn skb_netns(skb: u64) -> Option<u32> {
    let sk = pointer_at(skb, handler_offset::SKB_SK)?;
    let net = pointer_at(sk, handler_offset::SOCK_NET)?;
    let inum = offset(handler_offset::NET_INUM)?;
    unsafe { bpf_probe_read_kernel((net as usize + inum) as *const u32) }.ok()
}

/// The request message: the second argument itself for doit handlers, behind it for dumps
/// (`cb->nlh`) and generic netlink (`info->nlhdr`).
#[inline(always)]
fn request_of(function: u32, arg1: u64) -> Option<u64> {
    match function {
        f::INET_DUMP_IFADDR | f::INET6_DUMP_IFADDR | f::RTNL_DUMP_IFINFO => {
            pointer_at(arg1, handler_offset::CALLBACK_NLH)
        }
        f::IP_VS_GENL_SET_CMD => pointer_at(arg1, handler_offset::GENL_INFO_NLHDR),
        _ => (arg1 != 0).then_some(arg1),
    }
}

/// Handler entry: the record is filled here (the request is still there for certain) and kept
/// until the return, keyed by thread.
#[inline(always)]
fn handler_entry(function: u32, mode: u32, skb: u64, arg1: u64) {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    if !traced(pid_tgid) {
        return;
    }
    let Some(scratch) = HANDLER_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    let rec = unsafe { &mut *scratch };
    unsafe { write_header(&mut rec.header, KIND_KERNEL_HANDLER, pid_tgid) };
    rec.start_ns = rec.header.ts_ns;
    rec.function = function;
    rec.mode = mode;
    rec.ret = 0;
    rec.flags = 0;
    rec.request_len = 0;
    rec.request_nlmsg_len = 0;
    match skb_netns(skb) {
        Some(ns) => rec.handler_netns = ns,
        None => {
            rec.handler_netns = 0;
            rec.flags |= handler_flags::NETNS_UNKNOWN;
        }
    }
    let copied = request_of(function, arg1).and_then(|nlh| {
        let len = unsafe { bpf_probe_read_kernel(nlh as *const u32) }.ok()?;
        rec.request_nlmsg_len = len;
        if len == 0 {
            return None;
        }
        let n = if len as usize > HANDLER_REQUEST_LEN {
            rec.flags |= handler_flags::REQUEST_CUT;
            HANDLER_REQUEST_LEN
        } else {
            len as usize
        };
        // Keep n in 1..=HANDLER_REQUEST_LEN in a form the verifier can follow.
        let n = ((n - 1) & (HANDLER_REQUEST_LEN - 1)) + 1;
        unsafe { bpf_probe_read_kernel_buf(nlh as *const u8, &mut rec.request[..n]) }.ok()?;
        Some(n as u32)
    });
    match copied {
        Some(n) => rec.request_len = n,
        None => rec.flags |= handler_flags::REQUEST_UNREADABLE,
    }
    if HANDLER_INFLIGHT.insert(pid_tgid, rec, 0).is_err() {
        count(counter::HANDLER_INFLIGHT_FULL, 1);
    }
}

/// Handler return: completes the record with the return value and sends it. Every handler
/// returns `int`: the register's upper half is not part of it, so it is sign-extended here.
#[inline(always)]
fn handler_exit(ret: u64) {
    let ret = ret as u32 as i32 as i64;
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    let Some(rec) = HANDLER_INFLIGHT.get_ptr_mut(pid_tgid) else {
        return;
    };
    unsafe {
        (*rec).ret = ret;
        (*rec).header.ts_ns = bpf_ktime_get_ns();
        if EVENTS
            .output::<KernelHandlerRecord>(&*rec, crate::submit_flags())
            .is_err()
        {
            count(counter::HANDLER_RINGBUF_FULL, 1);
        }
    }
    let _ = HANDLER_INFLIGHT.remove(pid_tgid);
}

/// One fentry/fexit/kprobe/kretprobe program set per function; `$nargs` is the function's
/// argument count (fexit finds the return value after the arguments).
macro_rules! handler_programs {
    ($($id:expr, $nargs:expr => $fentry:ident, $fexit:ident, $kprobe:ident, $kretprobe:ident;)*) => {
        $(
            #[doc = concat!("fentry of handler ", stringify!($id), ".")]
            #[fentry]
            pub fn $fentry(ctx: FEntryContext) -> u32 {
                handler_entry($id, hook_mode::FENTRY, ctx.arg(0), ctx.arg(1));
                0
            }
            #[doc = concat!("fexit of handler ", stringify!($id), ".")]
            #[fexit]
            pub fn $fexit(ctx: FExitContext) -> u32 {
                handler_exit(ctx.arg::<u64>($nargs));
                0
            }
            #[doc = concat!("kprobe of handler ", stringify!($id), ".")]
            #[kprobe]
            pub fn $kprobe(ctx: ProbeContext) -> u32 {
                handler_entry(
                    $id,
                    hook_mode::KPROBE,
                    ctx.arg(0).unwrap_or(0),
                    ctx.arg(1).unwrap_or(0),
                );
                0
            }
            #[doc = concat!("kretprobe of handler ", stringify!($id), ".")]
            #[kretprobe]
            pub fn $kretprobe(ctx: RetProbeContext) -> u32 {
                handler_exit(ctx.ret::<u64>());
                0
            }
        )*
    };
}

handler_programs! {
    f::INET_RTM_GETROUTE, 3 => inet_rtm_getroute_fentry, inet_rtm_getroute_fexit,
        inet_rtm_getroute_kprobe, inet_rtm_getroute_kretprobe;
    f::INET6_RTM_GETROUTE, 3 => inet6_rtm_getroute_fentry, inet6_rtm_getroute_fexit,
        inet6_rtm_getroute_kprobe, inet6_rtm_getroute_kretprobe;
    f::INET_DUMP_IFADDR, 2 => inet_dump_ifaddr_fentry, inet_dump_ifaddr_fexit,
        inet_dump_ifaddr_kprobe, inet_dump_ifaddr_kretprobe;
    f::INET6_DUMP_IFADDR, 2 => inet6_dump_ifaddr_fentry, inet6_dump_ifaddr_fexit,
        inet6_dump_ifaddr_kprobe, inet6_dump_ifaddr_kretprobe;
    f::RTNL_DUMP_IFINFO, 2 => rtnl_dump_ifinfo_fentry, rtnl_dump_ifinfo_fexit,
        rtnl_dump_ifinfo_kprobe, rtnl_dump_ifinfo_kretprobe;
    f::RTNL_GETLINK, 3 => rtnl_getlink_fentry, rtnl_getlink_fexit,
        rtnl_getlink_kprobe, rtnl_getlink_kretprobe;
    f::IP_VS_GENL_SET_CMD, 2 => ip_vs_genl_set_cmd_fentry, ip_vs_genl_set_cmd_fexit,
        ip_vs_genl_set_cmd_kprobe, ip_vs_genl_set_cmd_kretprobe;
}
