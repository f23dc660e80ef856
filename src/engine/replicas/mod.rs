//! Replica-synced grants and confirmed renewals (Redisson's `checkLockSyncedSlaves`, made
//! stricter): a grant, or a watchdog renewal, counts only on what is known of the master it
//! was made on.
//!
//! - **The master it was made on.** A write came on a connection of some generation of its
//!   pool (the generation moves when the master does). A write on a connection whose
//!   generation is no longer the pool's was made on a master the client has left: it is
//!   never confirmed (`Superseded`), whatever that master says of itself.
//! - **What is known of it.** Behind the write, in the same write on the same connection,
//!   the master's replication state is read (`INFO replication`, `INFO stats`) and judged
//!   by [`ReplicaView`]: a replicated master confirms once the replicas
//!   [`ReplicaAcks`] asks for have the write (`WAIT n`: every one online, by default), and
//!   nothing while it has no replica or lost one that may be promoted; a single server (no
//!   replica, no replication backlog) confirms at once. A master known to be unreplicated
//!   is read again at most once a [`SETTLE`](crate::durability::replica_view::SETTLE), so an
//!   uncontended acquire on a single server costs nothing extra.
//! - **Grants and renewals alike.** A grant that is not confirmed is taken back; a renewal
//!   batch that is not confirmed renews nothing, as far as its leases' deadlines go (see
//!   `engine::renewal`). A grant may read and wait again on its connection when what rode
//!   behind it was not enough; a renewal batch may not (batches may be in flight behind
//!   it), so the renewal thread reads first when the view would need it
//!   ([`ReplicaSync::ready_for_renewal`]).
//!
//! Each pool (a cluster has one per master) has its own [`ReplicaSync`], holding the view of
//! its current generation; a reading on a connection of an older generation never touches
//! it, and a newer generation starts a fresh one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::base::error::{Error, ErrorKind};
use crate::base::fast_hash::FastMap;
use crate::durability::disk_view::{DiskVerdict, DiskView, Inability, SyncMode};
use crate::durability::replica_view::{
    Check, Found, Probe, Reading, Refusal, ReplicaAcks, ReplicaView, ToAsk, Verdict,
};
use crate::support::config::{Config, ReplicaPolicy};
use crate::transport::{Conn, Pool};

mod wire;

use wire::{
    ask, check_command, info_commands, malformed, parse, parse_check, read, text, wait, wait_count, wait_millis,
    waitaof_answer, waitaof_command, with_wait_timeout,
};

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
    /// The master lost a replica that may be promoted: `before` it had that many, `now`
    /// fewer.
    LostReplica { before: u64, now: u64 },
    /// The master is replicated and has no replica to confirm it.
    Alone,
    /// Only `acked` of the `required` replicas confirmed it in time.
    NoAck { acked: u64, required: u64 },
    /// The master's AOF did not have it on disk in time (`SyncMode::Auto`, `WaitAof`).
    NotOnDisk,
    /// The master cannot persist it (`SyncMode::WaitAof`): why.
    CannotPersist(Inability),
}

/// What was not confirmed: a grant (taken back) or a renewal (it does not count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Write {
    Grant,
    Renewal,
}

impl Write {
    /// What was done, and what became of it, in an error's words.
    fn words(self) -> (&'static str, &'static str) {
        match self {
            Write::Grant => ("granted", "the grant was undone"),
            Write::Renewal => ("renewed", "the renewal does not extend the lease"),
        }
    }
}

