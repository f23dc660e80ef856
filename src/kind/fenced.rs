//! The fenced lock's acquire script: the reentrant lock plus a token counter
//! `redisson_lock_token:{name}` (no TTL) taken on every grant. It releases as the
//! reentrant lock does.

use crate::base::keys;
use crate::base::scripts;
use crate::kind::protocol::Reply;
use crate::kind::protocol::Role;
use crate::kind::reentrant;
use crate::kind::spec::Spec;
use crate::kind::wake;
use crate::transport::Conn;

/// The key of the lock's token counter.
pub(crate) fn token_key(name: &str) -> String {
    keys::prefixed("redisson_lock_token", name)
}

pub(crate) fn acquire(
    conn: &mut Conn,
    name: &str,
    owner: &str,
    lease_millis: u64,
    token: Option<u64>,
) -> redis::RedisResult<Reply> {
    let (granted, value): (i64, i64) = scripts::FENCED_ACQUIRE
        .on(conn.pubsub())
        .key(name)
        .key(token_key(name))
        .key(reentrant::waiters_key(name))
        .arg(lease_millis)
        .arg(owner)
        .arg(reentrant::token_arg(token))
        .arg(reentrant::registration_millis())
        .invoke(conn)?;
    Ok(Reply::from_table(granted, value))
}

/// The fenced lock, Redisson's `RFencedLock`: the plain lock, and a token with every grant.
pub(crate) static FENCED: Spec = Spec {
    label: "fenced",
    reentrant: true,
    keeps: true,
    role: Role::Exclusive,
    shares_lock_keys: true,
    polls: false,
    meaning: &wake::NAMED_RELEASE,
    attempt: |conn, name, owner, args, _| acquire(conn, name, owner, args.lease_millis, args.token()),
    release: reentrant::release_telling_waiters,
    force_unlock: reentrant::force_unlock_telling_waiters,
    wait_channel: reentrant::lock_channel,
    give_up: Some(reentrant::leave_waiting),
};
