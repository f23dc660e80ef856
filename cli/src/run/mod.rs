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
//!
//! Its parts: `checks` refuses bad input before anything is sent; `acquire` takes what is
//! held, of each kind, behind one interface; `supervision` runs the command under it until
//! it exits. This module holds the flow between them and what a signal does while
//! connecting and waiting.

mod acquire;
mod checks;
mod supervision;

use std::io::IsTerminal;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use redlease::{Client, Interrupter, LockEvents};

use crate::args::RunArgs;
use crate::connect::Settings;
use crate::exit::{self, Failure, say, shown};
use crate::names;
use crate::progress::Progress;
use crate::signals::{self, Received};

use self::acquire::{Guard, Target, why_not_acquired};
use self::checks::{check_value, check_window, resolve_grace};

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
    /// Blocks the signals `run` takes (before any thread starts) and starts the thread that
    /// takes them; what one does then follows the phase, starting with connecting.
    fn listen(events: Sender<Event>) -> Result<Arc<Shared>, Failure> {
        let mask = signals::block().map_err(|e| Failure::software(format!("cannot block signals: {e}")))?;
        let shared =
            Arc::new(Shared { state: Mutex::new(State { phase: Phase::Starting, interrupted: None }), events });
        let listener = Arc::clone(&shared);
        signals::listen(mask, move |received| listener.on_signal(received))
            .map_err(|e| Failure::software(format!("cannot start the signal thread: {e}")))?;
        Ok(shared)
    }

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

pub fn run(args: RunArgs) -> Result<u8, Failure> {
    names::check(&args.name)?;
    check_window(&args)?;
    check_value(&args)?;
    let settings = Settings::from_args(&args.connection)?;
    let grace = resolve_grace(&args)?;
    let (events, inbox) = mpsc::channel();
    let shared = Shared::listen(events.clone())?;
    let hook = Arc::new(LeaseEvents { events: events.clone(), renewal_error: Mutex::new(None) });
    let client = settings.client(args.tending.watchdog, Some(Arc::clone(&hook) as Arc<dyn LockEvents>))?;
    let target = Target::from_args(&args, &client)?;
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
        Ok(None) => return Err(Failure::new(exit::NOT_ACQUIRED, why_not_acquired(&args, &client))),
        Err(err) => return Err(Failure::from_lock_error("cannot acquire", &err)),
    };
    run.hold(guard, &inbox)
}

/// One run's settings and handles.
struct Run<'a> {
    args: &'a RunArgs,
    client: &'a Client,
    hook: &'a LeaseEvents,
    /// Between SIGTERM and SIGKILL (it fits in the lease's warning).
    grace: Duration,
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
