//! `redlease run NAME -- COMMAND…`: acquire, run the command, keep the lease alive while it
//! runs, release after it has exited, and exit with its code. With `--permits N`, what is
//! acquired is one permit of a permit-expirable semaphore of N permits instead of a lock
//! (at most N commands at once); everything else is the same.
//!
//! Threads: the main thread acquires and keeps the `LockGuard` (it is `!Send`) and
//! supervises; a signal thread takes SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2;
//! a child thread learns of the command's exit; the library's renewal thread reports a
//! lease at risk, recovered or lost through `LockEvents`. All report to the main thread
//! over one channel. The main thread also reads the guard's state (no I/O) every tick,
//! which catches a lease that turned at risk or ran out by the clock alone.
//!
//! **Stop in time.** A lease at risk (renewals failing) has a deadline
//! (`LockGuard::valid_until`): the command gets SIGTERM `--grace` before it and SIGKILL
//! just before it, so it is gone before Redis can expire the key and another run start
//! (see `deadline`); a renewal that gets through before SIGTERM calls it off. A fixed
//! `--lease` has its deadline from the start. A command stopped so exits `redlease` with
//! 80; one that outlived its lease (lost, or `--on-lost ignore`) with 79.
//!
//! | phase | a signal |
//! |---|---|
//! | starting (connecting) | exit at once with 128 + n: nothing was acquired |
//! | waiting for the lock | the wait is interrupted (the library's `Interrupter`), which leaves nothing behind (a fair lock's place in the queue, a grant that came in the same instant); a grant that came just before is released; exit 128 + n |
//! | running | passed on to the command, unless the terminal sent it to the whole process group (the command has it already) |

use std::io::IsTerminal;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use redlease::{
    AnyLock, Client, Election, Interrupter, Leadership, LeaseState, LockEvents, LockGuard, PermitExpirableSemaphore,
    PermitGuard,
};

use crate::args::{OnLost, RunArgs};
use crate::child::{self, Child};
use crate::connect::Settings;
use crate::deadline::{self, Action, Stopping};
use crate::exit::{self, Failure, say, shown};
use crate::progress::Progress;
use crate::signals::{self, Received};
use crate::{locks, names, status};

/// What the main thread hears about.
#[derive(Debug)]
enum Event {
    Signal(Received),
    /// The lease turned at risk, recovered or was lost: look at it now.
    LeaseChanged,
    ChildExited,
}

/// Where the run is, as the signal thread needs to know it.
enum Phase {
    Starting,
    /// Waiting, on the thread this interrupts.
    Waiting(Interrupter),
    Running,
}

struct State {
    phase: Phase,
    /// The signal that ended the wait.
    interrupted: Option<Signal>,
}

/// What the signal thread shares with the main thread.
struct Shared {
    state: Mutex<State>,
    events: Sender<Event>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn on_signal(&self, received: Received) {
        let mut state = self.state();
        match &state.phase {
            Phase::Starting => {
                say(&format!("interrupted by {} while connecting", received.signal.as_str()));
                std::process::exit(i32::from(exit::signal_code(received.signal as i32)));
            }
            Phase::Waiting(interrupter) => {
                if state.interrupted.is_none() {
                    let interrupter = interrupter.clone();
                    state.interrupted = Some(received.signal);
                    // Ends the wait: it returns `Interrupted`, having left nothing behind.
                    interrupter.interrupt();
                }
            }
            Phase::Running => {
                let _ = self.events.send(Event::Signal(received));
            }
        }
    }

    fn wait_with(&self, interrupter: Interrupter) {
        self.state().phase = Phase::Waiting(interrupter);
    }

    /// Ends the waiting phase: the signal that interrupted it, if one did.
    fn stop_waiting(&self) -> Option<Signal> {
        let mut state = self.state();
        state.phase = Phase::Running;
        state.interrupted
    }
}

/// The library's events this run cares about.
struct LeaseEvents {
    events: Sender<Event>,
    renewal_error: Mutex<Option<String>>,
}

impl LockEvents for LeaseEvents {
    fn lease_lost(&self, _lock: &str) {
        let _ = self.events.send(Event::LeaseChanged);
    }

    fn lease_at_risk(&self, _lock: &str, _valid_until: Instant) {
        let _ = self.events.send(Event::LeaseChanged);
    }

    fn lease_recovered(&self, _lock: &str) {
        let _ = self.events.send(Event::LeaseChanged);
    }

