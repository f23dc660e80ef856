//! Fault class 6: user code on a library thread, and unbounded waits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, LockEvents};

use super::{Recorder, recording};
use crate::helpers::*;
use crate::support::server::RedisServer;

/// Events whose every hook counts its call and then panics.
#[derive(Default)]
struct Panicking {
    lost: AtomicUsize,
    renewal_failed: AtomicUsize,
    disconnected: AtomicUsize,
    reconnected: AtomicUsize,
}

impl LockEvents for Panicking {
    fn lease_lost(&self, lock: &str) {
        self.lost.fetch_add(1, Ordering::SeqCst);
        panic!("deliberate panic in the lease_lost hook ({lock}); the library must survive it");
    }

    fn renewal_failed(&self, error: &redlease::Error) {
        self.renewal_failed.fetch_add(1, Ordering::SeqCst);
        panic!("deliberate panic in the renewal_failed hook ({error}); the library must survive it");
    }

    fn subscriber_disconnected(&self, error: &redlease::Error) {
        self.disconnected.fetch_add(1, Ordering::SeqCst);
        panic!("deliberate panic in the subscriber_disconnected hook ({error}); the library must survive it");
    }

    fn subscriber_reconnected(&self) {
        self.reconnected.fetch_add(1, Ordering::SeqCst);
        panic!("deliberate panic in the subscriber_reconnected hook; the library must survive it");
    }
}

/// Has the hooks' deliberate panics print their one line only. With `RUST_BACKTRACE` set,
/// the default hook resolves a backtrace for each, on the renewal thread that called the
/// hook: in a debug build on a loaded machine that once took longer than a 600 ms lease,
/// and a lock the test keeps held expired. Every other panic goes to the default hook.
fn quiet_deliberate_panics() {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied());
            match message {
                Some(message) if message.starts_with("deliberate panic") => eprintln!("{message}"),
                _ => default(info),
            }
        }));
    });
}

fn panicking_client(server: &RedisServer, hooks: &Arc<Panicking>, watchdog: Duration) -> Client {
    quiet_deliberate_panics();
    let events: Arc<dyn LockEvents> = Arc::clone(hooks) as _;
    client_with(server, |b| b.watchdog_timeout(watchdog).events(events))
}

