//! Local state of one thread's holds on one lock: a [`Lease`], shared by that thread's
//! guards of the lock and by the renewal thread.
//!
//! A reentrant lock is one Redis hash field per owner, so all guards one thread holds on a
//! lock stand for the same Redis hold and share one `Lease`. When the lease is lost every
//! one of those guards reports it.
//!
//! | status     | event                                              | next       |
//! |------------|----------------------------------------------------|------------|
//! | `Held`     | renewal sent at `t` succeeds                       | `Held`, expires at `t` + lease |
//! | `Held`     | Redis says the owner's field is gone               | `Lost`     |
//! | `Held`     | local deadline passes (renewals failed, or a fixed lease ran out) | `Lost` (seen by `state()`) |
//! | `Held`     | the last guard is released                         | `Released` |
//! | `Lost`     | guards are released                                | `Lost` (nothing is sent) |
//!
//! A new acquisition by the same thread after a loss starts a new `Lease`.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::wheel::WheelKey;

/// What a guard can tell about its lease without asking Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseState {
    /// Held as far as this client knows: the last acquire or renewal succeeded and its
    /// lease has not run out.
    Held,
    /// The lease is gone: it ran out, Redis said this owner no longer holds the lock, or
    /// renewals failed until it ran out. Another owner may hold the lock now.
    Lost,
    /// This guard released its hold.
    Released,
}

/// Which kind of hold a lease stands for: a thread's read and write holds on one
/// read-write lock are different hash fields, so they are different leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    Exclusive,
    Read,
    Write,
}

pub(crate) struct Lease {
    /// The lock's name, which is also its Redis key.
    pub(crate) name: Arc<str>,
    /// `<client uuid>:<thread number>`.
    pub(crate) owner: String,
    pub(crate) role: Role,
    /// The hash field that records the holds: the owner, or `<owner>:write`.
    pub(crate) field: String,
    /// For read holds: the prefix of their per-hold timeout keys, which the watchdog
    /// renews along with the hash.
    pub(crate) hold_keys: Option<String>,
    inner: Mutex<LeaseInner>,
    renewal_done: Condvar,
}

pub(crate) struct LeaseInner {
    pub(crate) status: LeaseState,
    /// When the lease runs out by the local clock, measured from when the last successful
    /// acquire or renewal was *sent* (so never later than Redis's own expiry).
    pub(crate) expires_at: Option<Instant>,
    /// Guards alive on this lease.
    pub(crate) holds: u32,
    /// Of those, guards whose lease the watchdog renews.
    pub(crate) watchdog_holds: u32,
    /// The lease's entry in the renewal wheel, while one is scheduled.
    pub(crate) renewal: Option<WheelKey>,
    /// A renewal round trip that includes this lease is in flight.
    pub(crate) renewing: bool,
}

impl Lease {
    pub(crate) fn new(name: Arc<str>, owner: String, role: Role, field: String, hold_keys: Option<String>) -> Lease {
        Lease {
            name,
            owner,
            role,
            field,
            hold_keys,
            inner: Mutex::new(LeaseInner {
                status: LeaseState::Held,
                expires_at: None,
                holds: 0,
                watchdog_holds: 0,
                renewal: None,
                renewing: false,
            }),
            renewal_done: Condvar::new(),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, LeaseInner> {
        self.inner.lock()
    }

    /// The state as a guard reports it: a `Held` lease whose local deadline has passed is
    /// `Lost`.
    pub(crate) fn state(&self) -> LeaseState {
        let inner = self.inner.lock();
        match inner.status {
            LeaseState::Held if inner.expires_at.is_some_and(|at| Instant::now() >= at) => LeaseState::Lost,
            status => status,
        }
    }

    /// Waits until no renewal round trip carrying this lease is in flight, so that none
    /// reaches Redis after the release that follows.
    pub(crate) fn wait_for_renewal(&self, inner: &mut MutexGuard<'_, LeaseInner>) {
        while inner.renewing {
            self.renewal_done.wait(inner);
        }
    }

    /// Called by the renewal thread when a round trip carrying this lease has ended.
    pub(crate) fn renewal_finished(&self, inner: &mut MutexGuard<'_, LeaseInner>) {
        inner.renewing = false;
        self.renewal_done.notify_all();
    }
}

impl LeaseInner {
    /// Whether a new acquisition by the same thread can join this lease.
    pub(crate) fn is_live(&self) -> bool {
        self.status == LeaseState::Held && self.expires_at.is_none_or(|at| Instant::now() < at)
    }
}
