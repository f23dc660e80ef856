//! Local state of one thread's holds on one lock: a [`Lease`], shared by that thread's
//! guards of the lock and by the renewal thread.
//!
//! A reentrant lock is one Redis hash field per owner, so all guards one thread holds on a
//! lock stand for the same Redis hold and share one `Lease`. The holds may have different
//! leases (the watchdog's, renewed, and fixed ones of any length): the lease is held until
//! the latest of them ends, and Redis's expiry is never set shorter than that (see the
//! acquire, renew and release scripts). When the lease is lost every one of those guards
//! reports it.
//!
//! | status     | event                                              | next       |
//! |------------|----------------------------------------------------|------------|
//! | `Held`     | renewal sent at `t` succeeds                       | `Held`, watchdog part expires at `t` + lease |
//! | `Held`     | Redis says the owner's field is gone (renewal, release or query) | `Lost`, reported once |
//! | `Held`     | local deadline passes (renewals failed, or every fixed lease ran out) | `Lost` (seen by `state()`; reported by whoever acts on it first) |
//! | `Held`     | the last guard is released                         | `Released` |
//! | `Released` | that release finds nothing of the owner in Redis   | `Lost`, reported once |
//! | `Lost`     | guards are released                                | `Lost` (nothing is sent) |
//!
//! A new acquisition by the same thread after a loss starts a new `Lease`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::clock;
use crate::events::Events;
use crate::keys;
use crate::kind::Role;
use crate::kind::semaphore::PermitId;
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

/// How long one hold lasts: renewed by the watchdog, or until a fixed end (`None`: beyond
/// what `Instant` holds, i.e. never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Term {
    Watchdog,
    Until(Option<Instant>),
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
    /// For the permits of a permit-expirable semaphore (`name` is the semaphore): their ids,
    /// which the watchdog renews in the semaphore's timeouts set.
    pub(crate) permits: Option<Vec<PermitId>>,
    inner: Mutex<LeaseInner>,
    renewal_done: Condvar,
}

pub(crate) struct LeaseInner {
    pub(crate) status: LeaseState,
    /// Until when the watchdog's holds are held by the local clock: measured from when the
    /// last successful acquire or renewal was *sent* (so never later than Redis's own
    /// expiry); `None` is never.
    renewed_until: Option<Instant>,
    /// The end of every live fixed-lease hold, likewise measured from its acquire's send.
    fixed_until: Vec<Option<Instant>>,
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
    /// The permits `ids` of the semaphore `name`, held by one guard.
    pub(crate) fn for_permits(name: Arc<str>, ids: Vec<PermitId>) -> Lease {
        let mut lease = Lease::new(name, String::new(), Role::Exclusive, String::new(), None);
        lease.permits = Some(ids);
        lease
    }

