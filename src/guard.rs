//! The RAII guard every lock kind returns.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::client::Inner;
use crate::error::{Error, ErrorKind, Result};
use crate::handle::{Kind, Release};
use crate::keys;
use crate::lease::{Lease, LeaseState};
use crate::owner;

/// Proof that the current thread holds a lock; releases one hold when dropped.
///
/// The guard is `!Send` (like `std::sync::MutexGuard`): ownership of a lock belongs to the
/// thread that acquired it. It has no lifetime parameter, so it can be stored freely within
/// that thread.
///
/// While the guard lives, a watchdog lease is renewed by the client's renewal thread; a
/// fixed lease ([`Lock::with_lease`](crate::Lock::with_lease)) is not, and runs out.
/// [`is_held`](LockGuard::is_held) tells, without I/O, whether the lease is still held as
/// far as this client knows.
///
/// Dropping the guard releases its hold best-effort: it never panics and never waits longer
/// than the command timeout; a failure is reported to
/// [`LockEvents::release_failed`](crate::LockEvents::release_failed) and the lock then
/// expires after its lease. Call [`unlock`](LockGuard::unlock) to see the outcome.
#[must_use = "if unused the lock is released at once"]
#[clippy::has_significant_drop]
pub struct LockGuard {
    hold: Option<Hold>,
    _not_send: PhantomData<*const ()>,
}

/// One hold of one lock, as recorded by the client that acquired it.
pub(crate) struct Hold {
    pub(crate) client: Arc<Inner>,
    pub(crate) lease: Arc<Lease>,
    pub(crate) kind: Kind,
    /// Whether the watchdog renews this hold's lease.
    pub(crate) watchdog: bool,
    /// The lease this hold was acquired with, in milliseconds.
    pub(crate) lease_millis: u64,
    pub(crate) token: Option<u64>,
}

impl LockGuard {
    pub(crate) fn new(hold: Hold) -> LockGuard {
        LockGuard { hold: Some(hold), _not_send: PhantomData }
    }

    /// Whether the lease is held as far as this client knows (no I/O): false once it was
    /// lost or ran out.
    pub fn is_held(&self) -> bool {
        self.lease_state() == LeaseState::Held
    }

    /// The lease's state as this client knows it (no I/O).
    pub fn lease_state(&self) -> LeaseState {
        self.hold.as_ref().map_or(LeaseState::Released, |h| h.lease.state())
    }

    /// The fencing token of this acquisition: `Some` for fenced locks, `None` otherwise.
    pub fn token(&self) -> Option<u64> {
        self.hold.as_ref().and_then(|h| h.token)
    }

    /// The name of the lock this guard holds.
    pub fn lock_name(&self) -> &str {
        self.hold.as_ref().map_or("", |h| &h.lease.name)
    }

    /// Releases this hold and reports the outcome.
    ///
    /// `Err` with [`ErrorKind::NotHeld`] when the lease was lost (nothing is sent then, so a
    /// new holder is left alone), [`ErrorKind::Timeout`] when Redis did not answer twice
    /// (the lock then expires after its lease), [`ErrorKind::Shutdown`] after the client
    /// was shut down.
    pub fn unlock(mut self) -> Result<()> {
        match self.hold.take() {
            Some(hold) => hold.release(true),
            None => Ok(()),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(hold) = self.hold.take() {
            let client = Arc::clone(&hold.client);
            let name = Arc::clone(&hold.lease.name);
            if let Err(err) = hold.release(false)
                && !err.is_shutdown()
                && !err.is_not_held()
            {
                client.config.events.release_failed(&name, &err);
            }
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock_name())
            .field("state", &self.lease_state())
            .field("token", &self.token())
            .finish()
    }
}

impl Hold {
    /// Releases one hold: local bookkeeping first (so no renewal runs after the release),
    /// then the release script. `retry_timeout`: send once more, with the same request id,
    /// after a timeout (the latch makes that safe).
    fn release(self, retry_timeout: bool) -> Result<()> {
        let client = &self.client;
        let name = &*self.lease.name;
        client.check_running().map_err(|e| e.on_lock(name))?;
        let (was_live, keep_millis, last) = {
            let mut inner = self.lease.lock();
            let was_live = inner.is_live();
            inner.holds = inner.holds.saturating_sub(1);
            if self.watchdog {
                inner.watchdog_holds = inner.watchdog_holds.saturating_sub(1);
            }
            if inner.watchdog_holds == 0 {
                client.renewer.cancel(&mut inner);
                self.lease.wait_for_renewal(&mut inner);
            }
            let last = inner.holds == 0;
            if last && inner.status == LeaseState::Held {
                inner.status = LeaseState::Released;
            }
            let keep = if inner.watchdog_holds > 0 { client.watchdog_millis } else { self.lease_millis };
            (was_live, keep, last)
        };
        if last {
            client.forget_lease(&self.lease);
        }
        if !was_live {
            return Err(
                Error::new(ErrorKind::NotHeld, "the lease was lost before the release; nothing was sent").on_lock(name)
            );
        }
        let request_id = new_request_id();
        let release = Release {
            name,
            owner: &self.lease.owner,
            keep_millis,
            request_id: &request_id,
            latch_millis: latch_lifetime(client.config.command_timeout),
            wait_millis: client.fair_wait_millis,
        };
        let send = || client.pool.run("releasing", |conn| self.kind.release(conn, &release));
        let outcome = match send() {
            Err(err) if retry_timeout && err.is_timeout() => send(),
            other => other,
        };
        match outcome.map_err(|e| e.on_lock(name))? {
            Some(_) => Ok(()),
            None => {
                let mut inner = self.lease.lock();
                if inner.status == LeaseState::Held {
                    inner.status = LeaseState::Lost;
                }
                Err(Error::new(ErrorKind::NotHeld, "this owner no longer holds the lock").on_lock(name))
            }
        }
    }
}

/// A fresh id for one release request (the latch key's suffix).
pub(crate) fn new_request_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// How long a release latch is kept: long enough for any retry of that release.
pub(crate) fn latch_lifetime(command_timeout: Duration) -> u64 {
    let millis = command_timeout.saturating_mul(4).as_millis().max(1000);
    u64::try_from(millis).unwrap_or(u64::MAX).min(keys::MAX_LEASE.as_millis() as u64)
}

/// The owner field of the current thread on `client`.
pub(crate) fn current_owner(client: &Inner) -> String {
    owner::owner_of_current_thread(&client.id)
}
