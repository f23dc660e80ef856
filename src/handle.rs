//! What every lock handle shares: the acquisition ladder, the queries, and the dispatch to
//! each lock kind's scripts. The public handles (`Lock`, `FairLock`) wrap a [`Handle`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::acquire::{self, Attempt, Wait};
use crate::client::Inner;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::{self, Hold, LockGuard};
use crate::keys;
use crate::lease::Role;
use crate::{fair_lock, fenced_lock, lock, read_write_lock as rw};

/// The lock kinds: they share Redisson's lock hash and differ in how they queue, wake and
/// release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Reentrant,
    Fair,
    /// The read side of a read-write lock.
    Read,
    /// The write side of a read-write lock.
    Write,
    /// A reentrant lock whose every grant carries a fencing token.
    Fenced,
}

/// What one acquire script call answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Acquired, with the fencing token of a fenced lock.
    Granted { token: Option<u64> },
    /// Held by someone else; how long the caller may sleep before trying again (`None`:
    /// no expiry known).
    Busy { ttl: Option<Duration> },
}

impl Reply {
    /// Reads the reply of a script that returns nil when acquired and a PTTL otherwise.
    fn from_pttl(reply: Option<i64>) -> Reply {
        match reply {
            None => Reply::Granted { token: None },
            Some(ms) => Reply::Busy { ttl: u64::try_from(ms).ok().map(Duration::from_millis) },
        }
    }
}

/// One release request, as the release scripts take it.
pub(crate) struct Release<'a> {
    pub(crate) name: &'a str,
    pub(crate) owner: &'a str,
    /// Lease to keep when holds remain.
    pub(crate) keep_millis: u64,
    pub(crate) request_id: &'a str,
    pub(crate) latch_millis: u64,
    /// The client's fair wait timeout (fair locks hand the head a new deadline).
    pub(crate) wait_millis: u64,
}

impl Kind {
    /// One acquire attempt. `queue`: a fair lock may enqueue the caller.
    pub(crate) fn attempt(
        self,
        conn: &mut redis::Connection,
        client: &Inner,
        name: &str,
        owner: &str,
        lease_millis: u64,
        queue: bool,
    ) -> redis::RedisResult<Reply> {
        match self {
            Kind::Reentrant => lock::acquire(conn, name, owner, lease_millis).map(Reply::from_pttl),
            Kind::Fair => fair_lock::acquire(conn, name, owner, lease_millis, client.fair_wait_millis, queue)
                .map(Reply::from_pttl),
            Kind::Read => rw::read_acquire(conn, name, owner, lease_millis).map(Reply::from_pttl),
            Kind::Write => rw::write_acquire(conn, name, owner, lease_millis).map(Reply::from_pttl),
            Kind::Fenced => fenced_lock::acquire(conn, name, owner, lease_millis),
        }
    }

    pub(crate) fn release(
        self,
        conn: &mut redis::Connection,
        release: &Release<'_>,
    ) -> redis::RedisResult<Option<i64>> {
        match self {
            Kind::Reentrant | Kind::Fenced => lock::release(conn, release),
            Kind::Fair => fair_lock::release(conn, release),
            Kind::Read => rw::read_release(conn, release),
            Kind::Write => rw::write_release(conn, release),
        }
    }

    fn force_unlock(self, conn: &mut redis::Connection, client: &Inner, name: &str) -> redis::RedisResult<i64> {
        match self {
            Kind::Reentrant | Kind::Fenced => lock::force_unlock(conn, name),
            Kind::Fair => fair_lock::force_unlock(conn, name, client.fair_wait_millis),
            Kind::Read => rw::force_unlock(conn, name, "read"),
            Kind::Write => rw::force_unlock(conn, name, "write"),
        }
    }

    /// The channel a waiter listens on.
    fn wait_channel(self, name: &str, owner: &str) -> String {
        match self {
            Kind::Reentrant | Kind::Fenced => keys::lock_channel(name),
            Kind::Fair => fair_lock::waiter_channel(name, owner),
            Kind::Read | Kind::Write => rw::channel(name),
        }
    }

    pub(crate) fn role(self) -> Role {
        match self {
            Kind::Reentrant | Kind::Fair | Kind::Fenced => Role::Exclusive,
            Kind::Read => Role::Read,
            Kind::Write => Role::Write,
        }
    }

    /// The hash field that counts `owner`'s holds of this kind.
    pub(crate) fn field(self, owner: &str) -> String {
        match self {
            Kind::Write => rw::write_field(owner),
            _ => owner.to_owned(),
        }
    }

    /// For read holds, the prefix of the owner's per-hold timeout keys.
    pub(crate) fn hold_keys(self, name: &str, owner: &str) -> Option<String> {
        (self == Kind::Read).then(|| rw::hold_keys(name, owner))
    }

