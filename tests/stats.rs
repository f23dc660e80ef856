//! `Client::stats()`: acquisitions counted by how they ended, the time waited and held,
//! losses and wake-ups, as a service would export them.

use std::thread;
use std::time::Duration;

use redlease::Interrupter;

use crate::helpers::*;
use crate::support::server::RedisServer;

/// One acquisition of each outcome, and the counters move by exactly one each; the waits
/// and holds land in the histograms' right buckets; a release wakes a waiter (a wake-up,
/// not wasted); a lease force-unlocked under its guard is counted as lost; a failed
/// acquisition (the server gone) is counted as failed, and bad input is not counted.
///
/// Breaks if an outcome is counted under another, twice, or not at all.
#[test]
fn acquisitions_are_counted_by_outcome_with_their_waits_and_holds() {
    let mut server = RedisServer::start();
    let client =
        client_with(&server, |b| b.watchdog_timeout(Duration::from_secs(1)).retry_budget(Duration::from_millis(300)));
    let lock = client.lock("counted");
    let base = client.stats();
    assert_eq!(base.acquired_at_once + base.busy + base.timed_out + base.failed, 0, "a new client counted nothing");

    // At once, held for 300 ms.
    let guard = lock.try_lock().unwrap().expect("free");
    assert_eq!(client.stats().acquired_at_once, 1);
    // Busy and timed out, from another thread (the lock is reentrant for this one).
    let other = lock.clone();
    thread::spawn(move || {
        assert!(other.try_lock().unwrap().is_none());
        assert!(other.try_lock_for(Duration::from_millis(100)).unwrap().is_none());
    })
    .join()
    .unwrap();
    let stats = client.stats();
    assert_eq!((stats.busy, stats.timed_out), (1, 1));
    // After waiting about 300 ms, woken by the release.
    let waiting = lock.clone();
    let waiter = thread::spawn(move || {
        let guard = waiting.try_lock_for(Duration::from_secs(10)).unwrap().expect("woken");
        drop(guard);
    });
    // Parked (the wait begins before the join), then ~300 ms more.
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "the waiter parks");
    thread::sleep(Duration::from_millis(300));
    drop(guard);
    waiter.join().unwrap();
    let stats = client.stats();
    assert_eq!(stats.acquired_after_waiting, 1, "{stats:?}");
    assert_eq!(stats.wait_time.count(), 1);
    let waited = stats.wait_time.quantile(0.5).unwrap();
    assert!(
        waited >= Duration::from_millis(256) && waited <= Duration::from_millis(1024),
        "waited ~300 ms: {waited:?}"
    );
    assert_eq!(stats.hold_time.count(), 2, "two guards let go");
    assert!(stats.hold_time.quantile(1.0).unwrap() >= Duration::from_millis(256), "one held ~300 ms");
    assert!(stats.wake_ups >= 1, "the waiter was woken by the release: {stats:?}");
    assert_eq!(stats.wasted_wake_ups, 0, "and its attempt got the lock");

    // Interrupted.
    let held = lock.lock().unwrap();
    let waiting = lock.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = thread::spawn(move || {
        tx.send(Interrupter::current()).unwrap();
        waiting.lock().expect_err("interrupted")
    });
    let interrupter = rx.recv().unwrap();
    thread::sleep(Duration::from_millis(100));
    interrupter.interrupt();
    assert!(waiter.join().unwrap().is_interrupted());
    assert_eq!(client.stats().interrupted, 1);

    // Lost: force-unlocked under the guard; the renewal finds it gone.
    assert!(lock.force_unlock().unwrap());
    assert!(wait_until(Duration::from_secs(5), || client.stats().leases_lost == 1), "{:?}", client.stats());
    drop(held);

    // Bad input is not counted; a failure once the request went out is.
    let before = client.stats();
    assert!(client.lock("").try_lock().unwrap_err().is_invalid_input());
    server.kill();
    assert!(lock.try_lock().is_err(), "the server is gone");
    let after = client.stats();
    assert_eq!(after.failed - before.failed, 1, "{after:?}");
    assert_eq!(after.acquired_at_once + after.busy, before.acquired_at_once + before.busy, "nothing else moved");
}

