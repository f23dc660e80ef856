//! What a client knows of one master's replicas, and what that makes of a grant made there:
//! the pure state machine behind replica-synced grants (`engine::replicas` does the I/O).
//!
//! A grant is worth what the master it was made on is worth. A master that lost a replica
//! a moment ago may be an old master whose replica was just promoted: it stays writable
//! until the sentinels demote it, and what it grants then is thrown away with its history.
//! So the client keeps, per master (a pool's connection generation), the last
//! [`Reading`] of its replication state, taken on a grant's own connection *after* the
//! grant, and decides from it and the one before:
//!
//! - a replica **went** when the count fell, or when more replicas synced with the master
//!   since the last reading than the count grew by (one attached and left unseen between
//!   two readings: the sync counter moves at every attach, so nothing passes unseen);
//!   the loss is made good when the master has as many replicas again as at the last
//!   reading (and at least one);
//! - after a replica went, the master grants nothing for [`HOLD_DOWN`] while it has fewer
//!   replicas than before the loss (longer than Sentinel takes from promoting a replica to
//!   demoting the old master it can reach), unless every replica that went was asked
//!   since and is no master: its server refused the connection (its process is gone), or
//!   it answered as a replica of this master. A replica that went because it was promoted
//!   answers as a master (it takes the role before it drops its link); one that cannot be
//!   reached, or answers otherwise, keeps the hold-down;
//! - otherwise a **replicated** master (one with a replica, or with a replication backlog:
//!   a replica was attached within `repl-backlog-ttl`, an hour by default) grants once an
//!   online replica has the grant (`WAIT 1`), and grants nothing while it has none: a
//!   master alone for now may be an old master whose replica was promoted, or a new one
//!   whose next replica could be promoted before it has synced (Sentinel promotes a
//!   replica whose link has been down for less than ten times `down-after-milliseconds`,
//!   which a replica still loading its first sync is), and either way a grant it made
//!   alone would be lost. This is Redis's own `min-replicas-to-write 1`, seen from the
//!   client;
//! - an **unreplicated** master (no replica, no backlog: a single server) grants at once:
//!   there is nothing to fail over to. So does a replicated master that lost its replicas
//!   when each one that went, asked, is gone (its server refuses the connection), and
//!   every replica that went before and has not come back is gone too: none can be
//!   promoted while it is gone, and one that starts again syncs from this master before
//!   its link is up (a failover during that first sync is a second fault; see
//!   [`guide::guarantees`](crate::guide::guarantees#replication-and-failover)). Asked once per loss, also after its hold-down; one that
//!   cannot be reached, or answers, keeps the master `Alone`.
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
//! | loss within `HOLD_DOWN`, each replica that went asked and found no master | any | the rows below |
//! | loss within `HOLD_DOWN` | fewer replicas than before the loss | refused: `LostReplica` |
//! | any | ≥ 1 replica | `Wait` |
//! | any | no replica, backlog active, each replica that went of the last loss asked and found gone | `Confirmed` |
//! | any | no replica, backlog active | refused: `Alone` |
//! | any | no replica, no backlog | `Confirmed` |
//!
//! | before the grant's reply | probe |
//! |---|---|
//! | last reading: master, no replica, no backlog, younger than `SETTLE` | `Skip`: confirmed without a reading |
//! | last reading: ≥ 1 replica | `ReadAndWait`: the reading and `WAIT 1` in one round trip |
//! | anything else (no reading, an old one, a replicated master without replicas) | `Read` (then `WAIT 1` if the verdict says so) |

use std::time::{Duration, Instant};

/// How long a master that lost a replica grants nothing while it has fewer than before:
/// longer than Sentinel takes from promoting a replica to demoting the old master it can
/// reach. (An old master cut off from the sentinels for longer is what the server's
/// `min-replicas-to-write` is for: see [`guide::deployment`](crate::guide::deployment#sentinel).)
pub(crate) const HOLD_DOWN: Duration = Duration::from_secs(10);

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
    /// `repl_backlog_active`: a replica was attached within `repl-backlog-ttl`.
    pub(crate) backlog: bool,
    /// `sync_full + sync_partial_ok`: replicas that attached since the server started.
    pub(crate) syncs: u64,
    /// The connected replicas' addresses (`slaveN` lines), as far as they are listed.
    pub(crate) attached: Vec<Node>,
    /// `master_replid`: the history the server's data belongs to. A replica takes its
    /// master's when it syncs, and keeps it while its link is down; a promoted one takes
    /// a new one.
    pub(crate) replid: Option<String>,
}

