//! Hash maps keyed by kernel-assigned integers (pids, thread ids, namespace and cgroup ids,
//! netlink sequence numbers), hashed with one multiply per word (the Fx hash of rustc) instead of
//! the standard SipHash: the pipeline looks several of them up per record, and SipHash was 1.1%
//! of the live consumer's CPU per event. SipHash's flooding resistance buys nothing here: the
//! kernel picks the keys and every such map is capped and starts over when full.
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` keyed by kernel-assigned integers, hashed by [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// The Fx hash: each word is mixed in with a rotate, an xor and a multiply.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher {
    hash: u64,
}

/// The multiplier of rustc's Fx hash (an odd constant with well-spread bits).
const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl IdHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(n.into());
    }

    fn write_u16(&mut self, n: u16) {
        self.add(n.into());
    }

    fn write_u32(&mut self, n: u32) {
        self.add(n.into());
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_tuple_keys_of_nearby_pids_apart() {
        let mut map: IdMap<(u32, u64), u32> = IdMap::default();
        for pid in 1000..3000u32 {
            map.insert((pid, 42), pid);
        }
        assert_eq!(map.len(), 2000);
        assert!((1000..3000u32).all(|pid| map.get(&(pid, 42)) == Some(&pid)));
        assert_eq!(map.get(&(1000, 43)), None);
    }
}
