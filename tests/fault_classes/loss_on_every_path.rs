//! Fault class 2: a loss learned on one path and not reported on the others.

use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use redlease::{AnyLock, Client};

use super::{Kind, Recorder, client_at, fields_of, for_every_kind, handle, hgetall, recording, rival};
use crate::helpers::*;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

/// Holds `name` on `client` (a 30 s watchdog: the renewal thread does not look within the
/// test), restarts `server` empty and lets a new client take the lock. Returns the new
/// holder and its guard.
fn lose_by_restart(
    server: &mut RedisServer,
    holder_guard: &redlease::LockGuard,
    name: &str,
) -> (Client, redlease::LockGuard) {
    assert!(holder_guard.is_held());
    server.restart();
    let other = client(server);
    let guard = other.lock(name).try_lock().unwrap().expect("the restart emptied Redis: the lock is free");
    (other, guard)
}

/// The other holder's hold is intact: one field of its own, one hold.
fn assert_taken_by(conn: &mut redis::Connection, name: &str, other: &Client) {
    let all = hgetall(conn, name);
    assert_eq!(all.len(), 1, "only the new holder's field: {all:?}");
    assert_eq!(fields_of(conn, name, other).values().collect::<Vec<_>>(), ["1"], "{all:?}");
}

/// (a) Redis restarted empty under a held watchdog lock, another client took it, then the
/// first guard is dropped. The drop's release is the first to learn the loss: it must
/// report `lease_lost` exactly once, never `release_failed`, and leave the new holder alone.
///
/// Breaks if the drop reports the release as failed (`release_failed`) instead of lost, if
/// the loss is reported twice or not at all, or if the release disturbs the new holder.
#[test]
fn a_guard_dropped_after_a_restart_reports_the_loss_once_and_no_failed_release() {
    let mut server = RedisServer::start();
    let recorder = Arc::new(Recorder::default());
    let client = client_with(&server, recording(&recorder));
    let guard = client.lock("restarted").lock().unwrap();
    let (other, _other_guard) = lose_by_restart(&mut server, &guard, "restarted");
    drop(guard);
    assert_eq!(recorder.count("lease_lost restarted"), 1, "{:?}", recorder.events());
    thread::sleep(Duration::from_millis(300));
    assert_eq!(recorder.count("lease_lost"), 1, "exactly once: {:?}", recorder.events());
    assert_eq!(recorder.count("release_failed"), 0, "{:?}", recorder.events());
    assert_taken_by(&mut server.conn(), "restarted", &other);
}

/// (b) The same, with `unlock()`: it must return `NotHeld`, and report the loss exactly
/// once, never as a failed release.
///
/// Breaks if `unlock()` returns `Ok` or another kind, if `lease_lost` is not called (the
/// caller's `Err` alone does not tell an events receiver), or is called twice.
#[test]
fn an_unlock_after_a_restart_is_not_held_and_reports_the_loss_once() {
    let mut server = RedisServer::start();
    let recorder = Arc::new(Recorder::default());
    let client = client_with(&server, recording(&recorder));
    let guard = client.lock("restarted").lock().unwrap();
    let (other, _other_guard) = lose_by_restart(&mut server, &guard, "restarted");
    let err = guard.unlock().expect_err("the lock is someone else's now");
    assert!(err.is_not_held(), "{err} ({:?})", err.kind());
    thread::sleep(Duration::from_millis(300));
    assert_eq!(recorder.count("lease_lost restarted"), 1, "exactly once: {:?}", recorder.events());
    assert_eq!(recorder.count("release_failed"), 0, "{:?}", recorder.events());
    assert_taken_by(&mut server.conn(), "restarted", &other);
}

/// (c) The key is deleted from outside; `hold_count()` asks Redis and learns the loss: it
/// returns 0, the guard reads lost, and `lease_lost` is called once. Dropping the guard
/// afterwards must not report it again, nor as a failed release.
///
/// Breaks if the query does not report the loss (the guard would read held until a renewal
/// 10 s away), or if the drop reports it a second time or as `release_failed`.
#[test]
fn a_loss_learned_by_hold_count_is_reported_once_and_not_again_on_drop() {
    let server = RedisServer::start();
    let recorder = Arc::new(Recorder::default());
    let client = client_with(&server, recording(&recorder));
    let lock = client.lock("queried");
    let guard = lock.lock().unwrap();
    redis::cmd("DEL").arg("queried").query::<()>(&mut server.conn()).unwrap();
    assert_eq!(lock.hold_count().unwrap(), 0, "Redis says nothing is held");
    assert!(!guard.is_held(), "the query marked the lease lost");
    assert_eq!(recorder.count("lease_lost queried"), 1, "reported by the query: {:?}", recorder.events());
    drop(guard);
    thread::sleep(Duration::from_millis(300));
    assert_eq!(recorder.count("lease_lost"), 1, "no second report on drop: {:?}", recorder.events());
    assert_eq!(recorder.count("release_failed"), 0, "{:?}", recorder.events());
}