impl Reading {
    /// Reads the fields out of the text of `INFO replication` followed by `INFO stats`.
    /// `None` when one is missing or malformed.
    pub(crate) fn parse(info: &str) -> Option<Reading> {
        let field = |name: &str| info_field(info, name);
        let number = |name: &str| field(name)?.parse::<u64>().ok();
        let mut attached: Vec<Node> = info.lines().filter_map(replica_line).collect();
        attached.sort_unstable();
        Some(Reading {
            master: field("role")? == "master",
            replicas: number("connected_slaves")?,
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
}

/// The value of the field `name` in the text of an `INFO` reply (`name:value` lines).
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(':')).map(str::trim)
}

/// The address of a `slaveN:ip=…,port=…,state=…` line of `INFO replication`.
fn replica_line(line: &str) -> Option<Node> {
    let (name, fields) = line.trim().split_once(':')?;
    name.strip_prefix("slave")?.parse::<u32>().ok()?;
    let field = |key: &str| fields.split(',').find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='));
    Some((field("ip")?.to_owned(), field("port")?.parse().ok()?))
}

impl Found {
    /// What `INFO replication` of a replica that went says of it, against the master's
    /// `replid`: a replica with the master's history, or it may be a master.
    pub(crate) fn from_answer(info: &str, replid: Option<&str>) -> Found {
        match (info_field(info, "role"), info_field(info, "master_replid"), replid) {
            (Some("slave"), Some(theirs), Some(ours)) if theirs == ours => Found::ReplicaOfThisMaster,
            _ => Found::Unknown,
        }
    }
}

/// What to read after a grant, before it is confirmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Nothing: the master is known to be unreplicated, as of a moment ago.
    Skip,
    /// A reading; `WAIT` only if it says so.
    Read,
    /// A reading and `WAIT 1`, in one round trip (the master had replicas).
    ReadAndWait,
}

/// What a reading makes of a grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing to wait for: the grant stands.
    Confirmed,
    /// The grant stands once a replica has it (`WAIT 1`).
    Wait,
    /// The grant must be taken back.
    Refused(Refusal),
}

impl Verdict {
    /// The verdict when grants wait for a replica only when one is connected (Redisson's
    /// rule, `ReplicaPolicy::WhenConnected`): a master that lost a replica, or that has
    /// none for now, grants all the same, waiting for the `replicas` it has, if any. A
    /// server that is no master still refuses.
    pub(crate) fn when_connected(self, replicas: u64) -> Verdict {
        match self {
            Verdict::Refused(Refusal::LostReplica { .. } | Refusal::Alone) if replicas > 0 => Verdict::Wait,
            Verdict::Refused(Refusal::LostReplica { .. } | Refusal::Alone) => Verdict::Confirmed,
            other => other,
        }
    }
}

/// Why a grant was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The server is no master (any more).
    NotMaster,
    /// It lost a replica within [`HOLD_DOWN`]: `before` it had that many, `now` fewer.
    LostReplica { before: u64, now: u64 },
    /// It is replicated, and has no replica to confirm a grant.
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
    /// Under way, or done without clearing the loss: it holds the master down to its end.
    Kept,
    /// Each was found no master: the loss holds nothing down.
    NoMaster,
    /// Each was found gone (nothing runs at its address): none can be promoted, and a
    /// master left without a replica is as a single server.
    AllGone,
}

impl Asked {
    fn cleared(self) -> bool {
        matches!(self, Asked::NoMaster | Asked::AllGone)
    }
}

/// What asking a replica that went found (see [`ReplicaView::answered`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// Its server refused the connection: nothing runs there, no master either.
    Gone,
    /// It answered as a replica of the master it went from.
    ReplicaOfThisMaster,
    /// A master, a replica of another, no answer, an error: it may have been promoted.
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
    last: Option<(Instant, Reading)>,
    loss: Option<Loss>,
}

