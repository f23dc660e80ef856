//! Fault classes: one section per class of fault the library is being fixed for.
//!
//! 1. A partial effect reported as a failure, and a server refusal swallowed (ACL).
//! 2. A loss learned on one path and not reported on the others.
//! 3. Liveness of a long-lived connection (a half-open pub/sub connection).
//! 4. Unchecked arithmetic on user values.
//! 5. Reentrant holds with different leases.
//! 6. User code on a library thread, and unbounded waits.
//! 7. Validation at the edge.
//! 8. Work left behind by a call that returned: a late undo, a command sent twice.
//! 9. A transient server state taken for a fatal one.
//!
//! Each test asserts the intended behaviour and says in a comment what would make it fail.
//! Timing bounds are sanity checks with generous slack, not measurements. Threads that could
//! block report through a channel read with `recv_timeout`, so a hang fails the test instead
//! of hanging it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redlease::{AnyLock, Client, ClientBuilder, ErrorKind, LockEvents, MultiLock, RedLock};

use crate::helpers::*;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

/// Slack on top of timing bounds: the machine has 2 cores and is noisy.
const SLACK: Duration = Duration::from_millis(400);

// -----------------------------------------------------------------------------------------
// Shared helpers
// -----------------------------------------------------------------------------------------

/// A client of `url` with a 2 s command timeout, built by `configure`.
fn client_at(url: &str, configure: impl FnOnce(ClientBuilder) -> ClientBuilder) -> Client {
    configure(Client::builder(url).command_timeout(Duration::from_secs(2))).build().expect("client builds")
}

/// `redis://user:password@127.0.0.1:PORT/`.
fn url_as(server: &RedisServer, user: &str, password: &str) -> String {
    format!("redis://{user}:{password}@127.0.0.1:{}/", server.port())
}

/// `ACL SETUSER name rules...`.
fn acl_setuser(conn: &mut redis::Connection, name: &str, rules: &[&str]) {
    redis::cmd("ACL").arg("SETUSER").arg(name).arg(rules).query::<()>(conn).expect("ACL SETUSER");
}

fn hgetall(conn: &mut redis::Connection, key: &str) -> HashMap<String, String> {
    redis::cmd("HGETALL").arg(key).query(conn).expect("HGETALL")
}

fn dbsize(conn: &mut redis::Connection) -> u64 {
    redis::cmd("DBSIZE").query(conn).expect("DBSIZE")
}

/// The fields of `key` that belong to `client` (owner fields start with its id).
fn fields_of(conn: &mut redis::Connection, key: &str, client: &Client) -> HashMap<String, String> {
    hgetall(conn, key).into_iter().filter(|(field, _)| field.starts_with(client.id())).collect()
}

/// The client-side ports (`addr=127.0.0.1:PORT`) of every pub/sub connection Redis has.
fn pubsub_ports(conn: &mut redis::Connection) -> Vec<u16> {
    let list: String = redis::cmd("CLIENT").arg("LIST").arg("TYPE").arg("pubsub").query(conn).expect("CLIENT LIST");
    list.lines().filter_map(client_port).collect()
}

/// The port of `addr=HOST:PORT` in one line of `CLIENT LIST` or `CLIENT INFO`.
fn client_port(line: &str) -> Option<u16> {
    let addr = line.split(' ').find_map(|f| f.strip_prefix("addr="))?;
    addr.rsplit(':').next()?.parse().ok()
}

/// The text of a panic payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(non-string panic)".into())
}

/// Records every event it receives, in order, as text.
#[derive(Default)]
struct Recorder {
    log: Mutex<Vec<String>>,
}

impl Recorder {
    fn push(&self, event: String) {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).push(event);
    }

    fn events(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Events whose text starts with `prefix`.
    fn count(&self, prefix: &str) -> usize {
        self.events().iter().filter(|e| e.starts_with(prefix)).count()
    }
}

impl LockEvents for Recorder {
    fn lease_lost(&self, lock: &str) {
        self.push(format!("lease_lost {lock}"));
    }

    fn renewal_failed(&self, error: &redlease::Error) {
        self.push(format!("renewal_failed {error}"));
    }

    fn release_failed(&self, lock: &str, error: &redlease::Error) {
        self.push(format!("release_failed {lock}: {error}"));
    }

    fn subscriber_disconnected(&self, error: &redlease::Error) {
        self.push(format!("subscriber_disconnected {error}"));
    }

    fn subscriber_reconnected(&self) {
        self.push("subscriber_reconnected".into());
    }
}

/// A builder step that installs `recorder` as the events receiver.
fn recording(recorder: &Arc<Recorder>) -> impl FnOnce(ClientBuilder) -> ClientBuilder {
    let events: Arc<dyn LockEvents> = Arc::clone(recorder) as _;
    move |b| b.events(events)
}

// -----------------------------------------------------------------------------------------
// 1. A partial effect reported as a failure, and a server refusal swallowed (ACL)
// -----------------------------------------------------------------------------------------

/// A server with the user `u`: every key and command, but no channel (`resetchannels`,
/// Redis 7's default, said outright for Redis 6.2, whose default is `allchannels`), so
/// every `PUBLISH` and `SUBSCRIBE` of the user is refused.
fn server_with_channelless_user() -> RedisServer {
    let server = RedisServer::start();
    acl_setuser(&mut server.conn(), "u", &["on", ">pw", "~*", "+@all", "resetchannels"]);
    server
}

