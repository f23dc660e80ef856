//! The reentrant lock's scripts (Redisson's `RLock` layout: a hash of owner -> hold count,
//! released on `redisson_lock__channel:{name}`). The fenced lock releases and is forced
//! open the same way.

use crate::keys;
use crate::kind::protocol::Release;
use crate::scripts;
use crate::transport::Conn;

pub(crate) fn acquire(conn: &mut Conn, name: &str, owner: &str, lease_millis: u64) -> redis::RedisResult<Option<i64>> {
    scripts::ACQUIRE.on(conn.pubsub()).key(name).arg(lease_millis).arg(owner).invoke(conn)
}

pub(crate) fn release(conn: &mut Conn, r: &Release<'_>) -> redis::RedisResult<Option<i64>> {
    scripts::RELEASE
        .on(conn.pubsub())
        .key(r.name)
        .key(keys::unlock_latch(r.name, r.request_id))
        .arg(0)
        .arg(r.keep_millis)
        .arg(r.owner)
        .arg(r.latch_millis)
        .arg(keys::lock_channel(r.name))
        .arg(r.retry_arg())
        .invoke(conn)
}

pub(crate) fn force_unlock(conn: &mut Conn, name: &str) -> redis::RedisResult<i64> {
    scripts::FORCE_UNLOCK.on(conn.pubsub()).key(name).arg(0).arg(keys::lock_channel(name)).invoke(conn)
}
