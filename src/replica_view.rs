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
mod tests {
    use super::*;

    /// A master with `replicas` replicas, all online, listed as `127.0.0.11:7000`,
    /// `127.0.0.11:7001`, …
    fn master(replicas: u64, backlog: bool, syncs: u64) -> Reading {
        let attached = (0..replicas).map(|i| node(i as u16)).collect();
        Reading { master: true, replicas, online: replicas, backlog, syncs, attached, replid: Some(REPLID.to_owned()) }
    }

    const REPLID: &str = "8f3ab6c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6";

    fn node(i: u16) -> Node {
        ("127.0.0.11".to_owned(), 7000 + i)
    }

    fn replica() -> Reading {
        Reading {
            master: false,
            replicas: 0,
            online: 0,
            backlog: true,
            syncs: 0,
            attached: Vec::new(),
            replid: Some(REPLID.to_owned()),
        }
    }

    /// A view that has read `readings` in turn, 1 ms apart, starting at `t0`.
    fn view_after(t0: Instant, readings: &[Reading]) -> ReplicaView {
        let mut view = ReplicaView::default();
        for (i, reading) in readings.iter().enumerate() {
            view.observe(t0 + Duration::from_millis(i as u64), reading.clone());
        }
        view
    }

    #[test]
    fn info_text_parses_into_a_reading() {
        let text = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n\
                    slave0:ip=127.0.0.1,port=7001,state=online,offset=42,lag=0\r\n\
                    master_replid:8f3ab6c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6\r\n\
                    master_repl_offset:42\r\nrepl_backlog_active:1\r\n\
                    # Stats\r\nsync_full:2\r\nsync_partial_ok:3\r\nsync_partial_err:1\r\n";
        let mut expected = master(1, true, 5);
        expected.attached = vec![("127.0.0.1".to_owned(), 7001)];
        assert_eq!(Reading::parse(text), Some(expected));
        let two = text.replace("connected_slaves:1", "connected_slaves:2").replace(
            "slave0:ip=127.0.0.1,port=7001",
            "slave0:ip=127.0.0.2,port=7002,state=wait_bgsave,offset=0,lag=0\r\nslave1:ip=127.0.0.1,port=7001",
        );
        let two = Reading::parse(&two).expect("parses");
        assert_eq!(two.attached, [("127.0.0.1".to_owned(), 7001), ("127.0.0.2".to_owned(), 7002)], "sorted");
        assert_eq!((two.replicas, two.online), (2, 1), "a replica still syncing is not online");
        let text_of_replica = "role:slave\r\nconnected_slaves:0\r\nmaster_replid:8f3ab6c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6\r\n\
             repl_backlog_active:1\r\nsync_full:0\r\nsync_partial_ok:0\r\n";
        assert_eq!(Reading::parse(text_of_replica), Some(replica()));
        assert_eq!(Reading::parse("role:master\r\nconnected_slaves:0\r\n"), None, "no stats: nothing is assumed");
        assert_eq!(Reading::parse(&text.replace("connected_slaves:1", "connected_slaves:x")), None);
    }

