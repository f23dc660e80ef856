//! Replica-synced grants (Redisson's `checkLockSyncedSlaves`, made stricter): a grant is
//! trusted only on what is known of the master it was made on.
//!
//! - **The master it was made on.** A grant came on a connection of some generation of its
//!   pool (the generation moves when the master does). A grant on a connection whose
//!   generation is no longer the pool's was made on a master the client has left: it is
//!   never confirmed (`Superseded`), whatever that master says of itself.
//! - **What is known of it.** After the grant, on the same connection, the master's
//!   replication state is read (`INFO replication`, `INFO stats`) and judged by
//!   [`ReplicaView`]: a replicated master grants once
//!   an online replica has the grant (`WAIT 1`), and nothing while it has no replica or
//!   lost one lately; a single server (no replica, no replication backlog) grants at once.
//!   A master known to be unreplicated is read again at most once a
//!   [`SETTLE`](crate::replica_view::SETTLE), so an uncontended acquire on a single server
//!   costs nothing extra.
//!
//! Each pool (a cluster has one per master) has its own [`ReplicaSync`], holding the view of
//! its current generation; a reading on a connection of an older generation never touches
//! it, and a newer generation starts a fresh one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::config::{Config, ReplicaPolicy};
use crate::disk_view::{Answer, DiskVerdict, DiskView, Inability, SyncMode};
use crate::error::{Error, ErrorKind};
use crate::replica_view::{Found, HOLD_DOWN, Node, Probe, Reading, Refusal, ReplicaView, ToAsk, Verdict};
use crate::transport::{Conn, Pool};

/// What became of a grant, as far as the replicas go (not `Sync`: it would shadow the
/// trait).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replication {
    /// A replica has it, or there is no replica to wait for.
    Confirmed,
    /// It must be taken back: why.
    Unconfirmed(Unconfirmed),
}

/// Why a grant was not confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unconfirmed {
    /// It was made on a connection to a master the client has left since.
    Superseded,
    /// The server is no master (any more).
    NotMaster,
    /// The master lost a replica lately: `before` it had that many, `now` fewer.
    LostReplica { before: u64, now: u64 },
    /// The master is replicated and has no replica to confirm it.
    Alone,
    /// None of its `replicas` confirmed it in time.
    NoAck { replicas: u64 },
    /// The master's AOF did not have it on disk in time (`SyncMode::Auto`, `WaitAof`).
    NotOnDisk,
    /// The master cannot persist it (`SyncMode::WaitAof`): why.
    CannotPersist(Inability),
}

impl Unconfirmed {
    /// The error of a grant that was undone because it could not be trusted. Every such
    /// grant not trusted to a replica is transient; the ones a retry can mend at once (the
    /// master moved or is moving, or has no replica for now) are marked unsent, and are
    /// tried again within the retry budget, on the master the client follows by then. A
    /// grant no replica confirmed is not: trying again would wait as long. A grant the
    /// master's disk did not confirm is transient when the disk was only slow, and not
    /// when the master cannot persist at all (no retry mends that).
    pub(crate) fn error(self, sync_timeout: Duration) -> Error {
        let (message, mendable) = match self {
            Unconfirmed::Superseded => {
                ("granted on a master the client has left since (a failover); the grant was undone".to_owned(), true)
            }
            Unconfirmed::NotMaster => {
                ("granted, but the server is no master any more (a failover); the grant was undone".to_owned(), true)
            }
            Unconfirmed::LostReplica { before, now } => (
                format!(
                    "granted, but the master had {before} replica(s) less than {HOLD_DOWN:?} ago and has {now} (a failover may be under way); the grant was undone"
                ),
                true,
            ),
            Unconfirmed::Alone => (
                "granted, but the master has no replica to confirm it, though it had one within its repl-backlog-ttl (a failover may be under way, or its replica is down); the grant was undone".to_owned(),
                true,
            ),
            Unconfirmed::NoAck { replicas } => (
                format!(
                    "granted, but none of the master's {replicas} replica(s) confirmed it within {sync_timeout:?}; the grant was undone"
                ),
                false,
            ),
            Unconfirmed::NotOnDisk => {
                let message = format!(
                    "granted, but the master's append-only file did not have it on disk within {sync_timeout:?} (a slow disk); the grant was undone"
                );
                return Error::new(ErrorKind::NotPersisted, message).transient();
            }
            Unconfirmed::CannotPersist(inability) => {
                let lacks = match inability {
                    Inability::AofOff => "no append-only file (appendonly no)",
                    Inability::NoCommand => "no WAITAOF (it came with Redis 7.2; every Valkey has it)",
                };
                let message =
                    format!("granted, but the master has {lacks}, which SyncMode::WaitAof needs; the grant was undone");
                return Error::new(ErrorKind::NotPersisted, message);
            }
        };
        let err = Error::new(ErrorKind::NotReplicated, message).transient();
        if mendable { err.unsent() } else { err }
    }
}

