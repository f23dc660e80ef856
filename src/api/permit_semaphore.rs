//! The permit-expirable semaphore: Redisson's `RPermitExpirableSemaphore`, with leases that
//! the watchdog renews.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api::semaphore::semaphore_handle;
use crate::api::watch::LeaseWatch;
use crate::base::error::Result;
use crate::engine::{self, Engine, LeaseState, PermitHold, Wait};

/// A semaphore whose every permit has a lease (Redisson's `RPermitExpirableSemaphore`): a
/// holder that dies does not keep its permits forever.
///
/// **It has no permits until someone sets them**
/// ([`try_set_permits`](PermitExpirableSemaphore::try_set_permits)): as with
/// [`Semaphore`](crate::Semaphore), `acquire` waits until they are, and a timed acquire that
/// runs out on a semaphore with no permits at all is an error that says so.
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

    /// A handle whose permits take a fixed lease: not renewed, they are taken back after it
    /// even while their guard lives.
    #[must_use = "with_lease returns a new handle and leaves this one unchanged"]
    pub fn with_lease(mut self, lease: Duration) -> PermitExpirableSemaphore {
        self.lease = Some(lease);
        self
    }

    fn take(&self, permits: u64, wait: Wait) -> Result<Option<PermitGuard>> {
        let hold = engine::acquire_expirable(&self.engine, &self.name, permits, self.lease, wait)?;
        Ok(hold.map(|hold| PermitGuard { hold: Some(hold) }))
    }
}

semaphore_handle!(PermitExpirableSemaphore, PermitGuard);

impl PermitGuard {
    /// Whether the permits are held as far as this client knows (no I/O): while their lease
    /// is held or at risk, and valid.
    pub fn is_held(&self) -> bool {
        matches!(self.lease_state(), LeaseState::Held | LeaseState::AtRisk)
    }

    /// The permits' lease state as this client knows it (no I/O).
    pub fn lease_state(&self) -> LeaseState {
        self.hold.as_ref().map_or(LeaseState::Released, PermitHold::state)
    }

    /// Until when the permits are this guard's, as far as this process can tell (see
    /// [`LockGuard::valid_until`](crate::LockGuard::valid_until)); `None` once lost.
    pub fn valid_until(&self) -> Option<Instant> {
        self.hold.as_ref().and_then(|hold| hold.lease().valid_until()).flatten()
    }

    /// How long the permits' lease has left in Redis, by the server's clock (Redisson's
    /// `getLeaseTime`): `None` when they are gone. With the watchdog it starts again at the
    /// watchdog timeout at every renewal; with a fixed lease it counts down.
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        self.hold.as_ref().map_or(Ok(None), PermitHold::remaining_lease)
    }

    /// A handle on the permits' lease for other threads (see
    /// [`LeaseWatch`]).
    pub fn watch(&self) -> LeaseWatch {
        LeaseWatch::new(self.hold.as_ref().map(|hold| Arc::clone(hold.lease())).into_iter().collect(), 1)
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
