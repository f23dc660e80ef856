//! Semaphores and the count-down latch against real `redis-server`s: never more than N
//! holders across processes, no lost wake-ups, permits of a killed holder coming back while
//! live holders keep theirs, the latch letting every waiter through once, Redisson's
//! protocol on the same keys and channels, and bad input.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, ErrorKind};

use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::foreign::wait::semaphore_wake;
use crate::support::foreign::{self, Acquire, Publish};
use crate::support::history::{self, Section};
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] =
    &[("semaphore_worker", semaphore_worker), ("permit_holder", permit_holder)];

const THREADS: u32 = 4;

/// THREADS threads take one permit of SEMAPHORE (plain, or EXPIRABLE=1) ROUNDS times each
/// and record each section in the history on RECORD_URL; with N=1 they also bump a
/// non-atomic counter there.
fn semaphore_worker() {
    let client = Client::builder(child::env("URL")).watchdog_timeout(Duration::from_secs(2)).build().unwrap();
    let record_url = child::env("RECORD_URL");
    let name = child::env("SEMAPHORE");
    let expirable = child::env("EXPIRABLE") == "1";
    let rounds: u32 = child::env("ROUNDS").parse().unwrap();
    let single = child::env("N") == "1";
    let process: u32 = child::env("PROCESS").parse().unwrap();
    thread::scope(|scope| {
        for thread in 0..THREADS {
            let (client, record_url, name) = (&client, &record_url, &name);
            scope.spawn(move || {
                let mut record = redis::Client::open(record_url.as_str()).unwrap().get_connection().unwrap();
                for _ in 0..rounds {
                    let section = |record: &mut redis::Connection| {
                        let enter = history::now();
                        if single {
                            increment_non_atomically(record, "semaphore:count");
                        } else {
                            thread::sleep(Duration::from_micros(300));
                        }
                        let exit = history::now();
                        Section { process, thread, lock: name.clone(), exclusive: single, enter, exit, token: None }
                    };
                    let done = if expirable {
                        let permit = client.permit_expirable_semaphore(name.as_str()).acquire(1).unwrap();
                        let done = section(&mut record);
                        permit.release().unwrap();
                        done
                    } else {
                        let permit = client.semaphore(name.as_str()).acquire(1).unwrap();
                        let done = section(&mut record);
                        permit.release().unwrap();
                        done
                    };
                    history::record(&mut record, "semaphore:history", &done);
                }
            });
        }
    });
    child::say("done");
}

/// Takes one permit of SEMAPHORE (watchdog 1 s) and holds it until killed.
fn permit_holder() {
    let client = Client::builder(child::env("URL")).watchdog_timeout(Duration::from_secs(1)).build().unwrap();
    let permit = client.permit_expirable_semaphore(child::env("SEMAPHORE")).acquire(1).unwrap();
    child::say("holding");
    thread::sleep(Duration::from_secs(600));
    drop(permit);
}

/// Two processes of four threads on a semaphore of N permits, plain and permit-expirable:
/// never more than N sections at once (from the interval history), and with N = 1 the
/// non-atomic counter equals the number of sections.
///
/// Breaks if the acquire script grants more permits than are available (checked by
/// granting on `>=` 0 instead: the history showed more than N inside at once).
#[test]
fn never_more_than_n_holders_across_two_processes() {
    let server = RedisServer::start();
    let record = RedisServer::start();
    let client = client(&server);
    for (name, expirable, n) in [("sem:one", false, 1u64), ("sem:three", false, 3), ("pes:three", true, 3)] {
        if expirable {
            assert!(client.permit_expirable_semaphore(name).try_set_permits(n).unwrap());
        } else {
            assert!(client.semaphore(name).try_set_permits(n).unwrap());
        }
        let env = |process: u32| {
            [
                ("URL", server.url()),
                ("RECORD_URL", record.url()),
                ("SEMAPHORE", name.to_string()),
                ("EXPIRABLE", if expirable { "1" } else { "0" }.to_string()),
                ("ROUNDS", "40".to_string()),
                ("N", n.to_string()),
                ("PROCESS", process.to_string()),
            ]
        };
        let mut workers: Vec<Child> = (0..2).map(|p| Child::spawn("semaphore_worker", &env(p))).collect();
        for w in &mut workers {
            w.wait_line("done", Duration::from_secs(60));
            assert!(w.wait(Duration::from_secs(10)).success(), "{name}: a worker failed");
        }
        let log = history::load(&mut record.conn(), "semaphore:history");
        let sections = log.iter().filter(|s| s.lock == name).count();
        assert_eq!(sections, 2 * THREADS as usize * 40, "{name}: every section recorded");
        let most = history::max_overlap(&log, name);
        assert!(most as u64 <= n, "{name}: {most} holders at once, with {n} permits");
        assert!(most >= 1);
        if n == 1 {
            let count: u64 = redis::cmd("GET").arg("semaphore:count").query(&mut record.conn()).unwrap();
            assert_eq!(count, sections as u64, "{name}: the non-atomic counter lost increments");
        }
        let available = if expirable {
            client.permit_expirable_semaphore(name).available_permits().unwrap()
        } else {
            client.semaphore(name).available_permits().unwrap()
        };
        assert_eq!(available, n as i64, "{name}: every permit came back");
    }
}

