//! Go's own resolver (pure-Go `net`, `CGO_ENABLED=0` binaries and Go's default path): plain
//! uprobes — never uretprobes, which break Go's stack moves — at
//! - the entry of `net.(*Resolver).goLookupIPCNAMEOrder`: the name (R8/R9), kept per goroutine;
//!   and the RETs of `net.(*Resolver).lookupIP` around it, on the same goroutine: a lookup in
//!   which no sort ran (zero or one address, an error) is sent as a sort record marked
//!   `NOT_SORTED`, its answer as returned (RAX/RBX, `[]IPAddr`; the error's type word in RDI).
//!   A cgo lookup passes there too but never set the name: nothing is sent;
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
    count, filter::traced, header, read_user, read_user_prefix, read_user_upto, EVENTS,
    GO_CGO_THREADS, GO_HOSTS, GO_HOST_SCRATCH, GO_NAMES, GO_SCRATCH, GO_SORTS,
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
        start_ns: unsafe { bpf_ktime_get_ns() },
        name: [0; GO_NAME_LEN],
    };
    name.len = read_user_upto(&mut name.name, ptr, len);
    let _ = GO_NAMES.insert(&key(&ctx, pid_tgid), &name, 0);
    0
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
    rec.name_len = read_user_upto(&mut rec.name, ptr, len);
    if GO_HOSTS.insert(&k, rec, 0).is_err() {
        count(counter::OTHER_RINGBUF_FULL, 1);
    }
    0
}

