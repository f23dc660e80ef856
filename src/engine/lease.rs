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
//! Every hold is **valid** until the instant its acquire (or the watchdog's last successful
//! renewal) was *sent*, plus its lease, less the clock-drift allowance: as far as this
//! process can tell, no other owner can hold the lock before then (Redis's expiry counts
//! from when the request arrived, later, by a clock that runs at nearly the same rate).
//! The lease is valid until the latest of its holds' validity ends (its local deadline).
//!
//! | state (as `state()` reports it) | event | next |
//! |---|---|---|
//! | `Held` | renewal sent at `t` succeeds | `Held`, watchdog part valid until `t` + lease − drift, at risk from `t` + lease/2 |
//! | `Held` | a renewal round trip fails, or half the watchdog lease passes since the last success's send (the renewal due at a third has not come back), while the watchdog part is what keeps it valid | `AtRisk` (reported once, with the deadline) |
//! | `AtRisk` | a renewal succeeds | `Held` (reported) |
//! | `Held`, `AtRisk` | Redis says the owner's field is gone (renewal, release or query) | `Lost`, reported once |
//! | `Held`, `AtRisk` | the local deadline passes (renewals failed, or every fixed lease ran out) | `Lost` (seen by `state()`; reported by whoever acts on it first) |
//! | `Held`, `AtRisk` | the last guard is released | `Released` |
//! | `Released` | that release finds nothing of the owner in Redis | `Lost`, reported once |
//! | `Lost` | guards are released | `Lost` (nothing is sent) |
//!
//! `AtRisk` is never stored: it is read off the clock and the renewal's last outcome, so
//! it shows on time even while the renewal thread is blocked in a round trip. A new
//! acquisition by the same thread after a loss starts a new `Lease`.

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
    /// Still held, but renewals are failing (or overdue) and the lease is valid only until
    /// its deadline ([`LockGuard::valid_until`](crate::LockGuard::valid_until)): whatever
    /// the lock protects should stop before then. Curator's `SUSPENDED`. It turns back to
    /// `Held` when a renewal succeeds, and to `Lost` at the deadline.
    AtRisk,
    /// The lease is gone: it ran out, Redis said this owner no longer holds the lock, or
    /// renewals failed until it ran out. Another owner may hold the lock now.
    Lost,
    /// This guard released its hold.
    Released,
}

/// How long one hold lasts: renewed by the watchdog, or valid until a fixed end (`None`:
/// beyond what `Instant` holds, i.e. never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Term {
    Watchdog,
    Until(Option<Instant>),
}

/// The watchdog's lease, and the clock-drift allowance taken off it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    pub(crate) lease: Duration,
    pub(crate) drift: Duration,
}

/// The watchdog's schedule, in shares of its lease, written once here: a lease is renewed a
/// third of the way through it, is at risk from half of it without a renewal, a failed
/// renewal is tried again a twelfth later (so four tries fit before the lease ends), and one
/// renew round trip may take a sixth (so a renewal sent at a third has failed by half).
impl Span {
    /// The end of a hold's validity whose request was sent at `sent` (`None`: never).
    pub(crate) fn valid_until(&self, sent: Instant) -> Option<Instant> {
        sent.checked_add(self.lease.saturating_sub(self.drift))
    }

    /// When a lease acquired or renewed by a request sent at `sent` is renewed next.
    pub(crate) fn renew_at(&self, sent: Instant) -> Instant {
        sent + self.renewal_period()
    }

    /// How long after its last success's send a lease is renewed again: a third of it.
    pub(crate) fn renewal_period(&self) -> Duration {
        self.lease / 3
    }

    /// From when a lease renewed by a request sent at `sent` is at risk unless renewed
    /// again: half of it later.
    pub(crate) fn at_risk_from(&self, sent: Instant) -> Option<Instant> {
        sent.checked_add(self.lease / 2)
    }

    /// How soon a failed renewal is tried again: a twelfth of the lease.
    pub(crate) fn retry_after(&self) -> Duration {
        self.lease / 12
    }

    /// The longest one renew round trip may take: a sixth of the lease.
    pub(crate) fn round_trip_limit(&self) -> Duration {
        self.lease / 6
    }
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
    /// For the values of a group lock (`name` is the group): their fields, concatenated,
    /// which the watchdog renews under `owner`.
    pub(crate) group: Option<String>,
    inner: Mutex<LeaseInner>,
    renewal_done: Condvar,
    /// Notified whenever the state may have changed other than by the clock (a renewal's
    /// outcome, a loss, a release), for [`Lease::wait_while_held`].
    changed: Condvar,
}

