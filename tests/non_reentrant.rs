//! The non-reentrant locks (Redisson's `RNonReentrantLock` and `RNonReentrantFairLock`): a
//! second acquire by the holder is refused at once, and a foreign client
//! (`support::foreign`) and redlease exclude each other, wake each other's waiters, and
//! refuse each other's owner a second hold.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{AnyLock, Client, ErrorKind};

use crate::helpers::*;
use crate::support::foreign::wait::lock_wake;
use crate::support::foreign::{self, Acquire, Publish, Release, keys};
use crate::support::server::RedisServer;

/// The one owner field of the lock hash `name` that `client` wrote.
fn owner_of(conn: &mut redis::Connection, name: &str, client: &Client) -> String {
    let fields: Vec<String> = redis::cmd("HKEYS").arg(name).query(conn).unwrap();
    fields.into_iter().find(|f| f.starts_with(client.id())).expect("the client's field")
}

/// A waiting thread, and where it says whether it got the lock and when it returned.
type Parked = (thread::JoinHandle<()>, mpsc::Receiver<(Result<bool, String>, Instant)>);

/// A thread that waits up to 20 s for `lock`.
fn waiter(lock: AnyLock) -> Parked {
    let (tx, rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let got = lock.try_lock_for(Duration::from_secs(20)).map(|g| g.is_some());
        tx.send((got.map_err(|e| e.to_string()), Instant::now())).unwrap();
    });
    (waiter, rx)
}

/// The waiter got the lock within 3 s of `released_at` (woken by the release, well before
/// the holder's 30 s lease could run out).
fn assert_woken(waiter: Parked, released_at: Instant) {
    let (handle, rx) = waiter;
    let (got, at) = rx.recv_timeout(Duration::from_secs(10)).expect("the waiter returns");
    assert_eq!(got, Ok(true), "the waiter got the lock");
    assert!(at.duration_since(released_at) < Duration::from_secs(3), "woken by the release");
    handle.join().unwrap();
}

/// Every way a thread that holds a non-reentrant lock can ask for it again is
/// `WouldDeadlock` at once, with nothing sent; another thread just finds it held; a
/// reentrant lock of the same name held by the thread counts too (it is the same hash
/// field).
///
/// Breaks if a second acquire by the holder waits on itself (a deadlock until the wait's
/// deadline, or forever with `lock()`), or if it is sent to Redis at all.
#[test]
fn a_holder_asking_again_is_would_deadlock_at_once_and_nothing_is_sent() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let kinds: Vec<(&str, AnyLock)> = vec![
        ("non-reentrant", client.non_reentrant_lock("nr").into()),
        ("non-reentrant fair", client.non_reentrant_fair_lock("nr-fair").into()),
    ];
    for (what, lock) in kinds {
        let guard = lock.lock().expect("acquired");
        let before = commands_served(&mut conn);
        let started = Instant::now();
        for err in [
            lock.try_lock().map(drop).expect_err("try_lock"),
            lock.try_lock_for(Duration::from_secs(5)).map(drop).expect_err("try_lock_for"),
            lock.lock().map(drop).expect_err("lock"),
        ] {
            assert_eq!(err.kind(), ErrorKind::WouldDeadlock, "{what}: {err}");
        }
        assert!(started.elapsed() < Duration::from_millis(200), "{what}: at once, not after a wait");
        assert_eq!(commands_served(&mut conn), before, "{what}: nothing was sent");
        // Another thread waits like any other owner.
        let other = lock.clone();
        let busy = thread::spawn(move || other.try_lock().map(|g| g.is_none()));
        assert_eq!(busy.join().unwrap().map_err(|e| e.to_string()), Ok(true), "{what}: held for another thread");
        assert_eq!(lock.hold_count().unwrap(), 1, "{what}: one hold, never two");
        guard.unlock().expect("released");
        lock.lock().expect("free again").unlock().expect("released");
    }
    let plain = client.lock("shared").lock().expect("a reentrant hold");
    let err = client.non_reentrant_lock("shared").try_lock().map(drop).expect_err("the same field");
    assert_eq!(err.kind(), ErrorKind::WouldDeadlock, "{err}");
    drop(plain);
}

/// Each foreign client's non-reentrant lock and redlease's on one lock, both ways: each
/// finds the other's hold busy, refuses the other's holder a second hold, and a release by
/// one wakes the other's parked waiter (well before the holder's 30 s lease could run out).
///
/// Breaks if the layouts, the reentry check or the messages differ from Redisson's (a Java
/// and a Rust service could then both hold the lock, or a waiter would sleep out the lease).
#[test]
fn foreign_non_reentrant_locks_and_redlease_exclude_refuse_and_wake_each_other() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    for (i, peer) in foreign::peers().iter().enumerate() {
        let (who, name) = (peer.who(), format!("nr-x-{i}"));
        // redlease holds: the peer finds it busy, and would refuse redlease's own owner.
        let guard = client.non_reentrant_lock(&name).lock().expect("redlease holds");
        let busy = peer.non_reentrant_acquire(&mut conn, &name, JAVA_OWNER).unwrap();
        assert!(matches!(busy, Acquire::Busy(ttl) if ttl > 0), "{who}: {busy:?}");
        let owner = owner_of(&mut conn, &name, &client);
        assert_eq!(peer.non_reentrant_acquire(&mut conn, &name, &owner).unwrap(), Acquire::Refused, "{who}");
        // The peer parks; redlease's release wakes it.
        let attempt = |conn: &mut redis::Connection| peer.non_reentrant_acquire(conn, &name, JAVA_OWNER);
        let channel = keys::lock_channel(&name);
        assert_foreign_woken(&who, &|| server.conn(), (&channel, Publish::Classic, lock_wake), &attempt, || {
            drop(guard)
        });
        assert_eq!(peer.non_reentrant_acquire(&mut conn, &name, JAVA_OWNER).unwrap(), Acquire::Refused, "{who}");

        // The peer holds: redlease finds it busy, parks, and the peer's release wakes it.
        assert!(client.non_reentrant_lock(&name).try_lock().expect("busy").is_none(), "{who}");
        let parked = waiter(client.non_reentrant_lock(&name).into());
        assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "{who}: the waiter parked");
        let released_at = Instant::now();
        assert_eq!(peer.lock_release(&mut conn, &name, JAVA_OWNER, Publish::Classic).unwrap(), Release::Freed, "{who}");
        assert_woken(parked, released_at);
    }
}

