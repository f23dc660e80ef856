//! Replica-synced grants (Redisson's `checkLockSyncedSlaves`): after a grant, while the
//! master has replicas, `WAIT` until one of them has the grant, so that a failover right
//! after it does not lose it; a grant no replica confirms in time is undone and refused.
//!
//! How many replicas the master has is read with `ROLE` when the client is built, and again
//! after a grant when that was more than a second ago (on the grant's connection): a
//! master without replicas costs one `ROLE` a second at most, and an uncontended acquire
//! nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How often the number of replicas is read again.
const RECHECK: Duration = Duration::from_secs(1);

/// What a grant's `WAIT` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sync {
    /// A replica has it, or there is no replica to wait for.
    Confirmed,
    /// The master has replicas and none confirmed the grant in time.
    Unconfirmed { replicas: usize },
}

pub(crate) struct ReplicaSync {
    /// `None`: grants are not waited for.
    timeout: Option<Duration>,
    replicas: AtomicUsize,
    checked_at: Mutex<Option<Instant>>,
}

impl ReplicaSync {
    pub(crate) fn new(timeout: Option<Duration>) -> ReplicaSync {
        ReplicaSync { timeout, replicas: AtomicUsize::new(0), checked_at: Mutex::new(None) }
    }

    /// Reads how many replicas the master has, when that was last read more than a second
    /// ago (or never).
    pub(crate) fn refresh(&self, conn: &mut redis::Connection) -> redis::RedisResult<()> {
        if self.timeout.is_none() {
            return Ok(());
        }
        {
            let mut checked = self.checked_at.lock();
            if checked.is_some_and(|at| at.elapsed() < RECHECK) {
                return Ok(());
            }
            *checked = Some(Instant::now());
        }
        self.read_replicas(conn).map(drop)
    }

    /// After a grant on `conn`: waits for a replica to have it.
    pub(crate) fn confirm(&self, conn: &mut redis::Connection, command_timeout: Duration) -> redis::RedisResult<Sync> {
        let Some(timeout) = self.timeout else { return Ok(Sync::Confirmed) };
        self.refresh(conn)?;
        if self.replicas.load(Ordering::Relaxed) == 0 {
            return Ok(Sync::Confirmed);
        }
        // WAIT blocks up to its own timeout: the reply may take that long on top of the
        // command timeout.
        conn.set_read_timeout(Some(timeout.saturating_add(command_timeout)))?;
        let millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX).max(1);
        let acked: redis::RedisResult<i64> = redis::cmd("WAIT").arg(1).arg(millis).query(conn);
        conn.set_read_timeout(Some(command_timeout))?;
        if acked? >= 1 {
            return Ok(Sync::Confirmed);
        }
        // None confirmed: do replicas still exist? (One may just have gone away.)
        match self.read_replicas(conn)? {
            0 => Ok(Sync::Confirmed),
            replicas => Ok(Sync::Unconfirmed { replicas }),
        }
    }

    /// The number of replicas connected to the master, from `ROLE`.
    fn read_replicas(&self, conn: &mut redis::Connection) -> redis::RedisResult<usize> {
        let role: Vec<redis::Value> = redis::cmd("ROLE").query(conn)?;
        let replicas = match (role.first(), role.get(2)) {
            (Some(redis::Value::BulkString(kind)), Some(redis::Value::Array(replicas))) if kind == b"master" => {
                replicas.len()
            }
            _ => 0,
        };
        self.replicas.store(replicas, Ordering::Relaxed);
        Ok(replicas)
    }
}
