//! Riding out a restart or a failover: an operation whose command could not reach Redis
//! (the connection was refused, broke, or could not be made) is tried again after a
//! jittered pause (50 ms, doubling up to 1 s), for as long as the client's retry budget and
//! the caller's own deadline allow. A command that got no reply in time is not tried again:
//! its outcome is unknown, and the caller's bound is the command timeout.

use std::time::{Duration, Instant};

use rand::Rng;

use crate::clock;
use crate::engine::core::Engine;
use crate::error::{Error, Result};
use crate::interrupt;
use crate::trace;

const FIRST_PAUSE: Duration = Duration::from_millis(50);
const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// Runs `op` until it succeeds, fails in a way a retry cannot mend, or the budget (from
/// the first failure) or `deadline` would be passed by the next pause. `op` is told whether
/// it is a retry.
pub(crate) fn with_retries<T>(
    engine: &Engine,
    deadline: Option<Instant>,
    op: impl FnMut(bool) -> Result<T>,
) -> Result<T> {
    retrying(engine, deadline, false, op)
}

/// [`with_retries`] for a wait: an interrupt of the calling thread ends a pause between
/// tries, and the call returns `Interrupted`.
pub(crate) fn with_retries_interruptibly<T>(
    engine: &Engine,
    deadline: Option<Instant>,
    op: impl FnMut(bool) -> Result<T>,
) -> Result<T> {
    retrying(engine, deadline, true, op)
}

fn retrying<T>(
    engine: &Engine,
    deadline: Option<Instant>,
    interruptible: bool,
    mut op: impl FnMut(bool) -> Result<T>,
) -> Result<T> {
    let mut first_failure: Option<Instant> = None;
    let mut pause = FIRST_PAUSE;
    loop {
        let err = match op(first_failure.is_some()) {
            Err(err) if err.is_retryable() => err,
            other => return other,
        };
        let failed_at = *first_failure.get_or_insert_with(Instant::now);
        let give_up_at = clock::earliest(failed_at.checked_add(engine.config().retry_budget), deadline);
        let jittered = pause / 2 + rand::rng().random_range(Duration::ZERO..=pause / 2);
        let next_at = Instant::now().checked_add(jittered);
        if give_up_at.is_some_and(|at| next_at.is_none_or(|next| next >= at)) || engine.check_running().is_err() {
            return Err(err);
        }
        trace::event!(
            DEBUG,
            "transient error retried",
            lock = err.lock_name(),
            pause_ms = trace::millis(jittered),
            failing_ms = trace::millis(failed_at.elapsed());
            error = err
        );
        if !interruptible {
            std::thread::sleep(jittered);
        } else if interrupt::nap(jittered) && interrupt::take() {
            return Err(Error::interrupted());
        }
        pause = pause.saturating_mul(2).min(LONGEST_PAUSE);
    }
}