/// 50 waiters in two clients, wanting 1 or 2 permits each, on a semaphore that starts with
/// none; permits are added a few at a time. Every waiter gets its permits, holds them
/// briefly and gives them back, well before a lost wake-up could be made up for by the
/// re-check (30 s).
///
/// Breaks if a release wakes only one waiter (the others would wait out the re-check), or
/// if a woken waiter that fails does not pass its wake-up on.
#[test]
fn fifty_waiters_with_mixed_permit_counts_are_all_served_without_lost_wake_ups() {
    let server = RedisServer::start();
    let clients = [client(&server), client(&server)];
    let (done_tx, done_rx) = mpsc::channel();
    let started = Instant::now();
    for i in 0..50u64 {
        let client = clients[(i % 2) as usize].clone();
        let done_tx = done_tx.clone();
        thread::spawn(move || {
            let wanted = 1 + i % 2;
            let permits = client.semaphore("mixed").try_acquire_for(wanted, Duration::from_secs(25));
            let got = permits.map(|p| {
                p.map(|p| {
                    thread::sleep(Duration::from_millis(5));
                    p.release().is_ok()
                })
            });
            let _ = done_tx.send((wanted, got.map_err(|e| e.to_string())));
        });
    }
    drop(done_tx);
    thread::sleep(Duration::from_millis(500));
    let semaphore = clients[0].semaphore("mixed");
    assert!(semaphore.try_set_permits(1).unwrap());
    thread::sleep(Duration::from_millis(200));
    semaphore.add_permits(2).unwrap();
    let mut served = 0;
    while let Ok((wanted, got)) = done_rx.recv_timeout(Duration::from_secs(20)) {
        assert_eq!(got, Ok(Some(true)), "a waiter for {wanted} permits");
        served += 1;
    }
    assert_eq!(served, 50, "every waiter was served");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(15), "no waiter waited for the re-check: {took:?}");
    assert_eq!(semaphore.available_permits().unwrap(), 3);
}

/// A permit-expirable semaphore of 2: a child process takes one and is SIGKILLed; its
/// permit comes back after about one watchdog timeout (1 s), while this process's permit,
/// renewed by the watchdog, is kept through three watchdog timeouts.
///
/// Breaks if the watchdog does not renew permits (this process's would be taken back and
/// its release would be `NotHeld`), or if a dead holder's permit never comes back.
#[test]
fn a_killed_holders_permit_returns_after_the_watchdog_timeout_and_live_ones_stay() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(Duration::from_secs(1)));
    let semaphore = client.permit_expirable_semaphore("workers");
    assert!(semaphore.try_set_permits(2).unwrap());
    let mine = semaphore.acquire(1).expect("this process's permit");
    let mut holder = Child::spawn("permit_holder", &[("URL", server.url()), ("SEMAPHORE", "workers".to_string())]);
    holder.wait_line("holding", Duration::from_secs(10));
    assert!(semaphore.try_acquire(1).unwrap().is_none(), "both permits are taken");
    holder.kill();
    let killed = Instant::now();
    let third = semaphore.try_acquire_for(1, Duration::from_secs(10)).unwrap().expect("the dead holder's permit");
    let back_after = killed.elapsed();
    assert!(back_after < Duration::from_secs(1) + Duration::from_millis(1500), "back after {back_after:?}");
    thread::sleep(Duration::from_secs(3));
    assert!(mine.is_held(), "renewed through three watchdog timeouts");
    assert!(third.is_held());
    mine.release().expect("kept to the end");
    third.release().expect("kept to the end");
    assert_eq!(semaphore.available_permits().unwrap(), 2);
}

