//! The read-write lock: readers share, a writer excludes everyone, dead readers' holds end
//! on their own.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redlease::ErrorKind;

use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] =
    &[("rw_mixed_worker", mixed_worker), ("rw_dying_reader", dying_reader)];

/// A critical section: whether it wrote, and its CLOCK_MONOTONIC bounds.
#[derive(Debug, Clone, Copy)]
struct Section {
    write: bool,
    start: u64,
    end: u64,
}

fn record(conn: &mut redis::Connection, log: &str, s: Section) {
    let entry = format!("{} {} {}", if s.write { "W" } else { "R" }, s.start, s.end);
    redis::cmd("RPUSH").arg(log).arg(entry).query::<()>(conn).unwrap();
}

fn read_log(conn: &mut redis::Connection, log: &str) -> Vec<Section> {
    let entries: Vec<String> = redis::cmd("LRANGE").arg(log).arg(0).arg(-1).query(conn).unwrap();
    entries
        .iter()
        .map(|e| {
            let mut parts = e.split(' ');
            let write = parts.next() == Some("W");
            let start = parts.next().unwrap().parse().unwrap();
            let end = parts.next().unwrap().parse().unwrap();
            Section { write, start, end }
        })
        .collect()
}

/// Every pair of sections of which one wrote must not overlap in time.
fn assert_writes_overlap_nothing(sections: &[Section]) {
    for (i, a) in sections.iter().enumerate() {
        for b in &sections[i + 1..] {
            let overlap = a.start < b.end && b.start < a.end;
            assert!(!(overlap && (a.write || b.write)), "overlapping sections {a:?} and {b:?}");
        }
    }
}

/// Keys of the lock `name`, less release latches (they live a few seconds by design).
fn rw_keys(conn: &mut redis::Connection, name: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg(format!("*{name}*")).query(conn).unwrap();
    keys.retain(|k| !k.starts_with("redisson_unlock_latch:"));
    keys.sort();
    keys
}

/// THREADS threads alternate between reading (odd) and writing (even), ROUNDS times each,
/// logging every section to LOCK:log; says "done".
fn mixed_worker() {
    let url = child::env("REDIS_URL");
    let name = child::env("LOCK");
    let client = redlease::Client::open(&url).unwrap();
    let log = format!("{name}:log");
    run_threads(4, &url, |k, conn| {
        let rw = client.read_write_lock(name.as_str());
        for round in 0..25 {
            let write = (k + round) % 2 == 0;
            let guard = if write { rw.write().lock() } else { rw.read().lock() }.unwrap();
            let start = monotonic_ns();
            thread::sleep(Duration::from_millis(2));
            let end = monotonic_ns();
            drop(guard);
            record(conn, &log, Section { write, start, end });
        }
    });
    child::say("done");
}

#[test]
fn readers_overlap_and_writers_overlap_nothing_across_processes() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    // Eight readers in one process hold the lock at the same time.
    let start = Arc::new(Barrier::new(8));
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let read = client.read_write_lock("rw-share").read();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                let guard = read.try_lock_for(Duration::from_secs(5)).unwrap().expect("readers share");
                let s = monotonic_ns();
                thread::sleep(Duration::from_millis(200));
                let e = monotonic_ns();
                drop(guard);
                Section { write: false, start: s, end: e }
            })
        })
        .collect();
    let sections: Vec<Section> = readers.into_iter().map(|t| t.join().unwrap()).collect();
    let latest_start = sections.iter().map(|s| s.start).max().unwrap();
    let earliest_end = sections.iter().map(|s| s.end).min().unwrap();
    assert!(latest_start < earliest_end, "all eight read sections overlap at one instant: {sections:?}");
    // Two processes of four threads mixing reads and writes.
    let env = [("REDIS_URL", server.url()), ("LOCK", "rw-mixed".to_string())];
    let mut workers = [Child::spawn("rw_mixed_worker", &env), Child::spawn("rw_mixed_worker", &env)];
    for w in &mut workers {
        w.wait_line("done", Duration::from_secs(120));
    }
    let log = read_log(&mut conn, "rw-mixed:log");
    assert_eq!(log.len(), 2 * 4 * 25);
    assert_eq!(log.iter().filter(|s| s.write).count(), 100);
    assert_writes_overlap_nothing(&log);
    assert!(!exists(&mut conn, "rw-mixed"));
}

