//! The group lock: Redisson's `RedissonFasterMultiLock` (`getMultiLock(group, values)`).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api::watch::LeaseWatch;
use crate::base::error::{Error, Result};
use crate::engine::{self, Engine, GroupHold, GroupValues, LeaseState, Wait};

/// Many values of one group, taken all or none in one script call and one round trip
/// (Redisson's `RedissonFasterMultiLock`, from `getMultiLock(group, values)`): the seats of
/// one flight, the students of one class. Two group locks of one group exclude each other
/// on the values they share and on nothing else.
///
/// Where a [`MultiLock`](crate::MultiLock) over n locks takes n round trips (and gives back
/// what it took when one is busy), a group lock asks once: Redis grants every value or
/// none. The price is that all values of a group live in one hash, so on one Redis node.
///
/// Each acquisition has an owner of its own (no thread's), so the guard is `Send`, and a
/// group lock is **not reentrant**: a thread that holds values and asks again for one of
/// them waits like anyone else. The values' lease is renewed by the watchdog while the
/// guard lives ([`with_lease`](GroupLock::with_lease) gives a fixed one); a release wakes
/// every waiter of the group, each of which tries again for its own values.
///
/// Redis layout (Redisson's): the hash `group`; per value, the field `F` (the value's
/// HighwayHash, 22 characters of base64) names its holder, `F:<holder>:expire_time` when
/// the holder's lease ends (epoch ms, the server's clock; Redisson's clients use their
/// own) and `F:<holder>:lock_count` its holds; a release publishes `0` on
/// `redisson_lock__channel:{group}`. A value is hashed as the bytes given: a Java process
/// shares these values when its Redisson encodes them to the same bytes (`StringCodec` for
/// strings; Redisson's default codec, Kryo5, encodes a string otherwise).
///
/// Bad input is `InvalidInput` from every call, before anything is sent: no value, more than
/// [`MAX_GROUP_VALUES`](crate::MAX_GROUP_VALUES) (1,000) values, a value named twice.
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let seats = client.group_lock("flight-LH400", ["12A", "12B", "12C"]);
/// let guard = seats.lock()?; // all three, or wait
/// // ... book them ...
/// guard.unlock()?;
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct GroupLock {
    engine: Arc<Engine>,
    group: Arc<str>,
    values: GroupValues,
    lease: Option<Duration>,
}

/// The values of a [`GroupLock`], held; released on drop or by
/// [`unlock`](GroupGuard::unlock). It is `Send`: it may be released on any thread.
#[must_use = "if unused the values are released at once"]
#[clippy::has_significant_drop]
pub struct GroupGuard {
    hold: Option<GroupHold>,
}

impl GroupLock {
    pub(crate) fn new(engine: Arc<Engine>, group: String, values: GroupValues) -> GroupLock {
        GroupLock { engine, group: group.into(), values, lease: None }
    }