/// A latch of 3 with ten waiters in two clients: none goes through before the third
/// count-down, every one right after it, once.
///
/// Breaks if a waiter is let through early (a `1` message taken for an opening) or is not
/// woken (it would wait out its 10 s).
#[test]
fn the_latch_lets_every_waiter_through_once_when_it_opens() {
    let server = RedisServer::start();
    let clients = [client(&server), client(&server)];
    let latch = clients[0].count_down_latch("loaded");
    assert!(latch.try_set_count(3).unwrap());
    assert!(!latch.try_set_count(5).unwrap(), "a count is already set");
    let (tx, rx) = mpsc::channel();
    for i in 0..10 {
        let latch = clients[i % 2].count_down_latch("loaded");
        let tx = tx.clone();
        thread::spawn(move || {
            let opened = latch.await_for(Duration::from_secs(10));
            let _ = tx.send((opened.map_err(|e| e.to_string()), Instant::now()));
        });
    }
    drop(tx);
    thread::sleep(Duration::from_millis(300));
    assert_eq!(latch.count_down().unwrap(), 2);
    assert_eq!(latch.count_down().unwrap(), 1);
    thread::sleep(Duration::from_millis(300));
    assert!(rx.try_recv().is_err(), "nobody through before zero");
    let opened_at = Instant::now();
    assert_eq!(latch.count_down().unwrap(), 0);
    let mut through = 0;
    while let Ok((opened, at)) = rx.recv_timeout(Duration::from_secs(12)) {
        assert_eq!(opened, Ok(true));
        assert!(at >= opened_at, "through before the latch opened");
        assert!(at - opened_at < Duration::from_secs(2), "woken by the opening: {:?}", at - opened_at);
        through += 1;
    }
    assert_eq!(through, 10);
    assert_eq!(latch.count().unwrap(), 0);
    assert_eq!(latch.count_down().unwrap(), 0, "an open latch stays open");
    assert!(latch.await_for(Duration::ZERO).unwrap(), "open");
}

