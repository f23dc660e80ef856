//! Replica-synced grants: a master whose replica follows it through a proxy that can lag or
//! cut the replication link. With `sync_replicas` (the default) a grant is given only once a
//! replica has it, so a failover right after it cannot lose it; without it, a grant and an
//! immediate failover give the lock twice.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, ErrorKind};

use crate::helpers::*;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

/// A master, and a replica that follows it through `link`.
struct Pair {
    master: RedisServer,
    link: Proxy,
    replica: RedisServer,
}

fn info_field(conn: &mut redis::Connection, section: &str, field: &str) -> Option<String> {
    let info: String = redis::cmd("INFO").arg(section).query(conn).expect("INFO");
    info.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_owned()))
}

impl Pair {
    fn start() -> Pair {
        // A full resync (after each test failover) starts at once, not after diskless
        // replication's default 5 s delay.
        let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
        let link = Proxy::start(master.addr());
        let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &link.addr().port().to_string()]);
        let pair = Pair { master, link, replica };
        pair.wait_in_sync();
        pair
    }

    /// Waits until the replica's link is up, it has everything the master has, and the
    /// master counts it as an online replica (as `ROLE` lists it; a replica still syncing
    /// is not one a grant can wait for).
    fn wait_in_sync(&self) {
        let (mut master, mut replica) = (self.master.conn(), self.replica.conn());
        let synced = wait_until(Duration::from_secs(15), || {
            info_field(&mut replica, "replication", "master_link_status").as_deref() == Some("up")
                && info_field(&mut master, "replication", "master_repl_offset")
                    == info_field(&mut replica, "replication", "slave_repl_offset")
                && info_field(&mut master, "replication", "slave0").is_some_and(|s| s.contains("state=online"))
        });
        assert!(synced, "the replica caught up with the master");
    }

    /// The failover this test can make without sentinels: the replica stops following and
    /// becomes a master, with whatever it had received.
    fn promote_replica(&self) {
        redis::cmd("REPLICAOF").arg("NO").arg("ONE").query::<()>(&mut self.replica.conn()).expect("REPLICAOF NO ONE");
    }

    /// Makes the replica follow the master again, from scratch.
    fn reattach(&self) {
        redis::cmd("FLUSHALL").query::<()>(&mut self.master.conn()).expect("FLUSHALL");
        redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(self.link.addr().port())
            .query::<()>(&mut self.replica.conn())
            .expect("REPLICAOF");
        self.wait_in_sync();
    }
}

fn client(url: &str, sync: bool) -> Client {
    Client::builder(url)
        .command_timeout(Duration::from_secs(2))
        .sync_replicas(sync)
        .replica_sync_timeout(Duration::from_secs(2))
        .build()
        .expect("client")
}

/// A grant waits for the replica: once `lock()` returns, the replica has the lock. With the
/// replication link cut, a grant cannot be confirmed: it is refused with `NotReplicated`
/// within the sync timeout, and undone on the master.
///
/// Breaks if a grant returns before the replica has it, if an unconfirmed grant is given
/// (or hangs), or if it is left on the master.
#[test]
fn a_grant_is_given_once_a_replica_has_it_and_refused_and_undone_when_none_can() {
    let pair = Pair::start();
    let client = client(&pair.master.url(), true);
    pair.link.set_latency(Duration::from_millis(100));
    let guard = client.lock("synced").with_lease(Duration::from_secs(30)).lock().expect("granted");
    assert!(exists(&mut pair.replica.conn(), "synced"), "the replica has the grant when lock() returns");
    guard.unlock().expect("released");

    pair.link.set_latency(Duration::ZERO);
    pair.link.set_blackhole(true);
    let started = Instant::now();
    let err = client.lock("cut").try_lock().expect_err("no replica can confirm");
    let took = started.elapsed();
    assert_eq!(err.kind(), ErrorKind::NotReplicated, "{err}");
    assert!(took < Duration::from_secs(2) + Duration::from_secs(2), "refused within the sync timeout: {took:?}");
    assert!(!exists(&mut pair.master.conn(), "cut"), "the unconfirmed grant was undone");

    // Without replicas there is nothing to wait for.
    let alone = RedisServer::start();
    let lone = self::client(&alone.url(), true);
    lone.lock("alone").try_lock().expect("no replica").expect("granted").unlock().expect("released");
}

