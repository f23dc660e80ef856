//! The reentrant lock: Redisson's `RLock`.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::acquire::{self, Attempt, Wait};
use crate::client::Inner;
use crate::error::{Error, Result};
use crate::guard::{self, Hold, LockGuard};
use crate::keys;
use crate::scripts;

/// A reentrant, non-fair distributed lock (Redisson's `RLock`).
///
/// A handle is cheap to create and to clone, and does no I/O until used. Ownership is per
/// thread: the same thread acquiring again is reentrant and gets another guard; each guard
/// releases one hold. Another thread, in this process or another, waits.
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
pub struct Lock {
    client: Arc<Inner>,
    name: Arc<str>,
    lease: Option<Duration>,
}

impl Lock {
    pub(crate) fn new(client: Arc<Inner>, name: String) -> Lock {
        Lock { client, name: name.into(), lease: None }
    }

    /// The lock's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A handle whose acquisitions take a fixed lease: it is not renewed, and the lock
    /// expires after it even if the guard is still alive. The lease is checked (at least
    /// 1 ms, at most 2^53 − 1 ms) when the handle is used.
    #[must_use = "with_lease returns a new handle and leaves this one unchanged"]
    pub fn with_lease(mut self, lease: Duration) -> Lock {
        self.lease = Some(lease);
        self
    }

    /// The fixed lease of this handle; `None` when the watchdog renews it.
    pub fn lease(&self) -> Option<Duration> {
        self.lease
    }

    /// Blocks until the lock is held.
    pub fn lock(&self) -> Result<LockGuard> {
        self.acquire(Wait::Forever)?.ok_or_else(|| Error::shutdown().on_lock(&self.name))
    }

    /// One attempt: `Ok(None)` when someone else holds the lock.
    pub fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.acquire(Wait::No)
    }

    /// Waits at most `timeout`: `Ok(None)` when the lock was not free in time. A timeout so
    /// large that the deadline overflows `Instant` is [`InvalidInput`](crate::ErrorKind::InvalidInput);
    /// use [`lock`](Lock::lock) to wait without limit.
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<LockGuard>> {
        let deadline = Instant::now()
            .checked_add(timeout)
            .ok_or_else(|| Error::invalid(format!("wait of {timeout:?} overflows the clock")).on_lock(&self.name))?;
        self.acquire(Wait::Until(deadline))
    }

    /// Waits until `deadline`: `Ok(None)` when the lock was not free by then.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<LockGuard>> {
        self.acquire(Wait::Until(deadline))
    }

    /// Whether anyone holds the lock.
    pub fn is_locked(&self) -> Result<bool> {
        self.query("checking the lock", |conn| redis::cmd("EXISTS").arg(&*self.name).query(conn))
    }

    /// Whether the current thread holds the lock.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        let owner = guard::current_owner(&self.client);
        self.query("checking the owner", |conn| redis::cmd("HEXISTS").arg(&*self.name).arg(&owner).query(conn))
    }

    /// How many holds the current thread has on the lock; 0 when it holds none.
    pub fn hold_count(&self) -> Result<u64> {
        let owner = guard::current_owner(&self.client);
        let count: Option<u64> =
            self.query("reading the hold count", |conn| redis::cmd("HGET").arg(&*self.name).arg(&owner).query(conn))?;
        Ok(count.unwrap_or(0))
    }

    /// Time left on the lock's lease: `None` when it is not locked, `Some(Duration::MAX)`
    /// when the key has no expiry (someone removed it).
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        let ms: i64 = self.query("reading the lease", |conn| redis::cmd("PTTL").arg(&*self.name).query(conn))?;
        Ok(match ms {
            -1 => Some(Duration::MAX),
            ms => u64::try_from(ms).ok().map(Duration::from_millis),
        })
    }

    /// Deletes the lock whoever holds it and wakes its waiters. Returns whether there was
    /// a lock to delete. Its holders learn of the loss at their next renewal.
    pub fn force_unlock(&self) -> Result<bool> {
        let channel = keys::lock_channel(&self.name);
        let deleted: i64 = self.query("force-unlocking", |conn| {
            scripts::FORCE_UNLOCK.key(&*self.name).key(&channel).arg(0).invoke(conn)
        })?;
        Ok(deleted == 1)
    }

    fn query<T>(&self, what: &str, op: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>) -> Result<T> {
        self.client.check_running().map_err(|e| e.on_lock(&self.name))?;
        keys::check_name(&self.name).map_err(|e| e.on_lock(&self.name))?;
        self.client.pool.run(what, op).map_err(|e| e.on_lock(&self.name))
    }

    fn acquire(&self, wait: Wait) -> Result<Option<LockGuard>> {
        let client = &self.client;
        let name = &*self.name;
        client.check_running().map_err(|e| e.on_lock(name))?;
        keys::check_name(name).map_err(|e| e.on_lock(name))?;
        let (lease_millis, watchdog) = match self.lease {
            Some(lease) => (keys::lease_millis("lease", lease).map_err(|e| e.on_lock(name))?, false),
            None => (client.watchdog_millis, true),
        };
        let owner = guard::current_owner(client);
        let channel = keys::lock_channel(name);
        let attempt = || {
            let sent = Instant::now();
            let reply = client.pool.run("acquiring", |conn| {
                scripts::ACQUIRE.key(name).arg(lease_millis).arg(&owner).invoke::<Option<i64>>(conn)
            });
            match reply {
                Ok(reply) => Ok(Attempt::from_pttl(reply, || sent)),
                Err(err) => {
                    if err.is_timeout() {
                        client.undo_uncertain_acquire(&self.name, &owner);
                    }
                    Err(err.on_lock(name))
                }
            }
        };
        let acquired = acquire::acquire(client, &channel, wait, attempt).map_err(|e| e.on_lock(name))?;
        Ok(acquired.map(|sent| {
            let lease = client.add_hold(&self.name, owner, sent, lease_millis, watchdog);
            LockGuard::new(Hold { client: Arc::clone(client), lease, watchdog, lease_millis, token: None })
        }))
    }
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock").field("name", &self.name).field("lease", &self.lease).finish()
    }
}
