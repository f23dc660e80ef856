//! A paused Redis, and one that stops answering for a while.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, ErrorKind, LockEvents};

use super::{COMMAND_TIMEOUT, SLACK};
use crate::helpers::*;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

/// `CLIENT PAUSE ... ALL` holds back every command: an acquire must come back with a
/// timeout within about the command timeout, not when the pause ends, and leave nothing.
/// The retry budget is zero: the client's announcement, which a first acquisition starts,
/// may take the one pooled connection, and the acquire then opens another, whose handshake
/// gets no answer either; with a budget, that connection (nothing sent on it) would be
/// tried again for the budget's 3 s (seen once on a loaded machine: 3.58 s).
///
/// Breaks if `try_lock` waits for Redis instead of its timeout (checked by clearing the
/// connections' read timeout on purpose: the acquire then waited out the pause and returned
/// a guard), reports anything but a timeout, or leaves the key behind.
#[test]
fn an_acquire_against_a_paused_redis_times_out_and_leaves_nothing() {
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .command_timeout(COMMAND_TIMEOUT)
        .retry_budget(Duration::ZERO)
        .build()
        .expect("client builds");
    let lock = client.lock("paused");
    let mut admin = server.conn();
    // Long enough that a test thread held up on a loaded machine still sends its acquire
    // inside the pause (with 2 s, one got there after it and was granted).
    let pause = Duration::from_secs(5);
    redis::cmd("CLIENT").arg("PAUSE").arg(pause.as_millis() as u64).arg("ALL").query::<()>(&mut admin).unwrap();
    let paused = Instant::now();
    let err = lock.try_lock().expect_err("no reply while Redis is paused: must be an error");
    let took = paused.elapsed();
    assert!(took < pause, "the acquire was sent and answered inside the pause: {took:?}");
    assert!(err.is_timeout(), "{err}");
    // The acquire times out: one command timeout (its undo goes out behind it on the same
    // connection, from a thread of its own).
    assert!(took < COMMAND_TIMEOUT + SLACK, "try_lock took {took:?} against a {pause:?} pause");
    // Returns when the pause ends: every command is held back until then.
    let _: String = redis::cmd("PING").query(&mut admin).unwrap();
    assert!(paused.elapsed() + Duration::from_millis(50) >= pause, "the pause was real");
    assert!(wait_until(Duration::from_secs(2), || !exists(&mut admin, "paused")), "nothing left behind");
    let guard = lock.try_lock().unwrap().expect("usable after the pause");
    assert!(guard.is_held());
    guard.unlock().unwrap();
    assert!(!exists(&mut admin, "paused"));
}

/// Redis restarts under callers: a `lock()`, an `unlock()` and a query made while it is
/// down ride the restart out within the retry budget; a caller's own deadline still ends
/// its wait; with a budget of zero the first connection error comes back at once.
///
/// Breaks if calls fail at the first refused connection despite the budget (no retry), if
/// a retry runs past the caller's deadline, or if a zero budget still retries.
#[test]
fn calls_ride_out_a_restart_within_the_retry_budget_and_never_past_their_deadline() {
    let mut server = RedisServer::start();
    let patient = client_with(&server, |b| b.retry_budget(Duration::from_secs(10)));
    let impatient = client_with(&server, |b| b.retry_budget(Duration::ZERO));
    let held = patient.lock("restart-held").lock().expect("held");
    let lock = patient.lock("restart-new");
    server.kill();

    let started = Instant::now();
    let err = impatient.lock("restart-new").try_lock().expect_err("down, no budget");
    assert!(err.is_connection_error(), "{err}");
    assert!(started.elapsed() < SLACK * 2, "no budget: at once ({:?})", started.elapsed());

    let started = Instant::now();
    let err = lock.try_lock_for(Duration::from_millis(300)).expect_err("down past the deadline");
    assert!(err.is_connection_error(), "{err}");
    let took = started.elapsed();
    assert!(took < Duration::from_millis(300) + SLACK, "the deadline ends the retries: {took:?}");

    let restarter = thread::spawn(move || {
        thread::sleep(Duration::from_millis(800));
        server.start_again();
        server
    });
    let started = Instant::now();
    let guard = lock.lock().expect("lock() rides out the restart");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(700), "it waited for the server: {took:?}");
    assert!(guard.is_held());
    assert_eq!(lock.hold_count().expect("a query after the restart"), 1);
    guard.unlock().expect("released");
    // The lock held across the restart was lost with the data (no persistence).
    assert_eq!(held.unlock().expect_err("lost in the restart").kind(), ErrorKind::NotHeld);
    let server = restarter.join().expect("restarter");
    assert!(!exists(&mut server.conn(), "restart-new"));
}