/// A user without channel permission takes a lock uncontended (no channel involved), but
/// its release must publish: the release script is refused at the `PUBLISH`, before its
/// first write. The caller must learn that as `PermissionDenied`, and the lock must still be
/// held in Redis exactly as before (a failure that changed nothing).
///
/// Breaks if the refusal is reported as another kind (a plain `Redis` error) or swallowed
/// (`Ok`), or if the script deleted the key or decremented the hold before being refused.
#[test]
fn a_release_refused_its_channel_is_permission_denied_and_the_lock_stays_held() {
    let server = server_with_channelless_user();
    let client = client_at(&url_as(&server, "u", "pw"), |b| b);
    let mut conn = server.conn();
    let guard = client.lock("x").lock().expect("an uncontended acquire needs no channel");
    assert!(guard.is_held());
    let before = fields_of(&mut conn, "x", &client);
    assert_eq!(before.values().collect::<Vec<_>>(), ["1"], "one hold of this client: {before:?}");

    let err = guard.unlock().expect_err("the release script is refused at its PUBLISH");
    assert!(err.is_permission_denied(), "{err} ({:?})", err.kind());
    assert_eq!(err.lock_name(), Some("x"), "{err}");
    assert!(exists(&mut conn, "x"), "the lock is still held in Redis");
    assert_eq!(fields_of(&mut conn, "x", &client), before, "the owner's hold is untouched");
    assert!(pttl(&mut conn, "x") > 0, "and keeps its lease");
}

/// A waiter whose user may not subscribe to the lock's channel can never be woken by a
/// release. It must get `PermissionDenied` at once, naming the channel, not wait out its
/// deadline; and it must leave nothing behind in the client (no channel, no waiter).
///
/// Breaks if the `SUBSCRIBE` refusal is ignored by the subscriber (the waiter then waits for
/// a confirmation that never comes, then parks until its 5 s deadline and returns
/// `Ok(None)`), if the error is of another kind or does not name the channel, or if the
/// refused channel stays registered.
#[test]
fn a_waiter_refused_its_channel_fails_fast_with_permission_denied_and_leaves_nothing() {
    let server = server_with_channelless_user();
    let holder = client(&server);
    let _held = holder.lock("y").lock().unwrap();
    let client = client_at(&url_as(&server, "u", "pw"), |b| b);

    let started = Instant::now();
    let outcome = client.lock("y").try_lock_for(Duration::from_secs(5));
    let took = started.elapsed();
    let err = match outcome {
        Ok(got) => panic!(
            "a waiter refused its channel must fail, got Ok({:?}) after {took:?}",
            got.as_ref().map(|g| g.is_held())
        ),
        Err(e) => e,
    };
    assert!(err.is_permission_denied(), "{err} ({:?})", err.kind());
    assert!(took < Duration::from_secs(2), "refused after {took:?}, not at once");
    assert!(err.to_string().contains("redisson_lock__channel:{y}"), "the message names the channel: {err}");
    let clean = || {
        let s = client.stats();
        (s.channels, s.waiters) == (0, 0)
    };
    assert!(wait_until(Duration::from_secs(2), clean), "nothing left behind: {:?}", client.stats());
}

/// The same refusal for the fair lock and both sides of the read-write lock: uncontended
/// acquires work, every release is `PermissionDenied`, and each lock's keys are exactly as
/// they were before the release.
///
/// Breaks if a release of some kind goes through without publishing (the fair lock's
/// release publishes only when a waiter is queued, so an uncontended one may never meet the
/// refusal: a user that cannot wake waiters then releases or not depending on contention),
/// if a refusal is reported as another kind, or if a script wrote before being refused.
#[test]
fn fair_and_read_write_releases_refused_their_channel_leave_the_lock_as_it_was() {
    let server = server_with_channelless_user();
    let client = client_at(&url_as(&server, "u", "pw"), |b| b);
    let mut conn = server.conn();
    let snapshot = |conn: &mut redis::Connection, name: &str| {
        let queue = format!("redisson_lock_queue:{{{name}}}");
        let timeouts = format!("redisson_lock_timeout:{{{name}}}");
        (hgetall(conn, name), exists(conn, &queue), exists(conn, &timeouts))
    };
    let rw = client.read_write_lock("z");
    let rw_read = client.read_write_lock("z-read");
    let cases: [(&str, AnyLock); 3] =
        [("f", client.fair_lock("f").into()), ("z", rw.write().into()), ("z-read", rw_read.read().into())];
    let mut failures = Vec::new();
    for (name, lock) in cases {
        let guard = lock.lock().unwrap_or_else(|e| panic!("{name}: an uncontended acquire needs no channel: {e}"));
        let before = snapshot(&mut conn, name);
        assert!(!before.0.is_empty(), "{name}: held");
        match guard.unlock() {
            Err(e) if e.is_permission_denied() => {}
            other => failures
                .push(format!("{name}: unlock gave {:?}, not PermissionDenied", other.map_err(|e| e.to_string()))),
        }
        let after = snapshot(&mut conn, name);
        if after != before {
            failures.push(format!("{name}: the lock changed: before {before:?}, after {after:?}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A user whose key pattern covers the lock (`~app:*`) but not the read lock's per-hold
/// key (`{app:r}:<owner>:rwlock_timeout:1`) cannot take a read hold. It must get
/// `PermissionDenied` and nothing may be written: no half-made hold.
///
/// Breaks if the acquire writes the hash before the refused `SET` of the hold key (a hold
/// counted in the hash with no key of its own), or if the refusal comes back as another
/// kind.
#[test]
fn a_read_hold_whose_hold_key_is_outside_the_users_key_pattern_is_refused_and_writes_nothing() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    acl_setuser(&mut conn, "k", &["on", ">pw", "~app:*", "&*", "+@all"]);
    let client = client_at(&url_as(&server, "k", "pw"), |b| b);
    let err = client.read_write_lock("app:r").read().lock().expect_err("the per-hold key is out of the pattern");
    assert!(err.is_permission_denied(), "{err} ({:?})", err.kind());
    assert!(!exists(&mut conn, "app:r"), "no hash written: {:?}", hgetall(&mut conn, "app:r"));
    assert_eq!(dbsize(&mut conn), 0, "no key written at all");
}

// -----------------------------------------------------------------------------------------
// 2. A loss learned on one path and not reported on the others
// -----------------------------------------------------------------------------------------

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

// -----------------------------------------------------------------------------------------
// 3. Liveness of a long-lived connection (half-open pub/sub)
// -----------------------------------------------------------------------------------------

/// The proxy's per-connection freeze, which the tests below rely on: the frozen connection
/// stays open and silent, its neighbour keeps working, and an unknown port is refused.
///
/// Breaks if `freeze_upstream_port` freezes the wrong connection, closes it, or freezes
/// nothing.
#[test]
fn freezing_one_proxied_connection_silences_it_and_only_it() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let connect = || {
        let conn =
            redis::Client::open(proxy.url()).unwrap().get_connection_with_timeout(Duration::from_secs(2)).unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        conn
    };
    let (mut frozen, mut alive) = (connect(), connect());
    let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut frozen).unwrap();
    let port = client_port(&info).unwrap_or_else(|| panic!("no addr in CLIENT INFO: {info}"));
    assert!(!proxy.freeze_upstream_port(1), "no connection has upstream port 1");
    assert!(proxy.freeze_upstream_port(port));
    let silent = redis::cmd("PING").query::<String>(&mut frozen);
    assert!(silent.as_ref().is_err_and(|e| e.is_timeout()), "the frozen connection answers nothing: {silent:?}");
    assert_eq!(redis::cmd("PING").query::<String>(&mut alive).unwrap(), "PONG", "the other one still works");
    assert_eq!(proxy.connection_count(), 2, "the frozen connection stays open");
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut server.conn()).unwrap();
    assert!(list.lines().any(|l| client_port(l) == Some(port)), "Redis still has it: {list}");
}

/// Waits until `client` has exactly one waiter, Redis has confirmed its subscription to
/// `channel`, and the waiter has made its attempt after subscribing (two script calls since
/// `evalsha_before`): it is parked. Then freezes the pub/sub connection at the proxy and
/// returns its port.
fn freeze_pubsub_of_parked_waiter(
    server: &RedisServer,
    proxy: &Proxy,
    client: &Client,
    channel: &str,
    evalsha_before: u64,
) -> u16 {
    let mut conn = server.conn();
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "{:?}", client.stats());
    assert!(wait_until(Duration::from_secs(5), || subscribers(&mut conn, channel) == 1), "subscribed to {channel}");
    assert!(
        wait_until(Duration::from_secs(5), || calls_of(&mut conn, "evalsha") >= evalsha_before + 2),
        "the waiter tried again after subscribing"
    );
    thread::sleep(Duration::from_millis(50));
    let ports = pubsub_ports(&mut conn);
    assert_eq!(ports.len(), 1, "one pub/sub connection: {ports:?}");
    assert!(proxy.freeze_upstream_port(ports[0]), "the pub/sub connection goes through the proxy");
    ports[0]
}

