//! Sentinel: a client that finds its master through sentinels (`redis-sentinel://`) and
//! follows it through a failover (`SENTINEL FAILOVER`, and the master SIGKILLed), with
//! threads holding, waiting and releasing meanwhile; and the bad inputs of a sentinel
//! deployment, each a clear error within the connect timeout.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use redlease::{AnyLock, Client, ClientBuilder};

use crate::helpers::*;
use crate::support::proxy::Proxy;
use crate::support::sentinel::{MASTER_NAME, SentinelGroup};
use crate::support::server::RedisServer;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Slack on top of timing bounds: the machine is noisy.
const SLACK: Duration = Duration::from_millis(1500);

fn builder(url: &str) -> ClientBuilder {
    Client::builder(url)
        .connect_timeout(CONNECT_TIMEOUT)
        .command_timeout(Duration::from_secs(1))
        .watchdog_timeout(Duration::from_secs(3))
}

/// Retries `op` until it succeeds or `timeout` passes: a caller riding out a failover.
fn eventually<T>(timeout: Duration, mut op: impl FnMut() -> redlease::Result<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match op() {
            Ok(value) => return value,
            Err(err) if Instant::now() < deadline => {
                let _ = err;
                thread::sleep(Duration::from_millis(100));
            }
            Err(err) => panic!("still failing after {timeout:?}: {err}"),
        }
    }
}