/// Each foreign client's semaphore and latch calls on redlease's semaphore and latch: the
/// foreign take excludes redlease and its give-back wakes a parked redlease waiter;
/// redlease's release publishes the count a foreign waiter reads; the foreign count-down
/// opens the latch for a redlease waiter.
///
/// Breaks if the layout, channel or message of either primitive differs from Redisson's
/// (the foreign release would not wake the redlease waiter, or its take would not see the
/// permits).
#[test]
fn foreign_semaphores_and_latches_and_redlease_exclude_and_wake_each_other() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(Duration::from_secs(30)));
    let mut foreign = server.conn();
    for (i, peer) in foreign::peers().iter().enumerate() {
        let (who, name) = (peer.who(), format!("shared-sem-{i}"));
        let channel = foreign::keys::semaphore_channel(&name);
        let semaphore = client.semaphore(&name);
        assert!(semaphore.try_set_permits(1).unwrap());
        // The peer takes the only permit.
        assert!(peer.semaphore_try_acquire(&mut foreign, &name, 1).unwrap(), "{who} takes it");
        assert!(!peer.semaphore_try_acquire(&mut foreign, &name, 1).unwrap(), "{who}: none left");
        assert!(semaphore.try_acquire(1).unwrap().is_none(), "{who}: the peer's permit excludes redlease");
        let waiter = {
            let semaphore = semaphore.clone();
            thread::spawn(move || {
                let started = Instant::now();
                let got = semaphore.try_acquire_for(1, Duration::from_secs(20)).unwrap();
                (got.map(|g| g.release().is_ok()), started.elapsed())
            })
        };
        assert!(wait_until(Duration::from_secs(5), || subscribers(&mut server.conn(), &channel) == 1));
        thread::sleep(Duration::from_millis(100));
        assert!(
            peer.semaphore_release_if_exists(&mut foreign, &name, 1, Publish::Classic).unwrap(),
            "{who} gives back"
        );
        let (got, waited) = waiter.join().unwrap();
        assert_eq!(got, Some(true), "{who}: woken by the peer's give-back");
        assert!(waited < Duration::from_secs(5), "{who}: by the message, not the re-check: {waited:?}");
        // redlease's release wakes a foreign waiter: it sees the count on the channel.
        let guard = semaphore.acquire(1).unwrap();
        let attempt = |conn: &mut redis::Connection| {
            let taken = peer.semaphore_try_acquire(conn, &name, 1)?;
            Ok(if taken { Acquire::Granted } else { Acquire::Busy(20_000) })
        };
        let release = || guard.release().unwrap();
        assert_foreign_woken(&who, &|| server.conn(), (&channel, Publish::Classic, semaphore_wake), &attempt, release);
        assert_eq!(semaphore.available_permits().unwrap(), 0, "{who}: the peer holds the permit");

        // A latch opened by the peer's count-downs wakes a redlease waiter, at zero only.
        let latch = client.count_down_latch(format!("shared-latch-{i}"));
        assert!(latch.try_set_count(2).unwrap());
        let waiter = {
            let latch = latch.clone();
            thread::spawn(move || latch.await_for(Duration::from_secs(20)).unwrap())
        };
        let channel = foreign::keys::latch_channel(&format!("shared-latch-{i}"));
        assert!(wait_until(Duration::from_secs(5), || subscribers(&mut server.conn(), &channel) == 1));
        peer.latch_count_down(&mut foreign, &format!("shared-latch-{i}"), Publish::Classic).unwrap();
        assert_eq!(latch.count().unwrap(), 1, "{who}: one count-down");
        peer.latch_count_down(&mut foreign, &format!("shared-latch-{i}"), Publish::Classic).unwrap();
        assert!(waiter.join().unwrap(), "{who}: woken by the peer's opening");
        assert_eq!(latch.count().unwrap(), 0, "{who}: open");
    }
}

/// Bad input is `InvalidInput` before anything is sent; a name that is a lock of another
/// kind is refused by Redis with an error naming it, and nothing is changed.
///
/// Breaks if zero or huge permits reach Redis, or if a semaphore on a lock's key changes
/// the lock.
#[test]
fn bad_permit_counts_are_refused_before_anything_is_sent() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    let semaphore = client.semaphore("bad");
    let expirable = client.permit_expirable_semaphore("bad");
    let latch = client.count_down_latch("bad");
    let checks: Vec<(&str, redlease::Result<()>)> = vec![
        ("set 0", semaphore.try_set_permits(0).map(drop)),
        ("acquire 0", semaphore.try_acquire(0).map(drop)),
        ("acquire huge", semaphore.try_acquire(u64::MAX).map(drop)),
        ("add huge", semaphore.add_permits(i64::MIN).map(drop)),
        ("expirable 0", expirable.try_acquire(0).map(drop)),
        ("expirable too many for a guard", expirable.try_acquire(1 << 20).map(drop)),
        ("expirable zero lease", expirable.clone().with_lease(Duration::ZERO).try_acquire(1).map(drop)),
        ("latch 0", latch.try_set_count(0).map(drop)),
        ("empty name", client.semaphore("").try_acquire(1).map(drop)),
    ];
    for (what, result) in checks {
        let err = result.expect_err(what);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {err}");
    }
    assert_eq!(commands_served(&mut conn), before, "nothing was sent");

    let lock = client.lock("taken").lock().unwrap();
    let err = client.semaphore("taken").try_acquire(1).expect_err("a lock's key is not a semaphore");
    assert!(err.to_string().contains("WRONGTYPE") && err.lock_name() == Some("taken"), "{err}");
    assert!(lock.is_held());
    assert_eq!(client.lock("taken").hold_count().unwrap(), 1, "the lock is untouched");
}

