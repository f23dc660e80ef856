//! Waiting: pub/sub wake-ups across processes, lost messages, shared subscriptions, and an
//! idle client that stays quiet.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] = &[("handoff_waiter", waiter)];

/// Says "waiting", blocks in `lock()` on LOCK, says "acquired", releases.
fn waiter() {
    let client = redlease::Client::open(&child::env("REDIS_URL")).unwrap();
    let lock = client.lock(child::env("LOCK"));
    child::say("waiting");
    let guard = lock.lock().unwrap();
    child::say("acquired");
    guard.unlock().unwrap();
}

#[test]
fn a_waiter_in_another_process_acquires_promptly_after_release() {
    let server = RedisServer::start();
    let client = client(&server);
    let guard = client.lock("handoff").lock().unwrap();
    let child = Child::spawn("handoff_waiter", &[("REDIS_URL", server.url()), ("LOCK", "handoff".into())]);
    child.wait_line("waiting", Duration::from_secs(10));
    let mut conn = server.conn();
    assert!(wait_until(Duration::from_secs(5), || subscribers(&mut conn, "redisson_lock__channel:{handoff}") == 1));
    thread::sleep(Duration::from_millis(100));
    assert!(!child.lines().iter().any(|l| l == "acquired"), "not before the release");
    let released = Instant::now();
    guard.unlock().unwrap();
    child.wait_line("acquired", Duration::from_secs(10));
    let took = released.elapsed();
    assert!(took < Duration::from_secs(1), "hand-off took {took:?} (the lease was 30 s)");
}

#[test]
fn a_killed_pubsub_connection_does_not_strand_a_waiter() {
    let server = RedisServer::start();
    let holder = client(&server);
    let guard = holder.lock("pubsub-killed").lock().unwrap();
    let waiter = client(&server);
    let lock = waiter.lock("pubsub-killed");
    let waiting = thread::spawn(move || lock.try_lock_for(Duration::from_secs(25)).unwrap().is_some());
    let mut conn = server.conn();
    let channel = "redisson_lock__channel:{pubsub-killed}";
    assert!(wait_until(Duration::from_secs(5), || subscribers(&mut conn, channel) == 1));
    let killed: u64 = redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query(&mut conn).unwrap();
    assert_eq!(killed, 1);
    // Released while the subscriber is disconnected: this message is lost.
    let released = Instant::now();
    guard.unlock().unwrap();
    assert!(waiting.join().unwrap());
    let took = released.elapsed();
    assert!(took < Duration::from_secs(5), "woken by the resubscription, not the 30 s TTL: {took:?}");
}

#[test]
fn a_raw_del_without_message_is_noticed_within_the_holders_ttl() {
    let server = RedisServer::start();
    let holder = client_with(&server, |b| b.watchdog_timeout(Duration::from_millis(1500)));
    let _guard = holder.lock("deleted").lock().unwrap();
    let waiter = client(&server);
    let lock = waiter.lock("deleted");
    let waiting = thread::spawn(move || lock.try_lock_for(Duration::from_secs(20)).unwrap().is_some());
    assert!(wait_until(Duration::from_secs(5), || waiter.stats().waiters == 1));
    thread::sleep(Duration::from_millis(50));
    redis::cmd("DEL").arg("deleted").query::<()>(&mut server.conn()).unwrap();
    let deleted = Instant::now();
    assert!(waiting.join().unwrap());
    let took = deleted.elapsed();
    assert!(took < Duration::from_millis(1500) + Duration::from_millis(1000), "took {took:?}");
}

#[test]
fn a_hundred_threads_on_ten_locks_share_one_subscription_per_lock() {
    let server = RedisServer::start();
    let holder = client(&server);
    let names: Vec<String> = (0..10).map(|i| format!("crowd-{i}")).collect();
    let guards: Vec<_> = names.iter().map(|n| holder.lock(n.as_str()).lock().unwrap()).collect();
    let waiters = client_with(&server, |b| b.pool_size(16));
    let start = Arc::new(Barrier::new(100));
    let threads: Vec<_> = (0..100)
        .map(|i| {
            let lock = waiters.lock(names[i % 10].as_str());
            let counter = format!("count:{}", names[i % 10]);
            let mut conn = server.conn();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                let guard = lock.try_lock_for(Duration::from_secs(60)).unwrap().expect("every thread gets its lock");
                increment_non_atomically(&mut conn, &counter);
                guard.unlock().unwrap();
            })
        })
        .collect();
    assert!(wait_until(Duration::from_secs(20), || waiters.stats().waiters == 100), "{:?}", waiters.stats());
    let mut conn = server.conn();
    for name in &names {
        assert_eq!(subscribers(&mut conn, &format!("redisson_lock__channel:{{{name}}}")), 1, "{name}");
    }
    assert_eq!(waiters.stats().channels, 10);
    drop(guards);
    for t in threads {
        t.join().unwrap();
    }
    for name in &names {
        let count: u64 = redis::cmd("GET").arg(format!("count:{name}")).query(&mut conn).unwrap();
        assert_eq!(count, 10, "{name}");
    }
    // The last waiter's UNSUBSCRIBE is confirmed asynchronously.
    let clean = || {
        let s = waiters.stats();
        (s.waiters, s.channels, s.leases) == (0, 0, 0)
    };
    assert!(wait_until(Duration::from_secs(2), clean), "{:?}", waiters.stats());
    assert!(wait_until(Duration::from_secs(2), || {
        names.iter().all(|n| subscribers(&mut conn, &format!("redisson_lock__channel:{{{n}}}")) == 0)
    }));
}

#[test]
fn an_idle_client_sends_nothing_and_holds_no_subscription() {
    let server = RedisServer::start();
    let other = client(&server);
    let client = client_with(&server, |b| b.watchdog_timeout(Duration::from_millis(300)));
    let lock = client.lock("idle");
    // Use everything once: a renewed lease, a contended wait, a release.
    let guard = other.lock("idle").lock().unwrap();
    let waiting = {
        let lock = lock.clone();
        thread::spawn(move || lock.try_lock_for(Duration::from_secs(10)).unwrap().map(|g| g.unlock()).is_some())
    };
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1));
    drop(guard);
    assert!(waiting.join().unwrap());
    let held = lock.lock().unwrap();
    thread::sleep(Duration::from_millis(400)); // at least one renewal
    drop(held);
    let mut conn = server.conn();
    assert!(wait_until(Duration::from_secs(2), || subscribers(&mut conn, "redisson_lock__channel:{idle}") == 0));
    assert!(wait_until(Duration::from_secs(2), || client.stats().channels == 0));
    let before = commands_served(&mut conn);
    thread::sleep(Duration::from_secs(2));
    let after = commands_served(&mut conn);
    assert_eq!(after - before, 0, "an idle client sent commands");
    let stats = client.stats();
    assert_eq!((stats.leases, stats.renewals_scheduled, stats.waiters, stats.channels), (0, 0, 0, 0), "{stats:?}");
    assert!(stats.renewal_passes >= 1 && stats.leases_renewed >= 1, "the lease was renewed: {stats:?}");
}
