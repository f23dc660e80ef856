//! The read-write lock: Redisson's `RReadWriteLock`. Readers share, a writer excludes
//! everyone.

use std::fmt;
use std::sync::Arc;

use crate::client::Inner;
use crate::handle::{Handle, Kind, Release, lock_handle};
use crate::keys;
use crate::scripts;

/// A distributed read-write lock (Redisson's `RReadWriteLock`): any number of threads may
/// hold [`read`](ReadWriteLock::read) at once; [`write`](ReadWriteLock::write) excludes
/// every other holder, readers included.
///
/// - Both sides are reentrant per thread and use the same [`LockGuard`](crate::LockGuard),
///   watchdog and ladder as [`Lock`](crate::Lock).
/// - **Downgrade**: a thread holding the write lock may take the read lock; releasing the
///   write lock then leaves the lock in read mode, held by that thread's read holds.
/// - **No upgrade**: a thread that holds only read locks and asks for the write lock gets
///   [`ErrorKind::WouldDeadlock`](crate::ErrorKind::WouldDeadlock) at once (it would wait for
///   itself forever).
/// - **Readers are not held back for a waiting writer** (Redisson's policy): while readers
///   keep overlapping, a writer waits. See `docs/guarantees.md`.
///
/// Redis layout: one hash `name` with `mode` (`read` or `write`), `<owner>` (read holds) and
/// `<owner>:write` (write holds); one key per read hold, `{name}:<owner>:rwlock_timeout:<k>`,
/// whose lease is that hold's, so a dead reader's holds end on their own; channel
/// `redisson_rwlock:{name}`.
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let doc = client.read_write_lock("doc:7");
/// {
///     let _r1 = doc.read().lock()?;
///     // ... other readers may hold it too ...
/// }
/// let _w = doc.write().lock()?; // alone
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct ReadWriteLock {
    client: Arc<Inner>,
    name: Arc<str>,
}

/// The read side of a [`ReadWriteLock`]: shared with other readers.
#[derive(Clone)]
pub struct ReadLock(pub(crate) Handle);

/// The write side of a [`ReadWriteLock`]: exclusive.
#[derive(Clone)]
pub struct WriteLock(pub(crate) Handle);

impl ReadWriteLock {
    pub(crate) fn new(client: Arc<Inner>, name: String) -> ReadWriteLock {
        ReadWriteLock { client, name: name.into() }
    }

    /// The lock's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The read side. No I/O.
    #[must_use]
    pub fn read(&self) -> ReadLock {
        ReadLock(self.handle(Kind::Read))
    }

    /// The write side. No I/O.
    #[must_use]
    pub fn write(&self) -> WriteLock {
        WriteLock(self.handle(Kind::Write))
    }

    fn handle(&self, kind: Kind) -> Handle {
        Handle { client: Arc::clone(&self.client), name: Arc::clone(&self.name), lease: None, kind }
    }
}

lock_handle!(ReadLock);

lock_handle!(WriteLock);

impl fmt::Debug for ReadWriteLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadWriteLock").field("name", &self.name).finish()
    }
}

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
    conn: &mut redis::Connection,
    name: &str,
    owner: &str,
    lease_millis: u64,
) -> redis::RedisResult<Option<i64>> {
    scripts::RW_READ_ACQUIRE
        .key(name)
        .key(hold_keys(name, owner))
        .arg(lease_millis)
        .arg(owner)
        .arg(write_field(owner))
        .invoke(conn)
}

pub(crate) fn write_acquire(
    conn: &mut redis::Connection,
    name: &str,
    owner: &str,
    lease_millis: u64,
) -> redis::RedisResult<Option<i64>> {
    scripts::RW_WRITE_ACQUIRE.key(name).arg(lease_millis).arg(write_field(owner)).invoke(conn)
}

pub(crate) fn read_release(conn: &mut redis::Connection, r: &Release<'_>) -> redis::RedisResult<Option<i64>> {
    scripts::RW_READ_RELEASE
        .key(r.name)
        .key(channel(r.name))
        .key(hold_keys(r.name, r.owner))
        .key(keys::suffixed(r.name, ""))
        .key(keys::unlock_latch(r.name, r.request_id))
        .arg(0)
        .arg(r.owner)
        .arg(r.latch_millis)
        .arg(r.keep_millis)
        .invoke(conn)
}

pub(crate) fn write_release(conn: &mut redis::Connection, r: &Release<'_>) -> redis::RedisResult<Option<i64>> {
    scripts::RW_WRITE_RELEASE
        .key(r.name)
        .key(channel(r.name))
        .key(keys::unlock_latch(r.name, r.request_id))
        .key(hold_keys(r.name, r.owner))
        .arg(1)
        .arg(r.keep_millis)
        .arg(write_field(r.owner))
        .arg(r.latch_millis)
        .arg(r.owner)
        .invoke(conn)
}

pub(crate) fn force_unlock(conn: &mut redis::Connection, name: &str, mode: &str) -> redis::RedisResult<i64> {
    scripts::RW_FORCE_UNLOCK.key(name).key(channel(name)).arg(mode).invoke(conn)
}

/// Whether any read hold exists (in read mode, or a writer's downgraded holds).
pub(crate) fn has_read_holds(conn: &mut redis::Connection, name: &str) -> redis::RedisResult<bool> {
    let fields: Vec<String> = redis::cmd("HKEYS").arg(name).query(conn)?;
    Ok(fields.iter().any(|f| f != "mode" && !f.ends_with(":write")))
}

pub(crate) fn is_write_locked(conn: &mut redis::Connection, name: &str) -> redis::RedisResult<bool> {
    let mode: Option<String> = redis::cmd("HGET").arg(name).arg("mode").query(conn)?;
    Ok(mode.as_deref() == Some("write"))
}