impl Unconfirmed {
    /// The error of a `write` that was not confirmed. Every such write not trusted to a
    /// replica is transient; the ones a retry can mend at once (the master moved or is
    /// moving, or has no replica for now) are marked unsent, and are tried again within
    /// the retry budget, on the master the client follows by then. A write the replicas
    /// did not confirm is not: trying again would wait as long. A write the master's disk
    /// did not confirm is transient when the disk was only slow, and not when the master
    /// cannot persist at all (no retry mends that).
    pub(crate) fn error(self, write: Write, sync_timeout: Duration) -> Error {
        let (did, undone) = write.words();
        let (message, mendable) = match self {
            Unconfirmed::Superseded => {
                (format!("{did} on a master the client has left since (a failover); {undone}"), true)
            }
            Unconfirmed::NotMaster => {
                (format!("{did}, but the server is no master any more (a failover); {undone}"), true)
            }
            Unconfirmed::LostReplica { before, now } => (
                format!(
                    "{did}, but the master had {before} replica(s) and has {now}, and one that went may be promoted (it still answers, or cannot be reached: a failover or a partition may be under way); {undone}"
                ),
                true,
            ),
            Unconfirmed::Alone => (
                format!(
                    "{did}, but the master has no replica to confirm it, though it had one within its repl-backlog-ttl (a failover may be under way, or its replica is down); {undone}"
                ),
                true,
            ),
            Unconfirmed::NoAck { acked, required } => (
                format!(
                    "{did}, but only {acked} of the {required} replica(s) it waits for confirmed it within {sync_timeout:?}; {undone}"
                ),
                false,
            ),
            Unconfirmed::NotOnDisk => {
                let message = format!(
                    "{did}, but the master's append-only file did not have it on disk within {sync_timeout:?} (a slow disk); {undone}"
                );
                return Error::new(ErrorKind::NotPersisted, message).transient();
            }
            Unconfirmed::CannotPersist(inability) => {
                let lacks = match inability {
                    Inability::AofOff => "no append-only file (appendonly no)",
                    Inability::NoCommand => "no WAITAOF (it came with Redis 7.2; every Valkey has it)",
                };
                let message = format!("{did}, but the master has {lacks}, which SyncMode::WaitAof needs; {undone}");
                return Error::new(ErrorKind::NotPersisted, message);
            }
        };
        let err = Error::new(ErrorKind::NotReplicated, message).transient();
        if mendable { err.unsent() } else { err }
    }
}

/// The settings every master's [`ReplicaSync`] runs with.
#[derive(Clone, Copy, Debug)]
struct Settings {
    /// `None`: writes are not waited for.
    timeout: Option<Duration>,
    /// Writes wait for a replica only when one is connected (`ReplicaPolicy::WhenConnected`).
    when_connected: bool,
    /// How many of the online replicas must confirm.
    acks: ReplicaAcks,
    /// Whether writes wait for the master's AOF, and how long.
    sync_mode: SyncMode,
    disk_timeout: Duration,
}

impl Settings {
    fn of(config: &Config) -> Settings {
        Settings {
            timeout: (config.replica_policy != ReplicaPolicy::Off).then_some(config.replica_sync_timeout),
            when_connected: config.replica_policy == ReplicaPolicy::WhenConnected,
            acks: config.replica_acks,
            sync_mode: config.sync_mode,
            disk_timeout: config.replica_sync_timeout,
        }
    }
}

/// Every master's [`ReplicaSync`] (a cluster has several), by pool id: shared by the
/// threads that acquire and the renewal thread.
pub(crate) struct ReplicaSyncs {
    settings: Settings,
    by_pool: Mutex<FastMap<u64, Arc<ReplicaSync>>>,
}

impl ReplicaSyncs {
    pub(crate) fn new(config: &Config) -> ReplicaSyncs {
        ReplicaSyncs { settings: Settings::of(config), by_pool: Mutex::new(FastMap::default()) }
    }

    /// The one of the pool `pool_id`.
    pub(crate) fn of(&self, pool_id: u64) -> Arc<ReplicaSync> {
        let mut syncs = self.by_pool.lock();
        Arc::clone(syncs.entry(pool_id).or_insert_with(|| Arc::new(ReplicaSync::with(self.settings))))
    }
}

pub(crate) struct ReplicaSync {
    settings: Settings,
    /// The generation the view is of, and the view.
    view: Mutex<(u64, ReplicaView)>,
    /// The generation the disk's view is of, and the view.
    disk: Mutex<(u64, DiskView)>,
}

/// What rides behind a write (a grant's script, a renewal batch) on its connection, in one
/// write with it, to confirm it, in this order: the reading (`INFO replication`, `INFO
/// stats`) or a grant's cheap check (`ROLE`), `WAIT n`, `WAITAOF 1 0`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Behind {
    reading: bool,
    check: bool,
    /// `WAIT`'s count, when it is sent.
    wait: Option<u64>,
    disk: bool,
}

