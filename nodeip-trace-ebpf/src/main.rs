//! eBPF programs of nodeip-trace.
//!
//! One module per event source; all maps and load-time globals live here. The programs capture
//! raw facts (copied bytes, raw tracepoint fields), filter as early as they can and count every
//! record they could not deliver in `COUNTERS`. Decoding happens in userspace.
#![no_std]
#![no_main]
#![feature(core_intrinsics)]
#![allow(
    internal_features,
    reason = "counted.rs adds to a shared counter with core::intrinsics::atomic_xadd"
)]

mod counted;
mod decision;
mod filter;
mod gai_conf;
mod gai_socket;
mod getaddrinfo;
mod go_resolver;
mod handler;
mod netlink;
mod netlink_capture;
mod netlink_socket;
mod process;
mod route;
mod route_file;

use aya_ebpf::{
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_task, bpf_ktime_get_ns, bpf_probe_read_kernel,
    },
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, ProgramArray, RingBuf},
    Global,
};
use nodeip_trace_common::{
    counter, EventHeader, GaiSocketInflight, GetaddrinfoInflight, GetaddrinfoRecord, GoHostRecord,
    GoLookupName, GoSortRecord, KernelHandlerRecord, NetlinkInflight, NetlinkSocketCall,
    NETLINK_CHUNK_HEADER_LEN, NETLINK_CHUNK_LEN,
};

/// All records go through this ring buffer; userspace sets its size before load (4 MiB unless
/// `--ring-buffer-mib`).
#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(4 * 1024 * 1024, 0);

/// Wake-up batching: 1 (userspace sets it) submits records without waking the reader, which
/// polls every few milliseconds instead; 0: the kernel's default (a wake-up whenever the reader
/// has caught up), which costs the producing CPU an inter-processor interrupt per record on a
/// quiet ring. (Forcing a wake-up above a fill level was tried: under a backlog it woke the
/// reader on every record and slowed the traced process several-fold.)
#[unsafe(no_mangle)]
static BATCH_WAKEUPS: Global<u32> = Global::new(0);

/// Submit flag for records the reader must see at once (`BPF_RB_FORCE_WAKEUP`).
const WAKE_NOW: u64 = 2;

/// Submit flag for records nobody waits for (`BPF_RB_NO_WAKEUP`): read at the next pass.
const NO_WAKEUP: u64 = 1;

/// Element 0 says when the reader wants a wake-up (userspace sets it in its mapping of the
/// map): 0 never; 1 at the next record (it waits on an empty ring, so that a burst that starts
/// on a quiet ring is read from its first record on instead of at the reader's next timeout);
/// N > 1 once N bytes wait in the ring (it pauses between passes while records stream in, and
/// a surge wakes it before the ring fills instead of its pause having to be short enough for
/// the fastest surge). The record that wakes it sets it back to 0: one wake-up per wait.
#[map]
static READER_WAITING: Array<u32> = Array::with_max_entries(1, BPF_F_MMAPABLE);

/// `BPF_F_MMAPABLE`: an array the reader maps and sets without a system call.
const BPF_F_MMAPABLE: u32 = 1 << 10;

/// The flags to submit a record to `EVENTS` with (see `BATCH_WAKEUPS` and `READER_WAITING`).
#[inline(always)]
fn submit_flags() -> u64 {
    /// `bpf_ringbuf_query`: bytes not yet consumed.
    const BPF_RB_AVAIL_DATA: u64 = 0;
    if BATCH_WAKEUPS.load() == 0 {
        return 0;
    }
    let Some(waiting) = READER_WAITING.get_ptr_mut(0) else {
        return NO_WAKEUP;
    };
    // SAFETY: element 0 of a one-element array map, valid while the program runs; racing
    // CPUs at worst both wake the reader.
    let wanted = unsafe { *waiting };
    if wanted == 0 || (wanted > 1 && EVENTS.query(BPF_RB_AVAIL_DATA) < u64::from(wanted)) {
        return NO_WAKEUP;
    }
    unsafe { *waiting = 0 };
    WAKE_NOW
}

/// Element `index` of a load-time array global, read alone (`Global::load` reads the whole array,
/// which the hot programs would do on every call only to use one offset).
#[inline(always)]
fn global_at<const N: usize>(global: &Global<[u32; N]>, index: usize) -> u32 {
    if index >= N {
        return 0;
    }
    // SAFETY: `Global<T>` is `repr(transparent)` over an always-initialised `T`, here `[u32; N]`,
    // and `index < N`; volatile as `Global::load` is (the loader rewrites the value).
    unsafe {
        core::ptr::read_volatile((global as *const Global<[u32; N]>).cast::<u32>().add(index))
    }
}

