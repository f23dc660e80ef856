//! The reentrant lock against a real server: layout, reentrancy, queries, release paths.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, ErrorKind, LeaseState};

use crate::helpers::*;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

#[test]
fn the_redis_layout_is_redissons() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let guard = client.lock("orders:42").lock().unwrap();
    let fields: HashMap<String, u64> = redis::cmd("HGETALL").arg("orders:42").query(&mut conn).unwrap();
    let owner = format!("{}:", client.id());
    assert_eq!(fields.len(), 1, "{fields:?}");
    let (field, count) = fields.iter().next().unwrap();
    assert!(field.starts_with(&owner) && field[owner.len()..].parse::<u64>().is_ok(), "owner field {field}");
    assert_eq!(*count, 1);
    let ttl = pttl(&mut conn, "orders:42");
    assert!(ttl > 25_000 && ttl <= 30_000, "default watchdog lease, got {ttl} ms");
    drop(guard);
    assert!(!exists(&mut conn, "orders:42"));
}

#[test]
fn reentrancy_counts_holds_and_excludes_other_threads() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("reentrant");
    let first = lock.lock().unwrap();
    let second = lock.try_lock().unwrap().expect("the owner thread re-enters");
    assert_eq!(lock.hold_count().unwrap(), 2);
    assert!(lock.is_held_by_current_thread().unwrap());
    let other = lock.clone();
    let seen = thread::spawn(move || {
        (other.try_lock().unwrap().is_none(), other.hold_count().unwrap(), other.is_held_by_current_thread().unwrap())
    })
    .join()
    .unwrap();
    assert_eq!(seen, (true, 0, false), "another thread neither gets it nor owns holds");
    second.unlock().unwrap();
    assert!(lock.is_locked().unwrap(), "one hold remains");
    assert_eq!(lock.hold_count().unwrap(), 1);
    assert!(first.is_held());
    first.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 0);
    assert_eq!(client.stats().leases, 0);
    assert_eq!(client.stats().renewals_scheduled, 0);
}

#[test]
fn queries_report_the_lease() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("queries").with_lease(Duration::from_secs(10));
    assert_eq!(lock.remaining_ttl().unwrap(), None);
    assert!(!lock.is_locked().unwrap());
    let guard = lock.lock().unwrap();
    let ttl = lock.remaining_ttl().unwrap().expect("locked");
    assert!(ttl > Duration::from_secs(9) && ttl <= Duration::from_secs(10), "{ttl:?}");
    assert_eq!(guard.lease_state(), LeaseState::Held);
    assert_eq!(guard.token(), None);
    assert_eq!(guard.lock_name(), "queries");
    redis::cmd("PERSIST").arg("queries").query::<()>(&mut server.conn()).unwrap();
    assert_eq!(lock.remaining_ttl().unwrap(), Some(Duration::MAX));
}

#[test]
fn force_unlock_deletes_and_wakes_a_waiter() {
    let server = RedisServer::start();
    let holder = client(&server);
    let waiter = client(&server);
    let guard = holder.lock("forced").lock().unwrap();
    let lock = waiter.lock("forced");
    let waiting = thread::spawn(move || {
        let started = Instant::now();
        let got = lock.try_lock_for(Duration::from_secs(20)).unwrap();
        (got.is_some(), started.elapsed())
    });
    assert!(wait_until(Duration::from_secs(5), || waiter.stats().waiters == 1));
    assert!(waiter.lock("forced").force_unlock().unwrap());
    let (got, waited) = waiting.join().unwrap();
    assert!(got, "the waiter acquires after the forced unlock");
    assert!(waited < Duration::from_secs(5), "woken by the message, not the 30 s TTL: {waited:?}");
    assert!(!waiter.lock("forced").force_unlock().unwrap(), "nothing left to delete");
    assert!(!exists(&mut server.conn(), "forced"));
    // The old holder's release finds nothing of its own.
    let err = guard.unlock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}");
}

#[test]
fn a_panic_in_the_critical_section_releases_the_lock() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("panicky");
    let result = catch_unwind(AssertUnwindSafe(|| {
        let _guard = lock.lock().unwrap();
        panic!("boom inside the critical section");
    }));
    assert!(result.is_err());
    assert!(!lock.is_locked().unwrap(), "the unwinding guard released the lock");
    assert!(thread::spawn(move || lock.try_lock().unwrap().is_some()).join().unwrap());
}

#[test]
fn script_flush_between_calls_changes_nothing() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let lock = client.lock("flushed");
    for _ in 0..3 {
        redis::cmd("SCRIPT").arg("FLUSH").query::<()>(&mut conn).unwrap();
        let guard = lock.lock().unwrap();
        redis::cmd("SCRIPT").arg("FLUSH").query::<()>(&mut conn).unwrap();
        guard.unlock().unwrap();
    }
    assert!(!exists(&mut conn, "flushed"));
}