/// A release wakes, in order, the waiters whose permits fit in what it made available; a
/// waiter that wants more than that is passed over, not a wall for the ones behind it.
///
/// A semaphore of no permits, a waiter for 5 parked first, one for 1 parked behind it; 2
/// permits are added. The waiter for 1 must be woken by that message and get its permit at
/// once (the watchdog timeout, after which a parked waiter looks again anyway, is 30 s);
/// the waiter for 5 keeps waiting.
///
/// Breaks if the wake-up counts the first waiter's 5 against the 2 available and stops
/// there: the waiter for 1 then sleeps until its 30 s re-check.
#[test]
fn a_waiter_for_more_than_is_released_does_not_hold_up_smaller_ones_behind_it() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(Duration::from_secs(30)));
    let semaphore = client.semaphore("mixed");
    assert!(semaphore.try_set_permits(1).expect("set"));
    let taken = semaphore.try_acquire(1).expect("take").expect("the only permit");
    let (tx, rx) = mpsc::channel();
    thread::scope(|scope| {
        for (order, wants) in [(0, 5u64), (1, 1u64)] {
            let (semaphore, tx) = (&semaphore, tx.clone());
            // Park in order: the waiter for 5 first.
            assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == order), "{:?}", client.stats());
            thread::sleep(Duration::from_millis(100));
            scope.spawn(move || {
                let got = semaphore.try_acquire_for(wants, Duration::from_secs(10)).expect("waits");
                tx.send((wants, got.is_some(), Instant::now())).unwrap();
                if let Some(guard) = got {
                    guard.release().expect("released");
                }
            });
        }
        assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 2), "{:?}", client.stats());
        thread::sleep(Duration::from_millis(200));
        let released = Instant::now();
        // The permit taken goes back, and one more is added: 2 available, one message each.
        semaphore.add_permits(1).expect("add");
        taken.release().expect("release");
        let (wants, got, at) = rx.recv_timeout(Duration::from_secs(8)).expect("a waiter is served");
        assert_eq!((wants, got), (1, true), "the waiter for 1 is served first");
        assert!(
            at - released < Duration::from_secs(3),
            "woken by the message, not by its re-check: {:?}",
            at - released
        );
        // The waiter for 5 is still waiting, and gets its permits when there are enough.
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "the waiter for 5 cannot have them yet");
        semaphore.add_permits(3).expect("add");
        let (wants, got, _) = rx.recv_timeout(Duration::from_secs(8)).expect("the waiter for 5 is served");
        assert_eq!((wants, got), (5, true));
    });
}

/// Three permit leases renewed in one batch (a 600 ms watchdog lease, so only renewals keep
/// them): the permits of the middle one are taken away behind its back (its semaphore's
/// deadlines deleted). Its guard learns the loss at the next renewal; the other two stay
/// held, their permits' deadlines moved on.
///
/// Breaks if the renewal reply passes over a permit lease it could not renew (its guard
/// would go on saying it holds), or pins the loss on another lease.
#[test]
fn a_permit_lease_whose_permits_were_taken_away_is_lost_and_only_it() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(Duration::from_millis(600)));
    let mut conn = server.conn();
    let guards: Vec<_> = ["permits-a", "permits-b", "permits-c"]
        .iter()
        .map(|name| {
            let semaphore = client.permit_expirable_semaphore(*name);
            assert!(semaphore.try_set_permits(1).unwrap());
            semaphore.acquire(1).unwrap()
        })
        .collect();
    redis::cmd("DEL").arg("{permits-b}:timeout").query::<()>(&mut conn).unwrap();
    thread::sleep(Duration::from_secs(2));
    let held: Vec<bool> = guards.iter().map(|g| g.is_held()).collect();
    assert_eq!(held, [true, false, true], "the lease whose permits went is lost, and only it");
    for name in ["{permits-a}:timeout", "{permits-c}:timeout"] {
        let members: Vec<(Vec<u8>, f64)> =
            redis::cmd("ZRANGE").arg(name).arg(0).arg(-1).arg("WITHSCORES").query(&mut conn).unwrap();
        let now_ms: f64 =
            redis::cmd("TIME").query::<(u64, u64)>(&mut conn).map(|(s, us)| (s * 1000 + us / 1000) as f64).unwrap();
        assert_eq!(members.len(), 1, "{name}: {members:?}");
        assert!(members[0].1 > now_ms, "{name}: its permit's deadline is ahead: {members:?}");
    }
    for guard in guards {
        let _ = guard.release();
    }
}

