//! Stopping the command before its lease's deadline: how much warning a lease gives, which
//! `--grace` fits in it, and when SIGTERM and SIGKILL go (pure: no clock of its own, no
//! signals).
//!
//! A watchdog lease turns at risk when a renewal fails, or at the latest half a lease after
//! the last successful renewal was sent; it is valid until that send plus the lease, less
//! the library's clock-drift allowance. A fixed `--lease` is valid from its acquire's send
//! for the lease less the allowance, and is never renewed. SIGKILL goes [`KILL_LEAD`]
//! before the deadline, SIGTERM the grace before that:
//!
//! | `--on-lost` | when the lease is at risk (watchdog) or from the start (fixed) |
//! |---|---|
//! | `term` | SIGTERM at deadline − grace − lead, SIGKILL at deadline − lead |
//! | `kill` | SIGKILL at deadline − lead |
//! | `ignore` | nothing (the command may outlive the lease; exit 79 if it does) |
//!
//! | stopping | event | next |
//! |---|---|---|
//! | planned | SIGTERM's time comes | SIGTERM sent (once) |
//! | planned, SIGTERM sent | SIGKILL's time comes | SIGKILL sent (once) |
//! | planned, nothing sent | the lease is held again (a renewal got through) | cancelled |
//! | planned, a signal sent | the lease is held again | goes on: a signal cannot be taken back |

use std::time::{Duration, Instant};

use crate::args::OnLost;

/// How long before the deadline SIGKILL is sent: the kernel ends a killed process within a
/// millisecond or so, and the rest is slack for a busy machine.
pub const KILL_LEAD: Duration = Duration::from_millis(20);

/// The grace when none is given, at most.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// The library's clock-drift allowance for a lease of `lease` (the CLI builds its client
/// with the default).
fn drift(lease: Duration) -> Duration {
    lease.mul_f64(redlease::DEFAULT_CLOCK_DRIFT_RATE).saturating_add(redlease::DEFAULT_CLOCK_DRIFT_MARGIN)
}

/// How much warning the lease gives before its deadline: a watchdog lease's from the
/// moment it turns at risk at the latest (half the lease after the last renewal's send),
/// a fixed lease's from its start.
pub fn warning(watchdog: Duration, fixed: Option<Duration>) -> Duration {
    match fixed {
        Some(lease) => lease.saturating_sub(drift(lease)),
        None => (watchdog / 2).saturating_sub(drift(watchdog)),
    }
}

/// The grace `run` uses: the one asked for when it fits in the room the warning leaves
/// (less [`KILL_LEAD`] and one look at the lease, `tick`); none asked, [`DEFAULT_GRACE`]
/// (and at most a tenth of a fixed lease, so that a short fixed lease is not mostly
/// grace), shrunk to fit. `Err` with the room when an asked grace does not fit.
pub fn grace(
    asked: Option<Duration>,
    warning: Duration,
    tick: Duration,
    fixed: Option<Duration>,
) -> Result<Duration, Duration> {
    let room = warning.saturating_sub(KILL_LEAD).saturating_sub(tick);
    match asked {
        Some(grace) if grace <= room => Ok(grace),
        Some(_) => Err(room),
        None => Ok(fixed.map_or(DEFAULT_GRACE, |lease| DEFAULT_GRACE.min(lease / 10)).min(room)),
    }
}

/// A signal to send the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Term,
    Kill,
}

/// The stopping of the command before a deadline (see the module's tables).
#[derive(Debug)]
pub struct Stopping {
    deadline: Instant,
    term_at: Option<Instant>,
    kill_at: Option<Instant>,
    sent: Vec<Action>,
}

impl Stopping {
    /// The plan for a lease valid until `deadline`; `None` for `--on-lost ignore`.
    pub fn plan(on_lost: OnLost, grace: Duration, deadline: Instant) -> Option<Stopping> {
        let kill_at = deadline.checked_sub(KILL_LEAD).unwrap_or(deadline);
        let term_at = kill_at.checked_sub(grace).unwrap_or(kill_at);
        match on_lost {
            OnLost::Term => {
                Some(Stopping { deadline, term_at: Some(term_at), kill_at: Some(kill_at), sent: Vec::new() })
            }
            OnLost::Kill => Some(Stopping { deadline, term_at: None, kill_at: Some(kill_at), sent: Vec::new() }),
            OnLost::Ignore => None,
        }
    }