    pub(crate) fn new(name: Arc<str>, owner: String, role: Role, field: String, hold_keys: Option<String>) -> Lease {
        Lease {
            name,
            owner,
            role,
            field,
            hold_keys,
            permits: None,
            inner: Mutex::new(LeaseInner {
                status: LeaseState::Held,
                renewed_until: None,
                fixed_until: Vec::new(),
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
            LeaseState::Held if !inner.is_live() => LeaseState::Lost,
            status => status,
        }
    }

    /// Marks the lease lost and reports it to `events`; whoever learns of a loss calls this
    /// (a lease that its last release marked released is lost too when that release finds
    /// nothing in Redis), and only the first call for a lease reports. The hook runs after
    /// the lease's mutex is released.
    pub(crate) fn lose(&self, mut inner: MutexGuard<'_, LeaseInner>, events: &Events) {
        if inner.status == LeaseState::Lost {
            return;
        }
        inner.status = LeaseState::Lost;
        drop(inner);
        events.lease_lost(&self.name);
    }

    /// Waits until no renewal round trip carrying this lease is in flight, so that none
    /// reaches Redis after the release that follows; at most `bound` (a round trip's own
    /// bound: the renewal thread gives up on it by then).
    pub(crate) fn wait_for_renewal(&self, inner: &mut MutexGuard<'_, LeaseInner>, bound: Duration) {
        let deadline = clock::deadline_in(bound);
        while inner.renewing {
            match deadline {
                Some(deadline) => {
                    if self.renewal_done.wait_until(inner, deadline).timed_out() {
                        return;
                    }
                }
                None => self.renewal_done.wait(inner),
            }
        }
    }

    /// Called by the renewal thread when a round trip carrying this lease has ended.
    pub(crate) fn renewal_finished(&self, inner: &mut MutexGuard<'_, LeaseInner>) {
        inner.renewing = false;
        self.renewal_done.notify_all();
    }
}

impl LeaseInner {
    /// When the lease runs out by the local clock: the latest end of its holds (`None`:
    /// never).
    pub(crate) fn expires_at(&self) -> Option<Instant> {
        let watchdog = (self.watchdog_holds > 0).then_some(self.renewed_until);
        watchdog.into_iter().chain(self.fixed_until.iter().copied()).try_fold(
            None,
            |latest: Option<Instant>, end| {
                // `None` is never, which outlasts everything.
                end.map(|end| Some(latest.map_or(end, |l| l.max(end))))
            },
        )?
    }

    /// Whether a new acquisition by the same thread can join this lease.
    pub(crate) fn is_live(&self) -> bool {
        self.status == LeaseState::Held && self.expires_at().is_none_or(|at| Instant::now() < at)
    }

    /// Records one more hold, granted by a request sent at `sent`.
    pub(crate) fn add(&mut self, term: Term, sent: Instant, watchdog: Duration) {
        self.holds += 1;
        match term {
            Term::Watchdog => {
                self.watchdog_holds += 1;
                self.renewed(sent, watchdog);
            }
            Term::Until(end) => self.fixed_until.push(end),
        }
    }

    /// Removes one hold. True when it was the last.
    pub(crate) fn remove(&mut self, term: Term) -> bool {
        self.holds = self.holds.saturating_sub(1);
        match term {
            Term::Watchdog => self.watchdog_holds = self.watchdog_holds.saturating_sub(1),
            Term::Until(end) => {
                if let Some(i) = self.fixed_until.iter().position(|e| *e == end) {
                    self.fixed_until.swap_remove(i);
                }
            }
        }
        self.holds == 0
    }

    /// A renewal (or a watchdog acquire) sent at `sent` succeeded.
    pub(crate) fn renewed(&mut self, sent: Instant, watchdog: Duration) {
        // A later acquire may have renewed it further already; `None` (beyond what
        // `Instant` holds) is never.
        self.renewed_until = sent.checked_add(watchdog).map(|until| self.renewed_until.map_or(until, |u| u.max(until)));
    }

    /// Whether some fixed-lease hold of this lease would be cut short by setting Redis's
    /// expiry to the watchdog lease: the renew script must then only ever lengthen it.
    pub(crate) fn has_fixed_holds(&self) -> bool {
        !self.fixed_until.is_empty()
    }

    /// The lease Redis must keep, from now, for the holds that remain: the watchdog's while
    /// one of its holds remains, and the rest of the longest fixed lease. At least 1 ms.
    pub(crate) fn keep_millis(&self, watchdog_millis: u64) -> u64 {
        let now = Instant::now();
        let watchdog = if self.watchdog_holds > 0 { watchdog_millis } else { 0 };
        let fixed = self.fixed_until.iter().map(|end| match end {
            Some(end) => u64::try_from(keys::ceil_millis(end.saturating_duration_since(now))).unwrap_or(u64::MAX),
            None => u64::MAX,
        });
        fixed.fold(watchdog, u64::max).clamp(1, keys::MAX_LEASE_MILLIS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Lease {
        Lease::new("l".into(), "o".into(), Role::Exclusive, "o".into(), None)
    }

    #[test]
    fn a_lease_lasts_as_long_as_its_longest_hold() {
        let lease = lease();
        let mut inner = lease.lock();
        let now = Instant::now();
        let watchdog = Duration::from_secs(3);
        inner.add(Term::Watchdog, now, watchdog);
        let short = Term::Until(now.checked_add(Duration::from_millis(200)));
        inner.add(short, now, watchdog);
        assert_eq!(inner.expires_at(), now.checked_add(watchdog), "the short hold does not cut the watchdog's");
        let long = Term::Until(now.checked_add(Duration::from_secs(10)));
        inner.add(long, now, watchdog);
        assert_eq!(inner.expires_at(), now.checked_add(Duration::from_secs(10)));
        assert!(inner.has_fixed_holds());
        assert!(!inner.remove(long));
        assert_eq!(inner.keep_millis(3000), 3000, "the watchdog hold and a 200 ms one remain");
        assert!(!inner.remove(Term::Watchdog));
        assert!(inner.keep_millis(3000) <= 200);
        assert!(inner.remove(short));
    }

    #[test]
    fn a_hold_without_end_never_expires_and_the_loss_is_reported_once() {
        let lease = lease();
        let mut inner = lease.lock();
        inner.add(Term::Until(None), Instant::now(), Duration::from_secs(1));
        assert_eq!(inner.expires_at(), None);
        assert!(inner.is_live());
        assert_eq!(inner.keep_millis(1000), keys::MAX_LEASE_MILLIS);
        drop(inner);
        let events = Events::none();
        lease.lose(lease.lock(), &events);
        assert_eq!(lease.state(), LeaseState::Lost);
    }
}