/// What a failover right after a grant does, in rounds: a client takes the lock on the
/// master while replication lags 150 ms, the replica is promoted at once, and a second
/// client tries the same lock on it. Both then run a critical section that increments a
/// counter non-atomically (GET, pause, SET) on a third server. A double grant loses an
/// increment. Without `sync_replicas` the grant is lost in (nearly) every round; with it,
/// never.
///
/// Breaks if a synced grant is ever lost in a failover (the counter falls behind the
/// number of sections), or if the test's failover does not lose unsynced grants at all
/// (then it tests nothing).
#[test]
fn failover_rounds_lose_grants_only_without_replica_sync() {
    const ROUNDS: usize = 20;
    let pair = Pair::start();
    let history = RedisServer::start();
    let mut outcomes = Vec::new();
    // Grants refused, and why: the promoted replica has no replica (`Alone`), so a grant
    // the second client is given there is refused too.
    let mut refused = Vec::new();
    for sync in [false, true] {
        let (mut sections, mut doubles) = (0usize, 0usize);
        for round in 0..ROUNDS {
            pair.reattach();
            pair.link.set_latency(Duration::from_millis(150));
            let first = client(&pair.master.url(), sync);
            let granted = match first.lock("x").with_lease(Duration::from_secs(30)).try_lock() {
                Ok(guard) => guard,
                Err(err) if err.kind() == ErrorKind::NotReplicated => {
                    refused.push(format!("round {round}, first client: {err}"));
                    None
                }
                Err(err) => panic!("round {round}: {err}"),
            };
            assert!(granted.is_some() || sync, "without sync a free lock is always granted");
            pair.promote_replica();
            pair.link.set_latency(Duration::ZERO);
            let second = client(&pair.replica.url(), sync);
            let taken = match second.lock("x").with_lease(Duration::from_secs(30)).try_lock() {
                Ok(guard) => guard,
                Err(err) if err.kind() == ErrorKind::NotReplicated && sync => {
                    refused.push(format!("round {round}, second client: {err}"));
                    None
                }
                Err(err) => panic!("round {round}, second client: {err}"),
            };
            let counter = format!("counter-{sync}-{round}");
            let holders = usize::from(granted.is_some()) + usize::from(taken.is_some());
            sections += holders;
            // Each holder's critical section, at the same time.
            thread::scope(|scope| {
                for _ in 0..holders {
                    let (url, counter) = (history.url(), counter.clone());
                    scope.spawn(move || {
                        let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
                        let value: Option<u64> = redis::cmd("GET").arg(&counter).query(&mut conn).unwrap();
                        thread::sleep(Duration::from_millis(50));
                        redis::cmd("SET").arg(&counter).arg(value.unwrap_or(0) + 1).query::<()>(&mut conn).unwrap();
                    });
                }
            });
            let count: Option<u64> = redis::cmd("GET").arg(&counter).query(&mut history.conn()).unwrap();
            if holders > 0 && count.unwrap_or(0) < holders as u64 {
                doubles += 1;
            }
            drop((granted, taken));
        }
        outcomes.push((sync, sections, doubles));
    }
    println!("failover rounds (sync_replicas, critical sections, double grants): {outcomes:?}; refused: {refused:?}");
    let [(_, unsynced_sections, unsynced_doubles), (_, synced_sections, synced_doubles)] = outcomes[..] else {
        unreachable!()
    };
    assert_eq!(synced_doubles, 0, "with sync_replicas no grant is lost in a failover: {outcomes:?}");
    // A loaded machine (CI, with the failover runs beside) once had a first grant wait out
    // its `WAIT`: the round then has no holder, since the promoted replica grants nothing.
    assert!(
        synced_sections + 2 >= ROUNDS,
        "with sync_replicas nearly every round had a holder: {outcomes:?}; refused: {refused:#?}"
    );
    assert!(
        unsynced_doubles * 2 >= ROUNDS,
        "without it the lagging replica loses most grants ({unsynced_doubles} of {ROUNDS}, {unsynced_sections} sections): the test's failover works"
    );
}

