//! Fault class 4: unchecked arithmetic on user values.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{AnyLock, Client, ClientBuilder, ErrorKind, MultiLock, RedLock};

use super::{SLACK, assert_invalid};
use crate::helpers::*;
use crate::support::server::RedisServer;

/// `Duration::MAX` connect, command and ping timeouts mean "no limit", not an overflow: the
/// client builds, locks uncontended, waits for a contended lock that is released after
/// 200 ms, and keeps mutual exclusion (a non-atomic counter under the lock, two such
/// clients, four threads).
///
/// Breaks if any of these settings overflows a deadline computation (a panic in `build`, in
/// a pooled checkout, in the subscriber's join or ping schedule), or turns into a zero
/// timeout, or makes a wait never end (caught by the channels' timeouts).
#[test]
fn the_longest_connect_command_and_ping_timeouts_build_and_work() {
    let server = RedisServer::start();
    let unbounded =
        |b: ClientBuilder| b.connect_timeout(Duration::MAX).command_timeout(Duration::MAX).ping_interval(Duration::MAX);
    let a = client_with(&server, unbounded);
    let b = client_with(&server, unbounded);
    let other = crate::helpers::client(&server);
    a.lock("max-free").lock().unwrap().unlock().unwrap();

    // A contended wait: the holder releases 200 ms after the waiter started waiting.
    let guard = other.lock("max-wait").lock().unwrap();
    let (tx, rx) = mpsc::channel();
    let lock = a.lock("max-wait");
    thread::spawn(move || {
        let _ = tx.send((lock.lock().map(|g| g.unlock().is_ok()).map_err(|e| e.to_string()), Instant::now()));
    });
    assert!(wait_until(Duration::from_secs(5), || a.stats().waiters == 1), "{:?}", a.stats());
    thread::sleep(Duration::from_millis(200));
    let released = Instant::now();
    drop(guard);
    let (outcome, at) = rx.recv_timeout(Duration::from_secs(10)).expect("the waiter got the lock (or failed) in time");
    assert_eq!(outcome, Ok(true));
    let took = at.saturating_duration_since(released);
    assert!(took < Duration::from_secs(2), "woken {took:?} after the release");

    // Mutual exclusion, four threads over the two unbounded clients.
    let (tx, rx) = mpsc::channel();
    let url = server.url();
    let clients = [a.clone(), b.clone()];
    thread::spawn(move || {
        run_threads(4, &url, |index, conn| {
            let lock = clients[index % 2].lock("max-count");
            for _ in 0..25 {
                let guard = lock.lock().unwrap();
                increment_non_atomically(conn, "max-counter");
                guard.unlock().unwrap();
            }
        });
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("100 critical sections ended (a worker failed, or hung)");
    let count: u64 = redis::cmd("GET").arg("max-counter").query(&mut server.conn()).unwrap();
    assert_eq!(count, 100, "two holders at once lost increments");
}

/// Sizes and durations so large that they would overflow (or allocate, or spawn) are
/// `InvalidInput` before anything happens: the builder settings before connecting (nothing
/// listens on port 1), and the lease of every lock kind before anything is sent.
///
/// Breaks if one of these is accepted (a pool of 2^40 connections, a renew batch beyond
/// what Redis takes, a lease Lua cannot hold) or fails with another kind (a connection
/// error means it was not checked first), or if anything reached Redis.
#[test]
fn sizes_and_durations_beyond_their_limits_are_invalid_input() {
    let url = "redis://127.0.0.1:1/";
    let builders = [
        ("pool_size(usize::MAX)", Client::builder(url).pool_size(usize::MAX)),
        ("pool_size(1 << 40)", Client::builder(url).pool_size(1 << 40)),
        ("renew_batch_size(usize::MAX)", Client::builder(url).renew_batch_size(usize::MAX)),
        ("watchdog_timeout(MAX)", Client::builder(url).watchdog_timeout(Duration::MAX)),
        ("fair_wait_timeout(MAX)", Client::builder(url).fair_wait_timeout(Duration::MAX)),
    ];
    for (what, builder) in builders {
        assert_invalid(builder.build(), what);
    }

    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    let rw = client.read_write_lock("max-rw");
    let kinds: [(&str, AnyLock); 5] = [
        ("lock", client.lock("max-lease").into()),
        ("fair", client.fair_lock("max-lease-fair").into()),
        ("fenced", client.fenced_lock("max-lease-fenced").into()),
        ("read", rw.read().into()),
        ("write", rw.write().into()),
    ];
    for (kind, lock) in kinds {
        assert_invalid(lock.clone().with_lease(Duration::MAX).lock(), &format!("{kind}: with_lease(MAX).lock()"));
        assert_invalid(
            lock.clone().with_lease(Duration::MAX).try_lock(),
            &format!("{kind}: with_lease(MAX).try_lock()"),
        );
    }
    assert_eq!(commands_served(&mut conn) - before, 0, "nothing was sent");
}

/// A wait whose deadline overflows the clock (`Duration::MAX`) is a wait without deadline,
/// as parking_lot's `try_lock_for` reads it: every `_for` verb of every kind grants at once
/// what is free, and a contended one waits as `lock()` does, until the release.
///
/// Breaks if one of them refuses the wait (before the fix: `InvalidInput`, "overflows the
/// clock"), or returns `None` without waiting.
#[test]
fn a_wait_whose_deadline_overflows_is_a_wait_without_deadline() {
    let server = RedisServer::start();
    let client = client(&server);
    let rw = client.read_write_lock("forever-rw");
    let kinds: [(&str, AnyLock); 8] = [
        ("lock", client.lock("forever-lock").into()),
        ("fair", client.fair_lock("forever-fair").into()),
        ("fenced", client.fenced_lock("forever-fenced").into()),
        ("non-reentrant", client.non_reentrant_lock("forever-nr").into()),
        ("non-reentrant fair", client.non_reentrant_fair_lock("forever-nrf").into()),
        ("spin", client.spin_lock("forever-spin").into()),
        ("read", rw.read().into()),
        ("write", client.read_write_lock("forever-rw-w").write().into()),
    ];
    let forever = Duration::MAX;
    let granted = |what: &str, got: redlease::Result<bool>| match got {
        Ok(true) => {}
        Ok(false) => panic!("{what}: not granted, on a free lock"),
        Err(e) => panic!("{what}: {e}"),
    };
    for (kind, lock) in &kinds {
        granted(kind, lock.try_lock_for(forever).map(|g| g.is_some()));
    }
    granted("fenced (own type)", client.fenced_lock("forever-f2").try_lock_for(forever).map(|g| g.is_some()));
    granted(
        "multi",
        MultiLock::new([client.lock("forever-m1"), client.lock("forever-m2")])
            .try_lock_for(forever)
            .map(|g| g.is_some()),
    );
    granted("group", client.group_lock("forever-group", ["a", "b"]).try_lock_for(forever).map(|g| g.is_some()));
    let semaphore = client.semaphore("forever-sem");
    assert!(semaphore.try_set_permits(1).unwrap());
    granted("semaphore", semaphore.try_acquire_for(1, forever).map(|g| g.is_some()));
    let expirable = client.permit_expirable_semaphore("forever-pes");
    assert!(expirable.try_set_permits(1).unwrap());
    granted("permit semaphore", expirable.try_acquire_for(1, forever).map(|g| g.is_some()));
    let latch = client.count_down_latch("forever-latch");
    assert!(latch.try_set_count(1).unwrap());
    latch.count_down().unwrap();
    granted("latch", latch.await_for(forever));
    granted("election", client.election("forever-election").campaign_for("v", forever).map(|l| l.is_some()));
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let node_clients: Vec<Client> = nodes.iter().map(crate::helpers::client).collect();
    granted(
        "redlock",
        RedLock::new(node_clients.iter().map(|c| c.lock("forever-red"))).try_lock_for(forever).map(|g| g.is_some()),
    );

    // Contended: the wait goes on until the holder releases, 300 ms later.
    let other = crate::helpers::client(&server);
    let held = other.lock("forever-held").lock().unwrap();
    let mut observer = client.election("forever-observed").observe().unwrap();
    let (tx, rx) = mpsc::channel();
    let lock = client.lock("forever-held");
    let campaigner = other.election("forever-observed");
    thread::spawn(move || {
        let got = lock.try_lock_for(Duration::MAX).map(|g| g.is_some()).map_err(|e| e.to_string());
        let changed = observer.wait_change_for(Duration::MAX).map_err(|e| e.to_string());
        let _ = tx.send((got, changed));
    });
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "{:?}", client.stats());
    thread::sleep(Duration::from_millis(300));
    drop(held);
    let leadership = campaigner.campaign("now").unwrap();
    let (got, changed) = rx.recv_timeout(Duration::from_secs(10)).expect("the waits ended");
    assert_eq!(got, Ok(true), "the lock, once released");
    assert_eq!(changed, Ok(true), "the leadership changed");
    drop(leadership);
}

/// One rule for `Duration::MAX` in every duration setting of the builder: a time the client
/// only waits for (connect, command, ping interval, retry budget) means "no limit", and the
/// client builds and locks; a time written into Redis in milliseconds (the watchdog
/// timeout, the fair wait timeout, the replica sync timeout's `WAIT`) is `InvalidInput`
/// naming the setting and the limit; the clock drift margin is an allowance, refused when
/// it leaves nothing of the watchdog lease.
///
/// Breaks if a setting of the first kind is refused or overflows, or one of the second is
/// accepted (before the fix: `replica_sync_timeout(MAX)` was taken, and turned into a
/// `WAIT` Redis refuses on a replicated master) or refused without saying which setting.
#[test]
fn every_duration_setting_reads_max_by_one_rule() {
    let server = RedisServer::start();
    for (what, set) in [
        ("connect_timeout", ClientBuilder::connect_timeout as fn(ClientBuilder, Duration) -> ClientBuilder),
        ("command_timeout", ClientBuilder::command_timeout),
        ("ping_interval", ClientBuilder::ping_interval),
        ("retry_budget", ClientBuilder::retry_budget),
    ] {
        let client = set(Client::builder(server.url()), Duration::MAX)
            .build()
            .unwrap_or_else(|e| panic!("{what}(MAX) is no limit, and builds: {e}"));
        let guard = client.lock(format!("max-{what}")).try_lock().unwrap().expect("free");
        guard.unlock().unwrap_or_else(|e| panic!("{what}(MAX): {e}"));
    }
    let url = "redis://127.0.0.1:1/";
    for (what, set, says) in [
        (
            "watchdog_timeout",
            ClientBuilder::watchdog_timeout as fn(ClientBuilder, Duration) -> ClientBuilder,
            "watchdog timeout",
        ),
        ("fair_wait_timeout", ClientBuilder::fair_wait_timeout, "fair wait timeout"),
        ("replica_sync_timeout", ClientBuilder::replica_sync_timeout, "replica sync timeout"),
    ] {
        let err = set(Client::builder(url), Duration::MAX).build().expect_err(what);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}(MAX): {err}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("invalid input: {says} ")) && text.contains("milliseconds"),
            "{what}(MAX): {text}"
        );
    }
    let err = Client::builder(url).clock_drift_margin(Duration::MAX).build().expect_err("margin");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("clock drift margin"), "{err}");
}

