//! Redisson's non-reentrant locks: the plain lock's layout and the fair lock's, one hold
//! per owner (a second acquire by the same owner is refused as a reentry).

use crate::kind::protocol::Role;
use crate::kind::spec::Spec;
use crate::kind::{fair, reentrant, wake};

/// Redisson's `RNonReentrantLock`.
pub(crate) static NON_REENTRANT: Spec = Spec {
    label: "non-reentrant",
    reentrant: false,
    keeps: true,
    role: Role::Exclusive,
    shares_lock_keys: true,
    polls: false,
    meaning: &wake::NAMED_RELEASE,
    attempt: reentrant::attempt,
    release: reentrant::release_telling_waiters,
    force_unlock: reentrant::force_unlock_telling_waiters,
    wait_channel: reentrant::lock_channel,
    give_up: Some(reentrant::leave_waiting),
};

/// Redisson's `RNonReentrantFairLock`.
pub(crate) static NON_REENTRANT_FAIR: Spec = Spec {
    label: "non-reentrant fair",
    reentrant: false,
    keeps: false,
    role: Role::Exclusive,
    shares_lock_keys: false,
    polls: false,
    meaning: &wake::TURN,
    attempt: fair::attempt,
    release: fair::release,
    force_unlock: fair::force_unlock,
    wait_channel: fair::waiter_channel,
    give_up: Some(fair::leave_queue),
};
