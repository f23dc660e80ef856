//! Who holds a lock: `<client uuid>:<thread number>`, as in Redisson, where the thread
//! number is a small integer given to each OS thread of the process on first use.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_THREAD_NUMBER: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD_NUMBER: Cell<u64> = const { Cell::new(0) };
}

/// This OS thread's number, stable for its lifetime and never reused within the process.
pub(crate) fn thread_number() -> u64 {
    THREAD_NUMBER.with(|n| {
        if n.get() == 0 {
            n.set(NEXT_THREAD_NUMBER.fetch_add(1, Ordering::Relaxed));
        }
        n.get()
    })
}

/// The owner field of the calling thread for the client `client_id`.
pub(crate) fn owner_of_current_thread(client_id: &str) -> String {
    let mut owner = String::with_capacity(client_id.len() + 21);
    owner.push_str(client_id);
    owner.push(':');
    owner.push_str(&thread_number().to_string());
    owner
}

/// An owner field of its own for one acquisition (a sendable guard's): drawn from the
/// threads' sequence, so no thread of the process and no other acquisition ever has it,
/// and it reads like any Redisson owner.
pub(crate) fn fresh_owner(client_id: &str) -> String {
    format!("{client_id}:{}", NEXT_THREAD_NUMBER.fetch_add(1, Ordering::Relaxed))
}

/// The client id of an owner field `<id>:<number>` (Redisson's layout); `None` when the
/// field is not one.
pub(crate) fn client_of(owner: &str) -> Option<&str> {
    let (id, number) = owner.rsplit_once(':')?;
    (!id.is_empty() && !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit())).then_some(id)
}

/// The keeper of a lock held on past its release by client `owner`'s: `<client uuid>:0`,
/// which no thread (numbered from 1) and no acquisition ever has.
pub(crate) fn keeper_of(owner: &str) -> String {
    format!("{}:0", client_of(owner).unwrap_or(owner))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_get_distinct_stable_numbers() {
        let here = thread_number();
        assert_eq!(here, thread_number());
        let there = std::thread::spawn(thread_number).join().unwrap();
        assert_ne!(here, there);
        assert_eq!(owner_of_current_thread("c"), format!("c:{here}"));
    }

    #[test]
    fn the_keeper_is_number_zero_which_nobody_has() {
        assert_eq!(keeper_of("6d1f:12"), "6d1f:0");
        assert_ne!(keeper_of(&owner_of_current_thread("c")), owner_of_current_thread("c"));
        assert_ne!(keeper_of("c:1"), fresh_owner("c"));
    }

    #[test]
    fn fresh_owners_are_never_a_threads_or_each_others() {
        let (a, b) = (fresh_owner("c"), fresh_owner("c"));
        assert_ne!(a, b);
        let there = std::thread::spawn(|| owner_of_current_thread("c")).join().unwrap();
        for owner in [&a, &b] {
            assert_ne!(owner, &owner_of_current_thread("c"));
            assert_ne!(owner, &there);
        }
    }

    #[test]
    fn the_client_of_an_owner_is_before_its_last_colon() {
        assert_eq!(client_of("6d1f0c2e-77aa-4f51-9b1e-5e7a1c2d3e4f:17"), Some("6d1f0c2e-77aa-4f51-9b1e-5e7a1c2d3e4f"));
        assert_eq!(client_of("a:b:3"), Some("a:b"));
        for not_one in ["mode", "x:", ":3", "x:1a", "3f2a"] {
            assert_eq!(client_of(not_one), None, "{not_one}");
        }
    }
}
