//! Go's own resolver (pure-Go `net`, `CGO_ENABLED=0` binaries and Go's default path): plain
//! uprobes — never uretprobes, which break Go's stack moves — at
//! - the entry of `net.(*Resolver).goLookupIPCNAMEOrder`: the name (R8/R9), kept per goroutine;
//! - the entry of `net.sortByRFC6724withSrcs`: the addresses in the resolver's order (RAX/RBX,
//!   `[]IPAddr`) and the sources the sort uses (RDI/RSI, `[]IP` or `[]netip.Addr`: one program
//!   per layout);
//! - every RET of `net.sortByRFC6724withSrcs` (file offsets found by decoding the function in
//!   userspace): the same array, now sorted;
//! - the entry and every RET of `net.(*Resolver).goLookupHostOrder` (`LookupHost`): the
//!   `/etc/hosts` answer it returns unsorted (a sorted answer is the sort's record);
//! - the entry of the C wrapper `net._C2func_getaddrinfo` calls (cgo builds; the glue's own
//!   entry when the wrapper is not found): a mark on the thread, so the C library's getaddrinfo
//!   that follows says it was Go's lookup.
//! A goroutine moves between threads, so everything is keyed by its `g` (R14 in Go's
//! ABIInternal on amd64, Go ≥ 1.17), with the thread group.
//!
//! Minimum kernel: 5.8 (ring buffer); uprobes at file offsets.
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user},
    macros::uprobe,
    programs::ProbeContext,
};
use nodeip_trace_common::{
    counter, go_flags, go_layout, GoAddrList, GoHostRecord, GoLookupName, GoSortRecord,
    GO_MAX_ADDRS, GO_NAME_LEN, KIND_GO_HOST, KIND_GO_SORT,
};

use crate::{
    count, filter::traced, header, EVENTS, GO_CGO_THREADS, GO_HOSTS, GO_HOST_SCRATCH, GO_NAMES,
    GO_SCRATCH, GO_SORTS,
};

/// Bytes of one `net.IPAddr` (`IP []byte` then `Zone string`).
const IPADDR_SIZE: u64 = 40;
/// Bytes of one `net.IP` slice header or one `netip.Addr`.
const SOURCE_SIZE: u64 = 24;

/// The goroutine key: thread group and `g`.
#[inline(always)]
fn key(ctx: &ProbeContext, pid_tgid: u64) -> [u64; 2] {
    [pid_tgid >> 32, unsafe { (*ctx.regs).r14 }]
}

/// `(*Resolver).goLookupIPCNAMEOrder(ctx, network, name, order, …)` entry: the name.
#[uprobe]
pub fn go_lookup_entry(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced(pid_tgid) {
        return 0;
    }
    let (ptr, len) = unsafe { ((*ctx.regs).r8, (*ctx.regs).r9) };
    let mut name = GoLookupName {
        len: 0,
        _pad: 0,
        name: [0; GO_NAME_LEN],
    };
    name.len = copy_go_string(ptr, len, &mut name.name);
    let _ = GO_NAMES.insert(&key(&ctx, pid_tgid), &name, 0);
    0
}

/// Copies the Go string (`ptr`, `len`) into `out`, at most `N` bytes; returns the bytes copied.
/// One read of `N` bytes when it succeeds (the string's memory usually goes on), else byte by
/// byte up to the string's length (it may end at the end of a mapping).
#[inline(always)]
fn copy_go_string<const N: usize>(ptr: u64, len: u64, out: &mut [u8; N]) -> u32 {
    let n = (len as usize).min(N);
    if let Ok(bytes) = unsafe { bpf_probe_read_user(ptr as *const [u8; N]) } {
        *out = bytes;
        return n as u32;
    }
    let mut copied = 0;
    for i in 0..N {
        if i >= n {
            break;
        }
        match unsafe { bpf_probe_read_user((ptr + i as u64) as *const u8) } {
            Ok(b) => out[i] = b,
            Err(_) => break,
        }
        copied = i as u32 + 1;
    }
    copied
}

/// `(*Resolver).goLookupHostOrder(ctx, name, order, …)` entry (`LookupHost`): the name (RDI/RSI).
#[uprobe]
pub fn go_host_entry(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced(pid_tgid) {
        return 0;
    }
    let Some(rec) = GO_HOST_SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    let rec = unsafe { &mut *rec };
    let (ptr, len) = unsafe { ((*ctx.regs).rdi, (*ctx.regs).rsi) };
    let k = key(&ctx, pid_tgid);
    rec.header = header(KIND_GO_HOST, pid_tgid);
    rec.g = k[1];
    rec.start_ns = unsafe { bpf_ktime_get_ns() };
    rec.count = 0;
    rec.flags = 0;
    rec._pad = 0;
    rec.addr_lens = [0; GO_MAX_ADDRS];
    rec.name_len = copy_go_string(ptr, len, &mut rec.name);
    if GO_HOSTS.insert(&k, rec, 0).is_err() {
        count(counter::OTHER_RINGBUF_FULL, 1);
    }
    0
}

