//! The scripts of the semaphores and the count-down latch, in Redisson's layouts: a
//! semaphore's key holds its available permits and `redisson_sc:{name}` carries the count
//! after every release; a permit-expirable semaphore adds `{name}:timeout`, its permits' ids
//! with their deadlines; a latch's key holds its count and
//! `redisson_countdownlatch__channel__{name}` carries `0` when it opens, `1` on a new count.

use std::time::Duration;

use crate::base::keys;
use crate::base::scripts;
use crate::transport::Conn;

/// A permit's id: 16 random bytes, as Redisson makes them.
pub(crate) type PermitId = [u8; 16];

/// What an attempt to take permits found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    Yes,
    /// Not enough permits; how long until one may come back by itself (`None`: unknown).
    No {
        retry_in: Option<Duration>,
    },
}

/// Takes `permits` of a semaphore.
pub(crate) fn acquire(conn: &mut Conn, name: &str, permits: u64) -> redis::RedisResult<Taken> {
    let reply: Option<i64> = scripts::SEMAPHORE_ACQUIRE.on(conn.pubsub()).key(name).arg(permits).invoke(conn)?;
    Ok(match reply {
        None => Taken::Yes,
        Some(_) => Taken::No { retry_in: None },
    })
}

/// Adds `permits` (negative: takes them away) and tells the waiters; the count after.
pub(crate) fn add(conn: &mut Conn, name: &str, permits: i64) -> redis::RedisResult<i64> {
    add_if(conn, name, permits, false).map(|available| available.unwrap_or(0))
}

/// [`add`], and when `only_if_exists`, only to a semaphore that exists (`None`: it does
/// not, and nothing was done).
pub(crate) fn add_if(
    conn: &mut Conn,
    name: &str,
    permits: i64,
    only_if_exists: bool,
) -> redis::RedisResult<Option<i64>> {
    scripts::SEMAPHORE_RELEASE
        .on(conn.pubsub())
        .key(name)
        .arg(permits)
        .arg(keys::semaphore_channel(name))
        .arg(if only_if_exists { "1" } else { "0" })
        .invoke(conn)
}

/// Sets the permits of a semaphore that has none set, lasting `ttl_millis` (`None`: for
/// ever); whether it did.
pub(crate) fn try_set(conn: &mut Conn, name: &str, permits: u64, ttl_millis: Option<u64>) -> redis::RedisResult<bool> {
    scripts::SEMAPHORE_SET
        .on(conn.pubsub())
        .key(name)
        .arg(permits)
        .arg(keys::semaphore_channel(name))
        .arg(ttl_millis.map(|ms| ms.to_string()).unwrap_or_default())
        .invoke(conn)
}

/// When the permit `id` of a permit-expirable semaphore runs out, in the server's epoch
/// milliseconds, and the server's time now (`None`: the permit is not there).
pub(crate) fn permit_deadline(conn: &mut Conn, name: &str, id: &PermitId) -> redis::RedisResult<Option<(u64, u64)>> {
    let (deadline, (seconds, micros)): (Option<f64>, (u64, u64)) =
        redis::pipe().cmd("ZSCORE").arg(keys::permit_timeouts(name)).arg(&id[..]).cmd("TIME").query(conn)?;
    let now = seconds.saturating_mul(1000).saturating_add(micros / 1000);
    Ok(deadline.map(|d| (d as u64, now)))
}

/// The permits available now (0 for a semaphore with none set).
pub(crate) fn available(conn: &mut Conn, name: &str) -> redis::RedisResult<i64> {
    let value: Option<i64> = redis::cmd("GET").arg(name).query(conn)?;
    Ok(value.unwrap_or(0))
}

/// Whether the semaphore `name` has permits at all, available or taken: false when none was
/// ever set (or its keys were deleted), so that nothing will ever come back to a waiter.
pub(crate) fn has_permits(conn: &mut Conn, name: &str) -> redis::RedisResult<bool> {
    let set: u64 = redis::cmd("EXISTS").arg(name).arg(keys::permit_timeouts(name)).query(conn)?;
    Ok(set > 0)
}

/// Takes one permit per id of a permit-expirable semaphore, each with `lease` (`None`:
/// never expiring).
pub(crate) fn acquire_permits(
    conn: &mut Conn,
    name: &str,
    ids: &[PermitId],
    lease: Option<u64>,
) -> redis::RedisResult<Taken> {
    let mut call = scripts::PERMIT_ACQUIRE.on(conn.pubsub()).prepare_invoke();
    call.key(name).key(keys::permit_timeouts(name));
    call.arg(ids.len())
        .arg(lease.map_or(-1, |ms| i64::try_from(ms).unwrap_or(i64::MAX)))
        .arg(keys::semaphore_channel(name));
    for id in ids {
        call.arg(&id[..]);
    }
    let reply: Option<i64> = call.invoke(conn)?;
    Ok(match reply {
        None => Taken::Yes,
        Some(ms) => Taken::No { retry_in: u64::try_from(ms).ok().map(Duration::from_millis) },
    })
}

/// What giving permits back found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Returned {
    pub(crate) in_time: u64,
    /// Past their deadline, not yet taken back by anyone: returned now, but they were lost.
    pub(crate) late: u64,
    /// Already taken back by someone (their deadline had passed).
    pub(crate) gone: u64,
}

/// Gives the permits `ids` back.
pub(crate) fn release_permits(conn: &mut Conn, name: &str, ids: &[PermitId]) -> redis::RedisResult<Returned> {
    let mut call = scripts::PERMIT_RELEASE.on(conn.pubsub()).prepare_invoke();
    call.key(name).key(keys::permit_timeouts(name)).arg(keys::semaphore_channel(name));
    for id in ids {
        call.arg(&id[..]);
    }
    let (in_time, late, gone): (u64, u64, u64) = call.invoke(conn)?;
    Ok(Returned { in_time, late, gone })
}

/// Counts a latch down; the count left.
pub(crate) fn count_down(conn: &mut Conn, name: &str) -> redis::RedisResult<u64> {
    scripts::LATCH_COUNT_DOWN.on(conn.pubsub()).key(name).arg(keys::latch_channel(name)).invoke(conn)
}

/// Sets a latch's count when it has none; whether it did.
pub(crate) fn try_set_count(conn: &mut Conn, name: &str, count: u64) -> redis::RedisResult<bool> {
    scripts::LATCH_SET.on(conn.pubsub()).key(name).arg(count).arg(keys::latch_channel(name)).invoke(conn)
}

/// A latch's count (0 when it is open).
pub(crate) fn latch_count(conn: &mut Conn, name: &str) -> redis::RedisResult<u64> {
    let value: Option<i64> = redis::cmd("GET").arg(name).query(conn)?;
    Ok(value.map_or(0, |v| u64::try_from(v).unwrap_or(0)))
}