impl ReplicaView {
    /// What to read after a grant at `now`.
    pub(crate) fn probe(&self, now: Instant) -> Probe {
        match &self.last {
            Some((at, last)) if last.unreplicated() && now.saturating_duration_since(*at) < SETTLE => Probe::Skip,
            Some((_, last)) if last.master && last.replicas > 0 => Probe::ReadAndWait,
            _ => Probe::Read,
        }
    }

    /// Takes in `reading`, made at `now`, and says what it makes of a grant made before it.
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
                    if held_down(loss, now) && !loss.asked.cleared() { before.max(loss.before) } else { before }
                }
                None => before,
            };
            gone.sort_unstable();
            gone.dedup();
            self.loss = Some(Loss { at: now, before, went: gone, asked: Asked::No });
        }
        self.last = Some((now, reading));
        self.judge(now)
    }

    /// The replicas to ask about the last loss, not asked yet: they count as asked from now
    /// (a grant meanwhile stays refused). `None` when there is none, or when the readings
    /// could not name a replica that went (then the hold-down runs its course, and a master
    /// left without a replica stays `Alone`).
    pub(crate) fn replicas_to_ask(&mut self) -> Option<ToAsk> {
        let loss = self.loss.as_mut().filter(|loss| loss.asked == Asked::No)?;
        if loss.went.is_empty() {
            return None;
        }
        loss.asked = Asked::Kept;
        Some(ToAsk { loss: loss.at, replicas: loss.went.clone() })
    }

    /// What asking the replicas of the loss seen at `loss` found, each: when none may be a
    /// master, the loss holds nothing down any more, and when each is gone, a master left
    /// without a replica grants as a single server does. Says, at `now`, what the last
    /// reading makes of a grant.
    pub(crate) fn answered(&mut self, loss: Instant, found: &[Found], now: Instant) -> Verdict {
        if let Some(current) = self.loss.as_mut().filter(|current| current.at == loss)
            && !found.is_empty()
        {
            if found.iter().all(|found| *found == Found::Gone) {
                current.asked = Asked::AllGone;
            } else if found.iter().all(|found| *found != Found::Unknown) {
                current.asked = Asked::NoMaster;
            }
        }
        self.judge(now)
    }

    /// What the last reading, and the loss, make of a grant at `now`.
    fn judge(&self, now: Instant) -> Verdict {
        let Some((_, reading)) = &self.last else { return Verdict::Refused(Refusal::NotMaster) };
        if !reading.master {
            return Verdict::Refused(Refusal::NotMaster);
        }
        match &self.loss {
            Some(loss) if held_down(loss, now) && !loss.asked.cleared() && reading.replicas < loss.before => {
                Verdict::Refused(Refusal::LostReplica { before: loss.before, now: reading.replicas })
            }
            _ if reading.replicas > 0 => Verdict::Wait,
            Some(loss) if loss.asked == Asked::AllGone => Verdict::Confirmed,
            _ if reading.backlog => Verdict::Refused(Refusal::Alone),
            _ => Verdict::Confirmed,
        }
    }
}