pub(crate) struct LeaseInner {
    /// `Held`, `Lost` or `Released` (`AtRisk` is read off the clock by `state()`).
    pub(crate) status: LeaseState,
    /// Until when the watchdog's holds are valid by the local clock: the last successful
    /// acquire or renewal's *send*, plus the lease, less the drift allowance (so never
    /// later than Redis's own expiry while the clocks keep within it); `None` is never.
    renewed_until: Option<Instant>,
    /// From when the watchdog's holds are at risk unless renewed again: half the lease after
    /// that send.
    risk_at: Option<Instant>,
    /// A renewal round trip failed since the last success.
    failing: bool,
    /// The spell of failures has been reported (`lease_at_risk`), and its end will be.
    risk_reported: bool,
    /// The end of every live fixed-lease hold's validity, likewise measured from its
    /// acquire's send.
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

    pub(crate) fn for_group(name: Arc<str>, owner: String, fields: String) -> Lease {
        let mut lease = Lease::new(name, owner, Role::Exclusive, String::new(), None);
        lease.group = Some(fields);
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
            group: None,
            inner: Mutex::new(LeaseInner {
                status: LeaseState::Held,
                renewed_until: None,
                risk_at: None,
                failing: false,
                risk_reported: false,
                fixed_until: Vec::new(),
                holds: 0,
                watchdog_holds: 0,
                renewal: None,
                renewing: false,
            }),
            renewal_done: Condvar::new(),
            changed: Condvar::new(),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, LeaseInner> {
        self.inner.lock()
    }

    /// The state as a guard reports it: a `Held` lease whose local deadline has passed is
    /// `Lost`, one whose renewals are failing or overdue is `AtRisk`.
    pub(crate) fn state(&self) -> LeaseState {
        self.inner.lock().state(Instant::now())
    }

    /// Until when the lease is valid (`None`: no end), while it is held or at risk.
    pub(crate) fn valid_until(&self) -> Option<Option<Instant>> {
        let inner = self.inner.lock();
        matches!(inner.state(Instant::now()), LeaseState::Held | LeaseState::AtRisk).then(|| inner.expires_at())
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
        self.changed.notify_all();
        events.lease_lost(&self.name);
    }

    /// Marks the lease released by its last guard.
    pub(crate) fn release(&self, inner: &mut MutexGuard<'_, LeaseInner>) {
        inner.status = LeaseState::Released;
        self.changed.notify_all();
    }

    /// Wakes the threads waiting in [`wait_while_held`](Lease::wait_while_held) after a
    /// change they cannot read off the clock (a renewal's outcome).
    pub(crate) fn notify(&self) {
        self.changed.notify_all();
    }

    /// Waits until the lease is no longer plainly `Held` (at risk, lost or released), or
    /// until `deadline` (`None`: no deadline); returns its state then.
    pub(crate) fn wait_while_held(&self, deadline: Option<Instant>) -> LeaseState {
        let mut inner = self.inner.lock();
        loop {
            let now = Instant::now();
            let state = inner.state(now);
            if state != LeaseState::Held || deadline.is_some_and(|d| now >= d) {
                return state;
            }
            // The clock changes the state too: wake when it will.
            match clock::earliest(inner.next_change(now), deadline) {
                Some(at) => {
                    self.changed.wait_until(&mut inner, at);
                }
                None => self.changed.wait(&mut inner),
            }
        }
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
    /// The state at `now` (see the module's table).
    fn state(&self, now: Instant) -> LeaseState {
        match self.status {
            LeaseState::Held if !self.is_live_at(now) => LeaseState::Lost,
            LeaseState::Held if self.at_risk(now) => LeaseState::AtRisk,
            status => status,
        }
    }

    /// Whether the lease's validity hangs on renewals that are failing or overdue: the
    /// watchdog part is at risk and no fixed hold is valid longer than it.
    fn at_risk(&self, now: Instant) -> bool {
        if self.watchdog_holds == 0 || !(self.failing || self.risk_at.is_some_and(|at| now >= at)) {
            return false;
        }
        let watchdog_end = self.renewed_until;
        !self.fixed_until.iter().any(|end| match (end, watchdog_end) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(end), Some(watchdog_end)) => *end > watchdog_end,
        })
    }