    fn renewal_failed(&self, error: &redlease::Error) {
        if let Ok(mut last) = self.renewal_error.lock() {
            *last = Some(format!("{error:#}"));
        }
    }
}

impl LeaseEvents {
    fn renewal_error(&self) -> Option<String> {
        self.renewal_error.lock().ok().and_then(|last| last.clone())
    }
}

/// What `run` acquires: a lock, a permit of a semaphore (`--permits`), or the leadership
/// of an election (`elect`), advertising a value.
enum Target {
    Lock(AnyLock),
    Permits(PermitExpirableSemaphore),
    Election(Election, String),
}

/// What `run` holds while the command runs.
enum Guard {
    Lock(LockGuard),
    Permit(PermitGuard),
    Leader(Leadership),
}

impl Target {
    fn try_once(&self) -> redlease::Result<Option<Guard>> {
        match self {
            Target::Lock(lock) => lock.try_lock().map(|g| g.map(Guard::Lock)),
            Target::Permits(semaphore) => semaphore.try_acquire(1).map(|g| g.map(Guard::Permit)),
            Target::Election(election, value) => election.try_campaign(value).map(|g| g.map(Guard::Leader)),
        }
    }

    fn try_for(&self, wait: Duration) -> redlease::Result<Option<Guard>> {
        match self {
            Target::Lock(lock) => lock.try_lock_for(wait).map(|g| g.map(Guard::Lock)),
            Target::Permits(semaphore) => semaphore.try_acquire_for(1, wait).map(|g| g.map(Guard::Permit)),
            Target::Election(election, value) => election.campaign_for(value, wait).map(|g| g.map(Guard::Leader)),
        }
    }

    fn wait(&self) -> redlease::Result<Option<Guard>> {
        match self {
            Target::Lock(lock) => lock.lock().map(|g| Some(Guard::Lock(g))),
            Target::Permits(semaphore) => semaphore.acquire(1).map(|g| Some(Guard::Permit(g))),
            Target::Election(election, value) => election.campaign(value).map(|g| Some(Guard::Leader(g))),
        }
    }
}

impl Guard {
    /// Whether the lease is held (or at risk) as far as the client knows (no I/O).
    fn is_held(&self) -> bool {
        match self {
            Guard::Lock(guard) => guard.is_held(),
            Guard::Permit(guard) => guard.is_held(),
            Guard::Leader(leadership) => leadership.is_leader(),
        }
    }

    fn lease_state(&self) -> LeaseState {
        match self {
            Guard::Lock(guard) => guard.lease_state(),
            Guard::Permit(guard) => guard.lease_state(),
            Guard::Leader(leadership) => leadership.watch().state(),
        }
    }

    /// Until when no other run can hold the lock, as far as this process can tell.
    fn valid_until(&self) -> Option<Instant> {
        match self {
            Guard::Lock(guard) => guard.valid_until(),
            Guard::Permit(guard) => guard.valid_until(),
            Guard::Leader(leadership) => leadership.valid_until(),
        }
    }

    /// Releases: `Err(NotHeld)` when the lease was found lost.
    fn release(self) -> redlease::Result<()> {
        match self {
            Guard::Lock(guard) => guard.unlock(),
            Guard::Permit(guard) => guard.release(),
            Guard::Leader(leadership) => leadership.resign(),
        }
    }

    fn token(&self) -> Option<u64> {
        match self {
            Guard::Lock(guard) => guard.token(),
            Guard::Permit(_) | Guard::Leader(_) => None,
        }
    }
}

