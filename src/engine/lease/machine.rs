//! The lease's state machine as plain data: the state, the holds and the renewal's
//! bookkeeping, each transition taking the instants it needs and saying what is to be done
//! around it ([`Effects`]). No clock, thread or Redis here; the tables it follows are in
//! the parent module's documentation, and `tests.rs` walks them row by row.

use std::time::Instant;

use super::{Answer, LeaseState, Term};
use crate::base::span::Span;
use crate::base::wheel::WheelKey;
use crate::base::{clock, keys};
/// What the machine stores of the state: `AtRisk` is read off the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Held,
    Lost,
    Released,
}

/// An event to report, once the lease's mutex is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Report {
    Lost,
    /// At risk, valid until then.
    AtRisk(Instant),
    /// A reported spell of failures ended.
    Recovered,
}

/// What a transition asks of the `Lease` around the machine.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Effects {
    /// The state changed other than by the clock: wake the waiters.
    pub(super) wake: bool,
    pub(super) report: Option<Report>,
    /// Schedule the next renewal then.
    pub(super) schedule: Option<Instant>,
}

/// The first half of a release, to be ended by [`Core::release_ended`] once a renewal in
/// flight is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Release {
    pub(super) was_live: bool,
    pub(super) valid_until: Option<Instant>,
    pub(super) last: bool,
    /// No watchdog hold remains: the renewal is to be stopped.
    pub(super) stops_renewal: bool,
}

/// The lease's state machine: the state, the holds, and the renewal's bookkeeping, as plain
/// data. Every transition takes the instants it needs.
pub(super) struct Core {
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
    pub(super) fn new(span: Span) -> Core {
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
    pub(super) fn state(&self, now: Instant) -> LeaseState {
        match self.status {
            Status::Held if !self.is_live(now) => LeaseState::Lost,
            Status::Held if self.at_risk(now) => LeaseState::AtRisk,
            Status::Held => LeaseState::Held,
            Status::Lost => LeaseState::Lost,
            Status::Released => LeaseState::Released,
        }
    }

    /// Until when the lease is valid (`None`: no end), while it is held or at risk at `now`.
    pub(super) fn valid_until(&self, now: Instant) -> Option<Option<Instant>> {
        matches!(self.state(now), LeaseState::Held | LeaseState::AtRisk).then(|| self.expires_at())
    }

    pub(super) fn is_live(&self, now: Instant) -> bool {
        self.status == Status::Held && self.expires_at().is_none_or(|at| now < at)
    }

    /// Whether the lease's validity hangs on renewals that are failing or overdue: the
    /// watchdog part is at risk and no fixed hold is valid longer than it.
    pub(super) fn at_risk(&self, now: Instant) -> bool {
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
    pub(super) fn next_change(&self, now: Instant) -> Option<Instant> {
        let risk = self.risk_at.filter(|at| *at > now && self.watchdog_holds > 0);
        clock::earliest(risk, self.expires_at())
    }

    /// When the lease runs out by the local clock: the latest end of its holds' validity
    /// (`None`: never).
    pub(super) fn expires_at(&self) -> Option<Instant> {
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
    pub(super) fn keep_millis(&self, watchdog_millis: u64, now: Instant) -> u64 {
        let watchdog = if self.watchdog_holds > 0 { watchdog_millis } else { 0 };
        let fixed = self.fixed_until.iter().map(|end| match end {
            Some(end) => keys::ceil_millis_u64(end.saturating_duration_since(now)),
            None => u64::MAX,
        });
        fixed.fold(watchdog, u64::max).clamp(1, keys::MAX_LEASE_MILLIS)
    }

    pub(super) fn renewal_in_flight(&self) -> bool {
        self.renewing
    }

    /// One more hold, granted by a request sent at `sent`. When to schedule the renewal:
    /// for a watchdog hold on a lease whose renewal is neither scheduled nor in flight.
    pub(super) fn hold_added(&mut self, term: Term, sent: Instant) -> Effects {
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
    pub(super) fn hold_released(&mut self, term: Term, now: Instant) -> Release {
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
    pub(super) fn release_ended(&mut self, release: &mut Release) -> Effects {
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
    pub(super) fn lost(&mut self) -> Effects {
        if self.status == Status::Lost {
            return Effects::default();
        }
        self.status = Status::Lost;
        Effects { wake: true, report: Some(Report::Lost), schedule: None }
    }

    /// The renewal is put in the wheel: `put` takes the entry it replaces and gives the new.
    pub(super) fn renewal_scheduled(&mut self, put: impl FnOnce(Option<WheelKey>) -> Option<WheelKey>) {
        self.renewal = put(self.renewal.take());
    }

    /// The renewal is taken out of the wheel: its entry, to cancel.
    pub(super) fn renewal_cancelled(&mut self) -> Option<WheelKey> {
        self.renewal.take()
    }

    pub(super) fn renewal_fired(&mut self) {
        self.renewal = None;
    }

    /// A batch goes out: whether this lease is in it (held, with a watchdog hold), with
    /// whether fixed holds remain.
    /// A held lease whose deadline has passed at `now` is lost: reported, and final.
    pub(super) fn expired(&mut self, now: Instant) -> Effects {
        if self.status == Status::Held && !self.is_live(now) { self.lost() } else { Effects::default() }
    }

    pub(super) fn renewal_sent(&mut self) -> Option<bool> {
        self.renewing = self.status == Status::Held && self.watchdog_holds > 0;
        self.renewing.then_some(!self.fixed_until.is_empty())
    }

    /// The round trip sent at `sent` came back at `now` with `answer`.
    pub(super) fn renewal_answered(&mut self, answer: Answer, sent: Instant, now: Instant) -> Effects {
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
    pub(super) fn renewed(&mut self, sent: Instant) -> bool {
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
    pub(super) fn renewal_failed(&mut self, now: Instant) -> Option<Instant> {
        self.failing = true;
        if self.risk_reported || !self.at_risk(now) {
            return None;
        }
        let deadline = self.expires_at()?;
        self.risk_reported = true;
        Some(deadline)
    }
}
