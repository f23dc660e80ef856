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
//! The arithmetic (validity, renewal at a third, risk from half, retries a twelfth apart)
//! is [`Span`]'s.
//!
//! # The state machine
//!
//! The state and its transitions are a struct of plain data, `Core`, whose transitions take
//! the instant they happen at and say what is to be done around them (waiters woken, a
//! renewal scheduled, an event reported): no clock, thread or Redis inside, so each row
//! below is unit-tested on its own. `Core`'s fields are touched by its own methods only.
//! The `Lease` puts it under a mutex with the condition variables its waiters sleep on,
//! schedules through the renewal thread's wheel ([`Schedule`]), and reports after its
//! mutex is released. Other modules see only the `Lease`'s named transitions:
//! [`hold_added`](Lease::hold_added), [`hold_released`](Lease::hold_released),
//! [`lost`](Lease::lost), and the renewal thread's [`renewal_fired`](Lease::renewal_fired),
//! [`renewal_sent`](Lease::renewal_sent) and [`renewal_answered`](Lease::renewal_answered).
//!
//! | state (as `state()` reports it) | event (transition) | next |
//! |---|---|---|
//! | `Held` | a hold is added (`hold_added`): a reentrant acquire (the lease's first hold made it `Held`) | the same |
//! | `AtRisk` | a watchdog hold is added (`hold_added`): its acquire renewed the watchdog part | `Held`, reported as a recovery when the spell was |
//! | `AtRisk` | a fixed hold that outlasts the watchdog part is added (`hold_added`) | `Held`; the spell's end is reported by the renewal that ends it |
//! | `Held` | a renewal sent at `t` succeeds (`renewal_answered`: renewed) | `Held`, the watchdog part valid until `t` + lease − drift, at risk from `t` + lease/2 |
//! | `Held` | a renewal round trip fails (`renewal_answered`: failed), the watchdog part being what keeps the lease valid | `AtRisk`, reported once a spell, with the deadline |
//! | `Held` | half the watchdog lease passes since the last success's send (the clock: the renewal due at a third is not back), the watchdog part being what keeps the lease valid | `AtRisk`, reported when that renewal's failure comes back (the renewal thread's look before its next batch, `expired`, says nothing) |
//! | `AtRisk` | a renewal succeeds (`renewal_answered`: renewed) | `Held`, reported when the spell was |
//! | `Held`, `AtRisk` | Redis says the owner's hold is gone, to a renewal (`renewal_answered`: gone) | `Lost`, reported |
//! | `Held`, `AtRisk` | Redis says so to a release or a query (`lost`) | `Lost`, reported once |
//! | `Held`, `AtRisk` | the local deadline passes (the clock: renewals failed, or every fixed hold ran out) | `Lost`, seen by `state()`; reported once, by whoever acts on it first: the renewal thread's look before its next batch (`expired`) or the next rows |
//! | `Lost` by the clock alone | a renewal fails (`renewal_answered`: failed) | `Lost`, reported; nothing scheduled |
//! | `Lost` by the clock alone | a renewal sent before the deadline succeeds after it (`renewal_answered`: renewed) | `Lost`, reported: a loss is final, whatever comes back after it |
//! | `Lost` by the clock alone | its renewal is to go out (`renewal_sent`) | `Lost`, reported; nothing is sent |
//! | `Lost` by the clock alone | a guard is released (`hold_released`) | `Lost`, reported; the release sends nothing |
//! | `Held`, `AtRisk` | a guard is released, others remaining (`hold_released`) | the same while the holds left keep it as valid (a fixed hold that outlasted the watchdog part gone: `AtRisk` if renewals are failing) |
//! | `Held`, `AtRisk` | the last guard is released (`hold_released`) | `Released` (`Lost` if a renewal in flight, waited for, finds it gone: reported by that renewal alone, and the release sends nothing) |
//! | `Released` | that release finds nothing of the owner in Redis (`lost`) | `Lost`, reported once |
//! | `Lost` | a guard is released (`hold_released`) | `Lost`: nothing is sent, nothing reported again |
//! | `Lost`, `Released` | a renewal's answer (`renewal_answered`) | the same: nothing reported, nothing scheduled |
//!
//! `AtRisk` is never stored: it is read off the clock and the renewal's last outcome, so
//! it shows on time even while the renewal thread is blocked in a round trip. A new
//! acquisition by the same thread after a loss starts a new `Lease`.
//!
//! The lease's renewal, beside its state:
//!
//! | renewal | event (transition) | next |
//! |---|---|---|
//! | none | a watchdog hold is added (`hold_added`) | scheduled at its send + lease/3 |
//! | scheduled, or in flight | a watchdog hold is added (`hold_added`) | the same: the entry, or the answer, schedules the next |
//! | scheduled | its wheel entry fires (`renewal_fired`) | none: a release can no longer cancel it |
//! | none | its batch goes out (`renewal_sent`), the lease `Held` with a watchdog hold | in flight |
//! | none | its batch goes out (`renewal_sent`), the lease otherwise | none: left out of the batch |
//! | in flight | renewed (`renewal_answered`) | scheduled at the send + lease/3 while a watchdog hold remains, else none |
//! | in flight | failed before the deadline (`renewal_answered`) | scheduled at the earlier of now + lease/12 and the deadline |
//! | in flight | gone, failed past the deadline, or the lease not `Held` (`renewal_answered`) | none |
//! | scheduled, or in flight | its last watchdog hold is released (`hold_released`) | none: the entry cancelled, the round trip in flight waited for (within a round trip's bound) |
//!
//! A watchdog hold added between an entry's firing and its batch's send schedules a new
//! entry; the answer's schedule then replaces it.
//!
//! # What a lease renews
//!
//! One `Lease` type serves every kind, and [`Renews`] says what its renewals and releases
//! name: a lock's hash field (with a read hold's timeout keys), a permit-expirable
//! semaphore's permits, or a group lock's values. An enum rather than a type per kind: the
//! renewal wheel, its batches and `LeaseWatch` hold every lease alike and the state machine
//! is the same for all; only what a renew script is sent differs, and the renewal thread
//! sorts a batch's leases by it (one script call per kind).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::clock;
use crate::events::Events;
use crate::keys;
use crate::kind::Role;
use crate::kind::semaphore::PermitId;
use crate::span::Span;
use crate::transport::RunId;
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

