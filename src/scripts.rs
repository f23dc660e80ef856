//! The Lua scripts, one file each under `lua/`, compiled in and run with `EVALSHA`.
//!
//! `redis::Script` sends `EVALSHA` and, on `NOSCRIPT` (a restart, a failover or a
//! `SCRIPT FLUSH` emptied the server's cache), loads the script and retries once.

use std::sync::LazyLock;

/// A script from `lua/`.
macro_rules! script {
    ($file:literal) => {
        LazyLock::new(|| redis::Script::new(include_str!(concat!("../lua/", $file))))
    };
    // A script that calls `may`: the prelude of `lua/prelude.lua` goes first.
    ($file:literal, with_prelude) => {
        LazyLock::new(|| {
            redis::Script::new(concat!(include_str!("../lua/prelude.lua"), include_str!(concat!("../lua/", $file))))
        })
    };
}

/// Acquire a reentrant lock: see `lua/acquire.lua`.
pub(crate) static ACQUIRE: LazyLock<redis::Script> = script!("acquire.lua");
/// Release one hold, idempotent per request: see `lua/release.lua`.
pub(crate) static RELEASE: LazyLock<redis::Script> = script!("release.lua", with_prelude);
/// Renew a batch of leases: see `lua/renew.lua`.
pub(crate) static RENEW: LazyLock<redis::Script> = script!("renew.lua");
/// Delete a lock whoever holds it: see `lua/force_unlock.lua`.
pub(crate) static FORCE_UNLOCK: LazyLock<redis::Script> = script!("force_unlock.lua", with_prelude);

/// Acquire a fair lock or keep a place in its queue: see `lua/fair_acquire.lua`.
pub(crate) static FAIR_ACQUIRE: LazyLock<redis::Script> = script!("fair_acquire.lua", with_prelude);
/// Leave a fair lock's queue: see `lua/fair_give_up.lua`.
pub(crate) static FAIR_GIVE_UP: LazyLock<redis::Script> = script!("fair_give_up.lua");
/// Release one hold of a fair lock and wake the next waiter: see `lua/fair_release.lua`.
pub(crate) static FAIR_RELEASE: LazyLock<redis::Script> = script!("fair_release.lua", with_prelude);
/// Delete a fair lock whoever holds it: see `lua/fair_force_unlock.lua`.
pub(crate) static FAIR_FORCE_UNLOCK: LazyLock<redis::Script> = script!("fair_force_unlock.lua", with_prelude);

/// Take a read hold: see `lua/rw_read_acquire.lua`.
pub(crate) static RW_READ_ACQUIRE: LazyLock<redis::Script> = script!("rw_read_acquire.lua", with_prelude);
/// Release a read hold: see `lua/rw_read_release.lua`.
pub(crate) static RW_READ_RELEASE: LazyLock<redis::Script> = script!("rw_read_release.lua", with_prelude);
/// Take the write hold: see `lua/rw_write_acquire.lua`.
pub(crate) static RW_WRITE_ACQUIRE: LazyLock<redis::Script> = script!("rw_write_acquire.lua");
/// Release a write hold: see `lua/rw_write_release.lua`.
pub(crate) static RW_WRITE_RELEASE: LazyLock<redis::Script> = script!("rw_write_release.lua", with_prelude);
/// Delete a read-write lock in a given mode: see `lua/rw_force_unlock.lua`.
pub(crate) static RW_FORCE_UNLOCK: LazyLock<redis::Script> = script!("rw_force_unlock.lua", with_prelude);

/// Acquire a fenced lock and take a token: see `lua/fenced_acquire.lua`.
pub(crate) static FENCED_ACQUIRE: LazyLock<redis::Script> = script!("fenced_acquire.lua", with_prelude);

/// Take permits of a semaphore: see `lua/semaphore_acquire.lua`.
pub(crate) static SEMAPHORE_ACQUIRE: LazyLock<redis::Script> = script!("semaphore_acquire.lua");
/// Give permits back to a semaphore (or add some): see `lua/semaphore_release.lua`.
pub(crate) static SEMAPHORE_RELEASE: LazyLock<redis::Script> = script!("semaphore_release.lua", with_prelude);
/// Set a semaphore's permits once: see `lua/semaphore_set.lua`.
pub(crate) static SEMAPHORE_SET: LazyLock<redis::Script> = script!("semaphore_set.lua", with_prelude);
/// Take permits of a permit-expirable semaphore: see `lua/permit_acquire.lua`.
pub(crate) static PERMIT_ACQUIRE: LazyLock<redis::Script> = script!("permit_acquire.lua", with_prelude);
/// Give permits back by their ids: see `lua/permit_release.lua`.
pub(crate) static PERMIT_RELEASE: LazyLock<redis::Script> = script!("permit_release.lua", with_prelude);
/// Renew a batch of permit leases: see `lua/permit_renew.lua`.
pub(crate) static PERMIT_RENEW: LazyLock<redis::Script> = script!("permit_renew.lua");
/// Count a latch down: see `lua/latch_count_down.lua`.
pub(crate) static LATCH_COUNT_DOWN: LazyLock<redis::Script> = script!("latch_count_down.lua", with_prelude);
/// Set a latch's count once: see `lua/latch_set.lua`.
pub(crate) static LATCH_SET: LazyLock<redis::Script> = script!("latch_set.lua", with_prelude);

/// Which commands the client's user may not run: see `lua/check_permissions.lua`. Run once,
/// when a client is built.
pub(crate) static CHECK_PERMISSIONS: LazyLock<redis::Script> = script!("check_permissions.lua");

/// Every script, for loading them all when a client is built.
pub(crate) fn all() -> [&'static redis::Script; 22] {
    [
        &FENCED_ACQUIRE,
        &ACQUIRE,
        &RELEASE,
        &RENEW,
        &FORCE_UNLOCK,
        &FAIR_ACQUIRE,
        &FAIR_GIVE_UP,
        &FAIR_RELEASE,
        &FAIR_FORCE_UNLOCK,
        &RW_READ_ACQUIRE,
        &RW_READ_RELEASE,
        &RW_WRITE_ACQUIRE,
        &RW_WRITE_RELEASE,
        &RW_FORCE_UNLOCK,
        &SEMAPHORE_ACQUIRE,
        &SEMAPHORE_RELEASE,
        &SEMAPHORE_SET,
        &PERMIT_ACQUIRE,
        &PERMIT_RELEASE,
        &PERMIT_RENEW,
        &LATCH_COUNT_DOWN,
        &LATCH_SET,
    ]
}
