//! What a client knows of one master's replicas, and what that makes of a grant or a
//! renewal made there: the pure state machine behind replica-synced grants and confirmed
//! renewals (`engine::replicas` does the I/O).
//!
//! A grant is worth what the master it was made on is worth, and a renewal likewise: the
//! replica a failover promotes has the lease only as far as it had the writes. So the
//! client keeps, per master (a pool's connection generation), the last [`Reading`] of its
//! replication state, taken on the write's own connection *after* the write, and decides
//! from it and the one before:
//!
//! - a replica **went** when the count fell, or when more replicas synced with the master
//!   since the last reading than the count grew by (one attached and left unseen between
//!   two readings: the sync counter moves at every attach, so nothing passes unseen);
//!   the loss is made good when the master has as many replicas again as before it (and at
//!   least one);
//! - after a replica went, the master grants nothing, and confirms no renewal, while it has
//!   fewer replicas than before the loss, unless every replica that went was asked since
//!   and is **gone**: its server refused the connection (its process is gone, so nothing
//!   can promote it). A replica that went and still answers may be promoted: it was (it
//!   answers as a master), or it is a replica whose link is down, which Sentinel promotes
//!   if the master looks down to it (a master cut off from its replicas and the sentinels
//!   keeps its clients on the other side). The ones that answered are asked again every
//!   [`ASK_AGAIN`]; there is no end to the refusal but the replica's return or its end;
//! - otherwise a **replicated** master (one with a replica, or with a replication backlog:
//!   a replica was attached within `repl-backlog-ttl`, an hour by default) counts a write
//!   once the replicas [`ReplicaAcks`] asks for have it (`WAIT n`: every one it lists
//!   online, by default), and nothing while it has none: a master alone for now may be an
//!   old master whose replica was promoted, or a new one whose next replica could be
//!   promoted before it has synced, and either way a write it made alone would be lost.
//!   This is Redis's own `min-replicas-to-write`, seen from the client;
//! - an **unreplicated** master (no replica, no backlog: a single server) counts a write at
//!   once: there is nothing to fail over to. So does a replicated master that lost its
//!   replicas when each one that went, asked, is gone, and every replica that went before
//!   and has not come back is gone too: none can be promoted while it is gone, and one that
//!   starts again syncs from this master before its link is up (a failover during that
//!   first sync is a second fault; see
//!   [`guide::guarantees`](crate::guide::guarantees#replication-and-failover)).
//!
//! A fresh view (just connected, or the master just switched: a new generation) has no
//! reading to compare with; its first reading is judged by the same rules, which need no
//! history. The reading is never skipped except on a master known to be unreplicated
//! whose last reading is younger than [`SETTLE`].
//!
//! | last reading | this reading | verdict |
//! |---|---|---|
//! | any | not a master | refused: `NotMaster` |
//! | any | a replica went (count fell, or syncs outran the count) | loss recorded now, with the count before it (then the rows below) |
//! | a loss whose replicas were each found gone | any | the rows below |
//! | a loss | fewer replicas than before the loss | refused: `LostReplica` |
//! | any | ≥ 1 replica, `n` of them online | `Wait(`[`ReplicaAcks::required`]`(n))` |
//! | any | no replica, backlog active, each replica that went of the last loss asked and found gone | `Confirmed` |
//! | any | no replica, backlog active | refused: `Alone` |
//! | any | no replica, no backlog | `Confirmed` |
//!
//! | before the write's reply | probe |
//! |---|---|
//! | last reading: master, no replica, no backlog, younger than `SETTLE` | `Skip`: confirmed without a reading |
//! | a grant; last reading: ≥ 1 replica, each online and listed, its verdict `Wait(n)`, younger than `SETTLE` | `CheckAndWait(n)`: `ROLE` and `WAIT n` in one round trip |
//! | last reading: ≥ 1 replica, its verdict `Wait(n)` | `ReadAndWait(n)`: the reading and `WAIT n` in one round trip |
//! | anything else (no reading, an old one, a replicated master without replicas, a loss) | `Read` (then `WAIT` if the verdict says so) |
//!
//! | the check behind a grant (`ROLE`) | verdict |
//! |---|---|
//! | a master listing the replicas of the last reading, which is younger than `SETTLE` and waits for them | the last reading's `Wait(n)` |
//! | anything else (no master, other replicas, the reading too old, a loss meanwhile) | none: a reading follows on the grant's connection |
//!
//! | asking the replicas of a loss | event | next |
//! |---|---|---|
//! | not asked | a write is judged refused (`replicas_to_ask`) | asked, from now |
//! | asked at `t` | every one found gone (`answered`) | cleared: the loss holds nothing back |
//! | asked at `t` | one answered, or could not be reached (`answered`) | asked at `t` |
//! | asked at `t` | a write is judged refused at `t` + [`ASK_AGAIN`] or later | asked again, from then |
//! | any | the count is made good | nothing to ask |