/// The name each goroutine of Go's own resolver is looking up, keyed by (tgid, g).
#[map]
static GO_NAMES: LruHashMap<[u64; 2], GoLookupName> = LruHashMap::with_max_entries(4096, 0);
/// Go resolver sorts in flight (entry seen, no RET yet), keyed by (tgid, g).
#[map]
static GO_SORTS: LruHashMap<[u64; 2], GoSortRecord> = LruHashMap::with_max_entries(1024, 0);
/// Threads of Go programs that just entered `net._C2func_getaddrinfo` (cgo): the getaddrinfo
/// return on the same thread takes the mark and says the call was Go's.
#[map]
static GO_CGO_THREADS: LruHashMap<u64, u8> = LruHashMap::with_max_entries(4096, 0);
/// Go host lookups (`goLookupHostOrder`) in flight, keyed by (tgid, g).
#[map]
static GO_HOSTS: LruHashMap<[u64; 2], GoHostRecord> = LruHashMap::with_max_entries(1024, 0);
/// Per-CPU scratch where a Go host lookup record is built.
#[map]
static GO_HOST_SCRATCH: PerCpuArray<GoHostRecord> = PerCpuArray::with_max_entries(1, 0);
/// Per-CPU scratch where a getaddrinfo record is built (sent only up to its last result).
#[map]
static GAI_SCRATCH: PerCpuArray<GetaddrinfoRecord> = PerCpuArray::with_max_entries(1, 0);
/// Per-CPU scratch where a Go sort record is built (too big for the eBPF stack).
#[map]
static GO_SCRATCH: PerCpuArray<GoSortRecord> = PerCpuArray::with_max_entries(1, 0);

/// Per-CPU counters of everything not delivered (see `nodeip_trace_common::counter`).
#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

/// Element 0 is 1 once new programs are held at exec (userspace sets it when its hold runs):
/// exec records then wake nobody and wait for the drain thread's next pass (at most its idle
/// wait, 100 ms). Woken at once, each cost the execing process 35 µs (bpf_stats on this
/// host's 6.18: 36.5 µs per `sched_process_exec` run, 1.2 µs without the wake-up), 4% of a
/// `fork`+`exec` of `/bin/true`; with the hold, nothing waits for them: a new program is
/// probed at its hold, a known one needs nothing.
#[map]
static EXEC_RECORDS_LAZY: Array<u32> = Array::with_max_entries(1, 0);

/// Thread groups being traced when the pid filter is on (filled by userspace and by fork).
#[map]
static TRACED_TGIDS: HashMap<u32, u8> = HashMap::with_max_entries(16384, 0);

/// getaddrinfo calls in flight, keyed by pid_tgid.
#[map]
static GAI_INFLIGHT: HashMap<u64, GetaddrinfoInflight> = HashMap::with_max_entries(16384, 0);

/// `connect`/`getsockname` calls in flight inside getaddrinfo, keyed by pid_tgid.
#[map]
static GAI_SOCKET_INFLIGHT: HashMap<u64, GaiSocketInflight> = HashMap::with_max_entries(4096, 0);

/// Threads inside a `connect()` syscall (a source-address decision): their route lookups count.
#[map]
static CONNECT_INFLIGHT: HashMap<u64, u8> = HashMap::with_max_entries(16384, 0);

/// Threads reading `/etc/gai.conf` inside getaddrinfo, keyed by pid_tgid.
#[map]
static GAI_CONF_STATE: HashMap<u64, gai_conf::GaiConfState> = HashMap::with_max_entries(4096, 0);

/// Kernel handler calls in flight (filled at entry, sent at return), keyed by pid_tgid.
#[map]
static HANDLER_INFLIGHT: HashMap<u64, KernelHandlerRecord> = HashMap::with_max_entries(1024, 0);

/// Per-CPU scratch where a kernel handler record is built before it goes into
/// `HANDLER_INFLIGHT` (too big for the eBPF stack).
#[map]
static HANDLER_SCRATCH: PerCpuArray<KernelHandlerRecord> = PerCpuArray::with_max_entries(1, 0);

/// Route file show calls in flight: pid_tgid → (the `seq_file`, its bytes written at entry).
#[map]
static ROUTE_FILE_INFLIGHT: HashMap<u64, [u64; 2]> = HashMap::with_max_entries(1024, 0);

