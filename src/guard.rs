//! The RAII guard every lock kind returns, and the release path.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::client::Inner;
use crate::error::{Error, ErrorKind, Result};
use crate::fan_out;
use crate::handle::{Kind, Release};
use crate::keys;
use crate::lease::{Lease, LeaseState, Term};
use crate::owner;

/// Proof that the current thread holds a lock; releases its hold (or, for a
/// [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock), every member's hold)
/// when dropped.
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
/// Dropping the guard releases best-effort: it never panics and never waits longer than
/// the command timeout per lock; a failure is reported to
/// [`LockEvents::release_failed`](crate::LockEvents::release_failed) and the lock then
/// expires after its lease. Call [`unlock`](LockGuard::unlock) to see the outcome.
///
/// Like a forgotten `MutexGuard`, a guard passed to [`std::mem::forget`] is never released:
/// its watchdog lease stays renewed for as long as the client lives.
#[must_use = "if unused the lock is released at once"]
#[clippy::has_significant_drop]
pub struct LockGuard {
    holds: Vec<Hold>,
    /// How many holds must stay held for the guard to count as held: all of them, or a
    /// Redlock's majority.
    quorum: usize,
    token: Option<u64>,
    validity: Option<Duration>,
    /// Redlock: release on every node at once, each bounded by this.
    concurrent_release: Option<Duration>,
    _not_send: PhantomData<*const ()>,
}

/// One hold of one lock, as recorded by the client that acquired it.
pub(crate) struct Hold {
    pub(crate) client: Arc<Inner>,
    pub(crate) lease: Arc<Lease>,
    pub(crate) kind: Kind,
    /// Renewed by the watchdog, or until a fixed end.
    pub(crate) term: Term,
    pub(crate) token: Option<u64>,
}

impl LockGuard {
    pub(crate) fn new(hold: Hold) -> LockGuard {
        let token = hold.token;
        LockGuard::of(vec![hold], 1, token, None, None)
    }

    pub(crate) fn of(
        holds: Vec<Hold>,
        quorum: usize,
        token: Option<u64>,
        validity: Option<Duration>,
        concurrent_release: Option<Duration>,
    ) -> LockGuard {
        LockGuard { holds, quorum, token, validity, concurrent_release, _not_send: PhantomData }
    }

    /// One guard for every hold of `guards` (a multi-lock's members), all of which must
    /// stay held.
    pub(crate) fn merge(guards: Vec<LockGuard>) -> LockGuard {
        let holds: Vec<Hold> = guards.into_iter().flat_map(|mut g| std::mem::take(&mut g.holds)).collect();
        let quorum = holds.len();
        LockGuard::of(holds, quorum, None, None, None)
    }

    /// Whether the lease is held as far as this client knows (no I/O): false once it was
    /// lost or ran out. For a [`RedLock`](crate::RedLock), while a majority of its nodes'
    /// leases are held; for a [`MultiLock`](crate::MultiLock), while every member's is.
    pub fn is_held(&self) -> bool {
        self.lease_state() == LeaseState::Held
    }

    /// The lease's state as this client knows it (no I/O).
    pub fn lease_state(&self) -> LeaseState {
        if self.holds.is_empty() {
            return LeaseState::Released;
        }
        let held = self.holds.iter().filter(|h| h.lease.state() == LeaseState::Held).count();
        if held >= self.quorum { LeaseState::Held } else { LeaseState::Lost }
    }

    /// The fencing token of this acquisition: `Some` for a [`FencedLock`](crate::FencedLock),
    /// `None` otherwise.
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// For a [`RedLock`](crate::RedLock): the validity it was granted with, the lease less
    /// the time the acquisition took and the clock drift allowance. `None` otherwise.
    pub fn validity(&self) -> Option<Duration> {
        self.validity
    }

    /// The name of the lock this guard holds (the first member's, for a multi-lock).
    pub fn lock_name(&self) -> &str {
        self.holds.first().map_or("", |h| &h.lease.name)
    }

    /// Releases and reports the outcome (for several members: every one is released, and
    /// the first error is returned).
    ///
    /// `Err` with [`ErrorKind::NotHeld`] when the lease was lost (nothing is sent then, so a
    /// new holder is left alone), [`ErrorKind::Timeout`] when Redis did not answer twice
    /// (the lock then expires after its lease), [`ErrorKind::Shutdown`] after the client
    /// was shut down.
    pub fn unlock(mut self) -> Result<()> {
        self.release_all(true).into_iter().next().map_or(Ok(()), |(_, err)| Err(err))
    }

