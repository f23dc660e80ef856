//! Stop in time: a holder cut off from Redis must stop acting before another holder can
//! begin. The holder's client reaches Redis through a proxy that stops forwarding in both
//! directions with its sockets left open (a partition); another client, straight to Redis,
//! waits for the same lock. The holder's workers, on other threads, check the guard's
//! [`LeaseWatch`](redlease::LeaseWatch) before each write.
//!
//! Rounds: 3 by default; `REDLEASE_PARTITION_ROUNDS=N` for more. The margins are printed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, LeaseState, LockEvents};

use crate::helpers::*;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

/// The holder's watchdog lease: renewed at 1 s, at risk at 1.5 s, valid until 3 s less
/// 32 ms of drift allowance after the last renewal's send.
const LEASE: Duration = Duration::from_secs(3);

fn rounds() -> usize {
    std::env::var("REDLEASE_PARTITION_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(3)
}

/// Records the lease events of one client, with when they came.
#[derive(Default)]
struct Seen {
    at_risk: Mutex<Vec<(Instant, Instant)>>,
    lost: Mutex<Vec<Instant>>,
    recovered: AtomicUsize,
}

impl LockEvents for Seen {
    fn lease_at_risk(&self, _lock: &str, valid_until: Instant) {
        self.at_risk.lock().unwrap().push((Instant::now(), valid_until));
    }

    fn lease_lost(&self, _lock: &str) {
        self.lost.lock().unwrap().push(Instant::now());
    }

    fn lease_recovered(&self, _lock: &str) {
        self.recovered.fetch_add(1, Ordering::SeqCst);
    }
}

/// One round's figures.
struct Round {
    /// From the worker's last write to the other holder's grant.
    margin: Duration,
    /// From the at-risk signal to the validity deadline.
    warned: Duration,
    /// From the validity deadline to the other holder's grant.
    slack: Duration,
}

/// One partition: the holder takes the lock through `proxy`, its worker writes every 10 ms
/// while the watch says it may, the proxy goes silent, and `other` waits for the lock.
fn partition_round(server: &RedisServer, other: &Client, name: &str) -> Round {
    let proxy = Proxy::start(server.addr());
    let seen = Arc::new(Seen::default());
    let holder = Client::builder(proxy.url())
        .watchdog_timeout(LEASE)
        .command_timeout(Duration::from_secs(1))
        .events(Arc::clone(&seen) as Arc<dyn LockEvents>)
        .build()
        .expect("the holder's client");
    let guard = holder.lock(name).lock().expect("the holder acquires");
    let watch = guard.watch();
    assert_eq!(watch.state(), LeaseState::Held);
    // The worker: checks before each write, never after.
    let writes = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let worker = {
        let (watch, writes) = (watch.clone(), Arc::clone(&writes));
        thread::spawn(move || {
            while watch.is_valid() {
                writes.lock().unwrap().push(Instant::now());
                thread::sleep(Duration::from_millis(10));
            }
        })
    };
    // A supervisor: learns of the risk before the deadline.
    let supervisor = {
        let watch = watch.clone();
        thread::spawn(move || {
            let state = watch.wait_for(Duration::from_secs(20));
            (state, Instant::now(), watch.valid_until())
        })
    };
    thread::sleep(Duration::from_millis(700));
    proxy.set_blackhole(true);
    let taken = other.lock(name).try_lock_for(Duration::from_secs(15)).expect("the other client");
    let granted_at = Instant::now();
    assert!(taken.is_some(), "the other client gets the lock once the lease ran out in Redis");
    worker.join().expect("worker");
    let (state, risk_seen_at, deadline) = supervisor.join().expect("supervisor");
    assert_eq!(state, LeaseState::AtRisk, "the supervisor was told of the risk, not of the loss");
    let deadline = deadline.expect("a deadline while at risk");
    let last_write = *writes.lock().unwrap().last().expect("the worker wrote");
    assert!(
        last_write < granted_at,
        "the cut-off holder's worker wrote {:?} after the other holder began",
        last_write - granted_at
    );
    assert!(last_write < deadline, "no write after the validity deadline");
    assert!(deadline <= granted_at, "Redis let the other holder in before the holder's deadline");
    assert!(!watch.is_valid() && !guard.is_held(), "the guard and the watch know the lease is gone");
    // The events: at risk (with that deadline) before lost, each once.
    let at_risk = seen.at_risk.lock().unwrap().clone();
    assert_eq!(at_risk.len(), 1, "at risk reported once");
    assert_eq!(at_risk[0].1, deadline, "with the deadline");
    assert!(wait_until(Duration::from_secs(3), || seen.lost.lock().unwrap().len() == 1), "the loss is reported once");
    assert!(at_risk[0].0 < seen.lost.lock().unwrap()[0], "at risk before lost");
    assert_eq!(seen.recovered.load(Ordering::SeqCst), 0, "nothing got through");
    drop(taken);
    drop(guard);
    holder.shutdown();
    Round {
        margin: granted_at - last_write,
        warned: deadline.saturating_duration_since(risk_seen_at),
        slack: granted_at.saturating_duration_since(deadline),
    }
}

/// The library user's side of the partition, over several rounds: a worker that checks
/// the watch before each write never writes after another holder has begun, a supervisor
/// blocked on the watch is told of the risk well before the deadline, and the events come
/// in order (at risk with the deadline, then lost).
///
/// Breaks if `is_valid()` stays true up to the loss (the old `is_held()` deadline had no
/// margin for the drift between two clocks), if the risk is not signalled before the
/// deadline (a renewal blocked on a silent connection for a whole command timeout), or if
/// the events are missing, repeated or out of order.
#[test]
fn a_cut_off_holders_workers_stop_before_another_holder_begins() {
    let server = RedisServer::start();
    let other = client(&server);
    let mut figures = Vec::new();
    for round in 0..rounds() {
        let r = partition_round(&server, &other, &format!("partitioned-{round}"));
        assert!(
            r.warned >= Duration::from_millis(500),
            "round {round}: the risk was signalled only {:?} before the deadline",
            r.warned
        );
        figures.push(r);
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let margins: Vec<String> = figures.iter().map(|r| format!("{:.0}", ms(r.margin))).collect();
    let warned: Vec<String> = figures.iter().map(|r| format!("{:.0}", ms(r.warned))).collect();
    let slack: Vec<String> = figures.iter().map(|r| format!("{:.1}", ms(r.slack))).collect();
    println!(
        "partition rounds: last write → other grant (ms) {margins:?}; risk signalled before the deadline (ms) {warned:?}; deadline → other grant (ms) {slack:?}"
    );
}

/// A renewal that gets through again after a spell of failures: the lease turns at risk,
/// then held again, and both are reported, once each.
///
/// Breaks if a lease stays at risk after a renewal succeeds, or if the end of the spell
/// is not reported.
#[test]
fn a_lease_at_risk_recovers_when_a_renewal_gets_through() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let seen = Arc::new(Seen::default());
    let holder = Client::builder(proxy.url())
        .watchdog_timeout(LEASE)
        .command_timeout(Duration::from_secs(1))
        .events(Arc::clone(&seen) as Arc<dyn LockEvents>)
        .build()
        .expect("client");
    let guard = holder.lock("recovering").lock().expect("acquired");
    let watch = guard.watch();
    proxy.set_blackhole(true);
    assert_eq!(watch.wait_for(Duration::from_secs(5)), LeaseState::AtRisk, "at risk within the lease");
    assert_eq!(guard.lease_state(), LeaseState::AtRisk);
    assert!(guard.is_held(), "at risk is still held");
    proxy.set_blackhole(false);
    // The connection the renewal was blocked on is gone; the next one gets through.
    assert!(
        wait_until(Duration::from_secs(3), || guard.lease_state() == LeaseState::Held),
        "held again once a renewal gets through: {:?}",
        guard.lease_state()
    );
    assert_eq!(seen.at_risk.lock().unwrap().len(), 1, "at risk reported once");
    assert_eq!(seen.recovered.load(Ordering::SeqCst), 1, "the recovery reported once");
    assert!(seen.lost.lock().unwrap().is_empty(), "never lost");
    assert!(watch.is_valid());
    guard.unlock().expect("released");
    assert_eq!(watch.state(), LeaseState::Released, "the watch outlives the guard and says so");
    assert!(!watch.is_valid());
}

/// Bad drift allowances are `InvalidInput` at `build()`, before anything is sent.
///
/// Breaks if a negative, not-a-number or oversized allowance builds (an allowance of a
/// third of the lease or more would leave a lease invalid before its renewal is due).
#[test]
fn bad_drift_allowances_are_refused_before_anything_is_sent() {
    let server = RedisServer::start();
    let before = commands_served(&mut server.conn());
    let cases: [(&str, f64, Duration); 5] = [
        ("a negative rate", -0.01, Duration::from_millis(2)),
        ("not a number", f64::NAN, Duration::from_millis(2)),
        ("a rate beyond 0.25", 0.3, Duration::from_millis(2)),
        ("a margin of a third of the lease", 0.01, Duration::from_secs(10)),
        ("an infinite rate", f64::INFINITY, Duration::ZERO),
    ];
    for (what, rate, margin) in cases {
        let err =
            Client::builder(server.url()).clock_drift_rate(rate).clock_drift_margin(margin).build().expect_err(what);
        assert!(err.is_invalid_input(), "{what}: {err}");
        assert!(err.to_string().contains("drift"), "{what}: says which setting: {err}");
    }
    assert_eq!(commands_served(&mut server.conn()) - before, 0, "nothing was sent");
    // The edges build.
    Client::builder(server.url()).clock_drift_rate(0.0).clock_drift_margin(Duration::ZERO).build().expect("none");
    Client::builder(server.url()).clock_drift_rate(0.25).build().expect("a quarter");
}
