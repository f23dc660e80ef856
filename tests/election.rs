//! Leader election: one leader at a time across processes, terms that only grow, a dead
//! leader replaced within a lease, a resignation handed over at once, observers that see
//! every change, a leader cut off that stops leading before the next begins, bad input.

use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, ErrorKind, Interrupter};

use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::cluster::ClusterGroup;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] =
    &[("election_candidate", candidate), ("election_leader_until_killed", leader_until_killed)];

/// ROUNDS times: campaign, and while leading count one leadership with a non-atomic
/// read-modify-write and record the term; resign. Says "done".
fn candidate() {
    let client = Client::open(&child::env("REDIS_URL")).unwrap();
    let rounds: usize = child::env("ROUNDS").parse().unwrap();
    let election = client.election("cluster-leader");
    let mut conn = redis::Client::open(child::env("REDIS_URL")).unwrap().get_connection().unwrap();
    let me = std::process::id().to_string();
    for _ in 0..rounds {
        let leadership = election.campaign(&me).unwrap();
        assert!(leadership.is_leader());
        let value: Option<u64> = redis::cmd("GET").arg("leaderships").query(&mut conn).unwrap();
        thread::sleep(Duration::from_millis(2));
        redis::cmd("SET").arg("leaderships").arg(value.unwrap_or(0) + 1).query::<()>(&mut conn).unwrap();
        redis::cmd("RPUSH").arg("terms").arg(leadership.term()).query::<()>(&mut conn).unwrap();
        assert!(leadership.is_leader(), "still leading after its work");
        leadership.resign().unwrap();
    }
    child::say("done");
}

/// Leads with a 1 s watchdog and says so, then waits to be killed.
fn leader_until_killed() {
    let client = Client::builder(child::env("REDIS_URL")).watchdog_timeout(Duration::from_secs(1)).build().unwrap();
    let leadership = client.election("doomed").campaign("first").unwrap();
    child::say(&format!("leading {}", leadership.term()));
    thread::sleep(Duration::from_secs(120));
    drop(leadership);
}

fn terms(conn: &mut redis::Connection) -> Vec<u64> {
    redis::cmd("LRANGE").arg("terms").arg(0).arg(-1).query(conn).unwrap()
}

/// Two and five candidates in as many processes, each leading 20 times: every leadership
/// counted (a lost non-atomic increment would mean two leaders at once) and the terms, in
/// the order the leaders wrote them, strictly increasing.
///
/// Breaks if two candidates lead at once, or a term repeats or goes back.
#[test]
fn candidates_across_processes_lead_one_at_a_time_with_growing_terms() {
    for candidates in [2, 5] {
        let server = RedisServer::start();
        let rounds = 20;
        let env = [("REDIS_URL", server.url()), ("ROUNDS", rounds.to_string())];
        let mut children: Vec<Child> = (0..candidates).map(|_| Child::spawn("election_candidate", &env)).collect();
        for c in &mut children {
            c.wait_line("done", Duration::from_secs(120));
            assert!(c.wait(Duration::from_secs(10)).success());
        }
        let mut conn = server.conn();
        let count: u64 = redis::cmd("GET").arg("leaderships").query(&mut conn).unwrap();
        assert_eq!(count, (candidates * rounds) as u64, "{candidates} candidates: no two led at once");
        let terms = terms(&mut conn);
        assert_eq!(terms.len(), candidates * rounds);
        assert!(terms.windows(2).all(|w| w[0] < w[1]), "{candidates} candidates: terms grow: {terms:?}");
        assert!(!exists(&mut conn, "redlease_election:{cluster-leader}"), "nobody leads at the end");
    }
}

/// A leader SIGKILLed: a candidate waiting in another client leads within one lease (1 s)
/// of the kill, with a greater term, and the observer sees the change though nobody
/// published it (the dead leader's lease ran out).
///
/// Breaks if the wait outlasts the lease, the term does not grow, or the observer misses
/// a leader that died.
#[test]
fn a_killed_leader_is_replaced_within_one_lease() {
    let server = RedisServer::start();
    let mut leader = Child::spawn("election_leader_until_killed", &[("REDIS_URL", server.url())]);
    let line = leader.wait_line("leading ", Duration::from_secs(10));
    let first: u64 = line.trim_start_matches("leading ").trim().parse().unwrap();
    let client = client(&server);
    let election = client.election("doomed");
    let mut observer = election.observe().unwrap();
    assert_eq!(observer.current().map(|l| (l.value.as_str(), l.term)), Some(("first", first)));
    assert!(election.try_campaign("second").unwrap().is_none(), "someone leads");
    leader.kill();
    let killed = Instant::now();
    // Nobody publishes a death: the observer's wait ends with the dead leader's lease.
    assert!(observer.wait_change_for(Duration::from_secs(5)).unwrap(), "saw the change");
    assert_eq!(observer.current(), None, "nobody leads once the lease ran out");
    let seen = killed.elapsed();
    assert!(seen <= Duration::from_millis(1500), "within one lease of the kill: {seen:?}");
    let leadership = election.campaign_for("second", Duration::from_secs(5)).unwrap().expect("leads");
    let took = killed.elapsed();
    assert!(took <= Duration::from_millis(1500), "within one lease of the kill: {took:?}");
    assert!(leadership.term() > first);
    assert!(observer.wait_change_for(Duration::from_secs(5)).unwrap(), "saw the new leader");
    assert_eq!(observer.current().map(|l| (l.value.as_str(), l.term)), Some(("second", leadership.term())));
}