/// A RET of `goLookupHostOrder`: its `[]string` result (RAX/RBX), none or an error too. Sent
/// only when nothing inside reported the answer (the `/etc/hosts` answer, returned in the
/// file's order); a sorted answer is the sort's record, a DNS one `goLookupIPCNAMEOrder`'s.
#[uprobe]
pub fn go_host_return(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let k = key(&ctx, pid_tgid);
    let Some(rec) = GO_HOSTS.get_ptr_mut(&k) else {
        return 0;
    };
    let rec = unsafe { &mut *rec };
    // Results: `[]string` in RAX/RBX/RCX, the error's type word in RDI.
    let (ptr, n, err) = unsafe { ((*ctx.regs).rax, (*ctx.regs).rbx, (*ctx.regs).rdi) };
    if rec.flags & go_flags::SORTED == 0 && n < 1 << 20 {
        if err != 0 {
            rec.flags |= go_flags::FAILED;
        }
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
                Ok(s) => rec.addr_lens[i] = read_user_upto(&mut rec.addrs[i], s[0], s[1]) as u8,
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
    // A name its DNS path kept (no sort, no lookupIP around it) must not outlive the call: a
    // later cgo lookup on a reused goroutine would take it.
    let _ = GO_NAMES.remove(&k);
    0
}

/// A RET of `lookupIP`: when the goroutine's name is still kept, Go's own resolver ran inside
/// and no sort did (a sort's return takes the name): the lookup's own answer goes out, so a
/// lookup of one address, of none, or one that failed is an event too.
#[uprobe]
pub fn go_lookup_return(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let k = key(&ctx, pid_tgid);
    let Some(name) = (unsafe { GO_NAMES.get(&k) }) else {
        return 0;
    };
    let Some(rec) = GO_SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    let rec = unsafe { &mut *rec };
    let regs = ctx.regs;
    let (addrs, n, err) = unsafe { ((*regs).rax, (*regs).rbx, (*regs).rdi) };
    rec.header = header(KIND_GO_SORT, pid_tgid);
    rec.g = k[1];
    rec.addrs_ptr = addrs;
    rec.start_ns = name.start_ns;
    rec.count = n as u32;
    rec.layout = go_layout::UNKNOWN;
    rec.flags = go_flags::NOT_SORTED | go_flags::NO_SOURCES;
    if err != 0 {
        rec.flags |= go_flags::FAILED;
    }
    if n > GO_MAX_ADDRS as u64 {
        rec.flags |= go_flags::CUT;
    }
    rec.name = name.name;
    rec.name_len = name.len;
    rec.unsorted.lens = [0; GO_MAX_ADDRS];
    rec.sources.lens = [0; GO_MAX_ADDRS];
    rec.sorted.lens = [0; GO_MAX_ADDRS];
    if read_ipaddrs(addrs, n, &mut rec.sorted) != 0 {
        rec.flags |= go_flags::UNREADABLE;
    }
    send_answer(rec, &k);
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

/// Reads the `i`-th `net.IP` slice (`ptr`, `len` header at `at`) into `list`: its 16 or 4
/// bytes; a nil IP (any other length) reads nothing and is no source (Go's rule 1). Returns 0,
/// or the helpers' errors ORed. Every outcome takes the same path but one branch: the
/// verifier walks this about once per element.
#[inline(always)]
fn read_ip_slice(at: u64, list: &mut GoAddrList, i: usize) -> i64 {
    let mut header = [0u64; 2];
    let failed = read_user(&mut header, at);
    let (ptr, len) = (header[0], header[1]);
    let n = if len == 16 { 16 } else { (len == 4) as u32 * 4 };
    list.lens[i] = n as u8;
    // SAFETY: `addrs[i]` holds 16 bytes and `n` is 0, 4 or 16.
    failed | unsafe { read_user_prefix(&mut list.addrs[i], ptr, n) }
}

/// Reads the `i`-th `netip.Addr` (`hi`, `lo`, `z` at `at`) into `list`; `z == 0` is the zero
/// (invalid) address: no source. Returns 0, or the helper's error; one path, as above.
#[inline(always)]
fn read_netip(at: u64, list: &mut GoAddrList, i: usize) -> i64 {
    let mut words = [0u64; 3];
    let failed = read_user(&mut words, at);
    list.addrs[i][..8].copy_from_slice(&words[0].to_be_bytes());
    list.addrs[i][8..].copy_from_slice(&words[1].to_be_bytes());
    // 16 when `z` is not 0, without a branch: the top bit of `z | -z` is set exactly then.
    let z = words[2];
    list.lens[i] = ((z | z.wrapping_neg()) >> 63) as u8 * 16;
    failed
}

/// Reads the `[]IPAddr` at `base` (`count` entries) into `list`; 0, or the helpers' errors
/// ORed when something was unreadable.
#[inline(always)]
fn read_ipaddrs(base: u64, count: u64, list: &mut GoAddrList) -> i64 {
    let mut failed = 0;
    for i in 0..GO_MAX_ADDRS {
        if i as u64 >= count {
            break;
        }
        failed |= read_ip_slice(base + IPADDR_SIZE * i as u64, list, i);
    }
    failed
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
    let mut failed = read_ipaddrs(addrs, n, &mut rec.unsorted);
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
        failed |= if layout == go_layout::NETIP_ADDRS {
            read_netip(at, &mut rec.sources, i)
        } else {
            read_ip_slice(at, &mut rec.sources, i)
        };
    }
    if failed != 0 {
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
    if read_ipaddrs(rec.addrs_ptr, rec.count as u64, &mut rec.sorted) != 0 {
        rec.flags |= go_flags::UNREADABLE;
    }
    send_answer(rec, &k);
    let _ = GO_SORTS.remove(&k);
    0
}

/// Sends a lookup's answer (a sort's, or one no sort saw) for goroutine `k`: its name is
/// done with, and a host lookup around it returns this answer, which this record says.
#[inline(always)]
fn send_answer(rec: &GoSortRecord, k: &[u64; 2]) {
    if EVENTS
        .output::<GoSortRecord>(rec, crate::submit_flags())
        .is_err()
    {
        count(counter::GAI_RINGBUF_FULL, 1);
    }
    let _ = GO_NAMES.remove(k);
    if let Some(host) = GO_HOSTS.get_ptr_mut(k) {
        unsafe { (*host).flags |= go_flags::SORTED };
    }
}
