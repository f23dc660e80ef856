//! The maps an acquire and a release look up (the registry of leases, the replica views by
//! pool), hashed with `rustc-hash`'s `FxHasher` (a multiply and a rotate per word), where
//! the standard SipHash cost about a thousand instructions an uncontended pair.
//!
//! It does not resist crafted collisions: its keys are the client's own (lock names it
//! holds right now, pool ids), and a map of them stays as small as what one process holds.

/// A `HashMap` hashed with `rustc-hash`'s `FxHasher`.
pub(crate) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn equal_keys_hash_equal_and_near_keys_apart() {
        let build = rustc_hash::FxBuildHasher;
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