/// What a lease's renewals and releases name in Redis, besides the lease's name.
pub(crate) enum Renews {
    /// The holds of `owner` on a lock (`name` is the lock): its hash field `field` (the
    /// owner, or `<owner>:write`), and for read holds the prefix of their per-hold timeout
    /// keys, renewed along with the hash.
    Hash { owner: String, role: Role, field: String, hold_keys: Option<String> },
    /// The permits of a permit-expirable semaphore (`name` is the semaphore), by id:
    /// renewed in the semaphore's timeouts set. They are nobody's: no owner, no field.
    Permits(Vec<PermitId>),
    /// The values of a group lock (`name` is the group) held by `owner`: their fields,
    /// concatenated, renewed under `owner`.
    Group { owner: String, fields: String },
}

/// What a renewal round trip carrying a lease came back with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Renewed,
    /// Redis says the lease's hold (field, permits, values) is gone.
    Gone,
    /// The round trip failed, or Redis refused this lease: tried again.
    Failed,
}

/// Where leases' renewals are scheduled: the renewal thread's wheel (`engine::renewal`).
/// Called with the lease's mutex held (lock order: a lease's mutex, then the wheel's).
pub(crate) trait Schedule {
    /// Puts `lease` in the wheel at `at`, in place of its entry `old`: its entry now (`old`
    /// when the wheel takes no more, at shutdown).
    fn put(&self, lease: &Arc<Lease>, old: Option<WheelKey>, at: Instant) -> Option<WheelKey>;

    /// Takes the entry `key` out of the wheel (a stale key is harmless).
    fn cancel(&self, key: WheelKey);
}

/// What releasing one hold leaves: see [`Lease::hold_released`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Remaining {
    /// The lease was lost before the release (reported now if it was not yet): nothing is
    /// to be sent.
    pub(crate) lost: bool,
    /// Until when the lease was valid before the release (`None`: no end).
    pub(crate) valid_until: Option<Instant>,
    /// It was the lease's last hold.
    pub(crate) last: bool,
    /// The lease Redis must keep, from now, for the holds that remain (at least 1 ms).
    pub(crate) keep_millis: u64,
}

pub(crate) struct Lease {
    /// The lock's name (a semaphore's, a group's), which is also its Redis key.
    name: Arc<str>,
    renews: Renews,
    /// The run of the server on which Redis last showed the hold (its grant, a renewal), as
    /// [`RunId::bits`] (0: not known): a release that finds nothing of it on another run
    /// cannot take that for its own doing.
    run: AtomicU64,
    core: Mutex<Core>,
    renewal_done: Condvar,
    /// Notified whenever the state may have changed other than by the clock (a renewal's
    /// outcome, a loss, a release), for [`Lease::wait_while_held`].
    changed: Condvar,
}

impl Lease {
    /// A lease of no hold yet, on `name`, renewing `renews` with the watchdog's `span`.
    pub(crate) fn new(name: Arc<str>, renews: Renews, span: Span) -> Lease {
        Lease {
            name,
            renews,
            run: AtomicU64::new(0),
            core: Mutex::new(Core::new(span)),
            renewal_done: Condvar::new(),
            changed: Condvar::new(),
        }
    }

    /// The lock's (semaphore's, group's) name.
    pub(crate) fn name(&self) -> &Arc<str> {
        &self.name
    }

    pub(crate) fn renews(&self) -> &Renews {
        &self.renews
    }

    /// Redis showed the hold on the server's run `run` (a grant, a renewal): the run a
    /// release compares with its own (`None`, not known, forgets the last one).
    pub(crate) fn shown_on(&self, run: Option<RunId>) {
        self.run.store(run.map_or(0, RunId::bits), Ordering::Release);
    }

    /// The run of the server on which Redis last showed the hold, when known.
    pub(crate) fn shown_run(&self) -> Option<RunId> {
        RunId::from_bits(self.run.load(Ordering::Acquire))
    }

    /// The owner the holds are recorded under (`None`: permits, which are nobody's).
    pub(crate) fn owner(&self) -> Option<&str> {
        match &self.renews {
            Renews::Hash { owner, .. } | Renews::Group { owner, .. } => Some(owner),
            Renews::Permits(_) => None,
        }
    }

    /// The role of a lock's holds (`None`: permits, a group's values).
    pub(crate) fn role(&self) -> Option<Role> {
        match &self.renews {
            Renews::Hash { role, .. } => Some(*role),
            Renews::Permits(_) | Renews::Group { .. } => None,
        }
    }

    /// The state as a guard reports it: a `Held` lease whose local deadline has passed is
    /// `Lost`, one whose renewals are failing or overdue is `AtRisk`.
    pub(crate) fn state(&self) -> LeaseState {
        self.core.lock().state(Instant::now())
    }

    /// Until when the lease is valid (`None`: no end), while it is held or at risk.
    pub(crate) fn valid_until(&self) -> Option<Option<Instant>> {
        self.core.lock().valid_until(Instant::now())
    }

    /// Whether a new acquisition by the same thread can join this lease.
    pub(crate) fn is_live(&self) -> bool {
        self.core.lock().is_live(Instant::now())
    }

    /// While the lease is live, the lease Redis must keep from now for its holds: the
    /// watchdog's (`watchdog_millis`) while one of its holds remains, and the rest of the
    /// longest fixed lease.
    pub(crate) fn keep_millis(&self, watchdog_millis: u64) -> Option<u64> {
        let core = self.core.lock();
        let now = Instant::now();
        core.is_live(now).then(|| core.keep_millis(watchdog_millis, now))
    }

    /// Records a hold granted by a request sent at `sent`, and schedules the lease's
    /// renewal on `wheel` when the hold is the watchdog's and none is scheduled or in
    /// flight.
    pub(crate) fn hold_added(self: &Arc<Self>, term: Term, sent: Instant, wheel: &impl Schedule, events: &Events) {
        let mut core = self.core.lock();
        let effects = core.hold_added(term, sent);
        if let Some(at) = effects.schedule {
            core.renewal_scheduled(|old| wheel.put(self, old, at));
        }
        self.settle(core, effects, events);
    }

    /// The local half of releasing one hold: the hold removed; when no watchdog hold
    /// remains, the renewal cancelled on `wheel` and a renewal round trip in flight waited
    /// for (at most `bound`, a round trip's own bound: the renewal thread gives up on it by
    /// then), so that none reaches Redis after the release that follows. A lease that was
    /// lost before (its deadline passed) is reported lost to `events` now, once.
    pub(crate) fn hold_released(
        &self,
        term: Term,
        wheel: &impl Schedule,
        bound: Duration,
        watchdog_millis: u64,
        events: &Events,
    ) -> Remaining {
        let mut core = self.core.lock();
        let mut release = core.hold_released(term, Instant::now());
        if release.stops_renewal {
            if let Some(key) = core.renewal_cancelled() {
                wheel.cancel(key);
            }
            self.wait_for_renewal(&mut core, bound);
        }
        let keep_millis = core.keep_millis(watchdog_millis, Instant::now());
        let effects = core.release_ended(&mut release);
        self.settle(core, effects, events);
        Remaining { lost: !release.was_live, valid_until: release.valid_until, last: release.last, keep_millis }
    }