    /// The next instant at which the clock alone changes the state (at risk, then lost).
    fn next_change(&self, now: Instant) -> Option<Instant> {
        let risk = self.risk_at.filter(|at| *at > now && self.watchdog_holds > 0);
        clock::earliest(risk, self.expires_at())
    }

    /// When the lease runs out by the local clock: the latest end of its holds' validity
    /// (`None`: never).
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
        self.is_live_at(Instant::now())
    }

    fn is_live_at(&self, now: Instant) -> bool {
        self.status == LeaseState::Held && self.expires_at().is_none_or(|at| now < at)
    }

    /// Records one more hold, granted by a request sent at `sent`.
    pub(crate) fn add(&mut self, term: Term, sent: Instant, watchdog: Span) {
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

    /// A renewal (or a watchdog acquire) sent at `sent` succeeded. True when it ends a
    /// spell of failures that was reported.
    pub(crate) fn renewed(&mut self, sent: Instant, watchdog: Span) -> bool {
        // A later acquire may have renewed it further already; `None` (beyond what
        // `Instant` holds) is never.
        let later = |new: Option<Instant>, old: Option<Instant>| new.map(|new| old.map_or(new, |old| old.max(new)));
        self.renewed_until = later(watchdog.valid_until(sent), self.renewed_until);
        self.risk_at = later(watchdog.at_risk_from(sent), self.risk_at);
        self.failing = false;
        std::mem::replace(&mut self.risk_reported, false)
    }

    /// A renewal round trip failed. `Some(deadline)` when that puts the lease at risk and
    /// the spell is not reported yet: report it, with the deadline.
    pub(crate) fn renewal_failed(&mut self) -> Option<Instant> {
        self.failing = true;
        if self.risk_reported || !self.at_risk(Instant::now()) {
            return None;
        }
        let deadline = self.expires_at()?;
        self.risk_reported = true;
        Some(deadline)
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

    /// The schedule's promises hold for any lease: a renewal sent when due has failed (its
    /// round trip bounded) by the time the lease turns at risk; at least three retries fit
    /// between the first renewal and the validity's end, with the drift allowance the
    /// configuration accepts (under a third of the lease).
    #[test]
    fn the_watchdog_schedule_fits_in_every_lease() {
        let sent = Instant::now();
        for ms in [30_u64, 100, 1_000, 30_000, 3_600_000] {
            let lease = Duration::from_millis(ms);
            let span = Span { lease, drift: lease / 100 + Duration::from_millis(2) };
            let renewal = span.renew_at(sent);
            assert!(renewal + span.round_trip_limit() <= span.at_risk_from(sent).unwrap(), "{ms} ms");
            let valid = span.valid_until(sent).unwrap();
            assert!(renewal + span.retry_after() * 3 < valid, "{ms} ms: three retries before the end");
            assert_eq!(span.renewal_period(), lease / 3);
        }
    }

    fn lease() -> Lease {
        Lease::new("l".into(), "o".into(), Role::Exclusive, "o".into(), None)
    }

    const WATCHDOG: Span = Span { lease: Duration::from_secs(3), drift: Duration::ZERO };

    #[test]
    fn a_lease_lasts_as_long_as_its_longest_hold() {
        let lease = lease();
        let mut inner = lease.lock();
        let now = Instant::now();
        let watchdog = WATCHDOG;
        inner.add(Term::Watchdog, now, watchdog);
        let short = Term::Until(now.checked_add(Duration::from_millis(200)));
        inner.add(short, now, watchdog);
        assert_eq!(inner.expires_at(), now.checked_add(watchdog.lease), "the short hold does not cut the watchdog's");
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

    /// The rows of the state table that the clock and the renewal's outcome drive.
    #[test]
    fn a_watchdog_lease_turns_at_risk_recovers_and_is_lost_at_its_validity_end() {
        let lease = lease();
        let span = Span { lease: Duration::from_secs(3), drift: Duration::from_millis(32) };
        let sent = Instant::now();
        let mut inner = lease.lock();
        inner.add(Term::Watchdog, sent, span);
        assert_eq!(inner.state(sent), LeaseState::Held);
        assert_eq!(inner.expires_at(), sent.checked_add(Duration::from_millis(2968)), "sent + lease - drift");
        // Half the lease without a successful renewal: at risk, by the clock alone.
        let half = sent + Duration::from_millis(1500);
        assert_eq!(inner.state(half - Duration::from_millis(1)), LeaseState::Held);
        assert_eq!(inner.state(half), LeaseState::AtRisk);
        assert_eq!(inner.next_change(sent), Some(half));
        // A failed round trip: at risk at once, reported once, with the deadline.
        assert_eq!(inner.renewal_failed(), inner.expires_at(), "the first failure is reported");
        assert_eq!(inner.state(sent), LeaseState::AtRisk);
        assert_eq!(inner.renewal_failed(), None, "once per spell");
        // A renewal gets through: held again, and the end of the spell is reported.
        let later = sent + Duration::from_millis(1000);
        assert!(inner.renewed(later, span), "the reported spell ends");
        assert_eq!(inner.state(later), LeaseState::Held);
        assert!(!inner.renewed(later, span), "nothing to report twice");
        // The validity end passes: lost.
        let end = inner.expires_at().expect("an end");
        assert_eq!(inner.state(end - Duration::from_millis(1)), LeaseState::AtRisk, "overdue before the end");
        assert_eq!(inner.state(end), LeaseState::Lost);
    }

    /// A fixed hold that outlasts the watchdog's keeps the lease valid whatever renewals do:
    /// never at risk while it does.
    #[test]
    fn a_fixed_hold_longer_than_the_watchdog_part_keeps_the_lease_out_of_risk() {
        let lease = lease();
        let sent = Instant::now();
        let mut inner = lease.lock();
        inner.add(Term::Watchdog, sent, WATCHDOG);
        inner.add(Term::Until(sent.checked_add(Duration::from_secs(60))), sent, WATCHDOG);
        assert!(inner.renewal_failed().is_none(), "not at risk: nothing to report");
        assert_eq!(inner.state(sent + Duration::from_secs(2)), LeaseState::Held);
        assert!(!inner.remove(Term::Until(sent.checked_add(Duration::from_secs(60)))));
        assert_eq!(inner.state(sent + Duration::from_secs(2)), LeaseState::AtRisk, "the watchdog part alone now");
    }

    /// A waiter on the lease wakes when a renewal fails (notified) and when the clock turns
    /// it at risk (its own deadline), and returns at its timeout otherwise.
    #[test]
    fn waiting_while_held_ends_at_risk_or_at_the_timeout() {
        let lease = Arc::new(lease());
        let sent = Instant::now();
        lease.lock().add(Term::Watchdog, sent, Span { lease: Duration::from_millis(600), drift: Duration::ZERO });
        let timed_out = lease.wait_while_held(Some(Instant::now() + Duration::from_millis(20)));
        assert_eq!(timed_out, LeaseState::Held);
        // The clock: at risk at half the lease (300 ms after the send).
        assert_eq!(lease.wait_while_held(None), LeaseState::AtRisk);
        assert!(sent.elapsed() >= Duration::from_millis(300), "{:?}", sent.elapsed());
        // A failure, notified: at once.
        let lease = Arc::new(super::tests::lease());
        lease.lock().add(Term::Watchdog, Instant::now(), WATCHDOG);
        let failing = Arc::clone(&lease);
        let failer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            failing.lock().renewal_failed();
            failing.notify();
        });
        let started = Instant::now();
        assert_eq!(lease.wait_while_held(Some(Instant::now() + Duration::from_secs(5))), LeaseState::AtRisk);
        assert!(started.elapsed() < Duration::from_secs(2), "woken by the failure: {:?}", started.elapsed());
        failer.join().expect("failer");
    }

    #[test]
    fn a_hold_without_end_never_expires_and_the_loss_is_reported_once() {
        let lease = lease();
        let mut inner = lease.lock();
        inner.add(Term::Until(None), Instant::now(), WATCHDOG);
        assert_eq!(inner.expires_at(), None);
        assert!(inner.is_live());
        assert_eq!(inner.keep_millis(1000), keys::MAX_LEASE_MILLIS);
        drop(inner);
        let events = Events::none();
        lease.lose(lease.lock(), &events);
        assert_eq!(lease.state(), LeaseState::Lost);
    }
}