/// Wake-ups that find the lock taken again are counted as wasted: a release that wakes a
/// waiter while a third thread barges in first.
///
/// Breaks if a wake-up whose attempt finds the lock held is not counted as wasted.
#[test]
fn a_wake_up_that_finds_the_lock_taken_again_is_wasted() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.semaphore("wasted");
    assert!(lock.try_set_permits(1).unwrap());
    let permit = lock.acquire(1).unwrap();
    let waiting = lock.clone();
    let waiter = thread::spawn(move || waiting.try_acquire_for(1, Duration::from_secs(3)).unwrap().is_some());
    let mut conn = server.conn();
    assert!(wait_until(Duration::from_secs(5), || subscribers(&mut conn, "redisson_sc:{wasted}") >= 1));
    thread::sleep(Duration::from_millis(100));
    // A permit given back and taken again at once, in one script, by someone else: the
    // message wakes the waiter, whose attempt finds none.
    let _: () = eval("redis.call('publish', KEYS[2], 1); return nil", &["wasted", "redisson_sc:{wasted}"])
        .query(&mut conn)
        .unwrap();
    assert!(wait_until(Duration::from_secs(5), || client.stats().wasted_wake_ups >= 1), "{:?}", client.stats());
    drop(permit);
    assert!(waiter.join().unwrap(), "then served by the real release");
}

/// `INFO commandstats` as command → calls (an `INFO` reads itself as not yet served). A
/// script's own commands are counted too, under their names.
fn command_calls(conn: &mut redis::Connection) -> std::collections::BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).expect("INFO");
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.strip_prefix("calls=")?.split(',').next()?.parse().ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// What was served between two readings, less the second reading's `INFO`.
fn diff(
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
) -> std::collections::BTreeMap<String, u64> {
    after
        .iter()
        .map(|(name, calls)| {
            let mine = u64::from(name == "info");
            (name.clone(), calls - before.get(name).copied().unwrap_or(0) - mine)
        })
        .filter(|(_, calls)| *calls > 0)
        .collect()
}

/// What an idle holder of one lock costs the server, with the default settings, over 10 s
/// (docs/design.md, "What an idle client costs"): the watchdog's renewals (one script call
/// every 10 s, a third of the 30 s lease) with the replication reading behind each (two
/// `INFO`s in the same write: a renewal counts only once the master is known to need no
/// replica's confirmation, or has it), and the client's announcement (a `SET` with expiry
/// as often), and nothing else on a server without replicas: no `PING` (no thread waits),
/// nothing per lock beyond its renewal.
///
/// Breaks if an idle holder sends anything else, or more of it.
#[test]
fn an_idle_holder_of_one_lock_costs_a_renewal_and_an_announcement_per_third_of_a_lease() {
    let server = RedisServer::start();
    let client = redlease::Client::open(&server.url()).unwrap();
    let mut conn = server.conn();
    let guard = client.lock("idle-holder").lock().unwrap();
    // The first announcement goes out soon after the first acquire: let it.
    thread::sleep(Duration::from_millis(500));
    let before = command_calls(&mut conn);
    thread::sleep(Duration::from_secs(10) + Duration::from_millis(500));
    let after = command_calls(&mut conn);
    let sent = diff(&before, &after);
    println!("an idle holder sent, in 10 s: {sent:?}");
    // The renewal's script call, and the commands it runs in Redis (counted under their
    // own names), with its reading; the announcement. Nothing else: no PING.
    let allowed = ["evalsha", "hexists", "pexpire", "info", "set"];
    assert!(sent.keys().all(|name| allowed.contains(&name.as_str())), "{sent:?}");
    let calls = |name: &str| sent.get(name).copied().unwrap_or(0);
    assert!((1..=2).contains(&calls("evalsha")), "one renewal per 10 s: {sent:?}");
    assert_eq!(calls("info"), 2 * calls("evalsha"), "one reading (two INFOs) per renewal: {sent:?}");
    assert!((1..=2).contains(&calls("set")), "one announcement per 10 s: {sent:?}");
    guard.unlock().unwrap();
}