    /// Releases every hold; returns the errors, each with the client whose hold it was.
    fn release_all(&mut self, retry_timeout: bool) -> Vec<(Arc<Inner>, Error)> {
        let mut errors = Vec::new();
        let mut pending = Vec::with_capacity(self.holds.len());
        for hold in std::mem::take(&mut self.holds) {
            let client = Arc::clone(&hold.client);
            match hold.begin_release() {
                Ok(p) => pending.push(p),
                Err(e) => errors.push((client, e)),
            }
        }
        let send = |p: PendingRelease, retry: bool, limit: Option<Duration>| {
            let client = Arc::clone(&p.client);
            p.send(retry, limit).err().map(|e| (client, e))
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

impl Drop for LockGuard {
    fn drop(&mut self) {
        for (client, err) in self.release_all(false) {
            if !err.is_shutdown() && !err.is_not_held() {
                client.config.events.release_failed(err.lock_name().unwrap_or(""), &err);
            }
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock_name())
            .field("holds", &self.holds.len())
            .field("state", &self.lease_state())
            .field("token", &self.token)
            .field("validity", &self.validity)
            .finish()
    }
}

/// A release whose local bookkeeping is done and whose request is still to be sent; it may
/// be sent from another thread.
pub(crate) struct PendingRelease {
    client: Arc<Inner>,
    lease: Arc<Lease>,
    kind: Kind,
    keep_millis: u64,
    request_id: String,
}

impl Hold {
    /// The local half of a release: one hold fewer; when no watchdog hold remains, the
    /// renewal is cancelled and any renewal round trip in flight is waited for, so that no
    /// renewal reaches Redis after the release. `Err(NotHeld)` when the lease was already
    /// lost: nothing is to be sent then.
    fn begin_release(self) -> Result<PendingRelease> {
        let client = &self.client;
        let name = &*self.lease.name;
        client.check_running().map_err(|e| e.on_lock(name))?;
        let mut inner = self.lease.lock();
        let was_live = inner.is_live();
        let last = inner.remove(self.term);
        if inner.watchdog_holds == 0 {
            client.renewer.cancel(&mut inner);
            self.lease.wait_for_renewal(&mut inner, client.config.round_trip_bound());
        }
        let keep_millis = inner.keep_millis(client.watchdog_millis);
        if last && was_live {
            inner.status = LeaseState::Released;
        }
        if !was_live {
            // The lease ran out before this release (its local deadline passed): whatever is
            // under the key now may be someone else's. A loss, reported once.
            self.lease.lose(inner, &client.config.events);
        } else {
            drop(inner);
        }
        if last {
            client.forget_lease(&self.lease);
        }
        if !was_live {
            return Err(
                Error::new(ErrorKind::NotHeld, "the lease was lost before the release; nothing was sent").on_lock(name)
            );
        }
        let request_id = client.next_request_id();
        Ok(PendingRelease { client: self.client, lease: self.lease, kind: self.kind, keep_millis, request_id })
    }
}

impl PendingRelease {
    /// Sends the release script. `retry_timeout`: after a timeout, send once more with the
    /// same request id (the latch makes that safe). `limit`: a tighter bound than the
    /// command timeout.
    pub(crate) fn send(self, retry_timeout: bool, limit: Option<Duration>) -> Result<()> {
        let client = &self.client;
        let name = &*self.lease.name;
        let release = Release {
            name,
            owner: &self.lease.owner,
            keep_millis: self.keep_millis,
            request_id: &self.request_id,
            latch_millis: latch_lifetime(client.config.command_timeout),
            wait_millis: client.fair_wait_millis,
        };
        let send = || client.pool.run_within("releasing", limit, |conn| self.kind.release(conn, &release));
        let outcome = match send() {
            // The first attempt may have gone through. A retry that finds nothing of this
            // owner means the hold is gone either way (only a release that leaves holds
            // behind writes the latch that would replay its outcome).
            Err(err) if retry_timeout && err.is_timeout() => send().map(|reply| reply.or(Some(1))),
            other => other,
        };
        match outcome.map_err(|e| e.on_lock(name))? {
            Some(_) => Ok(()),
            None => {
                // Redis says the owner holds nothing: the lease was lost (a restart, an
                // eviction, a force unlock), and this release is the first to learn it.
                self.lease.lose(self.lease.lock(), &client.config.events);
                Err(Error::new(ErrorKind::NotHeld, "this owner no longer holds the lock").on_lock(name))
            }
        }
    }
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