/// A resignation hands over to a waiting candidate at hand-off speed (a message, not its
/// lease running out), and an observer sees every leadership, in order, and the empty
/// election at the end.
///
/// Breaks if the hand-over waits for a lease or a poll, or the observer misses a term.
#[test]
fn a_resignation_hands_over_at_once_and_observers_see_every_change() {
    let server = RedisServer::start();
    let clients: Vec<Client> = (0..2).map(|_| client(&server)).collect();
    let election = clients[0].election("relay");
    let mut observer = election.observe().unwrap();
    assert!(observer.current().is_none());
    let watcher = thread::spawn(move || {
        let mut seen = Vec::new();
        // Until nobody leads after "b" did.
        while !(seen.last() == Some(&None) && seen.iter().flatten().any(|(v, _): &(String, u64)| v == "b")) {
            assert!(observer.wait_change_for(Duration::from_secs(10)).unwrap(), "a change within 10 s: {seen:?}");
            seen.push(observer.current().map(|l| (l.value.clone(), l.term)));
        }
        seen
    });
    let first = election.campaign("a").unwrap();
    thread::sleep(Duration::from_millis(200));
    let waiting = {
        let election = clients[1].election("relay");
        thread::spawn(move || {
            let leadership = election.campaign_for("b", Duration::from_secs(10)).unwrap().expect("leads");
            let at = Instant::now();
            thread::sleep(Duration::from_millis(200));
            let term = leadership.term();
            leadership.resign().unwrap();
            (at, term)
        })
    };
    // "b" parked (the observer waits on clients[0], not here).
    assert!(wait_until(Duration::from_secs(5), || clients[1].stats().waiters == 1), "b waits");
    let (first_term, resigned) = (first.term(), Instant::now());
    first.resign().unwrap();
    let (second_at, second_term) = waiting.join().unwrap();
    let handed = second_at.duration_since(resigned);
    assert!(handed < Duration::from_millis(300), "handed over by a message: {handed:?}");
    assert!(second_term > first_term);
    let seen = watcher.join().unwrap();
    assert_eq!(seen[0], Some(("a".to_owned(), first_term)));
    // The resignation and the next leadership came one round trip apart: the observer may
    // see the empty election between them, or not.
    let rest: Vec<_> = seen[1..].iter().filter(|s| s.is_some()).cloned().collect();
    assert_eq!(rest[0], Some(("b".to_owned(), second_term)), "{seen:?}");
    assert_eq!(seen.last(), Some(&None), "nobody leads at the end: {seen:?}");
    assert_eq!(election.leader().unwrap(), None);
}

/// A leader cut off from Redis (a proxy that stops forwarding) stops leading — its
/// `is_leader()` turns false, its watch says lost — before the other candidate's
/// leadership begins.
///
/// Breaks if the two leaderships' validity overlaps.
#[test]
fn a_leader_cut_off_stops_leading_before_the_next_leads() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let cut = Client::builder(proxy.url())
        .watchdog_timeout(Duration::from_millis(1500))
        .command_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    // The other candidate's grant was sent 10 s − (1 % + 2 ms) before its validity deadline.
    let other = client_with(&server, |b| {
        b.watchdog_timeout(Duration::from_secs(10)).clock_drift_rate(0.01).clock_drift_margin(Duration::from_millis(2))
    });
    let old = cut.election("cut").campaign("old").unwrap();
    let watch = old.watch();
    // The old leader's validity deadline, as it moves with renewals until the loss.
    let last_valid = thread::spawn(move || {
        let mut last = watch.valid_until();
        while let Some(now) = watch.valid_until() {
            last = Some(now);
            thread::sleep(Duration::from_millis(1));
        }
        (last, watch.is_valid())
    });
    proxy.set_blackhole(true);
    let new = other.election("cut").campaign_for("new", Duration::from_secs(10)).unwrap().expect("leads");
    let grant_sent = new.valid_until().expect("valid") - Duration::from_millis(10_000 - 102);
    let (old_valid_until, still_valid) = last_valid.join().unwrap();
    let old_valid_until = old_valid_until.expect("a validity deadline");
    assert!(!still_valid);
    assert!(
        old_valid_until <= grant_sent,
        "the old leadership ended {:?} before the new one's grant was sent",
        grant_sent.saturating_duration_since(old_valid_until)
    );
    assert!(!old.is_leader());
    assert!(new.term() > old.term());
    proxy.set_blackhole(false);
    drop(old);
}

