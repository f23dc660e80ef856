//! The engine of a client: the registry of the leases its threads hold, and the flows that
//! change them (acquire, release and undo, renewal), talking to the lock kinds through
//! [`Kind`](crate::kind::Kind) and to Redis through the transport's
//! [`Topology`](crate::transport::Topology).

mod acquire;
mod core;
mod grant;
mod group;
mod inspect;
mod lease;
mod permits;
mod registry;
mod release;
mod renewal;
mod replicas;
mod retry;
mod undos;

pub(crate) use acquire::{Attempt, Request, Wait, acquire, attempt_within, prepare, ready, wait_loop, wait_within};
pub(crate) use core::Engine;
pub use group::MAX_GROUP_VALUES;
pub(crate) use group::{
    GroupHold, Values as GroupValues, acquire as acquire_group, force_unlock as force_unlock_group,
    held as held_in_group,
};
pub(crate) use inspect::{inspect, locks};
pub(crate) use lease::Lease;
pub use lease::LeaseState;
pub(crate) use permits::{
    PermitHold, acquire as acquire_semaphore, acquire_expirable, add as add_permits, available as available_permits,
    await_latch, check_permits, release_if_exists, try_set as try_set_permits,
};
pub(crate) use release::{Hold, PendingRelease, send_undo};
pub(crate) use retry::with_retries;
