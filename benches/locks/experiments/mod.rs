//! The experiments, one module each in the order of the report (each with its section of
//! the report beside its measurement), and the lock kinds they use.

pub(crate) mod contenders;
pub(crate) mod contention_curve;
pub(crate) mod durable;
pub(crate) mod election;
pub(crate) mod group;
pub(crate) mod handoff;
pub(crate) mod herd;
pub(crate) mod lease_curve;
pub(crate) mod limit;
pub(crate) mod masters_curve;
pub(crate) mod metrics_cost;
pub(crate) mod peers;
pub(crate) mod permit_renewal;
pub(crate) mod redlock;
pub(crate) mod renewal;
pub(crate) mod replicated;
pub(crate) mod semaphores;
pub(crate) mod throughput;
pub(crate) mod tls;
pub(crate) mod uncontended;
pub(crate) mod waiter_curve;
pub(crate) mod writer;

use redlease::{AnyLock, Client};

/// The lock kind a child process or a measurement uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockKind {
    Plain,
    Fair,
    /// The read side of a read-write lock.
    Read,
}

impl LockKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LockKind::Plain => "plain",
            LockKind::Fair => "fair",
            LockKind::Read => "read",
        }
    }

    pub(crate) fn parse(kind: &str) -> LockKind {
        match kind {
            "plain" => LockKind::Plain,
            "fair" => LockKind::Fair,
            "read" => LockKind::Read,
            other => panic!("unknown lock kind {other:?}"),
        }
    }

    /// The handle of this kind named `name` (watchdog lease).
    pub(crate) fn handle(self, client: &Client, name: String) -> AnyLock {
        match self {
            LockKind::Plain => client.lock(name).into(),
            LockKind::Fair => client.fair_lock(name).into(),
            LockKind::Read => client.read_write_lock(name).read().into(),
        }
    }
}
