//! The permit-expirable semaphore: Redisson's `RPermitExpirableSemaphore`, with leases that
//! the watchdog renews.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::{self, Engine, LeaseState, PermitHold, Wait};
use crate::error::{Error, Result};
use crate::kind::semaphore;

/// A semaphore whose every permit has a lease (Redisson's `RPermitExpirableSemaphore`): a
/// holder that dies does not keep its permits forever.
///
/// Beyond Redisson: by default a held permit is **renewed by the watchdog** (the same timing
/// wheel and batched renewals as the locks) while its guard lives, and frees itself one
/// watchdog timeout after its process dies; a slow holder never loses its permit to an
/// expiry. [`with_lease`](PermitExpirableSemaphore::with_lease) gives a fixed lease instead.
/// The guard reports a lost permit as a lock guard reports a lost lease:
/// [`PermitGuard::is_held`] turns false and `LockEvents::lease_lost` is called with the
/// semaphore's name.
///
/// Redis layout: the key `name` holds the permits available; the sorted set
/// `{name}:timeout` holds each taken permit's id (16 random bytes) with its deadline (epoch
/// ms, from the server's clock); `redisson_sc:{name}` carries the count after every release.
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let workers = client.permit_expirable_semaphore("shard-loaders");
/// workers.try_set_permits(8)?;
/// let permit = workers.acquire(1)?; // renewed while it lives
/// // ... a crash here returns the permit after one watchdog timeout ...
/// permit.release()?;
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    engine: Arc<Engine>,
    name: Arc<str>,
    lease: Option<Duration>,
}

/// Permits taken from a [`PermitExpirableSemaphore`]; given back on drop or by
/// [`release`](PermitGuard::release).
#[must_use = "if unused the permits are given back at once"]
#[clippy::has_significant_drop]
pub struct PermitGuard {
    hold: Option<PermitHold>,
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(engine: Arc<Engine>, name: String) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore { engine, name: name.into(), lease: None }
    }

    /// The semaphore's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A handle whose permits take a fixed lease: not renewed, they are taken back after it
    /// even while their guard lives.
    #[must_use = "with_lease returns a new handle and leaves this one unchanged"]
    pub fn with_lease(mut self, lease: Duration) -> PermitExpirableSemaphore {
        self.lease = Some(lease);
        self
    }

    /// Sets the number of permits when none is set yet; whether it did.
    pub fn try_set_permits(&self, permits: u64) -> Result<bool> {
        engine::ready(&self.engine, &self.name)?;
        engine::check_permits(&self.name, permits)?;
        let name = &*self.name;
        self.engine
            .pool_for(name)
            .run("setting permits", |conn| semaphore::try_set(conn, name, permits))
            .map_err(|e| e.on_lock(name))
    }

    /// Adds permits (negative: takes them away); the permits available after.
    pub fn add_permits(&self, permits: i64) -> Result<i64> {
        engine::add_permits(&self.engine, &self.name, permits)
    }

    /// The permits available now, not counting those past their deadline that nobody has
    /// taken back yet.
    pub fn available_permits(&self) -> Result<i64> {
        engine::ready(&self.engine, &self.name)?;
        let name = &*self.name;
        self.engine
            .pool_for(name)
            .run("reading the permits", |conn| semaphore::available(conn, name))
            .map_err(|e| e.on_lock(name))
    }

    /// Waits until `permits` are available and takes them.
    pub fn acquire(&self, permits: u64) -> Result<PermitGuard> {
        self.take(permits, Wait::Forever)?.ok_or_else(|| Error::shutdown().on_lock(&self.name))
    }

    /// Takes `permits` if they are available now: `Ok(None)` when they are not.
    pub fn try_acquire(&self, permits: u64) -> Result<Option<PermitGuard>> {
        self.take(permits, Wait::No)
    }

    /// Waits at most `timeout` for `permits`.
    pub fn try_acquire_for(&self, permits: u64, timeout: Duration) -> Result<Option<PermitGuard>> {
        let deadline = Instant::now()
            .checked_add(timeout)
            .ok_or_else(|| Error::invalid(format!("wait of {timeout:?} overflows the clock")).on_lock(&self.name))?;
        self.take(permits, Wait::Until(deadline))
    }

    /// Waits until `deadline` for `permits`.
    pub fn try_acquire_until(&self, permits: u64, deadline: Instant) -> Result<Option<PermitGuard>> {
        self.take(permits, Wait::Until(deadline))
    }

    fn take(&self, permits: u64, wait: Wait) -> Result<Option<PermitGuard>> {
        let hold = engine::acquire_expirable(&self.engine, &self.name, permits, self.lease, wait)?;
        Ok(hold.map(|hold| PermitGuard { hold: Some(hold) }))
    }
}

impl PermitGuard {
    /// Whether the permits are held as far as this client knows (no I/O).
    pub fn is_held(&self) -> bool {
        self.lease_state() == LeaseState::Held
    }

    /// The permits' lease state as this client knows it (no I/O).
    pub fn lease_state(&self) -> LeaseState {
        self.hold.as_ref().map_or(LeaseState::Released, PermitHold::state)
    }

    /// The number of permits this guard holds.
    pub fn permits(&self) -> usize {
        self.hold.as_ref().map_or(0, PermitHold::permits)
    }

    /// Gives the permits back and reports the outcome: `Err(NotHeld)` when they were lost
    /// (their deadline passed).
    pub fn release(mut self) -> Result<()> {
        self.hold.take().map_or(Ok(()), PermitHold::release)
    }
}

impl Drop for PermitGuard {
    fn drop(&mut self) {
        let Some(hold) = self.hold.take() else { return };
        let name = hold.name().to_owned();
        let events = hold.events();
        if let Err(err) = hold.release()
            && !err.is_shutdown()
            && !err.is_not_held()
        {
            events.release_failed(&name, &err);
        }
    }
}

impl fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitExpirableSemaphore").field("name", &self.name).field("lease", &self.lease).finish()
    }
}

impl fmt::Debug for PermitGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitGuard").field("permits", &self.permits()).field("state", &self.lease_state()).finish()
    }
}