impl Behind {
    /// Nothing rides behind.
    pub(crate) fn is_empty(&self) -> bool {
        *self == Behind::default()
    }

    /// How many replies its commands get.
    pub(crate) fn replies(&self) -> usize {
        2 * usize::from(self.reading)
            + usize::from(self.check)
            + usize::from(self.wait.is_some())
            + usize::from(self.disk)
    }

    /// Whether it blocks in Redis (`WAIT`, `WAITAOF`): its replies may take that long more.
    pub(crate) fn blocks(&self) -> bool {
        self.wait.is_some() || self.disk
    }

    /// Its commands, `WAIT` and `WAITAOF` blocking at most `wait_timeout` each.
    pub(crate) fn pipeline(&self, wait_timeout: Duration) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        if self.reading {
            info_commands(&mut pipe);
        }
        if self.check {
            check_command(&mut pipe);
        }
        if let Some(n) = self.wait {
            pipe.cmd("WAIT").arg(n).arg(wait_millis(wait_timeout));
        }
        if self.disk {
            waitaof_command(&mut pipe, wait_timeout);
        }
        pipe
    }

    /// Its replies, by command.
    fn split(&self, replies: Vec<redis::Value>) -> redis::RedisResult<Got> {
        if replies.len() != self.replies() {
            return Err(malformed(&format!(
                "{} replies to the {} commands of a confirmation",
                replies.len(),
                self.replies()
            )));
        }
        let mut replies = replies.into_iter();
        let reading = match self.reading {
            true => {
                let (Some(replication), Some(stats)) = (replies.next(), replies.next()) else {
                    return Err(malformed("a reading got no reply"));
                };
                Some(parse(&text(replication)?, &text(stats)?)?)
            }
            false => None,
        };
        let check = match self.check {
            true => Some(parse_check(replies.next().ok_or_else(|| malformed("ROLE got no reply"))?)?),
            false => None,
        };
        let acked = match self.wait {
            Some(n) => Some((n, wait_count(replies.next().ok_or_else(|| malformed("WAIT got no reply"))?)?)),
            None => None,
        };
        let disk = if self.disk { replies.next() } else { None };
        Ok(Got { reading, check, acked, disk })
    }
}

/// What the commands behind a write answered.
struct Got {
    reading: Option<Reading>,
    check: Option<Check>,
    /// `WAIT`'s count sent, and its reply (`None`: `UNBLOCKED`).
    acked: Option<(u64, Option<i64>)>,
    /// `WAITAOF`'s reply.
    disk: Option<redis::Value>,
}

impl ReplicaSync {
    fn with(settings: Settings) -> ReplicaSync {
        ReplicaSync {
            settings,
            view: Mutex::new((0, ReplicaView::new(settings.acks))),
            disk: Mutex::new((0, DiskView::default())),
        }
    }

    /// Takes a first reading on `conn` (when the client is built), so that the first grant
    /// has one to compare with.
    pub(crate) fn read_now(&self, conn: &mut Conn) -> redis::RedisResult<()> {
        if self.settings.timeout.is_none() {
            return Ok(());
        }
        let reading = read(conn)?;
        self.observe(conn, reading);
        Ok(())
    }

    /// What rides behind a write on `conn`: the reading unless the master is known to be
    /// unreplicated as of a moment ago, `WAIT n` when the last reading's verdict waits for
    /// `n` replicas, `WAITAOF` when the disk is waited for.
    pub(crate) fn behind(&self, conn: &Conn) -> Behind {
        self.behind_as(conn, self.settings.timeout.and_then(|_| self.probe(conn)))
    }

    /// What rides behind a grant on `conn`: as [`behind`](ReplicaSync::behind), but the
    /// cheap check instead of the reading while the last reading settled the replicas (see
    /// [`ReplicaView::probe_for_grant`]).
    fn behind_grant(&self, conn: &Conn) -> Behind {
        let probe = self.settings.timeout.and_then(|_| self.probe_with(conn, ReplicaView::probe_for_grant));
        self.behind_as(conn, probe)
    }

