//! Never two holders when the network splits. Each round builds a Sentinel deployment whose
//! replicas and sentinels reach the master through one proxy (the test kit's
//! `PartitionGroup`), with a holder whose client reaches the master directly: a client on
//! the master's side of a split. The holder takes the lock, and a worker writes under it (a
//! non-atomic GET/SET of a counter on a server of its own), checking the guard's watch
//! before each write; then the fault; then another client, following the sentinels (the
//! majority's side), waits for the lock and writes once it has it.
//!
//! The lock is a fenced lock. Asserted in every round, over all rounds before any
//! assertion fails (so that a run against a build without the fix says how many rounds
//! broke): the other client was granted no sooner than the holder's last `valid_until`,
//! the holder's last write came before that grant, the counter equals the writes made, and
//! the other's fencing token is greater than the holder's.
//!
//! Rounds: 2 per fault class by default (`REDLEASE_SPLIT_ROUNDS=N` for more); the holder's
//! watchdog lease is 6 s (`REDLEASE_SPLIT_LEASE_SECS=30` for the default watchdog's).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, ErrorKind};

use crate::helpers::*;
use crate::support::cluster_partition::PartitionedCluster;
use crate::support::partition::PartitionGroup;
use crate::support::server::RedisServer;

fn rounds() -> usize {
    std::env::var("REDLEASE_SPLIT_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(2)
}

fn lease() -> Duration {
    let secs = std::env::var("REDLEASE_SPLIT_LEASE_SECS").ok().and_then(|n| n.parse().ok()).unwrap_or(6);
    Duration::from_secs(secs)
}

/// How long a test waits for the other client's grant: the holder's lease, the promotion,
/// and room for a loaded machine.
fn patience() -> Duration {
    lease() * 2 + Duration::from_secs(30)
}

/// What one round saw.
struct Seen {
    /// When the other client had the lock (its wait returned).
    granted: Instant,
    /// The other client's fencing token.
    token: u64,
    /// When the sentinels' new master was first seen answering as one.
    promoted: Option<Instant>,
    /// What the holder did: `None` when its grant was refused (a replica could not confirm).
    holder: Option<Held>,
    /// The counter against the writes made.
    counter: u64,
    writes: u64,
}

/// What the holder's worker did.
struct Held {
    /// The holder's fencing token.
    token: u64,
    /// The latest `valid_until` the holder's watch gave before a write.
    valid_until: Instant,
    /// When the worker last checked its watch and wrote.
    last_write: Instant,
    /// Writes whose check came after the other's grant.
    writes_after: usize,
}

impl Seen {
    fn overlapped(&self) -> bool {
        self.counter != self.writes
            || self.tokens_went_back()
            || self
                .holder
                .as_ref()
                .is_some_and(|held| held.valid_until > self.granted || held.last_write >= self.granted)
    }

    /// The other's fencing token is not above the holder's: the grant it was made after
    /// was lost.
    fn tokens_went_back(&self) -> bool {
        self.holder.as_ref().is_some_and(|held| self.token <= held.token)
    }

    fn describe(&self) -> String {
        let ms = |later: Instant, earlier: Instant| {
            if later >= earlier {
                (later - earlier).as_secs_f64() * 1e3
            } else {
                -((earlier - later).as_secs_f64() * 1e3)
            }
        };
        let holder = match &self.holder {
            Some(held) => format!(
                "grant {:+.0} ms after the holder's valid_until, {:+.0} ms after its last write ({} writes after the grant), tokens {} then {}",
                ms(self.granted, held.valid_until),
                ms(self.granted, held.last_write),
                held.writes_after,
                held.token,
                self.token
            ),
            None => "the holder's grant was refused".to_owned(),
        };
        let promoted = match self.promotion_to_grant() {
            Some(took) => format!(
                "; granted {:.0} ms after the later of the promotion and the holder's deadline",
                took.as_secs_f64() * 1e3
            ),
            None => String::new(),
        };
        format!("{holder}, counter {} of {} writes{promoted}", self.counter, self.writes)
    }

    /// From the later of the promotion and the holder's deadline to the other's grant.
    fn promotion_to_grant(&self) -> Option<Duration> {
        let promoted = self.promoted?;
        let later = self.holder.as_ref().map_or(promoted, |held| promoted.max(held.valid_until));
        Some(self.granted.saturating_duration_since(later))
    }
}

/// The holder's worker: a write after each check of the watch, until the watch says no or
/// `stop` is set. Returns, per write, when its check was made and the `valid_until` it saw.
fn worker(
    watch: redlease::LeaseWatch,
    counter: String,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<Vec<(Instant, Instant)>> {
    thread::spawn(move || {
        let mut conn = redis::Client::open(counter).expect("url").get_connection().expect("counter server");
        let mut writes = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            // The moment is read before the check: a thread preempted between the check and
            // its write must not count as writing late.
            let checked = Instant::now();
            let Some(valid_until) = watch.valid_until() else { break };
            if !watch.is_valid() {
                break;
            }
            increment_non_atomically(&mut conn, "counter");
            writes.push((checked, valid_until));
            thread::sleep(Duration::from_millis(5));
        }
        writes
    })
}

/// A deployment whose links a round cuts: the holder reaches the master straight, the
/// other client follows the deployment.
trait Split {
    /// The holder's URL: the master of `name`, straight.
    fn holder_url(&self, name: &str) -> String;
    /// The other client's URL.
    fn url(&self) -> String;
    /// The lock a round takes, made of `base`.
    fn lock_name(&self, base: &str) -> String;
    /// Watches for the promotion of a replica (see the test kit's).
    fn watch_promotion(&self, timeout: Duration) -> thread::JoinHandle<Option<Instant>>;
    /// What each node says of its replication, for a failed round's message.
    fn describe(&self) -> String;
}

impl Split for PartitionGroup {
    fn holder_url(&self, _: &str) -> String {
        self.master().url()
    }
    fn url(&self) -> String {
        PartitionGroup::url(self)
    }
    fn lock_name(&self, base: &str) -> String {
        base.to_owned()
    }
    fn watch_promotion(&self, timeout: Duration) -> thread::JoinHandle<Option<Instant>> {
        PartitionGroup::watch_promotion(self, timeout)
    }
    fn describe(&self) -> String {
        PartitionGroup::describe(self)
    }
}

impl Split for PartitionedCluster {
    fn holder_url(&self, _: &str) -> String {
        self.first_master().url()
    }
    fn url(&self) -> String {
        PartitionedCluster::url(self)
    }
    fn lock_name(&self, base: &str) -> String {
        self.name_on_first_master(base)
    }
    fn watch_promotion(&self, timeout: Duration) -> thread::JoinHandle<Option<Instant>> {
        PartitionedCluster::watch_promotion(self, timeout)
    }
    fn describe(&self) -> String {
        PartitionedCluster::describe(self)
    }
}

/// The faults of a class: one before the holder asks for the lock, one after it has it
/// (or was refused it).
struct Faults<B, A> {
    before: B,
    after: A,
}

/// One round on `group`: `before` strikes, the holder asks for `name` (3 s), its worker
/// writes, `after` strikes, the other client waits for the lock and writes ten times once
/// it has it.
fn round<G, B, A>(group: &mut G, base: &str, faults: &Faults<B, A>) -> Seen
where
    G: Split,
    B: Fn(&mut G),
    A: Fn(&mut G),
{
    let name = &group.lock_name(base);
    let counter = RedisServer::start();
    let holder = Client::builder(group.holder_url(name))
        .watchdog_timeout(lease())
        .command_timeout(Duration::from_secs(1))
        .build()
        .expect("the holder's client, straight to the master");
    let other = Client::builder(group.url())
        .command_timeout(Duration::from_secs(1))
        .build()
        .expect("the other client, through the sentinels");
    (faults.before)(group);
    let guard = match holder.fenced_lock(name).try_lock_for(Duration::from_secs(3)) {
        Ok(guard) => guard,
        Err(err) if err.kind() == ErrorKind::NotReplicated => None,
        Err(err) => panic!("the holder: {err}"),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let writer = guard.as_ref().map(|guard| worker(guard.watch(), counter.url(), Arc::clone(&stop)));
    thread::sleep(Duration::from_millis(500));
    let promotion = group.watch_promotion(patience());
    (faults.after)(group);
    let deadline = Instant::now() + patience();
    let taken = loop {
        match other.fenced_lock(name).try_lock_until(deadline) {
            Ok(Some(taken)) => break taken,
            Ok(None) => panic!("the other client never got the lock within {:?}:\n{}", patience(), group.describe()),
            // Riding the failover out: asked again until the deadline.
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
            Err(err) => panic!("the other client: {err}\n{}", group.describe()),
        }
    };
    let granted = Instant::now();
    let (token, holder_token) = (taken.token(), guard.as_ref().map(|g| g.token()));
    let mut conn = counter.conn();
    for _ in 0..10 {
        increment_non_atomically(&mut conn, "counter");
        thread::sleep(Duration::from_millis(5));
    }
    // A holder that never learns (a renewal the replicas never got, counted) writes on:
    // stopped a second after the other's writes.
    thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::SeqCst);
    let writes = writer.map(|writer| writer.join().expect("the worker")).unwrap_or_default();
    let promoted = promotion.join().expect("the promotion's watch");
    drop(taken);
    drop(guard);
    holder.shutdown();
    other.shutdown();
    let counter_now: Option<u64> = redis::cmd("GET").arg("counter").query(&mut conn).expect("GET");
    let holder = writes.last().zip(holder_token).map(|(&(last_write, _), token)| Held {
        token,
        valid_until: writes.iter().map(|&(_, until)| until).max().unwrap_or(last_write),
        last_write,
        writes_after: writes.iter().filter(|&&(at, _)| at >= granted).count(),
    });
    Seen { granted, token, promoted, holder, counter: counter_now.unwrap_or(0), writes: writes.len() as u64 + 10 }
}

/// A Sentinel deployment of a replica per entry of `priorities` (their
/// `replica-priority`), each replica resyncing at once after a promotion: the new master's
/// wait for a replica (its no-grant window) does not hide an overlap behind it.
fn sentinel(priorities: &'static [u32]) -> impl Fn() -> PartitionGroup {
    move || PartitionGroup::start(priorities, &["--repl-diskless-sync-delay", "0"])
}

/// Runs `rounds()` rounds of one fault class, each on a fresh deployment from `start`,
/// prints them, and fails when any overlapped.
fn rounds_of<G, B, A>(class: &str, start: impl Fn() -> G, faults: Faults<B, A>) -> Vec<Seen>
where
    G: Split,
    B: Fn(&mut G),
    A: Fn(&mut G),
{
    let _turn = one_failover_test_at_a_time();
    let mut seen = Vec::new();
    for round_no in 0..rounds() {
        let mut group = start();
        seen.push(round(&mut group, &format!("{class}-{round_no}"), &faults));
    }
    let broken = seen.iter().filter(|s| s.overlapped()).count();
    let back = seen.iter().filter(|s| s.tokens_went_back()).count();
    for (i, s) in seen.iter().enumerate() {
        println!("{class} round {i}: {}", s.describe());
    }
    println!(
        "{class}: {broken} of {} rounds overlapped, fencing tokens went back in {back} (lease {:?})",
        seen.len(),
        lease()
    );
    assert_eq!(broken, 0, "{class}: the other client was granted while the holder could still write");
    seen
}

/// No fault.
fn nothing<G>(_: &mut G) {}

/// The renewal period of the holder's lease, and a little more.
fn renewal_period() -> Duration {
    lease() / 3 + Duration::from_millis(300)
}

/// **Split brain.** The master is cut off from its replicas and the sentinels; the holder
/// still reaches it. The sentinels promote a replica, and the other client is granted the
/// lock there once its key runs out. The holder's renewals go on answering "renewed" on the
/// isolated master, but no replica confirms them: its lease turns at risk and ends at the
/// deadline of its last confirmed renewal, which the promoted replica had.
///
/// Breaks if a renewal counts without its replicas (seen before renewals were confirmed: in
/// 2 of 2 rounds the holder's deadline lay 5.9 s beyond the other's grant, and it wrote on,
/// losing increments), or if the other client is slow to follow the promotion.
#[test]
fn split_brain_the_minority_holder_stops_before_the_majority_grants() {
    let after = |group: &mut PartitionGroup| group.isolate_master();
    let seen = rounds_of("split-brain", sentinel(&[100, 100]), Faults { before: nothing, after });
    // The majority's side is not slowed down: its client, its connections frozen with the
    // old master, follows the promotion and is granted soon after the later of it and the
    // holder's deadline (2 s, and a second of slack for a loaded machine).
    for s in &seen {
        let took = s.promotion_to_grant().expect("a promotion was seen");
        assert!(took < Duration::from_secs(3), "granted {took:?} after the later of the promotion and the deadline");
    }
}

/// **Renewals the replicas never got.** Replication alone is frozen while the holder renews
/// twice more on the master; then the master is killed and a replica promoted, without
/// those renewals (the other follows it, so that the new master grants). The holder's
/// deadline must be that of its last renewal the replicas had.
///
/// Breaks if an unconfirmed renewal extends the holder's deadline (seen before: the other
/// client granted 1.3-1.7 s before it in 2 of 2 rounds, the holder writing on).
#[test]
fn renewals_the_replicas_never_got_do_not_extend_the_deadline() {
    let after = |group: &mut PartitionGroup| {
        group.freeze_replication(0);
        group.freeze_replication(1);
        thread::sleep(renewal_period() * 2);
        group.kill_master();
    };
    rounds_of("unreplicated-renewals", sentinel(&[100, 100]), Faults { before: nothing, after });
}

/// **The replica that lags is promoted, a grant.** Of two replicas, the one that can never
/// be promoted (`replica-priority 0`) keeps up, and the other's link is frozen before the
/// holder asks: a grant waits for both and is refused. The master is killed and the
/// lagging replica promoted; the other client is granted there.
///
/// Breaks if one replica's acknowledgement is enough (seen before: the holder granted on
/// the word of the replica that cannot be promoted, and the other client granted on the
/// promoted one, which never had the key, 2.0-2.4 s before the holder's deadline, in 2 of 2
/// rounds).
#[test]
fn a_grant_the_lagging_replica_never_got_is_not_given() {
    let seen = rounds_of(
        "lagging-replica-grant",
        sentinel(&[0, 100]),
        Faults {
            before: |group: &mut PartitionGroup| group.freeze_replication(1),
            after: |group: &mut PartitionGroup| group.kill_master(),
        },
    );
    assert!(seen.iter().all(|s| s.holder.is_none()), "no grant while a replica that can be promoted lags");
}

/// **The replica that lags is promoted, renewals.** As above, but the holder has the lock
/// (both replicas confirmed it) when the promotable replica's link freezes; its renewals
/// after that are not confirmed, and its deadline is that of the last one both had.
///
/// Breaks if one replica's acknowledgement confirms a renewal (seen before: the other
/// client granted 1.6-1.9 s before the holder's deadline in 2 of 2 rounds, increments lost;
/// with the default 30 s watchdog, `REDLEASE_SPLIT_LEASE_SECS=30`, 16.1 s before it).
#[test]
fn renewals_the_lagging_replica_never_got_do_not_extend_the_deadline() {
    let after = |group: &mut PartitionGroup| {
        group.freeze_replication(1);
        thread::sleep(renewal_period() * 2);
        group.kill_master();
    };
    rounds_of("lagging-replica-renewals", sentinel(&[0, 100]), Faults { before: nothing, after });
}

/// **A cluster master cut off.** A master of a cluster (three masters, a replica each and a
/// second for this one, node timeout 1 s) is cut off from its replicas and the other
/// masters, its links in and out silent; the holder still reaches it. The majority fails it
/// over to a replica (the other follows it), and the other client, a cluster client, is
/// granted there once the key runs out. The holder's
/// renewals on the cut-off master are not confirmed. The master itself refuses commands
/// once it finds itself in the minority, a node timeout on: the cut comes 0.2 s before the
/// holder's first renewal, which the master still answers.
///
/// Breaks if a renewal counts without its replica (seen before renewals were confirmed: the
/// other client granted 1.4-1.9 s before the holder's deadline in 2 of 2 rounds, increments lost).
#[test]
fn a_cluster_master_cut_off_stops_its_holder_before_the_majority_grants() {
    let after = |cluster: &mut PartitionedCluster| {
        // The round slept 0.5 s after the grant; the first renewal goes at a third of the
        // lease.
        thread::sleep(lease() / 3 - Duration::from_millis(700));
        cluster.isolate_first_master();
    };
    rounds_of("cluster-split", PartitionedCluster::start, Faults { before: nothing, after });
}
