//! The fair lock's scripts (Redisson's `RFairLock` layout: the lock hash, the queue list
//! `redisson_lock_queue:{name}`, the deadlines `redisson_lock_timeout:{name}`, and one
//! channel per waiter, `redisson_lock__channel:{name}:<owner>`).

use crate::base::keys;
use crate::base::scripts;
use crate::kind::protocol::Release;
use crate::kind::protocol::{Reply, Role};
use crate::kind::spec::{AcquireArgs, GiveUp, Spec};
use crate::kind::wake;
use crate::transport::Conn;

pub(crate) fn queue_key(name: &str) -> String {
    keys::prefixed("redisson_lock_queue", name)
}

pub(crate) fn timeouts_key(name: &str) -> String {
    keys::prefixed("redisson_lock_timeout", name)
}

/// The channel on which a release tells `owner` that its turn has come.
pub(crate) fn waiter_channel(name: &str, owner: &str) -> String {
    format!("{}:{owner}", keys::lock_channel(name))
}

pub(crate) fn acquire(
    conn: &mut Conn,
    name: &str,
    owner: &str,
    lease_millis: u64,
    wait_millis: u64,
    queue: bool,
    reentrant: bool,
) -> redis::RedisResult<redis::Value> {
    scripts::FAIR_ACQUIRE
        .on(conn.pubsub())
        .key(name)
        .key(queue_key(name))
        .key(timeouts_key(name))
        .arg(lease_millis)
        .arg(owner)
        .arg(wait_millis)
        .arg(if queue { "1" } else { "0" })
        .arg(keys::lock_channel(name))
        .arg(if reentrant { "1" } else { "0" })
        .invoke(conn)
}

pub(crate) fn give_up(conn: &mut Conn, name: &str, owner: &str, wait_millis: u64) -> redis::RedisResult<i64> {
    scripts::FAIR_GIVE_UP
        .on(conn.pubsub())
        .key(name)
        .key(queue_key(name))
        .key(timeouts_key(name))
        .arg(owner)
        .arg(wait_millis)
        .arg(keys::lock_channel(name))
        .invoke(conn)
}

pub(crate) fn release(conn: &mut Conn, r: &Release<'_>) -> redis::RedisResult<Option<i64>> {
    scripts::FAIR_RELEASE
        .on(conn.pubsub())
        .key(r.name)
        .key(queue_key(r.name))
        .key(timeouts_key(r.name))
        .key(keys::unlock_latch(r.name, r.request_id))
        .arg(0)
        .arg(r.keep_millis)
        .arg(r.owner)
        .arg(r.latch_millis)
        .arg(r.wait_millis)
        .arg(keys::lock_channel(r.name))
        .arg(r.retry_arg())
        .invoke(conn)
}

pub(crate) fn force_unlock(conn: &mut Conn, name: &str, wait_millis: u64) -> redis::RedisResult<i64> {
    scripts::FAIR_FORCE_UNLOCK
        .on(conn.pubsub())
        .key(name)
        .key(queue_key(name))
        .key(timeouts_key(name))
        .arg(0)
        .arg(wait_millis)
        .arg(keys::lock_channel(name))
        .invoke(conn)
}

/// The fair lock, Redisson's `RFairLock`.
pub(crate) static FAIR: Spec = Spec {
    label: "fair",
    reentrant: true,
    keeps: false,
    role: Role::Exclusive,
    shares_lock_keys: false,
    polls: false,
    meaning: &wake::TURN,
    attempt,
    release,
    force_unlock,
    wait_channel: waiter_channel,
    give_up: Some(leave_queue),
};

/// An acquire of a lock of the fair layout, which may join the owner's hold (`joins`).
pub(crate) fn attempt(
    conn: &mut Conn,
    name: &str,
    owner: &str,
    args: &AcquireArgs<'_>,
    joins: bool,
) -> redis::RedisResult<Reply> {
    acquire(conn, name, owner, args.lease_millis, args.wait_millis, args.queue, joins)
        .and_then(Reply::from_grant_or_pttl)
}

/// A waiter leaves the queue.
pub(crate) fn leave_queue(conn: &mut Conn, left: &GiveUp<'_>) -> redis::RedisResult<()> {
    give_up(conn, left.name, left.owner, left.wait_millis).map(drop)
}
