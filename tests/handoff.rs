//! Waiting: pub/sub wake-ups across processes, lost messages, shared subscriptions, and an
//! idle client that stays quiet.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] = &[("handoff_waiter", waiter)];

/// Says "waiting", blocks in `lock()` on LOCK, says "acquired", releases.
fn waiter() {
    let client = redlease::Client::open(&child::env("REDIS_URL")).unwrap();
    let lock = client.lock(child::env("LOCK"));
    child::say("waiting");
    let guard = lock.lock().unwrap();
    child::say("acquired");
    guard.unlock().unwrap();
}

#[test]
fn a_waiter_in_another_process_acquires_promptly_after_release() {
    let server = RedisServer::start();
    let client = client(&server);
    let guard = client.lock("handoff").lock().unwrap();
    let child = Child::spawn("handoff_waiter", &[("REDIS_URL", server.url()), ("LOCK", "handoff".into())]);
    child.wait_line("waiting", Duration::from_secs(10));
    let mut conn = server.conn();
    assert!(wait_until(Duration::from_secs(5), || subscribers(&mut conn, "redisson_lock__channel:{handoff}") == 1));
    thread::sleep(Duration::from_millis(100));
    assert!(!child.lines().iter().any(|l| l == "acquired"), "not before the release");
    let released = Instant::now();
    guard.unlock().unwrap();
    child.wait_line("acquired", Duration::from_secs(10));
    let took = released.elapsed();
    assert!(took < Duration::from_secs(1), "hand-off took {took:?} (the lease was 30 s)");
}

#[test]
fn a_killed_pubsub_connection_does_not_strand_a_waiter() {
    let server = RedisServer::start();
    let holder = client(&server);
    let guard = holder.lock("pubsub-killed").lock().unwrap();
    let waiter = client(&server);
    let lock = waiter.lock("pubsub-killed");
    let waiting = thread::spawn(move || lock.try_lock_for(Duration::from_secs(25)).unwrap().is_some());
    let mut conn = server.conn();
    let channel = "redisson_lock__channel:{pubsub-killed}";
    assert!(wait_until(Duration::from_secs(5), || subscribers(&mut conn, channel) == 1));
    let killed: u64 = redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query(&mut conn).unwrap();
    assert_eq!(killed, 1);
    // Released while the subscriber is disconnected: this message is lost.
    let released = Instant::now();
    guard.unlock().unwrap();
    assert!(waiting.join().unwrap());
    let took = released.elapsed();
    assert!(took < Duration::from_secs(5), "woken by the resubscription, not the 30 s TTL: {took:?}");
}

#[test]
fn a_raw_del_without_message_is_noticed_within_the_holders_ttl() {
    let server = RedisServer::start();
    let holder = client_with(&server, |b| b.watchdog_timeout(Duration::from_millis(1500)));
    let _guard = holder.lock("deleted").lock().unwrap();
    let waiter = client(&server);
    let lock = waiter.lock("deleted");
    let waiting = thread::spawn(move || lock.try_lock_for(Duration::from_secs(20)).unwrap().is_some());
    assert!(wait_until(Duration::from_secs(5), || waiter.stats().waiters == 1));
    thread::sleep(Duration::from_millis(50));
    redis::cmd("DEL").arg("deleted").query::<()>(&mut server.conn()).unwrap();
    let deleted = Instant::now();
    assert!(waiting.join().unwrap());
    let took = deleted.elapsed();
    assert!(took < Duration::from_millis(1500) + Duration::from_millis(1000), "took {took:?}");
}