pub(crate) struct ReplicaSync {
    /// `None`: grants are not waited for.
    timeout: Option<Duration>,
    /// Grants wait for a replica only when one is connected (`ReplicaPolicy::WhenConnected`).
    when_connected: bool,
    /// The generation the view is of, and the view.
    view: Mutex<(u64, ReplicaView)>,
    /// Whether grants wait for the master's AOF, and how long.
    sync_mode: SyncMode,
    disk_timeout: Duration,
    /// The generation the disk's view is of, and the view.
    disk: Mutex<(u64, DiskView)>,
}

/// Replies to the confirmation's commands sent behind a grant: the reading and `WAIT 1`
/// (three) when the replicas are waited for, then `WAITAOF 1 0` (one) when the disk is.
/// The count tells which were sent: 3, 1, or 4 for both.
const REPLICA_REPLIES: usize = 3;

impl ReplicaSync {
    /// As `config`'s replica policy and sync mode say.
    pub(crate) fn of(config: &Config) -> ReplicaSync {
        let timeout = (config.replica_policy != ReplicaPolicy::Off).then_some(config.replica_sync_timeout);
        let when_connected = config.replica_policy == ReplicaPolicy::WhenConnected;
        ReplicaSync {
            timeout,
            when_connected,
            view: Mutex::new((0, ReplicaView::default())),
            sync_mode: config.sync_mode,
            disk_timeout: config.replica_sync_timeout,
            disk: Mutex::new((0, DiskView::default())),
        }
    }

    /// Takes a first reading on `conn` (when the client is built), so that the first grant
    /// has one to compare with.
    pub(crate) fn read_now(&self, conn: &mut Conn) -> redis::RedisResult<()> {
        if self.timeout.is_none() {
            return Ok(());
        }
        let reading = read(conn)?;
        self.observe(conn, reading);
        Ok(())
    }

    /// Before an acquire's script on `conn`: when the confirmation will read and wait (the
    /// master had replicas at the last reading), or wait for the master's AOF, its
    /// commands go behind the script, in the same write, and
    /// [`confirm`](ReplicaSync::confirm) takes their replies: a synced grant costs one
    /// round trip to the master, not two. They run after the script, on its connection, as
    /// they would after its reply; a script that granted nothing wrote nothing for the
    /// `WAIT` or `WAITAOF` to wait for.
    pub(crate) fn send_with_grant(&self, conn: &mut Conn, command_timeout: Duration) {
        let mut pipe = redis::pipe();
        let (mut replies, mut within) = (0, command_timeout);
        if let Some(timeout) = self.timeout
            && self.probe(conn) == Some(Probe::ReadAndWait)
        {
            info_commands(&mut pipe);
            pipe.cmd("WAIT").arg(1).arg(wait_millis(timeout));
            (replies, within) = (REPLICA_REPLIES, within.saturating_add(timeout));
        }
        if self.disk_asks(conn) {
            waitaof_command(&mut pipe, self.disk_timeout);
            (replies, within) = (replies + 1, within.saturating_add(self.disk_timeout));
        }
        if replies > 0 {
            conn.send_behind_next_script(&pipe, replies, (within, command_timeout));
        }
    }

    /// After a grant on `conn`: whether it stands. Waits for a replica when there is one
    /// to wait for. `pool` finds the pool `conn` came from, which reaches the replicas that
    /// went when a loss holds the master down (see [`ReplicaView::replicas_to_ask`]); it is
    /// called then only (on a cluster it looks through the masters).
    pub(crate) fn confirm(
        &self,
        conn: &mut Conn,
        pool: impl FnOnce() -> Option<Arc<Pool>>,
        command_timeout: Duration,
    ) -> redis::RedisResult<Replication> {
        // The reading, the `WAIT` and the `WAITAOF` sent behind the grant, if they were.
        let (replica_replies, disk_reply) = match conn.take_trailing_replies() {
            Some(replies) => split_trailing(replies?),
            None => (None, None),
        };
        let replicated = self.confirm_with_replicas(conn, pool, command_timeout, replica_replies)?;
        if replicated != Replication::Confirmed {
            return Ok(replicated);
        }
        self.confirm_on_disk(conn, command_timeout, disk_reply)
    }