/// (d) A fixed lease ran out while its guard lived; dropping the guard must report the
/// loss, once, and not as a failed release.
///
/// Breaks if the expiry of a fixed lease is never reported (the guard's drop sends nothing
/// and says nothing), or reported twice, or as `release_failed`.
#[test]
fn a_fixed_lease_that_ran_out_under_its_guard_is_reported_lost_once_on_drop() {
    let server = RedisServer::start();
    let recorder = Arc::new(Recorder::default());
    let client = client_with(&server, recording(&recorder));
    let guard = client.lock("short").with_lease(Duration::from_millis(200)).lock().unwrap();
    let mut conn = server.conn();
    assert!(wait_until(Duration::from_secs(3), || !exists(&mut conn, "short")), "the lease ran out in Redis");
    thread::sleep(Duration::from_millis(50));
    assert!(!guard.is_held());
    assert!(recorder.count("lease_lost") <= 1, "{:?}", recorder.events());
    drop(guard);
    assert_eq!(recorder.count("lease_lost short"), 1, "reported by the drop at the latest: {:?}", recorder.events());
    thread::sleep(Duration::from_millis(300));
    assert_eq!(recorder.count("lease_lost"), 1, "exactly once: {:?}", recorder.events());
    assert_eq!(recorder.count("release_failed"), 0, "{:?}", recorder.events());
}

/// Restarts `server` empty under `kind`'s lock `name`, then lets another client take it and
/// give it back: the lock is free again, and nothing in Redis says that the first holder's
/// hold ever was.
fn restart_and_let_another_pass(server: &mut RedisServer, kind: Kind, name: &str) {
    server.restart();
    let other = crate::helpers::client(server);
    let passing = rival(&other, kind, name).try_lock().unwrap().expect("the restart emptied Redis: the lock is free");
    passing.unlock().unwrap();
}

/// (f) Redis restarted empty under a held lock of every kind, another client took the lock
/// and released it, then the first guard is released (by `unlock()` and by a drop, the
/// last guard and one of two). Each release finds a free lock with its first send's outcome
/// unknown (it went out on a connection the restart broke); the server that answers it is
/// not the one that granted the hold, so the hold did not survive: `NotHeld` from
/// `unlock()`, `lease_lost` once, never `release_failed`.
///
/// Breaks if "nothing of the owner in a free lock" after an unknown first outcome is taken
/// for the release having happened when the server restarted since the grant (it reported
/// nothing, though two holders had overlapped).
#[test]
fn a_release_after_a_restart_and_another_holder_reports_the_loss_on_every_path() {
    for_every_kind(|kind| {
        for path in ["unlock", "drop", "inner unlock"] {
            let mut server = RedisServer::start();
            let recorder = Arc::new(Recorder::default());
            let client = client_with(&server, recording(&recorder));
            let name = format!("restarted-{kind:?}");
            let outer = handle(&client, kind, &name).lock().unwrap();
            let inner = (path == "inner unlock").then(|| handle(&client, kind, &name).lock().unwrap());
            restart_and_let_another_pass(&mut server, kind, &name);
            match inner {
                Some(inner) => {
                    let err = inner.unlock().expect_err("the hold did not survive the restart");
                    assert!(err.is_not_held(), "{path}: {err} ({:?})", err.kind());
                    drop(outer);
                }
                None if path == "drop" => drop(outer),
                None => {
                    let err = outer.unlock().expect_err("the hold did not survive the restart");
                    assert!(err.is_not_held(), "{path}: {err} ({:?})", err.kind());
                }
            }
            thread::sleep(Duration::from_millis(100));
            assert_eq!(recorder.count("lease_lost"), 1, "{path}: reported once: {:?}", recorder.events());
            assert_eq!(recorder.count("release_failed"), 0, "{path}: {:?}", recorder.events());
        }
    });
}