/// Every lock kind can be taken and released.
fn every_kind_works(client: &Client, tag: &str) {
    let rw = client.read_write_lock(format!("{tag}-rw"));
    let kinds: Vec<(&str, AnyLock)> = vec![
        ("plain", client.lock(format!("{tag}-plain")).into()),
        ("fair", client.fair_lock(format!("{tag}-fair")).into()),
        ("read", rw.read().into()),
        ("write", rw.write().into()),
        ("fenced", client.fenced_lock(format!("{tag}-fenced")).into()),
    ];
    for (what, lock) in kinds {
        let guard = eventually(Duration::from_secs(10), || lock.try_lock()).unwrap_or_else(|| panic!("{what}: free"));
        guard.unlock().unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

/// A graceful failover (`SENTINEL FAILOVER`: the replica catches up, is promoted, the old
/// master demoted and its clients disconnected) while one thread holds a lock under the
/// watchdog and another waits, parked, for a lock a third thread holds. The new master has
/// no replica until the sentinels turn the old master into one (about 11 s): its renewals
/// of the held lease do not count until then (a failover of the new master meanwhile
/// would lose them), so the held lease, 30 s here, goes at risk and is held again once
/// the old master follows the new one and a renewal is confirmed there.
///
/// Breaks if the client keeps writing to the demoted master (`READONLY`), if the
/// subscriber does not follow the master (the parked waiter would wait for the holder's
/// 60 s lease after the release on the new master), if the watchdog loses the held lock
/// or never gets a renewal confirmed on the new master, or if any lock kind fails
/// afterwards.
#[test]
fn a_client_follows_its_master_through_a_sentinel_failover() {
    let group = SentinelGroup::start();
    let client = builder(&group.url())
        .watchdog_timeout(Duration::from_secs(30))
        .build()
        .expect("found the master through the sentinels");
    let old_master = group.master_port();
    let held = client.lock("held-across").lock().expect("held");
    // A third thread holds "contended" with a long fixed lease; this thread's waiter parks.
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (held_tx, held_rx) = mpsc::channel();
    let holder = {
        let lock = client.lock("contended").with_lease(Duration::from_secs(60));
        thread::spawn(move || {
            let guard = lock.lock().expect("the holder acquires");
            held_tx.send(()).expect("tell");
            release_rx.recv().expect("told to release");
            // The release goes to the new master (after a READONLY retry or a reconnect).
            eventually(Duration::from_secs(10), || lock.is_locked());
            guard.unlock()
        })
    };
    held_rx.recv_timeout(Duration::from_secs(5)).expect("held");
    let (got_tx, got_rx) = mpsc::channel();
    let waiter = {
        let lock = client.lock("contended");
        thread::spawn(move || {
            let started = Instant::now();
            let got = lock.try_lock_for(Duration::from_secs(40)).map(|g| g.is_some());
            got_tx.send((got.map_err(|e| e.to_string()), started.elapsed())).expect("report");
        })
    };
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "the waiter parked");

    let new_master = group.failover();
    assert_ne!(new_master, old_master);
    let renewed_before = client.stats().leases_renewed;

    // The held lock survived the graceful failover. The new master grants, and confirms
    // renewals, once a replica follows it (the sentinels turn the old master into one):
    // what it wrote alone could be lost to the next failover.
    assert!(held.is_held(), "the lease outlives the failover");
    group.wait_ready(Duration::from_secs(30));
    assert!(
        wait_until(Duration::from_secs(15), || client.stats().leases_renewed > renewed_before
            && held.lease_state() == redlease::LeaseState::Held),
        "a renewal confirmed on the new master: {:?}, {} renewed since the failover",
        held.lease_state(),
        client.stats().leases_renewed - renewed_before
    );
    let ttl = pttl(&mut group.master_conn(), "held-across");
    assert!(ttl > 0, "the held lock is on the new master, renewed: PTTL {ttl}");

    let released_at = Instant::now();
    release_tx.send(()).expect("release");
    holder.join().expect("holder").expect("the release reaches the new master");
    let (got, _) = got_rx.recv_timeout(Duration::from_secs(45)).expect("the waiter ends");
    assert_eq!(got, Ok(true), "the parked waiter got the lock");
    let woken_after = released_at.elapsed();
    assert!(
        woken_after < Duration::from_secs(2) + SLACK,
        "woken by the release message on the new master: {woken_after:?}"
    );
    waiter.join().expect("waiter");
    held.unlock().expect("released on the new master");
    every_kind_works(&client, "after-failover");
}

/// The master is SIGKILLed: the sentinels promote the replica, the killed server comes back
/// as the new master's replica (as an operator would bring it back: the new master grants
/// once a replica follows it), and the client carries on there (a caller that retries on
/// connection errors gets its locks).
///
/// Breaks if the client keeps trying the dead master (it would never succeed), or if a
/// waiter parked across the kill is stranded.
#[test]
fn a_killed_master_is_replaced_and_the_client_carries_on() {
    let mut group = SentinelGroup::start();
    let client = builder(&group.url()).build().expect("client");
    let old_master = group.master_port();
    // A waiter parked on a lock whose holder dies with the master (the replica may or may
    // not have the lock: replication is asynchronous).
    let blocker = client.lock("k-contended").with_lease(Duration::from_secs(3)).lock().expect("held");
    let (got_tx, got_rx) = mpsc::channel();
    let waiter = {
        let lock = client.lock("k-contended");
        thread::spawn(move || {
            let got = eventually(Duration::from_secs(30), || lock.try_lock_for(Duration::from_secs(20)));
            got_tx.send(got.is_some()).expect("report");
        })
    };
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "the waiter parked");
    let new_master = group.kill_master_and_rejoin();
    assert_ne!(new_master, old_master);
    drop(blocker);
    assert_eq!(got_rx.recv_timeout(Duration::from_secs(40)), Ok(true), "the waiter got the lock on the new master");
    waiter.join().expect("waiter");
    every_kind_works(&client, "after-kill");
}

/// Connects to the server or sentinel on `port` (loopback), for the test's own questions.
fn conn_to(port: u16) -> redis::RedisResult<redis::Connection> {
    let conn = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?
        .get_connection_with_timeout(Duration::from_secs(1))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    Ok(conn)
}

