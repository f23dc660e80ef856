//! Guards that may change threads: a [`SendableLock`](redlease::SendableLock)'s guards hold
//! the lock under an owner of their own, are sent to other threads and released, renewed
//! and dropped there; the semaphores' guards, whose permits belong to nobody, are `Send`
//! as well.

use std::collections::HashSet;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{LockGuard, PermitGuard, SemaphoreGuard, Sendable};

use crate::helpers::*;
use crate::support::server::RedisServer;

fn is_send<T: Send>() {}

/// Guards from two dispatching threads, each acquired on its dispatcher and sent to a
/// worker that does a non-atomic read-modify-write and releases there, beside a thread
/// that holds the same lock thread-bound: never two inside, every acquisition its own
/// owner, none of them a thread's.
///
/// Breaks if a guard released on another thread releases the wrong owner (the releasing
/// thread's) or nothing, if two acquisitions share an owner, or if a sendable acquire and
/// a thread-bound one do not exclude each other.
#[test]
fn sendable_guards_change_threads_and_still_exclude() {
    is_send::<LockGuard<Sendable>>();
    let server = RedisServer::start();
    let client = client(&server);
    const ROUNDS: usize = 30;
    let (to_workers, work) = mpsc::channel::<LockGuard<Sendable>>();
    let work = std::sync::Arc::new(std::sync::Mutex::new(work));
    let (owners_tx, owners) = mpsc::channel::<String>();
    thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let work = std::sync::Arc::clone(&work);
                let mut conn = server.conn();
                scope.spawn(move || {
                    loop {
                        let next = work.lock().unwrap().recv();
                        let Ok(guard) = next else { break };
                        increment_non_atomically(&mut conn, "counter");
                        guard.unlock().expect("released on the worker");
                    }
                })
            })
            .collect();
        for _ in 0..2 {
            let (lock, to_workers, owners_tx) =
                (client.non_reentrant_lock("jobs").sendable(), to_workers.clone(), owners_tx.clone());
            scope.spawn(move || {
                for _ in 0..ROUNDS {
                    let guard = lock.try_lock_for(Duration::from_secs(30)).expect("no error").expect("acquired");
                    owners_tx.send(guard.owner().to_owned()).unwrap();
                    to_workers.send(guard).unwrap();
                }
            });
        }
        let bound = client.non_reentrant_lock("jobs");
        let mut conn = server.conn();
        let mut thread_owner = None;
        for _ in 0..ROUNDS {
            let guard = bound.try_lock_for(Duration::from_secs(30)).expect("no error").expect("acquired");
            thread_owner = Some(guard.owner().to_owned());
            increment_non_atomically(&mut conn, "counter");
            drop(guard);
        }
        drop(to_workers);
        drop(owners_tx);
        let owners: Vec<String> = owners.iter().collect();
        let distinct: HashSet<&String> = owners.iter().collect();
        assert_eq!(distinct.len(), 2 * ROUNDS, "every acquisition has an owner of its own");
        assert!(!distinct.contains(&thread_owner.unwrap()), "no sendable owner is a thread's");
        assert!(owners.iter().all(|o| o.starts_with(&format!("{}:", client.id()))), "{owners:?}");
        for worker in workers {
            worker.join().unwrap();
        }
    });
    let counter: u64 = redis::cmd("GET").arg("counter").query(&mut server.conn()).unwrap();
    assert_eq!(counter, 3 * ROUNDS as u64, "an increment was lost: two holders at once");
    assert!(!exists(&mut server.conn(), "jobs"), "every hold was released");
}

/// A guard acquired on a thread that has ended since: the watchdog keeps renewing it for
/// several watchdog timeouts, and its release on another thread frees the lock and wakes a
/// waiter at once.
///
/// Breaks if the lease is tied to the acquiring thread (renewals stop, or the release
/// cannot find its owner), or if the release does not publish.
#[test]
fn a_sendable_guard_outlives_its_thread_and_is_renewed_and_released_elsewhere() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(Duration::from_secs(1)));
    let mut conn = server.conn();
    let lock = client.non_reentrant_lock("handed").sendable();
    let guard = thread::spawn(move || lock.lock().expect("acquired")).join().unwrap();
    let owner = guard.owner().to_owned();
    let waiting = client.non_reentrant_lock("handed");
    let waiter = thread::spawn(move || {
        let guard = waiting.try_lock_for(Duration::from_secs(20)).expect("no error").expect("acquired");
        (Instant::now(), guard.owner().to_owned())
    });
    thread::sleep(Duration::from_millis(3_500));
    let held: bool = redis::cmd("HEXISTS").arg("handed").arg(&owner).query(&mut conn).unwrap();
    assert!(held && guard.is_held(), "renewed for 3.5 watchdog timeouts after its thread ended");
    assert!(pttl(&mut conn, "handed") > 0);
    let released = Instant::now();
    guard.unlock().expect("released on another thread than it was acquired on");
    let (granted, waiter_owner) = waiter.join().unwrap();
    assert_ne!(waiter_owner, owner);
    let after = granted.saturating_duration_since(released);
    assert!(after < Duration::from_secs(1), "the release woke the waiter: granted {after:?} after it");
}