pub fn run(args: RunArgs) -> Result<u8, Failure> {
    names::check(&args.name)?;
    check_window(&args)?;
    if args.elect.as_deref() == Some("") {
        return Err(Failure::usage("--value is empty: a leader advertises what others need of it"));
    }
    let settings = Settings::from_args(&args.connection)?;
    let grace = resolve_grace(&args)?;
    let mask = signals::block().map_err(|e| Failure::software(format!("cannot block signals: {e}")))?;
    let (events, inbox) = mpsc::channel();
    let shared = Arc::new(Shared {
        state: Mutex::new(State { phase: Phase::Starting, interrupted: None }),
        events: events.clone(),
    });
    let listener = Arc::clone(&shared);
    signals::listen(mask, move |received| listener.on_signal(received))
        .map_err(|e| Failure::software(format!("cannot start the signal thread: {e}")))?;
    let hook = Arc::new(LeaseEvents { events: events.clone(), renewal_error: Mutex::new(None) });
    let client = settings.client(args.tending.watchdog, Some(Arc::clone(&hook) as Arc<dyn LockEvents>))?;
    let target = match (&args.elect, args.permits) {
        (Some(value), _) => Target::Election(client.election(args.name.as_str()), value.clone()),
        (None, Some(permits)) => {
            let semaphore = client.permit_expirable_semaphore(args.name.as_str());
            set_permits(&client, &semaphore, permits)?;
            Target::Permits(match args.lease {
                Some(lease) => semaphore.with_lease(lease),
                None => semaphore,
            })
        }
        (None, None) => Target::Lock(locks::handle(&client, args.kind, &args.name, args.lease, args.at_least)),
    };
    let run = Run { args: &args, client: &client, hook: &hook, grace };

    shared.wait_with(Interrupter::current());
    let progress = (!args.tending.quiet && std::io::stderr().is_terminal())
        .then(|| Progress::start(client.clone(), args.name.clone(), args.elect.is_some()))
        .flatten();
    let acquired = match (args.no_wait, args.wait) {
        (true, _) => target.try_once(),
        (false, Some(wait)) => target.try_for(wait),
        (false, None) => target.wait(),
    };
    let interrupted = shared.stop_waiting();
    if let Some(progress) = progress {
        progress.stop();
    }
    if let Some(signal) = interrupted {
        return Ok(run.give_up(signal, acquired));
    }
    let guard = match acquired {
        Ok(Some(guard)) => guard,
        Ok(None) if args.no_wait => {
            let why = match (&args.elect, args.permits) {
                (Some(_), _) => format!("election {} is led by someone else", shown(&args.name)),
                (None, Some(_)) => format!("no permit of semaphore {} is free", shown(&args.name)),
                (None, None) => match window_end(&client, &args.name) {
                    Some(end) => format!("lock {} is kept taken by a window until {end}", shown(&args.name)),
                    None => format!("lock {} is held by someone else", shown(&args.name)),
                },
            };
            return Err(Failure::new(exit::NOT_ACQUIRED, why));
        }
        Ok(None) => {
            let wait = humantime::format_duration(args.wait.unwrap_or_default());
            let why = match (&args.elect, args.permits) {
                (Some(_), _) => format!("election {} was not won within {wait}", shown(&args.name)),
                (None, Some(_)) => format!("no permit of semaphore {} was free within {wait}", shown(&args.name)),
                (None, None) => match window_end(&client, &args.name) {
                    Some(end) => {
                        format!(
                            "lock {} was not free within {wait}: a window keeps it taken until {end}",
                            shown(&args.name)
                        )
                    }
                    None => format!("lock {} was not free within {wait}", shown(&args.name)),
                },
            };
            return Err(Failure::new(exit::NOT_ACQUIRED, why));
        }
        Err(err) => return Err(Failure::from_lock_error("cannot acquire", &err)),
    };
    run.hold(guard, &inbox)
}

/// Until when a window (`--at-least`) keeps the lock `name` taken, when that is what holds
/// it now (one read that writes nothing; `None` also when it cannot be read).
fn window_end(client: &Client, name: &str) -> Option<String> {
    let info = client.inspect(name).ok()?;
    match info.holders.as_slice() {
        [keeper] if keeper.is_window_keeper() => Some(status::window_end(&info)),
        _ => None,
    }
}

/// `--at-least`, checked before anything is sent: not zero, for a kind that can keep a lock
/// after its release, no longer than `--at-most`.
fn check_window(args: &RunArgs) -> Result<(), Failure> {
    let Some(at_least) = args.at_least else {
        return Ok(());
    };
    let shown = |d: Duration| humantime::format_duration(d).to_string();
    if at_least.is_zero() {
        return Err(Failure::usage("--at-least 0s keeps nothing: give a window, such as 10m"));
    }
    if !locks::keeps(args.kind) {
        return Err(Failure::usage(format!(
            "--at-least is for --kind lock, fenced or spin: a {:?} lock cannot be kept after its release",
            args.kind
        )));
    }
    if let Some(at_most) = args.lease.filter(|at_most| at_least > *at_most) {
        return Err(Failure::usage(format!(
            "--at-least {} is longer than --at-most {}: the lease would end before the window",
            shown(at_least),
            shown(at_most)
        )));
    }
    Ok(())
}