/// A failover as the old master sees it: its replica is promoted and leaves, and for a
/// while it is still a master, with no replica. A grant there is lost with it, so a master
/// seen losing its last replica grants nothing for the hold-down (10 s): every try in that
/// window is refused with `NotReplicated` and leaves nothing. The promoted replica, alone,
/// grants nothing either, until the old master follows it.
///
/// Breaks if "no replica any more" is taken as "nothing to wait for" (the grant is given,
/// and two clients hold the lock), on the first try or the next ones, or if the promoted
/// replica grants before a replica follows it, or not once one does.
#[test]
fn a_master_that_just_lost_its_replica_to_a_promotion_grants_nothing() {
    let pair = Pair::start();
    let old = client(&pair.master.url(), true);
    old.lock("before").try_lock().expect("synced").expect("granted").unlock().expect("released");
    pair.promote_replica();
    let mut master = pair.master.conn();
    let gone = wait_until(Duration::from_secs(10), || {
        info_field(&mut master, "replication", "connected_slaves").as_deref() == Some("0")
    });
    assert!(gone, "the promoted replica left the old master");
    for attempt in 0..3 {
        let err = old.lock("split").try_lock().expect_err("the old master must not grant");
        assert_eq!(err.kind(), ErrorKind::NotReplicated, "attempt {attempt}: {err}");
        assert!(!exists(&mut pair.master.conn(), "split"), "attempt {attempt}: the grant was undone");
        thread::sleep(Duration::from_millis(600));
    }
    // The promoted replica is alone: it grants nothing until a replica follows it (a grant
    // it made alone would be lost if that replica were promoted before it had synced).
    let new = client(&pair.replica.url(), true);
    let err = new.lock("split").try_lock().expect_err("a replicated master alone must not grant");
    assert_eq!(err.kind(), ErrorKind::NotReplicated, "{err}");
    assert!(!exists(&mut pair.replica.conn(), "split"), "the grant was undone");
    // The old master follows it now, as the sentinels would make it: grants wait for it.
    redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(pair.replica.port())
        .query::<()>(&mut pair.master.conn())
        .expect("REPLICAOF");
    let mut promoted = pair.replica.conn();
    let online = wait_until(Duration::from_secs(15), || {
        info_field(&mut promoted, "replication", "slave0").is_some_and(|s| s.contains("state=online"))
    });
    assert!(online, "the old master follows the promoted replica");
    let guard = new.lock("split").try_lock().expect("the new master").expect("granted on the new master");
    assert!(exists(&mut pair.master.conn(), "split"), "its replica has the grant when try_lock() returns");
    guard.unlock().expect("released");
}

/// A server turned replica under a client that connects to it directly (no sentinel to
/// name the new master): a write it refuses with READONLY is sent once more on a new
/// connection, then left to the retry layer, which gives up when the budget runs out, with
/// an error that says why.
///
/// Breaks if the pool sends the refused command again and again without a pause (it once
/// recursed until the stack overflowed and the process aborted).
#[test]
fn a_server_turned_replica_is_asked_again_within_the_budget_not_forever() {
    let demoted = RedisServer::start();
    // The sync starts at once, not after diskless replication's default 5 s delay.
    let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let client = Client::builder(demoted.url())
        .retry_budget(Duration::from_millis(500))
        .build()
        .expect("a client of the server that will turn replica");
    let lock = client.lock("demoted");
    drop(lock.lock().expect("granted while a master"));
    let mut conn = demoted.conn();
    redis::cmd("REPLICAOF").arg("127.0.0.1").arg(master.port()).query::<()>(&mut conn).expect("REPLICAOF");
    assert!(wait_until(Duration::from_secs(10), || info_field(&mut conn, "replication", "master_link_status")
        .is_some_and(|s| s == "up")));
    let before = calls_of(&mut conn, "evalsha");
    let started = Instant::now();
    let err = lock.try_lock().expect_err("a replica grants nothing");
    let took = started.elapsed();
    assert!(err.to_string().contains("read only replica"), "{err}");
    assert!(
        took >= Duration::from_millis(100) && took < Duration::from_secs(5),
        "tried again after pauses, within the budget: {took:?}"
    );
    let sent = calls_of(&mut conn, "evalsha") - before;
    assert!((2..200).contains(&sent), "a few tries, paused between: {sent}");
}