    /// The group's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.group
    }

    /// How many values this handle takes.
    pub fn values(&self) -> usize {
        self.values.count()
    }

    /// A handle whose acquisitions take a fixed lease: not renewed, the values are free
    /// again after it even while the guard lives. Checked (at least 1 ms, at most
    /// 2^53 − 1 ms) when the handle is used.
    #[must_use = "with_lease returns a new handle and leaves this one unchanged"]
    pub fn with_lease(mut self, lease: Duration) -> GroupLock {
        self.lease = Some(lease);
        self
    }

    /// The fixed lease of this handle; `None` when the watchdog renews it.
    pub fn lease(&self) -> Option<Duration> {
        self.lease
    }

    /// Blocks until every value is held. Returns `Err` when that cannot be done: Redis
    /// unreachable, a timeout, bad input, or [`Client::shutdown`](crate::Client::shutdown).
    pub fn lock(&self) -> Result<GroupGuard> {
        self.take(Wait::Forever)?.ok_or_else(|| Error::shutdown().on_lock(&self.group))
    }

    /// One attempt: `Ok(None)` when another owner holds one of the values.
    pub fn try_lock(&self) -> Result<Option<GroupGuard>> {
        self.take(Wait::No)
    }

    /// Waits at most `timeout`: `Ok(None)` when the values were not all free in time. A
    /// timeout so large that the deadline overflows `Instant` (`Duration::MAX`) is a wait
    /// without deadline, as `lock`'s.
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<GroupGuard>> {
        self.take(engine::wait_within(timeout))
    }

    /// Waits until `deadline`: `Ok(None)` when the values were not all free by then.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<GroupGuard>> {
        self.take(Wait::Until(deadline))
    }

    /// Whether anyone holds any of the values now.
    pub fn is_locked(&self) -> Result<bool> {
        Ok(engine::held_in_group(&self.engine, &self.group, &self.values)? > 0)
    }

    /// Releases the values whoever holds them and wakes the group's waiters; whether any
    /// was held. Their holders learn of the loss at their next renewal.
    pub fn force_unlock(&self) -> Result<bool> {
        engine::force_unlock_group(&self.engine, &self.group, &self.values)
    }

    fn take(&self, wait: Wait) -> Result<Option<GroupGuard>> {
        let hold = engine::acquire_group(&self.engine, &self.group, &self.values, self.lease, wait)?;
        Ok(hold.map(|hold| GroupGuard { hold: Some(hold) }))
    }
}

impl GroupGuard {
    /// Whether the values are held as far as this client knows (no I/O): while their lease
    /// is held or at risk, and valid.
    pub fn is_held(&self) -> bool {
        matches!(self.lease_state(), LeaseState::Held | LeaseState::AtRisk)
    }

    /// The values' lease state as this client knows it (no I/O).
    pub fn lease_state(&self) -> LeaseState {
        self.hold.as_ref().map_or(LeaseState::Released, GroupHold::state)
    }

    /// Until when the values are this guard's, as far as this process can tell (see
    /// [`LockGuard::valid_until`](crate::LockGuard::valid_until)); `None` once lost.
    pub fn valid_until(&self) -> Option<Instant> {
        self.hold.as_ref().and_then(|hold| hold.lease().valid_until()).flatten()
    }

    /// A handle on the values' lease for other threads (see
    /// [`LeaseWatch`]).
    pub fn watch(&self) -> LeaseWatch {
        LeaseWatch::new(self.hold.as_ref().map(|hold| Arc::clone(hold.lease())).into_iter().collect(), 1)
    }

    /// The group's name.
    pub fn group(&self) -> &str {
        self.hold.as_ref().map_or("", GroupHold::group)
    }

    /// The owner the values are held under in Redis, `<client id>:<number>`: this
    /// acquisition's own.
    pub fn owner(&self) -> &str {
        self.hold.as_ref().map_or("", GroupHold::owner)
    }

    /// How many values this guard holds.
    pub fn values(&self) -> usize {
        self.hold.as_ref().map_or(0, GroupHold::count)
    }

    /// Releases the values and reports the outcome: `Err(NotHeld)` when they were lost
    /// (the lease ran out, or someone force-unlocked or took one).
    pub fn unlock(mut self) -> Result<()> {
        self.hold.take().map_or(Ok(()), GroupHold::release)
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let Some(hold) = self.hold.take() else { return };
        let group = hold.group().to_owned();
        let events = hold.events();
        if let Err(err) = hold.release()
            && !err.is_shutdown()
            && !err.is_not_held()
        {
            events.release_failed(&group, &err);
        }
    }
}

impl fmt::Debug for GroupLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupLock")
            .field("group", &self.group)
            .field("values", &self.values.count())
            .field("lease", &self.lease)
            .finish()
    }
}

impl fmt::Debug for GroupGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupGuard")
            .field("group", &self.group())
            .field("values", &self.values())
            .field("state", &self.lease_state())
            .finish()
    }
}