/// The grace between SIGTERM and SIGKILL: `--grace` when it fits in the warning the lease
/// gives before its deadline, a default that fits when none is given; an asked grace that
/// does not fit is bad input (64), refused before anything is sent.
fn resolve_grace(args: &RunArgs) -> Result<Duration, Failure> {
    if args.tending.on_lost != OnLost::Term {
        return Ok(args.tending.grace.unwrap_or_default());
    }
    let watchdog = args.tending.watchdog.unwrap_or(redlease::DEFAULT_WATCHDOG_TIMEOUT);
    let warning = deadline::warning(watchdog, args.lease);
    deadline::grace(args.tending.grace, warning, tick_for(args), args.lease).map_err(|room| {
        let (lease, when) = match args.lease {
            Some(lease) => (format!("--lease {}", humantime::format_duration(lease)), "from its start"),
            None => (format!("--watchdog {}", humantime::format_duration(watchdog)), "once renewals fail"),
        };
        Failure::usage(format!(
            "--grace {} does not fit: with {lease} the command can be told {} {when} before the lease may run out, and SIGKILL must land before that; give --grace {} or less, or a longer lease",
            humantime::format_duration(args.tending.grace.unwrap_or_default()),
            humantime::format_duration(warning),
            humantime::format_duration(room),
        ))
    })
}

/// How often the supervisor reads the lease: a tenth of it, between 10 ms and 250 ms.
fn tick_for(args: &RunArgs) -> Duration {
    let lease = args.lease.or(args.tending.watchdog).unwrap_or(redlease::DEFAULT_WATCHDOG_TIMEOUT);
    (lease / 10).clamp(Duration::from_millis(10), Duration::from_millis(250))
}

/// Sets the semaphore to `permits` when it has none; otherwise checks the number it has
/// (permits available plus taken, read at one instant). More than `permits`: refused, as
/// more commands than asked could run at once. Fewer: a warning, and the run goes on (the
/// first run to set the permits decides their number: Redisson's semaphore keeps no total
/// of its own).
fn set_permits(client: &Client, semaphore: &PermitExpirableSemaphore, permits: u64) -> Result<(), Failure> {
    let name = shown(semaphore.name());
    let set = semaphore
        .try_set_permits(permits)
        .map_err(|e| Failure::from_lock_error(&format!("cannot set the permits of semaphore {name}"), &e))?;
    if set {
        return Ok(());
    }
    let info = client
        .inspect(semaphore.name())
        .map_err(|e| Failure::from_lock_error(&format!("cannot read semaphore {name}"), &e))?;
    let Some(total) = info.permits_total() else {
        // Deleted since: the next acquire finds no permits and waits for them.
        say(&format!("semaphore {name} has no permits set any more; waiting for one"));
        return Ok(());
    };
    let asked = i64::try_from(permits).unwrap_or(i64::MAX);
    let has = if total == 1 { "1 permit".to_owned() } else { format!("{total} permits") };
    if total > asked {
        return Err(Failure::new(
            exit::CONFIG,
            format!(
                "semaphore {name} has {has}, more than --permits {permits}: not run (the first run sets the number; see docs/cli.md to change it)"
            ),
        ));
    }
    if total < asked {
        say(&format!(
            "semaphore {name} has {has}, not {permits}: at most {total} run at once (the first run sets the number)"
        ));
    }
    Ok(())
}

