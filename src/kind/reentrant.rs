//! The reentrant lock's scripts (Redisson's `RLock` layout: a hash of owner -> hold count,
//! released on `redisson_lock__channel:{name}`). The fenced lock releases and is forced
//! open the same way.

use crate::base::keys;
use crate::base::scripts;
use crate::kind::protocol::{LockKeys, Part, REGISTRATION, Release, Reply, Role, WAITERS, lock_arg};
use crate::kind::spec::{AcquireArgs, GiveUp, Spec};
use crate::kind::wake;
use crate::transport::{Conn, Joined};

/// The sorted set of a lock's waiting redlease clients, by wake token.
pub(crate) fn waiters_key(name: &str) -> String {
    keys::prefixed(WAITERS, name)
}

/// The script argument of a wake token: the token, or "" when the caller does not wait.
pub(crate) fn token_arg(token: Option<u64>) -> String {
    token.map(|t| t.to_string()).unwrap_or_default()
}

pub(crate) fn registration_millis() -> u64 {
    u64::try_from(REGISTRATION.as_millis()).unwrap_or(u64::MAX)
}

/// One acquire; `token` is the client's wake token when the caller waits (it registers).
/// A non-reentrant lock (`reentrant` false) refuses a second hold of `owner`. `lock_keys`,
/// when given, are `name`'s.
pub(crate) fn acquire(
    conn: &mut Conn,
    name: &str,
    owner: &str,
    lease_millis: u64,
    token: Option<u64>,
    reentrant: bool,
    lock_keys: Option<&LockKeys>,
) -> redis::RedisResult<redis::Value> {
    let call = conn
        .script(&scripts::ACQUIRE)
        .key(lock_arg(lock_keys, Part::Name, name))
        .key(lock_arg(lock_keys, Part::Waiters, name))
        .arg(lease_millis)
        .arg(owner);
    let call = match token {
        Some(token) => call.arg(token),
        None => call.arg(""),
    };
    call.arg(registration_millis()).arg(if reentrant { "1" } else { "0" }).invoke()
}

/// The client stops waiting without the lock: see `lua/waiter_leave.lua`.
pub(crate) fn leave(conn: &mut Conn, name: &str, token: u64, always_publish: bool) -> redis::RedisResult<i64> {
    let channel = keys::lock_channel(name);
    scripts::WAITER_LEAVE
        .on(conn.pubsub())
        .key(name)
        .key(waiters_key(name))
        .arg(token)
        .arg(&channel)
        .arg(0)
        .arg(&beside_args(&channel, always_publish))
        .invoke(conn)
}

/// The last two arguments of the scripts that wake a plain or fenced lock's waiters (see
/// `wake_waiters` in `lua/prelude.lua`): the redlease clients' mark beside `channel` ('' when
/// every release publishes on the lock's channel whoever listens), and the prefix of the
/// clients' own channels.
fn beside_args(channel: &str, always_publish: bool) -> [String; 2] {
    let mark = if always_publish { String::new() } else { keys::beside_lock_channel(channel, keys::Beside::Mark, "") };
    [mark, keys::wake_channel_prefix(channel)]
}

/// One release; a lock without messages (`message` false: the spin lock) wakes nobody and
/// publishes nothing; `observers`, a channel that also hears `0` when the lock is freed (an
/// election's).
pub(crate) fn release(
    conn: &mut Conn,
    r: &Release<'_>,
    message: bool,
    observers: Option<&str>,
) -> redis::RedisResult<Option<i64>> {
    let lock_keys = r.lock_keys;
    let call = conn
        .script(&scripts::RELEASE)
        .key(lock_arg(lock_keys, Part::Name, r.name))
        .key(Joined(keys::unlock_latch_parts(r.name, r.request_id)))
        .key(lock_arg(lock_keys, Part::Waiters, r.name))
        .arg(if message { "0" } else { "" })
        .arg(r.keep_millis)
        .arg(r.owner)
        .arg(r.latch_millis)
        .arg(lock_arg(lock_keys, Part::Channel, r.name))
        .arg(r.retry_arg());
    // The last two arguments of `beside_args`, copied or written without building them.
    let call = match r.always_publish {
        true => call.arg(""),
        false => call.arg(lock_arg(lock_keys, Part::Mark, r.name)),
    };
    let call = call.arg(lock_arg(lock_keys, Part::WakePrefix, r.name));
    match observers {
        Some(observers) => call.arg(observers).invoke(),
        None => call.invoke(),
    }
}

/// Releases `owner`'s last hold of the lock `name` and keeps the lock taken by `keeper` for
/// `keep_millis` (see `lua/keep.lua`): `Some(1)` when kept, `None` when the owner holds
/// nothing.
pub(crate) fn keep(
    conn: &mut Conn,
    name: &str,
    owner: &str,
    keeper: &str,
    keep_millis: u64,
) -> redis::RedisResult<Option<i64>> {
    conn.script(&scripts::KEEP).key(name).arg(owner).arg(keeper).arg(keep_millis).invoke()
}

/// Deletes the lock; a lock without messages (`message` false) publishes nothing.
pub(crate) fn force_unlock(conn: &mut Conn, name: &str, message: bool) -> redis::RedisResult<i64> {
    let message = if message { "0" } else { "" };
    scripts::FORCE_UNLOCK.on(conn.pubsub()).key(name).arg(message).arg(keys::lock_channel(name)).invoke(conn)
}

/// The plain lock, Redisson's `RLock`.
pub(crate) static REENTRANT: Spec = Spec {
    label: "reentrant",
    reentrant: true,
    keeps: true,
    role: Role::Exclusive,
    shares_lock_keys: true,
    polls: false,
    meaning: &wake::NAMED_RELEASE,
    attempt,
    release: release_telling_waiters,
    force_unlock: force_unlock_telling_waiters,
    wait_channel: lock_channel,
    give_up: Some(leave_waiting),
};

/// An acquire of a lock of the plain layout, which may join the owner's hold (`joins`).
pub(crate) fn attempt(
    conn: &mut Conn,
    name: &str,
    owner: &str,
    args: &AcquireArgs<'_>,
    joins: bool,
) -> redis::RedisResult<Reply> {
    acquire(conn, name, owner, args.lease_millis, args.token(), joins, args.lock_keys)
        .and_then(Reply::from_grant_or_pttl)
}

/// A release that wakes the lock's waiters.
pub(crate) fn release_telling_waiters(conn: &mut Conn, r: &Release<'_>) -> redis::RedisResult<Option<i64>> {
    release(conn, r, true, None)
}

/// A force unlock that wakes the lock's waiters.
pub(crate) fn force_unlock_telling_waiters(conn: &mut Conn, name: &str, _wait_millis: u64) -> redis::RedisResult<i64> {
    force_unlock(conn, name, true)
}

/// The lock's channel, whoever waits.
pub(crate) fn lock_channel(name: &str, _owner: &str) -> String {
    keys::lock_channel(name)
}

/// A waiting client stops waiting (see `lua/waiter_leave.lua`).
pub(crate) fn leave_waiting(conn: &mut Conn, left: &GiveUp<'_>) -> redis::RedisResult<()> {
    leave(conn, left.name, left.wake_token, left.always_publish).map(drop)
}
