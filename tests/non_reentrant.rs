//! The non-reentrant locks (Redisson's `RNonReentrantLock` and `RNonReentrantFairLock`): a
//! second acquire by the holder is refused at once, and Redisson's own scripts
//! (`support::redisson`, as Redisson 4.7 sends them) and redlease exclude each other, wake
//! each other's waiters, and refuse each other's owner a second hold.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{AnyLock, Client, ErrorKind};

use crate::helpers::*;
use crate::support::redisson;
use crate::support::server::RedisServer;

/// Redisson's error for a second hold, as its scripts answer it.
const REENTRY: &str = "NON_REENTRANT_REACQUIRE";

/// Redisson's non-reentrant acquire for `owner`: `Ok(None)` acquired, `Ok(Some(pttl))` busy,
/// `Err` its error reply.
fn redisson_acquire(conn: &mut redis::Connection, name: &str, owner: &str) -> redis::RedisResult<Option<i64>> {
    eval(redisson::NON_REENTRANT_LOCK_ACQUIRE, &[name]).arg(30_000).arg(owner).arg(REENTRY).query(conn)
}

/// Redisson's fair non-reentrant acquire for `owner` (with a wait of 300 s, its default).
fn redisson_fair_acquire(conn: &mut redis::Connection, name: &str, owner: &str) -> redis::RedisResult<Option<i64>> {
    eval(
        redisson::NON_REENTRANT_FAIR_LOCK_ACQUIRE,
        &[name, &format!("redisson_lock_queue:{{{name}}}"), &format!("redisson_lock_timeout:{{{name}}}")],
    )
    .arg(30_000)
    .arg(owner)
    .arg(300_000)
    .arg(now_ms())
    .arg(REENTRY)
    .query(conn)
}

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

/// Redisson's non-reentrant scripts and redlease's on one lock: each excludes the other,
/// refuses the other's holder a second hold with the same error, and a release by one
/// wakes the other's parked waiter (well before the holder's 30 s lease could run out).
///
/// Breaks if the layouts, the error or the messages differ from Redisson's (a Java and a
/// Rust service could then both hold the lock, or a waiter would sleep out the lease).
#[test]
fn redissons_non_reentrant_scripts_and_redlease_exclude_and_wake_each_other() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();

    // redlease holds: Redisson finds it busy, and its own owner field would be refused.
    let guard = client.non_reentrant_lock("nr-x").lock().expect("redlease holds");
    assert!(matches!(redisson_acquire(&mut conn, "nr-x", JAVA_OWNER), Ok(Some(ttl)) if ttl > 0), "busy for Java");
    let owner = owner_of(&mut conn, "nr-x", &client);
    let refused = redisson_acquire(&mut conn, "nr-x", &owner).expect_err("the same owner again");
    assert!(refused.to_string().contains(REENTRY), "{refused}");
    drop(guard);

    // Redisson holds: redlease finds it busy, parks, and Redisson's release wakes it.
    assert_eq!(redisson_acquire(&mut conn, "nr-y", JAVA_OWNER).expect("Java acquires"), None);
    assert!(client.non_reentrant_lock("nr-y").try_lock().expect("busy").is_none());
    let parked = waiter(client.non_reentrant_lock("nr-y").into());
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "the waiter parked");
    let released_at = Instant::now();
    let freed: i64 = eval(
        redisson::LOCK_RELEASE,
        &["nr-y", "redisson_lock__channel:{nr-y}", "redisson_unlock_latch:{nr-y}:0123456789abcdef0123456789abcdef"],
    )
    .arg(0)
    .arg(30_000)
    .arg(JAVA_OWNER)
    .arg("publish")
    .arg(16_000)
    .query(&mut conn)
    .expect("Java releases");
    assert_eq!(freed, 1);
    assert_woken(parked, released_at);
}

/// The fair variant: Redisson's fair non-reentrant acquire and redlease's queue in one
/// queue; redlease's holder is refused a second hold by Redisson's script with the same
/// error; Redisson's holder's release wakes redlease's head on its own channel.
///
/// Breaks if the fair layouts, the per-waiter channels or the reentry check differ.
#[test]
fn redissons_fair_non_reentrant_scripts_and_redlease_share_a_queue() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();

    let guard = client.non_reentrant_fair_lock("nrf-x").lock().expect("redlease holds");
    let owner = owner_of(&mut conn, "nrf-x", &client);
    let refused = redisson_fair_acquire(&mut conn, "nrf-x", &owner).expect_err("the same owner again");
    assert!(refused.to_string().contains(REENTRY), "{refused}");
    assert!(matches!(redisson_fair_acquire(&mut conn, "nrf-x", JAVA_OWNER), Ok(Some(_))), "Java queues");
    assert_eq!(llen(&mut conn, "redisson_lock_queue:{nrf-x}"), 1, "one queue, Java in it");
    drop(guard);
    assert!(
        wait_until(Duration::from_secs(5), || redisson_fair_acquire(&mut conn, "nrf-x", JAVA_OWNER) == Ok(None)),
        "Java, the head, takes the lock redlease released"
    );

    // Java holds; redlease's waiter queues, and Java's release wakes it on its own channel.
    let parked = waiter(client.non_reentrant_fair_lock("nrf-x").into());
    assert!(wait_until(Duration::from_secs(5), || llen(&mut conn, "redisson_lock_queue:{nrf-x}") == 1), "queued");
    let released_at = Instant::now();
    let freed: i64 = eval(
        redisson::FAIR_LOCK_RELEASE,
        &[
            "nrf-x",
            "redisson_lock_queue:{nrf-x}",
            "redisson_lock_timeout:{nrf-x}",
            "redisson_lock__channel:{nrf-x}",
            "redisson_unlock_latch:{nrf-x}:0123456789abcdef0123456789abcdef",
        ],
    )
    .arg(0)
    .arg(30_000)
    .arg(JAVA_OWNER)
    .arg(now_ms())
    .arg("publish")
    .arg(16_000)
    .query(&mut conn)
    .expect("Java releases");
    assert_eq!(freed, 1);
    // Woken on its own channel: the fair release publishes nowhere else.
    assert_woken(parked, released_at);
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