/// (g) The same restart and passing holder, then the thread takes the lock again while its
/// first guard lives: the acquire finds nothing of the owner (it is a new hold, not a
/// reentry), so the first guard's hold is lost: it reads so and is reported once, while the
/// new guard holds the lock and its release frees it.
///
/// Breaks if the new grant is taken for a reentry into a hold that Redis no longer had
/// (the first guard then read held through the other holder's time, and nothing reported
/// it).
#[test]
fn a_reentrant_acquire_that_finds_its_hold_gone_reports_the_first_guard_lost() {
    for_every_kind(|kind| {
        let mut server = RedisServer::start();
        let recorder = Arc::new(Recorder::default());
        let client = client_with(&server, recording(&recorder));
        let name = format!("reentered-{kind:?}");
        let first = handle(&client, kind, &name).lock().unwrap();
        restart_and_let_another_pass(&mut server, kind, &name);
        let second = handle(&client, kind, &name).lock().unwrap();
        assert!(!first.is_held(), "the first guard's hold did not survive the restart");
        assert!(second.is_held(), "the new grant holds");
        assert_eq!(recorder.count("lease_lost"), 1, "reported once: {:?}", recorder.events());
        second.unlock().expect("the new hold is released");
        assert!(first.unlock().expect_err("lost").is_not_held());
        assert!(!exists(&mut server.conn(), &name), "nothing left");
        assert_eq!(recorder.count("lease_lost"), 1, "not again: {:?}", recorder.events());
        assert_eq!(recorder.count("release_failed"), 0, "{:?}", recorder.events());
    });
}

/// (h) A leadership held across a restart, another candidate elected and resigned since:
/// resigning (and dropping) reports the loss once.
///
/// Breaks as (f), for the election's release.
#[test]
fn a_leadership_released_after_a_restart_and_another_leader_reports_the_loss() {
    for resign in [true, false] {
        let mut server = RedisServer::start();
        let recorder = Arc::new(Recorder::default());
        let client = client_with(&server, recording(&recorder));
        let leadership = client.election("restarted").campaign("first").unwrap();
        server.restart();
        let other = crate::helpers::client(&server);
        other.election("restarted").try_campaign("second").unwrap().expect("nobody leads").resign().unwrap();
        if resign {
            assert!(leadership.resign().expect_err("the leadership did not survive").is_not_held());
        } else {
            drop(leadership);
        }
        thread::sleep(Duration::from_millis(100));
        assert_eq!(recorder.count("lease_lost"), 1, "resign {resign}: {:?}", recorder.events());
        assert_eq!(recorder.count("release_failed"), 0, "resign {resign}: {:?}", recorder.events());
    }
}

/// (e) An unlock whose release reaches Redis, while its connection breaks before the reply
/// is read (the proxy forwards the release, drops the reply, then cuts the connection): the
/// outcome is unknown, and the release sent again finds nothing of the owner. That is the
/// release having happened, not a loss: `unlock()` is `Ok`, no `lease_lost` is reported,
/// and the lock is free. Every kind's release goes through the same send.
///
/// Breaks if "the owner holds nothing" after an unknown first outcome is taken for a lost
/// lease (`NotHeld` and `lease_lost`, which a caller reads as someone else having held the
/// lock), as it was when the pool's own resend on a broken connection hid the first send.
#[test]
fn a_release_whose_reply_was_lost_with_its_connection_is_a_release_not_a_loss() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let recorder = Arc::new(Recorder::default());
    let client = client_at(&proxy.url(), recording(&recorder));
    let rw = client.read_write_lock("cut-rw");
    let kinds: Vec<(&str, AnyLock)> = vec![
        ("cut-plain", client.lock("cut-plain").into()),
        ("cut-fair", client.fair_lock("cut-fair").into()),
        ("cut-rw", rw.write().into()),
        ("cut-rw", rw.read().into()),
        ("cut-fenced", client.fenced_lock("cut-fenced").into()),
    ];
    let mut conn = server.conn();
    for (name, lock) in kinds {
        let (held_tx, held_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel();
        // The guard stays on the thread that took it (guards are not Send).
        let holder = thread::spawn(move || {
            let guard = lock.lock().expect("acquired");
            held_tx.send(()).expect("tell");
            go_rx.recv().expect("told to release");
            done_tx.send(guard.unlock().map_err(|e| e.to_string())).expect("report");
        });
        held_rx.recv_timeout(Duration::from_secs(5)).expect("held");
        // The client's first acquire has its renewal thread announce it a moment later,
        // through the same proxy: a reply dropped there would hold up the release instead.
        crate::helpers::announced(&client, &mut conn);
        let dropped = proxy.replies_dropped();
        proxy.set_drop_replies(true);
        go_tx.send(()).expect("release");
        assert!(
            wait_until(Duration::from_secs(2), || !exists(&mut conn, name) && proxy.replies_dropped() > dropped),
            "{name}: the release ran in Redis and its reply was dropped"
        );
        // Now the connection breaks under the waiting unlock.
        proxy.set_drop_replies(false);
        proxy.cut_all();
        let unlocked = done_rx.recv_timeout(Duration::from_secs(10)).expect("the unlock returns");
        holder.join().expect("holder");
        assert_eq!(unlocked, Ok(()), "{name}: an unknown outcome, then nothing of the owner, is a release");
        assert_eq!(recorder.count("lease_lost"), 0, "{name}: no loss: {:?}", recorder.events());
        assert_eq!(recorder.count("release_failed"), 0, "{name}: {:?}", recorder.events());
    }
}
