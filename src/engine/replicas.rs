//! Replica-synced grants (Redisson's `checkLockSyncedSlaves`): after a grant, while the
//! master has replicas, `WAIT` until one of them has the grant, so that a failover right
//! after it does not lose it; a grant no replica confirms in time is undone and refused.
//!
//! How many replicas the master has is read with `ROLE` when the client is built, and again
//! after a grant when that was more than a second ago (on the grant's connection): a
//! master without replicas costs one `ROLE` a second at most, and an uncontended acquire
//! nothing.
//!
//! A master seen losing its last replica is not taken at its word for [`HOLD_DOWN`]: that
//! is what a master looks like between its replica's promotion and its own demotion (a
//! failover under way), and what it grants then is lost with it.
//!
//! | replicas (last `ROLE`) | last replica lost (this master) | a grant |
//! |---|---|---|
//! | ≥ 1 | — | `WAIT 1`: confirmed, or undone (`Unconfirmed`) |
//! | 0 | within `HOLD_DOWN` | undone (`Unconfirmed`, `replicas: 0`) |
//! | 0 | never, or longer ago | confirmed (nothing to wait for) |
//!
//! A server that is no master any more lists no replicas. The pool's connection generation
//! names the master: when it moves, the new one starts with its own `ROLE`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::transport::Conn;
use parking_lot::Mutex;

/// How often the number of replicas is read again.
const RECHECK: Duration = Duration::from_secs(1);

/// How long a master that lost its last replica is not trusted with grants: longer than
/// Sentinel takes from promoting a replica to demoting the old master it can reach. (An
/// old master cut off from the sentinels for longer is what the server's
/// `min-replicas-to-write` is for: see `docs/deployment.md`.)
pub(crate) const HOLD_DOWN: Duration = Duration::from_secs(10);

/// What a grant's `WAIT` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sync {
    /// A replica has it, or there is no replica to wait for.
    Confirmed,
    /// The master has replicas and none confirmed the grant in time, or it lost them
    /// lately (`replicas: 0`), or it is no master any more.
    Unconfirmed { replicas: usize },
}

pub(crate) struct ReplicaSync {
    /// `None`: grants are not waited for.
    timeout: Option<Duration>,
    replicas: AtomicUsize,
    checked_at: Mutex<Option<Instant>>,
    seen: Mutex<Seen>,
}

/// When the master, as the pool's connection generation names it, was last seen losing its
/// last replica.
#[derive(Default)]
struct Seen {
    generation: u64,
    lost_replicas_at: Option<Instant>,
}

impl ReplicaSync {
    pub(crate) fn new(timeout: Option<Duration>) -> ReplicaSync {
        ReplicaSync {
            timeout,
            replicas: AtomicUsize::new(0),
            checked_at: Mutex::new(None),
            seen: Mutex::new(Seen::default()),
        }
    }

    /// Reads how many replicas the master has, when that was last read more than a second
    /// ago (or never).
    pub(crate) fn refresh(&self, conn: &mut Conn) -> redis::RedisResult<()> {
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

    /// After a grant on `conn`, a connection of the pool's `generation` (it changes when
    /// the master moves): waits for a replica to have it.
    pub(crate) fn confirm(
        &self,
        conn: &mut Conn,
        command_timeout: Duration,
        generation: u64,
    ) -> redis::RedisResult<Sync> {
        let Some(timeout) = self.timeout else { return Ok(Sync::Confirmed) };
        {
            let mut seen = self.seen.lock();
            if seen.generation != generation {
                // A new master: what the old one had says nothing about it; read its own.
                *seen = Seen { generation, lost_replicas_at: None };
                self.replicas.store(0, Ordering::Relaxed);
                *self.checked_at.lock() = None;
            }
        }
        self.refresh(conn)?;
        if self.replicas.load(Ordering::Relaxed) == 0 {
            return Ok(if self.lost_lately() { Sync::Unconfirmed { replicas: 0 } } else { Sync::Confirmed });
        }
        // WAIT blocks up to its own timeout: the reply may take that long on top of the
        // command timeout.
        conn.set_read_timeout(Some(timeout.saturating_add(command_timeout)))?;
        let millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX).max(1);
        let acked: redis::RedisResult<i64> = redis::cmd("WAIT").arg(1).arg(millis).query(conn);
        conn.set_read_timeout(Some(command_timeout))?;
        let acked = match acked {
            // The master turned replica while WAIT blocked (a failover): nothing will confirm
            // a grant made there.
            Err(err) if err.code() == Some("UNBLOCKED") => {
                let known = self.replicas.load(Ordering::Relaxed);
                return Ok(Sync::Unconfirmed { replicas: known.max(1) });
            }
            acked => acked?,
        };
        if acked >= 1 {
            return Ok(Sync::Confirmed);
        }
        // None confirmed. Replicas that just went away are no reason to trust the grant:
        // the one that went may be the master now.
        let known = self.replicas.load(Ordering::Relaxed);
        self.read_replicas(conn)?;
        Ok(Sync::Unconfirmed { replicas: known })
    }

    /// Whether this master was seen losing its last replica within [`HOLD_DOWN`].
    fn lost_lately(&self) -> bool {
        self.seen.lock().lost_replicas_at.is_some_and(|at| at.elapsed() < HOLD_DOWN)
    }

    /// The number of replicas connected to the master, from `ROLE` (0 when the server is
    /// not a master).
    fn read_replicas(&self, conn: &mut Conn) -> redis::RedisResult<usize> {
        let role: Vec<redis::Value> = redis::cmd("ROLE").query(conn)?;
        let replicas = match (role.first(), role.get(2)) {
            (Some(redis::Value::BulkString(kind)), Some(redis::Value::Array(replicas))) if kind == b"master" => {
                replicas.len()
            }
            _ => 0,
        };
        if self.replicas.swap(replicas, Ordering::Relaxed) > 0 && replicas == 0 {
            self.seen.lock().lost_replicas_at = Some(Instant::now());
        }
        Ok(replicas)
    }
}