/// Per-CPU scratch where a route file record is built (too big for the eBPF stack).
#[map]
static ROUTE_FILE_SCRATCH: PerCpuArray<nodeip_trace_common::RouteFileRecord> =
    PerCpuArray::with_max_entries(1, 0);

/// Known netlink sockets: key `tgid << 32 | fd`, value the netlink protocol.
#[map]
static NETLINK_FDS: LruHashMap<u64, u32> = LruHashMap::with_max_entries(65536, 0);

/// `socket(AF_NETLINK, …)` calls in flight: pid_tgid → protocol.
#[map]
static SOCKET_INFLIGHT: HashMap<u64, u32> = HashMap::with_max_entries(4096, 0);

/// Netlink send/recv syscalls in flight, keyed by pid_tgid.
#[map]
static NETLINK_INFLIGHT: HashMap<u64, NetlinkInflight> = HashMap::with_max_entries(16384, 0);

/// Per-CPU scratch where a netlink chunk is assembled (header + payload) before output.
#[repr(C)]
pub struct ChunkScratch {
    bytes: [u8; NETLINK_CHUNK_HEADER_LEN + NETLINK_CHUNK_LEN],
}

#[map]
static SCRATCH: PerCpuArray<ChunkScratch> = PerCpuArray::with_max_entries(1, 0);

/// The socket-layer capture's own scratch (it never runs inside the syscall path's programs,
/// but keeping them apart costs only memory).
#[map]
static SOCKET_SCRATCH: PerCpuArray<ChunkScratch> = PerCpuArray::with_max_entries(1, 0);

/// Netlink sends/receives in flight at the socket layer, keyed by pid_tgid.
#[map]
static NETLINK_SOCKET_CALLS: HashMap<u64, NetlinkSocketCall> = HashMap::with_max_entries(4096, 0);

/// Where the chunking of one netlink call stands, carried across tail calls (per CPU: a tail
/// call runs on the CPU that started it).
#[repr(C)]
pub struct ChunkState {
    iov_ptr: u64,
    iov_count: u64,
    single_base: u64,
    single_len: u64,
    iov_index: u64,
    iov_offset: u64,
    offset: u64,
    total: u64,
    captured: u64,
    wanted: u64,
    /// 1 when a chunk of this call could not be sent (ring buffer full).
    dropped: u64,
}

#[map]
static CHUNK_STATE: PerCpuArray<ChunkState> = PerCpuArray::with_max_entries(1, 0);

/// Slot 0 holds `netlink_chunk` (installed by userspace), which tail-calls itself per chunk.
#[map]
static CHUNK_PROGRAMS: ProgramArray = ProgramArray::with_max_entries(1, 0);

/// The same for the raw tracepoint capture: slot 0 holds `netlink_chunk_raw` (a tail call stays
/// within one program type, so each type has its own array).
#[map]
static RAW_CHUNK_PROGRAMS: ProgramArray = ProgramArray::with_max_entries(1, 0);

/// Adds `n` to counter `index`.
#[inline(always)]
fn count(index: u32, n: u64) {
    if let Some(c) = COUNTERS.get_ptr_mut(index) {
        unsafe { *c += n };
    }
}

/// Reads a `T` of user memory at `src` into `out`: the helper's answer (0, or a negative errno
/// after which `out` is zeros), kept as a value so callers can fold it without a branch.
#[inline(always)]
fn read_user<T>(out: &mut T, src: u64) -> i64 {
    // SAFETY: `out` is a whole `T` of plain integers, for which any bytes are a value.
    unsafe {
        aya_ebpf::helpers::generated::bpf_probe_read_user(
            out as *mut T as *mut _,
            core::mem::size_of::<T>() as u32,
            src as *const _,
        )
    }
}

/// Reads the first `len` bytes of `out` from user memory at `src`, in one helper call of a size
/// the caller bounded (a mask or a comparison the verifier sees, no loop for it to walk):
/// the helper's answer, as [`read_user`]'s.
///
/// # Safety
/// `len` is at most `N`.
#[inline(always)]
unsafe fn read_user_prefix<const N: usize>(out: &mut [u8; N], src: u64, len: u32) -> i64 {
    aya_ebpf::helpers::generated::bpf_probe_read_user(
        out.as_mut_ptr() as *mut _,
        len,
        src as *const _,
    )
}