/// A pub/sub connection that went silent without closing (a frozen proxy, a firewall that
/// drops a connection without telling either side) must be found by the PING check while a
/// thread waits on it: no answer within the command timeout means reconnect, resubscribe
/// and wake every waiter. The release message sent into the frozen connection is lost; the
/// waiter must still get the lock within a few seconds, not at the end of the holder's 20 s
/// lease, and the events must say disconnected, then reconnected.
///
/// Breaks if the subscriber never checks a silent connection (the waiter is then only
/// bounded by the holder's 20 s TTL), if it reconnects without waking the waiter, or if it
/// does not report the disconnect and the reconnect.
#[test]
fn a_half_open_pubsub_connection_is_found_by_ping_and_the_waiter_is_woken() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let recorder = Arc::new(Recorder::default());
    let waiter = client_at(&proxy.url(), |b| {
        recording(&recorder)(b).ping_interval(Duration::from_millis(300)).command_timeout(Duration::from_millis(500))
    });
    let holder = client(&server);
    let guard = holder.lock("h").with_lease(Duration::from_secs(20)).lock().unwrap();
    let evalsha_before = calls_of(&mut server.conn(), "evalsha");

    let (tx, rx) = mpsc::channel();
    let lock = waiter.lock("h");
    thread::spawn(move || {
        let outcome = lock.lock().map(|g| g.unlock().is_ok()).map_err(|e| e.to_string());
        let _ = tx.send((outcome, Instant::now()));
    });
    freeze_pubsub_of_parked_waiter(&server, &proxy, &waiter, "redisson_lock__channel:{h}", evalsha_before);

    let released = Instant::now();
    guard.unlock().unwrap(); // its message goes into the frozen connection
    let (outcome, at) = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| {
        panic!(
            "the waiter did not get the lock within 10 s of the release (the holder's lease was 20 s); events {:?}, {:?}",
            recorder.events(),
            waiter.stats()
        )
    });
    assert_eq!(outcome, Ok(true), "the waiter acquired and released");
    let took = at.saturating_duration_since(released);
    assert!(took < Duration::from_secs(3), "acquired {took:?} after the release");

    assert!(wait_until(Duration::from_secs(3), || waiter.stats().subscriber_connected), "{:?}", waiter.stats());
    let events = recorder.events();
    let disconnected = events.iter().position(|e| e.starts_with("subscriber_disconnected"));
    let reconnected = events.iter().rposition(|e| e == "subscriber_reconnected");
    assert!(
        matches!((disconnected, reconnected), (Some(d), Some(r)) if d < r),
        "disconnected, then reconnected: {events:?}"
    );
}