/// A RET of `goLookupHostOrder`: its `[]string` result (RAX/RBX). Sent only when no sort ran
/// inside (the `/etc/hosts` answer, returned in the file's order); a sorted answer is the
/// sort's record.
#[uprobe]
pub fn go_host_return(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let k = key(&ctx, pid_tgid);
    let Some(rec) = GO_HOSTS.get_ptr_mut(&k) else {
        return 0;
    };
    let rec = unsafe { &mut *rec };
    let (ptr, n) = unsafe { ((*ctx.regs).rax, (*ctx.regs).rbx) };
    if rec.flags & go_flags::SORTED == 0 && n > 0 && n < 1 << 20 {
        rec.header.ts_ns = unsafe { bpf_ktime_get_ns() };
        rec.count = n as u32;
        if n > GO_MAX_ADDRS as u64 {
            rec.flags |= go_flags::CUT;
        }
        for i in 0..GO_MAX_ADDRS {
            if i as u64 >= n {
                break;
            }
            match unsafe { bpf_probe_read_user((ptr + 16 * i as u64) as *const [u64; 2]) } {
                Ok(s) => rec.addr_lens[i] = copy_go_string(s[0], s[1], &mut rec.addrs[i]) as u8,
                Err(_) => rec.flags |= go_flags::UNREADABLE,
            }
        }
        if EVENTS
            .output::<GoHostRecord>(rec, crate::submit_flags())
            .is_err()
        {
            count(counter::GAI_RINGBUF_FULL, 1);
        }
    }
    let _ = GO_HOSTS.remove(&k);
    0
}

/// Entry of the C wrapper `_cgo_<hash>_C2func_getaddrinfo` (cgo builds): this thread is about
/// to call the C library's getaddrinfo for Go's `net`; the getaddrinfo return probe takes the
/// mark. (The wrapper runs on the system stack of the thread that makes the call. At the Go
/// glue's entry, the fallback, the goroutine may still be preempted and move to another thread.)
#[uprobe]
pub fn go_cgo_getaddrinfo(_ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if traced(pid_tgid) {
        let _ = GO_CGO_THREADS.insert(&pid_tgid, &1, 0);
    }
    0
}

/// Reads the `i`-th `net.IP` slice (`ptr`, `len` header at `at`) into `list`.
#[inline(always)]
fn read_ip_slice(at: u64, list: &mut GoAddrList, i: usize) -> bool {
    let Ok(header) = (unsafe { bpf_probe_read_user(at as *const [u64; 2]) }) else {
        return false;
    };
    let (ptr, len) = (header[0], header[1]);
    if len == 16 {
        if let Ok(b) = unsafe { bpf_probe_read_user(ptr as *const [u8; 16]) } {
            list.addrs[i] = b;
            list.lens[i] = 16;
            return true;
        }
    } else if len == 4 {
        if let Ok(b) = unsafe { bpf_probe_read_user(ptr as *const [u8; 4]) } {
            list.addrs[i][..4].copy_from_slice(&b);
            list.lens[i] = 4;
            return true;
        }
    } else {
        // A nil or odd IP: no source (Go's rule 1), not an unreadable one.
        list.lens[i] = 0;
        return true;
    }
    false
}

/// Reads the `i`-th `netip.Addr` (`hi`, `lo`, `z` at `at`) into `list`; `z == 0` is the zero
/// (invalid) address: no source.
#[inline(always)]
fn read_netip(at: u64, list: &mut GoAddrList, i: usize) -> bool {
    let Ok(words) = (unsafe { bpf_probe_read_user(at as *const [u64; 3]) }) else {
        return false;
    };
    if words[2] == 0 {
        list.lens[i] = 0;
        return true;
    }
    list.addrs[i][..8].copy_from_slice(&words[0].to_be_bytes());
    list.addrs[i][8..].copy_from_slice(&words[1].to_be_bytes());
    list.lens[i] = 16;
    true
}

