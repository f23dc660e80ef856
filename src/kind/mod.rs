//! The lock kinds at the bottom of the lock logic: for each kind, its scripts, key names and
//! reply decoding, and its [`Spec`](spec::Spec), declared in the kind's own module. Nothing
//! here holds state or chooses a connection; the engine does.

mod dispatch;
pub(crate) mod election;
mod fair;
mod fenced;
pub(crate) mod group;
mod inspect;
mod non_reentrant;
mod presence;
mod protocol;
mod read_write;
mod reentrant;
mod renew;
pub(crate) mod semaphore;
mod spec;
mod spin;
mod startup;
pub(crate) mod wake;

pub(crate) use inspect::{inspect, is_beside_a_lock};
pub(crate) use presence::{announce, read as read_identity};
pub(crate) use protocol::{FOUND_FREE, LockKeys, Release, Reply, Role};
pub(crate) use renew::{
    Call as RenewCall, Entry as RenewEntry, GroupEntry, Outcome as RenewOutcome, PermitEntry, Renewal, renew_call,
    renew_groups_call, renew_permits_call,
};
pub(crate) use spec::{AcquireArgs, GiveUp};
pub(crate) use startup::prepare_server;

/// The lock kinds. They share Redisson's lock hash and differ in how they queue, wake and
/// release; what each is, is its [`Spec`](spec::Spec).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Reentrant,
    Fair,
    /// Redisson's `RNonReentrantLock`: the reentrant lock's layout, one hold per owner.
    NonReentrant,
    /// Redisson's `RNonReentrantFairLock`: the fair lock's layout, one hold per owner.
    NonReentrantFair,
    /// Redisson's `RSpinLock`: the reentrant lock's layout, no messages at all; its waiters
    /// poll.
    Spin,
    /// The read side of a read-write lock.
    Read,
    /// The write side of a read-write lock.
    Write,
    /// A reentrant lock whose every grant carries a fencing token.
    Fenced,
    /// An election: one leader at a time, each with the next term and a value it
    /// advertises (redlease's own layout; see `kind::election`). Waits, renews and releases
    /// as a plain lock, and tells its observers of every change.
    Election,
}

impl Kind {
    /// Every kind, in the order of the enum.
    #[cfg(test)]
    pub(crate) const ALL: [Kind; 9] = [
        Kind::Reentrant,
        Kind::Fair,
        Kind::NonReentrant,
        Kind::NonReentrantFair,
        Kind::Spin,
        Kind::Read,
        Kind::Write,
        Kind::Fenced,
        Kind::Election,
    ];

    /// What the kind is: the one match on a kind (the architecture test holds every other
    /// decision to reading the spec).
    pub(crate) fn spec(self) -> &'static spec::Spec {
        match self {
            Kind::Reentrant => &reentrant::REENTRANT,
            Kind::Fair => &fair::FAIR,
            Kind::NonReentrant => &non_reentrant::NON_REENTRANT,
            Kind::NonReentrantFair => &non_reentrant::NON_REENTRANT_FAIR,
            Kind::Spin => &spin::SPIN,
            Kind::Read => &read_write::READ,
            Kind::Write => &read_write::WRITE,
            Kind::Fenced => &fenced::FENCED,
            Kind::Election => &election::ELECTION,
        }
    }
}
