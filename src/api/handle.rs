//! What every public lock handle shares: the acquisition ladder and the queries, on a
//! [`Handle`], and the macro that gives each public handle type (`Lock`, `FairLock`, ...)
//! the same methods and documentation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api::guard::{GuardMode, LockGuard};
use crate::base::backoff::BackOff;
use crate::base::error::{Context, Error, Result};
use crate::engine::{self, Engine, Request, Wait};
use crate::kind::{Kind, LockKeys};
use crate::transport::Conn;

#[derive(Clone)]
pub(crate) struct Handle {
    pub(crate) engine: Arc<Engine>,
    pub(crate) name: Arc<str>,
    pub(crate) lease: Option<Duration>,
    pub(crate) kind: Kind,
    /// A spin lock's sleeps between attempts (`None`: it waits for messages).
    pub(crate) backoff: Option<BackOff>,
    /// Whose the holds are: the acquiring thread's, or each acquisition's own (a
    /// [`SendableLock`](crate::SendableLock)'s).
    pub(crate) per_thread: bool,
    /// What a candidate advertises when it leads (an election's campaign).
    pub(crate) advertise: Option<Arc<str>>,
    /// How long after the grant the lock stays taken at least (see `keep_at_least`).
    pub(crate) keep_at_least: Option<Duration>,
    /// The keys and channels of `name` that the kind's calls write, written once here.
    pub(crate) lock_keys: Option<Arc<LockKeys>>,
}

impl Handle {
    pub(crate) fn new(engine: Arc<Engine>, name: impl Into<Arc<str>>, kind: Kind) -> Handle {
        let backoff = kind.polls().then_some(BackOff::DEFAULT);
        let name: Arc<str> = name.into();
        Handle {
            engine,
            lock_keys: kind.lock_keys(&name),
            name,
            lease: None,
            kind,
            backoff,
            per_thread: true,
            advertise: None,
            keep_at_least: None,
        }
    }

    pub(crate) fn request(&self) -> Request<'_> {
        Request {
            name: &self.name,
            kind: self.kind,
            lease: self.lease,
            backoff: self.backoff,
            per_thread: self.per_thread,
            advertise: self.advertise.as_deref(),
            keep_at_least: self.keep_at_least,
            lock_keys: self.lock_keys.as_ref(),
        }
    }

    // The guard's mode is the caller's to name: a handle's `per_thread` says which one it
    // gives (`ThreadBound` when true, `Sendable` when false), and each public handle type
    // names only its own.
    pub(crate) fn lock<M: GuardMode>(&self) -> Result<LockGuard<M>> {
        self.acquire(Wait::Forever)?.ok_or_else(|| Error::shutdown().on_lock(&self.name))
    }

    pub(crate) fn try_lock<M: GuardMode>(&self) -> Result<Option<LockGuard<M>>> {
        self.acquire(Wait::No)
    }

    pub(crate) fn try_lock_for<M: GuardMode>(&self, timeout: Duration) -> Result<Option<LockGuard<M>>> {
        self.acquire(engine::wait_within(timeout))
    }

    pub(crate) fn try_lock_until<M: GuardMode>(&self, deadline: Instant) -> Result<Option<LockGuard<M>>> {
        self.acquire(Wait::Until(deadline))
    }

    pub(crate) fn acquire<M: GuardMode>(&self, wait: Wait) -> Result<Option<LockGuard<M>>> {
        Ok(engine::acquire(&self.engine, self.request(), wait)?.map(LockGuard::new))
    }

    /// Every check an acquire makes before it sends anything (see [`engine::prepare`]).
    pub(crate) fn prepare(&self) -> Result<()> {
        engine::prepare(&self.engine, self.request()).map(drop)
    }

    /// The checks every call makes before it sends anything: the client runs, the name is
    /// valid.
    pub(crate) fn ready(&self) -> Result<()> {
        engine::ready(&self.engine, &self.name)
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
        let field = self.kind.field(&self.engine.current_owner());
        let count: Option<u64> =
            self.query("reading the hold count", |conn| redis::cmd("HGET").arg(&*self.name).arg(&field).query(conn))?;
        let count = count.unwrap_or(0);
        if count == 0 {
            self.engine.learned_not_held(&self.name, self.kind.role());
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
        let wait_millis = self.engine.fair_wait_millis();
        self.ready()?;
        // Sent again only when it never left: a second send would find nothing and answer
        // `false` for a lock the first one deleted.
        let deleted = engine::with_retries(&self.engine, None, |_| {
            self.engine
                .pool_for(&self.name)
                .run_once("force-unlocking", |conn| self.kind.force_unlock(conn, &self.name, wait_millis))
        })
        .on_lock(&self.name)?;
        Ok(deleted == 1)
    }

    /// A query, ridden through a restart or a failover within the retry budget (queries
    /// change nothing, so trying again is always safe).
    fn query<T>(&self, what: &str, mut op: impl FnMut(&mut Conn) -> redis::RedisResult<T>) -> Result<T> {
        self.ready()?;
        engine::with_retries(&self.engine, None, |_| self.engine.pool_for(&self.name).run(what, &mut op))
            .on_lock(&self.name)
    }
}