    /// [`confirm`](ReplicaSync::confirm) as far as the replicas go; `sent` are the replies
    /// of the reading and `WAIT` sent behind the grant, if they were.
    fn confirm_with_replicas(
        &self,
        conn: &mut Conn,
        pool: impl FnOnce() -> Option<Arc<Pool>>,
        command_timeout: Duration,
        sent: Option<Vec<redis::Value>>,
    ) -> redis::RedisResult<Replication> {
        let Some(timeout) = self.timeout else { return Ok(Replication::Confirmed) };
        let Some(probe) = self.probe(conn) else { return Ok(Replication::Unconfirmed(Unconfirmed::Superseded)) };
        let (reading, acked) = match (sent, probe) {
            (Some(replies), _) => {
                let (reading, acked) = reading_and_count(replies)?;
                (reading, Some(acked))
            }
            (None, Probe::Skip) => return Ok(Replication::Confirmed),
            (None, Probe::Read) => (read(conn)?, None),
            (None, Probe::ReadAndWait) => {
                let (reading, acked) = read_and_wait(conn, timeout, command_timeout)?;
                (reading, Some(acked))
            }
        };
        let (replicas, replid) = (reading.replicas, reading.replid.clone());
        let Some(verdict) = self.observe(conn, reading) else {
            return Ok(Replication::Unconfirmed(Unconfirmed::Superseded));
        };
        let verdict = match verdict {
            Verdict::Refused(Refusal::LostReplica { .. } | Refusal::Alone) if !self.when_connected => {
                pool().and_then(|pool| self.ask_who_went(conn, &pool, timeout, replid.as_deref())).unwrap_or(verdict)
            }
            _ => verdict,
        };
        let verdict = if self.when_connected { verdict.when_connected(replicas) } else { verdict };
        Ok(match verdict {
            Verdict::Confirmed => Replication::Confirmed,
            Verdict::Refused(Refusal::NotMaster) => Replication::Unconfirmed(Unconfirmed::NotMaster),
            Verdict::Refused(Refusal::LostReplica { before, now }) => {
                Replication::Unconfirmed(Unconfirmed::LostReplica { before, now })
            }
            Verdict::Refused(Refusal::Alone) => Replication::Unconfirmed(Unconfirmed::Alone),
            Verdict::Wait => {
                let acked = match acked {
                    Some(acked) => acked,
                    None => wait(conn, timeout, command_timeout)?,
                };
                match acked {
                    Some(acked) if acked >= 1 => Replication::Confirmed,
                    _ => Replication::Unconfirmed(Unconfirmed::NoAck { replicas }),
                }
            }
        })
    }

    /// [`confirm`](ReplicaSync::confirm) as far as the master's AOF goes (see
    /// [`crate::disk_view`]); `sent` is the reply of the `WAITAOF` sent behind the grant,
    /// if it was. Asks now when it was not and should be (the view changed meanwhile).
    fn confirm_on_disk(
        &self,
        conn: &mut Conn,
        command_timeout: Duration,
        sent: Option<redis::Value>,
    ) -> redis::RedisResult<Replication> {
        let reply = match sent {
            Some(reply) => reply,
            None if self.disk_asks(conn) => {
                let mut pipe = redis::pipe();
                waitaof_command(&mut pipe, self.disk_timeout);
                let replies: Vec<redis::Value> = with_wait_timeout(conn, self.disk_timeout, command_timeout, |conn| {
                    pipe.ignore_errors().query(conn)
                })?;
                replies.into_iter().next().ok_or_else(|| malformed("WAITAOF got no reply"))?
            }
            None => return Ok(Replication::Confirmed),
        };
        let answer = waitaof_answer(reply)?;
        let verdict = {
            let mut disk = self.disk.lock();
            if disk.0 < conn.generation() {
                *disk = (conn.generation(), DiskView::default());
            }
            // An answer from a master the pool has left judges its grant, and is not kept.
            let view = if disk.0 == conn.generation() { &mut disk.1 } else { &mut DiskView::default() };
            view.answered(self.sync_mode, &answer, Instant::now())
        };
        Ok(match verdict {
            DiskVerdict::Persisted | DiskVerdict::Stands => Replication::Confirmed,
            DiskVerdict::NotOnDisk => Replication::Unconfirmed(Unconfirmed::NotOnDisk),
            DiskVerdict::CannotPersist(inability) => Replication::Unconfirmed(Unconfirmed::CannotPersist(inability)),
            DiskVerdict::NotMaster => Replication::Unconfirmed(Unconfirmed::NotMaster),
        })
    }

