//! The read-write lock's scripts (Redisson's `RReadWriteLock` layout: one hash with `mode`,
//! `<owner>` for read holds and `<owner>:write` for write holds; one key per read hold,
//! `{name}:<owner>:rwlock_timeout:<k>`; channel `redisson_rwlock:{name}`).

use crate::base::keys;
use crate::base::scripts;
use crate::kind::protocol::Release;
use crate::kind::protocol::{Reply, Role};
use crate::kind::spec::Spec;
use crate::kind::wake;
use crate::transport::Conn;

/// The channel both sides announce releases on: `0` after a read release, `1` (wake every
/// waiter) after a write release.
pub(crate) fn channel(name: &str) -> String {
    keys::prefixed("redisson_rwlock", name)
}

pub(crate) fn write_field(owner: &str) -> String {
    format!("{owner}:write")
}

/// Prefix of `owner`'s per-hold timeout keys: hold `k` is `<prefix>:<k>`.
pub(crate) fn hold_keys(name: &str, owner: &str) -> String {
    format!("{}:rwlock_timeout", keys::suffixed(name, owner))
}

pub(crate) fn read_acquire(
    conn: &mut Conn,
    name: &str,
    owner: &str,
    lease_millis: u64,
) -> redis::RedisResult<redis::Value> {
    scripts::RW_READ_ACQUIRE
        .on(conn.pubsub())
        .key(name)
        .arg(lease_millis)
        .arg(owner)
        .arg(write_field(owner))
        .arg(hold_keys(name, owner))
        .invoke(conn)
}

pub(crate) fn write_acquire(
    conn: &mut Conn,
    name: &str,
    owner: &str,
    lease_millis: u64,
) -> redis::RedisResult<redis::Value> {
    scripts::RW_WRITE_ACQUIRE.on(conn.pubsub()).key(name).arg(lease_millis).arg(write_field(owner)).invoke(conn)
}

pub(crate) fn read_release(conn: &mut Conn, r: &Release<'_>) -> redis::RedisResult<Option<i64>> {
    scripts::RW_READ_RELEASE
        .on(conn.pubsub())
        .key(r.name)
        .key(keys::unlock_latch(r.name, r.request_id))
        .arg(0)
        .arg(r.owner)
        .arg(r.latch_millis)
        .arg(r.keep_millis)
        .arg(channel(r.name))
        .arg(hold_keys(r.name, r.owner))
        .arg(keys::suffixed(r.name, ""))
        .arg(r.retry_arg())
        .invoke(conn)
}

pub(crate) fn write_release(conn: &mut Conn, r: &Release<'_>) -> redis::RedisResult<Option<i64>> {
    scripts::RW_WRITE_RELEASE
        .on(conn.pubsub())
        .key(r.name)
        .key(keys::unlock_latch(r.name, r.request_id))
        .arg(1)
        .arg(r.keep_millis)
        .arg(write_field(r.owner))
        .arg(r.latch_millis)
        .arg(r.owner)
        .arg(channel(r.name))
        .arg(hold_keys(r.name, r.owner))
        .arg(r.retry_arg())
        .invoke(conn)
}

pub(crate) fn force_unlock(conn: &mut Conn, name: &str, mode: &str) -> redis::RedisResult<i64> {
    scripts::RW_FORCE_UNLOCK.on(conn.pubsub()).key(name).arg(mode).arg(channel(name)).invoke(conn)
}

/// Whether any read hold exists (in read mode, or a writer's downgraded holds).
pub(crate) fn has_read_holds(conn: &mut Conn, name: &str) -> redis::RedisResult<bool> {
    let fields: Vec<String> = redis::cmd("HKEYS").arg(name).query(conn)?;
    Ok(fields.iter().any(|f| f != "mode" && !f.ends_with(":write")))
}

pub(crate) fn is_write_locked(conn: &mut Conn, name: &str) -> redis::RedisResult<bool> {
    let mode: Option<String> = redis::cmd("HGET").arg(name).arg("mode").query(conn)?;
    Ok(mode.as_deref() == Some("write"))
}

/// The read side of a read-write lock, Redisson's `RReadWriteLock.readLock()`.
pub(crate) static READ: Spec = Spec {
    label: "read",
    reentrant: true,
    keeps: false,
    role: Role::Read,
    shares_lock_keys: false,
    polls: false,
    meaning: &wake::RELEASE,
    attempt: |conn, name, owner, args, _| {
        read_acquire(conn, name, owner, args.lease_millis).and_then(Reply::from_grant_or_pttl)
    },
    release: read_release,
    force_unlock: |conn, name, _| force_unlock(conn, name, "read"),
    wait_channel: |name, _| channel(name),
    give_up: None,
};

/// The write side of a read-write lock, Redisson's `RReadWriteLock.writeLock()`.
pub(crate) static WRITE: Spec = Spec {
    label: "write",
    reentrant: true,
    keeps: false,
    role: Role::Write,
    shares_lock_keys: false,
    polls: false,
    meaning: &wake::RELEASE,
    attempt: |conn, name, owner, args, _| {
        write_acquire(conn, name, owner, args.lease_millis).and_then(Reply::from_grant_or_pttl)
    },
    release: write_release,
    force_unlock: |conn, name, _| force_unlock(conn, name, "write"),
    wait_channel: |name, _| channel(name),
    give_up: None,
};
