//! The fair lock: Redisson's `RFairLock`, reentrant and first come, first served.

use crate::handle::{Handle, Release, lock_handle};
use crate::keys;
use crate::scripts;

/// A reentrant distributed lock that serves waiters in the order they arrived (Redisson's
/// `RFairLock`).
///
/// Same ladder, queries, guard and watchdog as [`Lock`](crate::Lock); the same Redis hash
/// too, plus a queue of waiting owners (`redisson_lock_queue:{name}`) and a sorted set of
/// their deadlines (`redisson_lock_timeout:{name}`). A waiter that arrives while the lock is
/// held or others wait queues up; a release wakes only the waiter whose turn it is (on its
/// own channel), not all of them.
///
/// - [`try_lock`](FairLock::try_lock) never queues, and does not jump a queue.
/// - A waiter keeps its place as long as it polls within the client's
///   [fair wait timeout](crate::ClientBuilder::fair_wait_timeout) (default 300 s), which it
///   does on its own while it waits. A waiter that died delays the queue by at most one
///   fair wait timeout.
/// - A wait that ends without the lock (deadline, error) leaves the queue at once.
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let guard = client.fair_lock("payouts").lock()?; // served in arrival order
/// drop(guard);
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct FairLock(pub(crate) Handle);

lock_handle!(FairLock);

fn queue_key(name: &str) -> String {
    keys::prefixed("redisson_lock_queue", name)
}

fn timeouts_key(name: &str) -> String {
    keys::prefixed("redisson_lock_timeout", name)
}

/// The channel on which a release tells `owner` that its turn has come.
pub(crate) fn waiter_channel(name: &str, owner: &str) -> String {
    format!("{}:{owner}", keys::lock_channel(name))
}

pub(crate) fn acquire(
    conn: &mut redis::Connection,
    name: &str,
    owner: &str,
    lease_millis: u64,
    wait_millis: u64,
    queue: bool,
) -> redis::RedisResult<Option<i64>> {
    scripts::FAIR_ACQUIRE
        .key(name)
        .key(queue_key(name))
        .key(timeouts_key(name))
        .key(keys::lock_channel(name))
        .arg(lease_millis)
        .arg(owner)
        .arg(wait_millis)
        .arg(if queue { "1" } else { "0" })
        .invoke(conn)
}

pub(crate) fn give_up(
    conn: &mut redis::Connection,
    name: &str,
    owner: &str,
    wait_millis: u64,
) -> redis::RedisResult<i64> {
    scripts::FAIR_GIVE_UP
        .key(name)
        .key(queue_key(name))
        .key(timeouts_key(name))
        .key(keys::lock_channel(name))
        .arg(owner)
        .arg(wait_millis)
        .invoke(conn)
}

pub(crate) fn release(conn: &mut redis::Connection, r: &Release<'_>) -> redis::RedisResult<Option<i64>> {
    scripts::FAIR_RELEASE
        .key(r.name)
        .key(queue_key(r.name))
        .key(timeouts_key(r.name))
        .key(keys::lock_channel(r.name))
        .key(keys::unlock_latch(r.name, r.request_id))
        .arg(0)
        .arg(r.keep_millis)
        .arg(r.owner)
        .arg(r.latch_millis)
        .arg(r.wait_millis)
        .invoke(conn)
}

pub(crate) fn force_unlock(conn: &mut redis::Connection, name: &str, wait_millis: u64) -> redis::RedisResult<i64> {
    scripts::FAIR_FORCE_UNLOCK
        .key(name)
        .key(queue_key(name))
        .key(timeouts_key(name))
        .key(keys::lock_channel(name))
        .arg(0)
        .arg(wait_millis)
        .invoke(conn)
}