    /// Every row of the verdict table, in order.
    #[test]
    fn the_verdict_table_holds() {
        let t0 = Instant::now();
        let later = |ms: u64| t0 + Duration::from_millis(ms);
        // Not a master: refused, fresh or not.
        assert_eq!(ReplicaView::default().observe(t0, replica()), Verdict::Refused(Refusal::NotMaster));
        assert_eq!(
            view_after(t0, &[master(1, true, 1)]).observe(later(5), replica()),
            Verdict::Refused(Refusal::NotMaster)
        );
        // A loss whose replica that went was found gone: the rows below.
        let mut view = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
        let asked = view.replicas_to_ask(later(2)).expect("named");
        assert_eq!(view.answered(asked.loss, &[Found::Gone]), Verdict::Wait(1));
        // A count that falls is a loss; the master is held back while it has fewer, however
        // long that lasts.
        let mut view = view_after(t0, &[master(2, true, 2)]);
        let lost = Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 });
        assert_eq!(view.observe(later(5), master(1, true, 2)), lost);
        assert_eq!(view.observe(later(9_000), master(1, true, 2)), lost);
        assert_eq!(view.observe(later(3_600_000), master(1, true, 2)), lost, "no end but the replica's return");
        // Made good (the replica came back): wait for both.
        assert_eq!(view.observe(later(3_600_100), master(2, true, 3)), Verdict::Wait(2));
        // With replicas, fresh: wait for every one online.
        assert_eq!(ReplicaView::default().observe(t0, master(1, true, 1)), Verdict::Wait(1));
        assert_eq!(ReplicaView::default().observe(t0, master(3, true, 3)), Verdict::Wait(3));
        // Replicated and alone: refused.
        assert_eq!(ReplicaView::default().observe(t0, master(0, true, 7)), Verdict::Refused(Refusal::Alone));
        // Unreplicated: confirmed at once.
        assert_eq!(ReplicaView::default().observe(t0, master(0, false, 0)), Verdict::Confirmed);
        assert_eq!(view_after(t0, &[master(0, false, 0)]).observe(later(5), master(0, false, 0)), Verdict::Confirmed);
    }

    /// How many replicas a write waits for: every one online by default, at least `n` of
    /// them with `AtLeast(n)`, and one while none is online yet (a replica still syncing).
    #[test]
    fn a_write_waits_for_the_replicas_acks_asks_for() {
        let t0 = Instant::now();
        let mut syncing = master(2, true, 2);
        syncing.online = 1;
        let mut none_online = master(1, true, 1);
        none_online.online = 0;
        for (acks, two, three, one_of_two, zero_of_one) in [
            (ReplicaAcks::All, 2, 3, 1, 1),
            (ReplicaAcks::AtLeast(1), 1, 1, 1, 1),
            (ReplicaAcks::AtLeast(2), 2, 2, 1, 1),
            (ReplicaAcks::AtLeast(9), 2, 3, 1, 1),
        ] {
            let verdict = |reading: Reading| ReplicaView::new(acks).observe(t0, reading);
            assert_eq!(verdict(master(2, true, 2)), Verdict::Wait(two), "{acks:?}");
            assert_eq!(verdict(master(3, true, 3)), Verdict::Wait(three), "{acks:?}");
            assert_eq!(verdict(syncing.clone()), Verdict::Wait(one_of_two), "{acks:?}");
            assert_eq!(verdict(none_online.clone()), Verdict::Wait(zero_of_one), "{acks:?}");
        }
    }

    /// A replica that attached and left between two readings (path of a failover right after
    /// a replica came back) is seen through the sync counter.
    #[test]
    fn a_replica_that_came_and_went_unseen_is_a_loss() {
        let t0 = Instant::now();
        let mut view = view_after(t0, &[master(0, true, 4)]);
        let verdict = view.observe(t0 + Duration::from_millis(500), master(0, true, 5));
        assert_eq!(verdict, Verdict::Refused(Refusal::LostReplica { before: 1, now: 0 }));
        // One attached and is still there: nothing went.
        let mut view = view_after(t0, &[master(0, true, 4)]);
        assert_eq!(view.observe(t0 + Duration::from_millis(500), master(1, true, 5)), Verdict::Wait(1));
        // A counter that went back says nothing: taken for a loss.
        let mut view = view_after(t0, &[master(0, true, 4)]);
        assert!(matches!(view.observe(t0 + Duration::from_millis(500), master(0, true, 0)), Verdict::Refused(_)));
    }

    /// A replica link that blips (the replica drops and resyncs between readings) costs a
    /// loss that is made good at once: the write waits for the replica, as before the blip.
    #[test]
    fn a_replica_that_resynced_between_readings_is_waited_for() {
        let t0 = Instant::now();
        let mut view = view_after(t0, &[master(1, true, 1)]);
        assert_eq!(view.observe(t0 + Duration::from_millis(50), master(1, true, 2)), Verdict::Wait(1));
    }

    /// With several replicas, one promoted leaves the others attached to the old master for a
    /// while: their confirmations would be lost with it, so fewer than before is refused.
    #[test]
    fn one_of_several_replicas_going_holds_the_master_back() {
        let t0 = Instant::now();
        let mut view = view_after(t0, &[master(2, true, 2)]);
        let verdict = view.observe(t0 + Duration::from_millis(5), master(1, true, 2));
        assert_eq!(verdict, Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 }));
        // A second loss before the first is made good keeps the count before the first.
        let verdict = view.observe(t0 + Duration::from_millis(10), master(0, true, 2));
        assert_eq!(verdict, Verdict::Refused(Refusal::LostReplica { before: 2, now: 0 }));
    }

    /// Every row of the asking table: a replica that went and was found gone clears the
    /// loss; one that answered (or could not be reached) keeps it, and is asked again
    /// [`ASK_AGAIN`] later, not before; a loss made good asks nothing.
    #[test]
    fn the_asking_table_holds() {
        let t0 = Instant::now();
        let lost = Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 });
        for (found, verdict) in [(Found::Gone, Verdict::Wait(1)), (Found::Unknown, lost)] {
            let mut view = view_after(t0, &[master(2, true, 2)]);
            let at = t0 + Duration::from_millis(5);
            assert_eq!(view.observe(at, master(1, true, 2)), lost);
            let asked = view.replicas_to_ask(at).expect("the replica that went is named");
            assert_eq!(asked, ToAsk { loss: at, replicas: vec![node(1)] });
            assert_eq!(view.replicas_to_ask(at), None, "asked once, also while the answer is awaited");
            assert_eq!(view.observe(at + Duration::from_millis(1), master(1, true, 2)), lost, "refused meanwhile");
            assert_eq!(view.answered(asked.loss, &[found]), verdict, "{found:?}");
            assert_eq!(view.observe(at + Duration::from_millis(3), master(1, true, 2)), verdict, "{found:?}, later");
            let almost = at + ASK_AGAIN - Duration::from_millis(1);
            assert_eq!(view.replicas_to_ask(almost), None, "{found:?}: not asked again before ASK_AGAIN");
            let again = view.replicas_to_ask(at + ASK_AGAIN);
            match found {
                Found::Gone => assert_eq!(again, None, "cleared: nothing to ask"),
                Found::Unknown => {
                    let again = again.expect("asked again");
                    assert_eq!(view.answered(again.loss, &[Found::Gone]), Verdict::Wait(1), "gone by then");
                }
            }
        }
        // Two went: both must be found gone.
        let mut view = view_after(t0, &[master(3, true, 3)]);
        let at = t0 + Duration::from_millis(5);
        view.observe(at, master(1, true, 3));
        let asked = view.replicas_to_ask(at).expect("named");
        assert_eq!(asked.replicas, [node(1), node(2)]);
        let lost = Verdict::Refused(Refusal::LostReplica { before: 3, now: 1 });
        assert_eq!(view.answered(asked.loss, &[Found::Gone, Found::Unknown]), lost);
        // Made good before the answer: nothing to ask any more.
        let mut view = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
        view.observe(t0 + Duration::from_millis(2), master(2, true, 3));
        assert_eq!(view.replicas_to_ask(t0 + Duration::from_millis(3)), None);
    }

    /// Asking has nothing to go on, or comes too late: only the loss made good ends it.
    #[test]
    fn a_loss_not_asked_about_holds_the_master_back() {
        let t0 = Instant::now();
        // A replica came and went between two readings: no reading names it.
        let mut view = view_after(t0, &[master(0, true, 4)]);
        view.observe(t0 + Duration::from_millis(5), master(0, true, 5));
        assert_eq!(view.replicas_to_ask(t0 + Duration::from_millis(6)), None);
        // The answer concerns an earlier loss: a later one stays.
        let mut view = view_after(t0, &[master(3, true, 3), master(2, true, 3)]);
        let first = view.replicas_to_ask(t0 + Duration::from_millis(1)).expect("named");
        let later = Verdict::Refused(Refusal::LostReplica { before: 3, now: 1 });
        assert_eq!(view.observe(t0 + Duration::from_millis(2), master(1, true, 3)), later);
        assert_eq!(view.answered(first.loss, &[Found::Gone]), later);
        let second = view.replicas_to_ask(t0 + Duration::from_millis(3)).expect("the later loss is asked about");
        assert_eq!(second.replicas, [node(1), node(2)], "with the replica of the loss before, still away");
        // No answer at all clears nothing.
        let mut view = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
        let asked = view.replicas_to_ask(t0 + Duration::from_millis(2)).expect("named");
        assert!(matches!(view.answered(asked.loss, &[]), Verdict::Refused(_)));
    }

    /// A master that lost its last replica, and the client found that replica's server
    /// gone: nothing can be promoted over it, and it counts writes as a single server does;
    /// an answer leaves it refused. A replica that comes back is waited for again, and when
    /// it goes again it is asked again.
    #[test]
    fn a_master_whose_replicas_are_all_gone_grants_as_a_single_server() {
        let t0 = Instant::now();
        let ms = |ms: u64| t0 + Duration::from_millis(ms);
        let lost = Verdict::Refused(Refusal::LostReplica { before: 1, now: 0 });
        for (found, verdict) in [(Found::Gone, Verdict::Confirmed), (Found::Unknown, lost)] {
            let mut view = view_after(t0, &[master(1, true, 1)]);
            assert_eq!(view.observe(ms(5), master(0, true, 1)), lost);
            let asked = view.replicas_to_ask(ms(5)).expect("named");
            assert_eq!(view.answered(asked.loss, &[found]), verdict, "{found:?}");
            assert_eq!(view.observe(ms(7), master(0, true, 1)), verdict, "{found:?}, the next write");
            assert_eq!(view.observe(ms(3_600_000), master(0, true, 1)), verdict, "{found:?}, an hour on");
        }
        // It comes back: waited for. It goes again: asked again.
        let mut view = view_after(t0, &[master(1, true, 1), master(0, true, 1)]);
        let asked = view.replicas_to_ask(ms(2)).expect("named");
        assert_eq!(view.answered(asked.loss, &[Found::Gone]), Verdict::Confirmed);
        assert_eq!(view.observe(ms(3), master(1, true, 2)), Verdict::Wait(1));
        view.observe(ms(4), master(0, true, 2));
        assert_eq!(view.replicas_to_ask(ms(5)).map(|a| a.replicas), Some(vec![node(0)]));
    }

    /// Every replica still away is asked at each loss: one that answered before keeps a
    /// master that lost its last replica since refused, though that one is gone.
    #[test]
    fn a_replica_still_away_from_an_earlier_loss_is_asked_again() {
        let t0 = Instant::now();
        let ms = |ms: u64| t0 + Duration::from_millis(ms);
        let mut view = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
        let first = view.replicas_to_ask(ms(2)).expect("named");
        assert_eq!(first.replicas, [node(1)]);
        assert_eq!(
            view.answered(first.loss, &[Found::Unknown]),
            Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 })
        );
        view.observe(ms(3), master(0, true, 2));
        let second = view.replicas_to_ask(ms(3)).expect("named");
        assert_eq!(second.replicas, [node(0), node(1)]);
        let verdict = view.answered(second.loss, &[Found::Gone, Found::Unknown]);
        assert_eq!(verdict, Verdict::Refused(Refusal::LostReplica { before: 2, now: 0 }));
        // Both gone: as a single server.
        let third = view.replicas_to_ask(ms(3) + ASK_AGAIN).expect("asked again");
        assert_eq!(view.answered(third.loss, &[Found::Gone, Found::Gone]), Verdict::Confirmed);
    }

    /// Every row of the grant's probe and of the check's table.
    #[test]
    fn a_grant_checks_cheaply_only_what_the_last_reading_settled() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let check = |replicas: &[Node]| Check { master: true, replicas: replicas.to_vec() };
        let replicated = view_after(t0, &[master(2, true, 3)]);
        assert_eq!(replicated.probe_for_grant(ms(1)), Probe::CheckAndWait(2));
        assert_eq!(replicated.probe(ms(1)), Probe::ReadAndWait(2), "a renewal reads");
        assert_eq!(replicated.probe_for_grant(t0 + SETTLE), Probe::ReadAndWait(2), "not lately: read");
        let mut syncing = master(2, true, 3);
        syncing.online = 1;
        assert_eq!(view_after(t0, &[syncing]).probe_for_grant(ms(1)), Probe::ReadAndWait(1), "one not online");
        let mut unlisted = master(2, true, 3);
        unlisted.attached.pop();
        assert_eq!(view_after(t0, &[unlisted]).probe_for_grant(ms(1)), Probe::ReadAndWait(2), "one unnamed");
        let after_a_loss = view_after(t0, &[master(2, true, 3), master(1, true, 3)]);
        assert_eq!(after_a_loss.probe_for_grant(ms(2)), Probe::Read, "a loss that refuses: read");
        let made_good = view_after(t0, &[master(2, true, 3), master(1, true, 3), master(2, true, 4)]);
        assert_eq!(made_good.probe_for_grant(ms(3)), Probe::CheckAndWait(2), "a loss made good");
        let alone = view_after(t0, &[master(0, false, 0)]);
        assert_eq!(alone.probe_for_grant(ms(1)), Probe::Skip);

        // The check's table.
        let both = [node(0), node(1)];
        assert_eq!(replicated.checked(ms(1), &check(&both)), Some(Verdict::Wait(2)), "the same replicas");
        assert_eq!(replicated.checked(ms(1), &check(&both[..1])), None, "one went");
        assert_eq!(replicated.checked(ms(1), &check(&[node(0), node(1), node(2)])), None, "one came");
        assert_eq!(replicated.checked(ms(1), &check(&[node(0), node(2)])), None, "one replaced");
        let demoted = Check { master: false, replicas: Vec::new() };
        assert_eq!(replicated.checked(ms(1), &demoted), None, "no master");
        assert_eq!(replicated.checked(t0 + SETTLE, &check(&both)), None, "the reading too old");
        let refusing = view_after(t0, &[master(2, true, 3), master(1, true, 3)]);
        assert_eq!(refusing.checked(ms(2), &check(&[node(0)])), None, "a loss that refuses");
    }

    /// Every row of the probe table.
    #[test]
    fn the_probe_table_holds() {
        let t0 = Instant::now();
        assert_eq!(ReplicaView::default().probe(t0), Probe::Read, "fresh: read");
        let alone = view_after(t0, &[master(0, false, 0)]);
        assert_eq!(alone.probe(t0 + Duration::from_millis(999)), Probe::Skip, "unreplicated, a moment ago");
        assert_eq!(alone.probe(t0 + SETTLE), Probe::Read, "unreplicated, but not lately");
        let degraded = view_after(t0, &[master(0, true, 3)]);
        assert_eq!(degraded.probe(t0 + Duration::from_millis(1)), Probe::Read, "a backlog: replicas may come");
        let replicated = view_after(t0, &[master(2, true, 3)]);
        assert_eq!(replicated.probe(t0 + Duration::from_millis(1)), Probe::ReadAndWait(2));
        let after_a_loss = view_after(t0, &[master(2, true, 3), master(1, true, 3)]);
        assert_eq!(after_a_loss.probe(t0 + Duration::from_millis(2)), Probe::Read, "a loss: refused, read first");
        let demoted = view_after(t0, &[replica()]);
        assert_eq!(demoted.probe(t0 + Duration::from_millis(1)), Probe::Read);
    }

    /// Redisson's rule counts what the default refuses for want of a replica, and nothing
    /// else: a lost replica or none at all counts (waiting for those online), a server that
    /// is no master still refuses, and the other verdicts stand.
    #[test]
    fn when_connected_counts_what_only_a_missing_replica_refused() {
        let t0 = Instant::now();
        let two_then_one = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
        let lost = Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 });
        assert_eq!(two_then_one.when_connected(lost), Verdict::Wait(1));
        let none = view_after(t0, &[master(1, true, 1), master(0, true, 1)]);
        assert_eq!(
            none.when_connected(Verdict::Refused(Refusal::LostReplica { before: 1, now: 0 })),
            Verdict::Confirmed
        );
        assert_eq!(none.when_connected(Verdict::Refused(Refusal::Alone)), Verdict::Confirmed);
        assert_eq!(none.when_connected(Verdict::Refused(Refusal::NotMaster)), Verdict::Refused(Refusal::NotMaster));
        assert_eq!(two_then_one.when_connected(Verdict::Wait(1)), Verdict::Wait(1));
        assert_eq!(none.when_connected(Verdict::Confirmed), Verdict::Confirmed);
    }
}