/// The PING check runs only while some thread waits: an idle client sends nothing, even
/// with a 100 ms ping interval, both before it ever waited and after a wait ended (its
/// pub/sub connection then stays open with nothing subscribed). As a control, while a
/// thread does wait, PINGs are seen.
///
/// Breaks if an idle client pings (before or after a wait), or if a waiting one does not.
#[test]
fn an_idle_client_sends_no_ping_however_short_its_ping_interval() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.ping_interval(Duration::from_millis(100)));
    let other = crate::helpers::client(&server);
    let mut conn = server.conn();
    let pings_over_a_second = |conn: &mut redis::Connection| {
        let before = calls_of(conn, "ping");
        thread::sleep(Duration::from_secs(1));
        calls_of(conn, "ping") - before
    };

    client.lock("idle").lock().unwrap().unlock().unwrap();
    assert_eq!(pings_over_a_second(&mut conn), 0, "an idle client that never waited pinged");

    // A wait that ends at once leaves the pub/sub connection open and unsubscribed.
    let waited = |name: &'static str, hold_for: Duration| {
        let guard = other.lock(name).lock().unwrap();
        let lock = client.lock(name);
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(lock.try_lock_for(Duration::from_secs(20)).map(|g| g.is_some()).map_err(|e| e.to_string()));
        });
        assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "{:?}", client.stats());
        thread::sleep(hold_for);
        drop(guard);
        let got = rx.recv_timeout(Duration::from_secs(10)).expect("the waiter returns after the release");
        assert_eq!(got, Ok(true));
    };
    waited("briefly", Duration::ZERO);
    let idle = || {
        let s = client.stats();
        (s.waiters, s.channels) == (0, 0)
    };
    assert!(wait_until(Duration::from_secs(5), idle), "{:?}", client.stats());
    assert_eq!(pings_over_a_second(&mut conn), 0, "an idle client pinged after a wait had ended");

    // Control: while a thread waits for a second, the connection is checked.
    let before = calls_of(&mut conn, "ping");
    waited("control", Duration::from_secs(1));
    let during = calls_of(&mut conn, "ping") - before;
    assert!(during >= 3, "only {during} PINGs during a 1 s wait with a 100 ms ping interval");
}

/// A new waiter whose `SUBSCRIBE` goes into a frozen pub/sub connection waits for a
/// confirmation that cannot come. The PING check (the connection is pinged because waiter A
/// waits on it) must replace the connection, so waiter B's subscription is confirmed soon,
/// and B, whose lock is released 200 ms after it started waiting, gets it within about 2 s,
/// not after the connect plus the command timeout (5.5 s). Waiter A then gets its lock once
/// it is released too.
///
/// Breaks if a waiter's wait for its subscription is bounded only by the connect and
/// command timeouts, or if the frozen connection is never replaced (A then waits for the
/// holder's 20 s lease).
#[test]
fn a_new_waiter_is_not_held_up_by_a_frozen_pubsub_connection() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let recorder = Arc::new(Recorder::default());
    let waiters = client_at(&proxy.url(), |b| {
        recording(&recorder)(b).ping_interval(Duration::from_millis(300)).command_timeout(Duration::from_millis(500))
    });
    let holder = client(&server);
    let lease = Duration::from_secs(20);
    let guard_a = holder.lock("a").with_lease(lease).lock().unwrap();
    let guard_b = holder.lock("b").with_lease(lease).lock().unwrap();
    let evalsha_before = calls_of(&mut server.conn(), "evalsha");

    let spawn_waiter = |name: &str| {
        let (tx, rx) = mpsc::channel();
        let lock = waiters.lock(name);
        thread::spawn(move || {
            let started = Instant::now();
            let outcome = lock.try_lock_for(Duration::from_secs(30)).map(|g| g.is_some()).map_err(|e| e.to_string());
            let _ = tx.send((outcome, started, Instant::now()));
        });
        rx
    };
    let waiting_a = spawn_waiter("a");
    freeze_pubsub_of_parked_waiter(&server, &proxy, &waiters, "redisson_lock__channel:{a}", evalsha_before);

    let waiting_b = spawn_waiter("b");
    thread::sleep(Duration::from_millis(200));
    guard_b.unlock().unwrap();
    let (outcome, started, at) = waiting_b
        .recv_timeout(Duration::from_secs(15))
        .unwrap_or_else(|_| panic!("waiter B never returned; events {:?}", recorder.events()));
    assert_eq!(outcome, Ok(true), "waiter B got b");
    let took = at.saturating_duration_since(started);
    assert!(
        took < Duration::from_millis(2500),
        "waiter B got its free lock after {took:?}; events {:?}",
        recorder.events()
    );

    let released = Instant::now();
    guard_a.unlock().unwrap();
    let (outcome, _, at) = waiting_a.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| {
        panic!("waiter A did not get a within 10 s of its release; events {:?}", recorder.events())
    });
    assert_eq!(outcome, Ok(true), "waiter A got a");
    let took = at.saturating_duration_since(released);
    assert!(took < Duration::from_secs(2), "waiter A got a {took:?} after its release");
}

// -----------------------------------------------------------------------------------------
// 4. Unchecked arithmetic on user values
// -----------------------------------------------------------------------------------------

