//! ACL users: the smallest rule of `docs/deployment.md`, read from that file, runs the whole
//! lock family; each part taken away from it gives `PermissionDenied` naming what is
//! missing, and leaves nothing half done.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use redlease::{AnyLock, Client, MultiLock, RedLock};

use crate::helpers::*;
use crate::support::server::RedisServer;

const USER: &str = "locker";
const PASSWORD: &str = "locker-secret";

/// The arguments of the `ACL SETUSER` command in the fenced block of
/// `docs/deployment.md`, "The smallest rule" (without `ACL SETUSER` itself).
fn documented_rule() -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/deployment.md"))
        .expect("docs/deployment.md");
    let section = doc.split("### The smallest rule").nth(1).expect("the section of the smallest rule");
    let block = section.split("```text").nth(1).and_then(|b| b.split("```").next()).expect("its fenced block");
    let words: Vec<String> = block.split_whitespace().map(str::to_owned).collect();
    assert_eq!(&words[..3], ["ACL", "SETUSER", USER], "the block sets up the user {USER}");
    words[2..].to_vec()
}

/// A server with the user made by `rule` (the documented one, or a variant of it).
fn server_with(rule: &[String]) -> RedisServer {
    let server = RedisServer::start();
    redis::cmd("ACL").arg("SETUSER").arg(rule).query::<()>(&mut server.conn()).expect("ACL SETUSER");
    server
}

fn url(server: &RedisServer) -> String {
    format!("redis://{USER}:{PASSWORD}@127.0.0.1:{}/", server.port())
}

fn locker(server: &RedisServer) -> Client {
    Client::builder(url(server))
        .command_timeout(Duration::from_secs(2))
        .watchdog_timeout(Duration::from_millis(300))
        .build()
        .expect("the documented rule is enough to build a client")
}

/// The rule without one of its words.
fn without(rule: &[String], word: &str) -> Vec<String> {
    assert!(rule.iter().any(|w| w == word), "{word} is part of the documented rule");
    rule.iter().filter(|w| *w != word).cloned().collect()
}

/// Runs `body` on a thread and waits at most 10 s for it, so that a hang fails the test.
fn within_10s<T: Send + 'static>(body: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(body());
    });
    rx.recv_timeout(Duration::from_secs(10)).expect("finished within 10 s")
}

/// Holds `lock` on another thread until told, so that this thread has to wait (through
/// pub/sub) for it.
fn hold_then_release(lock: AnyLock, hold: Duration) -> thread::JoinHandle<()> {
    let (held_tx, held_rx) = mpsc::channel();
    let holder = thread::spawn(move || {
        let guard = lock.lock().expect("the holder acquires");
        held_tx.send(()).expect("tell");
        thread::sleep(hold);
        guard.unlock().expect("the holder releases");
    });
    held_rx.recv_timeout(Duration::from_secs(5)).expect("held");
    holder
}

/// Every lock kind, contended (so waiters subscribe and releases publish), renewed by the
/// watchdog, queried and forced open, as a user with exactly the documented rule.
///
/// Breaks if the rule misses anything the library uses (the operation that needs it fails
/// with `PermissionDenied`), or if the document's block is not the rule the test runs.
#[test]
fn the_documented_smallest_rule_runs_the_whole_lock_family() {
    let rule = documented_rule();
    let server = server_with(&rule);
    let client = locker(&server);
    let mut conn = server.conn();
    run_every_lock_kind(&client);
    run_the_semaphores_and_the_latch(&client);
    run_a_downgrade_a_multi_lock_and_a_fixed_lease(&client);
    let left: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).expect("KEYS");
    // The client's announcement expires a lease after its last refresh: it has an expiry of
    // one lease at most, or (a slow machine, over 300 ms since the client last held
    // anything) it is gone already.
    let announcement = announcement_key(client.id());
    let ttl = pttl(&mut conn, &announcement);
    assert!(ttl == -2 || (ttl > 0 && ttl <= 300), "the announcement expires: PTTL {ttl}");
    let mut left: Vec<String> = left.into_iter().filter(|k| *k != announcement).collect();
    left.sort();
    assert_eq!(
        left,
        ["app:slots", "app:workers", "redisson_lock_token:{app:fenced}"],
        "only the semaphores' counts and the fenced lock's counter, which never expire"
    );
}