/// Reads the `[]IPAddr` at `base` (`count` entries) into `list`; false when something was
/// unreadable.
#[inline(always)]
fn read_ipaddrs(base: u64, count: u64, list: &mut GoAddrList) -> bool {
    let mut ok = true;
    for i in 0..GO_MAX_ADDRS {
        if i as u64 >= count {
            break;
        }
        ok &= read_ip_slice(base + IPADDR_SIZE * i as u64, list, i);
    }
    ok
}

/// `sortByRFC6724withSrcs(addrs []IPAddr, srcs …)` entry, sources in `layout`.
#[inline(always)]
fn sort_entry(ctx: &ProbeContext, layout: u32) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced(pid_tgid) {
        return 0;
    }
    let Some(rec) = GO_SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    let rec = unsafe { &mut *rec };
    let regs = ctx.regs;
    let (addrs, n, srcs, src_count) =
        unsafe { ((*regs).rax, (*regs).rbx, (*regs).rdi, (*regs).rsi) };
    let k = key(ctx, pid_tgid);
    rec.header = header(KIND_GO_SORT, pid_tgid);
    rec.g = k[1];
    rec.addrs_ptr = addrs;
    rec.start_ns = unsafe { bpf_ktime_get_ns() };
    rec.count = n as u32;
    rec.layout = layout;
    rec.flags = 0;
    rec.name_len = 0;
    rec.unsorted.lens = [0; GO_MAX_ADDRS];
    rec.sources.lens = [0; GO_MAX_ADDRS];
    rec.sorted.lens = [0; GO_MAX_ADDRS];
    match unsafe { GO_NAMES.get(&k) } {
        Some(name) => {
            rec.name = name.name;
            rec.name_len = name.len;
        }
        None => rec.flags |= go_flags::NO_NAME,
    }
    if n > GO_MAX_ADDRS as u64 {
        rec.flags |= go_flags::CUT;
    }
    let mut ok = read_ipaddrs(addrs, n, &mut rec.unsorted);
    // A layout not known: no source is read.
    let src_count = if layout == go_layout::UNKNOWN {
        rec.flags |= go_flags::NO_SOURCES;
        0
    } else {
        src_count
    };
    for i in 0..GO_MAX_ADDRS {
        if i as u64 >= src_count {
            break;
        }
        let at = srcs + SOURCE_SIZE * i as u64;
        ok &= if layout == go_layout::NETIP_ADDRS {
            read_netip(at, &mut rec.sources, i)
        } else {
            read_ip_slice(at, &mut rec.sources, i)
        };
    }
    if !ok {
        rec.flags |= go_flags::UNREADABLE;
    }
    if GO_SORTS.insert(&k, rec, 0).is_err() {
        count(counter::OTHER_RINGBUF_FULL, 1);
    }
    0
}

/// Entry of `sortByRFC6724withSrcs` in Go 1.19 (`srcs []IP`).
#[uprobe]
pub fn go_sort_entry_ip(ctx: ProbeContext) -> u32 {
    sort_entry(&ctx, go_layout::IP_SLICES)
}

/// Entry of `sortByRFC6724withSrcs` in Go 1.21+ (`srcs []netip.Addr`).
#[uprobe]
pub fn go_sort_entry_netip(ctx: ProbeContext) -> u32 {
    sort_entry(&ctx, go_layout::NETIP_ADDRS)
}

/// Entry of `sortByRFC6724withSrcs` in a Go version whose `srcs` layout is not known: the
/// addresses only (their `[]IPAddr` layout is the same in every version).
#[uprobe]
pub fn go_sort_entry_unknown(ctx: ProbeContext) -> u32 {
    sort_entry(&ctx, go_layout::UNKNOWN)
}

/// A RET of `sortByRFC6724withSrcs`: the array again, sorted; the record goes out.
#[uprobe]
pub fn go_sort_return(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let k = key(&ctx, pid_tgid);
    let Some(rec) = GO_SORTS.get_ptr_mut(&k) else {
        return 0;
    };
    let rec = unsafe { &mut *rec };
    rec.header.ts_ns = unsafe { bpf_ktime_get_ns() };
    if !read_ipaddrs(rec.addrs_ptr, rec.count as u64, &mut rec.sorted) {
        rec.flags |= go_flags::UNREADABLE;
    }
    if EVENTS
        .output::<GoSortRecord>(rec, crate::submit_flags())
        .is_err()
    {
        count(counter::GAI_RINGBUF_FULL, 1);
    }
    let _ = GO_SORTS.remove(&k);
    let _ = GO_NAMES.remove(&k);
    // A host lookup around this sort returns the sorted answer: the sort's record says it.
    if let Some(host) = GO_HOSTS.get_ptr_mut(&k) {
        unsafe { (*host).flags |= go_flags::SORTED };
    }
    0
}