    fn behind_as(&self, conn: &Conn, probe: Option<Probe>) -> Behind {
        Behind {
            reading: matches!(probe, Some(Probe::Read | Probe::ReadAndWait(_))),
            check: matches!(probe, Some(Probe::CheckAndWait(_))),
            wait: match probe {
                Some(Probe::ReadAndWait(n) | Probe::CheckAndWait(n)) => Some(n),
                _ => None,
            },
            disk: self.disk_asks(conn),
        }
    }

    /// Before a renewal batch, the first on `conn` of a pass: when the view would send the
    /// reading without `WAIT` though the master may have replicas (a fresh view, or one
    /// that refused), reads now, so that the batch carries the `WAIT` its verdict asks for:
    /// a renewal cannot read and wait again behind batches in flight.
    pub(crate) fn ready_for_renewal(&self, conn: &mut Conn) -> redis::RedisResult<()> {
        if self.settings.timeout.is_none() || self.probe(conn) != Some(Probe::Read) || self.known_unreplicated(conn) {
            return Ok(());
        }
        let reading = read(conn)?;
        self.observe(conn, reading);
        Ok(())
    }

    /// Before an acquire's script on `conn`: the confirmation's commands (see
    /// [`behind`](ReplicaSync::behind)) go behind the script, in the same write, and
    /// [`confirm`](ReplicaSync::confirm) takes their replies: a synced grant costs one
    /// round trip to the master, not two. They run after the script, on its connection, as
    /// they would after its reply; a script that granted nothing wrote nothing for the
    /// `WAIT` or `WAITAOF` to wait for.
    pub(crate) fn send_with_grant(&self, conn: &mut Conn, command_timeout: Duration) -> Behind {
        let behind = self.behind_grant(conn);
        if !behind.is_empty() {
            let wait_timeout = self.wait_timeout();
            let within = if behind.blocks() { command_timeout.saturating_add(wait_timeout) } else { command_timeout };
            conn.send_behind_next_script(&behind.pipeline(wait_timeout), behind.replies(), (within, command_timeout));
        }
        behind
    }

    /// After a grant on `conn`, `behind` it what [`send_with_grant`](ReplicaSync::send_with_grant)
    /// sent: whether it stands. Reads and waits again when what rode behind was not enough
    /// (the view changed meanwhile). `pool` finds the pool `conn` came from, which reaches
    /// the replicas that went when a loss holds the master back (see
    /// [`ReplicaView::replicas_to_ask`]); it is called then only (on a cluster it looks
    /// through the masters).
    pub(crate) fn confirm(
        &self,
        conn: &mut Conn,
        behind: Behind,
        pool: impl Fn() -> Option<Arc<Pool>>,
        command_timeout: Duration,
    ) -> redis::RedisResult<Replication> {
        let got = match conn.take_trailing_replies() {
            Some(replies) => behind.split(replies?)?,
            None => Got { reading: None, check: None, acked: None, disk: None },
        };
        let Got { reading, check, acked, disk } = got;
        let replicated = self.confirm_with_replicas(conn, (reading, check), acked, pool, command_timeout)?;
        if replicated != Replication::Confirmed {
            return Ok(replicated);
        }
        self.confirm_on_disk(conn, disk, command_timeout)
    }

    /// After a renewal batch on `conn`, with `behind` it (see [`behind`](ReplicaSync::behind)),
    /// which answered `replies`: whether the renewals count. Nothing more is sent on `conn`
    /// (batches may be in flight behind it): a verdict that needs what did not ride behind
    /// is unconfirmed, and the renewal is tried again. Asking the replicas that went (on
    /// connections of `pool`'s own) takes at most `ask_timeout` each.
    pub(crate) fn confirm_renewal(
        &self,
        conn: &Conn,
        behind: Behind,
        replies: Vec<redis::Value>,
        pool: Option<&Pool>,
        ask_timeout: Duration,
    ) -> redis::RedisResult<Replication> {
        let Got { reading, acked, disk, .. } = behind.split(replies)?;
        let replicated = match self.verdict_of(conn, reading, acked, || pool, ask_timeout)? {
            Judged::Done(replication) => replication,
            // Nothing more may be sent: what rode behind is all there is.
            Judged::NeedsWait { required, acked } => {
                Replication::Unconfirmed(Unconfirmed::NoAck { acked: acked.unwrap_or(0), required })
            }
        };
        if replicated != Replication::Confirmed {
            return Ok(replicated);
        }
        match disk {
            Some(reply) => self.disk_verdict(conn, reply),
            None if self.disk_asks(conn) => Ok(Replication::Unconfirmed(Unconfirmed::NotOnDisk)),
            None => Ok(Replication::Confirmed),
        }
    }

