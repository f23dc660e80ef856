//! The spin lock (Redisson's `RSpinLock`): no pub/sub at all, waiters that poll by a
//! back-off, the reentrant lock's key, and a foreign client's spin lock (`support::foreign`)
//! on the same keys.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{BackOff, Client};

use crate::helpers::*;
use crate::support::foreign::{self, Acquire, Release};
use crate::support::server::RedisServer;

/// Holds `name` on a thread of `holder`'s for `hold`, then releases; returns when it holds.
fn hold_for(holder: &Client, name: &str, hold: Duration) -> thread::JoinHandle<Instant> {
    let lock = holder.spin_lock(name);
    let (tx, rx) = mpsc::channel();
    let holding = thread::spawn(move || {
        let guard = lock.lock().expect("the holder acquires");
        tx.send(()).unwrap();
        thread::sleep(hold);
        let released_at = Instant::now();
        guard.unlock().expect("released");
        released_at
    });
    rx.recv_timeout(Duration::from_secs(5)).expect("held");
    holding
}

/// A waiter polls by its back-off and gets the lock soon after the release, and neither
/// side sends a pub/sub command: no `SUBSCRIBE`, no `PUBLISH`, no waiting-client key.
///
/// Breaks if the spin lock subscribes or publishes (a proxy without pub/sub would refuse
/// it), or if its waiter sleeps past its back-off.
#[test]
fn a_spin_waiter_polls_by_its_backoff_and_nothing_touches_pubsub() {
    let server = RedisServer::start();
    let (holder, waiter) = (client(&server), client(&server));
    let holding = hold_for(&holder, "spun", Duration::from_millis(300));
    let lock = waiter.spin_lock("spun").with_backoff(BackOff::constant(Duration::from_millis(20)));
    let guard = lock.try_lock_for(Duration::from_secs(5)).expect("no error").expect("got it after the release");
    let got_at = Instant::now();
    let released_at = holding.join().unwrap();
    let took = got_at.saturating_duration_since(released_at);
    assert!(took < Duration::from_millis(20) + Duration::from_millis(400), "within a sleep of the release: {took:?}");
    guard.unlock().expect("released");
    let mut conn = server.conn();
    for command in ["subscribe", "ssubscribe", "publish", "spublish"] {
        assert_eq!(calls_of(&mut conn, command), 0, "no {command}");
    }
    // A registration is removed again by the grant: count the writes that would make one.
    assert_eq!(calls_of(&mut conn, "zadd"), 0, "no waiting client registered");
}

/// A user with no channel at all (Redis 7's `resetchannels`) takes, waits for and releases
/// a spin lock; the same user's plain lock is refused its release's channel (the contrast
/// that shows the user really has none).
///
/// Breaks if the spin lock needs a channel anywhere (a release that publishes, a waiter
/// that subscribes).
#[test]
fn a_user_without_channels_can_use_the_spin_lock() {
    let server = RedisServer::start();
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg("nochan")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("+@all")
        .arg("resetchannels")
        .query::<()>(&mut server.conn())
        .unwrap();
    let url = format!("redis://nochan:pw@127.0.0.1:{}/", server.port());
    let (holder, waiter) = (Client::open(&url).unwrap(), Client::open(&url).unwrap());
    let holding = hold_for(&holder, "nochan-spin", Duration::from_millis(100));
    let got = waiter.spin_lock("nochan-spin").try_lock_for(Duration::from_secs(5)).expect("no refusal");
    assert!(got.is_some(), "the waiter got the spin lock");
    holding.join().unwrap();
    drop(got);
    let plain = holder.lock("nochan-plain").lock().expect("acquired");
    let err = plain.unlock().expect_err("a plain release publishes on its channel");
    assert!(err.is_permission_denied(), "{err}");
}

