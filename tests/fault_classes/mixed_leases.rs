//! Fault class 5: reentrant holds with different leases.

use std::thread;
use std::time::{Duration, Instant};

use super::{for_every_kind, handle, hgetall, rival};
use crate::helpers::*;
use crate::support::server::RedisServer;

/// The watchdog timeout of the clients in this module (renewal every 200 ms).
const MIXED_WATCHDOG: Duration = Duration::from_millis(600);

/// The remaining, shorter hold's lease in (c).
const INNER_LEASE: Duration = Duration::from_secs(1);

/// (a) An outer watchdog hold and an inner 200 ms hold on one thread: the short inner lease
/// must not cut the outer one. After 1.5 s (several renewals, long past 200 ms) both guards
/// read held, the key has a lease, and another client cannot take the lock.
///
/// Breaks if the inner acquire shortens the key's expiry to 200 ms, or the renewal stops
/// renewing once a fixed hold joined the lease (the key then expires and the rival gets
/// in), or if the guards read lost.
#[test]
fn a_short_fixed_hold_inside_a_watchdog_hold_does_not_cut_it_short() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(MIXED_WATCHDOG));
    let other = crate::helpers::client(&server);
    for_every_kind(|kind| {
        let name = format!("mixed-a-{kind:?}");
        let mut conn = server.conn();
        let outer = handle(&client, kind, &name).lock().unwrap();
        let inner = handle(&client, kind, &name).with_lease(Duration::from_millis(200)).lock().unwrap();
        thread::sleep(Duration::from_millis(1500));
        assert!(outer.is_held() && inner.is_held(), "both guards read held after 1.5 s");
        assert!(pttl(&mut conn, &name) > 0, "the key has a lease: PTTL {}", pttl(&mut conn, &name));
        assert!(rival(&other, kind, &name).try_lock().unwrap().is_none(), "another client got in");
        inner.unlock().unwrap();
        outer.unlock().unwrap();
        assert!(!exists(&mut conn, &name), "released");
    });
}

/// (b) An outer 3 s hold and an inner watchdog hold on one thread; releasing the inner one
/// must leave the key the rest of the outer 3 s, not the 600 ms watchdog lease, and the lock
/// must stay held a second later.
///
/// Breaks if the release sets the expiry to the watchdog lease (or the watchdog's renewal
/// before it did), so the key expires ~600 ms later under a live 3 s hold.
#[test]
fn releasing_a_watchdog_hold_inside_a_longer_fixed_hold_keeps_the_longer_lease() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(MIXED_WATCHDOG));
    let other = crate::helpers::client(&server);
    for_every_kind(|kind| {
        let name = format!("mixed-b-{kind:?}");
        let mut conn = server.conn();
        let outer = handle(&client, kind, &name).with_lease(Duration::from_secs(3)).lock().unwrap();
        let inner = handle(&client, kind, &name).lock().unwrap();
        inner.unlock().unwrap();
        let left = pttl(&mut conn, &name);
        assert!(left > 2000, "PTTL {left} ms right after releasing the watchdog hold (the outer lease is 3 s)");
        thread::sleep(Duration::from_secs(1));
        assert!(outer.is_held(), "the outer hold reads held");
        assert!(rival(&other, kind, &name).try_lock().unwrap().is_none(), "another client got in after 1 s");
        outer.unlock().unwrap();
        assert!(!exists(&mut conn, &name), "released");
    });
}

/// (c) An outer 6 s hold and an inner 1 s hold; the outer one is released first. The
/// inner hold remains: it must still read held, and the key must live as long as it needs,
/// no longer.
///
/// Breaks if releasing the outer hold ends the whole lease (the release drops the wrong
/// hold's end, marks the lease released, or sets an expiry of zero, deleting the key), or
/// keeps the released hold's 6 s (a read release that deleted the inner hold's key and kept
/// the outer one's did).
#[test]
fn releasing_the_longer_fixed_hold_first_leaves_the_shorter_one_held() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(MIXED_WATCHDOG));
    for_every_kind(|kind| {
        let name = format!("mixed-c-{kind:?}");
        let mut conn = server.conn();
        // The inner lease is a second, not less: a loaded CI machine once took longer than a
        // 200 ms lease between the fair lock's inner acquire and this check.
        let outer = handle(&client, kind, &name).with_lease(Duration::from_secs(6)).lock().unwrap();
        let inner_taken = Instant::now();
        let inner = handle(&client, kind, &name).with_lease(INNER_LEASE).lock().unwrap();
        outer.unlock().unwrap();
        let elapsed = inner_taken.elapsed();
        assert!(
            inner.is_held() || elapsed >= INNER_LEASE,
            "the inner hold reads {:?} {elapsed:?} after it was asked for",
            inner.lease_state()
        );
        let left = pttl(&mut conn, &name);
        assert!(left > 0 || elapsed >= INNER_LEASE, "PTTL {left} right after releasing the outer hold");
        // Neither shorter nor longer than the remaining hold needs: a lock kept for the
        // released hold's 6 s would shut others out for nothing.
        assert!(left <= 1000, "{kind:?}: PTTL {left} ms, more than the 1 s the remaining hold needs");
        drop(inner);
    });
}

/// A downgrade with mixed leases: a write hold (watchdog) and then a 3 s read hold on one
/// thread; releasing the write hold leaves the lock in read mode with the read hold's lease,
/// not the watchdog's, and a writer of another client stays out a second later.
///
/// Breaks if the write release deletes the lock, keeps write mode, or gives it the 600 ms
/// watchdog lease (it then expires under the live read hold and the rival writer gets in).
#[test]
fn a_downgrade_keeps_the_read_holds_longer_lease_after_the_write_release() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(MIXED_WATCHDOG));
    let other = crate::helpers::client(&server);
    let mut conn = server.conn();
    let rw = client.read_write_lock("downgrade");
    let write = rw.write().lock().unwrap();
    let read = rw.read().with_lease(Duration::from_secs(3)).lock().unwrap();
    write.unlock().unwrap();
    let mode: Option<String> = redis::cmd("HGET").arg("downgrade").arg("mode").query(&mut conn).unwrap();
    assert_eq!(mode.as_deref(), Some("read"), "{:?}", hgetall(&mut conn, "downgrade"));
    let left = pttl(&mut conn, "downgrade");
    assert!(left > 2000, "PTTL {left} ms right after the write release (the read hold is 3 s)");
    thread::sleep(Duration::from_secs(1));
    assert!(read.is_held());
    assert!(other.read_write_lock("downgrade").write().try_lock().unwrap().is_none(), "a writer got in");
    read.unlock().unwrap();
    assert!(!exists(&mut conn, "downgrade"), "released");
}
