//! Holds kept at least a while after their grant (once-per-window jobs): a release before
//! then leaves the lock taken until the window ends, to everyone, the releasing thread
//! included; a release after it frees the lock at once; bad windows are refused.

use std::thread;
use std::time::{Duration, Instant};

use redlease::{ErrorKind, LockKind};

use crate::helpers::*;
use crate::support::server::RedisServer;

/// A job done in 100 ms under a 1 s window: the lock stays taken until the window ends
/// (the key's time to live is the rest of it), nobody takes it before (another client,
/// another thread of this one, this very thread: no reentry into a finished window), the
/// keeper shows in an inspection with this client's identity, and the next run gets it once
/// the window is over. With a fixed lease and with the watchdog alike.
///
/// Breaks if an early release frees the lock, if the window is cut short or stretched, or
/// if the releasing thread can reenter it.
#[test]
fn a_hold_released_early_keeps_the_lock_until_its_window_ends() {
    let server = RedisServer::start();
    let client = client(&server);
    let other = client_with(&server, |b| b);
    let mut conn = server.conn();
    for fixed in [Some(Duration::from_secs(5)), None] {
        let name = if fixed.is_some() { "window:fixed" } else { "window:watchdog" };
        let window = Duration::from_secs(1);
        let mut lock = client.lock(name).keep_at_least(window);
        if let Some(lease) = fixed {
            lock = lock.with_lease(lease);
        }
        let sent = Instant::now();
        let guard = lock.try_lock().unwrap().expect("free");
        let granted = Instant::now();
        thread::sleep(Duration::from_millis(100));
        guard.unlock().unwrap();
        let ttl = pttl(&mut conn, name);
        // Granted in Redis between `sent` and `granted`: kept until the window's end from
        // then, which is at most 900 ms away after the 100 ms held.
        let left = window.saturating_sub(sent.elapsed()).as_millis() as i64;
        assert!(
            ttl >= left - 1 && ttl <= 901,
            "{name}: kept for the rest of the window: {ttl} ms, {left} ms left at least"
        );
        assert!(lock.try_lock().unwrap().is_none(), "{name}: not even this thread reenters");
        assert!(client.lock(name).try_lock().unwrap().is_none(), "{name}: nor a plain handle of it");
        assert!(other.lock(name).try_lock().unwrap().is_none(), "{name}: nor another client");
        let info = client.inspect(name).unwrap();
        assert_eq!(info.kind, Some(LockKind::Lock));
        assert_eq!(info.holders[0].owner, format!("{}:0", client.id()), "{name}: the keeper");
        let next = other.lock(name).try_lock_for(Duration::from_secs(5)).unwrap().expect("the next window");
        // Not before the window ended (it began in Redis after `sent`), and soon after it
        // (it began before `granted`).
        let since_sent = sent.elapsed();
        assert!(since_sent >= window, "{name}: not before the window ended: {since_sent:?}");
        let waited = granted.elapsed();
        assert!(waited < window + Duration::from_millis(700), "{name}: soon after it: {waited:?}");
        drop(next);
    }
}

/// A job that outlasts its window releases as usual: the lock is free at once.
///
/// Breaks if a late release keeps the lock.
#[test]
fn a_hold_released_after_its_window_frees_the_lock_at_once() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let lock = client.lock("window:late").with_lease(Duration::from_secs(5)).keep_at_least(Duration::from_millis(200));
    let guard = lock.try_lock().unwrap().expect("free");
    thread::sleep(Duration::from_millis(400));
    guard.unlock().unwrap();
    assert!(!exists(&mut conn, "window:late"), "released");
    assert!(client.lock("window:late").try_lock().unwrap().is_some());
}

/// A window of 0, one longer than the fixed lease, or too long for a lease is
/// `InvalidInput` before anything is sent; so is every kind that has no such release
/// (only reachable through the library's own kinds: the fair and read-write handles have
/// no `keep_at_least`).
///
/// Breaks if a bad window reaches Redis.
#[test]
fn bad_windows_are_refused_before_anything_is_sent() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    let lease = Duration::from_secs(10);
    for keep in [Duration::ZERO, Duration::from_secs(11), Duration::from_secs(u64::MAX / 1000)] {
        let err = client.lock("window:bad").with_lease(lease).keep_at_least(keep).try_lock().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{keep:?}: {err}");
    }
    let err = client.fenced_lock("window:bad").with_lease(lease).keep_at_least(lease * 2).lock().unwrap_err();
    assert!(err.to_string().contains("longer than its lease"), "{err}");
    assert_eq!(commands_served(&mut conn) - before, 0, "nothing was sent");
}