    /// How long `WAIT` and `WAITAOF` block behind a grant.
    fn wait_timeout(&self) -> Duration {
        self.settings.timeout.unwrap_or(self.settings.disk_timeout)
    }

    /// What the replicas make of a grant, reading and waiting again on `conn` when what rode
    /// behind was not enough.
    fn confirm_with_replicas(
        &self,
        conn: &mut Conn,
        (reading, check): (Option<Reading>, Option<Check>),
        acked: Option<(u64, Option<i64>)>,
        pool: impl Fn() -> Option<Arc<Pool>>,
        command_timeout: Duration,
    ) -> redis::RedisResult<Replication> {
        let timeout = self.wait_timeout();
        let standing = check.as_ref().and_then(|check| self.checked(conn, check));
        let judged = match standing {
            Some(verdict) => judged(verdict, acked),
            None => {
                let reading = match reading {
                    Some(reading) => Some(reading),
                    // The check found a change (or nothing rode behind, and the view asks
                    // for a reading now): read on the grant's connection.
                    None if check.is_some() => Some(read(conn)?),
                    None if self.settings.timeout.is_some()
                        && self.probe(conn).is_some_and(|probe| probe != Probe::Skip) =>
                    {
                        Some(read(conn)?)
                    }
                    None => None,
                };
                self.verdict_of(conn, reading, acked, &pool, timeout)?
            }
        };
        let (required, acked) = match judged {
            Judged::Done(Replication::Unconfirmed(Unconfirmed::NoAck { acked, required })) => (required, acked),
            Judged::Done(replication) => return Ok(replication),
            Judged::NeedsWait { required, .. } => match wait(conn, required, timeout, command_timeout)? {
                Some(acked) if acked >= required => return Ok(Replication::Confirmed),
                Some(acked) => (required, acked),
                None => return Ok(Replication::Unconfirmed(Unconfirmed::NotMaster)),
            },
        };
        // Too few confirmed: a replica may have gone while `WAIT` blocked (it waits for the
        // count it was sent with). A reading now judges the same confirmations again: when
        // the replica that went is found gone, the ones that remain are enough.
        let reading = read(conn)?;
        Ok(match self.verdict_of(conn, Some(reading), Some((required, Some(acked as i64))), &pool, timeout)? {
            Judged::Done(replication) => replication,
            Judged::NeedsWait { required, acked } => {
                Replication::Unconfirmed(Unconfirmed::NoAck { acked: acked.unwrap_or(0), required })
            }
        })
    }

    /// What the replicas make of a write from what was read and waited for, without
    /// sending anything on `conn` (asking the replicas that went uses connections of their
    /// own).
    fn verdict_of<P: std::ops::Deref<Target = Pool>>(
        &self,
        conn: &Conn,
        reading: Option<Reading>,
        acked: Option<(u64, Option<i64>)>,
        pool: impl FnOnce() -> Option<P>,
        ask_timeout: Duration,
    ) -> redis::RedisResult<Judged> {
        if self.settings.timeout.is_none() {
            return Ok(Judged::Done(Replication::Confirmed));
        }
        if !conn.is_current() {
            return Ok(Judged::Done(Replication::Unconfirmed(Unconfirmed::Superseded)));
        }
        let Some(reading) = reading else {
            // Nothing was read: the view said the master is unreplicated, as of a moment
            // before the write (the reading stands for the writes of a `SETTLE` after it).
            return Ok(match self.probe(conn) {
                Some(_) => Judged::Done(Replication::Confirmed),
                None => Judged::Done(Replication::Unconfirmed(Unconfirmed::Superseded)),
            });
        };
        let Some(verdict) = self.observe(conn, reading) else {
            return Ok(Judged::Done(Replication::Unconfirmed(Unconfirmed::Superseded)));
        };
        let verdict = match verdict {
            Verdict::Refused(Refusal::LostReplica { .. } | Refusal::Alone) if !self.settings.when_connected => {
                pool().and_then(|pool| self.ask_who_went(conn, &pool, ask_timeout)).unwrap_or(verdict)
            }
            _ => verdict,
        };
        let verdict = if self.settings.when_connected { self.when_connected(conn, verdict) } else { verdict };
        Ok(judged(verdict, acked))
    }

