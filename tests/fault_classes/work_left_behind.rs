//! Fault class 8: work left behind by a call that returned: a late undo, a command sent twice.

use std::thread;
use std::time::Duration;

use super::client_at;
use crate::helpers::*;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

/// An acquire whose reply comes late is undone from a thread of its own, behind it on its
/// connection; the caller has returned by then. The same thread's next acquire must not be
/// granted before that undo is done, or the undo takes the new hold away.
///
/// Here the proxy delays every byte 300 ms each way and the command timeout is 400 ms: the
/// first `try_lock` finds the lock busy and returns `Timeout`; its undo is then on its way
/// with 300 ms to go. The delay is lifted, the holder releases, and the thread tries again
/// on another pooled connection, which would be granted at once, before the undo lands.
///
/// Breaks if the second acquire does not wait for the undo: the undo then arrives after the
/// grant, deletes the lock, and the guard the thread holds guards nothing.
#[test]
fn a_late_undo_never_takes_away_a_later_hold_of_the_same_thread() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let late = client_at(&proxy.url(), |b| b.command_timeout(Duration::from_millis(400)).pool_size(4));
    let holder = client_at(&server.url(), |b| b);
    // Two pooled connections, opened while nothing is delayed.
    proxy.set_latency(Duration::from_millis(30));
    thread::scope(|scope| {
        for i in 0..2 {
            let late = &late;
            scope.spawn(move || {
                late.lock(format!("warm-{i}")).try_lock().expect("warm").expect("free").unlock().expect("released");
            });
        }
    });
    assert!(proxy.connection_count() >= 2, "two pooled connections");
    let held = holder.lock("contended").lock().expect("the holder takes it");
    proxy.set_latency(Duration::from_millis(300));
    let err = late.lock("contended").try_lock().expect_err("the reply comes after the command timeout");
    assert!(err.is_timeout(), "{err}");
    // The undo left with the 300 ms delay; what is sent from now on is not delayed.
    thread::sleep(Duration::from_millis(50));
    proxy.set_latency(Duration::ZERO);
    held.unlock().expect("the holder releases");
    let guard = late.lock("contended").try_lock().expect("second try").expect("free now");
    // Long after the undo landed: the lock is still this thread's.
    thread::sleep(Duration::from_millis(700));
    let mut conn = server.conn();
    assert!(exists(&mut conn, "contended"), "the late undo deleted the lock of a later hold");
    assert_eq!(late.lock("contended").hold_count().expect("hold count"), 1, "one hold, as the thread believes");
    guard.unlock().expect("the guard still holds it");
}

/// A command that must not run twice (adding permits, counting a latch down) is not sent
/// again when its connection breaks after Redis ran it: the caller gets the connection
/// error (the outcome is unknown to it), and Redis has run it once.
///
/// The proxy delays every byte 200 ms each way and cuts every connection 300 ms after the
/// call: the command has reached Redis, its reply has not come back.
///
/// Breaks if the pool's resend of a command that failed on a reused connection, or the
/// retry of a broken connection, sends it again: 2 permits added, or the latch counted down
/// twice.
#[test]
fn a_command_that_must_not_run_twice_is_not_sent_again_after_its_connection_breaks() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let client = client_at(&proxy.url(), |b| b);
    let semaphore = client.semaphore("once");
    let latch = client.count_down_latch("once-latch");
    assert!(semaphore.try_set_permits(1).expect("set"));
    assert!(latch.try_set_count(5).expect("set"));
    let cut_during = |call: &(dyn Fn() -> redlease::Result<i64> + Sync)| {
        proxy.set_latency(Duration::from_millis(200));
        let outcome = thread::scope(|scope| {
            let call = scope.spawn(call);
            thread::sleep(Duration::from_millis(300));
            proxy.cut_all();
            call.join().expect("no panic")
        });
        proxy.set_latency(Duration::ZERO);
        outcome
    };
    let added = cut_during(&|| semaphore.add_permits(1));
    let err = added.expect_err("the reply was cut off");
    assert!(err.is_connection_error(), "{err}");
    assert_eq!(semaphore.available_permits().expect("available"), 2, "added once, not twice");
    let counted = cut_during(&|| latch.count_down().map(|left| left as i64));
    let err = counted.expect_err("the reply was cut off");
    assert!(err.is_connection_error(), "{err}");
    assert_eq!(latch.count().expect("count"), 4, "counted down once, not twice");
}