#[test]
fn readers_blocked_behind_a_writer_all_enter_soon_after_its_release() {
    let server = RedisServer::start();
    let writer = client(&server);
    let readers = client_with(&server, |b| b.pool_size(20));
    let guard = writer.read_write_lock("rw-crowd").write().lock().unwrap();
    let threads: Vec<_> = (0..20)
        .map(|_| {
            let read = readers.read_write_lock("rw-crowd").read();
            thread::spawn(move || {
                let guard = read.try_lock_for(Duration::from_secs(20)).unwrap().expect("every reader enters");
                let at = Instant::now();
                thread::sleep(Duration::from_millis(100)); // still holding while the others enter
                drop(guard);
                at
            })
        })
        .collect();
    assert!(wait_until(Duration::from_secs(10), || readers.stats().waiters == 20), "{:?}", readers.stats());
    let released = Instant::now();
    guard.unlock().unwrap();
    let entered: Vec<Duration> = threads.into_iter().map(|t| t.join().unwrap().duration_since(released)).collect();
    let last = entered.iter().max().unwrap();
    assert!(*last < Duration::from_secs(1), "the last reader entered {last:?} after the write release");
    assert!(!exists(&mut server.conn(), "rw-crowd"));
}

/// Takes LOCK's read side with a WATCHDOG_MS watchdog, says "reading", waits to be killed.
fn dying_reader() {
    let watchdog = Duration::from_millis(child::env("WATCHDOG_MS").parse().unwrap());
    let client = redlease::Client::builder(child::env("REDIS_URL")).watchdog_timeout(watchdog).build().unwrap();
    let _guard = client.read_write_lock(child::env("LOCK")).read().lock().unwrap();
    child::say("reading");
    thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_killed_readers_hold_ends_with_its_lease_and_leaves_no_keys() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let env = [("REDIS_URL", server.url()), ("LOCK", "rw-dead".to_string()), ("WATCHDOG_MS", "1500".to_string())];
    let mut reader = Child::spawn("rw_dying_reader", &env);
    reader.wait_line("reading", Duration::from_secs(10));
    assert_eq!(rw_keys(&mut conn, "rw-dead").len(), 2, "the hash and one hold key");
    let remaining = Duration::from_millis(pttl(&mut conn, "rw-dead") as u64);
    reader.kill();
    let killed = Instant::now();
    let client = client(&server);
    let guard =
        client.read_write_lock("rw-dead").write().try_lock_for(Duration::from_secs(10)).unwrap().expect("write");
    let waited = killed.elapsed();
    assert!(waited + Duration::from_millis(20) >= remaining, "acquired after {waited:?}, {remaining:?} were left");
    assert!(waited < Duration::from_millis(2500), "{waited:?}");
    drop(guard);
    assert_eq!(rw_keys(&mut conn, "rw-dead"), Vec::<String>::new(), "the dead hold left keys behind");
}