/// The renewal thread calls `lease_lost` (lock 1's key deleted) and `renewal_failed` (lock
/// 3's key replaced by a string, which the renew script cannot read), and both panic. The
/// renewal thread must go on: lock 2, untouched, must still be held 2 s later (a 600 ms
/// watchdog lease, so only renewals keep it), and unlocking the lost locks must return an
/// error at once, not wait for a renewal round trip that will never finish.
///
/// Breaks if a hook's panic kills the renewal thread (lock 2 then expires and the rival
/// takes it), or leaves a lease marked "renewal in flight" so that `unlock()` waits the
/// round-trip bound (14 s with the default timeouts).
#[test]
fn panicking_loss_and_renewal_hooks_neither_stop_the_watchdog_nor_block_an_unlock() {
    let server = RedisServer::start();
    let hooks = Arc::new(Panicking::default());
    let client = panicking_client(&server, &hooks, Duration::from_millis(600));
    let other = crate::helpers::client(&server);
    let mut conn = server.conn();

    // The guards live on a worker thread (they are !Send), so that an unlock that blocks
    // fails the test at the channel's timeout instead of hanging it.
    let (to_test, from_worker) = mpsc::channel::<String>();
    let (go, wait_for_go) = mpsc::channel::<()>();
    let holder = client.clone();
    thread::spawn(move || {
        let [guard1, guard2, guard3] = ["hooked-1", "hooked-2", "hooked-3"].map(|n| holder.lock(n).lock().unwrap());
        let _ = to_test.send("held".into());
        if wait_for_go.recv().is_err() {
            return;
        }
        let _ = to_test.send(format!("lock 2 held: {}", guard2.is_held()));
        for (name, guard) in [("hooked-1", guard1), ("hooked-3", guard3)] {
            let started = Instant::now();
            let outcome = guard.unlock().map_err(|e| e.kind());
            let _ = to_test.send(format!("{name}: {outcome:?} after {} ms", started.elapsed().as_millis()));
        }
        let _ = to_test.send(format!("hooked-2: {:?}", guard2.unlock().map_err(|e| e.to_string())));
    });
    let next = |what: &str| {
        from_worker
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("the worker did not report {what} within 10 s (it failed, or blocks)"))
    };
    assert_eq!(next("its locks"), "held");
    redis::cmd("DEL").arg("hooked-1").query::<()>(&mut conn).unwrap();
    redis::cmd("SET").arg("hooked-3").arg("not a lock").query::<()>(&mut conn).unwrap();
    let renewed = client.stats().leases_renewed;

    thread::sleep(Duration::from_secs(2));
    assert!(hooks.lost.load(Ordering::SeqCst) >= 1, "the lease_lost hook was called (and panicked)");
    assert!(hooks.renewal_failed.load(Ordering::SeqCst) >= 1, "the renewal_failed hook was called (and panicked)");
    assert!(pttl(&mut conn, "hooked-2") > 0, "lock 2 still has a lease");
    assert!(other.lock("hooked-2").try_lock().unwrap().is_none(), "another client took lock 2");
    let renewals_since = client.stats().leases_renewed - renewed;
    assert!(renewals_since >= 3, "the renewal thread renewed {renewals_since} leases in 2 s");

    go.send(()).unwrap();
    assert_eq!(next("lock 2's state"), "lock 2 held: true");
    for name in ["hooked-1", "hooked-3"] {
        let report = next(&format!("the unlock of {name} (it blocks)"));
        let took: u64 = report.rsplit(' ').nth(1).and_then(|ms| ms.parse().ok()).unwrap_or(u64::MAX);
        assert!(report.starts_with(&format!("{name}: Err(")), "the lease is lost, unlock must say so: {report}");
        assert!(took < 2000, "{report}");
    }
    assert_eq!(next("the unlock of lock 2"), "hooked-2: Ok(())");
}

/// One renewal batch holds leases of every kind: plain, read, write, a plain lock also held
/// with a fixed lease (renewed only ever longer), one whose key was deleted (lost) and one
/// whose key was replaced by a string, which Redis refuses to renew (`WRONGTYPE`). The
/// refused lease sits in the middle of the batch. Two seconds later (a 600 ms watchdog lease,
/// so only renewals keep a lock) every other lock still has a lease, and the losses
/// reported name the deleted lock and the refused one.
///
/// Breaks if one refused lease stops the leases after it in the batch from being renewed
/// (they expire and `lease_lost` names them), or if outcomes are matched to the wrong
/// leases (the batch goes out in another order than the guards were registered).
#[test]
fn one_refused_lease_in_a_renewal_batch_leaves_the_others_renewed_and_each_outcome_its_own() {
    let server = RedisServer::start();
    let recorder = Arc::new(Recorder::default());
    let client = client_with(&server, |b| recording(&recorder)(b.watchdog_timeout(Duration::from_millis(600))));
    let mut conn = server.conn();

    let plain_before = client.lock("batch-plain-1").lock().unwrap();
    let read = client.read_write_lock("batch-read").read().lock().unwrap();
    let longer = client.lock("batch-longer").with_lease(Duration::from_millis(300)).lock().unwrap();
    let longer_watchdog = client.lock("batch-longer").lock().unwrap();
    let refused = client.lock("batch-refused").lock().unwrap();
    let gone = client.lock("batch-gone").lock().unwrap();
    let plain_after = client.lock("batch-plain-2").lock().unwrap();
    let write = client.read_write_lock("batch-write").write().lock().unwrap();
    redis::cmd("SET").arg("batch-refused").arg("not a lock").query::<()>(&mut conn).unwrap();
    redis::cmd("DEL").arg("batch-gone").query::<()>(&mut conn).unwrap();

    thread::sleep(Duration::from_secs(2));
    for name in ["batch-plain-1", "batch-read", "batch-longer", "batch-plain-2", "batch-write"] {
        assert!(pttl(&mut conn, name) > 0, "{name} lost its lease: {:?}", recorder.events());
    }
    // The refused lease is lost too once its lease has passed unrenewed; no other is.
    let mut lost: Vec<String> = recorder.events().into_iter().filter(|e| e.starts_with("lease_lost")).collect();
    lost.sort();
    assert_eq!(lost, ["lease_lost batch-gone", "lease_lost batch-refused"], "the losses are those two locks'");
    assert!(recorder.count("renewal_failed") >= 1, "the refusal is reported: {:?}", recorder.events());
    assert!(!gone.is_held(), "the deleted lock's guard knows it is lost");
    for guard in [&plain_before, &longer_watchdog, &plain_after] {
        assert!(guard.is_held());
    }
    drop((plain_before, read, longer, longer_watchdog, refused, gone, plain_after, write));
}

