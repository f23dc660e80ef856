//! The lock kinds at the bottom of the lock logic: for each kind, its scripts, key names and
//! reply decoding. Nothing here holds state or chooses a connection; the engine does.

mod dispatch;
pub(crate) mod election;
mod fair;
mod fenced;
pub(crate) mod group;
mod inspect;
mod presence;
mod protocol;
mod read_write;
mod reentrant;
mod renew;
pub(crate) mod semaphore;
mod startup;
pub(crate) mod wake;

pub(crate) use dispatch::{AcquireArgs, Kind};
pub(crate) use inspect::{inspect, is_beside_a_lock};
pub(crate) use presence::{announce, read as read_identity};
pub(crate) use protocol::{FOUND_FREE, LockKeys, Release, Reply, Role};
pub(crate) use renew::{
    Call as RenewCall, Entry as RenewEntry, GroupEntry, Outcome as RenewOutcome, PermitEntry, Renewal, renew_call,
    renew_groups_call, renew_permits_call,
};
pub(crate) use startup::prepare_server;
