//! The semaphore: Redisson's `RSemaphore`. At most N permits out at once, fleet-wide.

use std::fmt;
use std::sync::Arc;

use crate::base::error::Result;
use crate::engine::{self, Engine, Wait};

/// A counting semaphore (Redisson's `RSemaphore`): a number of permits, taken and given
/// back by anyone, fleet-wide. "At most 5 workers on this API at once."
///
/// Redis layout: the key `name` holds the permits available; every release and every
/// added permit publishes the new count on `redisson_sc:{name}`, which wakes as many
/// waiters as the permits can serve (not one, not all). Redisson clients on the same name
/// share the same permits.
///
/// **A semaphore has no permits until someone sets them** ([`try_set_permits`](Semaphore::try_set_permits)
/// or [`add_permits`](Semaphore::add_permits)): [`acquire`](Semaphore::acquire) on one whose
/// permits were never set waits until they are, as Redisson's does, and a
/// [`try_acquire_for`](Semaphore::try_acquire_for) that runs out on a semaphore with no
/// permits at all is an error (`Timeout`) that says so, rather than `Ok(None)`.
///
/// Permits are not owned: a process that dies holding some never gives them back. Where
/// that matters, use a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore), whose
/// permits have leases that a watchdog renews.
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let slots = client.semaphore("api-slots");
/// slots.try_set_permits(5)?; // once; false when already set
/// let permit = slots.acquire(1)?; // waits for a free permit
/// // ... at most 5 of these sections run at once ...
/// drop(permit); // gives it back
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct Semaphore {
    engine: Arc<Engine>,
    name: Arc<str>,
}

/// Permits taken from a [`Semaphore`]; given back on drop or by
/// [`release`](SemaphoreGuard::release). It may move to another thread: permits are not
/// tied to one.
#[must_use = "if unused the permits are given back at once"]
#[clippy::has_significant_drop]
pub struct SemaphoreGuard {
    engine: Arc<Engine>,
    name: Arc<str>,
    permits: u64,
    released: bool,
}

impl Semaphore {
    pub(crate) fn new(engine: Arc<Engine>, name: String) -> Semaphore {
        Semaphore { engine, name: name.into() }
    }

    fn take(&self, permits: u64, wait: Wait) -> Result<Option<SemaphoreGuard>> {
        let taken = engine::acquire_semaphore(&self.engine, &self.name, permits, wait)?;
        Ok(taken.then(|| SemaphoreGuard {
            engine: Arc::clone(&self.engine),
            name: Arc::clone(&self.name),
            permits,
            released: false,
        }))
    }
}

semaphore_handle!(Semaphore, SemaphoreGuard);

impl Semaphore {
    /// Sets the number of permits when none is set yet, for `ttl` only: the semaphore's key
    /// expires after it (Redisson's `trySetPermits(permits, timeToLive)`); whether it did.
    /// A permit taken then given back after the key expired is not given back at all if
    /// given by [`release_if_exists`](Semaphore::release_if_exists). `ttl` must be 1 ms to
    /// 2^53 − 1 ms (`InvalidInput` otherwise, before anything is sent).
    pub fn try_set_permits_with_ttl(&self, permits: u64, ttl: std::time::Duration) -> Result<bool> {
        engine::try_set_permits(&self.engine, &self.name, permits, Some(ttl))
    }

    /// Gives `permits` back only if the semaphore exists (Redisson's `releaseIfExists`):
    /// whether it did. A semaphore whose key is gone (deleted, or past the time to live it
    /// was set with) is not brought back by a late give-back, as
    /// [`add_permits`](Semaphore::add_permits) would.
    pub fn release_if_exists(&self, permits: u64) -> Result<bool> {
        engine::release_if_exists(&self.engine, &self.name, permits)
    }
}

impl SemaphoreGuard {
    /// The number of permits this guard holds.
    pub fn permits(&self) -> u64 {
        self.permits
    }

    /// Gives the permits back and reports the outcome.
    pub fn release(mut self) -> Result<()> {
        self.give_back()
    }

    fn give_back(&mut self) -> Result<()> {
        self.released = true;
        let permits = i64::try_from(self.permits).unwrap_or(i64::MAX);
        engine::add_permits(&self.engine, &self.name, permits).map(drop)
    }
}

impl Drop for SemaphoreGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        if let Err(err) = self.give_back()
            && !err.is_shutdown()
        {
            self.engine.config().events.release_failed(&self.name, &err);
        }
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore").field("name", &self.name).finish()
    }
}

impl fmt::Debug for SemaphoreGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphoreGuard").field("semaphore", &self.name).field("permits", &self.permits).finish()
    }
}

/// The permit ladder and the permit queries of a public semaphore type with fields `engine`
/// and `name` and a method `take(&self, permits, wait)`. Written once so that both
/// semaphores document and behave the same.
macro_rules! semaphore_handle {
    ($semaphore:ident, $guard:ident) => {
        impl $semaphore {
            /// The semaphore's name, which is also its Redis key.
            pub fn name(&self) -> &str {
                &self.name
            }

            /// Sets the number of permits when none is set yet; whether it did. Waiters
            /// are told.
            pub fn try_set_permits(&self, permits: u64) -> $crate::Result<bool> {
                $crate::engine::try_set_permits(&self.engine, &self.name, permits, None)
            }

            /// Adds permits (negative: takes them away, down to below zero if need be);
            /// the permits available after. Waiters are told.
            pub fn add_permits(&self, permits: i64) -> $crate::Result<i64> {
                $crate::engine::add_permits(&self.engine, &self.name, permits)
            }

            /// The permits available now (0 when none was ever set).
            pub fn available_permits(&self) -> $crate::Result<i64> {
                $crate::engine::available_permits(&self.engine, &self.name)
            }

            /// Waits until `permits` are available and takes them.
            pub fn acquire(&self, permits: u64) -> $crate::Result<$guard> {
                self.take(permits, $crate::engine::Wait::Forever)?
                    .ok_or_else(|| $crate::Error::shutdown().on_semaphore(&self.name))
            }

            /// Takes `permits` if they are available now: `Ok(None)` when they are not.
            pub fn try_acquire(&self, permits: u64) -> $crate::Result<Option<$guard>> {
                self.take(permits, $crate::engine::Wait::No)
            }

            /// Waits at most `timeout` for `permits`: `Ok(None)` when they were not
            /// available in time. A timeout that overflows the clock (`Duration::MAX`) is a
            /// wait without deadline, as `acquire`'s.
            pub fn try_acquire_for(
                &self,
                permits: u64,
                timeout: std::time::Duration,
            ) -> $crate::Result<Option<$guard>> {
                self.take(permits, $crate::engine::wait_within(timeout))
            }

            /// Waits until `deadline` for `permits`.
            pub fn try_acquire_until(
                &self,
                permits: u64,
                deadline: std::time::Instant,
            ) -> $crate::Result<Option<$guard>> {
                self.take(permits, $crate::engine::Wait::Until(deadline))
            }
        }
    };
}

pub(crate) use semaphore_handle;