    /// The deadline it stops the command before.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// When SIGTERM goes, if it does.
    pub fn term_at(&self) -> Option<Instant> {
        self.term_at
    }

    /// When SIGKILL goes, if it does.
    pub fn kill_at(&self) -> Option<Instant> {
        self.kill_at
    }

    /// The next signal due at `now`, each once, SIGTERM before SIGKILL.
    pub fn due(&mut self, now: Instant) -> Option<Action> {
        let next = [(Action::Term, self.term_at), (Action::Kill, self.kill_at)]
            .into_iter()
            .find(|(action, at)| at.is_some_and(|at| now >= at) && !self.sent.contains(action))?;
        self.sent.push(next.0);
        Some(next.0)
    }

    /// When the next signal is due, if one is still to go.
    pub fn next_at(&self) -> Option<Instant> {
        [(Action::Term, self.term_at), (Action::Kill, self.kill_at)]
            .into_iter()
            .filter(|(action, _)| !self.sent.contains(action))
            .find_map(|(_, at)| at)
    }

    /// Whether a signal was sent (the plan can no longer be called off).
    pub fn started(&self) -> bool {
        !self.sent.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_warning_is_half_a_watchdog_lease_or_a_whole_fixed_one_less_the_drift() {
        assert_eq!(warning(Duration::from_secs(3), None), MS * (1500 - 32));
        assert_eq!(warning(Duration::from_secs(30), None), MS * (15_000 - 302));
        assert_eq!(warning(Duration::from_secs(30), Some(Duration::from_secs(1))), MS * (1000 - 12));
        assert_eq!(warning(Duration::from_millis(3), None), Duration::ZERO, "nothing left: no warning");
    }

    #[test]
    fn an_asked_grace_must_fit_and_the_default_shrinks_to_fit() {
        let tick = MS * 250;
        let warning = MS * 1468;
        assert_eq!(grace(Some(Duration::from_secs(1)), warning, tick, None), Ok(Duration::from_secs(1)));
        assert_eq!(grace(Some(MS * 1198), warning, tick, None), Ok(MS * 1198), "exactly the room");
        assert_eq!(grace(Some(MS * 1199), warning, tick, None), Err(MS * 1198), "the room, for the message");
        assert_eq!(grace(None, warning, tick, None), Ok(MS * 1198), "the default, shrunk");
        assert_eq!(grace(None, MS * 14_698, tick, None), Ok(DEFAULT_GRACE), "the default fits a 30 s watchdog");
        let fixed = Some(Duration::from_secs(1));
        assert_eq!(grace(None, MS * 988, MS * 100, fixed), Ok(MS * 100), "a tenth of a short fixed lease");
        assert_eq!(grace(Some(Duration::ZERO), Duration::ZERO, tick, None), Ok(Duration::ZERO), "zero always fits");
    }

    /// Every row of the tables: when each signal goes, each once, in order.
    #[test]
    fn signals_go_before_the_deadline_once_each_in_order() {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut term = Stopping::plan(OnLost::Term, Duration::from_secs(1), deadline).expect("a plan");
        let kill_at = deadline - KILL_LEAD;
        let term_at = kill_at - Duration::from_secs(1);
        assert_eq!((term.term_at(), term.kill_at(), term.next_at()), (Some(term_at), Some(kill_at), Some(term_at)));
        assert_eq!(term.due(term_at - MS), None);
        assert!(!term.started());
        assert_eq!(term.due(term_at), Some(Action::Term));
        assert_eq!(term.due(term_at), None, "once");
        assert!(term.started());
        assert_eq!(term.next_at(), Some(kill_at));
        assert_eq!(term.due(kill_at), Some(Action::Kill));
        assert_eq!((term.due(deadline), term.next_at()), (None, None));
        // Both due at once (the plan came late): SIGTERM first, then SIGKILL.
        let mut late = Stopping::plan(OnLost::Term, Duration::from_secs(1), deadline).expect("a plan");
        assert_eq!(
            (late.due(deadline), late.due(deadline), late.due(deadline)),
            (Some(Action::Term), Some(Action::Kill), None)
        );
        let mut kill = Stopping::plan(OnLost::Kill, Duration::from_secs(1), deadline).expect("a plan");
        assert_eq!((kill.term_at(), kill.next_at()), (None, Some(kill_at)));
        assert_eq!((kill.due(kill_at), kill.due(kill_at)), (Some(Action::Kill), None));
        assert!(Stopping::plan(OnLost::Ignore, Duration::ZERO, deadline).is_none());
    }
}