    /// Redis says the owner holds nothing (a release, a query): the lease is lost, and
    /// reported to `events` unless it was already. The hook runs after the lease's mutex is
    /// released.
    pub(crate) fn lost(&self, events: &Events) {
        let mut core = self.core.lock();
        let effects = core.lost();
        self.settle(core, effects, events);
    }

    /// The renewal thread's: the lease's wheel entry has fired (a release may no longer
    /// cancel it).
    pub(crate) fn renewal_fired(&self) {
        self.core.lock().renewal_fired();
    }

    /// The renewal thread's, just before a batch goes out: whether the lease goes in it
    /// (`Held` and live, with a watchdog hold), marked in flight then (a release waits for
    /// it); and whether fixed-lease holds remain that the renewal must not cut short. A
    /// lease past its deadline is not sent: it is lost, reported to `events` now.
    pub(crate) fn renewal_sent(&self, events: &Events) -> Option<bool> {
        let mut core = self.core.lock();
        let effects = core.expired(Instant::now());
        let sent = core.renewal_sent();
        self.settle(core, effects, events);
        sent
    }

    /// The renewal thread's: the round trip that carried the lease, sent at `sent`, came
    /// back with `answer`. The next renewal is scheduled on `wheel`, a loss, a risk or a
    /// recovery reported to `events` (after the lease's mutex is released).
    pub(crate) fn renewal_answered(
        self: &Arc<Self>,
        answer: Answer,
        sent: Instant,
        wheel: &impl Schedule,
        events: &Events,
    ) {
        let mut core = self.core.lock();
        let effects = core.renewal_answered(answer, sent, Instant::now());
        self.renewal_done.notify_all();
        if let Some(at) = effects.schedule {
            core.renewal_scheduled(|old| wheel.put(self, old, at));
        }
        self.settle(core, effects, events);
    }

    /// Waits until the lease is no longer plainly `Held` (at risk, lost or released), or
    /// until `deadline` (`None`: no deadline); returns its state then.
    pub(crate) fn wait_while_held(&self, deadline: Option<Instant>) -> LeaseState {
        let mut core = self.core.lock();
        loop {
            let now = Instant::now();
            let state = core.state(now);
            if state != LeaseState::Held || deadline.is_some_and(|d| now >= d) {
                return state;
            }
            // The clock changes the state too: wake when it will.
            match clock::earliest(core.next_change(now), deadline) {
                Some(at) => {
                    self.changed.wait_until(&mut core, at);
                }
                None => self.changed.wait(&mut core),
            }
        }
    }

    /// Waits until no renewal round trip carrying this lease is in flight, at most `bound`.
    fn wait_for_renewal(&self, core: &mut MutexGuard<'_, Core>, bound: Duration) {
        let deadline = clock::deadline_in(bound);
        while core.renewal_in_flight() {
            match deadline {
                Some(deadline) => {
                    if self.renewal_done.wait_until(core, deadline).timed_out() {
                        return;
                    }
                }
                None => self.renewal_done.wait(core),
            }
        }
    }

    /// Releases the mutex, then does what a transition asked: wakes the waiters, reports.
    fn settle(&self, core: MutexGuard<'_, Core>, effects: Effects, events: &Events) {
        drop(core);
        if effects.wake {
            self.changed.notify_all();
        }
        match effects.report {
            Some(Report::Lost) => events.lease_lost(&self.name),
            Some(Report::AtRisk(deadline)) => events.lease_at_risk(&self.name, deadline),
            Some(Report::Recovered) => events.lease_recovered(&self.name),
            None => {}
        }
    }
}

/// What the machine stores of the state: `AtRisk` is read off the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Held,
    Lost,
    Released,
}

/// An event to report, once the lease's mutex is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Report {
    Lost,
    /// At risk, valid until then.
    AtRisk(Instant),
    /// A reported spell of failures ended.
    Recovered,
}

/// What a transition asks of the `Lease` around the machine.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Effects {
    /// The state changed other than by the clock: wake the waiters.
    wake: bool,
    report: Option<Report>,
    /// Schedule the next renewal then.
    schedule: Option<Instant>,
}

/// The first half of a release, to be ended by [`Core::release_ended`] once a renewal in
/// flight is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Release {
    was_live: bool,
    valid_until: Option<Instant>,
    last: bool,
    /// No watchdog hold remains: the renewal is to be stopped.
    stops_renewal: bool,
}

/// The lease's state machine: the state, the holds, and the renewal's bookkeeping, as plain
/// data. Every transition takes the instants it needs.
struct Core {
    /// The watchdog's lease and drift allowance.
    span: Span,
    status: Status,
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
    holds: u32,
    /// Of those, guards whose lease the watchdog renews.
    watchdog_holds: u32,
    /// The lease's entry in the renewal wheel, while one is scheduled.
    renewal: Option<WheelKey>,
    /// A renewal round trip that includes this lease is in flight.
    renewing: bool,
}

impl Core {
    fn new(span: Span) -> Core {
        Core {
            span,
            status: Status::Held,
            renewed_until: None,
            risk_at: None,
            failing: false,
            risk_reported: false,
            fixed_until: Vec::new(),
            holds: 0,
            watchdog_holds: 0,
            renewal: None,
            renewing: false,
        }
    }

    /// The state at `now` (see the module's table).
    fn state(&self, now: Instant) -> LeaseState {
        match self.status {
            Status::Held if !self.is_live(now) => LeaseState::Lost,
            Status::Held if self.at_risk(now) => LeaseState::AtRisk,
            Status::Held => LeaseState::Held,
            Status::Lost => LeaseState::Lost,
            Status::Released => LeaseState::Released,
        }
    }

    /// Until when the lease is valid (`None`: no end), while it is held or at risk at `now`.
    fn valid_until(&self, now: Instant) -> Option<Option<Instant>> {
        matches!(self.state(now), LeaseState::Held | LeaseState::AtRisk).then(|| self.expires_at())
    }

