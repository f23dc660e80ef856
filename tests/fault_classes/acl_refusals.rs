//! Fault class 1: a partial effect reported as a failure, and a server refusal swallowed (ACL).

use std::time::{Duration, Instant};

use redlease::AnyLock;

use super::{client_at, fields_of, hgetall};
use crate::helpers::*;
use crate::support::server::RedisServer;

/// `redis://user:password@127.0.0.1:PORT/`.
fn url_as(server: &RedisServer, user: &str, password: &str) -> String {
    format!("redis://{user}:{password}@127.0.0.1:{}/", server.port())
}

/// `ACL SETUSER name rules...`.
fn acl_setuser(conn: &mut redis::Connection, name: &str, rules: &[&str]) {
    redis::cmd("ACL").arg("SETUSER").arg(name).arg(rules).query::<()>(conn).expect("ACL SETUSER");
}

fn dbsize(conn: &mut redis::Connection) -> u64 {
    redis::cmd("DBSIZE").query(conn).expect("DBSIZE")
}

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