/// `Duration::MAX` connect, command and ping timeouts mean "no limit", not an overflow: the
/// client builds, locks uncontended, waits for a contended lock that is released after
/// 200 ms, and keeps mutual exclusion (a non-atomic counter under the lock, two such
/// clients, four threads).
///
/// Breaks if any of these settings overflows a deadline computation (a panic in `build`, in
/// a pooled checkout, in the subscriber's join or ping schedule), or turns into a zero
/// timeout, or makes a wait never end (caught by the channels' timeouts).
#[test]
fn the_longest_connect_command_and_ping_timeouts_build_and_work() {
    let server = RedisServer::start();
    let unbounded =
        |b: ClientBuilder| b.connect_timeout(Duration::MAX).command_timeout(Duration::MAX).ping_interval(Duration::MAX);
    let a = client_with(&server, unbounded);
    let b = client_with(&server, unbounded);
    let other = crate::helpers::client(&server);
    a.lock("max-free").lock().unwrap().unlock().unwrap();

    // A contended wait: the holder releases 200 ms after the waiter started waiting.
    let guard = other.lock("max-wait").lock().unwrap();
    let (tx, rx) = mpsc::channel();
    let lock = a.lock("max-wait");
    thread::spawn(move || {
        let _ = tx.send((lock.lock().map(|g| g.unlock().is_ok()).map_err(|e| e.to_string()), Instant::now()));
    });
    assert!(wait_until(Duration::from_secs(5), || a.stats().waiters == 1), "{:?}", a.stats());
    thread::sleep(Duration::from_millis(200));
    let released = Instant::now();
    drop(guard);
    let (outcome, at) = rx.recv_timeout(Duration::from_secs(10)).expect("the waiter got the lock (or failed) in time");
    assert_eq!(outcome, Ok(true));
    let took = at.saturating_duration_since(released);
    assert!(took < Duration::from_secs(2), "woken {took:?} after the release");

    // Mutual exclusion, four threads over the two unbounded clients.
    let (tx, rx) = mpsc::channel();
    let url = server.url();
    let clients = [a.clone(), b.clone()];
    thread::spawn(move || {
        run_threads(4, &url, |index, conn| {
            let lock = clients[index % 2].lock("max-count");
            for _ in 0..25 {
                let guard = lock.lock().unwrap();
                increment_non_atomically(conn, "max-counter");
                guard.unlock().unwrap();
            }
        });
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("100 critical sections ended (a worker failed, or hung)");
    let count: u64 = redis::cmd("GET").arg("max-counter").query(&mut server.conn()).unwrap();
    assert_eq!(count, 100, "two holders at once lost increments");
}

fn assert_invalid<T>(result: redlease::Result<T>, what: &str) {
    match result {
        Ok(_) => panic!("{what}: accepted, expected InvalidInput"),
        Err(e) => assert_eq!(e.kind(), ErrorKind::InvalidInput, "{what}: {e}"),
    }
}

/// Sizes and durations so large that they would overflow (or allocate, or spawn) are
/// `InvalidInput` before anything happens: the builder settings before connecting (nothing
/// listens on port 1), and the lease of every lock kind before anything is sent.
///
/// Breaks if one of these is accepted (a pool of 2^40 connections, a renew batch beyond
/// what Redis takes, a lease Lua cannot hold) or fails with another kind (a connection
/// error means it was not checked first), or if anything reached Redis.
#[test]
fn sizes_and_durations_beyond_their_limits_are_invalid_input() {
    let url = "redis://127.0.0.1:1/";
    let builders = [
        ("pool_size(usize::MAX)", Client::builder(url).pool_size(usize::MAX)),
        ("pool_size(1 << 40)", Client::builder(url).pool_size(1 << 40)),
        ("renew_batch_size(usize::MAX)", Client::builder(url).renew_batch_size(usize::MAX)),
        ("watchdog_timeout(MAX)", Client::builder(url).watchdog_timeout(Duration::MAX)),
        ("fair_wait_timeout(MAX)", Client::builder(url).fair_wait_timeout(Duration::MAX)),
    ];
    for (what, builder) in builders {
        assert_invalid(builder.build(), what);
    }

    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    let rw = client.read_write_lock("max-rw");
    let kinds: [(&str, AnyLock); 5] = [
        ("lock", client.lock("max-lease").into()),
        ("fair", client.fair_lock("max-lease-fair").into()),
        ("fenced", client.fenced_lock("max-lease-fenced").into()),
        ("read", rw.read().into()),
        ("write", rw.write().into()),
    ];
    for (kind, lock) in kinds {
        assert_invalid(lock.clone().with_lease(Duration::MAX).lock(), &format!("{kind}: with_lease(MAX).lock()"));
        assert_invalid(
            lock.clone().with_lease(Duration::MAX).try_lock(),
            &format!("{kind}: with_lease(MAX).try_lock()"),
        );
    }
    assert_eq!(commands_served(&mut conn) - before, 0, "nothing was sent");
}

/// A wait whose deadline overflows the clock (`Duration::MAX`) is a wait without deadline,
/// as parking_lot's `try_lock_for` reads it: every `_for` verb of every kind grants at once
/// what is free, and a contended one waits as `lock()` does, until the release.
///
/// Breaks if one of them refuses the wait (before the fix: `InvalidInput`, "overflows the
/// clock"), or returns `None` without waiting.
#[test]
fn a_wait_whose_deadline_overflows_is_a_wait_without_deadline() {
    let server = RedisServer::start();
    let client = client(&server);
    let rw = client.read_write_lock("forever-rw");
    let kinds: [(&str, AnyLock); 8] = [
        ("lock", client.lock("forever-lock").into()),
        ("fair", client.fair_lock("forever-fair").into()),
        ("fenced", client.fenced_lock("forever-fenced").into()),
        ("non-reentrant", client.non_reentrant_lock("forever-nr").into()),
        ("non-reentrant fair", client.non_reentrant_fair_lock("forever-nrf").into()),
        ("spin", client.spin_lock("forever-spin").into()),
        ("read", rw.read().into()),
        ("write", client.read_write_lock("forever-rw-w").write().into()),
    ];
    let forever = Duration::MAX;
    let granted = |what: &str, got: redlease::Result<bool>| match got {
        Ok(true) => {}
        Ok(false) => panic!("{what}: not granted, on a free lock"),
        Err(e) => panic!("{what}: {e}"),
    };
    for (kind, lock) in &kinds {
        granted(kind, lock.try_lock_for(forever).map(|g| g.is_some()));
    }
    granted("fenced (own type)", client.fenced_lock("forever-f2").try_lock_for(forever).map(|g| g.is_some()));
    granted(
        "multi",
        MultiLock::new([client.lock("forever-m1"), client.lock("forever-m2")])
            .try_lock_for(forever)
            .map(|g| g.is_some()),
    );
    granted("group", client.group_lock("forever-group", ["a", "b"]).try_lock_for(forever).map(|g| g.is_some()));
    let semaphore = client.semaphore("forever-sem");
    assert!(semaphore.try_set_permits(1).unwrap());
    granted("semaphore", semaphore.try_acquire_for(1, forever).map(|g| g.is_some()));
    let expirable = client.permit_expirable_semaphore("forever-pes");
    assert!(expirable.try_set_permits(1).unwrap());
    granted("permit semaphore", expirable.try_acquire_for(1, forever).map(|g| g.is_some()));
    let latch = client.count_down_latch("forever-latch");
    assert!(latch.try_set_count(1).unwrap());
    latch.count_down().unwrap();
    granted("latch", latch.await_for(forever));
    granted("election", client.election("forever-election").campaign_for("v", forever).map(|l| l.is_some()));
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let node_clients: Vec<Client> = nodes.iter().map(crate::helpers::client).collect();
    granted(
        "redlock",
        RedLock::new(node_clients.iter().map(|c| c.lock("forever-red"))).try_lock_for(forever).map(|g| g.is_some()),
    );

    // Contended: the wait goes on until the holder releases, 300 ms later.
    let other = crate::helpers::client(&server);
    let held = other.lock("forever-held").lock().unwrap();
    let mut observer = client.election("forever-observed").observe().unwrap();
    let (tx, rx) = mpsc::channel();
    let lock = client.lock("forever-held");
    let campaigner = other.election("forever-observed");
    thread::spawn(move || {
        let got = lock.try_lock_for(Duration::MAX).map(|g| g.is_some()).map_err(|e| e.to_string());
        let changed = observer.wait_change_for(Duration::MAX).map_err(|e| e.to_string());
        let _ = tx.send((got, changed));
    });
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "{:?}", client.stats());
    thread::sleep(Duration::from_millis(300));
    drop(held);
    let leadership = campaigner.campaign("now").unwrap();
    let (got, changed) = rx.recv_timeout(Duration::from_secs(10)).expect("the waits ended");
    assert_eq!(got, Ok(true), "the lock, once released");
    assert_eq!(changed, Ok(true), "the leadership changed");
    drop(leadership);
}

/// One rule for `Duration::MAX` in every duration setting of the builder: a time the client
/// only waits for (connect, command, ping interval, retry budget) means "no limit", and the
/// client builds and locks; a time written into Redis in milliseconds (the watchdog
/// timeout, the fair wait timeout, the replica sync timeout's `WAIT`) is `InvalidInput`
/// naming the setting and the limit; the clock drift margin is an allowance, refused when
/// it leaves nothing of the watchdog lease.
///
/// Breaks if a setting of the first kind is refused or overflows, or one of the second is
/// accepted (before the fix: `replica_sync_timeout(MAX)` was taken, and turned into a
/// `WAIT` Redis refuses on a replicated master) or refused without saying which setting.
#[test]
fn every_duration_setting_reads_max_by_one_rule() {
    let server = RedisServer::start();
    for (what, set) in [
        ("connect_timeout", ClientBuilder::connect_timeout as fn(ClientBuilder, Duration) -> ClientBuilder),
        ("command_timeout", ClientBuilder::command_timeout),
        ("ping_interval", ClientBuilder::ping_interval),
        ("retry_budget", ClientBuilder::retry_budget),
    ] {
        let client = set(Client::builder(server.url()), Duration::MAX)
            .build()
            .unwrap_or_else(|e| panic!("{what}(MAX) is no limit, and builds: {e}"));
        let guard = client.lock(format!("max-{what}")).try_lock().unwrap().expect("free");
        guard.unlock().unwrap_or_else(|e| panic!("{what}(MAX): {e}"));
    }
    let url = "redis://127.0.0.1:1/";
    for (what, set, says) in [
        (
            "watchdog_timeout",
            ClientBuilder::watchdog_timeout as fn(ClientBuilder, Duration) -> ClientBuilder,
            "watchdog timeout",
        ),
        ("fair_wait_timeout", ClientBuilder::fair_wait_timeout, "fair wait timeout"),
        ("replica_sync_timeout", ClientBuilder::replica_sync_timeout, "replica sync timeout"),
    ] {
        let err = set(Client::builder(url), Duration::MAX).build().expect_err(what);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}(MAX): {err}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("invalid input: {says} ")) && text.contains("milliseconds"),
            "{what}(MAX): {text}"
        );
    }
    let err = Client::builder(url).clock_drift_margin(Duration::MAX).build().expect_err("margin");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("clock drift margin"), "{err}");
}