/// Each foreign client's spin lock and redlease's on one key, both ways: each finds the
/// other's hold busy; the foreign client, polling, gets the lock after redlease's release;
/// redlease's waiter, polling, gets it after the foreign (silent) release.
///
/// Breaks if the spin lock's layout differs from Redisson's (a Java and a Rust holder at
/// once), or if its waiter relies on a message Redisson's spin release never sends.
#[test]
fn foreign_spin_locks_and_redlease_exclude_each_other() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    for (i, peer) in foreign::peers().iter().enumerate() {
        let (who, name) = (peer.who(), format!("spin-x-{i}"));
        let guard = client.spin_lock(&name).lock().expect("redlease holds");
        assert!(matches!(peer.spin_acquire(&mut conn, &name, JAVA_OWNER), Ok(Acquire::Busy(ttl)) if ttl > 0), "{who}");
        // The foreign client polls (as a spin lock does) while redlease holds, then gets it.
        let (released_at, got_at) = thread::scope(|scope| {
            let polling = scope.spawn(|| {
                let mut conn = server.conn();
                let until = Instant::now() + Duration::from_secs(5);
                while Instant::now() < until {
                    if peer.spin_acquire(&mut conn, &name, JAVA_OWNER).expect("no error") == Acquire::Granted {
                        return Some(Instant::now());
                    }
                    thread::sleep(Duration::from_millis(10));
                }
                None
            });
            thread::sleep(Duration::from_millis(100));
            let released_at = Instant::now();
            drop(guard);
            (released_at, polling.join().unwrap())
        });
        let got_at = got_at.unwrap_or_else(|| panic!("{who}: polled the lock free"));
        assert!(got_at > released_at, "{who}: not before redlease released");
        assert!(client.spin_lock(&name).try_lock().unwrap().is_none(), "{who}: busy for redlease");
        let lock = client.spin_lock(&name).with_backoff(BackOff::constant(Duration::from_millis(10)));
        let waiter = thread::spawn(move || lock.try_lock_for(Duration::from_secs(5)).map(|g| g.is_some()));
        thread::sleep(Duration::from_millis(100));
        assert_eq!(peer.spin_release(&mut conn, &name, JAVA_OWNER).unwrap(), Release::Freed, "{who}");
        assert_eq!(
            waiter.join().unwrap().map_err(|e| e.to_string()),
            Ok(true),
            "{who}: redlease's waiter polled it free"
        );
    }
}

/// A spin wait ends at its deadline and at an interrupt, within a sleep; back-off settings
/// no policy can follow are `InvalidInput` before anything is sent.
///
/// Breaks if a spin wait overshoots its deadline by more than a sleep, cannot be
/// interrupted, or sends an attempt with a bad back-off.
#[test]
fn a_spin_wait_ends_at_its_deadline_or_an_interrupt_and_bad_backoffs_send_nothing() {
    let server = RedisServer::start();
    let (holder, waiter) = (client(&server), client(&server));
    let _held = holder.spin_lock("spin-wait").lock().expect("held");
    let lock = waiter.spin_lock("spin-wait");
    let started = Instant::now();
    assert!(lock.try_lock_for(Duration::from_millis(400)).unwrap().is_none());
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(400) && took < Duration::from_millis(400 + 128 + 300), "{took:?}");
    let (tx, rx) = mpsc::channel();
    let waiting = thread::spawn(move || {
        tx.send(redlease::Interrupter::current()).unwrap();
        lock.lock().map(|g| g.is_held())
    });
    let interrupter = rx.recv().unwrap();
    thread::sleep(Duration::from_millis(300));
    let interrupted_at = Instant::now();
    interrupter.interrupt();
    let err = waiting.join().unwrap().expect_err("interrupted");
    assert!(err.is_interrupted() && interrupted_at.elapsed() < Duration::from_millis(200), "{err}");
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    for bad in [
        BackOff::constant(Duration::ZERO),
        BackOff::exponential(Duration::from_millis(10), Duration::from_millis(1), 2),
    ] {
        let err = waiter.spin_lock("spin-bad").with_backoff(bad).lock().map(drop).expect_err("refused");
        assert!(err.is_invalid_input(), "{bad:?}: {err}");
    }
    assert_eq!(commands_served(&mut conn), before, "nothing was sent");
}