/// A Redlock's per-node timeout and retry delay of `Duration::MAX` must not overflow: the
/// node timeout is capped by each node's command timeout, and the retry pause by the
/// caller's deadline.
///
/// Breaks if either panics (an `Instant` or `Duration` overflow), or if a timed attempt
/// sleeps the unbounded retry delay instead of ending at its deadline (caught by the
/// channel's timeout).
#[test]
fn a_redlock_with_the_longest_node_timeout_and_retry_delay_works() {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let clients: Vec<Client> = nodes.iter().map(client).collect();
    let red = |name: &str| RedLock::new(clients.iter().map(|c| c.lock(name)));

    for (what, red) in [
        ("node_timeout", red("red-max").node_timeout(Duration::MAX)),
        ("retry_delay", red("red-max").retry_delay(Duration::MAX)),
    ] {
        let guard = red.try_lock().unwrap_or_else(|e| panic!("{what}(MAX): {e}")).expect("all nodes are free");
        assert!(guard.is_held() && !guard.validity().is_zero(), "{what}(MAX)");
        guard.unlock().unwrap();
    }

    // Contended on two nodes of three: every attempt fails, and the retry pause must be
    // cut to the deadline.
    let rivals: Vec<Client> = nodes.iter().map(client).collect();
    let _held: Vec<_> = rivals[..2].iter().map(|c| c.lock("red-max").lock().unwrap()).collect();
    let (tx, rx) = mpsc::channel();
    let locks: Vec<_> = clients.iter().map(|c| c.lock("red-max")).collect();
    thread::spawn(move || {
        let red = RedLock::new(locks).node_timeout(Duration::MAX).retry_delay(Duration::MAX);
        let once = red.try_lock().map(|g| g.is_some()).map_err(|e| e.to_string());
        let started = Instant::now();
        let timed = red.try_lock_for(Duration::from_millis(300)).map(|g| g.is_some()).map_err(|e| e.to_string());
        let _ = tx.send((once, timed, started.elapsed()));
    });
    let (once, timed, took) = rx.recv_timeout(Duration::from_secs(10)).expect("the contended attempts ended");
    assert_eq!(once, Ok(false), "a minority is free: no grant");
    assert_eq!(timed, Ok(false), "a minority is free: no grant");
    assert!(took < Duration::from_millis(300) + SLACK * 2, "a 300 ms wait took {took:?}");
}