    /// The last reading's verdict of a grant on `conn`, when the cheap check behind it
    /// found nothing changed since (see [`ReplicaView::checked`]); `None` when a reading
    /// must judge. A connection the pool has left is never judged so.
    fn checked(&self, conn: &Conn, check: &Check) -> Option<Verdict> {
        if !conn.is_current() {
            return None;
        }
        let view = self.view.lock();
        (view.0 == conn.generation()).then(|| view.1.checked(Instant::now(), check)).flatten()
    }

    /// [`confirm`](ReplicaSync::confirm) as far as the master's AOF goes (see
    /// [`crate::durability::disk_view`]); `sent` is the reply of the `WAITAOF` sent behind the grant,
    /// if it was. Asks now when it was not and should be (the view changed meanwhile).
    fn confirm_on_disk(
        &self,
        conn: &mut Conn,
        sent: Option<redis::Value>,
        command_timeout: Duration,
    ) -> redis::RedisResult<Replication> {
        let reply = match sent {
            Some(reply) => reply,
            None if self.disk_asks(conn) => {
                let mut pipe = redis::pipe();
                waitaof_command(&mut pipe, self.settings.disk_timeout);
                let replies: Vec<redis::Value> =
                    with_wait_timeout(conn, self.settings.disk_timeout, command_timeout, |conn| {
                        pipe.ignore_errors().query(conn)
                    })?;
                replies.into_iter().next().ok_or_else(|| malformed("WAITAOF got no reply"))?
            }
            None => return Ok(Replication::Confirmed),
        };
        self.disk_verdict(conn, reply)
    }

    /// What the reply of `WAITAOF` on `conn` makes of the write before it.
    fn disk_verdict(&self, conn: &Conn, reply: redis::Value) -> redis::RedisResult<Replication> {
        let answer = waitaof_answer(reply)?;
        let verdict = {
            let mut disk = self.disk.lock();
            if disk.0 < conn.generation() {
                *disk = (conn.generation(), DiskView::default());
            }
            // An answer from a master the pool has left judges its write, and is not kept.
            let view = if disk.0 == conn.generation() { &mut disk.1 } else { &mut DiskView::default() };
            view.answered(self.settings.sync_mode, &answer, Instant::now())
        };
        Ok(match verdict {
            DiskVerdict::Persisted | DiskVerdict::Stands => Replication::Confirmed,
            DiskVerdict::NotOnDisk => Replication::Unconfirmed(Unconfirmed::NotOnDisk),
            DiskVerdict::CannotPersist(inability) => Replication::Unconfirmed(Unconfirmed::CannotPersist(inability)),
            DiskVerdict::NotMaster => Replication::Unconfirmed(Unconfirmed::NotMaster),
        })
    }

    /// Whether a write on `conn` waits for its master's AOF (`WAITAOF 1 0`).
    fn disk_asks(&self, conn: &Conn) -> bool {
        if self.settings.sync_mode == SyncMode::Wait {
            return false;
        }
        let disk = self.disk.lock();
        disk.0 < conn.generation() || disk.1.asks(self.settings.sync_mode, Instant::now())
    }

    /// What to read after a write on `conn`; `None` when `conn` is of a generation older
    /// than the pool's or than the view's. A newer one starts a fresh view.
    fn probe(&self, conn: &Conn) -> Option<Probe> {
        self.probe_with(conn, ReplicaView::probe)
    }

    /// [`probe`](ReplicaSync::probe), as `probe` of the view says.
    fn probe_with(&self, conn: &Conn, probe: fn(&ReplicaView, Instant) -> Probe) -> Option<Probe> {
        if !conn.is_current() {
            return None;
        }
        let mut view = self.view.lock();
        self.renew_view(&mut view, conn);
        (view.0 == conn.generation()).then(|| probe(&view.1, Instant::now()))
    }