/// The script calls (`EVAL`, `EVALSHA` and their read-only forms) the server on `port` has
/// served or refused: what a client's lock commands leave on it, and nothing else here
/// sends. Asked on a new connection (a promotion kills the clients of the promoted
/// replica); `None` when it does not answer.
fn script_calls(port: u16) -> Option<u64> {
    let info: String = conn_to(port).and_then(|mut c| redis::cmd("INFO").arg("commandstats").query(&mut c)).ok()?;
    // cmdstat_evalsha:calls=3,usec=…,rejected_calls=0,failed_calls=1
    info.lines()
        .filter_map(|l| l.strip_prefix("cmdstat_eval")?.split_once(':'))
        .flat_map(|(_, fields)| fields.split(','))
        .filter_map(|field| field.split_once('='))
        .filter(|(name, _)| matches!(*name, "calls" | "rejected_calls"))
        .filter_map(|(_, n)| n.parse::<u64>().ok())
        .sum::<u64>()
        .into()
}

/// The connections subscribed to something on the sentinel on `port` (`CLIENT LIST`, `sub=`):
/// a client's switch listener; the sentinels subscribe only on the data nodes.
fn subscribed_on(port: u16) -> usize {
    let list: String =
        conn_to(port).and_then(|mut c| redis::cmd("CLIENT").arg("LIST").query(&mut c)).unwrap_or_default();
    list.lines().filter(|l| l.split(' ').any(|f| f.starts_with("sub=") && f != "sub=0")).count()
}