/// A thread beside its own sendable guard is like any other thread: asking again waits
/// (no `WouldDeadlock`, no hold count: the hold is not the thread's), and a thread-bound
/// hold of the thread does not stop a sendable acquire from just finding the lock busy.
///
/// Breaks if a sendable acquisition joins or counts the thread's hold (two owners inside),
/// or is refused as a reentry.
#[test]
fn beside_its_sendable_guard_a_thread_asking_again_waits_like_anyone() {
    let server = RedisServer::start();
    let client = client(&server);
    let sendable = client.non_reentrant_lock("beside").sendable();
    let bound = client.non_reentrant_lock("beside");
    let guard = sendable.lock().expect("acquired");
    assert!(sendable.try_lock().expect("no error").is_none(), "busy, not reentered");
    assert!(bound.try_lock().expect("busy, not WouldDeadlock").is_none());
    assert_eq!(bound.hold_count().unwrap(), 0, "the hold is not the thread's");
    let started = Instant::now();
    assert!(sendable.try_lock_for(Duration::from_millis(300)).expect("no error").is_none());
    assert!(started.elapsed() >= Duration::from_millis(250), "it waited");
    drop(guard);
    let held = bound.lock().expect("acquired thread-bound");
    assert!(sendable.try_lock().expect("busy, not WouldDeadlock").is_none());
    drop(held);
    assert!(sendable.try_lock().unwrap().is_some());
}

/// The fair kind: sendable acquisitions from one thread each take their own place in the
/// queue, and are served in the order they came, each guard released on a thread other
/// than its own.
///
/// Breaks if sendable waiters share a place in the queue (one owner), or skip it.
#[test]
fn sendable_fair_guards_queue_each_in_its_own_place() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let fair = client.non_reentrant_fair_lock("queued").sendable();
    let first = fair.lock().expect("acquired");
    let (served_tx, served) = mpsc::channel();
    let mut waiters = Vec::new();
    for n in 0..3 {
        let (fair, served_tx) = (fair.clone(), served_tx.clone());
        waiters.push(thread::spawn(move || {
            let guard = fair.try_lock_for(Duration::from_secs(30)).expect("no error").expect("acquired");
            served_tx.send((n, guard)).unwrap();
        }));
        assert!(wait_until(Duration::from_secs(5), || llen(&mut conn, "redisson_lock_queue:{queued}") == n + 1));
    }
    drop(first);
    let mut order = Vec::new();
    for _ in 0..3 {
        let (n, guard) = served.recv_timeout(Duration::from_secs(10)).expect("served");
        order.push(n);
        guard.unlock().expect("released on the test's thread");
    }
    assert_eq!(order, vec![0, 1, 2], "served in arrival order");
    for waiter in waiters {
        waiter.join().unwrap();
    }
}

/// The semaphores' guards hold permits that belong to nobody: both are `Send`, and a guard
/// dropped on another thread gives its permits back there.
///
/// Breaks if a semaphore guard's permits stay taken when it is dropped on another thread.
#[test]
fn semaphore_guards_are_send_and_give_back_on_any_thread() {
    is_send::<SemaphoreGuard>();
    is_send::<PermitGuard>();
    let server = RedisServer::start();
    let client = client(&server);
    let sem = client.semaphore("sent");
    assert!(sem.try_set_permits(2).unwrap());
    let guard = sem.acquire(2).expect("taken");
    assert_eq!(sem.available_permits().unwrap(), 0);
    thread::spawn(move || drop(guard)).join().unwrap();
    assert_eq!(sem.available_permits().unwrap(), 2);
    let psem = client.permit_expirable_semaphore("sent-expirable");
    assert!(psem.try_set_permits(1).unwrap());
    let permit = psem.acquire(1).expect("taken");
    thread::spawn(move || permit.release()).join().unwrap().expect("given back on another thread");
    assert_eq!(psem.available_permits().unwrap(), 1);
}