/// Reads `len` bytes of user memory at `src` into `out`, at most `N`, with
/// [`read_user_prefix`]; returns the bytes read, 0 when they were unreadable (then the kernel
/// has zeroed them).
#[inline(always)]
fn read_user_upto<const N: usize>(out: &mut [u8; N], src: u64, len: u64) -> u32 {
    let n = if len > N as u64 { N as u32 } else { len as u32 };
    // SAFETY: `n` is at most N.
    if unsafe { read_user_prefix(out, src, n) } != 0 {
        0
    } else {
        n
    }
}

/// Offsets of `task_struct.nsproxy`, `nsproxy.net_ns` and `net.ns.inum` in the running kernel,
/// found by userspace in its BTF; all 0 when unknown (then `netns` is 0).
#[unsafe(no_mangle)]
static NETNS_OFFSETS: Global<[u32; 3]> = Global::new([0; 3]);

/// Whether the kernel has `bpf_get_current_task_btf` and `bpf_task_pt_regs` (5.15; the loader
/// probes). Constant to the verifier: at 0 the calls are dead code it does not check, so the
/// programs calling [`netlink::syscall_regs`] and [`current_task_btf`] load on older kernels
/// (5.10), without their answers.
#[unsafe(no_mangle)]
static TASK_PT_REGS: Global<u32> = Global::new(0);

/// Whether the kernel has `bpf_get_current_task_btf` and `bpf_task_pt_regs` (see
/// `TASK_PT_REGS`): a constant to the verifier, so code behind a `false` answer is not checked.
#[inline(always)]
fn task_btf() -> bool {
    TASK_PT_REGS.load() != 0
}

/// The current task for plain loads: its BTF pointer where the kernel has
/// `bpf_get_current_task_btf` (see [`task_btf`]; the verifier checks each load's constant offset
/// against the kernel's types and makes it faulting-safe), null elsewhere (5.10: callers read
/// through helpers).
#[inline(always)]
fn current_task_btf() -> *const u8 {
    if task_btf() {
        // SAFETY: a helper call without arguments.
        unsafe { aya_ebpf::helpers::generated::bpf_get_current_task_btf() as *const u8 }
    } else {
        core::ptr::null()
    }
}

/// How a walk through kernel structures reads each step.
trait KernelRead {
    /// The `T` at `at`, or `None` when it cannot be read.
    ///
    /// # Safety
    /// `at` must be valid for the reader: a BTF pointer plus a member offset for [`BtfLoads`].
    unsafe fn read<T: Copy>(at: *const T) -> Option<T>;
}

/// Plain loads from BTF pointers ([`current_task_btf`]): the verifier checks them.
struct BtfLoads;

impl KernelRead for BtfLoads {
    #[inline(always)]
    unsafe fn read<T: Copy>(at: *const T) -> Option<T> {
        Some(unsafe { core::ptr::read_volatile(at) })
    }
}

/// `bpf_probe_read_kernel`: a bad pointer gives an error, not a fault.
struct ProbeReads;

impl KernelRead for ProbeReads {
    #[inline(always)]
    unsafe fn read<T: Copy>(at: *const T) -> Option<T> {
        unsafe { bpf_probe_read_kernel(at) }.ok()
    }
}

/// `task->nsproxy->net_ns->ns.inum` read with `R`, at the offsets in `NETNS_OFFSETS`; 0 where a
/// step is null or unreadable.
///
/// # Safety
/// `task` must suit `R` (a BTF task pointer for [`BtfLoads`]).
#[inline(always)]
unsafe fn netns_of<R: KernelRead>(task: *const u8, offsets: [usize; 3]) -> u32 {
    let [nsproxy_at, net_at, inum_at] = offsets;
    unsafe {
        let Some(nsproxy) = R::read(task.add(nsproxy_at) as *const *const u8) else {
            return 0;
        };
        if nsproxy.is_null() {
            return 0;
        }
        let Some(net) = R::read(nsproxy.add(net_at) as *const *const u8) else {
            return 0;
        };
        if net.is_null() {
            return 0;
        }
        R::read(net.add(inum_at) as *const u32).unwrap_or(0)
    }
}

/// The current task's network namespace id: `current->nsproxy->net_ns->ns.inum`, by plain loads
/// from `task` ([`current_task_btf`]; three `bpf_probe_read_kernel` calls less on every record)
/// or, where it is null, through the helper.
#[inline(always)]
fn current_netns(task: *const u8) -> u32 {
    let offsets = [
        global_at(&NETNS_OFFSETS, 0) as usize,
        global_at(&NETNS_OFFSETS, 1) as usize,
        global_at(&NETNS_OFFSETS, 2) as usize,
    ];
    if offsets[0] == 0 {
        return 0;
    }
    // SAFETY: a BTF task pointer for the plain loads; the helper checks every read itself.
    unsafe {
        if task.is_null() {
            netns_of::<ProbeReads>(bpf_get_current_task() as *const u8, offsets)
        } else {
            netns_of::<BtfLoads>(task, offsets)
        }
    }
}