/// Bad input is `InvalidInput` before anything is sent; a campaign and an observer's wait
/// end with `Interrupted` when interrupted, leaving nothing.
///
/// Breaks if bad input reaches Redis or a wait ignores an interrupt.
#[test]
fn bad_input_is_refused_and_waits_are_interruptible() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let held = client.election("busy").campaign("holder").unwrap();
    // The announcement its first campaign set off is not what this counts.
    announced(&client, &mut conn);
    let before = commands_served(&mut conn);
    let invalid = |r: redlease::Result<Option<redlease::Leadership>>| r.unwrap_err().kind() == ErrorKind::InvalidInput;
    // Each names the election, as the user knows it.
    let invalid_busy = |r: redlease::Result<Option<redlease::Leadership>>| {
        let err = r.unwrap_err();
        assert!(err.to_string().contains("(election \"busy\")"), "{err}");
        err.kind() == ErrorKind::InvalidInput
    };
    assert!(invalid_busy(client.election("busy").try_campaign("")));
    assert!(invalid_busy(client.election("busy").try_campaign(&"v".repeat(redlease::MAX_ADVERTISED_LEN + 1))));
    assert!(invalid(client.election("").try_campaign("v")));
    assert_eq!(client.election("").leader().unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(commands_served(&mut conn) - before, 0, "nothing was sent");

    let (tx, rx) = std::sync::mpsc::channel();
    let campaigner = {
        let election = client.election("busy");
        thread::spawn(move || {
            tx.send(Interrupter::current()).unwrap();
            election.campaign("waiting").map(drop)
        })
    };
    let interrupter = rx.recv().unwrap();
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1));
    interrupter.interrupt();
    let err = campaigner.join().unwrap().unwrap_err();
    assert!(err.is_interrupted());
    // Named as the user knows it, not by its key.
    assert!(err.to_string().contains("(election \"busy\")"), "{err}");

    let (tx, rx) = std::sync::mpsc::channel();
    let observing = {
        let election = client.election("busy");
        thread::spawn(move || {
            let mut observer = election.observe().unwrap();
            tx.send(Interrupter::current()).unwrap();
            observer.wait_change().map(|l| l.cloned())
        })
    };
    let interrupter = rx.recv().unwrap();
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1));
    interrupter.interrupt();
    assert!(observing.join().unwrap().unwrap_err().is_interrupted());
    assert_eq!(client.election("busy").leader().unwrap().map(|l| l.term), Some(held.term()));
    drop(held);
}

/// In a Redis Cluster every key and channel of an election is in its name's slot: a
/// campaign, a second candidate parked on sharded pub/sub, an observer, and the hand-over
/// after a resignation all work through a cluster client, on the slot's master.
///
/// Breaks if a key or channel of the election lands in another slot (`CROSSSLOT`), or the
/// sharded messages do not reach candidates and observers.
#[test]
fn an_election_lives_in_one_cluster_slot() {
    let cluster = ClusterGroup::start();
    cluster.wait_healthy(Duration::from_secs(30));
    let clients: Vec<Client> =
        (0..2).map(|_| build_patiently(Duration::from_secs(20), || Client::builder(cluster.url()))).collect();
    let election = clients[0].election("sharded");
    let first = election.campaign("a").unwrap();
    let mut observer = clients[1].election("sharded").observe().unwrap();
    assert_eq!(observer.current().map(|l| l.term), Some(first.term()));
    let waiting = {
        let election = clients[1].election("sharded");
        thread::spawn(move || {
            let leadership = election.campaign_for("b", Duration::from_secs(10)).unwrap().expect("leads");
            (Instant::now(), leadership.term(), leadership)
        })
    };
    assert!(wait_until(Duration::from_secs(5), || clients[1].stats().waiters >= 1));
    let resigned = Instant::now();
    let first_term = first.term();
    first.resign().unwrap();
    let (led, term, leadership) = waiting.join().unwrap();
    assert!(led.duration_since(resigned) < Duration::from_millis(500), "woken by a sharded message");
    assert!(term > first_term);
    while observer.current().is_none_or(|l| l.term != term) {
        assert!(observer.wait_change_for(Duration::from_secs(5)).unwrap(), "the observer hears the change");
    }
    assert_eq!(observer.current().map(|l| l.value.as_str()), Some("b"));
    // The election's keys are where its name's slot is, on that slot's master.
    let mut master = cluster.conn_for("sharded");
    for key in ["redlease_election:{sharded}", "redlease_term:redlease_election:{sharded}"] {
        assert!(exists(&mut master, key), "{key} on the slot's master");
    }
    drop(leadership);
}
