//! The checks of `run`'s arguments that need no server: a window (`--at-least`) that can
//! be kept, a leader's value that says something, and a `--grace` that fits in the warning
//! the lease gives. Apart from the flow so
//! that bad input is refused (exit 64) in one place, before anything is sent.

use std::time::Duration;

use crate::args::{OnLost, RunArgs};
use crate::deadline;
use crate::exit::Failure;
use crate::locks;

use super::supervision::tick_for;

/// `--at-least`, checked before anything is sent: not zero, for a kind that can keep a lock
/// after its release, no longer than `--at-most`.
pub(super) fn check_window(args: &RunArgs) -> Result<(), Failure> {
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

/// `elect --value`, checked before anything is sent: not empty.
pub(super) fn check_value(args: &RunArgs) -> Result<(), Failure> {
    if args.elect.as_deref() == Some("") {
        return Err(Failure::usage("--value is empty: a leader advertises what others need of it"));
    }
    Ok(())
}

/// The grace between SIGTERM and SIGKILL: `--grace` when it fits in the warning the lease
/// gives before its deadline, a default that fits when none is given; an asked grace that
/// does not fit is bad input (64), refused before anything is sent.
pub(super) fn resolve_grace(args: &RunArgs) -> Result<Duration, Failure> {
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