/// Zeroes `*dst` with 8-byte stores. (The eBPF target's `memset`, which a zeroed array or
/// struct compiles to, is a byte loop: 80 bytes of a route lookup record were 400 instructions.)
///
/// # Safety
/// `dst` must point to writable memory for a `T`, 8-byte aligned.
#[inline(always)]
unsafe fn zero_words<T>(dst: *mut T) {
    const { assert!(size_of::<T>() % 8 == 0 && align_of::<T>() >= 8) };
    let words = dst.cast::<u64>();
    for i in 0..size_of::<T>() / 8 {
        // Volatile: plain stores of zeros would be merged back into a `memset` call.
        unsafe { core::ptr::write_volatile(words.add(i), 0) };
    }
}

/// The common header for a record made now, by value: what the Go resolver programs use.
/// Built in place there ([`write_header`]), LLVM compiled `sort_entry`'s address loop into a
/// form whose bound the 6.1 verifier no longer saw ("invalid access to map value, off=1032"),
/// so `go_sort_entry_*` failed to load there; this keeps their code as it was verified.
#[inline(always)]
fn header(kind: u32, pid_tgid: u64) -> EventHeader {
    EventHeader {
        kind,
        netns: current_netns(current_task_btf()),
        ts_ns: unsafe { bpf_ktime_get_ns() },
        pid_tgid,
        cgroup_id: unsafe { bpf_get_current_cgroup_id() },
        comm: aya_ebpf::helpers::bpf_get_current_comm().unwrap_or([0; 16]),
    }
}

/// Writes the common header of a record made now by a cgroup socket-address program, which may
/// call only the helpers such programs have (no task pointer): the network namespace is left 0
/// (userspace takes it from the getaddrinfo call the record belongs to).
///
/// # Safety
/// As for [`write_header`].
#[inline(always)]
unsafe fn write_sock_addr_header(dst: *mut EventHeader, kind: u32, pid_tgid: u64) {
    unsafe {
        (*dst).kind = kind;
        (*dst).netns = 0;
        (*dst).ts_ns = bpf_ktime_get_ns();
        (*dst).pid_tgid = pid_tgid;
        (*dst).cgroup_id = bpf_get_current_cgroup_id();
        aya_ebpf::helpers::generated::bpf_get_current_comm(
            (*dst).comm.as_mut_ptr().cast(),
            (*dst).comm.len() as u32,
        );
    }
}

/// Writes the common header of a record made now into `dst`, in place (comm straight from the
/// helper: building the header on the stack and copying it cost zeroing and byte copies, since
/// the eBPF target's `memset`/`memcpy` are byte loops); returns its timestamp.
///
/// # Safety
/// `dst` must point to writable memory for an `EventHeader` (a ring buffer reservation or a
/// per-CPU scratch).
#[inline(always)]
unsafe fn write_header(dst: *mut EventHeader, kind: u32, pid_tgid: u64) -> u64 {
    let ts_ns = unsafe { bpf_ktime_get_ns() };
    let task = current_task_btf();
    let comm_at = process::comm_offset();
    unsafe {
        (*dst).kind = kind;
        (*dst).netns = current_netns(task);
        (*dst).ts_ns = ts_ns;
        (*dst).pid_tgid = pid_tgid;
        (*dst).cgroup_id = bpf_get_current_cgroup_id();
        if !task.is_null() && comm_at != 0 {
            // `current->comm` as two words (the kernel keeps it NUL-terminated): no helper call
            // and no string copy per record.
            let words = task.add(comm_at) as *const u64;
            let out = (*dst).comm.as_mut_ptr() as *mut u64;
            core::ptr::write_unaligned(out, core::ptr::read_volatile(words));
            core::ptr::write_unaligned(out.add(1), core::ptr::read_volatile(words.add(1)));
        } else {
            // On failure the helper zero-fills the buffer.
            aya_ebpf::helpers::generated::bpf_get_current_comm(
                (*dst).comm.as_mut_ptr().cast(),
                (*dst).comm.len() as u32,
            );
        }
    }
    ts_ns
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