/// A waiter parked in `try_lock_for(30 s)` is woken by the holder's release while the
/// replica cannot acknowledge (its link lags 2.5 s each way: every grant is refused as
/// unconfirmed within the 1 s sync timeout, and undone). The wait treats that as part of
/// itself: it tries again, says once that it is waiting through an outage, and gets the
/// lock once the replica confirms again, with 25 s left. A single `try_lock()` meanwhile
/// still returns the refusal at once.
///
/// Breaks if a refusal that passes (a replica that has not acknowledged yet) ends a wait
/// that has time left: each waiter got `NotReplicated` ("none of the master's 1 replica(s)
/// confirmed it within 1s") across a failover, with 88 s left to wait.
#[test]
fn a_wait_rides_out_a_replica_that_cannot_confirm_until_it_can() {
    let pair = Pair::start();
    let outages = Arc::new(Outages::default());
    let events: Arc<dyn redlease::LockEvents> = outages.clone();
    let client = Client::builder(pair.master.url())
        .command_timeout(Duration::from_secs(2))
        .replica_sync_timeout(Duration::from_secs(1))
        .retry_budget(Duration::from_secs(1))
        .events(events)
        .build()
        .expect("client");
    let holder = client.lock("ridden").lock().expect("granted");
    let waiting = {
        let lock = client.lock("ridden");
        thread::spawn(move || {
            let started = Instant::now();
            let got = lock.try_lock_for(Duration::from_secs(30)).map(|guard| guard.map(|g| g.unlock()));
            (got.map(|released| released.map(|r| r.is_ok())), started.elapsed())
        })
    };
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "the waiter parked");
    pair.link.set_latency(Duration::from_millis(2500));
    holder.unlock().expect("a release waits for no replica");
    let err = client.lock("single").try_lock().expect_err("no replica confirms it in time");
    assert_eq!(err.kind(), ErrorKind::NotReplicated, "a call that does not wait gives up: {err}");
    thread::sleep(Duration::from_secs(3));
    pair.link.set_latency(Duration::ZERO);
    let (got, took) = waiting.join().expect("waiter");
    assert_eq!(got.map_err(|e| e.to_string()), Ok(Some(true)), "the wait got the lock (after {took:?})");
    assert!(took < Duration::from_secs(25), "well before its deadline: {took:?}");
    assert_eq!(outages.count(), 1, "said once");
    let stats = client.stats();
    assert_eq!(stats.waits_through_outage, 1);
    assert!(stats.retries >= 2, "tried again, paused between: {stats:?}");
}

/// `ReplicaPolicy::WhenConnected` (Redisson's rule): a master whose replica left (promoted
/// away here: the master keeps its backlog, and lost a replica a moment ago) grants at once,
/// where the default refuses; a master with a replica connected that does not acknowledge
/// in time (its link lagging 2 s each way) still refuses, as Redisson does.
///
/// Breaks if the policy grants less than Redisson (a refusal for want of a replica) or more
/// (a grant a connected replica did not confirm), or if the default stops refusing.
#[test]
fn when_connected_grants_without_a_replica_and_still_waits_for_a_connected_one() {
    let pair = Pair::start();
    let build = |policy| {
        Client::builder(pair.master.url())
            .command_timeout(Duration::from_secs(2))
            .replica_sync_timeout(Duration::from_millis(500))
            .retry_budget(Duration::ZERO)
            .replica_policy(policy)
            .build()
            .expect("client")
    };
    let lenient = build(redlease::ReplicaPolicy::WhenConnected);
    let strict = build(redlease::ReplicaPolicy::Required);
    lenient.lock("warm").lock().unwrap().unlock().unwrap();
    strict.lock("warm").lock().unwrap().unlock().unwrap();

    pair.link.set_latency(Duration::from_secs(2));
    for (who, client) in [("when-connected", &lenient), ("required", &strict)] {
        let err = client.lock("unacknowledged").try_lock().expect_err("a connected replica did not confirm");
        assert_eq!(err.kind(), ErrorKind::NotReplicated, "{who}: {err}");
    }
    pair.link.set_latency(Duration::ZERO);
    pair.wait_in_sync();

    pair.promote_replica();
    let mut master = pair.master.conn();
    assert!(
        wait_until(Duration::from_secs(10), || info_field(&mut master, "replication", "connected_slaves").as_deref()
            == Some("0")),
        "the master lost its replica"
    );
    let err = strict.lock("alone").try_lock().expect_err("the default grants nothing without a replica");
    assert_eq!(err.kind(), ErrorKind::NotReplicated, "{err}");
    let guard = lenient.lock("alone").try_lock().expect("granted without a replica").expect("free");
    assert!(exists(&mut master, "alone"));
    guard.unlock().unwrap();
}

