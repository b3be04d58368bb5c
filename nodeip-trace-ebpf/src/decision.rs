//! Which threads are making a decision we explain (inside getaddrinfo, a `connect()`, or a
//! netlink call): entries in the in-flight maps, and a count of them so that a route lookup on a
//! node where no thread is deciding anything costs two array reads (this CPU's last cgroup
//! connect mark, and the count) instead of four hash lookups.
use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::map,
    maps::{Array, HashMap, PerCpuArray},
};

use crate::{CONNECT_INFLIGHT, GAI_INFLIGHT, NETLINK_INFLIGHT, NETLINK_SOCKET_CALLS};

/// Entries across the in-flight maps that mark a decision (slot 0; see [`crate::counted`]).
#[map]
static DECISIONS_INFLIGHT: Array<u64> = Array::with_max_entries(1, 0);

/// The thread whose `connect()` last passed the cgroup hook on this CPU, and when (a cgroup
/// hook sees a connect before the kernel carries it out, and nothing after: the connect's route
/// lookup follows at once, on the same CPU, under the socket's lock).
#[map]
static LAST_CONNECT: PerCpuArray<ConnectMark> = PerCpuArray::with_max_entries(1, 0);

/// An entry of [`LAST_CONNECT`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ConnectMark {
    pid_tgid: u64,
    ts_ns: u64,
}

/// How long after the cgroup hook a thread's route lookups on that CPU count as its connect's:
/// the lookup follows within microseconds (a TCG guest is some hundred times slower); a send on
/// an unconnected socket inside the window would be kept too.
const CONNECT_WINDOW_NS: u64 = 5_000_000;

/// A traced thread's `connect()` passed the cgroup hook on this CPU.
#[inline(always)]
pub fn connect_began(pid_tgid: u64) {
    if let Some(mark) = LAST_CONNECT.get_ptr_mut(0) {
        // SAFETY: element 0 of this CPU's array, valid while the program runs.
        unsafe {
            (*mark).pid_tgid = pid_tgid;
            (*mark).ts_ns = bpf_ktime_get_ns();
        }
    }
}

/// Whether `pid_tgid` is inside the `connect()` the cgroup hook last saw on this CPU.
#[inline(always)]
fn in_connect(pid_tgid: u64) -> bool {
    let Some(mark) = LAST_CONNECT.get_ptr(0) else {
        return false;
    };
    // SAFETY: as in `connect_began`.
    let mark = unsafe { *mark };
    mark.pid_tgid == pid_tgid
        && mark.ts_ns != 0
        && unsafe { bpf_ktime_get_ns() }.wrapping_sub(mark.ts_ns) < CONNECT_WINDOW_NS
}

/// Marks `key`'s thread as deciding (an entry in `map`, one of the maps [`in_decision`] reads).
#[inline(always)]
pub fn begin<V>(map: &HashMap<u64, V>, key: u64, value: &V) -> Result<(), i32> {
    crate::counted::insert(map, &DECISIONS_INFLIGHT, key, value)
}

/// Ends what [`begin`] started (nothing when there was no entry).
#[inline(always)]
pub fn end<V>(map: &HashMap<u64, V>, key: u64) {
    crate::counted::remove(map, &DECISIONS_INFLIGHT, key);
}

/// Whether the thread is making a decision we explain: inside getaddrinfo, a `connect()` (the
/// syscall tracepoints' entry, or the cgroup hook's mark), or a
/// netlink request (a route get is answered inside the sender's call). Per-packet lookups of
/// unconnected sockets and forwarding are not, and would cost every sendmsg a record.
#[inline(always)]
pub fn in_decision(pid_tgid: u64) -> bool {
    if in_connect(pid_tgid) {
        return true;
    }
    if !crate::counted::any(&DECISIONS_INFLIGHT) {
        return false;
    }
    unsafe {
        GAI_INFLIGHT.get(pid_tgid).is_some()
            || CONNECT_INFLIGHT.get(pid_tgid).is_some()
            || NETLINK_INFLIGHT.get(pid_tgid).is_some()
            || NETLINK_SOCKET_CALLS.get(pid_tgid).is_some()
    }
}
