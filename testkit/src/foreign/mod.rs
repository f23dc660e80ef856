//! Foreign clients: second implementations of Redisson's data layout, for the interop tests
//! to run against redlease both ways (each takes the other's locks for busy, wakes the
//! other's waiters, refuses the other's holder a second hold).
//!
//! - [`layout::LayoutPeer`], always there: written in this project from the layout that
//!   docs/design.md states (keys, fields, owners, channels, messages, the queue and its
//!   deadlines, the latch, the reentry error), with plain commands in optimistic
//!   transactions (`WATCH`, `MULTI`, `EXEC`) and no Lua, so that it shares no text with
//!   redlease's scripts or Redisson's: where it and redlease read the layout differently, a
//!   test fails.
//! - [`redisson::RedissonScripts`], when `REDLEASE_REDISSON_SRC` names a Redisson source
//!   checkout: Redisson's own scripts, read out of its Java sources at test time and checked
//!   against the SHA1s docs/design.md records. Nothing of them is kept in this repository.
//!
//! [`peers`] gives every foreign client there is; a test runs once per client.

pub mod keys;
pub mod layout;
pub mod redisson;
pub mod wait;

mod java;

use redis::{Connection, RedisResult};

/// What an acquire answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// Taken (or taken again, for a reentrant kind).
    Granted,
    /// Held by someone else: try again within this many milliseconds (the lock's time to
    /// live, or for a fair lock the caller's wait, for a group the latest conflicting lease).
    Busy(i64),
    /// The caller holds it already and the kind is not reentrant (`NON_REENTRANT_REACQUIRE`).
    Refused,
}

/// What a release answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// The owner's last hold went: the lock is free (and its waiters told).
    Freed,
    /// The owner still holds it.
    HoldsRemain,
    /// The owner held nothing.
    NotHeld,
}

/// How a release publishes: `PUBLISH`, or `SPUBLISH` on a cluster with sharded pub/sub (as
/// Redisson chooses; `PUBLISH` there too with its `shardedSubscriptionMode = OFF`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publish {
    Classic,
    Sharded,
}

impl Publish {
    pub fn command(self) -> &'static str {
        match self {
            Publish::Classic => "publish",
            Publish::Sharded => "spublish",
        }
    }

    /// The command that subscribes to what this publishes.
    pub fn subscribe_command(self) -> &'static str {
        match self {
            Publish::Classic => "SUBSCRIBE",
            Publish::Sharded => "SSUBSCRIBE",
        }
    }
}

/// The lease a foreign client's holds get, in milliseconds (Redisson's watchdog default).
pub const LEASE_MS: u64 = 30_000;
/// How long a release's latch lives, in milliseconds.
pub const LATCH_MS: u64 = 16_000;
/// A fair waiter's wait before it may be dropped from the queue (Redisson's default).
pub const FAIR_WAIT_MS: u64 = 300_000;

/// One foreign client's operations on Redisson's layout, one atomic step each. Owners are
/// `<uuid>:<thread id>`; `now_ms` is the caller's clock (epoch ms), as Redisson's clients
/// pass it.
pub trait Foreign: Send + Sync {
    /// Which client this is, for the tests' messages.
    fn who(&self) -> String;

    /// A reentrant lock's acquire (Redisson's `RLock`).
    fn lock_acquire(&self, conn: &mut Connection, name: &str, owner: &str) -> RedisResult<Acquire>;
    /// A reentrant lock's release: one hold fewer, and at the last the unlock message.
    fn lock_release(&self, conn: &mut Connection, name: &str, owner: &str, publish: Publish) -> RedisResult<Release>;
    /// A spin lock's acquire (`RSpinLock`): the reentrant lock's layout.
    fn spin_acquire(&self, conn: &mut Connection, name: &str, owner: &str) -> RedisResult<Acquire>;
    /// A spin lock's release: as the reentrant lock's, publishing nothing.
    fn spin_release(&self, conn: &mut Connection, name: &str, owner: &str) -> RedisResult<Release>;
    /// A non-reentrant lock's acquire (`RNonReentrantLock`): its holder is refused.
    fn non_reentrant_acquire(&self, conn: &mut Connection, name: &str, owner: &str) -> RedisResult<Acquire>;
    /// A non-reentrant fair lock's acquire (`RNonReentrantFairLock`), queueing the owner
    /// when it must wait; `Busy` says how long it may sleep.
    fn non_reentrant_fair_acquire(
        &self,
        conn: &mut Connection,
        name: &str,
        owner: &str,
        now_ms: u64,
    ) -> RedisResult<Acquire>;
    /// A fair lock's release: one hold fewer, and at the last the queue's head woken.
    fn fair_release(
        &self,
        conn: &mut Connection,
        name: &str,
        owner: &str,
        now_ms: u64,
        publish: Publish,
    ) -> RedisResult<Release>;
    /// A semaphore's `tryAcquire(permits)`: taken when that many are available.
    fn semaphore_try_acquire(&self, conn: &mut Connection, name: &str, permits: u32) -> RedisResult<bool>;
    /// A count-down latch's `countDown`: one fewer, and at zero the latch goes and opens.
    fn latch_count_down(&self, conn: &mut Connection, name: &str, publish: Publish) -> RedisResult<()>;
    /// A semaphore's `releaseIfExists`: `permits` back only while the semaphore exists.
    fn semaphore_release_if_exists(
        &self,
        conn: &mut Connection,
        name: &str,
        permits: u32,
        publish: Publish,
    ) -> RedisResult<bool>;
    /// A semaphore's `trySetPermits` with a time to live: only when it does not exist.
    fn semaphore_try_set_permits_with_ttl(
        &self,
        conn: &mut Connection,
        name: &str,
        permits: u32,
        ttl_ms: u64,
        publish: Publish,
    ) -> RedisResult<bool>;
    /// A group lock's acquire (`RedissonFasterMultiLock.lock()`) of the values whose
    /// fields are `fields`, all or none.
    fn group_acquire(
        &self,
        conn: &mut Connection,
        group: &str,
        owner: &str,
        now_ms: u64,
        fields: &[&str],
    ) -> RedisResult<Acquire>;
    /// A group lock's release of `fields`.
    fn group_release(
        &self,
        conn: &mut Connection,
        group: &str,
        owner: &str,
        now_ms: u64,
        fields: &[&str],
        publish: Publish,
    ) -> RedisResult<Release>;
    /// Whether any of `fields` is held by anyone, lease not run out.
    fn group_is_locked(&self, conn: &mut Connection, group: &str, now_ms: u64, fields: &[&str]) -> RedisResult<bool>;
}

/// Every foreign client there is: the layout peer, then Redisson's own scripts when
/// `REDLEASE_REDISSON_SRC` names a checkout (and the test fails if they cannot be read).
pub fn peers() -> Vec<Box<dyn Foreign>> {
    let mut peers: Vec<Box<dyn Foreign>> = vec![Box::new(layout::LayoutPeer)];
    match redisson::RedissonScripts::from_env() {
        Ok(Some(scripts)) => peers.push(Box::new(scripts)),
        Ok(None) => {}
        Err(problem) => panic!("{}: {problem}", redisson::SOURCE_ENV),
    }
    peers
}

/// Milliseconds since the Unix epoch, as Redisson's clients pass the time.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A fresh request id for a release's latch: unique in this process and across processes.
fn request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{:08x}{:08x}{:016x}", std::process::id(), nanos, NEXT.fetch_add(1, Ordering::Relaxed))
}
