//! The count-down latch: Redisson's `RCountDownLatch`.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::error::{Context, Error, Result};
use crate::engine::{self, Engine, Wait};
use crate::kind::semaphore;

/// A count-down latch (Redisson's `RCountDownLatch`): waiters are let through, all at
/// once, when the count reaches zero. "Start when all 8 shards are loaded."
///
/// Redis layout: the key `name` holds the count (no key: the latch is open);
/// `redisson_countdownlatch__channel__{name}` carries `0` when it opens (which wakes every
/// waiter, by pub/sub) and `1` when a new count is set.
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let loaded = client.count_down_latch("shards-loaded");
/// loaded.try_set_count(8)?;
/// // ... each loader calls loaded.count_down()? when its shard is in ...
/// if loaded.await_for(Duration::from_secs(60))? {
///     // every shard is loaded
/// }
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    engine: Arc<Engine>,
    name: Arc<str>,
}

impl CountDownLatch {
    pub(crate) fn new(engine: Arc<Engine>, name: String) -> CountDownLatch {
        CountDownLatch { engine, name: name.into() }
    }

    /// The latch's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the count when the latch has none (it is open); whether it did.
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        engine::ready(&self.engine, &self.name).on_latch(&self.name)?;
        engine::check_permits(&self.name, count).on_latch(&self.name)?;
        let name = &*self.name;
        engine::with_retries(&self.engine, None, |_| {
            self.engine.pool_for(name).run_once("setting the count", |conn| semaphore::try_set_count(conn, name, count))
        })
        .on_latch(name)
    }

    /// Counts down by one; the count left. At zero the latch opens and every waiter goes
    /// on. On an open latch it does nothing.
    pub fn count_down(&self) -> Result<u64> {
        engine::ready(&self.engine, &self.name).on_latch(&self.name)?;
        let name = &*self.name;
        engine::with_retries(&self.engine, None, |_| {
            self.engine.pool_for(name).run_once("counting down", |conn| semaphore::count_down(conn, name))
        })
        .on_latch(name)
    }

    /// The count now (0 when the latch is open).
    pub fn count(&self) -> Result<u64> {
        engine::ready(&self.engine, &self.name).on_latch(&self.name)?;
        let name = &*self.name;
        engine::with_retries(&self.engine, None, |_| {
            self.engine.pool_for(name).run("reading the count", |conn| semaphore::latch_count(conn, name))
        })
        .on_latch(name)
    }

    /// Waits until the latch is open.
    pub fn await_zero(&self) -> Result<()> {
        if engine::await_latch(&self.engine, &self.name, Wait::Forever)? {
            Ok(())
        } else {
            Err(Error::shutdown().on_latch(&self.name))
        }
    }

    /// Waits at most `timeout` for the latch to open; whether it did (a timeout that
    /// overflows the clock, `Duration::MAX`: without deadline, as `await_zero`).
    pub fn await_for(&self, timeout: Duration) -> Result<bool> {
        engine::await_latch(&self.engine, &self.name, engine::wait_within(timeout))
    }

    /// Waits until `deadline` for the latch to open; whether it did.
    pub fn await_until(&self, deadline: Instant) -> Result<bool> {
        engine::await_latch(&self.engine, &self.name, Wait::Until(deadline))
    }
}

impl fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountDownLatch").field("name", &self.name).finish()
    }
}