/// Every lock kind, contended (so waiters subscribe and releases publish), renewed by the
/// watchdog, queried and forced open.
fn run_every_lock_kind(client: &Client) {
    let kinds: Vec<(&str, AnyLock)> = vec![
        ("plain", client.lock("app:plain").into()),
        ("fair", client.fair_lock("app:fair").into()),
        ("read", client.read_write_lock("app:rw").read().into()),
        ("write", client.read_write_lock("app:rw").write().into()),
        ("fenced", client.fenced_lock("app:fenced").into()),
    ];
    for (what, lock) in kinds {
        let holder = hold_then_release(lock.clone(), Duration::from_millis(700));
        if what != "read" {
            // Read holds share: only the exclusive kinds make this thread wait.
            assert!(lock.try_lock().unwrap_or_else(|e| panic!("{what}: {e}")).is_none(), "{what}: held elsewhere");
        }
        let waiter = lock.clone();
        let guard = within_10s(move || waiter.lock().map(|g| g.is_held()));
        assert_eq!(guard.map_err(|e| e.to_string()), Ok(true), "{what}: the waiter gets the lock");
        holder.join().expect("holder");
        // Renewed past several watchdog leases (300 ms), then queried and released.
        let guard = lock.lock().unwrap_or_else(|e| panic!("{what}: {e}"));
        thread::sleep(Duration::from_millis(900));
        assert!(guard.is_held(), "{what}: renewed");
        assert!(lock.is_locked().unwrap_or_else(|e| panic!("{what}: {e}")), "{what}");
        assert_eq!(lock.hold_count().unwrap_or_else(|e| panic!("{what}: {e}")), 1, "{what}");
        assert!(lock.remaining_ttl().unwrap_or_else(|e| panic!("{what}: {e}")).is_some(), "{what}");
        guard.unlock().unwrap_or_else(|e| panic!("{what}: {e}"));
        // Forced open while held elsewhere.
        let _holder = lock.lock().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(lock.force_unlock().unwrap_or_else(|e| panic!("{what}: {e}")), "{what}: forced open");
    }
}

/// The semaphores and the latch, contended.
fn run_the_semaphores_and_the_latch(client: &Client) {
    let slots = client.semaphore("app:slots");
    assert!(slots.try_set_permits(1).expect("set permits"));
    let taken = slots.acquire(1).expect("a permit");
    let waiter = {
        let slots = slots.clone();
        thread::spawn(move || slots.try_acquire_for(1, Duration::from_secs(5)).map(|p| p.map(|p| p.release().is_ok())))
    };
    thread::sleep(Duration::from_millis(200));
    taken.release().expect("given back");
    assert_eq!(waiter.join().expect("waiter").map_err(|e| e.to_string()), Ok(Some(true)), "the waiter was woken");
    let workers = client.permit_expirable_semaphore("app:workers");
    assert!(workers.try_set_permits(1).expect("set permits"));
    let permit = workers.acquire(1).expect("an expirable permit");
    thread::sleep(Duration::from_millis(700));
    assert!(permit.is_held(), "renewed");
    permit.release().expect("given back");
    let latch = client.count_down_latch("app:latch");
    assert!(latch.try_set_count(1).expect("set count"));
    let opener = {
        let latch = latch.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            latch.count_down()
        })
    };
    assert!(latch.await_for(Duration::from_secs(5)).expect("await"), "opened");
    assert_eq!(opener.join().expect("opener").expect("count down"), 0);
}

/// A downgrade, a multi-lock, a fixed lease.
fn run_a_downgrade_a_multi_lock_and_a_fixed_lease(client: &Client) {
    let rw = client.read_write_lock("app:down");
    let write = rw.write().lock().expect("write");
    let read = rw.read().with_lease(Duration::from_secs(5)).lock().expect("downgrade");
    write.unlock().expect("write release leaves the read hold");
    read.unlock().expect("read release");
    let both = MultiLock::new([AnyLock::from(client.lock("app:m1")), client.fair_lock("app:m2").into()]);
    both.lock().expect("multi-lock").unlock().expect("multi-lock release");
}

/// Redlock over three servers, each with the documented rule.
///
/// Breaks if a node refuses something the Redlock path needs.
#[test]
fn the_documented_smallest_rule_runs_a_redlock() {
    let rule = documented_rule();
    let servers: Vec<RedisServer> = (0..3).map(|_| server_with(&rule)).collect();
    let clients: Vec<Client> = servers.iter().map(locker).collect();
    let red = RedLock::new(clients.iter().map(|c| c.lock("app:red")));
    let guard = red.lock().expect("a Redlock under the documented rule");
    assert!(guard.is_held());
    guard.unlock().expect("released on every node");
}