#[test]
fn try_lock_for_gives_up_after_its_timeout_and_soon_after() {
    let server = RedisServer::start();
    let holder = client(&server);
    let _guard = holder.lock("busy").lock().unwrap();
    let other = client(&server);
    let started = Instant::now();
    let got = other.lock("busy").try_lock_for(Duration::from_millis(300)).unwrap();
    let waited = started.elapsed();
    assert!(got.is_none());
    assert!(waited >= Duration::from_millis(300), "returned early: {waited:?}");
    assert!(waited < Duration::from_millis(1300), "returned late: {waited:?}");
    let until = Instant::now() + Duration::from_millis(100);
    assert!(other.lock("busy").try_lock_until(until).unwrap().is_none());
    assert!(Instant::now() >= until);
    assert_eq!(other.stats().waiters, 0);
}

#[test]
fn shutdown_wakes_a_blocked_lock_with_shutdown() {
    let server = RedisServer::start();
    let holder = client(&server);
    let _guard = holder.lock("closing").lock().unwrap();
    let client = client(&server);
    let lock = client.lock("closing");
    let blocked = thread::spawn(move || {
        let started = Instant::now();
        (lock.lock().map(|_| ()), started.elapsed())
    });
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1));
    let stopped = Instant::now();
    client.shutdown();
    let (result, _) = blocked.join().unwrap();
    assert_eq!(result.unwrap_err().kind(), ErrorKind::Shutdown);
    assert!(stopped.elapsed() < Duration::from_secs(2), "woken at once, not at the TTL");
    assert!(client.is_shutdown());
    assert_eq!(client.lock("closing").try_lock().unwrap_err().kind(), ErrorKind::Shutdown);
}

#[test]
fn shutdown_while_a_waiter_awaits_its_subscription_does_not_hang() {
    // A waiter is counted as soon as it joins, then waits for Redis to confirm its
    // subscription; 500 ms each way through the proxy keeps it there for about a second.
    // Shutting down in that window once deadlocked: the waiter returned while still
    // holding the registry, and shutdown waited for the subscriber thread forever.
    let server = RedisServer::start();
    let holder = client(&server);
    let _guard = holder.lock("slow-subscribe").lock().unwrap();
    let proxy = Proxy::start(server.addr());
    let client = Client::builder(proxy.url()).command_timeout(Duration::from_secs(10)).build().unwrap();
    proxy.set_latency(Duration::from_millis(500));
    let lock = client.lock("slow-subscribe");
    let blocked = thread::spawn(move || lock.lock().map(|_| ()).map_err(|e| e.kind()));
    assert!(wait_until(Duration::from_secs(10), || client.stats().waiters == 1));
    let (done, stopped) = std::sync::mpsc::channel();
    let stopper = client.clone();
    thread::spawn(move || {
        stopper.shutdown();
        let _ = done.send(());
    });
    assert!(stopped.recv_timeout(Duration::from_secs(5)).is_ok(), "shutdown hung");
    assert_eq!(blocked.join().unwrap(), Err(ErrorKind::Shutdown));
}

#[test]
fn guards_dropped_after_shutdown_touch_nothing_and_the_lease_runs_out() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(Duration::from_millis(600)));
    let guard = client.lock("left-behind").lock().unwrap();
    client.shutdown();
    drop(guard);
    let mut conn = server.conn();
    assert!(exists(&mut conn, "left-behind"), "the dropped guard sent nothing");
    assert!(wait_until(Duration::from_secs(3), || !exists(&mut conn, "left-behind")), "expired after its lease");
}

#[test]
fn names_with_hash_tags_keep_them() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("{tenant-7}:job");
    let waiter_client = client_with(&server, |b| b);
    let guard = lock.lock().unwrap();
    let waiter = waiter_client.lock("{tenant-7}:job");
    let waiting = thread::spawn(move || waiter.try_lock_for(Duration::from_secs(10)).unwrap().is_some());
    let mut conn = server.conn();
    assert!(wait_until(Duration::from_secs(5), || subscribers(&mut conn, "redisson_lock__channel:{tenant-7}:job") == 1));
    drop(guard);
    assert!(waiting.join().unwrap());
}

#[test]
fn client_is_send_sync_and_cheap_handles_are_send() {
    fn send_sync<T: Send + Sync + Clone>() {}
    send_sync::<Client>();
    send_sync::<redlease::Lock>();
    fn error_ok<T: std::error::Error + Send + Sync + 'static>() {}
    error_ok::<redlease::Error>();
}

// Ownership is per thread: a guard cannot move to another thread.
static_assertions::assert_not_impl_any!(redlease::LockGuard: Send, Sync);
static_assertions::assert_impl_all!(Client: Send, Sync, Clone);