use std::time::{Duration, Instant};

/// How many of a master's replicas must confirm a grant or a renewal before it counts
/// ([`ClientBuilder::replica_acks`](crate::ClientBuilder::replica_acks)), while grants wait
/// for replicas at all (the [`ReplicaPolicy`](crate::ReplicaPolicy)). Sentinel and a cluster may promote any
/// replica: one that did not confirm a grant takes over without it, and another client can
/// be granted the lock there while its holder works on. The trade, measured, is in
/// [`guide::guarantees`](crate::guide::guarantees#replication-and-failover).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReplicaAcks {
    /// Every replica the master lists online (`WAIT` for that many): whichever is promoted
    /// has the grant. One replica that cannot confirm (its link frozen, a slow disk on a
    /// replica) holds grants and renewals back until the master drops it (its
    /// `repl-timeout`) or it is back.
    #[default]
    All,
    /// At least this many of the replicas the master lists online (all of them when it
    /// lists fewer, and at least one): Redisson's rule is `AtLeast(1)`. A failover that
    /// promotes a replica that did not confirm may lose grants. Zero is `InvalidInput`.
    AtLeast(u32),
}

impl ReplicaAcks {
    /// How many of `online` replicas must confirm (at least one).
    pub(crate) fn required(self, online: u64) -> u64 {
        match self {
            ReplicaAcks::All => online.max(1),
            ReplicaAcks::AtLeast(n) => online.min(u64::from(n)).max(1),
        }
    }
}

/// How long after asking the replicas of a loss, one of which still answered (or could not
/// be reached), they are asked again: one found gone then clears the loss.
pub(crate) const ASK_AGAIN: Duration = Duration::from_secs(5);

/// How long a reading of an unreplicated master stands for the grants after it.
pub(crate) const SETTLE: Duration = Duration::from_secs(1);

/// A replica's address as its master lists it (`slaveN:ip=…,port=…`).
pub(crate) type Node = (String, u16);

/// One reading of a server's replication state (`INFO replication` and `INFO stats`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reading {
    /// `role:master`.
    pub(crate) master: bool,
    /// `connected_slaves`.
    pub(crate) replicas: u64,
    /// The replicas listed `state=online`: synced, acknowledging what they get. A replica
    /// still loading its sync confirms nothing until it is online.
    pub(crate) online: u64,
    /// `repl_backlog_active`: a replica was attached within `repl-backlog-ttl`.
    pub(crate) backlog: bool,
    /// `sync_full + sync_partial_ok`: replicas that attached since the server started.
    pub(crate) syncs: u64,
    /// The connected replicas' addresses (`slaveN` lines), as far as they are listed.
    pub(crate) attached: Vec<Node>,
    /// `master_replid`: the history the server's data belongs to.
    pub(crate) replid: Option<String>,
}