/// One run's settings and handles.
struct Run<'a> {
    args: &'a RunArgs,
    client: &'a Client,
    hook: &'a LeaseEvents,
    /// Between SIGTERM and SIGKILL (it fits in the lease's warning).
    grace: Duration,
}

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
    /// What is held, for messages: `lock "x"`, `the permit of semaphore "x"`, or `the
    /// leadership of election "x"`.
    fn name(&self) -> String {
        match (&self.args.elect, self.args.permits) {
            (Some(_), _) => format!("the leadership of election {}", shown(&self.args.name)),
            (None, Some(_)) => format!("the permit of semaphore {}", shown(&self.args.name)),
            (None, None) => format!("lock {}", shown(&self.args.name)),
        }
    }

    /// The lock is held: run the command under it and release.
    fn hold(&self, guard: Guard, inbox: &Receiver<Event>) -> Result<u8, Failure> {
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
        let mut env =
            vec![("REDLEASE_LOCK", self.args.name.clone()), ("REDLEASE_CLIENT_ID", self.client.id().to_owned())];
        // A permit has no owner field.
        if let Guard::Lock(lock) = &guard {
            env.push(("REDLEASE_OWNER", lock.owner().to_owned()));
        }
        if let Some(token) = guard.token() {
            env.push(("REDLEASE_TOKEN", token.to_string()));
        }
        if let Guard::Leader(leadership) = &guard {
            env.push(("REDLEASE_OWNER", leadership.owner().to_owned()));
            env.push(("REDLEASE_TERM", leadership.term().to_string()));
        }
        let parent_death = match self.args.tending.on_lost {
            OnLost::Term => Some(Signal::SIGTERM),
            OnLost::Kill => Some(Signal::SIGKILL),
            OnLost::Ignore => None,
        };
        let mut child = match Child::spawn(&self.args.command, &env, parent_death) {
            Ok(child) => child,
            Err(failure) => {
                self.release(guard);
                return Err(failure);
            }
        };
        let events = self.hook.events.clone();
        if let Err(e) = child.watch(move || {
            let _ = events.send(Event::ChildExited);
        }) {
            // Without a watcher the exit cannot be heard: stop the command rather than leave
            // it running unwatched.
            child.signal(Signal::SIGKILL);
            let _ = child.reap();
            self.release(guard);
            return Err(Failure::software(format!("cannot start a thread: {e}")));
        }
        let Ending { loss, stopped } = self.supervise(&guard, &child, inbox, acquired_at);
        let status = child.reap().map_err(|e| Failure::software(format!("cannot reap the command: {e}")))?;
        let exited_at = Instant::now();
        let loss = match (loss, guard.release()) {
            (Some(loss), _) => Some(loss),
            (None, Ok(())) => None,
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
        match (loss, stopped) {
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
        // A fixed lease's deadline is known from the start.
        let mut stopping = match (self.args.lease, guard.valid_until()) {
            (Some(lease), Some(deadline)) => Stopping::plan(self.args.tending.on_lost, self.grace, deadline)
                .map(|plan| (format!("its fixed lease of {} was ending", humantime::format_duration(lease)), plan)),
            _ => None,
        };
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
                match guard.lease_state() {
                    LeaseState::AtRisk if stopping.is_none() => match guard.valid_until() {
                        Some(deadline) if self.args.tending.on_lost != OnLost::Ignore => {
                            stopping = Stopping::plan(self.args.tending.on_lost, self.grace, deadline).map(|plan| {
                                let why = self.why_at_risk();
                                self.announce(child, &why, &plan);
                                (why, plan)
                            });
                        }
                        _ if !ignoring_risk => {
                            ignoring_risk = true;
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
                            stopping = None;
                        }
                        ignoring_risk = false;
                    }
                    _ => {}
                }
            }
            if let Some((_, plan)) = &mut stopping
                && loss.is_none()
            {
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
            if loss.is_none() && !guard.is_held() {
                let why = self.why_lost(acquired_at);
                kill_at = match &stopping {
                    // Being stopped already, and still running at the deadline: at once.
                    Some((_, plan)) if plan.started() => {
                        say(&format!(
                            "lost {} ({why}) while the command (pid {}) was stopping",
                            self.name(),
                            child.pid()
                        ));
                        Some(Instant::now())
                    }
                    _ => self.tell(child, &why),
                };
                loss = Some(Loss { why });
            }
            if kill_at.is_some_and(|at| Instant::now() >= at) {
                say(&format!("the command (pid {}) outlived the grace period: sending SIGKILL", child.pid()));
                child.signal(Signal::SIGKILL);
                kill_at = None;
            }
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

    /// Releases, reporting a failure (the lock then expires after its lease).
    fn release(&self, guard: Guard) {
        match guard.release() {
            Ok(()) => {}
            Err(err) if err.is_not_held() => {}
            Err(err) => say(&format!("could not release {}: {}", self.name(), exit::describe(&err))),
        }
    }

    /// A signal ended the wait: the library left nothing of an interrupted wait; a grant
    /// that came just before the signal is released. Exit with 128 + the signal.
    fn give_up(&self, signal: Signal, acquired: redlease::Result<Option<Guard>>) -> u8 {
        let code = exit::signal_code(signal as i32);
        say(&format!("interrupted by {} while waiting for {}", signal.as_str(), self.name()));
        if let Ok(Some(guard)) = acquired {
            self.release(guard);
        }
        code
    }
}

/// `d` to the millisecond, for messages.
fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
