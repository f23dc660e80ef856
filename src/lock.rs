//! The reentrant lock: Redisson's `RLock`.

use crate::handle::{Handle, Release, lock_handle};
use crate::keys;
use crate::scripts;

/// A reentrant, non-fair distributed lock (Redisson's `RLock`).
///
/// A handle is cheap to create and to clone, and does no I/O until used. Ownership is per
/// thread: the same thread acquiring again is reentrant and gets another guard; each guard
/// releases one hold. Another thread, in this process or another, waits.
///
/// Not fair: when the lock is released, whichever attempt reaches Redis first gets it.
/// Use [`FairLock`](crate::FairLock) when waiters must be served in order.
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let lock = client.lock("orders:42");
/// {
///     let _guard = lock.lock()?; // held, and renewed by the watchdog, until dropped
///     // ... critical section ...
/// }
/// if let Some(guard) = lock.try_lock_for(Duration::from_millis(500))? {
///     // ... critical section ...
///     guard.unlock()?;
/// }
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct Lock(pub(crate) Handle);

lock_handle!(Lock);

pub(crate) fn acquire(
    conn: &mut redis::Connection,
    name: &str,
    owner: &str,
    lease_millis: u64,
) -> redis::RedisResult<Option<i64>> {
    scripts::ACQUIRE.key(name).arg(lease_millis).arg(owner).invoke(conn)
}

pub(crate) fn release(conn: &mut redis::Connection, r: &Release<'_>) -> redis::RedisResult<Option<i64>> {
    scripts::RELEASE
        .key(r.name)
        .key(keys::lock_channel(r.name))
        .key(keys::unlock_latch(r.name, r.request_id))
        .arg(0)
        .arg(r.keep_millis)
        .arg(r.owner)
        .arg(r.latch_millis)
        .invoke(conn)
}

pub(crate) fn force_unlock(conn: &mut redis::Connection, name: &str) -> redis::RedisResult<i64> {
    scripts::FORCE_UNLOCK.key(name).key(keys::lock_channel(name)).arg(0).invoke(conn)
}
