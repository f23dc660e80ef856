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

use crate::base::clock;
use crate::base::span::Span;
use crate::base::wheel::WheelKey;
use crate::kind::semaphore::PermitId;
use crate::kind::{Kind, Role};
use crate::observe::events::Events;
use crate::transport::RunId;

mod machine;
#[cfg(test)]
mod tests;

use machine::{Core, Effects, Report};

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
    /// A plain or a read hold's field is the owner itself, one allocation for both.
    /// Its kind (whose role is the holds' role) labels its metrics.
    Hash { owner: Arc<str>, kind: Kind, field: Arc<str>, hold_keys: Option<String> },
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
            Renews::Hash { owner, .. } => Some(owner),
            Renews::Group { owner, .. } => Some(owner),
            Renews::Permits(_) => None,
        }
    }

    /// The role of a lock's holds (`None`: permits, a group's values).
    pub(crate) fn role(&self) -> Option<Role> {
        match &self.renews {
            Renews::Hash { kind, .. } => Some(kind.role()),
            Renews::Permits(_) | Renews::Group { .. } => None,
        }
    }

    /// What its metrics call it: its lock's kind, `semaphore` or `group`.
    pub(crate) fn kind_label(&self) -> &'static str {
        match &self.renews {
            Renews::Hash { kind, .. } => kind.label(),
            Renews::Permits(_) => "semaphore",
            Renews::Group { .. } => "group",
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
            Some(Report::Lost) => events.lease_lost(&self.name, self.kind_label()),
            Some(Report::AtRisk(deadline)) => events.lease_at_risk(&self.name, self.kind_label(), deadline),
            Some(Report::Recovered) => events.lease_recovered(&self.name),
            None => {}
        }
    }
}
