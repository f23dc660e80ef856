//! Metrics through the `metrics` facade, the crate Prometheus, OpenTelemetry and StatsD
//! exporters plug into (feature `metrics`; [`guide::design`](crate::guide::design#metrics),
//! "Metrics"). Names and units
//! follow OpenTelemetry's conventions: dotted names, durations in seconds. Without the
//! feature every function here is empty, and nothing of the facade is compiled in.
//!
//! A lock's name is a label only where the user maps it to one
//! ([`ClientBuilder::metrics_lock_label`](crate::ClientBuilder::metrics_lock_label)): names
//! are unbounded, and every label value makes a series of its own.

// Without the feature every function's arguments go unused.
#![cfg_attr(not(feature = "metrics"), allow(unused_variables))]

use std::time::Duration;

use crate::observe::activity::Outcome;

/// An acquisition ended: `redlease.lock.acquisitions` (by kind and outcome) and
/// `redlease.lock.wait.duration` (the call's time, by kind and outcome).
pub(crate) fn acquisition(kind: &'static str, lock: Option<String>, outcome: Outcome, took: Duration) {
    #[cfg(feature = "metrics")]
    {
        let labels = labels(&[("kind", kind), ("outcome", outcome.code())], lock);
        metrics::counter!("redlease.lock.acquisitions", labels.clone()).increment(1);
        metrics::histogram!("redlease.lock.wait.duration", labels).record(took.as_secs_f64());
    }
}

/// A guard let go of its hold after `held`: `redlease.lock.hold.duration` (by kind).
pub(crate) fn held(kind: &'static str, lock: Option<String>, held: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!("redlease.lock.hold.duration", labels(&[("kind", kind)], lock)).record(held.as_secs_f64());
}

/// A lease's renewals began to fail: `redlease.lease.at_risk` (by kind).
pub(crate) fn lease_at_risk(kind: &'static str, lock: Option<String>) {
    #[cfg(feature = "metrics")]
    metrics::counter!("redlease.lease.at_risk", labels(&[("kind", kind)], lock)).increment(1);
}

/// A held lease was lost: `redlease.lease.lost` (by kind).
pub(crate) fn lease_lost(kind: &'static str, lock: Option<String>) {
    #[cfg(feature = "metrics")]
    metrics::counter!("redlease.lease.lost", labels(&[("kind", kind)], lock)).increment(1);
}

/// A renewal round trip failed: `redlease.renewal.failures`.
pub(crate) fn renewal_failed() {
    #[cfg(feature = "metrics")]
    metrics::counter!("redlease.renewal.failures").increment(1);
}

/// A release could not be sent or was refused: `redlease.lock.release.failures`.
pub(crate) fn release_failed(lock: Option<String>) {
    #[cfg(feature = "metrics")]
    metrics::counter!("redlease.lock.release.failures", labels(&[], lock)).increment(1);
}

/// A renewal pass took `took`: `redlease.renewal.duration`.
pub(crate) fn renewal_pass(took: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!("redlease.renewal.duration").record(took.as_secs_f64());
}

/// A wait was answered again after an outage that began `took` before:
/// `redlease.failover.no_grant.duration`.
pub(crate) fn no_grant(lock: Option<String>, took: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!("redlease.failover.no_grant.duration", labels(&[], lock)).record(took.as_secs_f64());
}

/// A thread began (`true`) or ended (`false`) a wait for a message: `redlease.waiters`.
pub(crate) fn waiter(joined: bool) {
    #[cfg(feature = "metrics")]
    {
        let gauge = metrics::gauge!("redlease.waiters");
        if joined { gauge.increment(1.0) } else { gauge.decrement(1.0) }
    }
}

/// `fixed` labels, and `lock` when the user's mapping gave the lock one.
#[cfg(feature = "metrics")]
fn labels(fixed: &[(&'static str, &'static str)], lock: Option<String>) -> Vec<metrics::Label> {
    let mut labels: Vec<metrics::Label> = fixed.iter().map(|&(k, v)| metrics::Label::from_static_parts(k, v)).collect();
    if let Some(lock) = lock {
        labels.push(metrics::Label::new("lock", lock));
    }
    labels
}