#[test]
fn a_hundred_threads_on_ten_locks_share_one_subscription_per_lock() {
    let server = RedisServer::start();
    let holder = client(&server);
    let names: Vec<String> = (0..10).map(|i| format!("crowd-{i}")).collect();
    let guards: Vec<_> = names.iter().map(|n| holder.lock(n.as_str()).lock().unwrap()).collect();
    let waiters = client_with(&server, |b| b.pool_size(16));
    let start = Arc::new(Barrier::new(100));
    let threads: Vec<_> = (0..100)
        .map(|i| {
            let lock = waiters.lock(names[i % 10].as_str());
            let counter = format!("count:{}", names[i % 10]);
            let mut conn = server.conn();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                let guard = lock.try_lock_for(Duration::from_secs(60)).unwrap().expect("every thread gets its lock");
                increment_non_atomically(&mut conn, &counter);
                guard.unlock().unwrap();
            })
        })
        .collect();
    assert!(wait_until(Duration::from_secs(20), || waiters.stats().waiters == 100), "{:?}", waiters.stats());
    let mut conn = server.conn();
    for name in &names {
        assert_eq!(subscribers(&mut conn, &format!("redisson_lock__channel:{{{name}}}")), 1, "{name}");
    }
    assert_eq!(waiters.stats().channels, 10);
    drop(guards);
    for t in threads {
        t.join().unwrap();
    }
    for name in &names {
        let count: u64 = redis::cmd("GET").arg(format!("count:{name}")).query(&mut conn).unwrap();
        assert_eq!(count, 10, "{name}");
    }
    // The last waiter's UNSUBSCRIBE is confirmed asynchronously.
    let clean = || {
        let s = waiters.stats();
        (s.waiters, s.channels, s.leases) == (0, 0, 0)
    };
    assert!(wait_until(Duration::from_secs(2), clean), "{:?}", waiters.stats());
    assert!(wait_until(Duration::from_secs(2), || {
        names.iter().all(|n| subscribers(&mut conn, &format!("redisson_lock__channel:{{{n}}}")) == 0)
    }));
}

#[test]
fn an_idle_client_sends_nothing_and_holds_no_subscription() {
    let server = RedisServer::start();
    let other = client(&server);
    let client = client_with(&server, |b| b.watchdog_timeout(Duration::from_millis(300)));
    let lock = client.lock("idle");
    // Use everything once: a renewed lease, a contended wait, a release.
    let guard = other.lock("idle").lock().unwrap();
    let waiting = {
        let lock = lock.clone();
        thread::spawn(move || lock.try_lock_for(Duration::from_secs(10)).unwrap().map(|g| g.unlock()).is_some())
    };
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1));
    drop(guard);
    assert!(waiting.join().unwrap());
    let held = lock.lock().unwrap();
    thread::sleep(Duration::from_millis(400)); // at least one renewal
    drop(held);
    let mut conn = server.conn();
    assert!(wait_until(Duration::from_secs(5), || subscribers(&mut conn, "redisson_lock__channel:{idle}") == 0));
    assert!(wait_until(Duration::from_secs(5), || client.stats().channels == 0));
    let before = commands_served(&mut conn);
    thread::sleep(Duration::from_secs(2));
    let after = commands_served(&mut conn);
    assert_eq!(after - before, 0, "an idle client sent commands");
    let stats = client.stats();
    assert_eq!((stats.leases, stats.renewals_scheduled, stats.waiters, stats.channels), (0, 0, 0, 0), "{stats:?}");
    assert!(stats.renewal_passes >= 1 && stats.leases_renewed >= 1, "the lease was renewed: {stats:?}");
}