    /// Whether a grant on `conn` waits for its master's AOF (`WAITAOF 1 0`).
    fn disk_asks(&self, conn: &Conn) -> bool {
        if self.sync_mode == SyncMode::Wait {
            return false;
        }
        let disk = self.disk.lock();
        disk.0 < conn.generation() || disk.1.asks(self.sync_mode, Instant::now())
    }

    /// What to read after a grant on `conn`; `None` when `conn` is of a generation older
    /// than the pool's or than the view's. A newer one starts a fresh view.
    fn probe(&self, conn: &Conn) -> Option<Probe> {
        if !conn.is_current() {
            return None;
        }
        let mut view = self.view.lock();
        if view.0 < conn.generation() {
            *view = (conn.generation(), ReplicaView::default());
        }
        (view.0 == conn.generation()).then(|| view.1.probe(Instant::now()))
    }

    /// A loss holds the master down: asks each replica that went, not asked yet, whether it
    /// may be a master now (each within `timeout`, on a connection of its own), and says
    /// what the answers make of the grant. `None` when there was nothing to ask, or the view
    /// moved on meanwhile (the verdict already given stands).
    fn ask_who_went(&self, conn: &Conn, pool: &Pool, timeout: Duration, replid: Option<&str>) -> Option<Verdict> {
        let ToAsk { loss, replicas } = {
            let mut view = self.view.lock();
            if view.0 != conn.generation() {
                return None;
            }
            view.1.replicas_to_ask()?
        };
        let found: Vec<Found> = replicas.iter().map(|node| ask(pool, node, timeout, replid)).collect();
        let mut view = self.view.lock();
        (view.0 == conn.generation()).then(|| view.1.answered(loss, &found, Instant::now()))
    }

    /// Takes in a reading made on `conn`; `None` when `conn` is not of the view's generation.
    fn observe(&self, conn: &Conn, reading: Reading) -> Option<Verdict> {
        let mut view = self.view.lock();
        if view.0 < conn.generation() {
            *view = (conn.generation(), ReplicaView::default());
        }
        (view.0 == conn.generation()).then(|| view.1.observe(Instant::now(), reading))
    }
}

/// Asks the replica that went at `node` what it is now: gone when its server refuses the
/// connection, else what its `INFO replication` says against the master's `replid`.
fn ask(pool: &Pool, (host, port): &Node, timeout: Duration, replid: Option<&str>) -> Found {
    let mut conn = match pool.connect_to_node(host, *port, timeout) {
        Ok(conn) => conn,
        Err(err) if err.is_connection_refusal() => return Found::Gone,
        Err(_) => return Found::Unknown,
    };
    match redis::cmd("INFO").arg("replication").query::<String>(&mut conn) {
        Ok(info) => Found::from_answer(&info, replid),
        Err(_) => Found::Unknown,
    }
}

/// The two `INFO` sections a reading is made of. Two commands rather than one with two
/// sections, which Redis 6 does not take.
fn info_commands(pipe: &mut redis::Pipeline) {
    pipe.cmd("INFO").arg("replication").cmd("INFO").arg("stats");
}

/// Reads the master's replication state on `conn`.
fn read(conn: &mut Conn) -> redis::RedisResult<Reading> {
    let mut pipe = redis::pipe();
    info_commands(&mut pipe);
    let (replication, stats): (String, String) = pipe.query(conn)?;
    parse(&replication, &stats)
}

/// Reads the master's replication state and waits for one replica, in one round trip.
/// The `WAIT` count is `None` when its master turned replica while it blocked
/// (`UNBLOCKED`, a failover): nothing will confirm a grant made there.
fn read_and_wait(
    conn: &mut Conn,
    timeout: Duration,
    command_timeout: Duration,
) -> redis::RedisResult<(Reading, Option<i64>)> {
    let mut pipe = redis::pipe();
    info_commands(&mut pipe);
    pipe.cmd("WAIT").arg(1).arg(wait_millis(timeout)).ignore_errors();
    let replies: Vec<redis::Value> = with_wait_timeout(conn, timeout, command_timeout, |conn| pipe.query(conn))?;
    reading_and_count(replies)
}