impl Reading {
    /// Reads the fields out of the text of `INFO replication` followed by `INFO stats`.
    /// `None` when one is missing or malformed.
    pub(crate) fn parse(info: &str) -> Option<Reading> {
        let field = |name: &str| info_field(info, name);
        let number = |name: &str| field(name)?.parse::<u64>().ok();
        let listed: Vec<(Node, bool)> = info.lines().filter_map(replica_line).collect();
        let online = listed.iter().filter(|(_, online)| *online).count() as u64;
        let mut attached: Vec<Node> = listed.into_iter().map(|(node, _)| node).collect();
        attached.sort_unstable();
        Some(Reading {
            master: field("role")? == "master",
            replicas: number("connected_slaves")?,
            online,
            backlog: number("repl_backlog_active")? == 1,
            syncs: number("sync_full")?.checked_add(number("sync_partial_ok")?)?,
            attached,
            replid: field("master_replid").map(str::to_owned),
        })
    }

    /// A master without a replica or a replication backlog.
    fn unreplicated(&self) -> bool {
        self.master && self.replicas == 0 && !self.backlog
    }

    /// A master whose replicas are each online and each listed with its address: what a
    /// cheap check can be compared with.
    fn all_online_listed(&self) -> bool {
        self.master && self.replicas > 0 && self.online == self.replicas && self.attached.len() as u64 == self.replicas
    }
}

/// The value of the field `name` in the text of an `INFO` reply (`name:value` lines).
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(':')).map(str::trim)
}

/// The address of a `slaveN:ip=…,port=…,state=…` line of `INFO replication`, and whether
/// it says `state=online`.
fn replica_line(line: &str) -> Option<(Node, bool)> {
    let (name, fields) = line.trim().split_once(':')?;
    name.strip_prefix("slave")?.parse::<u32>().ok()?;
    let field = |key: &str| fields.split(',').find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='));
    let online = field("state") == Some("online");
    Some(((field("ip")?.to_owned(), field("port")?.parse().ok()?), online))
}

/// What to read after a write, before it is confirmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Nothing: the master is known to be unreplicated, as of a moment ago.
    Skip,
    /// A reading; `WAIT` only if it says so.
    Read,
    /// A reading and `WAIT n`, in one round trip (the master had replicas).
    ReadAndWait(u64),
    /// A grant's cheap check (`ROLE`: the master's online replicas) and `WAIT n`, in one
    /// round trip: the last reading is younger than [`SETTLE`] and found every replica
    /// online. The verdict of that reading stands when the check finds the same replicas;
    /// otherwise a reading follows.
    CheckAndWait(u64),
}

/// A master's replicas as `ROLE` lists them: a grant's cheap check that nothing changed
/// since the last reading (`ROLE` costs the server about a sixth of the reading's two
/// `INFO`s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Check {
    /// The server answers as a master.
    pub(crate) master: bool,
    /// The replicas it lists, sorted.
    pub(crate) replicas: Vec<Node>,
}

/// What a reading makes of a write made before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing to wait for: the write stands.
    Confirmed,
    /// The write stands once this many replicas have it (`WAIT n`).
    Wait(u64),
    /// The write does not count (a grant is taken back).
    Refused(Refusal),
}

/// Why a write was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The server is no master (any more).
    NotMaster,
    /// It lost a replica that may be promoted: `before` it had that many, `now` fewer.
    LostReplica { before: u64, now: u64 },
    /// It is replicated, and has no replica to confirm a write.
    Alone,
}

/// A replica loss: when it was seen, how many replicas there were before it, which went
/// (as far as the readings name them), and what asking them found.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Loss {
    at: Instant,
    before: u64,
    went: Vec<Node>,
    asked: Asked,
}

/// What became of asking the replicas that went of a loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asked {
    /// Not yet.
    No,
    /// Asked then (or being asked), and not each found gone: the loss holds the master
    /// back, and they are asked again [`ASK_AGAIN`] later.
    Kept(Instant),
    /// Each was found gone (nothing runs at its address): none can be promoted, and a
    /// master left without a replica is as a single server.
    AllGone,
}

/// What asking a replica that went found (see [`ReplicaView::answered`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// Its server refused the connection: nothing runs there, no master either.
    Gone,
    /// It answered (a master, or a replica whose link is down), or it could not be
    /// reached: it may be promoted.
    Unknown,
}