/// The client hears a switch from whichever sentinel announces it first. The URL lists
/// first a sentinel that answers and announces 5 s late (a proxy delays everything it
/// says, as the sentinel that led a failover announced it 5 s after the others), then the
/// other two. A thread takes and releases a lock in a loop through a graceful failover;
/// measured: the time from the promotion until the client's first lock command on the new
/// master (the part the client adds: the new master grants only once a replica follows it,
/// which the sentinels arrange seconds later).
///
/// Breaks if the client hears only the laggard (the first of its URL): it stays on the old
/// master until the laggard's news, 5 s on, and then waits for the laggard's answer too; or
/// if it waits for the laggard's answer when it asks who the master is now.
#[test]
fn a_switch_is_heard_from_whichever_sentinel_announces_it_first() {
    const LAG: Duration = Duration::from_secs(5);
    let group = SentinelGroup::start();
    let sentinels = group.sentinel_ports();
    let laggard = Proxy::start(SocketAddr::from(([127, 0, 0, 1], sentinels[0])));
    let url = format!(
        "redis-sentinel://{},127.0.0.1:{},127.0.0.1:{}/#{MASTER_NAME}",
        laggard.addr(),
        sentinels[1],
        sentinels[2]
    );
    let client = builder(&url).build().expect("found the master through the sentinels");
    // The client listens to the first sentinel of its URL before that one lags.
    assert!(
        wait_until(Duration::from_secs(10), || subscribed_on(sentinels[0]) >= 1),
        "a listener on the first sentinel"
    );
    laggard.set_latency(LAG);
    let old_master = group.master_port();
    let replica = group.wait_replica_online(Duration::from_secs(10));
    let before = script_calls(replica).expect("the replica answers");

    let stop = Arc::new(AtomicBool::new(false));
    let grants = Arc::new(AtomicU64::new(0));
    let locker = {
        let (lock, stop, grants) = (client.lock("followed"), Arc::clone(&stop), Arc::clone(&grants));
        thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                // Errors through the failover are expected: the loop is the caller that retries.
                if let Ok(Some(guard)) = lock.try_lock() {
                    grants.fetch_add(1, Ordering::AcqRel);
                    let _ = guard.unlock();
                }
                thread::sleep(Duration::from_millis(20));
            }
        })
    };
    assert!(wait_until(Duration::from_secs(10), || grants.load(Ordering::Acquire) > 0), "grants on the old master");

    let new_master = group.failover();
    let promoted = Instant::now();
    assert_eq!((new_master, new_master == old_master), (replica, false), "the replica was promoted");
    // The new master counts the client's first script call.
    let limit = LAG * 2 + SLACK;
    let mut moved = None;
    while promoted.elapsed() < limit {
        if script_calls(new_master).is_some_and(|calls| calls > before) {
            moved = Some(promoted.elapsed());
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let bound = Duration::from_secs(1) + SLACK;
    assert!(
        moved.is_some_and(|after| after < bound),
        "the client sent to the new master {moved:?} after the promotion (None: not within {limit:?}); \
         expected within {bound:?}, well before the laggard's news {LAG:?} on"
    );

    laggard.set_latency(Duration::ZERO);
    // The new master grants once a replica follows it (the sentinels turn the old master
    // into one): then the client holds there.
    group.wait_ready(Duration::from_secs(30));
    let counted = grants.load(Ordering::Acquire);
    assert!(
        wait_until(Duration::from_secs(10), || grants.load(Ordering::Acquire) > counted),
        "the loop is granted again once the new master has its replica"
    );
    stop.store(true, Ordering::Release);
    locker.join().expect("locker");
    let held = eventually(Duration::from_secs(10), || client.lock("held-on-new").try_lock()).expect("free");
    assert!(exists(&mut conn_to(new_master).expect("the new master"), "held-on-new"), "the hold is on the new master");
    held.unlock().expect("released");
}

/// A sentinel that answers late, listed first, does not hold up finding the master: every
/// sentinel is asked at once, and a majority that names the master settles the question.
/// The other two refuse `SENTINEL MASTER` to the client (their ACL), so they name the
/// master without its configuration epoch. The client's threads then stop at once, the
/// late sentinel's listener included.
///
/// Breaks if the sentinels are asked in turn (the first one's silence costs the whole
/// connect timeout, and the connection to the master is left what remains of it), if the
/// question waits for every sentinel, or if a refused `SENTINEL MASTER` makes a sentinel's
/// answer a failure; or if a listener outlives `shutdown()`.
#[test]
fn a_late_sentinel_first_in_the_url_does_not_hold_up_finding_the_master() {
    const CONNECT: Duration = Duration::from_secs(3);
    let group = SentinelGroup::start();
    let sentinels = group.sentinel_ports();
    for &port in &sentinels[1..] {
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg("default")
            .arg("-sentinel|master")
            .query::<()>(&mut conn_to(port).expect("a sentinel"))
            .expect("ACL SETUSER");
    }
    let laggard = Proxy::start(SocketAddr::from(([127, 0, 0, 1], sentinels[0])));
    laggard.set_latency(Duration::from_secs(5));
    let url = format!(
        "redis-sentinel://{},127.0.0.1:{},127.0.0.1:{}/#{MASTER_NAME}",
        laggard.addr(),
        sentinels[1],
        sentinels[2]
    );
    let started = Instant::now();
    let client = builder(&url).connect_timeout(CONNECT).build().expect("found the master through the sentinels");
    let took = started.elapsed();
    assert!(took < SLACK, "built in {took:?}, without waiting for the late sentinel ({CONNECT:?} each)");
    let guard = client.lock("found").try_lock().expect("the master").expect("free");
    assert!(exists(&mut group.master_conn(), "found"), "held on the master");
    guard.unlock().expect("released");
    let started = Instant::now();
    client.shutdown();
    let took = started.elapsed();
    assert!(took < SLACK, "shut down in {took:?}, the listener of the late sentinel stopped at once");
}

/// No sentinel reachable, a sentinel that accepts connections but never answers, an
/// unknown master name, a malformed URL: each a clear error, within the connect timeout
/// where there is waiting, never a hang.
///
/// Breaks if any of them builds, hangs past the connect timeout, or says nothing of why.
#[test]
fn sentinel_bad_input_fails_clearly_and_fast() {
    let silent_server = RedisServer::start();
    let silent = Proxy::start(silent_server.addr());
    silent.set_blackhole(true);
    let unused = crate::support::server::free_port();
    let group = SentinelGroup::start();
    let known = group.sentinel_ports()[0];
    let cases = [
        ("nothing listens", format!("redis-sentinel://127.0.0.1:{unused}/#{MASTER_NAME}"), "no sentinel named"),
        ("a silent sentinel", format!("redis-sentinel://{}/#{MASTER_NAME}", silent.addr()), "no sentinel named"),
        ("an unknown master", format!("redis-sentinel://127.0.0.1:{known}/#no-such-master"), "no-such-master"),
    ];
    for (what, url, says) in cases {
        let started = Instant::now();
        let err = builder(&url).build().expect_err(what);
        let took = started.elapsed();
        assert!(took < CONNECT_TIMEOUT * 2 + SLACK, "{what}: failed within the connect timeout, took {took:?}");
        assert!(format!("{err:#}").contains(says), "{what}: says why: {err:#}");
    }
    for bad in ["redis-sentinel://127.0.0.1:1", "redis-sentinel://127.0.0.1:x/#m", "redis-sentinel://:s3cret@a/x#m"] {
        let err = builder(bad).build().expect_err(bad);
        assert!(err.is_invalid_input(), "{bad}: {err}");
        assert!(!err.to_string().contains("s3cret"), "{bad}: never the password: {err}");
    }
}

/// The race of a grant with the news of a failover, provoked: a thread's acquire is held up
/// in the old master (`CLIENT PAUSE WRITE`), the sentinels promote the replica and the
/// client hears of it, another client takes the lock on the new master, and only then does
/// the old master (still writable, its replica gone) run the held-up acquire and grant it.
/// The grant came on a connection of the master the client has left: it must not be given.
///
/// Breaks if a grant is judged by the master the client follows *now* rather than the one
/// it was made on: the old master, read afresh as if it were a new one, has no replica and
/// no loss on record, and the grant is confirmed while the other client holds the lock.
#[test]
fn a_grant_made_on_the_old_master_after_the_switch_is_never_given() {
    let group = SentinelGroup::start();
    let late = builder(&group.url()).command_timeout(Duration::from_secs(15)).build().expect("client");
    // The late client has a pooled connection to the old master before the failover.
    late.lock("warm-up").try_lock().expect("warm-up").expect("free").unlock().expect("released");
    let old_master = group.master_port();
    let mut old = group.master_conn();
    redis::cmd("CLIENT").arg("PAUSE").arg(12_000).arg("WRITE").query::<()>(&mut old).expect("CLIENT PAUSE");
    let (tx, rx) = mpsc::channel();
    let acquirer = {
        let lock = late.lock("split");
        thread::spawn(move || {
            let got = lock.try_lock().map(|guard| guard.map(|g| (g.is_held(), g.unlock().is_ok())));
            tx.send(got.map_err(|e| e.to_string())).expect("report");
        })
    };
    // The acquire is sent, and blocked in the old master.
    thread::sleep(Duration::from_millis(300));
    let new_master = group.failover();
    assert_ne!(new_master, old_master);
    // Every sentinel names the new master (the late client has heard one of them announce it).
    let switched = wait_until(Duration::from_secs(10), || {
        group.sentinel_ports().iter().all(|&port| {
            let url = format!("redis://127.0.0.1:{port}/");
            redis::Client::open(url)
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
                .and_then(|mut c| {
                    redis::cmd("SENTINEL")
                        .arg("get-master-addr-by-name")
                        .arg(MASTER_NAME)
                        .query::<(String, u16)>(&mut c)
                })
                .is_ok_and(|(_, port)| port == new_master)
        })
    });
    assert!(switched, "every sentinel names the new master");
    thread::sleep(Duration::from_millis(300));
    // The new master is alone (the old one, paused, is not its replica yet): a client with
    // replica-synced grants would be refused there, so the other holder does without.
    let other = builder(&group.url()).sync_replicas(false).build().expect("another client");
    let held = other.lock("split").try_lock().expect("the new master").expect("free on the new master");
    // The old master is still one, and writable once unpaused: the held-up acquire runs now.
    let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut old).expect("ROLE");
    assert!(
        matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master"),
        "the old master is not demoted yet (the race needs it writable): {role:?}"
    );
    redis::cmd("CLIENT").arg("UNPAUSE").query::<()>(&mut old).expect("CLIENT UNPAUSE");
    let got = rx.recv_timeout(Duration::from_secs(20)).expect("the held-up acquire ends");
    acquirer.join().expect("acquirer");
    assert!(held.is_held(), "the new master's holder still holds");
    assert!(
        !matches!(got, Ok(Some(_))),
        "a grant made on the old master after the switch was given while another client held the lock: {got:?}"
    );
    held.unlock().expect("released");
}
