//! The fenced lock: a reentrant lock whose every grant carries a fencing token, and its
//! guard, whose token is never missing.

use std::fmt;
use std::ops::Deref;
use std::time::{Duration, Instant};

use crate::api::guard::LockGuard;
use crate::api::handle::{Handle, handle_basics, keep_at_least};
use crate::base::error::{Error, ErrorKind, Result};

/// A reentrant lock whose every acquisition, reentrant ones included, gets a fencing token
/// from a counter that only grows ([`FencedGuard::token`]).
///
/// A lease can run out while its holder still thinks it holds the lock (a long pause, a
/// partition). A resource that remembers the highest token it has accepted, and rejects
/// writes that carry a lower one, cannot be corrupted by such a stale holder: this is the
/// fencing that a lease alone cannot give. Same ladder, queries, watchdog and Redis hash as
/// [`Lock`](crate::Lock), plus the counter `redisson_lock_token:{name}` (no TTL); its guard
/// is a [`FencedGuard`].
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let guard = client.fenced_lock("ledger").lock()?;
/// let token: u64 = guard.token();
/// // Send `token` with every write; the store rejects tokens lower than it has seen.
/// # let _ = token;
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct FencedLock(pub(crate) Handle);

handle_basics!(FencedLock);
keep_at_least!(FencedLock);

impl FencedLock {
    /// Blocks until the lock is held. Returns `Err` when that cannot be done: Redis
    /// unreachable, a timeout, bad input, or [`Client::shutdown`](crate::Client::shutdown).
    pub fn lock(&self) -> Result<FencedGuard> {
        FencedGuard::new(self.0.lock()?)
    }

    /// One attempt: `Ok(None)` when someone else holds the lock.
    pub fn try_lock(&self) -> Result<Option<FencedGuard>> {
        self.0.try_lock()?.map(FencedGuard::new).transpose()
    }

    /// Waits at most `timeout`: `Ok(None)` when the lock was not free in time. A timeout so
    /// large that the deadline overflows `Instant` (`Duration::MAX`) is a wait without
    /// deadline, as `lock`'s.
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<FencedGuard>> {
        self.0.try_lock_for(timeout)?.map(FencedGuard::new).transpose()
    }

    /// Waits until `deadline`: `Ok(None)` when the lock was not free by then.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<FencedGuard>> {
        self.0.try_lock_until(deadline)?.map(FencedGuard::new).transpose()
    }

    /// Whether the current thread holds the lock.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.0.is_held_by_current_thread()
    }

    /// How many holds the current thread has on the lock; 0 when it holds none.
    pub fn hold_count(&self) -> Result<u64> {
        self.0.hold_count()
    }
}

/// A [`FencedLock`]'s guard: a [`LockGuard`] (everything it offers, by `Deref`) whose
/// fencing token is always there. Released on drop or by [`unlock`](FencedGuard::unlock).
#[must_use = "if unused the lock is released at once"]
#[clippy::has_significant_drop]
pub struct FencedGuard {
    guard: LockGuard,
    token: u64,
}

impl FencedGuard {
    fn new(guard: LockGuard) -> Result<FencedGuard> {
        // The fenced script answers every grant with its token; a reply without one is not
        // a grant of this lock (the guard, dropped here, releases it).
        let token =
            guard.token().ok_or_else(|| Error::new(ErrorKind::Redis, "a fenced grant came without its token"))?;
        Ok(FencedGuard { guard, token })
    }

    /// This acquisition's fencing token: greater than every earlier grant's of the lock.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Releases the hold now and says how it went (see [`LockGuard::unlock`]).
    ///
    /// # Errors
    ///
    /// As [`LockGuard::unlock`].
    pub fn unlock(self) -> Result<()> {
        self.guard.unlock()
    }

    /// The plain guard, for code that takes any lock's (a [`MultiLock`](crate::MultiLock)'s
    /// members give theirs); its [`LockGuard::token`] is `Some`.
    pub fn into_inner(self) -> LockGuard {
        self.guard
    }
}

impl Deref for FencedGuard {
    type Target = LockGuard;

    fn deref(&self) -> &LockGuard {
        &self.guard
    }
}

impl fmt::Debug for FencedGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FencedGuard").field("token", &self.token).field("guard", &self.guard).finish()
    }
}