/// Redis is down for 1.5 s, six times a 250 ms retry budget. `lock()` (no deadline) rides
/// it out and gets the lock once Redis is back, having said once that it waits through an
/// outage; a `try_lock()` gives up within the budget; a second `lock()`, interrupted while
/// Redis is down, ends at once.
///
/// Breaks if a wait without deadline gives up at the retry budget (it returned the
/// connection error after 250 ms), if it never says it is riding an outage out, if calls
/// that do not wait lose their budget, or if an interrupt waits for Redis.
#[test]
fn lock_rides_out_an_outage_longer_than_the_budget_and_says_so() {
    let mut server = RedisServer::start();
    let outages = Arc::new(Outages::default());
    let events: Arc<dyn LockEvents> = outages.clone();
    let budget = Duration::from_millis(250);
    let client = client_with(&server, |b| b.retry_budget(budget).events(events));
    client.lock("outage-warm").lock().unwrap().unlock().unwrap();
    server.kill();
    let waiting = {
        let lock = client.lock("outage");
        thread::spawn(move || {
            let started = Instant::now();
            let got = lock.lock().and_then(|guard| guard.unlock());
            (got, started.elapsed())
        })
    };
    let (interrupter_tx, interrupter_rx) = std::sync::mpsc::channel();
    let interrupted = {
        let lock = client.lock("outage-interrupted");
        thread::spawn(move || {
            interrupter_tx.send(redlease::Interrupter::current()).unwrap();
            let started = Instant::now();
            (lock.lock().map(drop), started.elapsed())
        })
    };
    let started = Instant::now();
    let err = client.lock("outage-single").try_lock().expect_err("down");
    assert!(err.is_connection_error(), "{err}");
    assert!(started.elapsed() < budget + SLACK, "a single attempt keeps the budget: {:?}", started.elapsed());
    thread::sleep(Duration::from_millis(700));
    let interrupt_sent = Instant::now();
    interrupter_rx.recv().unwrap().interrupt();
    let (result, _) = interrupted.join().unwrap();
    assert!(result.expect_err("interrupted").is_interrupted());
    assert!(interrupt_sent.elapsed() < SLACK, "at once: {:?}", interrupt_sent.elapsed());
    thread::sleep(Duration::from_millis(800));
    server.start_again();
    let (got, took) = waiting.join().unwrap();
    got.expect("lock() got the lock once Redis was back");
    assert!(took >= Duration::from_millis(1400), "it waited for Redis: {took:?}");
    assert_eq!(outages.count(), 2, "each wait said it once (the interrupted one too)");
    assert_eq!(client.stats().waits_through_outage, 2);
}

/// The holder's server refuses connections from the moment `unlock()` begins until 150 ms
/// before the guard's fixed lease ends. The release keeps trying until then, its last try
/// a moment before the lease's end: the unlock succeeds and the lock is free at once.
///
/// Breaks if the retries end as soon as the next pause (up to 1 s) would pass the lease's
/// end (seen: the unlock returned the connection error and the lock stayed held to its
/// expiry, in 3 of 5 runs), or if they go on past it.
#[test]
fn a_release_rides_out_refused_connections_until_its_lease_ends() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let client = Client::builder(proxy.url())
        .command_timeout(COMMAND_TIMEOUT)
        .retry_budget(Duration::from_secs(30))
        .build()
        .expect("client builds");
    let lease = Duration::from_secs(2);
    let guard = client.lock("release-to-the-end").with_lease(lease).lock().unwrap();
    let valid_until = guard.valid_until().expect("a fixed lease ends");
    let heal_at = valid_until - Duration::from_millis(150);
    proxy.set_refusing(true);
    proxy.cut_all();
    let (unlocked, took) = thread::scope(|scope| {
        scope.spawn(|| {
            thread::sleep(heal_at.saturating_duration_since(Instant::now()));
            proxy.set_refusing(false);
        });
        let started = Instant::now();
        (guard.unlock(), started.elapsed())
    });
    assert!(unlocked.is_ok(), "the release's last try came after the refusals ended: {unlocked:?} after {took:?}");
    assert!(Instant::now() <= valid_until + SLACK, "and not past the lease's end ({took:?})");
    let mut direct = server.conn();
    assert!(!exists(&mut direct, "release-to-the-end"), "released, not left to expire");
}