#[test]
fn each_read_hold_keeps_its_own_lease() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let rw = client.read_write_lock("rw-leases");
    let short = rw.read().with_lease(Duration::from_secs(1)).lock().unwrap();
    let long_read = rw.read().with_lease(Duration::from_secs(10));
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let b = thread::spawn(move || {
        let guard = long_read.lock().unwrap();
        held_tx.send(()).unwrap();
        done_rx.recv().unwrap();
        let still = (guard.is_held(), long_read.hold_count().unwrap());
        guard.unlock().unwrap();
        still
    });
    held_rx.recv().unwrap();
    let ttl = pttl(&mut conn, "rw-leases");
    assert!(ttl > 9_000, "the hash follows the longest hold: {ttl} ms");
    thread::sleep(Duration::from_millis(1300));
    assert!(!short.is_held(), "the 1 s hold ran out");
    assert!(exists(&mut conn, "rw-leases"), "the other reader still holds the lock");
    assert!(pttl(&mut conn, "rw-leases") > 7_000);
    let writer = client_with(&server, |b| b);
    let write = writer.read_write_lock("rw-leases").write();
    assert!(thread::spawn(move || write.try_lock().unwrap().is_none()).join().unwrap(), "still read-locked");
    done_tx.send(()).unwrap();
    assert_eq!(b.join().unwrap(), (true, 1));
    assert_eq!(short.unlock().unwrap_err().kind(), ErrorKind::NotHeld);
    assert_eq!(rw_keys(&mut conn, "rw-leases"), Vec::<String>::new(), "the last release cleans the dead hold too");
}

#[test]
fn downgrade_upgrade_reentrancy_and_hold_counts() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let rw = client.read_write_lock("rw-modes");
    let (read, write) = (rw.read(), rw.write());
    let w1 = write.lock().unwrap();
    let w2 = write.try_lock().unwrap().expect("write is reentrant");
    assert_eq!(write.hold_count().unwrap(), 2);
    let r1 = read.try_lock().unwrap().expect("a writer may read (downgrade)");
    assert_eq!((write.hold_count().unwrap(), read.hold_count().unwrap()), (2, 1));
    assert!(write.is_locked().unwrap() && read.is_locked().unwrap());
    assert!(write.is_held_by_current_thread().unwrap() && read.is_held_by_current_thread().unwrap());
    let other = client.read_write_lock("rw-modes");
    let blocked = thread::spawn(move || {
        (other.read().try_lock().unwrap().is_none(), other.write().try_lock().unwrap().is_none())
    });
    assert_eq!(blocked.join().unwrap(), (true, true), "a writer excludes everyone else");
    w2.unlock().unwrap();
    w1.unlock().unwrap();
    let mode: String = redis::cmd("HGET").arg("rw-modes").arg("mode").query(&mut conn).unwrap();
    assert_eq!(mode, "read", "releasing the write lock leaves the downgraded read hold");
    assert!(!write.is_locked().unwrap() && read.is_locked().unwrap());
    let other = client.read_write_lock("rw-modes");
    let now = thread::spawn(move || {
        let may_read = other.read().try_lock().unwrap().map(|g| g.unlock().is_ok());
        (may_read == Some(true), other.write().try_lock().unwrap().is_none())
    });
    assert_eq!(now.join().unwrap(), (true, true), "others may read, not write");
    // Upgrade: a reader asking for the write lock would wait on itself forever.
    let before = commands_served(&mut conn);
    let started = Instant::now();
    let err = write.try_lock_for(Duration::from_secs(5)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WouldDeadlock, "{err}");
    assert!(started.elapsed() < Duration::from_millis(100));
    assert_eq!(write.lock().unwrap_err().kind(), ErrorKind::WouldDeadlock);
    assert_eq!(commands_served(&mut conn) - before, 0, "refused before sending anything");
    r1.unlock().unwrap();
    assert_eq!(rw_keys(&mut conn, "rw-modes"), Vec::<String>::new());
    // Without the read hold the write lock is granted again.
    write.lock().unwrap().unlock().unwrap();
}

#[test]
fn force_unlock_of_each_side_deletes_only_its_mode() {
    let server = RedisServer::start();
    let client = client(&server);
    let rw = client.read_write_lock("rw-force");
    let w = rw.write().lock().unwrap();
    assert!(!rw.read().force_unlock().unwrap(), "the read side does not delete a write lock");
    assert!(rw.write().force_unlock().unwrap());
    assert_eq!(w.unlock().unwrap_err().kind(), ErrorKind::NotHeld);
    let r = rw.read().lock().unwrap();
    assert!(!rw.write().force_unlock().unwrap(), "the write side does not delete a read lock");
    assert!(rw.read().force_unlock().unwrap());
    assert_eq!(r.unlock().unwrap_err().kind(), ErrorKind::NotHeld);
    assert!(!rw.read().is_locked().unwrap());
}

