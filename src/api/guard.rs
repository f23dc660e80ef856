//! The RAII guard every lock kind returns, and the release path.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use smallvec::SmallVec;

use crate::api::watch::{LeaseWatch, combined_state, combined_valid_until};
use crate::base::error::{Error, Result};
use crate::engine::{Engine, Hold, LeaseState, PendingRelease};
use crate::support::fan_out;

/// A guard's holds: one for every kind but the multi-lock and Redlock, kept inline (a
/// separate allocation was 104 B a lease, for as long as the lease is held).
pub(crate) type Holds = SmallVec<[Hold; 1]>;

/// Whose a guard's holds are, and so whether it may change threads: the type parameter
/// of [`LockGuard`], [`ThreadBound`] or [`Sendable`] (as `lock_api`'s guard markers).
pub trait GuardMode: sealed::Sealed {}

/// The guard's holds are the acquiring thread's (`<client id>:<thread number>`, as
/// Redisson's): the guard is `!Send`, and a reentrant kind counts that thread's holds.
/// The default mode of [`LockGuard`].
#[derive(Debug)]
pub struct ThreadBound(PhantomData<*const ()>);

/// The guard's holds are its own (a fresh owner, `<client id>:<number>`, given to this
/// acquisition alone and never to a thread): the guard is `Send` and may be released on
/// any thread. Given by [`SendableLock`](crate::SendableLock).
#[derive(Debug)]
pub struct Sendable(());

impl GuardMode for ThreadBound {}
impl GuardMode for Sendable {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::api::guard::ThreadBound {}
    impl Sealed for crate::api::guard::Sendable {}
}

/// Proof that the current thread holds a lock; releases its hold (or, for a
/// [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock), every member's hold)
/// when dropped.
///
/// A [`ThreadBound`] guard (the default, and what every lock kind gives) is `!Send` (like
/// `std::sync::MutexGuard`): ownership of a lock belongs to the thread that acquired it. It
/// has no lifetime parameter, so it can be stored freely within that thread. A
/// [`Sendable`] guard, from a [`SendableLock`](crate::SendableLock), is `Send`: its owner
/// is its own, not a thread's.
///
/// While the guard lives, a watchdog lease is renewed by the client's renewal thread; a
/// fixed lease ([`Lock::with_lease`](crate::Lock::with_lease)) is not, and runs out.
/// [`is_held`](LockGuard::is_held) tells, without I/O, whether the lease is still held as
/// far as this client knows.
///
/// Dropping the guard releases best-effort: it never panics and never waits longer than
/// the command timeout per lock; a failure is reported to
/// [`LockEvents::release_failed`](crate::LockEvents::release_failed) and the lock then
/// expires after its lease. Call [`unlock`](LockGuard::unlock) to see the outcome.
///
/// Like a forgotten `MutexGuard`, a guard passed to [`std::mem::forget`] is never released:
/// its watchdog lease stays renewed for as long as the client lives.
#[must_use = "if unused the lock is released at once"]
#[clippy::has_significant_drop]
pub struct LockGuard<M: GuardMode = ThreadBound> {
    holds: Holds,
    /// How many holds must stay held for the guard to count as held: all of them, or a
    /// Redlock's majority.
    quorum: usize,
    token: Option<u64>,
    /// Redlock: release on every node at once, each bounded by this.
    concurrent_release: Option<Duration>,
    _mode: PhantomData<M>,
}

impl<M: GuardMode> LockGuard<M> {
    pub(crate) fn new(hold: Hold) -> LockGuard<M> {
        let token = hold.token();
        LockGuard::of(smallvec::smallvec![hold], 1, token, None)
    }

    pub(crate) fn of(
        holds: Holds,
        quorum: usize,
        token: Option<u64>,
        concurrent_release: Option<Duration>,
    ) -> LockGuard<M> {
        LockGuard { holds, quorum, token, concurrent_release, _mode: PhantomData }
    }

    /// One guard for every hold of `guards` (a multi-lock's members), all of which must
    /// stay held.
    pub(crate) fn merge(guards: Vec<LockGuard<M>>) -> LockGuard<M> {
        let holds: Holds = guards.into_iter().flat_map(|mut g| std::mem::take(&mut g.holds)).collect();
        let quorum = holds.len();
        LockGuard::of(holds, quorum, None, None)
    }

    /// Whether the lease is held as far as this client knows (no I/O): true while it is
    /// [`Held`](LeaseState::Held) or [`AtRisk`](LeaseState::AtRisk), false once it was lost
    /// or its validity ran out ([`valid_until`](LockGuard::valid_until)). For a
    /// [`RedLock`](crate::RedLock), while a majority of its nodes' leases are held; for a
    /// [`MultiLock`](crate::MultiLock), while every member's is.
    pub fn is_held(&self) -> bool {
        matches!(self.lease_state(), LeaseState::Held | LeaseState::AtRisk)
    }

    /// The lease's state as this client knows it (no I/O): `Held`; `AtRisk` when renewals
    /// are failing and the lease is valid only until [`valid_until`](LockGuard::valid_until);
    /// `Lost`.
    pub fn lease_state(&self) -> LeaseState {
        combined_state(self.holds.iter().map(Hold::state), self.quorum)
    }