/// A master and its replicas, each following it directly.
struct Replicated {
    master: RedisServer,
    replicas: Vec<RedisServer>,
}

impl Replicated {
    fn start(count: usize) -> Replicated {
        let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
        let port = master.port().to_string();
        let replicas = (0..count).map(|_| RedisServer::start_with(&["--replicaof", "127.0.0.1", &port])).collect();
        let replicated = Replicated { master, replicas };
        replicated.wait_online(count);
        replicated
    }

    /// Waits until the master counts `count` online replicas.
    fn wait_online(&self, count: usize) {
        let mut conn = self.master.conn();
        let online = wait_until(Duration::from_secs(15), || {
            let info: String = redis::cmd("INFO").arg("replication").query(&mut conn).expect("INFO");
            info.matches("state=online").count() == count
        });
        assert!(online, "{count} replica(s) follow the master");
    }

    /// Waits until the master counts `count` connected replicas.
    fn wait_for_replicas(&self, count: u64) {
        let mut master = self.master.conn();
        let counted = wait_until(Duration::from_secs(10), || {
            info_field(&mut master, "replication", "connected_slaves") == Some(count.to_string())
        });
        assert!(counted, "the master counts {count} replica(s)");
    }

    /// A client that gives up at the first refusal, so that each refusal is seen.
    fn impatient_client(&self) -> Client {
        Client::builder(self.master.url())
            .command_timeout(Duration::from_secs(2))
            .retry_budget(Duration::ZERO)
            .build()
            .expect("client")
    }
}

/// One of a master's two replicas is SIGKILLed. The client asks it what it is now: its
/// server refuses the connection, so it was not promoted, and the other replica confirms
/// every grant: none is refused, the first one after the loss included.
///
/// Breaks if the loss of one of two replicas holds the master down for its 10 s (seen: the
/// first grant after the kill was refused with `NotReplicated`, "had 2 replica(s) less than
/// 10s ago and has 1").
#[test]
fn losing_one_of_two_replicas_refuses_no_grant() {
    let mut trio = Replicated::start(2);
    let client = trio.impatient_client();
    client.lock("before").try_lock().expect("synced").expect("granted").unlock().expect("released");
    trio.replicas[1].kill();
    trio.wait_for_replicas(1);
    for attempt in 0..3 {
        let guard = client.lock("after").try_lock().expect("the other replica confirms").expect("granted");
        assert!(exists(&mut trio.replicas[0].conn(), "after"), "attempt {attempt}: the live replica has the grant");
        guard.unlock().expect("released");
    }
}

