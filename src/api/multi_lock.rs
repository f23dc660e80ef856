//! Locks taken together: `AnyLock` (any lock kind) and `MultiLock` (all or nothing).

use std::fmt;
use std::time::{Duration, Instant};

use crate::api::fair_lock::FairLock;
use crate::api::fenced_lock::FencedLock;
use crate::api::guard::LockGuard;
use crate::api::handle::{Handle, lock_handle};
use crate::api::lock::Lock;
use crate::api::non_reentrant_lock::{NonReentrantFairLock, NonReentrantLock};
use crate::api::read_write_lock::{ReadLock, WriteLock};
use crate::api::spin_lock::SpinLock;
use crate::base::error::{Error, Result};
use crate::engine::{self, Wait};
use crate::support::interrupt;

/// Any lock kind, so that kinds can be combined in a [`MultiLock`] or a
/// [`RedLock`](crate::RedLock). Every lock handle converts into it with `.into()`, and it
/// offers the same ladder itself.
#[derive(Clone)]
pub struct AnyLock(pub(crate) Handle);

lock_handle!(AnyLock);

macro_rules! into_any_lock {
    ($($kind:ty),*) => {$(
        impl From<$kind> for AnyLock {
            fn from(lock: $kind) -> AnyLock {
                AnyLock(lock.0)
            }
        }
    )*};
}

into_any_lock!(Lock, FairLock, ReadLock, WriteLock, FencedLock, NonReentrantLock, NonReentrantFairLock, SpinLock);

/// Several locks, possibly of different kinds and on different clients, taken all together
/// or not at all (Redisson's `RedissonMultiLock`).
///
/// The ladder grants every member or none: when a member cannot be had, every member
/// already taken is released before the multi-lock waits (for that member alone) or
/// returns. It never waits while holding a member, so two threads taking the same locks in
/// opposite orders cannot deadlock. The guard releases every member.
///
/// Leases: each member's own (the watchdog by default), or the same fixed lease for every
/// member with [`with_lease`](MultiLock::with_lease).
///
/// ```no_run
/// use redlease::{AnyLock, MultiLock};
///
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let both = MultiLock::new([
///     AnyLock::from(client.lock("account:1")),
///     client.lock("account:2").into(),
/// ]);
/// let guard = both.lock()?; // both accounts, or wait
/// drop(guard);
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct MultiLock {
    members: Vec<Handle>,
    lease: Option<Duration>,
}

impl MultiLock {
    /// A multi-lock over `locks`. No I/O; an empty set is refused when used.
    pub fn new<I>(locks: I) -> MultiLock
    where
        I: IntoIterator,
        I::Item: Into<AnyLock>,
    {
        MultiLock { members: locks.into_iter().map(|l| l.into().0).collect(), lease: None }
    }

    /// Every member takes this fixed lease (not renewed) instead of its own.
    #[must_use = "with_lease returns a new multi-lock and leaves this one unchanged"]
    pub fn with_lease(mut self, lease: Duration) -> MultiLock {
        self.lease = Some(lease);
        self
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether there are no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Blocks until every member is held.
    pub fn lock(&self) -> Result<LockGuard> {
        self.acquire(Wait::Forever)?.ok_or_else(Error::shutdown)
    }

    /// One attempt at every member: `Ok(None)` when any is held elsewhere (none is kept).
    pub fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.acquire(Wait::No)
    }

    /// Waits at most `timeout` for every member at once (a timeout that overflows the
    /// clock, `Duration::MAX`: without deadline, as `lock`).
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<LockGuard>> {
        self.acquire(engine::wait_within(timeout))
    }

    /// Waits until `deadline` for every member at once.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<LockGuard>> {
        self.acquire(Wait::Until(deadline))
    }

    fn member(&self, i: usize) -> Handle {
        let mut member = self.members[i].clone();
        if self.lease.is_some() {
            member.lease = self.lease;
        }
        member
    }

    fn acquire(&self, wait: Wait) -> Result<Option<LockGuard>> {
        if self.members.is_empty() {
            return Err(Error::invalid("a multi-lock needs at least one lock"));
        }
        // Every member is checked before the first command goes out: a bad member must not
        // make the others be taken and released for nothing.
        for i in 0..self.members.len() {
            self.member(i).prepare()?;
        }
        // A wait that another thread interrupted before it began fails at once.
        if wait.waits() && interrupt::take() {
            return Err(Error::interrupted());
        }
        // The member found busy last time: waited for first, while holding nothing.
        let mut blocker: Option<usize> = None;
        loop {
            let mut held: Vec<LockGuard> = Vec::with_capacity(self.members.len());
            let waited_for = blocker.take();
            if let Some(b) = waited_for {
                match self.member(b).acquire(wait)? {
                    Some(guard) => held.push(guard),
                    None => return Ok(None),
                }
            }
            for i in (0..self.members.len()).filter(|&i| Some(i) != waited_for) {
                match self.member(i).acquire(Wait::No)? {
                    Some(guard) => held.push(guard),
                    None => {
                        blocker = Some(i);
                        break;
                    }
                }
            }
            if blocker.is_none() {
                // Every member taken in the same instant as an interrupt came: given back.
                if wait.waits() && interrupt::take() {
                    drop(held);
                    return Err(Error::interrupted());
                }
                return Ok(Some(LockGuard::merge(held)));
            }
            drop(held); // release every member taken before waiting again
            match wait {
                Wait::No => return Ok(None),
                Wait::Until(deadline) if Instant::now() >= deadline => return Ok(None),
                _ => {}
            }
        }
    }
}

impl fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.members.iter().map(|m| &*m.name).collect();
        f.debug_struct("MultiLock").field("members", &names).field("lease", &self.lease).finish()
    }
}