/// A Redlock's per-node timeout and retry delay of `Duration::MAX` must not overflow: the
/// node timeout is capped by each node's command timeout, and the retry pause by the
/// caller's deadline.
///
/// Breaks if either panics (an `Instant` or `Duration` overflow), or if a timed attempt
/// sleeps the unbounded retry delay instead of ending at its deadline (caught by the
/// channel's timeout).
#[test]
fn a_redlock_with_the_longest_node_timeout_and_retry_delay_works() {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let clients: Vec<Client> = nodes.iter().map(client).collect();
    let red = |name: &str| RedLock::new(clients.iter().map(|c| c.lock(name)));

    for (what, red) in [
        ("node_timeout", red("red-max").node_timeout(Duration::MAX)),
        ("retry_delay", red("red-max").retry_delay(Duration::MAX)),
    ] {
        let guard = red.try_lock().unwrap_or_else(|e| panic!("{what}(MAX): {e}")).expect("all nodes are free");
        assert!(guard.is_held() && !guard.validity().is_zero(), "{what}(MAX)");
        guard.unlock().unwrap();
    }

    // Contended on two nodes of three: every attempt fails, and the retry pause must be
    // cut to the deadline.
    let rivals: Vec<Client> = nodes.iter().map(client).collect();
    let _held: Vec<_> = rivals[..2].iter().map(|c| c.lock("red-max").lock().unwrap()).collect();
    let (tx, rx) = mpsc::channel();
    let locks: Vec<_> = clients.iter().map(|c| c.lock("red-max")).collect();
    thread::spawn(move || {
        let red = RedLock::new(locks).node_timeout(Duration::MAX).retry_delay(Duration::MAX);
        let once = red.try_lock().map(|g| g.is_some()).map_err(|e| e.to_string());
        let started = Instant::now();
        let timed = red.try_lock_for(Duration::from_millis(300)).map(|g| g.is_some()).map_err(|e| e.to_string());
        let _ = tx.send((once, timed, started.elapsed()));
    });
    let (once, timed, took) = rx.recv_timeout(Duration::from_secs(10)).expect("the contended attempts ended");
    assert_eq!(once, Ok(false), "a minority is free: no grant");
    assert_eq!(timed, Ok(false), "a minority is free: no grant");
    assert!(took < Duration::from_millis(300) + SLACK * 2, "a 300 ms wait took {took:?}");
}

