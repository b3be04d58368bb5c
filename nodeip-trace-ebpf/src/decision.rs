//! Which threads are making a decision we explain (inside getaddrinfo, a `connect()`, or a
//! netlink call): entries in the in-flight maps, and a count of them so that a route lookup on a
//! node where no thread is deciding anything costs one array read instead of four hash lookups.
use aya_ebpf::{macros::map, maps::Array, maps::HashMap};

use crate::{CONNECT_INFLIGHT, GAI_INFLIGHT, NETLINK_INFLIGHT, NETLINK_SOCKET_CALLS};

/// Entries across the in-flight maps that mark a decision (slot 0). It can only run high (a
/// replaced entry, an exit never seen), which costs the hash lookups again, never a lookup.
#[map]
static DECISIONS_INFLIGHT: Array<u64> = Array::with_max_entries(1, 0);

#[inline(always)]
fn add(delta: u64) {
    if let Some(p) = DECISIONS_INFLIGHT.get_ptr_mut(0) {
        // SAFETY: an array slot, aligned and alive for the program's run. (The BPF target has
        // no `AtomicU64::fetch_add`: it lacks compare-and-swap; the add itself is an XADD.)
        unsafe {
            core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
                p, delta,
            )
        };
    }
}

/// Marks `key`'s thread as deciding (an entry in `map`, one of the maps [`in_decision`] reads).
#[inline(always)]
pub fn begin<V>(map: &HashMap<u64, V>, key: u64, value: &V) -> Result<(), i32> {
    map.insert(key, value, 0)?;
    add(1);
    Ok(())
}

/// Ends what [`begin`] started (nothing when there was no entry).
#[inline(always)]
pub fn end<V>(map: &HashMap<u64, V>, key: u64) {
    if map.remove(key).is_ok() {
        add(u64::MAX);
    }
}

/// Whether the thread is making a decision we explain: inside getaddrinfo, a `connect()`, or a
/// netlink request (a route get is answered inside the sender's call). Per-packet lookups of
/// unconnected sockets and forwarding are not, and would cost every sendmsg a record.
#[inline(always)]
pub fn in_decision(pid_tgid: u64) -> bool {
    if DECISIONS_INFLIGHT.get(0).is_none_or(|n| *n == 0) {
        return false;
    }
    unsafe {
        GAI_INFLIGHT.get(pid_tgid).is_some()
            || CONNECT_INFLIGHT.get(pid_tgid).is_some()
            || NETLINK_INFLIGHT.get(pid_tgid).is_some()
            || NETLINK_SOCKET_CALLS.get(pid_tgid).is_some()
    }
}