/// Asking the replicas of a loss: which loss (its moment), and whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ToAsk {
    pub(crate) loss: Instant,
    pub(crate) replicas: Vec<Node>,
}

/// What one client knows of one master's replicas (see the module's state tables).
#[derive(Clone, Debug, Default)]
pub(crate) struct ReplicaView {
    /// How many of the online replicas must confirm.
    acks: ReplicaAcks,
    last: Option<(Instant, Reading)>,
    loss: Option<Loss>,
}

impl ReplicaView {
    /// A fresh view, writes waiting for `acks` replicas.
    pub(crate) fn new(acks: ReplicaAcks) -> ReplicaView {
        ReplicaView { acks, last: None, loss: None }
    }

    /// What to read after a write at `now`.
    pub(crate) fn probe(&self, now: Instant) -> Probe {
        match &self.last {
            Some((at, last)) if last.unreplicated() && now.saturating_duration_since(*at) < SETTLE => Probe::Skip,
            Some(_) => match self.judge() {
                Verdict::Wait(n) => Probe::ReadAndWait(n),
                _ => Probe::Read,
            },
            None => Probe::Read,
        }
    }

    /// What to read after a grant at `now`: the cheap check instead of the reading when
    /// the last reading, younger than [`SETTLE`], found every replica online, listed each,
    /// and its verdict waits for them (a loss made good waits too; one that refuses reads). Renewals always read ([`probe`](Self::probe)): their
    /// batches cannot read again behind the ones in flight.
    pub(crate) fn probe_for_grant(&self, now: Instant) -> Probe {
        match (self.probe(now), &self.last) {
            (Probe::ReadAndWait(n), Some((at, last)))
                if now.saturating_duration_since(*at) < SETTLE && last.all_online_listed() =>
            {
                Probe::CheckAndWait(n)
            }
            (probe, _) => probe,
        }
    }

    /// What the cheap check behind a grant makes of it: the last reading's verdict, when
    /// it found the same master with the same replicas, all online, is still younger than
    /// [`SETTLE`], and waits for them; `None` when a reading must judge. A replica that
    /// went and came back, or one that attached and left, between the reading and the
    /// check changes no verdict: the reading's rules take a count made good for no loss.
    pub(crate) fn checked(&self, now: Instant, check: &Check) -> Option<Verdict> {
        let (at, last) = self.last.as_ref()?;
        let same = check.master && last.all_online_listed() && check.replicas == last.attached;
        if !same || now.saturating_duration_since(*at) >= SETTLE {
            return None;
        }
        Some(self.judge()).filter(|verdict| matches!(verdict, Verdict::Wait(_)))
    }

    /// Whether the last reading found the master unreplicated (no replica, no backlog).
    pub(crate) fn last_unreplicated(&self) -> bool {
        self.last.as_ref().is_some_and(|(_, last)| last.unreplicated())
    }

    /// Takes in `reading`, made at `now`, and says what it makes of a write made before it.
    pub(crate) fn observe(&mut self, now: Instant, reading: Reading) -> Verdict {
        if let Some((_, last)) = &self.last
            && let Some(before) = went(last, &reading)
        {
            let mut gone: Vec<Node> =
                last.attached.iter().filter(|node| !reading.attached.contains(node)).cloned().collect();
            // The replicas of the loss before that are still away are asked again with the
            // new ones (one found gone may have started again since), and a later loss while
            // the earlier one is not made good keeps the larger count.
            let before = match &self.loss {
                Some(loss) => {
                    gone.extend(loss.went.iter().filter(|node| !reading.attached.contains(node)).cloned());
                    if loss.asked != Asked::AllGone && last.replicas < loss.before {
                        before.max(loss.before)
                    } else {
                        before
                    }
                }
                None => before,
            };
            gone.sort_unstable();
            gone.dedup();
            self.loss = Some(Loss { at: now, before, went: gone, asked: Asked::No });
        }
        self.last = Some((now, reading));
        self.judge()
    }