    /// Until when no other owner can hold the lock, as far as this process can tell (no
    /// I/O): the instant the last successful acquire or renewal was *sent*, plus the lease,
    /// less the clock-drift allowance (1 % of the lease and 2 ms by default:
    /// [`ClientBuilder::clock_drift_rate`](crate::ClientBuilder::clock_drift_rate)). Redis
    /// expires the key no earlier, while the two clocks run at rates within the allowance.
    /// It moves forward with every renewal; [`is_held`](LockGuard::is_held) turns false
    /// when it passes. `None` once the lease is lost (and for a fixed lease too long for
    /// the clock to hold its end). For a [`MultiLock`](crate::MultiLock), the earliest of
    /// its members'; for a [`RedLock`](crate::RedLock), the latest its majority shares.
    ///
    /// A [`LeaseWatch`] ([`watch`](LockGuard::watch)) gives the same to
    /// other threads.
    pub fn valid_until(&self) -> Option<Instant> {
        combined_valid_until(self.holds.iter().map(|h| h.lease().valid_until()), self.quorum)
    }

    /// A handle on this guard's lease for other threads (a thread-bound guard is `!Send`):
    /// workers ask it whether they may still act, and block on it until the lease is at
    /// risk or lost. See [`LeaseWatch`].
    pub fn watch(&self) -> LeaseWatch {
        LeaseWatch::new(self.holds.iter().map(|h| Arc::clone(h.lease())).collect(), self.quorum)
    }

    /// The fencing token of this acquisition: `Some` for a [`FencedLock`](crate::FencedLock)'s
    /// grant (taken through an [`AnyLock`](crate::AnyLock), or a
    /// [`FencedGuard::into_inner`](crate::FencedGuard::into_inner)), `None` otherwise. A
    /// `FencedLock`'s own guard, [`FencedGuard`](crate::FencedGuard), has it unwrapped.
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// The name of the lock this guard holds (the first member's, for a multi-lock).
    pub fn lock_name(&self) -> &str {
        self.holds.first().map_or("", Hold::lock_name)
    }

    /// The owner this guard's holds are recorded under in Redis, `<client id>:<thread
    /// number>` (for a [`Sendable`] guard, a number of its own): the field of the lock hash that counts them (a writer's field is
    /// `<owner>:write`), and what Redisson calls the holder (the first member's, for a
    /// multi-lock). No I/O: the library chose it when the lock was acquired.
    ///
    /// ```no_run
    /// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
    /// let guard = client.lock("nightly-report").lock()?;
    /// assert!(guard.owner().starts_with(&format!("{}:", client.id())));
    /// # Ok::<(), redlease::Error>(())
    /// ```
    pub fn owner(&self) -> &str {
        self.holds.first().map_or("", Hold::owner)
    }

    /// Releases and reports the outcome (for several members: every one is released, and
    /// the first error is returned).
    ///
    /// `Err` with [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the lease was lost (nothing is sent then, so a
    /// new holder is left alone), [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) when Redis did not answer twice
    /// (the lock then expires after its lease), [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) after the client
    /// was shut down.
    pub fn unlock(mut self) -> Result<()> {
        self.release_all(true).into_iter().next().map_or(Ok(()), |(_, err)| Err(err))
    }

    /// Releases every hold; returns the errors, each with the engine whose hold it was.
    fn release_all(&mut self, retry_timeout: bool) -> Vec<(Arc<Engine>, Error)> {
        let mut errors = Vec::new();
        let mut pending = Vec::with_capacity(self.holds.len());
        for hold in std::mem::take(&mut self.holds) {
            let engine = Arc::clone(hold.engine());
            match hold.begin_release() {
                Ok(p) => pending.push(p),
                Err(e) => errors.push((engine, e)),
            }
        }
        let send = |p: PendingRelease, retry: bool, limit: Option<Duration>| {
            let engine = Arc::clone(p.engine());
            p.send(retry, limit).err().map(|e| (engine, e))
        };
        match self.concurrent_release {
            None => errors.extend(pending.into_iter().filter_map(|p| send(p, retry_timeout, None))),
            Some(limit) => {
                let sent = fan_out::concurrently(pending, |p| send(p, false, Some(limit)));
                errors.extend(sent.into_iter().flatten().flatten());
            }
        }
        errors
    }
}

impl<M: GuardMode> Drop for LockGuard<M> {
    fn drop(&mut self) {
        for (engine, err) in self.release_all(false) {
            // A lost lease is reported by the release that found it (`lease_lost`), not as
            // a failed release.
            if !err.is_shutdown() && !err.is_not_held() {
                engine.config().events.release_failed(err.lock_name().unwrap_or(""), &err);
            }
        }
    }
}

impl<M: GuardMode> fmt::Debug for LockGuard<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock_name())
            .field("holds", &self.holds.len())
            .field("state", &self.lease_state())
            .field("token", &self.token)
            .finish()
    }
}