/// The acquisition ladder, queries and `Debug` of a public handle type that wraps a
/// [`Handle`] in its field `0`, whose holds are the acquiring thread's. Written once here
/// so every lock kind documents and behaves the same.
macro_rules! lock_handle {
    ($handle:ident) => {
        $crate::api::handle::handle_basics!($handle);
        $crate::api::handle::acquire_ladder!($handle, $crate::LockGuard);

        impl $handle {
            /// Whether the current thread holds the lock.
            pub fn is_held_by_current_thread(&self) -> $crate::Result<bool> {
                self.0.is_held_by_current_thread()
            }

            /// How many holds the current thread has on the lock; 0 when it holds none.
            pub fn hold_count(&self) -> $crate::Result<u64> {
                self.0.hold_count()
            }
        }
    };
}

/// The acquisition ladder of a public handle type, giving guards of type `$guard`.
macro_rules! acquire_ladder {
    ($handle:ident, $guard:ty) => {
        impl $handle {
            /// Blocks until the lock is held, riding out failures that pass by themselves (Redis
            /// unreachable, a failover, a replica that has not confirmed a grant yet) however
            /// long they last; [`LockEvents::waiting_through_outage`](crate::LockEvents::waiting_through_outage)
            /// tells when one outlasts the retry budget. Returns `Err` for what waiting does
            /// not mend: bad input, a permission refused, a command with no reply in time, an
            /// interrupt, or [`Client::shutdown`](crate::Client::shutdown).
            pub fn lock(&self) -> $crate::Result<$guard> {
                self.0.lock()
            }

            /// One attempt: `Ok(None)` when someone else holds the lock.
            pub fn try_lock(&self) -> $crate::Result<Option<$guard>> {
                self.0.try_lock()
            }

            /// Waits at most `timeout`: `Ok(None)` when the lock was not free in time. A
            /// timeout so large that the deadline overflows `Instant` (`Duration::MAX`) is a
            /// wait without deadline, as `lock`'s.
            pub fn try_lock_for(&self, timeout: std::time::Duration) -> $crate::Result<Option<$guard>> {
                self.0.try_lock_for(timeout)
            }

            /// Waits until `deadline`: `Ok(None)` when the lock was not free by then.
            pub fn try_lock_until(&self, deadline: std::time::Instant) -> $crate::Result<Option<$guard>> {
                self.0.try_lock_until(deadline)
            }
        }
    };
}

/// The name, the lease, the queries about the lock as a whole and `Debug` of a public
/// handle type.
macro_rules! handle_basics {
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

            /// Whether anyone holds the lock.
            pub fn is_locked(&self) -> $crate::Result<bool> {
                self.0.is_locked()
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

/// `keep_at_least` for the handle types whose release can leave the lock taken (a plain
/// lock's hash: `Lock`, `NonReentrantLock`, `SpinLock`, `FencedLock`, `SendableLock`).
macro_rules! keep_at_least {
    ($handle:ident) => {
        impl $handle {
            /// A handle whose holds keep the lock taken at least `keep` after their grant,
            /// however soon they are released: a release before then leaves the lock to
            /// expire `keep` after the grant (ShedLock's `lockAtLeastFor`), under an owner
            /// no thread has (`<client id>:0`), so that nobody, this thread included, takes
            /// it again before. With [`with_lease`](Self::with_lease) as the longest a run
            /// may hold it (`lockAtMostFor`), this runs a scheduled job once per window across
            /// a fleet whose clocks and triggers differ by less than `keep`: a run that
            /// starts within the window finds the lock taken (`try_lock` gives `None`).
            ///
            /// Checked when the handle is used: at least 1 ms, at most 2^53 − 1 ms, and no
            /// longer than a fixed lease (`InvalidInput` before anything is sent).
            ///
            /// ```no_run
            /// use std::time::Duration;
            ///
            /// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
            /// let nightly = client
            ///     .lock("nightly-report")
            ///     .with_lease(Duration::from_secs(3600))
            ///     .keep_at_least(Duration::from_secs(600));
            /// if let Some(guard) = nightly.try_lock()? {
            ///     // ... the job: once per window of ten minutes, fleet-wide ...
            ///     guard.unlock()?; // the lock stays taken until ten minutes after the grant
            /// }
            /// # Ok::<(), redlease::Error>(())
            /// ```
            #[must_use = "keep_at_least returns a new handle and leaves this one unchanged"]
            pub fn keep_at_least(mut self, keep: std::time::Duration) -> Self {
                self.0.keep_at_least = Some(keep);
                self
            }
        }
    };
}

pub(crate) use {acquire_ladder, handle_basics, keep_at_least, lock_handle};
