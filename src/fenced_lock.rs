//! The fenced lock: a reentrant lock whose every grant carries a fencing token.

use crate::handle::{Handle, Reply, lock_handle};
use crate::keys;
use crate::scripts;

/// A reentrant lock whose every acquisition, reentrant ones included, gets a fencing token
/// from a counter that only grows ([`LockGuard::token`](crate::LockGuard::token)).
///
/// A lease can run out while its holder still thinks it holds the lock (a long pause, a
/// partition). A resource that remembers the highest token it has accepted, and rejects
/// writes that carry a lower one, cannot be corrupted by such a stale holder: this is the
/// fencing that a lease alone cannot give. Same ladder, queries, guard, watchdog and Redis
/// hash as [`Lock`](crate::Lock), plus the counter `redisson_lock_token:{name}` (no TTL).
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let guard = client.fenced_lock("ledger").lock()?;
/// let token = guard.token().expect("fenced locks always carry a token");
/// // Send `token` with every write; the store rejects tokens lower than it has seen.
/// # let _ = token;
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct FencedLock(pub(crate) Handle);

lock_handle!(FencedLock);

/// The key of the lock's token counter.
pub(crate) fn token_key(name: &str) -> String {
    keys::prefixed("redisson_lock_token", name)
}

pub(crate) fn acquire(
    conn: &mut redis::Connection,
    name: &str,
    owner: &str,
    lease_millis: u64,
) -> redis::RedisResult<Reply> {
    let (granted, value): (i64, i64) =
        scripts::FENCED_ACQUIRE.key(name).key(token_key(name)).arg(lease_millis).arg(owner).invoke(conn)?;
    Ok(if granted == 1 {
        Reply::Granted { token: u64::try_from(value).ok() }
    } else {
        Reply::Busy { ttl: u64::try_from(value).ok().map(std::time::Duration::from_millis) }
    })
}