    /// Whether the view of `conn`'s master last read it unreplicated (no replica, no
    /// backlog): a reading behind the write settles it, with no `WAIT` to send.
    fn known_unreplicated(&self, conn: &Conn) -> bool {
        let view = self.view.lock();
        view.0 == conn.generation() && view.1.last_unreplicated()
    }

    /// Redisson's rule applied to `verdict` by the view of `conn`'s master.
    fn when_connected(&self, conn: &Conn, verdict: Verdict) -> Verdict {
        let view = self.view.lock();
        if view.0 == conn.generation() { view.1.when_connected(verdict) } else { verdict }
    }

    /// A newer generation than the view's starts a fresh view.
    fn renew_view(&self, view: &mut (u64, ReplicaView), conn: &Conn) {
        if view.0 < conn.generation() {
            *view = (conn.generation(), ReplicaView::new(self.settings.acks));
        }
    }

    /// A loss holds the master back: asks each replica that went, when they are due to be
    /// asked, whether it is gone (each within `timeout`, on a connection of its own), and
    /// says what the answers make of the write. `None` when there was nothing to ask, or
    /// the view moved on meanwhile (the verdict already given stands).
    fn ask_who_went(&self, conn: &Conn, pool: &Pool, timeout: Duration) -> Option<Verdict> {
        let ToAsk { loss, replicas } = {
            let mut view = self.view.lock();
            if view.0 != conn.generation() {
                return None;
            }
            view.1.replicas_to_ask(Instant::now())?
        };
        let found: Vec<Found> = replicas.iter().map(|node| ask(pool, node, timeout)).collect();
        let mut view = self.view.lock();
        (view.0 == conn.generation()).then(|| view.1.answered(loss, &found))
    }

    /// Takes in a reading made on `conn`; `None` when `conn` is not of the view's generation.
    fn observe(&self, conn: &Conn, reading: Reading) -> Option<Verdict> {
        let mut view = self.view.lock();
        self.renew_view(&mut view, conn);
        (view.0 == conn.generation()).then(|| view.1.observe(Instant::now(), reading))
    }
}

/// What a `verdict` of the replicas makes of a write, given what `WAIT` answered behind it
/// (`acked`: the count it was sent with, and its reply).
fn judged(verdict: Verdict, acked: Option<(u64, Option<i64>)>) -> Judged {
    match verdict {
        Verdict::Confirmed => Judged::Done(Replication::Confirmed),
        Verdict::Refused(Refusal::NotMaster) => Judged::Done(Replication::Unconfirmed(Unconfirmed::NotMaster)),
        Verdict::Refused(Refusal::LostReplica { before, now }) => {
            Judged::Done(Replication::Unconfirmed(Unconfirmed::LostReplica { before, now }))
        }
        Verdict::Refused(Refusal::Alone) => Judged::Done(Replication::Unconfirmed(Unconfirmed::Alone)),
        Verdict::Wait(required) => match acked {
            // `UNBLOCKED`: its master turned replica while it blocked.
            Some((_, None)) => Judged::Done(Replication::Unconfirmed(Unconfirmed::NotMaster)),
            Some((_, Some(count))) if count >= 0 && count as u64 >= required => Judged::Done(Replication::Confirmed),
            // Sent for as many as are required, and fewer came: a second wait would
            // wait as long.
            Some((sent, Some(count))) if sent >= required => {
                Judged::Done(Replication::Unconfirmed(Unconfirmed::NoAck { acked: count.max(0) as u64, required }))
            }
            Some((_, Some(count))) => Judged::NeedsWait { required, acked: Some(count.max(0) as u64) },
            None => Judged::NeedsWait { required, acked: None },
        },
    }
}

/// What the replicas make of a write, before anything more is sent.
enum Judged {
    Done(Replication),
    /// The verdict waits for `required` replicas, and `WAIT` for that many did not ride
    /// behind (`acked`: what the one that did answered).
    NeedsWait {
        required: u64,
        acked: Option<u64>,
    },
}