/// The subscriber thread calls `subscriber_disconnected` and `subscriber_reconnected`, and
/// both panic, when the pub/sub connection is killed under a waiter. The subscriber must go
/// on: the waiter must get the lock soon after its release (whose message was lost while
/// disconnected), and a second waiter, later, must be woken by a release message on the
/// connection the subscriber makes again for it.
///
/// Breaks if a hook's panic kills the subscriber thread (the waiter is then bounded only by
/// the holder's 30 s lease) or leaves its state half-updated.
#[test]
fn panicking_subscriber_hooks_do_not_strand_a_waiter() {
    let server = RedisServer::start();
    let hooks = Arc::new(Panicking::default());
    let waiter = panicking_client(&server, &hooks, Duration::from_secs(30));
    let holder = client(&server);
    let guard = holder.lock("hooked-wait").lock().unwrap();
    let rx = wait_in_background(&waiter, "hooked-wait");
    let mut conn = server.conn();
    let channel = "redisson_lock__channel:{hooked-wait}";
    assert!(wait_until(Duration::from_secs(5), || subscribers(&mut conn, channel) == 1));
    let killed: u64 = redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query(&mut conn).unwrap();
    assert_eq!(killed, 1);
    let released = Instant::now();
    guard.unlock().unwrap();
    let (outcome, at) = rx.recv_timeout(Duration::from_secs(15)).expect("the waiter returned");
    assert_eq!(outcome, Ok(true), "the waiter got the lock");
    let took = at.saturating_duration_since(released);
    assert!(took < Duration::from_secs(5), "woken {took:?} after the release (the lease was 30 s)");
    // The subscriber wakes its waiters before it calls the hook, so the waiter may have the
    // lock a moment before the hook has run.
    assert!(
        wait_until(Duration::from_secs(2), || hooks.disconnected.load(Ordering::SeqCst) >= 1),
        "the disconnected hook was called (and panicked)"
    );
    // A waiter that got the lock before the subscriber connected again left it nothing to
    // connect for: a second waiter does, and its release message must reach it.
    let guard = holder.lock("hooked-wait").lock().unwrap();
    let rx = wait_in_background(&waiter, "hooked-wait");
    assert!(
        wait_until(Duration::from_secs(5), || hooks.reconnected.load(Ordering::SeqCst) >= 1),
        "the reconnected hook was called (and panicked)"
    );
    assert!(wait_until(Duration::from_secs(5), || subscribers(&mut conn, channel) == 1), "subscribed again");
    let released = Instant::now();
    guard.unlock().unwrap();
    let (outcome, at) = rx.recv_timeout(Duration::from_secs(15)).expect("the second waiter returned");
    assert_eq!(outcome, Ok(true), "the second waiter got the lock");
    let took = at.saturating_duration_since(released);
    assert!(took < Duration::from_secs(2), "woken {took:?} after the release: by its message, not by the lease");
}

/// Waits up to 25 s for `name` on a thread of its own; sends whether it got the lock (and
/// gave it back), and when.
fn wait_in_background(client: &Client, name: &str) -> mpsc::Receiver<(Result<bool, String>, Instant)> {
    let (tx, rx) = mpsc::channel();
    let lock = client.lock(name);
    thread::spawn(move || {
        let outcome = lock.try_lock_for(Duration::from_secs(25)).map(|g| g.is_some()).map_err(|e| e.to_string());
        let _ = tx.send((outcome, Instant::now()));
    });
    rx
}