#[test]
fn the_watchdog_keeps_both_modes_alive_past_three_leases() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(Duration::from_millis(600)));
    let mut conn = server.conn();
    let rw = client.read_write_lock("rw-renewed");
    let w = rw.write().lock().unwrap();
    let r = rw.read().lock().unwrap();
    let started = Instant::now();
    let mut lowest = i64::MAX;
    while started.elapsed() < Duration::from_millis(2000) {
        lowest = lowest.min(pttl(&mut conn, "rw-renewed"));
        let hold_keys: Vec<String> = redis::cmd("KEYS").arg("*rw-renewed*rwlock_timeout*").query(&mut conn).unwrap();
        assert_eq!(hold_keys.len(), 1);
        lowest = lowest.min(pttl(&mut conn, &hold_keys[0]));
        assert!(w.is_held() && r.is_held());
        thread::sleep(Duration::from_millis(20));
    }
    assert!(lowest >= 150, "a lease fell to {lowest} ms");
    drop(w);
    // In read mode now; the read hold alone keeps being renewed.
    thread::sleep(Duration::from_millis(1300));
    assert!(r.is_held() && rw.read().is_locked().unwrap());
    drop(r);
    assert_eq!(rw_keys(&mut conn, "rw-renewed"), Vec::<String>::new());
}

#[test]
fn rw_bad_input_and_an_idle_client() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    let kinds = [
        client.read_write_lock("").read().try_lock().unwrap_err().kind(),
        client.read_write_lock("").write().lock().unwrap_err().kind(),
        client.read_write_lock("x".repeat(8 * 1024 + 1)).read().is_locked().unwrap_err().kind(),
        client.read_write_lock("rw").read().with_lease(Duration::ZERO).try_lock().unwrap_err().kind(),
    ];
    assert!(kinds.iter().all(|k| *k == ErrorKind::InvalidInput), "{kinds:?}");
    assert_eq!(commands_served(&mut conn) - before, 0);
    // Use both sides, with a wait, then stay quiet.
    let rw = client.read_write_lock("rw-idle");
    let w = rw.write().lock().unwrap();
    let reader = {
        let read = client.read_write_lock("rw-idle").read();
        thread::spawn(move || read.try_lock_for(Duration::from_secs(5)).unwrap().map(|g| g.unlock()).is_some())
    };
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1));
    w.unlock().unwrap();
    assert!(reader.join().unwrap());
    assert!(wait_until(Duration::from_secs(5), || client.stats().channels == 0));
    let before = commands_served(&mut conn);
    thread::sleep(Duration::from_secs(2));
    assert_eq!(commands_served(&mut conn) - before, 0, "an idle client sent commands");
}

#[test]
fn overlapping_readers_keep_a_writer_waiting_until_they_stop() {
    // Redisson's policy, kept for compatibility: readers are not held back for a waiting
    // writer. This pins it down; docs/guarantees.md and docs/performance.md say so.
    let server = RedisServer::start();
    let client = client(&server);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|k| {
            let read = client.read_write_lock("rw-starve").read();
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(k * 15));
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let guard = read.lock().unwrap();
                    thread::sleep(Duration::from_millis(60));
                    drop(guard);
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(200));
    let write = client_with(&server, |b| b).read_write_lock("rw-starve").write();
    let starved = write.try_lock_for(Duration::from_millis(1500)).unwrap();
    assert!(starved.is_none(), "continuously overlapping readers keep the writer out");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let started = Instant::now();
    let got = write.try_lock_for(Duration::from_secs(5)).unwrap();
    assert!(got.is_some() && started.elapsed() < Duration::from_secs(1), "the writer enters once readers stop");
    for r in readers {
        r.join().unwrap();
    }
}
