//! A cheap hasher for the maps an acquire and a release look up (the registry of leases,
//! the replica views by pool): FxHash's mixing (a rotate, a xor and a multiply per word),
//! where the standard SipHash cost about a thousand instructions an uncontended pair.
//!
//! It does not resist crafted collisions: its keys are the client's own (lock names it
//! holds right now, pool ids), and a map of them stays as small as what one process holds.

use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` hashed with [`FastHasher`].
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// FxHash's multiplier (from Firefox, as in rustc's `FxHasher`).
const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher {
    hash: u64,
}

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0; 8];
            if let Some(head) = word.get_mut(..rest.len()) {
                head.copy_from_slice(rest);
            }
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
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
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn equal_keys_hash_equal_and_near_keys_apart() {
        let build = BuildHasherDefault::<FastHasher>::default();
        let key = |name: &str, thread: u64| build.hash_one((name, thread));
        assert_eq!(key("orders:42", 7), key("orders:42", 7));
        let names = ["a", "b", "ab", "orders:41", "orders:42", "orders:420", "12345678", "123456789"];
        let mut seen = std::collections::HashSet::new();
        for name in names {
            for thread in 1..4 {
                assert!(seen.insert(key(name, thread)), "{name} {thread}");
            }
        }
        let mut map = FastMap::default();
        map.insert(("x".to_owned(), 1), 1);
        assert_eq!(map.get(&("x".to_owned(), 1)), Some(&1));
    }
}
