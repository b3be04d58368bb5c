//! Hash maps whose entries are counted in a one-slot array, so that a program every event of
//! the node passes asks "is anything in there?" with one array read instead of a hash lookup.
//! A count can only run high (an entry replaced, a removal never seen), which costs the hash
//! lookup again, never a missed entry.
use aya_ebpf::maps::{Array, HashMap};

/// Adds `delta` to slot 0 of `count` (`u64::MAX` takes one away).
#[inline(always)]
fn add(count: &Array<u64>, delta: u64) {
    if let Some(p) = count.get_ptr_mut(0) {
        // SAFETY: an array slot, aligned and alive for the program's run. (The BPF target has
        // no `AtomicU64::fetch_add`: it lacks compare-and-swap; the add itself is an XADD.)
        unsafe {
            core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
                p, delta,
            )
        };
    }
}

/// Inserts `key` → `value` into `map`, counted in `count`.
#[inline(always)]
pub fn insert<V>(
    map: &HashMap<u64, V>,
    count: &Array<u64>,
    key: u64,
    value: &V,
) -> Result<(), i32> {
    map.insert(key, value, 0)?;
    add(count, 1);
    Ok(())
}

/// Removes `key` from `map`, uncounted in `count` (nothing when there was no entry).
#[inline(always)]
pub fn remove<V>(map: &HashMap<u64, V>, count: &Array<u64>, key: u64) {
    if map.remove(key).is_ok() {
        add(count, u64::MAX);
    }
}

/// Whether `count` says its map may hold entries.
#[inline(always)]
pub fn any(count: &Array<u64>) -> bool {
    count.get(0).is_some_and(|n| *n != 0)
}