/// One of a master's two replicas is promoted (`REPLICAOF NO ONE`, the sentinels' first
/// step of a failover): the client asks it, it answers as a master, and the old master
/// grants nothing while it has fewer replicas than before, though its other replica could
/// confirm (that one would follow the new master, and the grants it confirmed would be
/// lost with the old master's history).
///
/// Breaks if a replica that went is taken for one that died without asking it (or
/// whatever it answers).
#[test]
fn a_master_that_lost_one_of_two_replicas_to_a_promotion_grants_nothing() {
    let trio = Replicated::start(2);
    let client = trio.impatient_client();
    client.lock("before").try_lock().expect("synced").expect("granted").unlock().expect("released");
    redis::cmd("REPLICAOF").arg("NO").arg("ONE").query::<()>(&mut trio.replicas[1].conn()).expect("promoted");
    trio.wait_for_replicas(1);
    for attempt in 0..3 {
        let err = client.lock("split").try_lock().expect_err("the old master must not grant");
        assert_eq!(err.kind(), ErrorKind::NotReplicated, "attempt {attempt}: {err}");
        assert!(err.to_string().contains("may be promoted"), "the lost replica holds it back: {err}");
        assert!(!exists(&mut trio.master.conn(), "split"), "attempt {attempt}: the grant was undone");
    }
}

/// A master's only replica is SIGKILLed. The client asks it: its server refuses the
/// connection, so nothing can be promoted over the master, which grants as a single server
/// does (before, it granted nothing until the replica was back, or for an hour, its
/// `repl-backlog-ttl`). The replica started again follows the master, and grants wait for
/// it again.
///
/// Breaks if a master whose only replica is gone stays held down and then `Alone` (seen:
/// `NotReplicated`, "the master had 1 replica(s) less than 10s ago and has 0"), or if a
/// replica that came back is not waited for.
#[test]
fn a_master_whose_only_replica_died_grants_as_a_single_server_until_it_is_back() {
    let mut pair = Replicated::start(1);
    let client = pair.impatient_client();
    client.lock("before").try_lock().expect("synced").expect("granted").unlock().expect("released");
    pair.replicas[0].kill();
    pair.wait_for_replicas(0);
    for attempt in 0..3 {
        let guard = client.lock("alone").try_lock().expect("no replica can be promoted").expect("granted");
        assert!(exists(&mut pair.master.conn(), "alone"), "attempt {attempt}");
        guard.unlock().expect("released");
    }
    pair.replicas[0].start_again();
    pair.wait_online(1);
    let guard = client.lock("back").try_lock().expect("the replica confirms").expect("granted");
    assert!(exists(&mut pair.replicas[0].conn(), "back"), "the replica that came back has the grant");
    guard.unlock().expect("released");
}

/// A grant on a replicated master costs one round trip to it: the script, the reading of
/// the master's replicas and the `WAIT` go in one write, and their replies are read in
/// turn. Counted as the writes the client makes through a proxy in front of the master,
/// over 20 acquire-and-release pairs on free locks (an acquire, a release: two round trips
/// a pair, and the client's announcement once). Each grant is on the replica when
/// `try_lock` returns. Then on one pooled connection: an attempt that finds the lock taken
/// (what rode behind it is dropped), a grant after the master's script cache was emptied
/// (the call is sent again, the rest behind it again), and a grant confirmed after them.
///
/// Breaks if the reading and the `WAIT` wait for the script's reply (seen: 60 writes for
/// the 20 pairs, three a pair), or if replies that rode behind one call are taken for
/// another's.
#[test]
fn a_synced_grant_is_one_round_trip_to_the_master() {
    let pair = Replicated::start(1);
    let proxy = Proxy::start(pair.master.addr());
    let client = Client::builder(proxy.url()).pool_size(1).build().expect("client");
    let lease = Duration::from_secs(10);
    client.lock("warm").with_lease(lease).lock().unwrap().unlock().unwrap();
    let mut replica = pair.replicas[0].conn();
    let before = proxy.requests_forwarded();
    for i in 0..20 {
        let name = format!("round-trip-{i}");
        let guard = client.lock(&name).with_lease(lease).try_lock().expect("synced").expect("free");
        assert!(exists(&mut replica, &name), "{name}: the replica has the grant when try_lock returns");
        guard.unlock().expect("released");
    }
    let writes = proxy.requests_forwarded() - before;
    assert!(writes <= 2 * 20 + 2, "{writes} writes for 20 acquire-and-release pairs");

    let holder = Client::builder(pair.master.url()).build().expect("holder");
    let held = holder.lock("taken").lock().expect("held");
    assert!(client.lock("taken").try_lock().expect("answered").is_none(), "taken by another");
    redis::cmd("SCRIPT").arg("FLUSH").query::<()>(&mut pair.master.conn()).expect("SCRIPT FLUSH");
    let guard = client.lock("after-flush").with_lease(lease).try_lock().expect("synced").expect("free");
    assert!(exists(&mut replica, "after-flush"));
    assert_eq!(client.lock("after-flush").hold_count().expect("a query after it"), 1, "in step");
    guard.unlock().expect("released");
    held.unlock().expect("released");
    let guard = client.lock("taken").with_lease(lease).try_lock().expect("synced").expect("free now");
    assert!(exists(&mut replica, "taken"));
    guard.unlock().expect("released");
}

