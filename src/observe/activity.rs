//! What a client's calls and leases did, counted for [`ClientStats`](crate::ClientStats):
//! acquisitions by outcome, the time waited and held, losses, failed renewals and releases,
//! wake-ups received and wasted. Atomic counters and lock-free histograms: counting costs
//! an uncontended atomic add or two per event, and no call waits for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::observe::histogram::{DurationHistogram, Histogram};

/// How an acquisition (of a lock, of permits, of a group's values) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Granted by the first attempt.
    AtOnce,
    /// Granted after waiting, for this long.
    AfterWaiting(Duration),
    /// One attempt (`try_lock`), and someone else held it.
    Busy,
    /// Not had by the caller's deadline.
    TimedOut,
    /// Ended by an interrupt.
    Interrupted,
    /// An error once the request had gone out (bad input is refused before and not counted).
    Failed,
}

impl Outcome {
    /// The outcome in words, as the acquire span records it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Outcome::AtOnce => "at once",
            Outcome::AfterWaiting(_) => "after waiting",
            Outcome::Busy => "busy",
            Outcome::TimedOut => "timed out",
            Outcome::Interrupted => "interrupted",
            Outcome::Failed => "failed",
        }
    }

    /// The outcome as the `outcome` attribute of the acquisition metrics (OpenTelemetry's
    /// snake case).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn code(self) -> &'static str {
        match self {
            Outcome::AtOnce => "at_once",
            Outcome::AfterWaiting(_) => "after_waiting",
            Outcome::Busy => "busy",
            Outcome::TimedOut => "timed_out",
            Outcome::Interrupted => "interrupted",
            Outcome::Failed => "failed",
        }
    }
}

#[derive(Default)]
pub(crate) struct Activity {
    at_once: AtomicU64,
    after_waiting: AtomicU64,
    busy: AtomicU64,
    timed_out: AtomicU64,
    interrupted: AtomicU64,
    failed: AtomicU64,
    leases_lost: AtomicU64,
    renewals_failed: AtomicU64,
    releases_failed: AtomicU64,
    wake_ups: AtomicU64,
    wasted_wake_ups: AtomicU64,
    retries: AtomicU64,
    waits_through_outage: AtomicU64,
    wait_time: Histogram,
    hold_time: Histogram,
    /// Acquisitions under way plus holds granted and not yet let go: while it is above
    /// zero the client holds or waits for something, and keeps its announcement alive.
    active: AtomicU64,
}

/// A snapshot of [`Activity`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ActivityStats {
    pub(crate) at_once: u64,
    pub(crate) after_waiting: u64,
    pub(crate) busy: u64,
    pub(crate) timed_out: u64,
    pub(crate) interrupted: u64,
    pub(crate) failed: u64,
    pub(crate) leases_lost: u64,
    pub(crate) renewals_failed: u64,
    pub(crate) releases_failed: u64,
    pub(crate) wake_ups: u64,
    pub(crate) wasted_wake_ups: u64,
    pub(crate) retries: u64,
    pub(crate) waits_through_outage: u64,
    pub(crate) wait_time: DurationHistogram,
    pub(crate) hold_time: DurationHistogram,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// One count of what keeps the client active (an acquisition under way, a hold not let go