/// The members of a lock's sorted set of waiting redlease clients (their wake tokens), by
/// registration.
/// The server's role and the end of its log: what a failure shows when something other
/// than the test may have acted on the server.
fn server_state(server: &RedisServer) -> String {
    let role = redis::cmd("ROLE").query::<redis::Value>(&mut server.conn());
    let log = server.log();
    let tail: Vec<&str> = log.lines().rev().take(15).collect();
    format!("role {role:?}; its log ends:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
}

fn waiting_clients(conn: &mut redis::Connection, lock: &str) -> Vec<String> {
    redis::cmd("ZRANGE").arg(format!("redlease_waiters:{{{lock}}}")).arg(0).arg(-1).query(conn).unwrap()
}

/// A thread that waits up to 20 s for `lock` with `waiter` (a client standing for a
/// process), releases it once it has it, and says whether it got it and released it
/// cleanly, and when it got it.
fn wait_in_thread(waiter: redlease::Client, lock: &'static str) -> thread::JoinHandle<(Option<bool>, Instant)> {
    thread::spawn(move || {
        let got = waiter.lock(lock).try_lock_for(Duration::from_secs(20)).unwrap();
        let at = Instant::now();
        (got.map(|g| g.unlock().is_ok()), at)
    })
}

/// Four processes each park a waiter on one lock; the lock is released, and each waiter,
/// once it has it, releases it to the next. Every release names one waiting client, so
/// each hand-off costs the winner's acquire and its release: 8 scripts for the 4 hand-offs
/// (slack: 10), where waking one waiter in every process would cost a failed attempt in
/// each of the others too (6 more: 14).
///
/// Breaks if a release wakes a waiter in every process (the herd), or if a named client's
/// waiter is not woken (the hand-offs would then wait for the 5 s re-check).
#[test]
fn a_release_wakes_one_waiting_process_not_one_in_each() {
    let server = RedisServer::start();
    let holder = client(&server);
    let guard = holder.lock("herd").lock().unwrap();
    let env = [("REDIS_URL", server.url()), ("LOCK", "herd".to_string())];
    let children: Vec<Child> = (0..4).map(|_| Child::spawn("handoff_waiter", &env)).collect();
    let mut conn = server.conn();
    for child in &children {
        child.wait_line("waiting", Duration::from_secs(10));
    }
    assert!(
        wait_until(Duration::from_secs(10), || waiting_clients(&mut conn, "herd").len() == 4),
        "every process registered its client: {:?}",
        waiting_clients(&mut conn, "herd")
    );
    thread::sleep(Duration::from_millis(200));
    let before = calls_of(&mut conn, "evalsha");
    let released = Instant::now();
    guard.unlock().unwrap();
    for child in &children {
        child.wait_line("acquired", Duration::from_secs(20));
    }
    let took = released.elapsed();
    // The main thread's release is counted too.
    let scripts = calls_of(&mut conn, "evalsha") - before - 1;
    assert!(scripts <= 10, "{scripts} scripts for 4 hand-offs (a herd costs 14 or more)");
    assert!(took < Duration::from_secs(3), "every hand-off by a message, not the 5 s re-check: {took:?}");
    assert!(waiting_clients(&mut conn, "herd").is_empty(), "nothing left registered");
}

/// A waiter that gives up takes its client's registration back; and when a release had
/// already named its client (its token gone while the lock is free), it passes the
/// wake-up on to the next registered client, whose waiter gets the lock at once instead of
/// at its 5 s re-check.
///
/// The first part runs the library's leave: a waiter times out while the lock is held,
/// and its client is no longer registered afterwards. The race itself (a release naming a
/// client between its waiter's last attempt and its leaving) cannot be timed from outside,
/// so the second part makes its state by hand (the token removed as a release removes it,
/// the lock deleted without a message) and runs the leave script as the library sends it.
///
/// Breaks if a waiter that leaves stays registered (releases would keep naming a client
/// with nobody waiting), or if a wake-up spent on it is not passed on (the other waiter
/// sleeps through a free lock until its re-check).
#[test]
fn a_waiter_that_leaves_unregisters_and_passes_a_spent_wake_up_on() {
    let server = RedisServer::start();
    let holder = client(&server);
    let guard = holder.lock("passed").lock().unwrap();
    let (leaving, staying) = (client(&server), client(&server));
    let mut conn = server.conn();
    let first =
        thread::spawn(move || leaving.lock("passed").try_lock_for(Duration::from_millis(800)).unwrap().is_none());
    assert!(wait_until(Duration::from_secs(5), || waiting_clients(&mut conn, "passed").len() == 1));
    let first_token = waiting_clients(&mut conn, "passed")[0].clone();
    let second = thread::spawn(move || {
        let got = staying.lock("passed").try_lock_for(Duration::from_secs(20)).unwrap();
        (got.is_some(), Instant::now())
    });
    assert!(wait_until(Duration::from_secs(5), || waiting_clients(&mut conn, "passed").len() == 2));
    assert!(
        first.join().unwrap(),
        "the first waiter gave up while the lock was held; the holder's lease {:?}; the server: {}",
        guard.watch().state(),
        server_state(&server)
    );
    let left = waiting_clients(&mut conn, "passed");
    assert_eq!(left.len(), 1, "the first client took its registration back: {left:?}");
    assert!(!left.contains(&first_token));
    // What a release naming a client leaves: its token gone, the lock free, and no message
    // for anyone else. Then that client's leave, as the library sends it.
    let _: i64 = redis::cmd("DEL").arg("passed").query(&mut conn).unwrap();
    let source = concat!(include_str!("../lua/prelude.lua"), include_str!("../lua/waiter_leave.lua"));
    let passed_at = Instant::now();
    let passed: i64 = eval(source, &["passed", "redlease_waiters:{passed}"])
        .arg(&first_token)
        .arg("redisson_lock__channel:{passed}")
        .arg(0)
        .arg("redlease_mark:{passed}")
        .arg("redlease_wake:{passed}:")
        .query(&mut conn)
        .unwrap();
    assert_eq!(passed, 1, "the spent wake-up was passed on");
    let (got, at) = second.join().unwrap();
    assert!(got, "the second waiter got the lock");
    let waited = at - passed_at;
    assert!(waited < Duration::from_secs(2), "woken by the passed-on wake-up, not the 5 s re-check: {waited:?}");
    drop(guard);
}

/// A thread that waits for the same lock again soon after its last wait (a loop) finds the
/// subscription kept for it: no `SUBSCRIBE`, and no second attempt before it parks, since
/// the subscription was confirmed, and silent, since before its first attempt. It is still
/// woken by the next release. A second later, with nobody waiting, the subscription ends.
///
/// Breaks if a wait always subscribes anew and tries twice (2 scripts before parking
/// instead of 1), if a kept subscription loses the next release, or if it is kept for good.
#[test]
fn a_wait_soon_after_the_last_reuses_the_subscription_and_parks_after_one_attempt() {
    let server = RedisServer::start();
    let (holder, waiter) = (client(&server), client(&server));
    let mut conn = server.conn();
    let wait_once = |waiter: &redlease::Client| {
        let lock = waiter.lock("again");
        thread::spawn(move || lock.try_lock_for(Duration::from_secs(10)).unwrap().map(|g| g.unlock().is_ok()))
    };
    let guard = holder.lock("again").lock().unwrap();
    let first = wait_once(&waiter);
    assert!(wait_until(Duration::from_secs(5), || waiter.stats().waiters == 1));
    drop(guard);
    assert_eq!(first.join().unwrap(), Some(true), "the first wait got the lock");
    // The first wait's own release published on the kept channel; its subscriber reads
    // that message a moment later. Read after the second wait's first attempt began, it
    // would make that wait try once more (rightly: a message came since), so it is let in
    // first (a sanity wait, well within the subscription's second of keeping).
    thread::sleep(Duration::from_millis(200));

    let guard = holder.lock("again").lock().unwrap();
    let (subscribes, scripts) = (calls_of(&mut conn, "subscribe"), calls_of(&mut conn, "evalsha"));
    let second = wait_once(&waiter);
    assert!(wait_until(Duration::from_secs(5), || waiter.stats().waiters == 1));
    thread::sleep(Duration::from_millis(100));
    assert_eq!(calls_of(&mut conn, "subscribe") - subscribes, 0, "the kept subscription served");
    assert_eq!(calls_of(&mut conn, "evalsha") - scripts, 1, "one attempt before parking");
    let released = Instant::now();
    drop(guard);
    assert_eq!(second.join().unwrap(), Some(true), "woken by the release on the kept subscription");
    assert!(released.elapsed() < Duration::from_secs(2), "by the message: {:?}", released.elapsed());
    assert!(
        wait_until(Duration::from_secs(5), || subscribers(&mut conn, "redisson_lock__channel:{again}") == 0),
        "the kept subscription ends when nobody waits"
    );
}

/// Every message published on a lock's channel and on the redlease clients' channels beside
/// it (`redlease_wake:{name}:<token>`), in order, read by pattern subscriptions: Redis does
/// not count pattern subscribers as the channel's, so this listener is invisible to a
/// release's count of who listens (a Redisson waiter would subscribe to the channel
/// itself).
struct Overheard {
    heard: std::sync::mpsc::Receiver<(String, String)>,
}

impl Overheard {
    fn start(server: &RedisServer, lock: &str) -> Overheard {
        let mut conn = server.conn();
        let patterns = [format!("redisson_lock__channel:{{{lock}}}"), format!("redlease_wake:{{{lock}}}:*")];
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let (heard_tx, heard) = std::sync::mpsc::channel();
        // Reads until the server goes away at the end of the test.
        thread::spawn(move || {
            let mut pubsub = conn.as_pubsub();
            pubsub.psubscribe(&patterns).unwrap();
            ready_tx.send(()).unwrap();
            while let Ok(message) = pubsub.get_message() {
                let payload = message.get_payload::<String>().unwrap();
                if heard_tx.send((message.get_channel_name().to_owned(), payload)).is_err() {
                    break;
                }
            }
        });
        ready.recv_timeout(Duration::from_secs(5)).expect("PSUBSCRIBE confirmed");
        Overheard { heard }
    }

    /// The messages read so far and until none comes for half a second: (channel, payload).
    fn messages(&self) -> Vec<(String, String)> {
        std::iter::from_fn(|| self.heard.recv_timeout(Duration::from_millis(500)).ok()).collect()
    }
}

/// Two clients (standing for two processes) wait for a lock that a third holds; the lock
/// then passes holder → first registered → second. With only redlease clients listening,
/// each release that frees the lock to a waiting client says so on that client's own
/// channel and nothing on the lock's channel, which every waiting client reads; the last
/// release, with nobody registered, publishes Redisson's `0` there.
///
/// Breaks if a release among redlease clients publishes on the shared channel (every
/// waiting process's subscriber then reads every release: the cost that grew with the
/// number of processes), or names a client other than the one registered longest.
#[test]
fn a_release_among_redlease_waiters_speaks_only_to_the_named_client() {
    let server = RedisServer::start();
    let holder = client(&server);
    let guard = holder.lock("quiet").lock().unwrap();
    let overheard = Overheard::start(&server, "quiet");
    let mut conn = server.conn();
    let first = wait_in_thread(client(&server), "quiet");
    assert!(wait_until(Duration::from_secs(5), || waiting_clients(&mut conn, "quiet").len() == 1));
    let second = wait_in_thread(client(&server), "quiet");
    assert!(wait_until(Duration::from_secs(5), || waiting_clients(&mut conn, "quiet").len() == 2));
    // A moment for both waiters to subscribe and register again from their second
    // attempts, which may change their order; the order read after it is the one a release
    // follows.
    thread::sleep(Duration::from_millis(200));
    let tokens = waiting_clients(&mut conn, "quiet");
    guard.unlock().unwrap();
    assert_eq!(first.join().unwrap().0, Some(true));
    assert_eq!(second.join().unwrap().0, Some(true));
    let lock_channel = "redisson_lock__channel:{quiet}".to_owned();
    let own = |token: &str| (format!("redlease_wake:{{quiet}}:{token}"), "0".to_owned());
    assert_eq!(
        overheard.messages(),
        vec![own(&tokens[0]), own(&tokens[1]), (lock_channel, "0".to_owned())],
        "each hand-off on the named client's channel alone; the last release on the lock's"
    );
}

/// A client that stays registered but no longer listens (a process that died while it
/// waited, or that left without its leave reaching Redis) is passed over: the release names
/// the next registered client, whose waiter gets the lock by that message, not at its 5 s
/// re-check, and the dead registration is gone.
///
/// Breaks if a release names a client without looking whether it listens (the live
/// waiter then sleeps until its re-check).
#[test]
fn a_registered_client_that_no_longer_listens_is_passed_over() {
    let server = RedisServer::start();
    let holder = client(&server);
    let guard = holder.lock("ghost").lock().unwrap();
    let mut conn = server.conn();
    // A ghost registered just now, for the full 5 s: before any live waiter.
    let now_ms: Vec<u64> = redis::cmd("TIME").query(&mut conn).unwrap();
    let expires = now_ms[0] * 1000 + now_ms[1] / 1000 + 5000;
    let _: i64 =
        redis::cmd("ZADD").arg("redlease_waiters:{ghost}").arg(expires).arg("4294967297").query(&mut conn).unwrap();
    let waiting = wait_in_thread(client(&server), "ghost");
    assert!(wait_until(Duration::from_secs(5), || waiting_clients(&mut conn, "ghost").len() == 2));
    assert_eq!(waiting_clients(&mut conn, "ghost")[0], "4294967297", "the ghost is first in line");
    thread::sleep(Duration::from_millis(200));
    let released = Instant::now();
    guard.unlock().unwrap();
    let (got, at) = waiting.join().unwrap();
    assert_eq!(got, Some(true), "the live waiter got the lock");
    let waited = at - released;
    assert!(waited < Duration::from_secs(2), "woken by the release, not the 5 s re-check: {waited:?}");
    assert!(waiting_clients(&mut conn, "ghost").is_empty(), "the ghost's registration is gone");
}

/// A Redisson waiter (here a plain subscriber of the lock's channel, which is all it is to
/// Redis) still hears every release of a lock that redlease clients wait for too: the
/// release names the redlease client first, then sends Redisson's `0`, since the lock's
/// channel has a subscriber that is not a redlease client. The named redlease client gets
/// the lock.
///
/// Breaks if a release counts a foreign subscriber as a redlease client (the Redisson
/// waiter would sleep until its own re-check, the holder's lease).
#[test]
fn a_foreign_subscriber_of_the_lock_channel_still_hears_each_release() {
    let server = RedisServer::start();
    let holder = client(&server);
    let guard = holder.lock("mixed").lock().unwrap();
    let mut conn = server.conn();
    let waiting = wait_in_thread(client(&server), "mixed");
    assert!(wait_until(Duration::from_secs(5), || waiting_clients(&mut conn, "mixed").len() == 1));
    let token = waiting_clients(&mut conn, "mixed")[0].clone();
    let mut foreign_conn = server.conn();
    let mut foreign = foreign_conn.as_pubsub();
    foreign.subscribe("redisson_lock__channel:{mixed}").unwrap();
    foreign.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(wait_until(Duration::from_secs(5), || subscribers(&mut conn, "redisson_lock__channel:{mixed}") == 2));
    guard.unlock().unwrap();
    assert_eq!(waiting.join().unwrap().0, Some(true), "the named redlease client got the lock");
    let mut heard: Vec<String> = Vec::new();
    while heard.len() < 3 {
        let message = foreign.get_message().expect("a release message on the lock's channel");
        heard.push(message.get_payload().unwrap());
    }
    // The holder's release: the name, then `0`; the redlease waiter's release (nobody
    // registered): `0`.
    assert_eq!(heard, vec![token, "0".to_owned(), "0".to_owned()]);
}

/// A client told that Redisson waiters may listen where the master cannot count them
/// (`always_publish_releases`: Redisson subscribed on replicas) publishes every release
/// that names a waiting client on the lock's channel too: the name, then Redisson's `0`.
///
/// Breaks if the option is not passed to the release script (a Redisson waiter on a
/// replica would sleep until its lease-long re-check).
#[test]
fn a_client_told_of_uncounted_listeners_publishes_every_release_on_the_lock_channel() {
    let server = RedisServer::start();
    let holder = client_with(&server, |b| b.always_publish_releases(true));
    let guard = holder.lock("loud").lock().unwrap();
    let overheard = Overheard::start(&server, "loud");
    let mut conn = server.conn();
    let waiting = wait_in_thread(client(&server), "loud");
    assert!(wait_until(Duration::from_secs(5), || waiting_clients(&mut conn, "loud").len() == 1));
    let token = waiting_clients(&mut conn, "loud")[0].clone();
    thread::sleep(Duration::from_millis(200));
    guard.unlock().unwrap();
    assert_eq!(waiting.join().unwrap().0, Some(true), "the named client got the lock");
    let lock_channel = "redisson_lock__channel:{loud}".to_owned();
    assert_eq!(
        overheard.messages(),
        vec![
            (format!("redlease_wake:{{loud}}:{token}"), "0".to_owned()),
            (lock_channel.clone(), token),
            (lock_channel.clone(), "0".to_owned()),
            // The waiter's own release (its client counts listeners): nobody registered.
            (lock_channel, "0".to_owned()),
        ]
    );
}