    fn is_locked(self, conn: &mut redis::Connection, name: &str) -> redis::RedisResult<bool> {
        match self {
            Kind::Reentrant | Kind::Fair | Kind::Fenced => redis::cmd("EXISTS").arg(name).query(conn),
            Kind::Read => rw::has_read_holds(conn, name),
            Kind::Write => rw::is_write_locked(conn, name),
        }
    }

    /// Leaves whatever the waiter left in Redis when it stops waiting without the lock.
    fn give_up(self, client: &Inner, name: &str, owner: &str) {
        if self == Kind::Fair {
            let _ = client
                .pool
                .run("leaving the queue", |conn| fair_lock::give_up(conn, name, owner, client.fair_wait_millis));
        }
    }
}

#[derive(Clone)]
pub(crate) struct Handle {
    pub(crate) client: Arc<Inner>,
    pub(crate) name: Arc<str>,
    pub(crate) lease: Option<Duration>,
    pub(crate) kind: Kind,
}

impl Handle {
    pub(crate) fn new(client: Arc<Inner>, name: String, kind: Kind) -> Handle {
        Handle { client, name: name.into(), lease: None, kind }
    }

    pub(crate) fn lock(&self) -> Result<LockGuard> {
        self.acquire(Wait::Forever)?.ok_or_else(|| Error::shutdown().on_lock(&self.name))
    }

    pub(crate) fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.acquire(Wait::No)
    }

    pub(crate) fn try_lock_for(&self, timeout: Duration) -> Result<Option<LockGuard>> {
        let deadline = Instant::now()
            .checked_add(timeout)
            .ok_or_else(|| Error::invalid(format!("wait of {timeout:?} overflows the clock")).on_lock(&self.name))?;
        self.acquire(Wait::Until(deadline))
    }

    pub(crate) fn try_lock_until(&self, deadline: Instant) -> Result<Option<LockGuard>> {
        self.acquire(Wait::Until(deadline))
    }

    pub(crate) fn is_locked(&self) -> Result<bool> {
        self.query("checking the lock", |conn| self.kind.is_locked(conn, &self.name))
    }

    pub(crate) fn is_held_by_current_thread(&self) -> Result<bool> {
        Ok(self.hold_count()? > 0)
    }

    /// Also how a thread learns that a lease it still counts as held is gone: Redis says it
    /// holds nothing, and the lease is reported lost.
    pub(crate) fn hold_count(&self) -> Result<u64> {
        let field = self.kind.field(&guard::current_owner(&self.client));
        let count: Option<u64> =
            self.query("reading the hold count", |conn| redis::cmd("HGET").arg(&*self.name).arg(&field).query(conn))?;
        let count = count.unwrap_or(0);
        if count == 0 {
            self.client.learned_not_held(&self.name, self.kind.role());
        }
        Ok(count)
    }

    pub(crate) fn remaining_ttl(&self) -> Result<Option<Duration>> {
        let ms: i64 = self.query("reading the lease", |conn| redis::cmd("PTTL").arg(&*self.name).query(conn))?;
        Ok(match ms {
            -1 => Some(Duration::MAX),
            ms => u64::try_from(ms).ok().map(Duration::from_millis),
        })
    }

    pub(crate) fn force_unlock(&self) -> Result<bool> {
        let deleted = self.query("force-unlocking", |conn| self.kind.force_unlock(conn, &self.client, &self.name))?;
        Ok(deleted == 1)
    }

    /// What every call checks before sending anything: the client runs, the name is valid.
    pub(crate) fn ready(&self) -> Result<()> {
        self.client.check_running().and_then(|()| keys::check_name(&self.name)).map_err(|e| e.on_lock(&self.name))
    }

    fn query<T>(&self, what: &str, op: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>) -> Result<T> {
        self.ready()?;
        self.client.pool.run(what, op).map_err(|e| e.on_lock(&self.name))
    }

    /// Every check an acquire makes before it sends anything: the client runs, the name and
    /// the lease are valid, and the request could ever be granted. Returns the lease in
    /// milliseconds and whether the watchdog keeps it.
    pub(crate) fn prepare(&self) -> Result<(u64, bool)> {
        let (client, name) = (&self.client, &*self.name);
        self.ready()?;
        let lease = match self.lease {
            Some(lease) => (keys::lease_millis("lease", lease).map_err(|e| e.on_lock(name))?, false),
            None => (client.watchdog_millis, true),
        };
        if self.kind == Kind::Write && client.holds(&self.name, Role::Read) && !client.holds(&self.name, Role::Write) {
            return Err(Error::new(
                ErrorKind::WouldDeadlock,
                "this thread holds the read lock: asking for the write lock would wait on itself forever",
            )
            .on_lock(name));
        }
        Ok(lease)
    }

    pub(crate) fn acquire(&self, wait: Wait) -> Result<Option<LockGuard>> {
        let (client, name, kind) = (&self.client, &*self.name, self.kind);
        let (lease_millis, watchdog) = self.prepare()?;
        let owner = guard::current_owner(client);
        let queue = !matches!(wait, Wait::No);
        let attempt = || {
            let sent = Instant::now();
            let reply = client.pool.run("acquiring", |conn| {
                let reply = kind.attempt(conn, client, name, &owner, lease_millis, queue);
                if reply.as_ref().is_err_and(redis::RedisError::is_timeout) {
                    // The outcome is unknown; undo it on this connection, behind the acquire.
                    client.undo_uncertain_acquire(Some(conn), kind, &self.name, &owner);
                }
                reply
            });
            match reply {
                Ok(Reply::Granted { token }) => Ok(Attempt::Acquired((sent, token))),
                Ok(Reply::Busy { ttl }) => Ok(Attempt::Held { ttl }),
                Err(err) => {
                    // A dropped connection leaves the outcome unknown too; that connection
                    // is gone, so the undo takes another.
                    if err.is_connection_error() && !err.is_timeout() {
                        client.undo_uncertain_acquire(None, kind, &self.name, &owner);
                    }
                    Err(err.on_lock(name))
                }
            }
        };
        let result = acquire::acquire(client, || kind.wait_channel(name, &owner), wait, attempt);
        if queue && !matches!(result, Ok(Some(_))) && client.check_running().is_ok() {
            kind.give_up(client, name, &owner);
        }
        let acquired = result.map_err(|e| e.on_lock(name))?;
        Ok(acquired.map(|(sent, token)| {
            let (lease, term) = client.add_hold(kind, &self.name, owner, sent, lease_millis, watchdog);
            LockGuard::new(Hold { client: Arc::clone(client), lease, kind, term, token })
        }))
    }
}

