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

/// A client of `server` through a proxy of its own (which the test can silence), with the
/// partition tests' lease and a 1 s command timeout, whose events go to the returned `Seen`.
fn holder_through_a_proxy(server: &RedisServer) -> (Proxy, Arc<Seen>, Client) {
    let proxy = Proxy::start(server.addr());
    let seen = Arc::new(Seen::default());
    let holder = Client::builder(proxy.url())
        .watchdog_timeout(LEASE)
        .command_timeout(Duration::from_secs(1))
        .events(Arc::clone(&seen) as Arc<dyn LockEvents>)
        .build()
        .expect("the holder's client");
    (proxy, seen, holder)
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
    let (proxy, seen, holder) = holder_through_a_proxy(server);
    let guard = holder.lock(name).lock().expect("the holder acquires");
    let watch = guard.watch();
    assert_eq!(watch.state(), LeaseState::Held);
    // The worker: checks before each write, never after.
    let writes = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let worker = {
        let (watch, writes) = (watch.clone(), Arc::clone(&writes));
        thread::spawn(move || {
            // The moment is read before the check: a thread preempted between the check
            // and its write (seen on a loaded machine) must not count as writing late.
            loop {
                let checked = Instant::now();
                if !watch.is_valid() {
                    break;
                }
                writes.lock().unwrap().push(checked);
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
    let (proxy, seen, holder) = holder_through_a_proxy(&server);
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
    // The lease reads held again before its hook runs (the hook is called outside the lease's lock).
    assert!(
        wait_until(Duration::from_secs(1), || seen.recovered.load(Ordering::SeqCst) >= 1),
        "the recovery is reported"
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
    // One connection: a new one is counted too where the server knows the `CLIENT SETINFO`
    // that redis-rs sends on connecting (Redis 7.2 and later, Valkey).
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
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
    assert_eq!(commands_served(&mut conn) - before, 0, "nothing was sent");
    // The edges build.
    Client::builder(server.url()).clock_drift_rate(0.0).clock_drift_margin(Duration::ZERO).build().expect("none");
    Client::builder(server.url()).clock_drift_rate(0.25).build().expect("a quarter");
}

// -----------------------------------------------------------------------------------------
// Interruptible waits
// -----------------------------------------------------------------------------------------

/// A blocking wait, run on its own thread: `Ok(true)` when it got what it waited for.
type BlockingWait = Box<dyn FnOnce() -> redlease::Result<bool> + Send>;

/// Runs `wait` on a thread, interrupts it once it has blocked (`blocked` tells), and
/// returns its outcome and how long after the interrupt it returned.
fn interrupt_while_blocked(wait: BlockingWait, blocked: impl Fn() -> bool) -> (redlease::Result<bool>, Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = thread::spawn(move || {
        tx.send(redlease::Interrupter::current()).expect("send the interrupter");
        let outcome = wait();
        (outcome, Instant::now())
    });
    let interrupter = rx.recv_timeout(Duration::from_secs(5)).expect("the interrupter");
    assert!(wait_until(Duration::from_secs(5), blocked), "the waiter blocked");
    thread::sleep(Duration::from_millis(50));
    let interrupted_at = Instant::now();
    interrupter.interrupt();
    let (outcome, returned_at) = waiter.join().expect("the waiter");
    (outcome, returned_at.saturating_duration_since(interrupted_at))
}

/// Every kind's wait, interrupted while it blocks: it returns `Interrupted` within
/// milliseconds, and leaves nothing in Redis (its wake-up registration, its place in a fair
/// queue, its subscription) nor in the client; the lock or permits stay as the holder left
/// them.
///
/// Breaks if a wait can only be ended by shutting the client down (as the CLI used to), if
/// it returns late (after a recheck or its deadline), or if it leaves anything behind.
#[test]
fn every_kind_of_wait_is_interrupted_within_milliseconds_and_leaves_nothing() {
    let server = RedisServer::start();
    let holder = client(&server);
    let waiting = client(&server);
    let mut conn = server.conn();
    let forever = Duration::from_secs(60);
    // What the holder holds, and each kind's wait on it.
    let held_rw = holder.read_write_lock("i-rw");
    let _read = held_rw.read().lock().expect("a reader holds");
    let _plain = holder.lock("i-plain").lock().expect("held");
    let _fair = holder.fair_lock("i-fair").lock().expect("held");
    let _fenced = holder.fenced_lock("i-fenced").lock().expect("held");
    let _multi_member = holder.lock("i-multi-b").lock().expect("held");
    assert!(holder.semaphore("i-sem").try_set_permits(1).expect("set"));
    let _permit = holder.semaphore("i-sem").acquire(1).expect("the only permit");
    assert!(holder.permit_expirable_semaphore("i-psem").try_set_permits(1).expect("set"));
    let _expirable = holder.permit_expirable_semaphore("i-psem").acquire(1).expect("the only permit");
    assert!(holder.count_down_latch("i-latch").try_set_count(1).expect("set"));
    let waits: Vec<(&str, BlockingWait)> = vec![
        ("plain", {
            let l = waiting.lock("i-plain");
            Box::new(move || l.lock().map(|g| g.is_held()))
        }),
        ("fair", {
            let l = waiting.fair_lock("i-fair");
            Box::new(move || l.try_lock_for(forever).map(|g| g.is_some()))
        }),
        ("write", {
            let l = waiting.read_write_lock("i-rw").write();
            Box::new(move || l.lock().map(|g| g.is_held()))
        }),
        ("fenced", {
            let l = waiting.fenced_lock("i-fenced");
            Box::new(move || l.lock().map(|g| g.is_held()))
        }),
        ("semaphore", {
            let s = waiting.semaphore("i-sem");
            Box::new(move || s.acquire(1).map(|_| true))
        }),
        ("expirable", {
            let s = waiting.permit_expirable_semaphore("i-psem");
            Box::new(move || s.try_acquire_for(1, forever).map(|g| g.is_some()))
        }),
        ("latch", {
            let l = waiting.count_down_latch("i-latch");
            Box::new(move || l.await_zero().map(|()| true))
        }),
        ("multi", {
            let m = redlease::MultiLock::new([waiting.lock("i-multi-a"), waiting.lock("i-multi-b")]);
            Box::new(move || m.lock().map(|g| g.is_held()))
        }),
    ];
    for (kind, wait) in waits {
        let (outcome, took) = interrupt_while_blocked(wait, || waiting.stats().waiters == 1);
        let err = outcome.expect_err(kind);
        assert!(err.is_interrupted(), "{kind}: {err}");
        assert!(took < Duration::from_millis(500), "{kind}: returned {took:?} after the interrupt");
        assert_eq!(waiting.stats().waiters, 0, "{kind}: no waiter left in the client");
    }
    // Nothing left in Redis: no waiting client registered, no fair queue, the multi-lock's
    // free member not taken, the permits as the holder left them, no subscription.
    assert_eq!(redis::cmd("ZCARD").arg("redlease_waiters:{i-plain}").query::<u64>(&mut conn).unwrap(), 0);
    assert_eq!(redis::cmd("ZCARD").arg("redlease_waiters:{i-fenced}").query::<u64>(&mut conn).unwrap(), 0);
    assert_eq!(llen(&mut conn, "redisson_lock_queue:{i-fair}"), 0, "no place left in the fair queue");
    assert!(!exists(&mut conn, "redisson_lock_timeout:{i-fair}"));
    assert!(!exists(&mut conn, "i-multi-a"), "the multi-lock's free member was given back");
    assert_eq!(waiting.semaphore("i-sem").available_permits().unwrap(), 0);
    assert_eq!(waiting.permit_expirable_semaphore("i-psem").available_permits().unwrap(), 0);
    let subscribed = wait_until(Duration::from_secs(3), || {
        let channels: Vec<String> = redis::cmd("PUBSUB").arg("CHANNELS").arg("*i-*").query(&mut conn).unwrap();
        channels.is_empty()
    });
    assert!(subscribed, "no subscription left");
}

/// A Redlock's wait, interrupted between its rounds: `Interrupted`, and nothing left on any
/// node.
///
/// Breaks if the Redlock's pause between rounds cannot be interrupted, or if a round's
/// partial holds stay behind.
#[test]
fn a_redlock_wait_is_interrupted_and_leaves_nothing_on_any_node() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let holders: Vec<Client> = servers.iter().map(client).collect();
    let waiting: Vec<Client> = servers.iter().map(client).collect();
    // Two of three nodes held elsewhere: no majority for the waiter.
    let _held: Vec<_> = holders[..2].iter().map(|c| c.lock("i-red").lock().expect("held")).collect();
    let red = redlease::RedLock::new(waiting.iter().map(|c| c.lock("i-red"))).retry_delay(Duration::from_millis(500));
    let started = Instant::now();
    let (outcome, took) = interrupt_while_blocked(Box::new(move || red.lock().map(|g| g.is_held())), || {
        started.elapsed() > Duration::from_millis(200)
    });
    assert!(outcome.expect_err("interrupted").is_interrupted());
    assert!(took < Duration::from_millis(500), "returned {took:?} after the interrupt");
    let mut third = servers[2].conn();
    assert!(!exists(&mut third, "i-red"), "the free node's hold was given back");
}

/// An interrupt sent while the thread is not waiting stays pending: its next wait fails at
/// once, a single attempt (`try_lock`) is not a wait and ignores it, and `clear()`
/// withdraws it.
///
/// Breaks if an interrupt sent just before a wait is lost (the race Java's semantics
/// close), or if it makes single attempts fail.
#[test]
fn an_interrupt_before_a_wait_fails_it_at_once_and_spares_single_attempts() {
    let server = RedisServer::start();
    let client = client(&server);
    let interrupter = redlease::Interrupter::current();
    interrupter.interrupt();
    let single = client.lock("i-pending").try_lock().expect("a single attempt").expect("free");
    drop(single);
    assert!(interrupter.is_interrupted(), "still pending after a single attempt");
    let started = Instant::now();
    let err = client.lock("i-pending").lock().expect_err("the pending interrupt");
    assert!(err.is_interrupted() && started.elapsed() < Duration::from_millis(100), "{err}");
    assert!(!interrupter.is_interrupted(), "taken by the wait");
    assert!(!client.lock("i-pending").is_locked().unwrap(), "nothing was taken");
    interrupter.interrupt();
    assert!(interrupter.clear());
    client.lock("i-pending").lock().expect("no interrupt pending").unlock().expect("released");
}

/// A grant that comes back in the same instant as the interrupt (the acquire's round trip
/// is slow, and the interrupt lands during it): the grant is given back, and the wait says
/// `Interrupted`.
///
/// Breaks if a wait that was interrupted returns a guard anyway, or keeps the lock.
#[test]
fn a_grant_in_the_same_instant_as_the_interrupt_is_given_back() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let slow = Client::builder(proxy.url()).command_timeout(Duration::from_secs(3)).build().expect("client");
    proxy.set_latency(Duration::from_millis(150));
    let lock = slow.lock("i-same-instant");
    let started = Instant::now();
    let (outcome, _) = interrupt_while_blocked(Box::new(move || lock.lock().map(|g| g.is_held())), || {
        started.elapsed() > Duration::from_millis(100)
    });
    assert!(outcome.expect_err("interrupted").is_interrupted());
    proxy.set_latency(Duration::ZERO);
    assert!(!exists(&mut server.conn(), "i-same-instant"), "the grant was given back");
}