/// The replies to `INFO replication`, `INFO stats` and `WAIT 1`: the reading, and the
/// `WAIT` count (see [`read_and_wait`]).
fn reading_and_count(replies: Vec<redis::Value>) -> redis::RedisResult<(Reading, Option<i64>)> {
    let [replication, stats, acked] = <[redis::Value; 3]>::try_from(replies)
        .map_err(|_| malformed("a reading and WAIT did not get three replies"))?;
    let text = |value: redis::Value| -> redis::RedisResult<String> {
        match value {
            redis::Value::ServerError(err) => Err(err.into()),
            value => redis::FromRedisValue::from_redis_value(value).map_err(Into::into),
        }
    };
    let reading = parse(&text(replication)?, &text(stats)?)?;
    Ok((reading, wait_count(acked)?))
}

/// `WAIT 1` after a grant: how many replicas have it (`None`: see [`read_and_wait`]).
fn wait(conn: &mut Conn, timeout: Duration, command_timeout: Duration) -> redis::RedisResult<Option<i64>> {
    let acked = with_wait_timeout(conn, timeout, command_timeout, |conn| {
        redis::cmd("WAIT").arg(1).arg(wait_millis(timeout)).query::<redis::Value>(conn)
    })?;
    wait_count(acked)
}

/// Runs `op`, whose `WAIT` blocks up to `timeout`: its reply may take that long on top of
/// the command timeout.
fn with_wait_timeout<T>(
    conn: &mut Conn,
    timeout: Duration,
    command_timeout: Duration,
    op: impl FnOnce(&mut Conn) -> redis::RedisResult<T>,
) -> redis::RedisResult<T> {
    conn.set_read_timeout(Some(timeout.saturating_add(command_timeout)))?;
    let result = op(conn);
    conn.set_read_timeout(Some(command_timeout))?;
    result
}

fn wait_millis(timeout: Duration) -> u64 {
    u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The count of a `WAIT` reply; `None` for `UNBLOCKED` (its master turned replica).
fn wait_count(reply: redis::Value) -> redis::RedisResult<Option<i64>> {
    match reply {
        redis::Value::Int(acked) => Ok(Some(acked)),
        redis::Value::ServerError(err) if err.code() == "UNBLOCKED" => Ok(None),
        redis::Value::ServerError(err) => Err(err.into()),
        other => Err(malformed(&format!("WAIT answered {other:?}"))),
    }
}

/// `WAITAOF 1 0 <timeout>`: the master's own AOF, no replica's.
fn waitaof_command(pipe: &mut redis::Pipeline, timeout: Duration) {
    pipe.cmd("WAITAOF").arg(1).arg(0).arg(wait_millis(timeout));
}

/// Splits the replies sent behind a grant into the replicas' (the reading and `WAIT`) and
/// the disk's (`WAITAOF`), by their count (see [`REPLICA_REPLIES`]).
fn split_trailing(mut replies: Vec<redis::Value>) -> (Option<Vec<redis::Value>>, Option<redis::Value>) {
    let disk = (replies.len() != REPLICA_REPLIES).then(|| replies.pop()).flatten();
    ((!replies.is_empty()).then_some(replies), disk)
}

/// What `WAITAOF 1 0` answered: `[local, replicas]`, or one of the refusals
/// [`Answer::of_refusal`] knows; another error is the error.
fn waitaof_answer(reply: redis::Value) -> redis::RedisResult<Answer> {
    match reply {
        redis::Value::Array(counts) => match counts.first() {
            Some(redis::Value::Int(local)) => Ok(Answer::Synced(*local)),
            _ => Err(malformed(&format!("WAITAOF answered {counts:?}"))),
        },
        redis::Value::ServerError(err) => {
            let text = format!("{} {}", err.code(), err.details().unwrap_or_default());
            Answer::of_refusal(&text).ok_or_else(|| err.into())
        }
        other => Err(malformed(&format!("WAITAOF answered {other:?}"))),
    }
}

fn parse(replication: &str, stats: &str) -> redis::RedisResult<Reading> {
    Reading::parse(&format!("{replication}\n{stats}"))
        .ok_or_else(|| malformed("INFO replication and INFO stats lack a field a reading needs"))
}

fn malformed(what: &str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Parse, "unexpected reply", what.to_owned()))
}
