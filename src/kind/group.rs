//! The group lock's scripts, in Redisson's `RedissonFasterMultiLock` layout: one hash per
//! group; per value a field (a hash of the value, 22 characters) naming its holder, and
//! the holder's `expire_time` and `lock_count` beside it; releases publish `0` on the lock
//! channel of the group's name. The fields of one acquisition travel concatenated.

use crate::base::keys;
use crate::base::scripts;
use crate::kind::protocol::Reply;
use crate::transport::Conn;

/// What a release found, value by value (see `lua/group_release.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Released {
    /// Held by the owner, live, and released.
    pub(crate) released: u64,
    /// Still the owner's in Redis but past the end of its lease (released too).
    pub(crate) late: u64,
    /// Nobody's.
    pub(crate) free: u64,
    /// Another owner's.
    pub(crate) taken: u64,
}

/// One attempt to take every value of `fields` for `owner`.
pub(crate) fn acquire(
    conn: &mut Conn,
    group: &str,
    owner: &str,
    fields: &str,
    lease_millis: u64,
) -> redis::RedisResult<Reply> {
    // Each attempt has an owner of its own: its grant is never a reentry.
    let reply =
        scripts::GROUP_ACQUIRE.on(conn.pubsub()).key(group).arg(lease_millis).arg(owner).arg(fields).invoke(conn)?;
    Reply::from_grant_or_pttl(reply)
}

/// Releases `owner`'s values of `fields` and wakes the group's waiters.
pub(crate) fn release(conn: &mut Conn, group: &str, owner: &str, fields: &str) -> redis::RedisResult<Released> {
    let [released, late, free, taken]: [u64; 4] = scripts::GROUP_RELEASE
        .on(conn.pubsub())
        .key(group)
        .arg(keys::lock_channel(group))
        .arg(owner)
        .arg(fields)
        .invoke(conn)?;
    Ok(Released { released, late, free, taken })
}

/// Releases the values of `fields` whoever holds them; how many were held.
pub(crate) fn force_unlock(conn: &mut Conn, group: &str, fields: &str) -> redis::RedisResult<u64> {
    scripts::GROUP_FORCE_UNLOCK.on(conn.pubsub()).key(group).arg(keys::lock_channel(group)).arg(fields).invoke(conn)
}

/// How many values of `fields` someone holds now.
pub(crate) fn held(conn: &mut Conn, group: &str, fields: &str) -> redis::RedisResult<u64> {
    scripts::GROUP_HELD.on(conn.pubsub()).key(group).arg(fields).invoke(conn)
}
