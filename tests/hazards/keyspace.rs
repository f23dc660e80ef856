//! Keyspace hazards: lock keys evicted, made persistent, deleted or expired behind the
//! library's back, and release messages from another database.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, ErrorKind, LeaseState};

use super::{SLACK, counting_client, hkeys};
use crate::helpers::*;
use crate::support::server::RedisServer;

fn config_set(conn: &mut redis::Connection, name: &str, value: &str) {
    redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query::<()>(conn).expect("CONFIG SET");
}

fn used_memory(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(conn).expect("INFO memory");
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO memory")
}

/// `redis://127.0.0.1:PORT/DB`.
fn url_with_db(server: &RedisServer, db: u32) -> String {
    format!("redis://127.0.0.1:{}/{db}", server.port())
}

/// Eviction under `allkeys-random`: Redis drops the lock key to make room. The holder must
/// learn of it at its next renewal, and a waiter (woken by nothing: eviction publishes no
/// message) must get the lock within the holder's TTL.
///
/// Breaks if the renewal does not report a missing key as lost (checked by making the renew
/// script answer "renewed" for every lease: the guard then reads held for ever), if it
/// re-creates the key (the waiter would never get in), or if the waiter's park were not
/// bounded by the holder's TTL.
#[test]
fn an_evicted_lock_key_is_reported_lost_and_a_waiter_acquires() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let (holder, losses) = counting_client(&server, watchdog);
    let guard = holder.lock("evicted").lock().unwrap();
    let waiter = client(&server);
    let lock = waiter.lock("evicted");
    let waiting = thread::spawn(move || {
        let got = lock.try_lock_for(Duration::from_secs(8)).unwrap();
        (got.as_ref().is_some_and(|g| g.is_held()), Instant::now())
    });
    assert!(wait_until(Duration::from_secs(5), || waiter.stats().waiters == 1));

    // Room for about a hundred 4 KiB values: each SET after that evicts a random key, so
    // the lock key goes within a few hundred SETs (each has a 1 in ~100 chance of taking
    // it). Provoked for real: no DEL needed.
    let mut conn = server.conn();
    let limit = used_memory(&mut conn) + 512 * 1024;
    config_set(&mut conn, "maxmemory-policy", "allkeys-random");
    config_set(&mut conn, "maxmemory", &limit.to_string());
    let value = vec![b'x'; 4096];
    let mut evicted_at = None;
    for i in 0..20_000u32 {
        // SET and EXISTS in one round trip: eviction happens before the SET runs.
        let (_, present): ((), bool) =
            redis::pipe().set(format!("filler:{i}"), &value[..]).exists("evicted").query(&mut conn).unwrap();
        if !present {
            evicted_at = Some((Instant::now(), i));
            break;
        }
    }
    config_set(&mut conn, "maxmemory", "0"); // no more evictions: the waiter's lock must stay
    let (evicted_at, sets) = evicted_at.expect("the lock key was evicted within 20000 SETs");
    let evicted_keys: u64 = {
        let info: String = redis::cmd("INFO").arg("stats").query(&mut conn).unwrap();
        info.lines().find_map(|l| l.strip_prefix("evicted_keys:")).unwrap().trim().parse().unwrap()
    };
    assert!(evicted_keys > 0, "gone by eviction, after {sets} SETs");

    assert!(wait_until(Duration::from_secs(3), || !guard.is_held()), "the holder learns of the eviction");
    let seen = evicted_at.elapsed();
    assert!(seen < watchdog / 3 + SLACK, "eviction seen after {seen:?}; renewal interval {:?}", watchdog / 3);
    assert_eq!(guard.lease_state(), LeaseState::Lost);
    assert!(wait_until(Duration::from_secs(1), || losses.count() == 1), "lease_lost is called");

    let (acquired, at) = waiting.join().unwrap();
    assert!(acquired, "the waiter got the evicted lock");
    let waited = at.saturating_duration_since(evicted_at);
    assert!(waited < watchdog + SLACK, "the waiter got in {waited:?} after the eviction (holder's TTL <= 1 s)");
    assert_eq!(guard.unlock().unwrap_err().kind(), ErrorKind::NotHeld);
}