/// Whether the loss is still within its hold-down at `now`.
fn held_down(loss: &Loss, now: Instant) -> bool {
    now.saturating_duration_since(loss.at) < HOLD_DOWN
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

    /// A master with `replicas` replicas, listed as `127.0.0.11:7000`, `127.0.0.11:7001`, …
    fn master(replicas: u64, backlog: bool, syncs: u64) -> Reading {
        let attached = (0..replicas).map(|i| node(i as u16)).collect();
        Reading { master: true, replicas, backlog, syncs, attached, replid: Some(REPLID.to_owned()) }
    }

    const REPLID: &str = "8f3ab6c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6";

    fn node(i: u16) -> Node {
        ("127.0.0.11".to_owned(), 7000 + i)
    }

    fn replica() -> Reading {
        Reading {
            master: false,
            replicas: 0,
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
        let two = text.replace(
            "slave0:ip=127.0.0.1,port=7001",
            "slave0:ip=127.0.0.2,port=7002,state=online,offset=1,lag=0\r\nslave1:ip=127.0.0.1,port=7001",
        );
        let listed = Reading::parse(&two).expect("parses").attached;
        assert_eq!(listed, [("127.0.0.1".to_owned(), 7001), ("127.0.0.2".to_owned(), 7002)], "sorted");
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
        // A loss whose replica that went was asked and is no master: the rows below.
        let mut view = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
        let asked = view.replicas_to_ask().expect("named");
        assert_eq!(view.answered(asked.loss, &[Found::Gone], later(2)), Verdict::Wait);
        // A count that falls is a loss; the master is held down while it has fewer.
        let mut view = view_after(t0, &[master(2, true, 2)]);
        let lost = Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 });
        assert_eq!(view.observe(later(5), master(1, true, 2)), lost);
        assert_eq!(view.observe(later(9_000), master(1, true, 2)), lost);
        // Made good (the replica came back): wait for one, within the hold-down too.
        assert_eq!(view.observe(later(9_100), master(2, true, 3)), Verdict::Wait);
        // Older than the hold-down, with a replica: wait for it.
        let mut view = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
        assert_eq!(view.observe(later(1) + HOLD_DOWN, master(1, true, 2)), Verdict::Wait);
        // With replicas, fresh: wait.
        assert_eq!(ReplicaView::default().observe(t0, master(1, true, 1)), Verdict::Wait);
        // Replicated and alone, fresh or after the hold-down: refused.
        assert_eq!(ReplicaView::default().observe(t0, master(0, true, 7)), Verdict::Refused(Refusal::Alone));
        let mut view = view_after(t0, &[master(1, true, 1), master(0, true, 1)]);
        assert_eq!(view.observe(later(1) + HOLD_DOWN, master(0, true, 1)), Verdict::Refused(Refusal::Alone));
        // Unreplicated: confirmed at once.
        assert_eq!(ReplicaView::default().observe(t0, master(0, false, 0)), Verdict::Confirmed);
        assert_eq!(view_after(t0, &[master(0, false, 0)]).observe(later(5), master(0, false, 0)), Verdict::Confirmed);
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
        assert_eq!(view.observe(t0 + Duration::from_millis(500), master(1, true, 5)), Verdict::Wait);
        // A counter that went back says nothing: taken for a loss.
        let mut view = view_after(t0, &[master(0, true, 4)]);
        assert!(matches!(view.observe(t0 + Duration::from_millis(500), master(0, true, 0)), Verdict::Refused(_)));
    }

    /// A replica link that blips (the replica drops and resyncs between readings) costs a
    /// loss that is made good at once: the grant waits for the replica, as before the blip.
    #[test]
    fn a_replica_that_resynced_between_readings_is_waited_for() {
        let t0 = Instant::now();
        let mut view = view_after(t0, &[master(1, true, 1)]);
        assert_eq!(view.observe(t0 + Duration::from_millis(50), master(1, true, 2)), Verdict::Wait);
    }

    /// With several replicas, one promoted leaves the others attached to the old master for a
    /// while: their confirmations would be lost with it, so fewer than before is refused.
    #[test]
    fn one_of_several_replicas_going_holds_the_master_down() {
        let t0 = Instant::now();
        let mut view = view_after(t0, &[master(2, true, 2)]);
        let verdict = view.observe(t0 + Duration::from_millis(5), master(1, true, 2));
        assert_eq!(verdict, Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 }));
        // A second loss before the first is made good keeps the count before the first.
        let verdict = view.observe(t0 + Duration::from_millis(10), master(0, true, 2));
        assert_eq!(verdict, Verdict::Refused(Refusal::LostReplica { before: 2, now: 0 }));
    }

    /// The row of the verdict table for a loss whose replicas were asked: one of two
    /// replicas went, and each answer that shows it cannot be a master lifts the hold-down
    /// at once; an answer that may be a master keeps it to its end, and it is asked once.
    #[test]
    fn a_replica_that_went_and_is_no_master_holds_nothing_down() {
        let t0 = Instant::now();
        let lost = Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 });
        for (found, verdict) in
            [(Found::Gone, Verdict::Wait), (Found::ReplicaOfThisMaster, Verdict::Wait), (Found::Unknown, lost)]
        {
            let mut view = view_after(t0, &[master(2, true, 2)]);
            let at = t0 + Duration::from_millis(5);
            assert_eq!(view.observe(at, master(1, true, 2)), lost);
            let asked = view.replicas_to_ask().expect("the replica that went is named");
            assert_eq!(asked, ToAsk { loss: at, replicas: vec![node(1)] });
            assert_eq!(view.replicas_to_ask(), None, "asked once, also while the answer is awaited");
            assert_eq!(view.observe(at + Duration::from_millis(1), master(1, true, 2)), lost, "refused meanwhile");
            assert_eq!(view.answered(asked.loss, &[found], at + Duration::from_millis(2)), verdict, "{found:?}");
            assert_eq!(view.observe(at + Duration::from_millis(3), master(1, true, 2)), verdict, "{found:?}, later");
            assert_eq!(view.replicas_to_ask(), None);
        }
        // Two went: both must be found no master.
        let mut view = view_after(t0, &[master(3, true, 3)]);
        let at = t0 + Duration::from_millis(5);
        view.observe(at, master(1, true, 3));
        let asked = view.replicas_to_ask().expect("named");
        assert_eq!(asked.replicas, [node(1), node(2)]);
        let lost = Verdict::Refused(Refusal::LostReplica { before: 3, now: 1 });
        assert_eq!(view.answered(asked.loss, &[Found::Gone, Found::Unknown], at), lost);
    }

    /// Asking has nothing to go on, or comes too late: the hold-down runs its course.
    #[test]
    fn a_loss_not_asked_about_holds_the_master_down_as_before() {
        let t0 = Instant::now();
        // A replica came and went between two readings: no reading names it.
        let mut view = view_after(t0, &[master(0, true, 4)]);
        view.observe(t0 + Duration::from_millis(5), master(0, true, 5));
        assert_eq!(view.replicas_to_ask(), None);
        // The answer concerns an earlier loss: a later one stays.
        let mut view = view_after(t0, &[master(3, true, 3), master(2, true, 3)]);
        let first = view.replicas_to_ask().expect("named");
        let later = Verdict::Refused(Refusal::LostReplica { before: 3, now: 1 });
        assert_eq!(view.observe(t0 + Duration::from_millis(2), master(1, true, 3)), later);
        assert_eq!(view.answered(first.loss, &[Found::Gone], t0 + Duration::from_millis(3)), later);
        let second = view.replicas_to_ask().expect("the later loss is asked about");
        assert_eq!(second.replicas, [node(1), node(2)], "with the replica of the loss before, still away");
        // No answer at all clears nothing.
        let mut view = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
        let asked = view.replicas_to_ask().expect("named");
        assert!(matches!(view.answered(asked.loss, &[], t0 + Duration::from_millis(2)), Verdict::Refused(_)));
    }

    /// A master that lost its last replica, and the client found that replica's server
    /// gone: nothing can be promoted over it, and it grants as a single server does; any
    /// other answer leaves it `Alone`. A replica that comes back is waited for again, and
    /// when it goes again it is asked again.
    #[test]
    fn a_master_whose_replicas_are_all_gone_grants_as_a_single_server() {
        let t0 = Instant::now();
        let ms = |ms: u64| t0 + Duration::from_millis(ms);
        for (found, verdict) in [
            (Found::Gone, Verdict::Confirmed),
            (Found::ReplicaOfThisMaster, Verdict::Refused(Refusal::Alone)),
            (Found::Unknown, Verdict::Refused(Refusal::LostReplica { before: 1, now: 0 })),
        ] {
            let mut view = view_after(t0, &[master(1, true, 1)]);
            assert_eq!(
                view.observe(ms(5), master(0, true, 1)),
                Verdict::Refused(Refusal::LostReplica { before: 1, now: 0 })
            );
            let asked = view.replicas_to_ask().expect("named");
            assert_eq!(view.answered(asked.loss, &[found], ms(6)), verdict, "{found:?}");
            assert_eq!(view.observe(ms(7), master(0, true, 1)), verdict, "{found:?}, the next grant");
        }
        // Not asked while the hold-down ran (no grant came): asked after it.
        let mut view = view_after(t0, &[master(1, true, 1), master(0, true, 1)]);
        let after = ms(2) + HOLD_DOWN;
        assert_eq!(view.observe(after, master(0, true, 1)), Verdict::Refused(Refusal::Alone));
        let asked = view.replicas_to_ask().expect("asked after the hold-down too");
        assert_eq!(view.answered(asked.loss, &[Found::Gone], after), Verdict::Confirmed);
        // It comes back: waited for. It goes again: asked again.
        assert_eq!(view.observe(after + Duration::from_millis(1), master(1, true, 2)), Verdict::Wait);
        view.observe(after + Duration::from_millis(2), master(0, true, 2));
        assert_eq!(view.replicas_to_ask().map(|a| a.replicas), Some(vec![node(0)]));
    }

    /// Every replica still away is asked at each loss: one found a replica of this master
    /// (alive, its link down: it could be promoted) before keeps a master that lost its
    /// last replica since `Alone`, though that one is gone.
    #[test]
    fn a_replica_still_away_from_an_earlier_loss_is_asked_again() {
        let t0 = Instant::now();
        let ms = |ms: u64| t0 + Duration::from_millis(ms);
        let mut view = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
        let first = view.replicas_to_ask().expect("named");
        assert_eq!(first.replicas, [node(1)]);
        assert_eq!(view.answered(first.loss, &[Found::ReplicaOfThisMaster], ms(2)), Verdict::Wait);
        view.observe(ms(3), master(0, true, 2));
        let second = view.replicas_to_ask().expect("named");
        assert_eq!(second.replicas, [node(0), node(1)]);
        let verdict = view.answered(second.loss, &[Found::Gone, Found::ReplicaOfThisMaster], ms(4));
        assert_eq!(verdict, Verdict::Refused(Refusal::Alone));
        // Both gone: as a single server.
        view.observe(ms(5), master(1, true, 3));
        view.observe(ms(6), master(0, true, 3));
        let third = view.replicas_to_ask().expect("named");
        assert_eq!(view.answered(third.loss, &[Found::Gone, Found::Gone], ms(7)), Verdict::Confirmed);
    }

    #[test]
    fn an_answer_shows_a_replica_of_this_master_only_with_its_history() {
        let answer = |role: &str, replid: &str| format!("# Replication\r\nrole:{role}\r\nmaster_replid:{replid}\r\n");
        assert_eq!(Found::from_answer(&answer("slave", REPLID), Some(REPLID)), Found::ReplicaOfThisMaster);
        assert_eq!(Found::from_answer(&answer("master", REPLID), Some(REPLID)), Found::Unknown, "promoted");
        assert_eq!(Found::from_answer(&answer("slave", "other"), Some(REPLID)), Found::Unknown, "another history");
        assert_eq!(Found::from_answer(&answer("slave", REPLID), None), Found::Unknown, "the master did not say");
        assert_eq!(Found::from_answer("", Some(REPLID)), Found::Unknown);
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
        let replicated = view_after(t0, &[master(1, true, 3)]);
        assert_eq!(replicated.probe(t0 + Duration::from_millis(1)), Probe::ReadAndWait);
        let demoted = view_after(t0, &[replica()]);
        assert_eq!(demoted.probe(t0 + Duration::from_millis(1)), Probe::Read);
    }

    /// Redisson's rule gives what the default refuses for want of a replica, and nothing
    /// else: a lost replica or none at all grants (waiting for those connected), a server
    /// that is no master still refuses, and the other verdicts stand.
    #[test]
    fn when_connected_grants_what_only_a_missing_replica_refused() {
        let lost = Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 });
        assert_eq!(lost.when_connected(1), Verdict::Wait);
        assert_eq!(Verdict::Refused(Refusal::LostReplica { before: 1, now: 0 }).when_connected(0), Verdict::Confirmed);
        assert_eq!(Verdict::Refused(Refusal::Alone).when_connected(0), Verdict::Confirmed);
        assert_eq!(Verdict::Refused(Refusal::NotMaster).when_connected(1), Verdict::Refused(Refusal::NotMaster));
        assert_eq!(Verdict::Wait.when_connected(1), Verdict::Wait);
        assert_eq!(Verdict::Confirmed.when_connected(0), Verdict::Confirmed);
    }
}
