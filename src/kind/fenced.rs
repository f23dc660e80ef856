//! The fenced lock's acquire script: the reentrant lock plus a token counter
//! `redisson_lock_token:{name}` (no TTL) taken on every grant. It releases as the
//! reentrant lock does.

use crate::keys;
use crate::kind::protocol::Reply;
use crate::kind::reentrant;
use crate::scripts;
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