    /// The replicas to ask about the last loss at `now`, when it holds the master back and
    /// they were not asked within [`ASK_AGAIN`]: they count as asked from now (a write
    /// meanwhile stays refused). `None` when there is none, or when the readings could not
    /// name a replica that went (then only the loss made good ends it).
    pub(crate) fn replicas_to_ask(&mut self, now: Instant) -> Option<ToAsk> {
        let replicas = self.last.as_ref().map_or(0, |(_, last)| last.replicas);
        let loss = self.loss.as_mut()?;
        let due = match loss.asked {
            Asked::No => true,
            Asked::Kept(at) => now.saturating_duration_since(at) >= ASK_AGAIN,
            Asked::AllGone => false,
        };
        if !due || loss.went.is_empty() || replicas >= loss.before {
            return None;
        }
        loss.asked = Asked::Kept(now);
        Some(ToAsk { loss: loss.at, replicas: loss.went.clone() })
    }

    /// What asking the replicas of the loss seen at `loss` found, each: when every one is
    /// gone, the loss holds nothing back, and a master left without a replica counts
    /// writes as a single server does. Says what the last reading makes of a write.
    pub(crate) fn answered(&mut self, loss: Instant, found: &[Found]) -> Verdict {
        if let Some(current) = self.loss.as_mut().filter(|current| current.at == loss)
            && !found.is_empty()
            && found.iter().all(|found| *found == Found::Gone)
        {
            current.asked = Asked::AllGone;
        }
        self.judge()
    }

    /// Redisson's rule (`ReplicaPolicy::WhenConnected`): a master that lost a replica, or
    /// that has none for now, counts a write all the same, waiting for the replicas it has
    /// online, if any. A server that is no master still refuses.
    pub(crate) fn when_connected(&self, verdict: Verdict) -> Verdict {
        let (replicas, online) = self.last.as_ref().map_or((0, 0), |(_, last)| (last.replicas, last.online));
        match verdict {
            Verdict::Refused(Refusal::LostReplica { .. } | Refusal::Alone) if replicas > 0 => {
                Verdict::Wait(self.acks.required(online))
            }
            Verdict::Refused(Refusal::LostReplica { .. } | Refusal::Alone) => Verdict::Confirmed,
            other => other,
        }
    }

    /// What the last reading, and the loss, make of a write.
    fn judge(&self) -> Verdict {
        let Some((_, reading)) = &self.last else { return Verdict::Refused(Refusal::NotMaster) };
        if !reading.master {
            return Verdict::Refused(Refusal::NotMaster);
        }
        match &self.loss {
            Some(loss) if loss.asked != Asked::AllGone && reading.replicas < loss.before => {
                Verdict::Refused(Refusal::LostReplica { before: loss.before, now: reading.replicas })
            }
            _ if reading.replicas > 0 => Verdict::Wait(self.acks.required(reading.online)),
            Some(loss) if loss.asked == Asked::AllGone => Verdict::Confirmed,
            _ if reading.backlog => Verdict::Refused(Refusal::Alone),
            _ => Verdict::Confirmed,
        }
    }
}

/// How many replicas the master must have again for a loss between the readings `last`
/// and `now` to be made good, or `None` when none went. The replicas that attached in
/// between are the growth of the sync counter: one went when the count is below the last
/// count plus those. A replica that left and one that attached between two readings are
/// taken for one whose link blipped and came back (the two cannot be told apart, and the
/// blip is the common case): the count to be made good is the last one, and at least one.
/// A counter that went back (`CONFIG RESETSTAT`, a restart) says nothing, and is taken for
/// a loss.
fn went(last: &Reading, now: &Reading) -> Option<u64> {
    let peak = match now.syncs.checked_sub(last.syncs) {
        Some(attached) => last.replicas.saturating_add(attached),
        None => u64::MAX,
    };
    (now.replicas < peak).then_some(last.replicas.max(1))
}

#[cfg(test)]
mod tests;