/// The acquisition ladder, queries and `Debug` of a public handle type that wraps a
/// [`Handle`] in its field `0`. Written once here so every lock kind documents and behaves
/// the same.
macro_rules! lock_handle {
    ($handle:ident) => {
        impl $handle {
            /// The lock's name, which is also its Redis key.
            pub fn name(&self) -> &str {
                &self.0.name
            }

            /// A handle whose acquisitions take a fixed lease: it is not renewed, and the lock
            /// expires after it even if the guard is still alive. The lease is checked (at
            /// least 1 ms, at most 2^53 − 1 ms) when the handle is used.
            #[must_use = "with_lease returns a new handle and leaves this one unchanged"]
            pub fn with_lease(mut self, lease: std::time::Duration) -> Self {
                self.0.lease = Some(lease);
                self
            }

            /// The fixed lease of this handle; `None` when the watchdog renews it.
            pub fn lease(&self) -> Option<std::time::Duration> {
                self.0.lease
            }

            /// Blocks until the lock is held. Returns `Err` when that cannot be done: Redis
            /// unreachable, a timeout, bad input, or [`Client::shutdown`](crate::Client::shutdown).
            pub fn lock(&self) -> $crate::Result<$crate::LockGuard> {
                self.0.lock()
            }

            /// One attempt: `Ok(None)` when someone else holds the lock.
            pub fn try_lock(&self) -> $crate::Result<Option<$crate::LockGuard>> {
                self.0.try_lock()
            }

            /// Waits at most `timeout`: `Ok(None)` when the lock was not free in time. A
            /// timeout so large that the deadline overflows `Instant` is
            /// [`InvalidInput`](crate::ErrorKind::InvalidInput); use `lock` to wait without
            /// limit.
            pub fn try_lock_for(&self, timeout: std::time::Duration) -> $crate::Result<Option<$crate::LockGuard>> {
                self.0.try_lock_for(timeout)
            }

            /// Waits until `deadline`: `Ok(None)` when the lock was not free by then.
            pub fn try_lock_until(&self, deadline: std::time::Instant) -> $crate::Result<Option<$crate::LockGuard>> {
                self.0.try_lock_until(deadline)
            }

            /// Whether anyone holds the lock.
            pub fn is_locked(&self) -> $crate::Result<bool> {
                self.0.is_locked()
            }

            /// Whether the current thread holds the lock.
            pub fn is_held_by_current_thread(&self) -> $crate::Result<bool> {
                self.0.is_held_by_current_thread()
            }

            /// How many holds the current thread has on the lock; 0 when it holds none.
            pub fn hold_count(&self) -> $crate::Result<u64> {
                self.0.hold_count()
            }

            /// Time left on the lock's lease: `None` when it is not locked,
            /// `Some(Duration::MAX)` when the key has no expiry (someone removed it).
            pub fn remaining_ttl(&self) -> $crate::Result<Option<std::time::Duration>> {
                self.0.remaining_ttl()
            }

            /// Deletes the lock whoever holds it and wakes its waiters. Returns whether there
            /// was a lock to delete. Its holders learn of the loss at their next renewal.
            pub fn force_unlock(&self) -> $crate::Result<bool> {
                self.0.force_unlock()
            }
        }

        impl std::fmt::Debug for $handle {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($handle))
                    .field("name", &self.0.name)
                    .field("kind", &self.0.kind)
                    .field("lease", &self.0.lease)
                    .finish()
            }
        }
    };
}

pub(crate) use lock_handle;