/// A semaphore whose permits were never set has none, and `acquire` would wait for them
/// forever (as Redisson's does): a timed acquire that runs out on it says why, for both
/// kinds, while one on a set but exhausted semaphore runs out with `Ok(None)` as before.
///
/// Breaks if a wait that could never succeed ends as plain contention (`Ok(None)`), with no
/// hint that the permits were never set.
#[test]
fn a_timed_acquire_on_a_semaphore_that_has_no_permits_says_so() {
    let server = RedisServer::start();
    let client = client(&server);
    let short = Duration::from_millis(200);
    let err = client.semaphore("never-set").try_acquire_for(1, short).expect_err("no permits at all");
    assert!(err.is_timeout() && err.to_string().contains("no permits at all"), "{err}");
    assert!(err.to_string().contains("try_set_permits"), "says how: {err}");
    let err = client.permit_expirable_semaphore("never-set-2").try_acquire_for(1, short).expect_err("none");
    assert!(err.is_timeout() && err.to_string().contains("no permits at all"), "{err}");
    // Set, then exhausted: plain contention.
    let sem = client.semaphore("exhausted");
    assert!(sem.try_set_permits(1).unwrap());
    let _held = sem.acquire(1).unwrap();
    assert!(sem.try_acquire_for(1, short).expect("contention is not an error").is_none());
    let psem = client.permit_expirable_semaphore("exhausted-2");
    assert!(psem.try_set_permits(1).unwrap());
    let _held = psem.acquire(1).unwrap();
    assert!(psem.try_acquire_for(1, short).expect("contention is not an error").is_none());
}

/// Redisson's newer semaphore calls in redlease (`RedissonSemaphore.releaseIfExists` and
/// `trySetPermits(int, Duration)`; `RedissonPermitExpirableSemaphore.getLeaseTime` for the
/// permit's lease): `release_if_exists` gives back only to a semaphore that exists (and wakes
/// its waiters), `try_set_permits_with_ttl` sets a count that expires (and only once), and a
/// permit's remaining lease is read from Redis. A foreign client's, on the same keys, in the
/// test after it.
///
/// Breaks if a late give-back brings a deleted semaphore back, if the time to live is not
/// set or a second set overwrites the first, or if a bad time to live is sent at all.
#[test]
fn release_if_exists_ttl_permits_and_a_permits_lease_as_redisson_has_them() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let sem = client.semaphore("newer");
    assert!(!sem.release_if_exists(2).expect("no error"), "no semaphore, no give-back");
    assert!(!exists(&mut conn, "newer"), "nothing was created");
    assert!(sem.try_set_permits_with_ttl(1, Duration::from_secs(20)).expect("set"));
    let ttl = pttl(&mut conn, "newer");
    assert!(ttl > 15_000 && ttl <= 20_000, "the count expires: PTTL {ttl}");
    assert!(!sem.try_set_permits_with_ttl(5, Duration::from_secs(20)).expect("no error"), "only once");
    assert_eq!(sem.available_permits().unwrap(), 1);
    // A waiter for 2 is woken by a give-back that exists.
    let waiting = client.semaphore("newer");
    let waiter = thread::spawn(move || {
        waiting.try_acquire_for(2, Duration::from_secs(10)).map(|g| (g.is_some(), Instant::now()))
    });
    // Parked on the semaphore's channel, so that the give-back is what wakes it.
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "the waiter parks");
    let given = Instant::now();
    assert!(sem.release_if_exists(1).expect("given back"));
    let (served, at) = waiter.join().unwrap().expect("no error");
    assert!(served, "woken, and served");
    let took = at.duration_since(given);
    assert!(took < Duration::from_secs(2), "woken by the give-back's message, not a re-check: {took:?}");
    // Bad times to live are refused before anything is sent.
    let before = commands_served(&mut conn);
    for ttl in [Duration::ZERO, Duration::from_secs(u64::MAX / 1000)] {
        let err = sem.try_set_permits_with_ttl(1, ttl).expect_err("refused");
        assert!(err.is_invalid_input(), "{ttl:?}: {err}");
    }
    assert_eq!(commands_served(&mut conn), before, "nothing was sent");
    // A permit's remaining lease, read from Redis: the fixed lease counting down.
    let expirable = client.permit_expirable_semaphore("leased");
    assert!(expirable.try_set_permits(1).unwrap());
    let permit = expirable.clone().with_lease(Duration::from_secs(10)).acquire(1).expect("a permit");
    let left = permit.remaining_lease().expect("read").expect("still there");
    assert!(left > Duration::from_secs(8) && left <= Duration::from_secs(10), "{left:?}");
    thread::sleep(Duration::from_millis(300));
    let later = permit.remaining_lease().unwrap().unwrap();
    assert!(later < left, "counting down: {left:?} then {later:?}");
    permit.release().expect("released");
}

