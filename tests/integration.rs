//! The one integration test binary: every module below talks to real `redis-server`
//! processes that the tests start themselves (see `support`).

mod acl;
mod architecture;
mod bad_input;
mod cluster;
mod connection;
mod deadline;
mod documents;
mod durability;
mod election;
mod exclusion;
mod failover_storm;
mod fair;
mod fault_classes;
mod fenced;
mod group;
mod handoff;
mod hazards;
mod helpers;
mod inspect;
mod lock_basics;
// The metrics of the `metrics` feature, read back from a recorder of the test's own.
#[cfg(feature = "metrics")]
mod metrics_export;
mod multi;
mod nemesis;
mod no_grant_windows;
mod non_reentrant;
mod partitions;
mod redlock;
mod replication;
mod rwlock;
mod semaphores;
mod sendable;
mod sentinel;
mod spin;
mod stats;
mod stop_in_time;
mod support;
mod support_selftest;
mod tls;
// The spans and events of the `tracing` feature, captured by a subscriber of its own.
#[cfg(feature = "tracing")]
mod tracing_events;
mod watchdog;
mod window;

/// Roles that a child worker process can play, by name (see `support::child`).
const ROLES: &[&[support::child::Role]] = &[
    support_selftest::ROLES,
    watchdog::ROLES,
    handoff::ROLES,
    exclusion::ROLES,
    fair::ROLES,
    rwlock::ROLES,
    fenced::ROLES,
    nemesis::ROLES,
    hazards::ROLES,
    semaphores::ROLES,
    cluster::ROLES,
    failover_storm::ROLES,
    inspect::ROLES,
    election::ROLES,
];

/// Entry point of child worker processes: the test binary re-invokes itself with
/// `child_process_entry --exact` and a role in the environment. In the test run itself
/// (no role set) it is a test of the role table: each role is named once.
#[test]
fn child_process_entry() {
    support::child::dispatch(ROLES);
}
