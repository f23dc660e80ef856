//! How a [`SpinLock`](crate::SpinLock) waits between attempts: Redisson's `LockOptions`
//! back-off policies, the same sleeps for the same settings, as a pure data structure (the
//! randomness is passed in, so that the tests can pin it).
//!
//! | policy | sleeps |
//! |---|---|
//! | exponential (initial `i`, max `m`, multiplier `x`) | `d1 = i`, `d(k+1) = min(m, d(k) · x + U{0..k-1})`, `m` for ever once reached |
//! | constant (`d`) | `d` every time |

use std::fmt;
use std::time::Duration;

use crate::base::error::{Error, Result};

/// How a [`SpinLock`](crate::SpinLock) waits between attempts (Redisson's
/// `LockOptions.BackOff`).
///
/// ```
/// use std::time::Duration;
/// use redlease::BackOff;
///
/// let quick = BackOff::exponential(Duration::from_millis(1), Duration::from_millis(128), 2);
/// let steady = BackOff::constant(Duration::from_millis(64));
/// # let _ = (quick, steady);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BackOff(Policy);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Policy {
    Exponential { initial: Duration, max: Duration, multiplier: u32 },
    Constant(Duration),
}

impl BackOff {
    /// Sleeps that start at `initial` and grow by `multiplier`, plus a jitter of at most
    /// one millisecond per attempt so far, up to `max` (Redisson's `ExponentialBackOff`).
    /// Values out of range (a zero duration or multiplier, `max` below `initial`) are
    /// `InvalidInput` when the lock is used, before anything is sent.
    #[must_use]
    pub fn exponential(initial: Duration, max: Duration, multiplier: u32) -> BackOff {
        BackOff(Policy::Exponential { initial, max, multiplier })
    }

    /// The same sleep every time (Redisson's `ConstantBackOff`; its default is 64 ms).
    #[must_use]
    pub fn constant(delay: Duration) -> BackOff {
        BackOff(Policy::Constant(delay))
    }

    /// Redisson's default: exponential from 1 ms to 128 ms, doubling.
    pub const DEFAULT: BackOff = BackOff(Policy::Exponential {
        initial: Duration::from_millis(1),
        max: Duration::from_millis(128),
        multiplier: 2,
    });

    /// `InvalidInput` for settings no policy can follow.
    pub(crate) fn check(&self) -> Result<()> {
        match self.0 {
            Policy::Exponential { initial, max, multiplier } => {
                if initial.is_zero() || max.is_zero() || multiplier == 0 {
                    return Err(Error::invalid(format!(
                        "exponential back-off {initial:?} to {max:?}, times {multiplier}: every value must be above zero"
                    )));
                }
                if max < initial {
                    return Err(Error::invalid(format!(
                        "exponential back-off from {initial:?} to {max:?}: the longest sleep is shorter than the first"
                    )));
                }
                Ok(())
            }
            Policy::Constant(delay) if delay.is_zero() => {
                Err(Error::invalid("constant back-off of 0: a spin lock must sleep between attempts"))
            }
            Policy::Constant(_) => Ok(()),
        }
    }

    /// The sleeps of one wait, from the first.
    pub(crate) fn sleeps(&self) -> Sleeps {
        Sleeps { policy: self.0, next: None, fails: 0 }
    }
}

impl Default for BackOff {
    fn default() -> BackOff {
        BackOff::DEFAULT
    }
}

impl fmt::Debug for BackOff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Policy::Exponential { initial, max, multiplier } => f
                .debug_struct("Exponential")
                .field("initial", &initial)
                .field("max", &max)
                .field("multiplier", &multiplier)
                .finish(),
            Policy::Constant(delay) => f.debug_tuple("Constant").field(&delay).finish(),
        }
    }
}

/// One wait's sequence of sleeps (Redisson's `BackOffPolicy`).
#[derive(Debug)]
pub(crate) struct Sleeps {
    policy: Policy,
    /// The next sleep (`None`: the first is still to come).
    next: Option<Duration>,
    fails: u32,
}

impl Sleeps {
    /// The next sleep. `jitter(n)` draws a whole number of milliseconds in `0..n` (`n` ≥ 1).
    pub(crate) fn next(&mut self, jitter: impl FnOnce(u32) -> u32) -> Duration {
        match self.policy {
            Policy::Constant(delay) => delay,
            Policy::Exponential { initial, max, multiplier } => {
                let current = self.next.unwrap_or(initial);
                if current == max {
                    return max;
                }
                self.fails = self.fails.saturating_add(1);
                let grown = current
                    .saturating_mul(multiplier)
                    .saturating_add(Duration::from_millis(u64::from(jitter(self.fails))));
                self.next = Some(grown.min(max));
                current
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn run(backoff: BackOff, n: usize, mut jitter: impl FnMut(u32) -> u32) -> Vec<u64> {
        let mut sleeps = backoff.sleeps();
        (0..n).map(|_| sleeps.next(&mut jitter).as_millis() as u64).collect()
    }

    /// The table's exponential row, with the jitter pinned to its least and its most.
    #[test]
    fn exponential_sleeps_double_with_a_jitter_of_at_most_a_millisecond_per_attempt() {
        assert_eq!(run(BackOff::DEFAULT, 10, |_| 0), [1, 2, 4, 8, 16, 32, 64, 128, 128, 128]);
        // The most jitter: the k-th growth adds k - 1 ms.
        assert_eq!(run(BackOff::DEFAULT, 9, |n| n - 1), [1, 2, 5, 12, 27, 58, 121, 128, 128]);
        // Once at the maximum, no more jitter is drawn.
        let mut drawn = 0;
        let _ = run(BackOff::DEFAULT, 20, |n| {
            drawn += 1;
            n - 1
        });
        assert_eq!(drawn, 7, "a draw per growth, none once saturated");
        // Redisson's own edge cases: a first sleep above the maximum, and a multiplier of 1.
        assert_eq!(run(BackOff::exponential(MS * 500, MS * 100, 2), 3, |_| 0), [500, 100, 100]);
        assert_eq!(run(BackOff::exponential(MS, MS * 100, 1), 4, |n| n - 1), [1, 1, 2, 4]);
    }

    #[test]
    fn a_constant_back_off_sleeps_the_same_every_time() {
        assert_eq!(run(BackOff::constant(MS * 64), 3, |_| unreachable!("no jitter")), [64, 64, 64]);
    }

    #[test]
    fn settings_no_policy_can_follow_are_invalid_input() {
        assert!(BackOff::DEFAULT.check().is_ok());
        assert!(BackOff::constant(MS).check().is_ok());
        for bad in [
            BackOff::exponential(Duration::ZERO, MS, 2),
            BackOff::exponential(MS, Duration::ZERO, 2),
            BackOff::exponential(MS, MS, 0),
            BackOff::exponential(MS * 10, MS, 2),
            BackOff::constant(Duration::ZERO),
        ] {
            let err = bad.check().expect_err("refused");
            assert!(err.is_invalid_input(), "{bad:?}: {err}");
        }
    }
}