/// The fair variant, both ways: the foreign client's fair non-reentrant acquire and
/// redlease's queue in one queue; redlease's holder is refused a second hold by the peer;
/// redlease's release wakes the peer, queued at the head, on its own channel; the peer's
/// release wakes redlease's head on its own.
///
/// Breaks if the fair layouts, the per-waiter channels or the reentry check differ.
#[test]
fn foreign_fair_non_reentrant_locks_and_redlease_share_a_queue() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    for (i, peer) in foreign::peers().iter().enumerate() {
        let (who, name) = (peer.who(), format!("nrf-x-{i}"));
        let queue = keys::fair_queue(&name);
        let guard = client.non_reentrant_fair_lock(&name).lock().expect("redlease holds");
        let owner = owner_of(&mut conn, &name, &client);
        let refused = peer.non_reentrant_fair_acquire(&mut conn, &name, &owner, now_ms()).unwrap();
        assert_eq!(refused, Acquire::Refused, "{who}: the same owner again");
        let queued = peer.non_reentrant_fair_acquire(&mut conn, &name, JAVA_OWNER, now_ms()).unwrap();
        assert!(matches!(queued, Acquire::Busy(_)), "{who}: queues: {queued:?}");
        assert_eq!(llen(&mut conn, &queue), 1, "{who}: one queue, the peer in it");
        // Queued at the head, the peer waits on its own channel; redlease's release wakes it.
        let attempt = |conn: &mut redis::Connection| peer.non_reentrant_fair_acquire(conn, &name, JAVA_OWNER, now_ms());
        let channel = keys::fair_channel(&name, JAVA_OWNER);
        assert_foreign_woken(&who, &|| server.conn(), (&channel, Publish::Classic, lock_wake), &attempt, || {
            drop(guard)
        });
        assert_eq!(llen(&mut conn, &queue), 0, "{who}: the head left the queue with the lock");

        // The peer holds; redlease's waiter queues, and the peer's release wakes it on its own
        // channel: the fair release publishes nowhere else.
        let parked = waiter(client.non_reentrant_fair_lock(&name).into());
        assert!(wait_until(Duration::from_secs(5), || llen(&mut conn, &queue) == 1), "{who}: queued");
        let released_at = Instant::now();
        let freed = peer.fair_release(&mut conn, &name, JAVA_OWNER, now_ms(), Publish::Classic).unwrap();
        assert_eq!(freed, Release::Freed, "{who}");
        assert_woken(parked, released_at);
    }
}

/// A hold of the thread's own owner that Redis still has after the client let go of it (a
/// release lost in a failover: the promoted replica never saw it) is a leftover, not a
/// reentry: the thread's next acquire joins it and gets the lock, on both kinds, another
/// owner still finds the lock busy, and the release frees the lock for anyone (what is
/// left of the count, the leftover, expires at once: the client's holds need no lease).
///
/// Breaks if the acquire answers `WouldDeadlock` (Redis's `NON_REENTRANT_REACQUIRE` taken
/// for a reentry the client knows it did not make): in the failover storm, 167 of the
/// non-reentrant lock's 1,113 attempts in one run failed so.
#[test]
fn a_leftover_hold_of_the_threads_own_owner_is_joined_not_refused() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(Duration::from_secs(1)));
    let other = client_with(&server, |b| b.watchdog_timeout(Duration::from_secs(1)));
    let mut conn = server.conn();
    let kinds: Vec<(&str, AnyLock, AnyLock)> = vec![
        ("nr-left", client.non_reentrant_lock("nr-left").into(), other.non_reentrant_lock("nr-left").into()),
        (
            "nrf-left",
            client.non_reentrant_fair_lock("nrf-left").into(),
            other.non_reentrant_fair_lock("nrf-left").into(),
        ),
    ];
    for (name, lock, others) in kinds {
        let guard = lock.lock().expect("acquired");
        let owner = owner_of(&mut conn, name, &client);
        guard.unlock().expect("released");
        // The release is lost: the hold is back, as on a replica promoted before it saw it.
        redis::cmd("HSET").arg(name).arg(&owner).arg(1).query::<()>(&mut conn).unwrap();
        redis::cmd("PEXPIRE").arg(name).arg(1_000).query::<()>(&mut conn).unwrap();
        let again = lock.try_lock().unwrap_or_else(|e| panic!("{name}: a leftover is not a reentry: {e}"));
        let again = again.expect("the thread's own leftover does not make the lock busy for it");
        assert!(others.try_lock().expect("no error").is_none(), "{name}: held, for anyone else");
        drop(again);
        assert!(wait_until(Duration::from_secs(5), || !exists(&mut conn, name)), "{name}: the leftover went with it");
        assert!(others.try_lock().expect("no error").is_some(), "{name}: and then anyone's");
    }
}
