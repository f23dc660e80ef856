//! The fenced lock: a reentrant lock whose every grant carries a fencing token.

use crate::handle::{Handle, keep_at_least, lock_handle};

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
keep_at_least!(FencedLock);