/// Each foreign client's `releaseIfExists` and `trySetPermits` with a time to live and
/// redlease's on the same semaphores, both ways: each gives back only to a semaphore that
/// exists, sets a count only where none is, sees the other's count and time to live, and
/// the foreign give-back wakes a redlease waiter whose permits it makes enough.
///
/// Breaks if the semaphore's key, its channel or the count published differ from
/// Redisson's.
#[test]
fn foreign_semaphore_calls_and_redlease_share_a_semaphore() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    for (i, peer) in foreign::peers().iter().enumerate() {
        let who = peer.who();
        let (ours, theirs, gone) = (format!("ours-{i}"), format!("theirs-{i}"), format!("gone-{i}"));
        // redlease's semaphore: the peer gives back to it, and cannot set it again.
        assert!(client.semaphore(&ours).try_set_permits_with_ttl(1, Duration::from_secs(20)).unwrap());
        assert!(peer.semaphore_release_if_exists(&mut conn, &ours, 1, Publish::Classic).unwrap(), "{who}");
        assert_eq!(client.semaphore(&ours).available_permits().unwrap(), 2, "{who}: its give-back counted");
        let set_again = peer.semaphore_try_set_permits_with_ttl(&mut conn, &ours, 9, 5_000, Publish::Classic).unwrap();
        assert!(!set_again, "{who}: set by redlease already");
        assert_eq!(client.semaphore(&ours).available_permits().unwrap(), 2, "{who}: unchanged");
        // No semaphore: neither side's give-back creates one.
        assert!(!peer.semaphore_release_if_exists(&mut conn, &gone, 1, Publish::Classic).unwrap(), "{who}");
        assert!(!client.semaphore(&gone).release_if_exists(1).unwrap(), "{who}");
        assert!(!exists(&mut conn, &gone), "{who}: nothing was created");
        // The peer's semaphore: redlease sees its count and time to live, and cannot set it.
        assert!(peer.semaphore_try_set_permits_with_ttl(&mut conn, &theirs, 3, 20_000, Publish::Classic).unwrap());
        let ttl = pttl(&mut conn, &theirs);
        assert!(ttl > 15_000 && ttl <= 20_000, "{who}: the count expires: PTTL {ttl}");
        let sem = client.semaphore(&theirs);
        assert!(!sem.try_set_permits_with_ttl(9, Duration::from_secs(5)).unwrap(), "{who}: set by the peer");
        assert_eq!(sem.available_permits().unwrap(), 3, "{who}");
        // A redlease waiter for 5 is woken by the peer's give-back of 2.
        let waiting = sem.clone();
        let waiter = thread::spawn(move || {
            waiting.try_acquire_for(5, Duration::from_secs(10)).map(|g| (g.is_some(), Instant::now()))
        });
        assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "{who}: the waiter parks");
        let given = Instant::now();
        assert!(peer.semaphore_release_if_exists(&mut conn, &theirs, 2, Publish::Classic).unwrap(), "{who}");
        let (served, at) = waiter.join().unwrap().expect("no error");
        assert!(served, "{who}: woken, and served");
        let took = at.duration_since(given);
        assert!(took < Duration::from_secs(2), "{who}: woken by the give-back's message, not a re-check: {took:?}");
    }
}