// -----------------------------------------------------------------------------------------
// 5. Reentrant holds with different leases
// -----------------------------------------------------------------------------------------

/// Every reentrant lock kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Lock,
    Fair,
    Fenced,
    Read,
    Write,
}

const KINDS: [Kind; 5] = [Kind::Lock, Kind::Fair, Kind::Fenced, Kind::Read, Kind::Write];

/// The watchdog timeout of the clients in this section (renewal every 200 ms).
const MIXED_WATCHDOG: Duration = Duration::from_millis(600);

fn handle(client: &Client, kind: Kind, name: &str) -> AnyLock {
    match kind {
        Kind::Lock => client.lock(name).into(),
        Kind::Fair => client.fair_lock(name).into(),
        Kind::Fenced => client.fenced_lock(name).into(),
        Kind::Read => client.read_write_lock(name).read().into(),
        Kind::Write => client.read_write_lock(name).write().into(),
    }
}

/// What another client tries, to show that `kind` is held: the same kind, but the write side
/// for a read lock (readers share).
fn rival(client: &Client, kind: Kind, name: &str) -> AnyLock {
    handle(client, if kind == Kind::Read { Kind::Write } else { kind }, name)
}

/// Runs `case` for every kind, each on its own thread (ownership is per thread, and the
/// kinds use different lock names), and fails naming every kind whose case failed.
fn for_every_kind(case: impl Fn(Kind) + Sync) {
    let case = &case;
    let failures: Vec<String> = thread::scope(|scope| {
        let running: Vec<_> = KINDS.iter().map(|&kind| (kind, scope.spawn(move || case(kind)))).collect();
        running
            .into_iter()
            .filter_map(|(kind, thread)| thread.join().err().map(|p| format!("{kind:?}: {}", panic_text(&*p))))
            .collect()
    });
    assert!(failures.is_empty(), "failed for {} of {} kinds:\n{}", failures.len(), KINDS.len(), failures.join("\n"));
}

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

