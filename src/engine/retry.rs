//! Riding out a restart or a failover: an operation whose command could not reach Redis
//! (the connection was refused, broke, or could not be made) or that Redis refused for a
//! state that passes by itself is tried again after a jittered pause (50 ms, doubling up to
//! 1 s). A call that does not wait keeps trying for the client's retry budget; a wait
//! (`lock`, `try_lock_for`, the semaphores', the latch's, a campaign) for as long as its own
//! deadline allows, a grant no replica confirmed included, and tells once when it outlasts
//! the budget. A command that got no reply in time is not tried again: its outcome is
//! unknown, and the caller's bound is the command timeout. A pause that would reach past
//! the budget or the deadline is shortened, so that the last try comes [`LAST_TRY_MARGIN`]
//! before it, not up to a whole pause (1 s) early: a release rides out a failover until its
//! lease's end, and a wait until its deadline.
//!
//! | error | a call that does not wait | a wait |
//! |---|---|---|
//! | unsent, or a refusal that did nothing (`is_retryable`) | again, within the budget and the caller's deadline | again, until its deadline (none: until held) |
//! | a grant no replica confirmed (`NotReplicated`, undone) | returned | again, until its deadline |
//! | no reply in time, bad input, a refusal that lasts | returned | returned |
//! | an interrupt of the waiting thread, during a pause | — | `Interrupted`, at once |

use std::time::{Duration, Instant};

use rand::Rng;

use crate::base::clock;
use crate::base::error::{Error, ErrorKind, Result};
use crate::engine::core::Engine;
use crate::observe::trace;
use crate::support::interrupt;

const FIRST_PAUSE: Duration = Duration::from_millis(50);
const LONGEST_PAUSE: Duration = Duration::from_secs(1);
/// How long before the budget or the deadline runs out the last try is made: time for it
/// to be sent and answered within it.
const LAST_TRY_MARGIN: Duration = Duration::from_millis(50);

/// Runs `op` until it succeeds, fails in a way a retry cannot mend, or the budget (from
/// the first failure) or `deadline` leaves no room for another try. `op` is told whether
/// it is a retry.
pub(crate) fn with_retries<T>(
    engine: &Engine,
    deadline: Option<Instant>,
    op: impl FnMut(bool) -> Result<T>,
) -> Result<T> {
    retrying(engine, deadline, None, op)
}

/// [`with_retries`] for a wait on `name`: it keeps trying until `deadline` (`None`: for as
/// long as it takes), a grant no replica confirmed included; an interrupt of the calling
/// thread ends a pause between tries, and the call returns `Interrupted`. A failure that
/// outlasts the retry budget is reported once (`LockEvents::waiting_through_outage`).
pub(crate) fn riding_out<T>(
    engine: &Engine,
    name: &str,
    deadline: Option<Instant>,
    op: impl FnMut(bool) -> Result<T>,
) -> Result<T> {
    retrying(engine, deadline, Some(name), op)
}

/// Whether a wait tries `err` again: what any call does, a grant that no replica
/// confirmed, which was undone (a replica re-syncing after a failover cannot acknowledge
/// for a while; the wait has time for it), and one a slow disk did not confirm.
fn a_wait_tries_again(err: &Error) -> bool {
    err.is_retryable()
        || err.kind() == ErrorKind::NotReplicated
        || (err.kind() == ErrorKind::NotPersisted && err.is_transient())
}

