//! The command under the held lease: started with the lock's variables, supervised until
//! it exits (signals passed on; stopped before the lease's deadline when the lease is at
//! risk or fixed; told of a lost lease as `--on-lost` says), reaped, the lease released,
//! and the exit code that says how it went. Apart from the acquiring: from here on the kind
//! of lease no longer matters, only its state and its deadline.

use std::process::ExitStatus;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use redlease::LeaseState;

use crate::args::{OnLost, RunArgs};
use crate::child::{self, Child};
use crate::deadline::{Action, Stopping};
use crate::exit::{self, Failure, say};

use super::acquire::Guard;
use super::{Event, Run};

/// Why the lease was lost, and when that was learned.
struct Loss {
    why: String,
}

/// How the supervision ended, besides the command's exit.
struct Ending {
    /// The command outlived its lease.
    loss: Option<Loss>,
    /// The command was stopped before the lease's deadline: why, and the deadline.
    stopped: Option<(String, Instant)>,
}

impl Run<'_> {
    /// The lock is held: run the command under it and release.
    pub(super) fn hold(&self, guard: Guard, inbox: &Receiver<Event>) -> Result<u8, Failure> {
        let acquired_at = Instant::now();
        // A signal that came before the command started: do not start it.
        for event in inbox.try_iter() {
            if let Event::Signal(received) = event {
                self.release(guard);
                say(&format!("interrupted by {} before the command started", received.signal.as_str()));
                return Ok(exit::signal_code(received.signal as i32));
            }
        }
        if !guard.is_held() {
            let _ = guard.release();
            return Err(Failure::new(exit::LEASE_LOST, format!("lost {} before the command started", self.name())));
        }
        let mut child = match self.start(&guard) {
            Ok(child) => child,
            Err(failure) => {
                self.release(guard);
                return Err(failure);
            }
        };
        let Ending { loss, stopped } = self.supervise(&guard, &child, inbox, acquired_at);
        let status = child.reap().map_err(|e| Failure::software(format!("cannot reap the command: {e}")))?;
        let exited_at = Instant::now();
        // A command stopped before the lease's deadline did not outlive the lease, whatever
        // the release finds after it: a lease that ran out once the command was gone (the
        // partition that put it at risk outlasted it) is the end the stop was for.
        let stopped_in_time = stopped.as_ref().is_some_and(|(_, deadline)| exited_at <= *deadline);
        let loss = match (loss, guard.release()) {
            (Some(loss), _) => Some(loss),
            (None, Ok(())) => None,
            (None, Err(err)) if err.is_not_held() && stopped_in_time => {
                say(&format!("{} had run out by the release, after the command stopped", self.name()));
                None
            }
            (None, Err(err)) if err.is_not_held() => Some(Loss { why: "found lost at release".to_owned() }),
            (None, Err(err)) => {
                say(&format!(
                    "could not release {} ({}); it expires after its lease",
                    self.name(),
                    exit::describe(&err)
                ));
                None
            }
        };
        self.outcome(Ending { loss, stopped }, status, exited_at)
    }

    /// Starts the command with the lock's variables, and the thread that hears of its exit.
    /// A command that cannot be watched is killed and reaped before the error is returned.
    fn start(&self, guard: &Guard) -> Result<Child, Failure> {
        let mut env =
            vec![("REDLEASE_LOCK", self.args.name.clone()), ("REDLEASE_CLIENT_ID", self.client.id().to_owned())];
        env.extend(guard.variables());
        let parent_death = match self.args.tending.on_lost {
            OnLost::Term => Some(Signal::SIGTERM),
            OnLost::Kill => Some(Signal::SIGKILL),
            OnLost::Ignore => None,
        };
        let mut child = Child::spawn(&self.args.command, &env, parent_death)?;
        let events = self.hook.events.clone();
        if let Err(e) = child.watch(move || {
            let _ = events.send(Event::ChildExited);
        }) {
            // Without a watcher the exit cannot be heard: stop the command rather than leave
            // it running unwatched.
            child.signal(Signal::SIGKILL);
            let _ = child.reap();
            return Err(Failure::software(format!("cannot start a thread: {e}")));
        }
        Ok(child)
    }

    /// What `redlease` exits with once the command has exited (`status`, at `exited_at`)
    /// and the lease is released: 79 when the command outlived its lease, 80 when it was
    /// stopped before the lease's deadline, else the command's own code.
    fn outcome(&self, ending: Ending, status: ExitStatus, exited_at: Instant) -> Result<u8, Failure> {
        match (ending.loss, ending.stopped) {
            (Some(loss), _) => Err(Failure::new(
                exit::LEASE_LOST,
                format!("lost {} ({}); the command {}", self.name(), loss.why, child::describe(status)),
            )),
            (None, Some((why, deadline))) => Err(Failure::new(
                exit::STOPPED_AT_RISK,
                format!(
                    "stopped the command before {} could run out ({why}): it {}, {} before the lease's deadline",
                    self.name(),
                    child::describe(status),
                    humantime::format_duration(round_ms(deadline.saturating_duration_since(exited_at)))
                ),
            )),
            (None, None) => Ok(child::exit_code(status)),
        }
    }

    /// Waits for the command to exit, passing signals on, stopping it before the lease's
    /// deadline when the lease is at risk (or fixed), and telling it of a lost lease.
    fn supervise(&self, guard: &Guard, child: &Child, inbox: &Receiver<Event>, acquired_at: Instant) -> Ending {
        let tick = self.tick();
        let mut loss: Option<Loss> = None;
        let mut kill_at: Option<Instant> = None;
        let mut stopping = self.fixed_lease_stopping(guard);
        let mut ignoring_risk = false;
        loop {
            let next = [stopping.as_ref().and_then(|(_, plan)| plan.next_at()), kill_at].into_iter().flatten().min();
            let wait = next.map_or(tick, |at| at.saturating_duration_since(Instant::now()).min(tick));
            match inbox.recv_timeout(wait) {
                Ok(Event::ChildExited) | Err(RecvTimeoutError::Disconnected) => {
                    let stopped = stopping
                        .filter(|(_, plan)| plan.started() && loss.is_none())
                        .map(|(why, plan)| (why, plan.deadline()));
                    return Ending { loss, stopped };
                }
                Ok(Event::Signal(received)) => {
                    if !received.from_terminal {
                        child.signal(received.signal);
                    }
                }
                Ok(Event::LeaseChanged) | Err(RecvTimeoutError::Timeout) => {}
            }
            if loss.is_none() {
                self.follow_lease_state(guard, child, &mut stopping, &mut ignoring_risk);
            }
            if let Some((_, plan)) = &mut stopping
                && loss.is_none()
            {
                send_due_signals(child, plan);
            }
            if loss.is_none() && !guard.is_held() {
                let why = self.why_lost(acquired_at);
                kill_at = self.on_loss(child, &why, stopping.as_ref());
                loss = Some(Loss { why });
            }
            if kill_at.is_some_and(|at| Instant::now() >= at) {
                say(&format!("the command (pid {}) outlived the grace period: sending SIGKILL", child.pid()));
                child.signal(Signal::SIGKILL);
                kill_at = None;
            }
        }
    }

    /// A fixed lease's stopping, planned from the start: its deadline is known then.
    fn fixed_lease_stopping(&self, guard: &Guard) -> Option<(String, Stopping)> {
        match (self.args.lease, guard.valid_until()) {
            (Some(lease), Some(deadline)) => Stopping::plan(self.args.tending.on_lost, self.grace, deadline)
                .map(|plan| (format!("its fixed lease of {} was ending", humantime::format_duration(lease)), plan)),
            _ => None,
        }
    }

    /// Follows the state of a lease not lost: at risk, the command's stopping is planned and
    /// announced (with `--on-lost ignore`, the risk is only said, once); held again before
    /// any signal went, the stopping is called off.
    fn follow_lease_state(
        &self,
        guard: &Guard,
        child: &Child,
        stopping: &mut Option<(String, Stopping)>,
        ignoring_risk: &mut bool,
    ) {
        match guard.lease_state() {
            LeaseState::AtRisk if stopping.is_none() => match guard.valid_until() {
                Some(deadline) if self.args.tending.on_lost != OnLost::Ignore => {
                    *stopping = Stopping::plan(self.args.tending.on_lost, self.grace, deadline).map(|plan| {
                        let why = self.why_at_risk();
                        self.announce(child, &why, &plan);
                        (why, plan)
                    });
                }
                _ if !*ignoring_risk => {
                    *ignoring_risk = true;
                    say(&format!(
                        "{} is at risk ({}): the command (pid {}) runs on (--on-lost ignore)",
                        self.name(),
                        self.why_at_risk(),
                        child.pid()
                    ));
                }
                _ => {}
            },
            // A renewal got through before any signal went: the command runs on.
            LeaseState::Held if self.args.lease.is_none() => {
                if stopping.as_ref().is_some_and(|(_, plan)| !plan.started()) {
                    say(&format!("renewals of {} got through again: the command runs on", self.name()));
                    *stopping = None;
                }
                *ignoring_risk = false;
            }
            _ => {}
        }
    }

    /// The lease was found lost (`why`): a command being stopped gets SIGKILL at once, any
    /// other is told as `--on-lost` says. Returns when to send SIGKILL.
    fn on_loss(&self, child: &Child, why: &str, stopping: Option<&(String, Stopping)>) -> Option<Instant> {
        match stopping {
            // Being stopped already, and still running at the deadline: at once.
            Some((_, plan)) if plan.started() => {
                say(&format!("lost {} ({why}) while the command (pid {}) was stopping", self.name(), child.pid()));
                Some(Instant::now())
            }
            _ => self.tell(child, why),
        }
    }

    /// Says that the lease is at risk and when the command will be stopped.
    fn announce(&self, child: &Child, why: &str, plan: &Stopping) {
        let now = Instant::now();
        let left = |at: Instant| humantime::format_duration(round_ms(at.saturating_duration_since(now)));
        let signals = match plan.term_at() {
            Some(term_at) => format!(
                "SIGTERM in {}, SIGKILL in {}",
                left(term_at),
                plan.kill_at().map_or_else(String::new, |at| left(at).to_string())
            ),
            None => format!("SIGKILL in {}", plan.kill_at().map_or_else(String::new, |at| left(at).to_string())),
        };
        say(&format!(
            "{} is at risk ({why}): it may run out in {}; the command (pid {}) gets {signals}",
            self.name(),
            left(plan.deadline()),
            child.pid()
        ));
    }

    /// Why the lease is at risk: the last renewal error, if one was heard.
    fn why_at_risk(&self) -> String {
        match self.hook.renewal_error() {
            Some(error) => format!("renewals failing: {error}"),
            None => "renewals overdue".to_owned(),
        }
    }

    /// Tells the command that the lease is lost, as `--on-lost` says; returns when to
    /// send SIGKILL.
    fn tell(&self, child: &Child, why: &str) -> Option<Instant> {
        let pid = child.pid();
        match self.args.tending.on_lost {
            OnLost::Term => {
                say(&format!(
                    "lost {} ({why}): sending SIGTERM to the command (pid {pid}), SIGKILL in {}",
                    self.name(),
                    humantime::format_duration(self.grace)
                ));
                child.signal(Signal::SIGTERM);
                // A grace too long for the clock means no SIGKILL at all.
                Instant::now().checked_add(self.grace)
            }
            OnLost::Kill => {
                say(&format!("lost {} ({why}): sending SIGKILL to the command (pid {pid})", self.name()));
                child.signal(Signal::SIGKILL);
                None
            }
            OnLost::Ignore => {
                say(&format!("lost {} ({why}): the command (pid {pid}) runs on (--on-lost ignore)", self.name()));
                None
            }
        }
    }

    fn why_lost(&self, acquired_at: Instant) -> String {
        if let Some(lease) = self.args.lease
            && acquired_at.elapsed() >= lease
        {
            return format!("its fixed lease of {} ran out", humantime::format_duration(lease));
        }
        match self.hook.renewal_error() {
            Some(error) => format!("renewals failed until the lease ran out: {error}"),
            None => "Redis says it is no longer ours".to_owned(),
        }
    }

    /// How often the lease is read: a tenth of it, between 10 ms and 250 ms.
    fn tick(&self) -> Duration {
        tick_for(self.args)
    }
}

/// Sends the stopping's signals that are due, each once, saying so.
fn send_due_signals(child: &Child, plan: &mut Stopping) {
    while let Some(action) = plan.due(Instant::now()) {
        let pid = child.pid();
        match action {
            Action::Term => {
                say(&format!("sending SIGTERM to the command (pid {pid}) before the lease can run out"));
                child.signal(Signal::SIGTERM);
            }
            Action::Kill => {
                say(&format!("sending SIGKILL to the command (pid {pid}) before the lease can run out"));
                child.signal(Signal::SIGKILL);
            }
        }
    }
}

/// How often the supervisor reads the lease: a tenth of it, between 10 ms and 250 ms.
pub(super) fn tick_for(args: &RunArgs) -> Duration {
    let lease = args.lease.or(args.tending.watchdog).unwrap_or(redlease::DEFAULT_WATCHDOG_TIMEOUT);
    (lease / 10).clamp(Duration::from_millis(10), Duration::from_millis(250))
}

/// `d` to the millisecond, for messages.
fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