/// Each missing part gives `PermissionDenied` naming what is missing, where it is needed.
///
/// Breaks if a refusal comes back as another kind, does not name what was refused, or left
/// a half-done change behind (a lock released without its message, a read hold without its
/// key).
#[test]
fn each_missing_part_of_the_rule_is_named_where_it_is_needed() {
    let rule = documented_rule();

    // A command the scripts run: refused at build() (the probe key is granted).
    let server = server_with(&without(&rule, "+hgetall"));
    let err = Client::builder(url(&server)).build().expect_err("build() checks the commands");
    assert!(err.is_permission_denied(), "{err}");
    assert!(err.to_string().contains("hgetall"), "names the command: {err}");
    assert!(!err.to_string().contains(PASSWORD), "never the password: {err}");

    // The read-write lock's channel: its release is refused and the lock left as it was.
    let server = server_with(&without(&rule, "&redisson_rwlock:{app:*"));
    let client = locker(&server);
    let guard = client.read_write_lock("app:rw").write().lock().expect("an uncontended acquire publishes nothing");
    let err = guard.unlock().expect_err("the release must publish");
    assert!(err.is_permission_denied(), "{err}");
    assert!(err.to_string().contains("redisson_rwlock:{app:rw}"), "names the channel: {err}");
    assert!(exists(&mut server.conn(), "app:rw"), "the lock is left as it was");

    // The per-hold read keys: a read hold is refused before anything is written.
    let server = server_with(&without(&rule, "~{app:*}:*:rwlock_timeout:*"));
    let client = locker(&server);
    let err = client.read_write_lock("app:r").read().lock().expect_err("the hold key is not granted");
    assert!(err.is_permission_denied(), "{err}");
    assert!(err.to_string().contains("rwlock_timeout"), "names the key: {err}");
    assert!(!exists(&mut server.conn(), "app:r"), "nothing written");

    // SUBSCRIBE: a waiter is refused at once, naming the command.
    let server = server_with(&without(&rule, "+subscribe"));
    let client = locker(&server);
    let holder = hold_then_release(client.lock("app:w").into(), Duration::from_secs(3));
    let waiter = client.lock("app:w");
    let err = within_10s(move || waiter.try_lock_for(Duration::from_secs(5)).map(|g| g.is_some()))
        .expect_err("the waiter cannot subscribe");
    assert!(err.is_permission_denied(), "{err}");
    assert!(err.to_string().contains("subscribe"), "names the command: {err}");
    holder.join().expect("holder");
}

/// `PUBSUB NUMSUB` is optional: without it a release cannot tell whether only redlease
/// clients listen on the lock's channel, and publishes there as if someone else did. The
/// release still succeeds and the waiter is woken by it.
///
/// Breaks if a release runs the count as a command that must succeed (the refusal would
/// fail the release and leave the lock held until its lease ran out).
#[test]
fn a_rule_without_pubsub_numsub_still_releases_and_wakes_by_message() {
    let server = server_with(&without(&documented_rule(), "+pubsub|numsub"));
    let client = locker(&server);
    let holder = client.lock("app:n");
    let guard = holder.lock().expect("the holder acquires");
    let waiter = client.lock("app:n");
    let waiting = thread::spawn(move || {
        let got = waiter.try_lock_for(Duration::from_secs(20)).expect("no error");
        got.map(|g| (std::time::Instant::now(), g.unlock().is_ok()))
    });
    let mut conn = server.conn();
    assert!(wait_until(Duration::from_secs(5), || {
        redis::cmd("ZCARD").arg("redlease_waiters:{app:n}").query::<u64>(&mut conn).unwrap() == 1
    }));
    thread::sleep(Duration::from_millis(100));
    let released = std::time::Instant::now();
    guard.unlock().expect("the release does not need the count");
    let (at, unlocked) = waiting.join().unwrap().expect("the waiter got the lock");
    assert!(unlocked);
    let waited = at - released;
    assert!(waited < Duration::from_secs(2), "woken by the release, not the 5 s re-check: {waited:?}");
}

/// With the documented rule, a client announces itself and inspects and lists what it
/// holds; without the announcement's key pattern it still locks and releases as ever
/// (the refused announcement costs nothing and leaves nothing), and shows as unknown.
///
/// Breaks if the announcement is not covered by the rule, or if its refusal fails a lock
/// operation or leaves a key behind.
#[test]
fn the_announcement_is_optional_in_the_rule() {
    let rule = documented_rule();
    let server = server_with(&rule);
    let client = locker(&server);
    let guard = client.lock("app:seen").lock().unwrap();
    let mut conn = server.conn();
    let key = announcement_key(client.id());
    assert!(wait_until(Duration::from_secs(2), || exists(&mut conn, &key)), "announced under the rule");
    let info = client.inspect("app:seen").unwrap();
    assert_eq!(info.holders[0].client.as_ref().map(|c| c.pid), Some(std::process::id()));
    assert_eq!(client.locks("app:*").unwrap().len(), 1);
    guard.unlock().unwrap();

    let server = server_with(&without(&rule, "~redlease_client:*"));
    let client = locker(&server);
    let mut conn = server.conn();
    for _ in 0..3 {
        let guard = client.lock("app:unseen").lock().unwrap();
        // Long enough for the watchdog (300 ms) to renew, and the announcement to be retried.
        thread::sleep(Duration::from_millis(400));
        assert!(client.inspect("app:unseen").unwrap().holders[0].client.is_none(), "unknown");
        guard.unlock().unwrap();
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("redlease_client:*").query(&mut conn).unwrap();
    assert!(keys.is_empty(), "nothing written: {keys:?}");
    let stats = client.stats();
    assert_eq!((stats.renewals_failed, stats.leases_lost, stats.failed), (0, 0, 0), "{stats:?}");
}