    fn is_live(&self, now: Instant) -> bool {
        self.status == Status::Held && self.expires_at().is_none_or(|at| now < at)
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
    fn expires_at(&self) -> Option<Instant> {
        let watchdog = (self.watchdog_holds > 0).then_some(self.renewed_until);
        watchdog.into_iter().chain(self.fixed_until.iter().copied()).try_fold(
            None,
            |latest: Option<Instant>, end| {
                // `None` is never, which outlasts everything.
                end.map(|end| Some(latest.map_or(end, |l| l.max(end))))
            },
        )?
    }

    /// The lease Redis must keep, from `now`, for the holds that remain: the watchdog's
    /// while one of its holds remains, and the rest of the longest fixed lease. At least
    /// 1 ms.
    fn keep_millis(&self, watchdog_millis: u64, now: Instant) -> u64 {
        let watchdog = if self.watchdog_holds > 0 { watchdog_millis } else { 0 };
        let fixed = self.fixed_until.iter().map(|end| match end {
            Some(end) => keys::ceil_millis_u64(end.saturating_duration_since(now)),
            None => u64::MAX,
        });
        fixed.fold(watchdog, u64::max).clamp(1, keys::MAX_LEASE_MILLIS)
    }

    fn renewal_in_flight(&self) -> bool {
        self.renewing
    }

    /// One more hold, granted by a request sent at `sent`. When to schedule the renewal:
    /// for a watchdog hold on a lease whose renewal is neither scheduled nor in flight.
    fn hold_added(&mut self, term: Term, sent: Instant) -> Effects {
        self.holds += 1;
        match term {
            Term::Watchdog => {
                self.watchdog_holds += 1;
                // The acquire renewed the watchdog part: a spell of failures it ends is
                // reported over, as a renewal's success would.
                let recovered = self.renewed(sent);
                Effects {
                    wake: recovered,
                    report: recovered.then_some(Report::Recovered),
                    schedule: (self.renewal.is_none() && !self.renewing).then(|| self.span.renew_at(sent)),
                }
            }
            Term::Until(end) => {
                self.fixed_until.push(end);
                Effects::default()
            }
        }
    }

    /// One hold fewer, at `now`. The status changes in [`release_ended`](Core::release_ended),
    /// after a renewal in flight is done.
    fn hold_released(&mut self, term: Term, now: Instant) -> Release {
        let was_live = self.is_live(now);
        let valid_until = self.expires_at();
        self.holds = self.holds.saturating_sub(1);
        match term {
            Term::Watchdog => self.watchdog_holds = self.watchdog_holds.saturating_sub(1),
            Term::Until(end) => {
                if let Some(i) = self.fixed_until.iter().position(|e| *e == end) {
                    self.fixed_until.swap_remove(i);
                }
            }
        }
        Release { was_live, valid_until, last: self.holds == 0, stops_renewal: self.watchdog_holds == 0 }
    }

    /// The second half of a release, once a renewal in flight has come back: a lease that
    /// was not live is lost (reported unless it was already); the last hold of a live one
    /// leaves it released. A lease that renewal found gone is not live any more: nothing
    /// is to be sent for it, and its loss, reported by the renewal, is not reported again.
    fn release_ended(&mut self, release: &mut Release) -> Effects {
        release.was_live &= self.status != Status::Lost;
        if !release.was_live {
            return self.lost();
        }
        if release.last {
            self.status = Status::Released;
            return Effects { wake: true, ..Effects::default() };
        }
        Effects::default()
    }

    /// Redis says the owner's hold is gone: reported unless it was lost already.
    fn lost(&mut self) -> Effects {
        if self.status == Status::Lost {
            return Effects::default();
        }
        self.status = Status::Lost;
        Effects { wake: true, report: Some(Report::Lost), schedule: None }
    }

    /// The renewal is put in the wheel: `put` takes the entry it replaces and gives the new.
    fn renewal_scheduled(&mut self, put: impl FnOnce(Option<WheelKey>) -> Option<WheelKey>) {
        self.renewal = put(self.renewal.take());
    }

    /// The renewal is taken out of the wheel: its entry, to cancel.
    fn renewal_cancelled(&mut self) -> Option<WheelKey> {
        self.renewal.take()
    }

    fn renewal_fired(&mut self) {
        self.renewal = None;
    }

    /// A batch goes out: whether this lease is in it (held, with a watchdog hold), with
    /// whether fixed holds remain.
    /// A held lease whose deadline has passed at `now` is lost: reported, and final.
    fn expired(&mut self, now: Instant) -> Effects {
        if self.status == Status::Held && !self.is_live(now) { self.lost() } else { Effects::default() }
    }

    fn renewal_sent(&mut self) -> Option<bool> {
        self.renewing = self.status == Status::Held && self.watchdog_holds > 0;
        self.renewing.then_some(!self.fixed_until.is_empty())
    }

    /// The round trip sent at `sent` came back at `now` with `answer`.
    fn renewal_answered(&mut self, answer: Answer, sent: Instant, now: Instant) -> Effects {
        self.renewing = false;
        if self.status != Status::Held {
            return Effects::default();
        }
        if !self.is_live(now) {
            // Past the deadline `state()` has already called it lost, and a loss is final:
            // a late success does not bring it back.
            return self.lost();
        }
        match answer {
            Answer::Renewed => {
                let recovered = self.renewed(sent);
                Effects {
                    wake: true,
                    report: recovered.then_some(Report::Recovered),
                    schedule: (self.watchdog_holds > 0).then(|| self.span.renew_at(sent)),
                }
            }
            Answer::Gone => self.lost(),
            Answer::Failed => {
                // Tried again soon, and at the latest when the lease runs out, so that its
                // loss is known then.
                let again = now + self.span.retry_after();
                let schedule = Some(self.expires_at().map_or(again, |end| again.min(end)));
                let report = self.renewal_failed(now).map(Report::AtRisk);
                Effects { wake: true, report, schedule }
            }
        }
    }

    /// A renewal (or a watchdog acquire) sent at `sent` succeeded. True when it ends a
    /// spell of failures that was reported.
    fn renewed(&mut self, sent: Instant) -> bool {
        // A later acquire may have renewed it further already; `None` (beyond what
        // `Instant` holds) is never.
        let later = |new: Option<Instant>, old: Option<Instant>| new.map(|new| old.map_or(new, |old| old.max(new)));
        self.renewed_until = later(self.span.valid_until(sent), self.renewed_until);
        self.risk_at = later(self.span.at_risk_from(sent), self.risk_at);
        self.failing = false;
        std::mem::replace(&mut self.risk_reported, false)
    }

    /// A renewal round trip failed, at `now`. `Some(deadline)` when that puts the lease at
    /// risk and the spell is not reported yet: report it, with the deadline.
    fn renewal_failed(&mut self, now: Instant) -> Option<Instant> {
        self.failing = true;
        if self.risk_reported || !self.at_risk(now) {
            return None;
        }
        let deadline = self.expires_at()?;
        self.risk_reported = true;
        Some(deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wheel::Wheel;

    /// The watchdog's lease in these tests: renewed at 1 s, at risk from 1.5 s, valid until
    /// 2.97 s after a send.
    const SPAN: Span = Span { lease: Duration::from_secs(3), drift: Duration::from_millis(30) };

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    /// What a transition said to report, by kind.
    fn said(effects: Effects) -> &'static str {
        match effects.report {
            None => "nothing",
            Some(Report::Lost) => "lost",
            Some(Report::AtRisk(_)) => "at risk",
            Some(Report::Recovered) => "recovered",
        }
    }

    /// The states a row of the table starts from, built at `t0`: the lease and the instant
    /// it is in that state at.
    #[derive(Debug, Clone, Copy)]
    enum Given {
        Held,
        AtRisk,
        LostByTheClock,
        Lost,
        Released,
    }

    /// Two watchdog holds acquired at `t0`, brought into `given`.
    fn given(given: Given, t0: Instant) -> (Core, Instant) {
        let mut core = Core::new(SPAN);
        core.hold_added(Term::Watchdog, t0);
        core.hold_added(Term::Watchdog, t0);
        let now = t0 + ms(1100);
        let (expected, now) = match given {
            Given::Held => (LeaseState::Held, now),
            Given::AtRisk => {
                assert_eq!(core.renewal_sent(), Some(false));
                assert_eq!(said(core.renewal_answered(Answer::Failed, t0 + ms(1000), now)), "at risk");
                (LeaseState::AtRisk, now)
            }
            Given::LostByTheClock => (LeaseState::Lost, t0 + ms(2970)),
            Given::Lost => {
                assert_eq!(said(core.lost()), "lost");
                (LeaseState::Lost, now)
            }
            Given::Released => {
                for _ in 0..2 {
                    let mut release = core.hold_released(Term::Watchdog, now);
                    core.release_ended(&mut release);
                }
                (LeaseState::Released, now)
            }
        };
        assert_eq!(core.state(now), expected, "{given:?}");
        (core, now)
    }

    /// One row of the state table: its state cell, a piece of its event cell, the states
    /// it starts from, the event (at the instant given; the instant to read the next state
    /// at, and what the transition said), and the next state (`None`: the same) and report.
    struct Row {
        state: &'static str,
        event: &'static str,
        from: &'static [Given],
        act: fn(&mut Core, Instant) -> (Instant, Effects),
        next: Option<LeaseState>,
        says: &'static str,
    }

    fn release(core: &mut Core, term: Term, now: Instant) -> Effects {
        let mut release = core.hold_released(term, now);
        core.release_ended(&mut release)
    }

    /// A guard released from a lease that is not live: nothing is to be sent.
    fn released_unsent(core: &mut Core, now: Instant) -> (Instant, Effects) {
        let mut release = core.hold_released(Term::Watchdog, now);
        assert!(!release.was_live, "nothing is sent");
        (now, core.release_ended(&mut release))
    }

    const ROWS: &[Row] = &[
        Row {
            state: "`Held`",
            event: "(`hold_added`)",
            from: &[Given::Held],
            act: |core, now| {
                let fixed = core.hold_added(Term::Until(Some(now + ms(100))), now);
                assert_eq!(fixed, Effects::default());
                (now, core.hold_added(Term::Watchdog, now))
            },
            next: None,
            says: "nothing",
        },
        Row {
            state: "`AtRisk`",
            event: "a watchdog hold is added (`hold_added`)",
            from: &[Given::AtRisk],
            act: |core, now| (now, core.hold_added(Term::Watchdog, now)),
            next: Some(LeaseState::Held),
            says: "recovered",
        },
        Row {
            state: "`AtRisk`",
            event: "a fixed hold that outlasts the watchdog part is added (`hold_added`)",
            from: &[Given::AtRisk],
            act: |core, now| (now, core.hold_added(Term::Until(Some(now + ms(60_000))), now)),
            next: Some(LeaseState::Held),
            says: "nothing",
        },
        Row {
            state: "`Held`",
            event: "(`renewal_answered`: renewed)",
            from: &[Given::Held],
            act: |core, now| {
                core.renewal_sent();
                let effects = core.renewal_answered(Answer::Renewed, now, now);
                assert_eq!(core.expires_at(), Some(now + ms(2970)), "sent + lease - drift");
                assert_eq!(core.next_change(now), Some(now + ms(1500)), "at risk from half the lease");
                (now + ms(1499), effects)
            },
            next: Some(LeaseState::Held),
            says: "nothing",
        },
        Row {
            state: "`Held`",
            event: "(`renewal_answered`: failed)",
            from: &[Given::Held],
            act: |core, now| {
                core.renewal_sent();
                let first = core.renewal_answered(Answer::Failed, now, now);
                assert_eq!(first.report, Some(Report::AtRisk(core.expires_at().unwrap())), "with the deadline");
                core.renewal_sent();
                assert_eq!(said(core.renewal_answered(Answer::Failed, now, now)), "nothing", "once a spell");
                (now, first)
            },
            next: Some(LeaseState::AtRisk),
            says: "at risk",
        },
        Row {
            state: "`Held`",
            event: "half the watchdog lease passes",
            from: &[Given::Held],
            act: |core, now| {
                let half = core.next_change(now).unwrap();
                assert_eq!(core.state(half - ms(1)), LeaseState::Held);
                // The renewal thread's look before its next batch (`expired`): at risk is not lost.
                (half, core.expired(half))
            },
            next: Some(LeaseState::AtRisk),
            says: "nothing",
        },
        Row {
            state: "`AtRisk`",
            event: "(`renewal_answered`: renewed)",
            from: &[Given::AtRisk],
            act: |core, now| {
                core.renewal_sent();
                (now, core.renewal_answered(Answer::Renewed, now, now))
            },
            next: Some(LeaseState::Held),
            says: "recovered",
        },
        Row {
            state: "`Held`, `AtRisk`",
            event: "(`renewal_answered`: gone)",
            from: &[Given::Held, Given::AtRisk],
            act: |core, now| {
                core.renewal_sent();
                (now, core.renewal_answered(Answer::Gone, now, now))
            },
            next: Some(LeaseState::Lost),
            says: "lost",
        },
        Row {
            state: "`Held`, `AtRisk`",
            event: "(`lost`)",
            from: &[Given::Held, Given::AtRisk],
            act: |core, now| {
                let first = core.lost();
                assert_eq!(core.lost(), Effects::default(), "once");
                (now, first)
            },
            next: Some(LeaseState::Lost),
            says: "lost",
        },
        Row {
            state: "`Held`, `AtRisk`",
            event: "the local deadline passes",
            from: &[Given::Held, Given::AtRisk],
            act: |core, now| {
                let end = core.expires_at().unwrap();
                assert!(now < end);
                assert_eq!(said(core.expired(end - ms(1))), "nothing", "live until its deadline");
                // The renewal thread's look before its next batch (`expired`) once it passed;
                // the look after that says nothing.
                let first = core.expired(end);
                assert_eq!(said(core.expired(end + ms(1))), "nothing", "once");
                (end, first)
            },
            next: Some(LeaseState::Lost),
            says: "lost",
        },
        Row {
            state: "`Lost` by the clock alone",
            event: "(`renewal_answered`: failed)",
            from: &[Given::LostByTheClock],
            act: |core, now| {
                core.renewal_sent();
                let effects = core.renewal_answered(Answer::Failed, now, now);
                assert_eq!(effects.schedule, None, "nothing more to renew");
                (now, effects)
            },
            next: Some(LeaseState::Lost),
            says: "lost",
        },
        Row {
            state: "`Lost` by the clock alone",
            event: "(`renewal_answered`: renewed)",
            from: &[Given::LostByTheClock],
            act: |core, now| {
                // Sent while it was live, answered past the deadline.
                assert_eq!(core.renewal_sent(), Some(false));
                (now, core.renewal_answered(Answer::Renewed, now - ms(100), now))
            },
            next: Some(LeaseState::Lost),
            says: "lost",
        },
        Row {
            state: "`Lost` by the clock alone",
            event: "(`renewal_sent`)",
            from: &[Given::LostByTheClock],
            act: |core, now| {
                let effects = core.expired(now);
                assert_eq!(core.renewal_sent(), None, "not sent");
                (now, effects)
            },
            next: Some(LeaseState::Lost),
            says: "lost",
        },
        Row {
            state: "`Lost` by the clock alone",
            event: "(`hold_released`)",
            from: &[Given::LostByTheClock],
            act: released_unsent,
            next: Some(LeaseState::Lost),
            says: "lost",
        },
        Row {
            state: "`Held`, `AtRisk`",
            event: "others remaining (`hold_released`)",
            from: &[Given::Held, Given::AtRisk],
            act: |core, now| {
                let mut release = core.hold_released(Term::Watchdog, now);
                assert!(release.was_live && !release.last && !release.stops_renewal);
                (now, core.release_ended(&mut release))
            },
            next: None,
            says: "nothing",
        },
        Row {
            state: "`Held`, `AtRisk`",
            event: "the last guard is released (`hold_released`)",
            from: &[Given::Held, Given::AtRisk],
            act: |core, now| {
                release(core, Term::Watchdog, now);
                let mut release = core.hold_released(Term::Watchdog, now);
                assert!(release.was_live && release.last && release.stops_renewal);
                (now, core.release_ended(&mut release))
            },
            next: Some(LeaseState::Released),
            says: "nothing",
        },
        Row {
            state: "`Released`",
            event: "(`lost`)",
            from: &[Given::Released],
            act: |core, now| {
                let first = core.lost();
                assert_eq!(core.lost(), Effects::default(), "once");
                (now, first)
            },
            next: Some(LeaseState::Lost),
            says: "lost",
        },
        Row {
            state: "`Lost`",
            event: "(`hold_released`)",
            from: &[Given::Lost],
            act: released_unsent,
            next: Some(LeaseState::Lost),
            says: "nothing",
        },
        Row {
            state: "`Lost`, `Released`",
            event: "(`renewal_answered`)",
            from: &[Given::Lost, Given::Released],
            act: |core, now| {
                for answer in [Answer::Renewed, Answer::Failed, Answer::Gone] {
                    assert_eq!(core.renewal_answered(answer, now, now), Effects::default(), "{answer:?}");
                }
                (now, Effects::default())
            },
            next: None,
            says: "nothing",
        },
    ];

    /// The state table's rows as the module's documentation writes them: (state, event,
    /// next) cells.
    fn documented_rows() -> Vec<[String; 3]> {
        let doc: Vec<&str> = include_str!("lease.rs").lines().map_while(|line| line.strip_prefix("//!")).collect();
        let header = doc.iter().position(|line| line.starts_with(" | state")).expect("the state table");
        doc[header + 2..]
            .iter()
            .map_while(|line| line.strip_prefix(" | ")?.strip_suffix(" |"))
            .map(|row| {
                let cells: Vec<String> = row.split(" | ").map(str::to_owned).collect();
                cells.try_into().expect("three cells")
            })
            .collect()
    }

    /// Every row of the state table, in its order, from each state it starts from: the
    /// machine goes where the row says and reports what it says, and the table has no row
    /// that is not walked here.
    #[test]
    fn the_state_table_holds() {
        let documented = documented_rows();
        assert_eq!(documented.len(), ROWS.len(), "a row of the table without its case here, or the reverse");
        for (row, [state, event, next]) in ROWS.iter().zip(&documented) {
            assert_eq!(&row.state, state, "the rows in the table's order");
            assert!(event.contains(row.event), "{event:?} names {:?}", row.event);
            match row.next {
                Some(to) => assert!(next.starts_with(&format!("`{to:?}`")), "{next:?} is {to:?}"),
                None => assert!(next.starts_with("the same"), "{next:?}"),
            }
            for &from in row.from {
                let t0 = Instant::now();
                let (mut core, now) = given(from, t0);
                let before = core.state(now);
                let (then, effects) = (row.act)(&mut core, now);
                let expected = row.next.unwrap_or(before);
                assert_eq!(core.state(then), expected, "{state} / {event}: from {from:?}");
                assert_eq!(said(effects), row.says, "{state} / {event}: from {from:?}");
                assert!(effects.report.is_none() || effects.wake, "a report wakes the waiters too");
            }
        }
    }

    /// A last release that waits for a renewal in flight which finds the lease gone: the
    /// loss is reported once, by the renewal; the release sends nothing, and what Redis
    /// says after it reports nothing again.
    #[test]
    fn a_release_behind_a_renewal_that_finds_the_lease_gone_reports_the_loss_once() {
        let t0 = Instant::now();
        let mut core = Core::new(SPAN);
        core.hold_added(Term::Watchdog, t0);
        let now = t0 + ms(1100);
        assert_eq!(core.renewal_sent(), Some(false));
        let mut release = core.hold_released(Term::Watchdog, now);
        assert!(release.was_live && release.last && release.stops_renewal);
        assert_eq!(said(core.renewal_answered(Answer::Gone, t0 + ms(1000), now)), "lost");
        assert_eq!(said(core.release_ended(&mut release)), "nothing");
        assert!(!release.was_live, "nothing to send for a lease known gone");
        assert_eq!(core.state(now), LeaseState::Lost);
        assert_eq!(said(core.lost()), "nothing");
    }

    /// Every row of the renewal's table.
    #[test]
    fn the_renewal_table_holds() {
        let mut wheel = Wheel::new();
        let t0 = Instant::now();
        let mut core = Core::new(SPAN);
        // None: a watchdog hold schedules it at a third of the lease; a fixed one does not.
        assert_eq!(core.hold_added(Term::Until(Some(t0 + ms(500))), t0).schedule, None);
        assert_eq!(core.hold_added(Term::Watchdog, t0).schedule, Some(t0 + ms(1000)));
        let key = wheel.insert(1000, ());
        core.renewal_scheduled(|old| {
            assert_eq!(old, None);
            Some(key)
        });
        // Scheduled: another watchdog hold leaves the entry as it is.
        assert_eq!(core.hold_added(Term::Watchdog, t0 + ms(10)).schedule, None);
        // The entry fires: none, then in flight when the batch goes out (with a fixed hold
        // left, which the renewal must not cut short).
        core.renewal_fired();
        assert_eq!(core.renewal_cancelled(), None, "a release can no longer cancel it");
        assert_eq!(core.renewal_sent(), Some(true));
        assert!(core.renewal_in_flight());
        // In flight: a watchdog hold leaves it to the answer.
        assert_eq!(core.hold_added(Term::Watchdog, t0 + ms(20)).schedule, None);
        // Renewed: the next at the send + a third.
        let sent = t0 + ms(1000);
        let effects = core.renewal_answered(Answer::Renewed, sent, sent + ms(5));
        assert_eq!(effects.schedule, Some(sent + ms(1000)));
        assert!(!core.renewal_in_flight());
        // Failed before the deadline: again a twelfth later, or at the deadline if sooner.
        core.renewal_sent();
        let now = sent + ms(1200);
        assert_eq!(core.renewal_answered(Answer::Failed, sent, now).schedule, Some(now + ms(250)));
        core.renewal_sent();
        let end = core.expires_at().unwrap();
        let now = end - ms(100);
        assert_eq!(core.renewal_answered(Answer::Failed, sent, now).schedule, Some(end));
        // Failed past the deadline, or gone: none.
        core.renewal_sent();
        assert_eq!(core.renewal_answered(Answer::Failed, sent, end).schedule, None);
        let (mut gone, now) = given(Given::Held, t0);
        gone.renewal_sent();
        assert_eq!(gone.renewal_answered(Answer::Gone, now, now).schedule, None);
        // Renewed with no watchdog hold left (released while in flight): none.
        let (mut released, now) = given(Given::Held, t0);
        assert_eq!(released.renewal_sent(), Some(false));
        for _ in 0..2 {
            released.hold_released(Term::Watchdog, now);
        }
        assert_eq!(released.renewal_answered(Answer::Renewed, now, now).schedule, None);
        // Not held, or no watchdog hold: left out of the batch.
        let (mut lost, _) = given(Given::Lost, t0);
        assert_eq!(lost.renewal_sent(), None);
        assert!(!lost.renewal_in_flight());
        let mut fixed = Core::new(SPAN);
        fixed.hold_added(Term::Until(None), t0);
        assert_eq!(fixed.renewal_sent(), None);
        // The last watchdog hold released: the entry is to be cancelled and a round trip in
        // flight waited for; a watchdog hold left keeps both.
        let (mut two, now) = given(Given::Held, t0);
        let key = wheel.insert(1000, ());
        two.renewal_scheduled(|_| Some(key));
        assert!(!two.hold_released(Term::Watchdog, now).stops_renewal);
        assert!(two.hold_released(Term::Watchdog, now).stops_renewal);
        assert_eq!(two.renewal_cancelled(), Some(key));
        // A hold added after the entry fired schedules one; the answer's replaces it.
        let (mut raced, now) = given(Given::Held, t0);
        raced.renewal_fired();
        let early = wheel.insert(5, ());
        raced.renewal_scheduled(|_| Some(early));
        raced.renewal_sent();
        let effects = raced.renewal_answered(Answer::Renewed, now, now);
        let replacement = wheel.insert(10, ());
        raced.renewal_scheduled(|old| {
            assert_eq!(old, Some(early), "the entry it replaces, to cancel");
            Some(replacement)
        });
        assert!(effects.schedule.is_some());
    }

    /// The lease lasts as long as its longest hold, and Redis is asked to keep it so: a
    /// short fixed hold never cuts the watchdog's part, a long one outlasts it.
    #[test]
    fn a_lease_lasts_as_long_as_its_longest_hold() {
        let now = Instant::now();
        let mut core = Core::new(Span { lease: Duration::from_secs(3), drift: Duration::ZERO });
        core.hold_added(Term::Watchdog, now);
        let short = Term::Until(now.checked_add(ms(200)));
        core.hold_added(short, now);
        assert_eq!(core.expires_at(), now.checked_add(Duration::from_secs(3)), "the short hold does not cut it");
        let long = Term::Until(now.checked_add(Duration::from_secs(10)));
        core.hold_added(long, now);
        assert_eq!(core.expires_at(), now.checked_add(Duration::from_secs(10)));
        assert_eq!(core.renewal_sent(), Some(true), "fixed holds remain: lengthen only");
        assert!(!core.hold_released(long, now).last);
        assert_eq!(core.keep_millis(3000, now), 3000, "the watchdog hold and a 200 ms one remain");
        assert!(!core.hold_released(Term::Watchdog, now).last);
        assert_eq!(core.keep_millis(3000, now), 200);
        assert_eq!(core.keep_millis(3000, now + ms(150)), 50, "the rest of it");
        assert_eq!(core.keep_millis(3000, now + ms(300)), 1, "at least 1 ms");
        assert!(core.hold_released(short, now).last);
    }

    /// Validity and risk are measured from the send: valid until send + lease − drift, at
    /// risk from send + lease/2, and a later renewal never moves either back.
    #[test]
    fn validity_and_risk_count_from_the_send() {
        let sent = Instant::now();
        let mut core = Core::new(SPAN);
        core.hold_added(Term::Watchdog, sent + ms(100));
        assert_eq!(core.expires_at(), Some(sent + ms(3070)));
        assert_eq!(core.next_change(sent), Some(sent + ms(1600)));
        // An older renewal's answer (a send before the acquire's) changes nothing.
        assert!(!core.renewed(sent));
        assert_eq!(core.expires_at(), Some(sent + ms(3070)));
        assert_eq!(core.valid_until(sent + ms(3069)), Some(Some(sent + ms(3070))));
        assert_eq!(core.valid_until(sent + ms(3070)), None, "lost: no validity");
    }

    /// A fixed hold that outlasts the watchdog's keeps the lease valid whatever renewals do:
    /// never at risk while it does.
    #[test]
    fn a_fixed_hold_longer_than_the_watchdog_part_keeps_the_lease_out_of_risk() {
        let sent = Instant::now();
        let mut core = Core::new(SPAN);
        core.hold_added(Term::Watchdog, sent);
        let long = Term::Until(sent.checked_add(Duration::from_secs(60)));
        core.hold_added(long, sent);
        core.renewal_sent();
        assert_eq!(said(core.renewal_answered(Answer::Failed, sent, sent)), "nothing", "not at risk");
        assert_eq!(core.state(sent + Duration::from_secs(2)), LeaseState::Held);
        assert!(!core.hold_released(long, sent).last);
        assert_eq!(core.state(sent + Duration::from_secs(2)), LeaseState::AtRisk, "the watchdog part alone now");
        // Fixed holds alone are never at risk: nothing renews them.
        let mut fixed = Core::new(SPAN);
        fixed.hold_added(Term::Until(Some(sent + ms(100))), sent);
        assert_eq!(fixed.state(sent + ms(99)), LeaseState::Held);
        assert_eq!(fixed.next_change(sent), Some(sent + ms(100)));
        assert_eq!(fixed.state(sent + ms(100)), LeaseState::Lost);
    }

    #[test]
    fn a_hold_without_end_never_expires() {
        let now = Instant::now();
        let mut core = Core::new(SPAN);
        core.hold_added(Term::Until(None), now);
        assert_eq!(core.expires_at(), None);
        assert!(core.is_live(now + Duration::from_secs(3_600_000)));
        assert_eq!(core.next_change(now), None);
        assert_eq!(core.keep_millis(1000, now), keys::MAX_LEASE_MILLIS);
    }

    /// A wheel that schedules nothing.
    struct NoWheel;

    impl Schedule for NoWheel {
        fn put(&self, _: &Arc<Lease>, old: Option<WheelKey>, _: Instant) -> Option<WheelKey> {
            old
        }

        fn cancel(&self, _: WheelKey) {}
    }

    fn lease(span: Span) -> Arc<Lease> {
        let renews = Renews::Hash { owner: "o".into(), role: Role::Exclusive, field: "o".into(), hold_keys: None };
        Arc::new(Lease::new("l".into(), renews, span))
    }

    /// A waiter on the lease wakes when a renewal fails (notified) and when the clock turns
    /// it at risk (its own deadline), and returns at its timeout otherwise.
    #[test]
    fn waiting_while_held_ends_at_risk_or_at_the_timeout() {
        let lease = lease(Span { lease: ms(600), drift: Duration::ZERO });
        let sent = Instant::now();
        lease.hold_added(Term::Watchdog, sent, &NoWheel, &Events::none());
        let timed_out = lease.wait_while_held(Some(Instant::now() + ms(20)));
        assert_eq!(timed_out, LeaseState::Held);
        // The clock: at risk at half the lease (300 ms after the send).
        assert_eq!(lease.wait_while_held(None), LeaseState::AtRisk);
        assert!(sent.elapsed() >= ms(300), "{:?}", sent.elapsed());
        // A failure, notified: at once.
        let lease = self::lease(SPAN);
        lease.hold_added(Term::Watchdog, Instant::now(), &NoWheel, &Events::none());
        let failing = Arc::clone(&lease);
        let failer = std::thread::spawn(move || {
            std::thread::sleep(ms(50));
            failing.renewal_sent(&Events::none());
            failing.renewal_answered(Answer::Failed, Instant::now(), &NoWheel, &Events::none());
        });
        let started = Instant::now();
        assert_eq!(lease.wait_while_held(Some(Instant::now() + Duration::from_secs(5))), LeaseState::AtRisk);
        // Well before the clock would turn it at risk (half of `SPAN`'s 3 s).
        assert!(started.elapsed() < ms(1000), "woken by the failure: {:?}", started.elapsed());
        failer.join().expect("failer");
    }

    /// A release waits for the renewal in flight, and the loss found then is the lease's.
    #[test]
    fn a_release_waits_for_the_renewal_in_flight_then_ends_the_lease() {
        let lease = lease(SPAN);
        lease.hold_added(Term::Watchdog, Instant::now(), &NoWheel, &Events::none());
        assert_eq!(lease.renewal_sent(&Events::none()), Some(false));
        let renewer = Arc::clone(&lease);
        let answer = std::thread::spawn(move || {
            std::thread::sleep(ms(50));
            renewer.renewal_answered(Answer::Renewed, Instant::now(), &NoWheel, &Events::none());
        });
        let started = Instant::now();
        let left = lease.hold_released(Term::Watchdog, &NoWheel, Duration::from_secs(5), 3000, &Events::none());
        assert!(started.elapsed() >= ms(50), "waited for the answer: {:?}", started.elapsed());
        assert!(left.last && !left.lost);
        assert_eq!(left.keep_millis, 1, "nothing left to keep");
        assert_eq!(lease.state(), LeaseState::Released);
        assert_eq!(lease.valid_until(), None);
        lease.lost(&Events::none());
        assert_eq!(lease.state(), LeaseState::Lost);
        answer.join().expect("renewer");
    }

    /// A permit lease and a group lease have no field; a lock's lease has its owner and role.
    #[test]
    fn what_a_lease_renews_names_its_owner() {
        let permits = Lease::new("s".into(), Renews::Permits(vec![[7; 16]]), SPAN);
        assert_eq!((permits.owner(), permits.role()), (None, None));
        let group = Lease::new("g".into(), Renews::Group { owner: "c:1".into(), fields: "ab".into() }, SPAN);
        assert_eq!((group.owner(), group.role()), (Some("c:1"), None));
        let lock = lease(SPAN);
        assert_eq!((lock.owner(), lock.role()), (Some("o"), Some(Role::Exclusive)));
        assert_eq!(&**lock.name(), "l");
    }
}