/// `PERSIST` strips the lock key's expiry (an operator's mistake, or a script's). Waiters
/// see a TTL of -1; a timed wait must still end at its deadline, and queries report the
/// missing expiry as `Duration::MAX`. A real release still wakes a waiter.
///
/// Breaks if a TTL of -1 is read as "sleep for ever" or as "sleep one watchdog timeout"
/// without regard to the caller's deadline (checked by breaking it on purpose: the 500 ms
/// wait then took the waiter's whole watchdog timeout), or if the release message stops
/// waking waiters once there is no TTL to fall back on.
#[test]
fn a_persisted_lock_key_does_not_stretch_a_timed_wait() {
    let server = RedisServer::start();
    let holder = client(&server); // 30 s watchdog: no renewal restores the TTL during the test
    let guard = holder.lock("persisted").lock().unwrap();
    let mut conn = server.conn();
    let persisted: bool = redis::cmd("PERSIST").arg("persisted").query(&mut conn).unwrap();
    assert!(persisted);
    assert_eq!(pttl(&mut conn, "persisted"), -1);

    // A key without TTL is looked at again once per watchdog timeout: 5 s here, so a wait
    // that ignored its deadline would take 5 s (and a broken run stays short).
    let waiter = client_with(&server, |b| b.watchdog_timeout(Duration::from_secs(5)));
    let lock = waiter.lock("persisted");
    assert_eq!(lock.remaining_ttl().unwrap(), Some(Duration::MAX));
    let wait = Duration::from_millis(500);
    let started = Instant::now();
    let got = lock.try_lock_for(wait).unwrap();
    let took = started.elapsed();
    assert!(got.is_none(), "held by the holder");
    assert!(took >= wait && took < wait + SLACK, "a {wait:?} wait took {took:?}");
    assert_eq!(waiter.stats().waiters, 0, "the waiter left");

    // The release deletes the persistent key and wakes a waiter at once (nothing else bounds
    // its park but the 5 s recheck).
    let waiting = thread::spawn(move || {
        let got = lock.try_lock_for(Duration::from_secs(8)).unwrap();
        (got.is_some(), Instant::now())
    });
    assert!(wait_until(Duration::from_secs(5), || waiter.stats().waiters == 1));
    let released = Instant::now();
    guard.unlock().unwrap();
    let (acquired, at) = waiting.join().unwrap();
    assert!(acquired);
    let waited = at.saturating_duration_since(released);
    assert!(waited < Duration::from_secs(1), "woken by the release after {waited:?}");
}

/// Pub/sub channels are not database-scoped: a client on db 1 locking and unlocking a lock
/// of the same name publishes on the very channel a db-0 waiter listens on. Those messages
/// wake the db-0 waiter, but it must only re-check (the db-0 lock is still held), and it
/// must still get in promptly when the db-0 holder really releases.
///
/// Breaks if db-1 activity could hand the db-0 waiter a guard while the db-0 holder holds
/// (keys or grants mixed up across databases), if the foreign wake-ups cut the timed wait
/// short (checked by breaking it on purpose: it returned after 0.7 ms), or if the stream of
/// foreign messages kept the waiter from taking the real release.
#[test]
fn release_messages_from_another_database_do_not_let_a_waiter_in() {
    let server = RedisServer::start();
    let db0_holder = Client::builder(url_with_db(&server, 0)).build().unwrap();
    let db0_waiter = Client::builder(url_with_db(&server, 0)).build().unwrap();
    let db1_noise = Client::builder(url_with_db(&server, 1)).build().unwrap();
    let guard = db0_holder.lock("shared-name").lock().unwrap();
    let mut conn = server.conn();
    let evalsha_before = calls_of(&mut conn, "evalsha");

    let stop = AtomicBool::new(false);
    let cycles = AtomicU64::new(0);
    let (got, waited) = thread::scope(|scope| {
        let noise = scope.spawn(|| {
            let lock = db1_noise.lock("shared-name");
            while !stop.load(Ordering::SeqCst) {
                lock.lock().unwrap().unlock().unwrap(); // free on db 1; publishes on release
                cycles.fetch_add(1, Ordering::SeqCst);
            }
        });
        let started = Instant::now();
        let got = db0_waiter.lock("shared-name").try_lock_for(Duration::from_millis(1500)).unwrap().is_some();
        let waited = started.elapsed();
        stop.store(true, Ordering::SeqCst);
        noise.join().unwrap();
        (got, waited)
    });
    assert!(!got, "the db-0 waiter got in while the db-0 holder held the lock");
    assert!(waited >= Duration::from_millis(1500), "the foreign messages cut the wait short: {waited:?}");
    assert!(waited < Duration::from_millis(1500) + SLACK, "a 1.5 s wait took {waited:?}");
    let cycles = cycles.load(Ordering::SeqCst);
    assert!(cycles >= 10, "the db-1 client published only {cycles} times");
    // The hazard was real: every db-1 cycle is two script calls (acquire, release); the
    // rest are the db-0 waiter's attempts: its first, the one after subscribing, and one per
    // wake-up by a db-1 message.
    let waiter_attempts = (calls_of(&mut conn, "evalsha") - evalsha_before).saturating_sub(2 * cycles);
    assert!(waiter_attempts >= 5, "db-1 messages woke the db-0 waiter ({waiter_attempts} attempts)");
    assert_eq!(hkeys(&mut conn, "shared-name").len(), 1, "the db-0 holder still holds");
    assert!(guard.is_held());

    let lock = db0_waiter.lock("shared-name");
    let waiting = thread::spawn(move || {
        let got = lock.try_lock_for(Duration::from_secs(8)).unwrap();
        (got.is_some(), Instant::now())
    });
    assert!(wait_until(Duration::from_secs(5), || db0_waiter.stats().waiters == 1));
    let released = Instant::now();
    guard.unlock().unwrap();
    let (acquired, at) = waiting.join().unwrap();
    assert!(acquired, "the db-0 waiter gets the lock once the db-0 holder releases");
    let waited = at.saturating_duration_since(released);
    assert!(waited < Duration::from_secs(1), "woken by the release after {waited:?} (the lease is 30 s)");
}