fn retrying<T>(
    engine: &Engine,
    deadline: Option<Instant>,
    waiting_on: Option<&str>,
    mut op: impl FnMut(bool) -> Result<T>,
) -> Result<T> {
    let budget = engine.config().retry_budget;
    let mut first_failure: Option<Instant> = None;
    let mut reported = false;
    let mut pause = FIRST_PAUSE;
    loop {
        let err = match op(first_failure.is_some()) {
            Err(err) if err.is_retryable() || (waiting_on.is_some() && a_wait_tries_again(&err)) => err,
            Ok(answered) => {
                if let (Some(name), Some(failed_at)) = (waiting_on, first_failure) {
                    // Redis answers this wait again: how long the outage kept it from a grant.
                    engine.config().events.no_grant_ended(name, failed_at.elapsed());
                }
                return Ok(answered);
            }
            other => return other,
        };
        let failed_at = *first_failure.get_or_insert_with(Instant::now);
        let give_up_at = match waiting_on {
            Some(_) => deadline,
            None => clock::earliest(failed_at.checked_add(budget), deadline),
        };
        let jittered = pause / 2 + rand::rng().random_range(Duration::ZERO..=pause / 2);
        let Some(jittered) = pause_before_next_try(Instant::now(), give_up_at, jittered) else {
            return Err(err);
        };
        if engine.check_running().is_err() {
            return Err(err);
        }
        let failing = failed_at.elapsed();
        trace::event!(
            DEBUG,
            "transient error retried",
            lock = err.lock_name(),
            pause_ms = trace::millis(jittered),
            failing_ms = trace::millis(failing);
            error = err
        );
        let events = &engine.config().events;
        events.activity().retried();
        if let Some(name) = waiting_on.filter(|_| !reported && failing >= budget) {
            // Where a call that does not wait would have given up: the wait goes on, and says
            // so once.
            reported = true;
            events.waiting_through_outage(name, failing, &err);
        }
        if waiting_on.is_none() {
            std::thread::sleep(jittered);
        } else if interrupt::nap(jittered) && interrupt::take() {
            return Err(Error::interrupted());
        }
        pause = pause.saturating_mul(2).min(LONGEST_PAUSE);
    }
}

/// The pause before the next try, `jittered` at most: shortened so that the try comes
/// [`LAST_TRY_MARGIN`] before `give_up_at`, and `None` when no try fits before it any more.
fn pause_before_next_try(now: Instant, give_up_at: Option<Instant>, jittered: Duration) -> Option<Duration> {
    let Some(at) = give_up_at else {
        return Some(jittered);
    };
    let room = at.saturating_duration_since(now).checked_sub(LAST_TRY_MARGIN).filter(|room| !room.is_zero())?;
    Some(jittered.min(room))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn without_an_end_the_pause_is_the_jittered_one() {
        assert_eq!(pause_before_next_try(Instant::now(), None, 700 * MS), Some(700 * MS));
    }

    #[test]
    fn a_pause_that_fits_is_kept() {
        let now = Instant::now();
        assert_eq!(pause_before_next_try(now, Some(now + 2000 * MS), 700 * MS), Some(700 * MS));
        assert_eq!(pause_before_next_try(now, Some(now + 750 * MS), 700 * MS), Some(700 * MS));
    }

    #[test]
    fn a_pause_reaching_past_the_end_is_shortened_to_a_last_try_before_it() {
        let now = Instant::now();
        // 900 ms left: the last try 50 ms before the end, not none (the next pause, 1 s,
        // would pass it) and not at the end itself.
        assert_eq!(pause_before_next_try(now, Some(now + 900 * MS), 1000 * MS), Some(850 * MS));
        assert_eq!(pause_before_next_try(now, Some(now + 300 * MS), 700 * MS), Some(250 * MS));
    }

    #[test]
    fn no_try_within_the_margin_of_the_end_or_past_it() {
        let now = Instant::now();
        assert_eq!(pause_before_next_try(now, Some(now + LAST_TRY_MARGIN), 25 * MS), None);
        assert_eq!(pause_before_next_try(now, Some(now + 10 * MS), 25 * MS), None);
        assert_eq!(pause_before_next_try(now + 100 * MS, Some(now), 25 * MS), None);
    }

    #[test]
    fn retries_end_after_one_shortened_pause() {
        // Played forward: pauses 50, 100, ... 1000 ms against 2.2 s; every try starts at
        // least the margin before the end, and the last one is within a pause of it.
        let start = Instant::now();
        let end = start + 2200 * MS;
        let (mut now, mut pause, mut tries) = (start, 50 * MS, vec![start]);
        while let Some(wait) = pause_before_next_try(now, Some(end), pause) {
            now += wait;
            tries.push(now);
            pause = pause.saturating_mul(2).min(LONGEST_PAUSE);
        }
        let last = *tries.last().unwrap();
        assert_eq!(end - last, LAST_TRY_MARGIN, "the last try is the margin before the end: {tries:?}");
        assert!(tries.windows(2).all(|w| w[1] > w[0]), "{tries:?}");
        assert!(tries.len() <= 8, "a handful of tries, not a spin: {tries:?}");
    }
}