/// (c) An outer 3 s hold and an inner 200 ms hold; the outer one is released first. The
/// inner hold remains: it must still read held, and the key must live as long as it needs,
/// no longer.
///
/// Breaks if releasing the outer hold ends the whole lease (the release drops the wrong
/// hold's end, marks the lease released, or sets an expiry of zero, deleting the key), or
/// keeps the released hold's 3 s (a read release that deleted the inner hold's key and kept
/// the outer one's did).
#[test]
fn releasing_the_longer_fixed_hold_first_leaves_the_shorter_one_held() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(MIXED_WATCHDOG));
    for_every_kind(|kind| {
        let name = format!("mixed-c-{kind:?}");
        let mut conn = server.conn();
        let outer = handle(&client, kind, &name).with_lease(Duration::from_secs(3)).lock().unwrap();
        let inner = handle(&client, kind, &name).with_lease(Duration::from_millis(200)).lock().unwrap();
        outer.unlock().unwrap();
        assert!(inner.is_held(), "the inner hold still reads held");
        let left = pttl(&mut conn, &name);
        assert!(left > 0, "PTTL {left} right after releasing the outer hold");
        // Neither shorter nor longer than the remaining hold needs: a lock kept for the
        // released hold's 3 s would shut others out for nothing.
        assert!(left <= 200, "{kind:?}: PTTL {left} ms, more than the 200 ms the remaining hold needs");
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

// -----------------------------------------------------------------------------------------
// 6. User code on a library thread, and unbounded waits
// -----------------------------------------------------------------------------------------

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

fn panicking_client(server: &RedisServer, hooks: &Arc<Panicking>, watchdog: Duration) -> Client {
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
/// on: reconnect, resubscribe, and the waiter must get the lock soon after its release
/// (whose message was lost while disconnected).
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
    let (tx, rx) = mpsc::channel();
    let lock = waiter.lock("hooked-wait");
    thread::spawn(move || {
        let outcome = lock.try_lock_for(Duration::from_secs(25)).map(|g| g.is_some()).map_err(|e| e.to_string());
        let _ = tx.send((outcome, Instant::now()));
    });
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
    assert!(
        wait_until(Duration::from_secs(2), || hooks.reconnected.load(Ordering::SeqCst) >= 1),
        "the reconnected hook was called (and panicked)"
    );
}

// -----------------------------------------------------------------------------------------
// 7. Validation at the edge
// -----------------------------------------------------------------------------------------

/// A multi-lock whose last member is invalid (an empty name; a zero lease) must be refused
/// as a whole before its first member is taken: `InvalidInput`, and no command at all
/// reaches Redis.
///
/// Breaks if the members before the bad one are acquired (and released) before the bad one
/// is checked: commands then reach Redis.
#[test]
fn a_multi_lock_with_one_invalid_member_sends_nothing() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    let cases = [
        ("an empty name", MultiLock::new([client.lock("m1"), client.lock("m2"), client.lock("")])),
        (
            "a zero lease",
            MultiLock::new([client.lock("m1"), client.lock("m2"), client.lock("m3").with_lease(Duration::ZERO)]),
        ),
    ];
    for (what, multi) in cases {
        assert_invalid(multi.try_lock(), &format!("{what}: try_lock"));
        assert_invalid(multi.try_lock_for(Duration::from_millis(100)), &format!("{what}: try_lock_for"));
        assert_invalid(multi.lock(), &format!("{what}: lock"));
    }
    assert_eq!(commands_served(&mut conn) - before, 0, "nothing was sent");
}

/// A Redlock with one node's lock name empty is refused before any node is asked.
///
/// Breaks if the valid nodes are asked (and then released) before the bad one is checked.
#[test]
fn a_redlock_with_one_empty_node_name_sends_nothing_to_any_node() {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let clients: Vec<Client> = nodes.iter().map(client).collect();
    let mut conns: Vec<redis::Connection> = nodes.iter().map(RedisServer::conn).collect();
    let before: Vec<u64> = conns.iter_mut().map(commands_served).collect();
    let red = RedLock::new([clients[0].lock("r"), clients[1].lock("r"), clients[2].lock("")]);
    assert_invalid(red.try_lock(), "try_lock");
    assert_invalid(red.try_lock_for(Duration::from_millis(100)), "try_lock_for");
    assert_invalid(red.lock(), "lock");
    let after: Vec<u64> = conns.iter_mut().map(commands_served).collect();
    assert_eq!(after, before, "nothing was sent to any node");
}

/// A malformed URL is `InvalidInput` that says what is wrong with it, and never shows its
/// password.
///
/// Breaks if the error is the bare "invalid client config" of the redis crate, another kind,
/// or shows the password, or does not say which part is wrong (before the fix: a port out
/// of range, one that is not a number and a foreign scheme all said "did not parse").
#[test]
fn a_malformed_url_says_what_is_wrong_and_hides_its_password() {
    for (url, says) in [
        ("redis://:s3cret@127.0.0.1:notaport/", "the port notaport is not a number"),
        ("redis://:s3cret@127.0.0.1:99999/", "the port 99999 is out of range: at most 65535"),
        ("redis://:s3cret@127.0.0.1/abc", "Invalid database number"),
        ("http://:s3cret@127.0.0.1/", "the scheme http:// is not one of redis://, rediss://"),
        ("redis-cluster://:s3cret@127.0.0.1:99999", "the port 99999 is out of range: at most 65535"),
    ] {
        let err = Client::open(url).expect_err(url);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        let text = err.to_string();
        assert!(text.contains(says), "{url}: {text}");
        assert!(!text.contains("s3cret"), "{url}: {text}");
    }
}

// -----------------------------------------------------------------------------------------
// 8. Work left behind by a call that returned: a late undo, a command sent twice
// -----------------------------------------------------------------------------------------

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

// -----------------------------------------------------------------------------------------
// 9. A transient server state taken for a fatal one
// -----------------------------------------------------------------------------------------

/// Runs, on a thread of its own, a script that keeps `server` busy for `spin` by its own
/// clock (every other client meanwhile gets `BUSY` once `busy-reply-threshold` passes).
fn spin_a_script(server: &RedisServer, spin: Duration) -> thread::JoinHandle<i64> {
    let url = server.url();
    let micros = spin.as_micros();
    thread::spawn(move || {
        let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
        let script = "local t = redis.call('TIME') local until_ = t[1] * 1000000 + t[2] + tonumber(ARGV[1]) \
                      repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= until_ return 1";
        redis::cmd("EVAL").arg(script).arg(0).arg(micros.to_string()).query::<i64>(&mut conn).expect("the spin ends")
    })
}

/// Redis busy with another client's long script answers every other command `BUSY` until
/// it ends (`busy-reply-threshold` passed): a state that passes by itself, in which nothing
/// ran. An acquire, an unlock, a semaphore's acquire (a command that must not run twice)
/// and a query each meet it, and each rides it out within the retry budget: no error, and
/// the lock and the permit are had once the script is done. An error met in such a state
/// says so (`is_transient`).
///
/// Breaks if a transient refusal is returned as a plain `Redis` error (every call below
/// failed with "BUSY Redis is busy running a script" before), if a command that must not
/// run twice is not tried again after a refusal that ran nothing, or if `is_transient`
/// does not tell it.
#[test]
fn calls_ride_out_a_busy_script_and_the_error_says_it_is_transient() {
    let server = RedisServer::start();
    // Redis 7's name for it; Redis 6 calls it `lua-time-limit`.
    let mut conn = server.conn();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("busy-reply-threshold")
        .arg(50)
        .query::<()>(&mut conn)
        .or_else(|_| redis::cmd("CONFIG").arg("SET").arg("lua-time-limit").arg(50).query::<()>(&mut conn))
        .unwrap();
    let client = client_at(&server.url(), |b| b.retry_budget(Duration::from_secs(5)));
    let semaphore = client.semaphore("busy-sem");
    assert!(semaphore.try_set_permits(1).expect("set"));
    let lock = client.lock("busy");
    let guard = lock.try_lock().expect("free").expect("granted");
    // Another client's script spins for 1.5 s (by the server's clock).
    let busy = spin_a_script(&server, Duration::from_millis(1500));
    thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    guard.unlock().expect("the unlock rides out BUSY");
    let regranted = lock.try_lock().expect("the acquire rides out BUSY");
    assert!(regranted.is_some(), "free again");
    let permit = semaphore.try_acquire(1).expect("the semaphore rides out BUSY").expect("the permit is free");
    assert_eq!(semaphore.available_permits().expect("a query rides it out"), 0, "taken once, not twice");
    drop(permit);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5) + SLACK, "within the retry budget: {took:?}");
    assert_eq!(busy.join().expect("spin"), 1);
    drop(regranted);
    // Past the budget the error is returned, and says it is transient.
    let impatient = client_at(&server.url(), |b| b.retry_budget(Duration::from_millis(100)));
    let busy = spin_a_script(&server, Duration::from_secs(1));
    thread::sleep(Duration::from_millis(200));
    let err = impatient.lock("busy-2").try_lock().expect_err("busy past the budget");
    assert!(err.is_transient(), "{err}");
    assert!(!err.is_invalid_input() && !err.is_permission_denied(), "{err}");
    busy.join().expect("spin");
}
