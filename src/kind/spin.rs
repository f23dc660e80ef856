//! Redisson's `RSpinLock`: the plain lock's layout without messages. Its waiters poll
//! with a backoff; they listen on no channel and never register their client, and a
//! release publishes nothing.

use crate::kind::protocol::{Reply, Role};
use crate::kind::spec::Spec;
use crate::kind::{reentrant, wake};

/// The spin lock.
pub(crate) static SPIN: Spec = Spec {
    label: "spin",
    reentrant: true,
    keeps: true,
    role: Role::Exclusive,
    shares_lock_keys: true,
    polls: true,
    meaning: &wake::RELEASE,
    // A spin waiter listens on no channel: it never registers its client.
    attempt: |conn, name, owner, args, joins| {
        reentrant::acquire(conn, name, owner, args.lease_millis, None, joins, args.lock_keys)
            .and_then(Reply::from_grant_or_pttl)
    },
    release: |conn, r| reentrant::release(conn, r, false, None),
    force_unlock: |conn, name, _| reentrant::force_unlock(conn, name, false),
    wait_channel: reentrant::lock_channel,
    give_up: None,
};