/// yet), given back when dropped: the count can only drift if a token is forgotten.
pub(crate) struct Active(Arc<Activity>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Activity {
    /// A token that counts the client active while it lives.
    pub(crate) fn enter(self: &Arc<Activity>) -> Active {
        // SeqCst, with the renewal thread's `announcing` flag: see `Renewer::announce_soon`.
        self.active.fetch_add(1, Ordering::SeqCst);
        Active(Arc::clone(self))
    }

    /// Whether an acquisition is under way or a hold is not let go yet.
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::SeqCst) > 0
    }

    pub(crate) fn acquisition(&self, outcome: Outcome) {
        match outcome {
            Outcome::AtOnce => bump(&self.at_once),
            Outcome::AfterWaiting(waited) => {
                bump(&self.after_waiting);
                self.wait_time.record(waited);
            }
            Outcome::Busy => bump(&self.busy),
            Outcome::TimedOut => bump(&self.timed_out),
            Outcome::Interrupted => bump(&self.interrupted),
            Outcome::Failed => bump(&self.failed),
        }
    }

    /// A guard let go of what it held for `held`.
    pub(crate) fn held(&self, held: Duration) {
        self.hold_time.record(held);
    }

    pub(crate) fn lease_lost(&self) {
        bump(&self.leases_lost);
    }

    pub(crate) fn renewal_failed(&self) {
        bump(&self.renewals_failed);
    }

    pub(crate) fn release_failed(&self) {
        bump(&self.releases_failed);
    }

    /// A call tried again after a failure that passes by itself.
    pub(crate) fn retried(&self) {
        bump(&self.retries);
    }

    /// A wait kept trying past the retry budget.
    pub(crate) fn waiting_through_outage(&self) {
        bump(&self.waits_through_outage);
    }

    /// A waiter was woken by a message; `wasted` when its next attempt found the lock (or
    /// the permits, or the values) taken again.
    pub(crate) fn woken(&self, wasted: bool) {
        bump(&self.wake_ups);
        if wasted {
            bump(&self.wasted_wake_ups);
        }
    }

    pub(crate) fn snapshot(&self) -> ActivityStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ActivityStats {
            at_once: get(&self.at_once),
            after_waiting: get(&self.after_waiting),
            busy: get(&self.busy),
            timed_out: get(&self.timed_out),
            interrupted: get(&self.interrupted),
            failed: get(&self.failed),
            leases_lost: get(&self.leases_lost),
            renewals_failed: get(&self.renewals_failed),
            releases_failed: get(&self.releases_failed),
            wake_ups: get(&self.wake_ups),
            wasted_wake_ups: get(&self.wasted_wake_ups),
            retries: get(&self.retries),
            waits_through_outage: get(&self.waits_through_outage),
            wait_time: self.wait_time.snapshot(),
            hold_time: self.hold_time.snapshot(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every outcome has an attribute value of its own, in OpenTelemetry's snake case.
    #[test]
    fn every_outcome_has_its_own_snake_case_code() {
        let all = [
            Outcome::AtOnce,
            Outcome::AfterWaiting(Duration::ZERO),
            Outcome::Busy,
            Outcome::TimedOut,
            Outcome::Interrupted,
            Outcome::Failed,
        ];
        let codes: Vec<&str> = all.iter().map(|&o| o.code()).collect();
        let mut distinct = codes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), all.len(), "{codes:?}");
        assert!(codes.iter().all(|c| c.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_')), "{codes:?}");
    }

    #[test]
    fn each_outcome_counts_where_it_belongs() {
        let a = Activity::default();
        for outcome in [
            Outcome::AtOnce,
            Outcome::AtOnce,
            Outcome::AfterWaiting(Duration::from_millis(3)),
            Outcome::Busy,
            Outcome::TimedOut,
            Outcome::Interrupted,
            Outcome::Failed,
        ] {
            a.acquisition(outcome);
        }
        a.held(Duration::from_millis(5));
        a.woken(false);
        a.woken(true);
        a.lease_lost();
        let s = a.snapshot();
        assert_eq!((s.at_once, s.after_waiting, s.busy, s.timed_out, s.interrupted, s.failed), (2, 1, 1, 1, 1, 1));
        assert_eq!((s.wait_time.count(), s.hold_time.count()), (1, 1));
        assert_eq!(s.wait_time.sum(), Duration::from_millis(3));
        assert_eq!((s.wake_ups, s.wasted_wake_ups, s.leases_lost), (2, 1, 1));
        assert_eq!((s.renewals_failed, s.releases_failed), (0, 0));
    }

    #[test]
    fn active_while_a_token_lives() {
        let a = Arc::new(Activity::default());
        assert!(!a.is_active());
        let acquiring = a.enter();
        let holding = a.enter();
        assert!(a.is_active());
        drop(acquiring);
        assert!(a.is_active(), "the hold still counts");
        drop(holding);
        assert!(!a.is_active());
    }
}
