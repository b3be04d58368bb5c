//! Which threads are making a decision we explain (inside getaddrinfo, a `connect()`, or a
//! netlink call): entries in the in-flight maps, and a count of them so that a route lookup on a
//! node where no thread is deciding anything costs one array read instead of four hash lookups.
use aya_ebpf::{macros::map, maps::Array, maps::HashMap};

use crate::{CONNECT_INFLIGHT, GAI_INFLIGHT, NETLINK_INFLIGHT, NETLINK_SOCKET_CALLS};

/// Entries across the in-flight maps that mark a decision (slot 0; see [`crate::counted`]).
#[map]
static DECISIONS_INFLIGHT: Array<u64> = Array::with_max_entries(1, 0);

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

/// Whether the thread is making a decision we explain: inside getaddrinfo, a `connect()`, or a
/// netlink request (a route get is answered inside the sender's call). Per-packet lookups of
/// unconnected sockets and forwarding are not, and would cost every sendmsg a record.
#[inline(always)]
pub fn in_decision(pid_tgid: u64) -> bool {
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