/// Grants one after another check the master's replicas with `ROLE` (a sixth of the
/// reading's cost at the server) while the last reading is younger than a second, and a
/// replica that joins meanwhile is counted all the same: the check finds a replica the
/// reading did not list, a reading follows, and the grants wait for both. With the new
/// replica stopped (SIGSTOP: the master lists it online until its `repl-timeout`), a grant
/// is refused; with it running again, granted.
///
/// Breaks if a check that finds other replicas lets the last reading's count stand (the
/// grant would wait for one replica and be given), or if grants read the master every time.
#[test]
fn grants_check_the_replicas_cheaply_and_count_one_that_joined() {
    let mut group = Replicated::start(1);
    let client = Client::builder(group.master.url())
        .command_timeout(Duration::from_secs(2))
        .replica_sync_timeout(Duration::from_secs(2))
        .retry_budget(Duration::ZERO)
        .build()
        .expect("client");
    let lease = Duration::from_secs(10);
    let pair = |name: &str| match client.lock(name).with_lease(lease).try_lock() {
        Ok(Some(guard)) => guard.unlock().map_err(|err| format!("{name}: released: {err}")),
        Ok(None) => Err(format!("{name}: taken")),
        Err(err) => Err(format!("{name}: {err}")),
    };
    pair("warm").unwrap();
    let mut master = group.master.conn();
    redis::cmd("CONFIG").arg("RESETSTAT").query::<()>(&mut master).expect("CONFIG RESETSTAT");
    let started = Instant::now();
    for i in 0..20 {
        pair(&format!("checked-{i}")).unwrap();
    }
    let seconds = started.elapsed().as_secs();
    let calls = |master: &mut redis::Connection, command: &str| {
        let info = info_field(master, "commandstats", &format!("cmdstat_{command}")).unwrap_or_default();
        info.split(',').find_map(|f| f.strip_prefix("calls=")).map_or(0, |n| n.parse::<u64>().unwrap())
    };
    let (roles, infos) = (calls(&mut master, "role"), calls(&mut master, "info"));
    // A reading (two `INFO`s) at most once a second; the other grants check.
    assert!(infos <= 2 * (seconds + 2), "{infos} INFOs for 20 grants in {seconds} s");
    assert!(roles >= 20u64.saturating_sub(seconds + 2), "{roles} ROLEs for 20 grants in {seconds} s");

    // A second replica joins while grants go on (each reading young, each grant checked).
    let port = group.master.port().to_string();
    let joining = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    group.replicas.push(joining);
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut i = 0;
    while info_field(&mut master, "replication", "slave1").is_none_or(|s| !s.contains("state=online")) {
        assert!(Instant::now() < deadline, "the second replica came online");
        i += 1;
        pair(&format!("joining-{i}")).unwrap();
    }
    pair("joined").unwrap();
    let stopped = group.replicas[1].pid().expect("running");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(stopped).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("SIGSTOP");
    let refused = client.lock("while-stopped").with_lease(lease).try_lock();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).expect("SIGCONT");
    let err = refused.expect_err("a grant the stopped replica cannot confirm is refused");
    assert_eq!(err.kind(), ErrorKind::NotReplicated, "{err}");
    assert!(err.to_string().contains("of the 2 replica(s)"), "it waited for both: {err}");
    pair("running-again").unwrap();
}
