//! [`Span`]: a lease and the clock-drift allowance taken off it, and the watchdog's schedule
//! in shares of its lease. The lease arithmetic is written here once: the settings' check,
//! the leases' state machine (`engine::lease`) and the renewal thread read it from here.
//!
//! | what | when |
//! |---|---|
//! | a hold is valid until | its request's send + lease − drift |
//! | a watchdog lease is renewed | a third of the lease after its last success's send |
//! | it is at risk | from half the lease after that send, unless renewed again |
//! | a failed renewal is tried again | a twelfth of the lease later |
//! | one renew round trip may take | a sixth of the lease (so a renewal sent at a third has failed by half) |
//! | leases due are renewed together | within a quarter of the renewal period |
//! | one step of the client's announcement may take | a 24th of the lease (its three steps delay a renewal due meanwhile by an eighth at most) |
//! | the drift allowance must be | less than the renewal period (else a lease is invalid before its renewal) |

use std::time::{Duration, Instant};

/// A lease, and the clock-drift allowance taken off it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) lease: Duration,
    pub(crate) drift: Duration,
}

impl Span {
    /// The end of a hold's validity whose request was sent at `sent` (`None`: never).
    pub(crate) fn valid_until(&self, sent: Instant) -> Option<Instant> {
        sent.checked_add(self.lease.saturating_sub(self.drift))
    }

    /// When a lease acquired or renewed by a request sent at `sent` is renewed next.
    pub(crate) fn renew_at(&self, sent: Instant) -> Instant {
        sent + self.renewal_period()
    }

    /// How long after its last success's send a lease is renewed again: a third of it.
    pub(crate) fn renewal_period(&self) -> Duration {
        self.lease / 3
    }

    /// From when a lease renewed by a request sent at `sent` is at risk unless renewed
    /// again: half of it later.
    pub(crate) fn at_risk_from(&self, sent: Instant) -> Option<Instant> {
        sent.checked_add(self.lease / 2)
    }

    /// How soon a failed renewal is tried again: a twelfth of the lease.
    pub(crate) fn retry_after(&self) -> Duration {
        self.lease / 12
    }

    /// The longest one renew round trip may take: a sixth of the lease.
    pub(crate) fn round_trip_limit(&self) -> Duration {
        self.lease / 6
    }

    /// How far ahead of its time a lease is renewed with a batch due before it: a quarter
    /// of the renewal period, so that leases taken at scattered times go in few batches.
    pub(crate) fn coalescing(&self) -> Duration {
        self.renewal_period() / 4
    }

    /// The longest one step of writing the client's announcement may take (connect, a
    /// pooled connection, the reply): a 24th of the lease, so that a renewal falling due
    /// meanwhile waits an eighth of the lease at most.
    pub(crate) fn announcement_step(&self) -> Duration {
        self.lease / 24
    }

    /// Whether the drift allowance leaves a watchdog lease valid until its renewal is due:
    /// it must be less than the renewal period.
    pub(crate) fn drift_fits(&self) -> bool {
        self.drift < self.renewal_period()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schedule's promises hold for any lease: a renewal sent when due has failed (its
    /// round trip bounded) by the time the lease turns at risk; at least three retries fit
    /// between the first renewal and the validity's end, with the drift allowance the
    /// configuration accepts (under a third of the lease); an announcement's steps and the
    /// coalescing window delay a renewal less than the margin before it is at risk.
    #[test]
    fn the_watchdog_schedule_fits_in_every_lease() {
        let sent = Instant::now();
        for ms in [30_u64, 100, 1_000, 30_000, 3_600_000] {
            let lease = Duration::from_millis(ms);
            let span = Span { lease, drift: lease / 100 + Duration::from_millis(2) };
            assert!(span.drift_fits(), "{ms} ms");
            let renewal = span.renew_at(sent);
            assert!(renewal + span.round_trip_limit() <= span.at_risk_from(sent).unwrap(), "{ms} ms");
            let valid = span.valid_until(sent).unwrap();
            assert!(renewal + span.retry_after() * 3 < valid, "{ms} ms: three retries before the end");
            assert_eq!(span.renewal_period(), lease / 3);
            assert!(renewal + span.announcement_step() * 3 < span.at_risk_from(sent).unwrap(), "{ms} ms");
            assert!(span.coalescing() < span.renewal_period(), "{ms} ms: a batch is never a period early");
        }
    }

    /// A hold is valid until its send plus the lease less the allowance; an allowance as
    /// long as the lease leaves nothing, and an end beyond the clock is never.
    #[test]
    fn validity_is_the_lease_less_the_drift_from_the_send() {
        let sent = Instant::now();
        let span = Span { lease: Duration::from_secs(3), drift: Duration::from_millis(32) };
        assert_eq!(span.valid_until(sent), Some(sent + Duration::from_millis(2968)));
        assert_eq!(span.at_risk_from(sent), Some(sent + Duration::from_millis(1500)));
        assert_eq!(span.renew_at(sent), sent + Duration::from_secs(1));
        assert_eq!(span.retry_after(), Duration::from_millis(250));
        let all_drift = Span { lease: Duration::from_secs(1), drift: Duration::from_secs(2) };
        assert_eq!(all_drift.valid_until(sent), Some(sent), "saturates at the send");
        assert!(!all_drift.drift_fits());
        assert!(
            !Span { lease: Duration::from_secs(3), drift: Duration::from_secs(1) }.drift_fits(),
            "a third is too much"
        );
        assert_eq!(Span { lease: Duration::MAX, drift: Duration::ZERO }.valid_until(sent), None, "never");
    }
}
