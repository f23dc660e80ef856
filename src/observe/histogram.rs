//! Durations counted in logarithmic buckets without locks: [`Histogram`] records from any
//! thread, [`DurationHistogram`] is a snapshot of it (what [`ClientStats`](crate::ClientStats)
//! shows). Pure data: no I/O, no threads.
//!
//! Bucket 0 counts durations under 1 µs; bucket i (1 ≤ i < 31) those from 2^(i−1) µs up to
//! 2^i µs; bucket 31 everything from 2^30 µs (about 18 minutes) on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How many buckets a histogram has.
pub(crate) const BUCKETS: usize = 32;

/// The bucket a duration of `micros` µs falls in.
fn bucket_of(micros: u64) -> usize {
    // 0 → 0, 1 → 1, 2..=3 → 2, 4..=7 → 3, ...
    let bits = (u64::BITS - micros.leading_zeros()) as usize;
    bits.min(BUCKETS - 1)
}

/// The upper bound of bucket `i` (`Duration::MAX` for the last one).
fn upper_bound(i: usize) -> Duration {
    if i + 1 >= BUCKETS { Duration::MAX } else { Duration::from_micros(1 << i) }
}

/// Counts durations from any thread, without locks.
#[derive(Default)]
pub(crate) struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    sum_micros: AtomicU64,
}

impl Histogram {
    pub(crate) fn record(&self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(micros)].fetch_add(1, Ordering::Relaxed);
        // Saturating: a sum that wrapped would lie.
        let _ =
            self.sum_micros.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |sum| Some(sum.saturating_add(micros)));
    }

    /// What it has counted so far (each bucket read on its own: a snapshot taken while
    /// others record may be a count or two apart from its sum).
    pub(crate) fn snapshot(&self) -> DurationHistogram {
        DurationHistogram {
            counts: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
            sum: Duration::from_micros(self.sum_micros.load(Ordering::Relaxed)),
        }
    }
}

/// A snapshot of durations counted in logarithmic buckets (powers of two of a
/// microsecond): how many, their sum, and quantiles to within a factor of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DurationHistogram {
    counts: [u64; BUCKETS],
    sum: Duration,
}

impl DurationHistogram {
    /// How many durations were counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Their sum (to the microsecond).
    pub fn sum(&self) -> Duration {
        self.sum
    }

    /// Their mean; zero when none was counted.
    pub fn mean(&self) -> Duration {
        match self.count() {
            0 => Duration::ZERO,
            n => self.sum / u32::try_from(n).unwrap_or(u32::MAX),
        }
    }

    /// An upper bound of the `q` quantile (`q` from 0 to 1, clamped): the upper end of the
    /// bucket it falls in, so at most twice the true value. `None` when none was counted.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        // The rank of the quantile, from 1 to total.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        self.counts.iter().enumerate().find_map(|(i, &n)| {
            seen += n;
            (seen >= rank).then(|| upper_bound(i))
        })
    }

    /// Counts one more duration: for a histogram kept by one thread (the renewal thread's
    /// pass times), where [`Histogram`]'s atomics would buy nothing.
    pub(crate) fn add(&mut self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.counts[bucket_of(micros)] += 1;
        // Saturating at u64::MAX µs, as `Histogram`'s sum.
        let sum = u64::try_from(self.sum.as_micros()).unwrap_or(u64::MAX);
        self.sum = Duration::from_micros(sum.saturating_add(micros));
    }

    /// The buckets: each one's upper bound (exclusive; `Duration::MAX` for the last) and
    /// how many durations fell in it.
    pub fn buckets(&self) -> impl Iterator<Item = (Duration, u64)> + '_ {
        self.counts.iter().enumerate().map(|(i, &n)| (upper_bound(i), n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_of_a_microsecond() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 1);
        assert_eq!((bucket_of(2), bucket_of(3)), (2, 2));
        assert_eq!((bucket_of(1023), bucket_of(1024)), (10, 11));
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(upper_bound(0), Duration::from_micros(1));
        assert_eq!(upper_bound(10), Duration::from_micros(1024));
        assert_eq!(upper_bound(BUCKETS - 1), Duration::MAX);
        // Every duration is under its bucket's upper bound and at least the one before's.
        for micros in [0, 1, 2, 3, 7, 8, 1000, 1 << 29, (1 << 30) - 1] {
            let i = bucket_of(micros);
            assert!(Duration::from_micros(micros) < upper_bound(i), "{micros}");
            assert!(i == 0 || Duration::from_micros(micros) >= upper_bound(i - 1), "{micros}");
        }
    }

    #[test]
    fn a_snapshot_counted_into_by_one_thread_agrees_with_the_shared_histogram() {
        let (shared, mut own) = (Histogram::default(), DurationHistogram::default());
        for took in [Duration::ZERO, Duration::from_micros(3), Duration::from_millis(5), Duration::MAX] {
            shared.record(took);
            own.add(took);
        }
        assert_eq!(own, shared.snapshot());
        assert_eq!(own.count(), 4);
    }

    #[test]
    fn quantiles_count_mean_and_sum() {
        let h = Histogram::default();
        assert_eq!(h.snapshot().quantile(0.5), None);
        assert_eq!(h.snapshot().mean(), Duration::ZERO);
        for ms in [1, 2, 3, 100] {
            h.record(Duration::from_millis(ms));
        }
        h.record(Duration::MAX);
        let s = h.snapshot();
        assert_eq!(s.count(), 5);
        assert_eq!(s.quantile(0.0), Some(Duration::from_micros(1024)), "1 ms is under 1024 µs");
        assert_eq!(s.quantile(0.4), Some(Duration::from_micros(2048)));
        assert_eq!(s.quantile(0.8), Some(Duration::from_micros(131_072)), "100 ms");
        assert_eq!(s.quantile(1.0), Some(Duration::MAX));
        assert_eq!(s.buckets().map(|(_, n)| n).sum::<u64>(), 5);
        let small = Histogram::default();
        small.record(Duration::from_millis(10));
        small.record(Duration::from_millis(30));
        assert_eq!(small.snapshot().mean(), Duration::from_millis(20));
        assert_eq!(small.snapshot().sum(), Duration::from_millis(40));
    }

    #[test]
    fn threads_record_without_losing_counts() {
        let h = Histogram::default();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let h = &h;
                s.spawn(move || {
                    for i in 0..10_000u64 {
                        h.record(Duration::from_micros((i * (t + 1)) % 5000));
                    }
                });
            }
        });
        assert_eq!(h.snapshot().count(), 40_000);
    }
}
