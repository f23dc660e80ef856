//! The fair lock: arrival order, dead and impatient waiters, no thundering herd.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::ErrorKind;

use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] = &[
    ("fair_order_worker", order_worker),
    ("fair_hanging_waiter", hanging_waiter),
    ("fair_herd_waiters", herd_waiters),
];

fn queue(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

fn timeouts(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

fn scores(conn: &mut redis::Connection, name: &str) -> Vec<(String, i64)> {
    let owners: Vec<String> = redis::cmd("LRANGE").arg(queue(name)).arg(0).arg(-1).query(conn).unwrap();
    owners
        .into_iter()
        .map(|o| {
            let score: i64 = redis::cmd("ZSCORE").arg(timeouts(name)).arg(&o).query(conn).unwrap();
            (o, score)
        })
        .collect()
}

fn assert_no_trace(conn: &mut redis::Connection, name: &str) {
    assert!(!exists(conn, &queue(name)), "queue left behind");
    assert!(!exists(conn, &timeouts(name)), "timeouts left behind");
}

/// Threads for each arrival slot in SLOTS: at t0 + slot × 50 ms each waits for LOCK, then
/// appends its slot to LOCK:order. t0 (CLOCK_MONOTONIC ns) is read from LOCK:t0.
fn order_worker() {
    let url = child::env("REDIS_URL");
    let name = child::env("LOCK");
    let client = redlease::Client::open(&url).unwrap();
    let mut conn = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
    child::say("ready");
    let t0 = loop {
        let t0: Option<u64> = redis::cmd("GET").arg(format!("{name}:t0")).query(&mut conn).unwrap();
        match t0 {
            Some(t0) => break t0,
            None => thread::sleep(Duration::from_millis(2)),
        }
    };
    let slots: Vec<u64> = child::env("SLOTS").split(',').map(|s| s.parse().unwrap()).collect();
    let order = format!("{name}:order");
    run_threads(slots.len(), &url, |i, conn| {
        sleep_until_monotonic(t0 + slots[i] * 50_000_000);
        let guard = client.fair_lock(name.as_str()).lock().unwrap();
        redis::cmd("RPUSH").arg(&order).arg(slots[i]).query::<()>(conn).unwrap();
        guard.unlock().unwrap();
    });
    child::say("done");
}

#[test]
fn waiters_from_two_processes_acquire_in_arrival_order() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let guard = client.fair_lock("fair-order").lock().unwrap();
    let env = |slots: &str| [("REDIS_URL", server.url()), ("LOCK", "fair-order".to_string()), ("SLOTS", slots.into())];
    let mut workers =
        [Child::spawn("fair_order_worker", &env("0,2,4,6")), Child::spawn("fair_order_worker", &env("1,3,5,7"))];
    for w in &workers {
        w.wait_line("ready", Duration::from_secs(20));
    }
    let t0 = monotonic_ns() + 200_000_000;
    redis::cmd("SET").arg("fair-order:t0").arg(t0).query::<()>(&mut conn).unwrap();
    assert!(wait_until(Duration::from_secs(10), || llen(&mut conn, &queue("fair-order")) == 8), "all 8 queued");
    guard.unlock().unwrap();
    for w in &mut workers {
        w.wait_line("done", Duration::from_secs(30));
    }
    let order: Vec<u64> = redis::cmd("LRANGE").arg("fair-order:order").arg(0).arg(-1).query(&mut conn).unwrap();
    assert_eq!(order, (0..8).collect::<Vec<_>>());
    assert_no_trace(&mut conn, "fair-order");
    assert!(!exists(&mut conn, "fair-order"));
}

#[test]
fn expiring_leases_hand_the_lock_on_in_arrival_order() {
    let server = RedisServer::start();
    let client = client(&server);
    let lease = Duration::from_secs(1);
    let holder = client.fair_lock("fair-expiry").with_lease(lease).lock().unwrap();
    let started = Instant::now();
    let threads: Vec<_> = (0..8u64)
        .map(|k| {
            let lock = client.fair_lock("fair-expiry").with_lease(lease);
            let mut conn = server.conn();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(50 * k));
                let guard = lock.try_lock_for(Duration::from_secs(10)).unwrap().expect("acquired within 10 s");
                let at = started.elapsed();
                redis::cmd("RPUSH").arg("fair-expiry:order").arg(k).query::<()>(&mut conn).unwrap();
                // Nobody releases: keep the guard until its lease has run out.
                while guard.is_held() {
                    thread::sleep(Duration::from_millis(10));
                }
                assert_eq!(guard.unlock().unwrap_err().kind(), ErrorKind::NotHeld);
                at
            })
        })
        .collect();
    let times: Vec<Duration> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    drop(holder);
    let mut conn = server.conn();
    let order: Vec<u64> = redis::cmd("LRANGE").arg("fair-expiry:order").arg(0).arg(-1).query(&mut conn).unwrap();
    assert_eq!(order, (0..8).collect::<Vec<_>>());
    for pair in times.windows(2) {
        let gap = pair[1].saturating_sub(pair[0]);
        assert!(gap >= Duration::from_millis(900) && gap < Duration::from_millis(1600), "gap {gap:?} in {times:?}");
    }
    assert_no_trace(&mut conn, "fair-expiry");
}

/// Queues up for LOCK with a 1 s fair wait timeout and waits until killed.
fn hanging_waiter() {
    let client =
        redlease::Client::builder(child::env("REDIS_URL")).fair_wait_timeout(Duration::from_secs(1)).build().unwrap();
    child::say("queuing");
    let _ = client.fair_lock(child::env("LOCK")).try_lock_for(Duration::from_secs(60));
}

#[test]
fn a_dead_waiter_delays_the_queue_by_at_most_one_wait_timeout() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.fair_wait_timeout(Duration::from_secs(1)));
    let mut conn = server.conn();
    let q = queue("fair-dead");
    let holder = client.fair_lock("fair-dead").lock().unwrap();
    let first = {
        let lock = client.fair_lock("fair-dead");
        thread::spawn(move || {
            let guard = lock.try_lock_for(Duration::from_secs(20)).unwrap().expect("first waiter");
            thread::sleep(Duration::from_millis(50));
            guard.unlock().unwrap();
            Instant::now()
        })
    };
    assert!(wait_until(Duration::from_secs(5), || llen(&mut conn, &q) == 1));
    let mut dead = Child::spawn("fair_hanging_waiter", &[("REDIS_URL", server.url()), ("LOCK", "fair-dead".into())]);
    dead.wait_line("queuing", Duration::from_secs(10));
    assert!(wait_until(Duration::from_secs(5), || llen(&mut conn, &q) == 2));
    dead.kill();
    let third = {
        let lock = client.fair_lock("fair-dead");
        thread::spawn(move || {
            let guard = lock.try_lock_for(Duration::from_secs(20)).unwrap().expect("third waiter");
            let at = Instant::now();
            guard.unlock().unwrap();
            at
        })
    };
    assert!(wait_until(Duration::from_secs(5), || llen(&mut conn, &q) == 3));
    holder.unlock().unwrap();
    let first_released = first.join().unwrap();
    let third_acquired = third.join().unwrap();
    let delay = third_acquired.duration_since(first_released);
    assert!(delay >= Duration::from_millis(800), "the dead waiter kept its place for its wait timeout: {delay:?}");
    assert!(delay < Duration::from_millis(2500), "delayed by {delay:?}");
    assert_no_trace(&mut conn, "fair-dead");
    assert!(!exists(&mut conn, "fair-dead"));
}

#[test]
fn abandoned_waits_leave_the_queue_and_shift_the_deadlines_behind() {
    let server = RedisServer::start();
    let wait = 10_000; // fair wait timeout, ms
    let client = client_with(&server, |b| b.fair_wait_timeout(Duration::from_millis(wait as u64)));
    let mut conn = server.conn();
    let name = "fair-abandon";
    let holder = client.fair_lock(name).lock().unwrap();
    let patience = [30_000, 1_500, 30_000, 3_000, 30_000];
    let mut threads = Vec::new();
    for (k, ms) in patience.into_iter().enumerate() {
        let lock = client.fair_lock(name);
        threads.push(thread::spawn(move || lock.try_lock_for(Duration::from_millis(ms)).unwrap().map(|g| g.unlock())));
        assert!(wait_until(Duration::from_secs(5), || llen(&mut conn, &queue(name)) == k as u64 + 1));
    }
    let before = scores(&mut conn, name);
    for pair in before.windows(2) {
        assert_eq!(pair[1].1 - pair[0].1, wait, "deadlines are chained one wait timeout apart: {before:?}");
    }
    // Waiter 1 gives up: it leaves, and 2, 3, 4 move one wait timeout earlier.
    assert!(wait_until(Duration::from_secs(5), || llen(&mut conn, &queue(name)) == 4));
    let after_one = scores(&mut conn, name);
    let expected: Vec<(String, i64)> = [0, 2, 3, 4]
        .iter()
        .map(|&k| (before[k].0.clone(), if k == 0 { before[0].1 } else { before[k].1 - wait }))
        .collect();
    assert_eq!(after_one, expected);
    // Waiter 3 gives up: only 4 moves.
    assert!(wait_until(Duration::from_secs(5), || llen(&mut conn, &queue(name)) == 3));
    let after_two = scores(&mut conn, name);
    let expected = vec![expected[0].clone(), expected[1].clone(), (expected[3].0.clone(), expected[3].1 - wait)];
    assert_eq!(after_two, expected);
    holder.unlock().unwrap();
    let outcomes: Vec<bool> = threads.into_iter().map(|t| t.join().unwrap().is_some()).collect();
    assert_eq!(outcomes, [true, false, true, false, true]);
    assert_no_trace(&mut conn, name);
}

/// THREADS threads each wait for LOCK once and bump LOCK:count under it.
fn herd_waiters() {
    let url = child::env("REDIS_URL");
    let name = child::env("LOCK");
    let client = redlease::Client::open(&url).unwrap();
    let count = format!("{name}:count");
    run_threads(child::env("THREADS").parse().unwrap(), &url, |_, conn| {
        let guard = client.fair_lock(name.as_str()).lock().unwrap();
        increment_non_atomically(conn, &count);
        drop(guard);
    });
    child::say("done");
}

#[test]
fn each_release_wakes_one_waiter_not_all() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let name = "fair-herd";
    let holder = client.fair_lock(name).lock().unwrap();
    let base = calls_of(&mut conn, "evalsha");
    let env = [("REDIS_URL", server.url()), ("LOCK", name.to_string()), ("THREADS", "10".to_string())];
    let mut workers = [Child::spawn("fair_herd_waiters", &env), Child::spawn("fair_herd_waiters", &env)];
    assert!(wait_until(Duration::from_secs(20), || llen(&mut conn, &queue(name)) == 20), "20 queued");
    let scripts_before = wait_parked(&mut conn, base, 20);
    holder.unlock().unwrap();
    for w in &mut workers {
        w.wait_line("done", Duration::from_secs(60));
    }
    let scripts = calls_of(&mut conn, "evalsha") - scripts_before;
    let count: u64 = redis::cmd("GET").arg(format!("{name}:count")).query(&mut conn).unwrap();
    assert_eq!(count, 20);
    // Per hand-off: the release and the head's acquire (21 releases and 20 grants, 41 here).
    // Waking the new head to poll cost about 60 for the 20 hand-offs, waking the one behind
    // the head too about 100, and waking every waiter about 20 attempts per release.
    assert!(scripts <= 20 * 2 + 10, "{scripts} script calls for 20 hand-offs");
    assert_no_trace(&mut conn, name);
}

#[test]
fn try_lock_never_queues_and_never_jumps_the_queue() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let lock = client.fair_lock("fair-try");
    let holder = lock.lock().unwrap();
    let other = client.fair_lock("fair-try");
    assert!(thread::spawn(move || other.try_lock().unwrap().is_none()).join().unwrap());
    assert_eq!(llen(&mut conn, &queue("fair-try")), 0, "try_lock did not queue");
    // A patient waiter queues; once the lock is free, a newcomer's try_lock does not barge.
    let attempts_before = calls_of(&mut conn, "evalsha");
    let patient = {
        let lock = client.fair_lock("fair-try");
        thread::spawn(move || lock.try_lock_for(Duration::from_secs(10)).unwrap().map(|g| g.unlock().is_ok()))
    };
    assert!(wait_until(Duration::from_secs(5), || llen(&mut conn, &queue("fair-try")) == 1));
    // Parked: its first attempt and the one after its subscription was confirmed are done
    // (otherwise that second attempt could take the freed lock and release it before the
    // newcomer comes, and the newcomer would rightly get a free lock).
    assert!(wait_until(Duration::from_secs(5), || calls_of(&mut conn, "evalsha") >= attempts_before + 2));
    // Free the lock without waking anyone (as if the holder's lease ran out).
    redis::cmd("DEL").arg("fair-try").query::<()>(&mut conn).unwrap();
    let barger = client.fair_lock("fair-try");
    assert!(
        thread::spawn(move || barger.try_lock().unwrap().is_none()).join().unwrap(),
        "the queue's head comes first"
    );
    assert_eq!(patient.join().unwrap(), Some(true));
    assert_eq!(holder.unlock().unwrap_err().kind(), ErrorKind::NotHeld);
    assert_no_trace(&mut conn, "fair-try");
}

#[test]
fn fair_reentrancy_queries_and_force_unlock() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let lock = client.fair_lock("fair-basics");
    let a = lock.lock().unwrap();
    let b = lock.try_lock().unwrap().expect("reentrant");
    assert_eq!(lock.hold_count().unwrap(), 2);
    assert!(lock.is_held_by_current_thread().unwrap() && lock.is_locked().unwrap());
    assert!(lock.remaining_ttl().unwrap().unwrap() > Duration::from_secs(25));
    b.unlock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 1);
    let waiter = {
        let lock = client.fair_lock("fair-basics");
        thread::spawn(move || {
            let started = Instant::now();
            let got = lock.try_lock_for(Duration::from_secs(20)).unwrap().is_some();
            (got, started.elapsed())
        })
    };
    assert!(wait_until(Duration::from_secs(5), || llen(&mut conn, &queue("fair-basics")) == 1));
    assert!(client.fair_lock("fair-basics").force_unlock().unwrap());
    let (got, waited) = waiter.join().unwrap();
    assert!(got && waited < Duration::from_secs(5), "the head was woken by the forced unlock: {waited:?}");
    assert_eq!(a.unlock().unwrap_err().kind(), ErrorKind::NotHeld);
    assert!(!client.fair_lock("fair-basics").force_unlock().unwrap());
    assert_no_trace(&mut conn, "fair-basics");
}

#[test]
fn fair_bad_input_is_rejected_before_any_command() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    let kinds = [
        client.fair_lock("").try_lock().unwrap_err().kind(),
        client.fair_lock("x".repeat(8 * 1024 + 1)).lock().unwrap_err().kind(),
        client.fair_lock("fair").with_lease(Duration::ZERO).try_lock_for(Duration::from_secs(1)).unwrap_err().kind(),
        client.fair_lock("").force_unlock().unwrap_err().kind(),
    ];
    assert!(kinds.iter().all(|k| *k == ErrorKind::InvalidInput), "{kinds:?}");
    assert_eq!(commands_served(&mut conn) - before, 0);
}

#[test]
fn an_idle_fair_client_sends_nothing() {
    let server = RedisServer::start();
    let client = client(&server);
    let other = client_with(&server, |b| b);
    let holder = other.fair_lock("fair-idle").lock().unwrap();
    let waiting = {
        let lock = client.fair_lock("fair-idle");
        thread::spawn(move || lock.try_lock_for(Duration::from_secs(10)).unwrap().map(|g| g.unlock()).is_some())
    };
    let mut conn = server.conn();
    assert!(wait_until(Duration::from_secs(5), || llen(&mut conn, &queue("fair-idle")) == 1));
    holder.unlock().unwrap();
    assert!(waiting.join().unwrap());
    assert!(wait_until(Duration::from_secs(5), || client.stats().channels == 0 && other.stats().channels == 0));
    let before = commands_served(&mut conn);
    thread::sleep(Duration::from_secs(2));
    assert_eq!(commands_served(&mut conn) - before, 0, "an idle client sent commands");
    assert_no_trace(&mut conn, "fair-idle");
}

/// Threads of one client queued on a fair lock one after another; each, once it has the
/// lock, says its place and holds it until told to release.
/// Waits until `waiters` threads that started queueing after the server had run `base`
/// scripts are parked: each ran the attempt that queued it and the one after its
/// subscription was confirmed, and parks after that. Returns the scripts run by then.
fn wait_parked(conn: &mut redis::Connection, base: u64, waiters: u64) -> u64 {
    let expected = base + 2 * waiters;
    assert!(
        wait_until(Duration::from_secs(20), || calls_of(conn, "evalsha") >= expected),
        "{waiters} waiters each ran their two scripts: {} of {}",
        calls_of(conn, "evalsha") - base,
        2 * waiters
    );
    calls_of(conn, "evalsha")
}

struct Queued {
    got: mpsc::Receiver<usize>,
    releases: Vec<mpsc::Sender<()>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Queued {
    /// Queues `count` threads on `name`, each after the one before is in the queue.
    fn up(client: &redlease::Client, conn: &mut redis::Connection, name: &str, count: usize) -> Queued {
        Queued::up_behind(client, conn, name, count, 0)
    }

    /// The same behind `ahead` places already in the queue.
    fn up_behind(
        client: &redlease::Client,
        conn: &mut redis::Connection,
        name: &str,
        count: usize,
        ahead: usize,
    ) -> Queued {
        let (got, got_rx) = mpsc::channel();
        let mut queued = Queued { got: got_rx, releases: Vec::new(), threads: Vec::new() };
        for place in 0..count {
            let lock = client.fair_lock(name);
            let got = got.clone();
            let (release, release_rx) = mpsc::channel::<()>();
            queued.releases.push(release);
            queued.threads.push(thread::spawn(move || {
                let guard = lock.lock().unwrap();
                got.send(place).unwrap();
                let _ = release_rx.recv_timeout(Duration::from_secs(30));
                guard.unlock().unwrap();
            }));
            assert!(wait_until(Duration::from_secs(5), || llen(conn, &queue(name)) == (ahead + place) as u64 + 1));
        }
        queued
    }

    /// The place of the thread that took the lock next.
    fn next_holder(&self) -> usize {
        self.got.recv_timeout(Duration::from_secs(5)).expect("a queued thread takes the lock")
    }

    /// Lets each release in turn, checking that the next in line takes the lock, and joins
    /// them. The first must hold it already.
    fn release_in_order(self) {
        for (place, release) in self.releases.iter().enumerate() {
            release.send(()).unwrap();
            if place + 1 < self.releases.len() {
                assert_eq!(self.next_holder(), place + 1, "the queue's order");
            }
        }
        for t in self.threads {
            t.join().unwrap();
        }
    }
}

/// A hand-off under contention costs the release and the head's acquire, nothing more: the
/// waiter that becomes the head while the lock is held (the second in line, when the first
/// takes the lock) is told when the holder's lease ends rather than woken to poll for it.
///
/// Breaks if crowning a new head wakes it (its poll is a third script per hand-off).
#[test]
fn a_waiter_that_becomes_the_head_while_the_lock_is_held_runs_no_script() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let name = "fair-crowned";
    let holder = client.fair_lock(name).lock().unwrap();
    let base = calls_of(&mut conn, "evalsha");
    let queued = Queued::up(&client, &mut conn, name, 2);
    let before = wait_parked(&mut conn, base, 2);
    holder.unlock().unwrap();
    assert_eq!(queued.next_holder(), 0, "the first in line has it");
    thread::sleep(Duration::from_millis(300));
    let scripts = calls_of(&mut conn, "evalsha") - before;
    assert_eq!(scripts, 2, "the release and the head's acquire; the new head ran no script");
    queued.release_in_order();
    assert_no_trace(&mut conn, name);
}

/// When the head takes the lock, the front of the queue behind the new head is chained
/// off the new head's deadline, one wait timeout apart, as Redisson keeps the chain (the
/// new head's is set from the holder's lease).
///
/// Breaks if a grant leaves the deadlines behind where they were, or chains them by
/// another amount.
#[test]
fn a_grant_chains_the_deadlines_behind_the_new_head() {
    let server = RedisServer::start();
    let wait = 10_000; // fair wait timeout, ms
    let client = client_with(&server, |b| b.fair_wait_timeout(Duration::from_millis(wait as u64)));
    let mut conn = server.conn();
    let name = "fair-move-up";
    let holder = client.fair_lock(name).lock().unwrap();
    let queued = Queued::up(&client, &mut conn, name, 4);
    let before = scores(&mut conn, name);
    holder.unlock().unwrap();
    assert_eq!(queued.next_holder(), 0);
    let after = scores(&mut conn, name);
    let owners: Vec<&String> = after.iter().map(|(o, _)| o).collect();
    assert_eq!(owners, [&before[1].0, &before[2].0, &before[3].0], "the first in line left the queue");
    assert_eq!(after[1].1, after[0].1 + wait, "{before:?} -> {after:?}");
    assert_eq!(after[2].1, after[0].1 + 2 * wait, "{before:?} -> {after:?}");
    queued.release_in_order();
    assert_no_trace(&mut conn, name);
}

/// The chain is kept at the queue's front only (its first 16 places): a grant in a queue of
/// forty writes the deadlines of the fifteen places behind the new head and leaves the
/// deeper ones as they were, so that a grant's cost does not grow with the queue; a
/// waiter's deadline is chained when it reaches the front.
///
/// Breaks if a grant re-chains (or moves) the whole queue, as Redisson's does, or chains
/// fewer places than the front.
#[test]
fn a_grant_chains_the_queues_front_and_leaves_the_deeper_deadlines() {
    let server = RedisServer::start();
    let wait = 10_000; // fair wait timeout, ms
    let client = client_with(&server, |b| b.fair_wait_timeout(Duration::from_millis(wait as u64)));
    let mut conn = server.conn();
    let name = "fair-front";
    let holder = client.fair_lock(name).lock().unwrap();
    let queued = Queued::up(&client, &mut conn, name, 2);
    // 38 places nobody polls for behind the two live waiters, chained far ahead.
    let far = scores(&mut conn, name)[1].1 + 3_600_000;
    let ghosts: Vec<String> = (0..38).map(|i| format!("ghost:{i}")).collect();
    for (i, ghost) in ghosts.iter().enumerate() {
        redis::cmd("RPUSH").arg(queue(name)).arg(ghost).query::<()>(&mut conn).unwrap();
        let deadline = far + i as i64 * wait;
        redis::cmd("ZADD").arg(timeouts(name)).arg(deadline).arg(ghost).query::<()>(&mut conn).unwrap();
    }
    let before = scores(&mut conn, name);
    holder.unlock().unwrap();
    assert_eq!(queued.next_holder(), 0);
    let after = scores(&mut conn, name);
    assert_eq!(after.len(), 39, "the first in line left the queue");
    for (place, (owner, deadline)) in after.iter().enumerate() {
        if place < 16 {
            assert_eq!(*deadline, after[0].1 + place as i64 * wait, "{owner}, place {place}: chained off the head");
        } else {
            assert_eq!(*deadline, before[place + 1].1, "{owner}, place {place}: left as it was");
        }
    }
    for ghost in &ghosts {
        redis::cmd("LREM").arg(queue(name)).arg(0).arg(ghost).query::<()>(&mut conn).unwrap();
        redis::cmd("ZREM").arg(timeouts(name)).arg(ghost).query::<()>(&mut conn).unwrap();
    }
    queued.release_in_order();
    assert_no_trace(&mut conn, name);
}

/// A head whose deadline is more than a wait timeout past the holder's lease (a Redisson
/// client's grant can crown one from deeper than the chained front) is brought back by the
/// next acquire: dead, it is dropped within about a wait timeout, not at the hour written.
///
/// Breaks if an acquire leaves such a deadline as it is: the waiter then waits out its
/// 10 s and gives up.
#[test]
fn a_head_whose_deadline_is_past_the_chain_is_brought_back_and_dropped_when_dead() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.fair_wait_timeout(Duration::from_secs(1)));
    let mut conn = server.conn();
    let name = "fair-overdue";
    let (s, us): (i64, i64) = redis::cmd("TIME").query(&mut conn).unwrap();
    let far = s * 1000 + us / 1000 + 3_600_000;
    redis::cmd("RPUSH").arg(queue(name)).arg("ghost:1").query::<()>(&mut conn).unwrap();
    redis::cmd("ZADD").arg(timeouts(name)).arg(far).arg("ghost:1").query::<()>(&mut conn).unwrap();
    let started = Instant::now();
    let guard = client.fair_lock(name).try_lock_for(Duration::from_secs(10)).unwrap();
    let took = started.elapsed();
    assert!(guard.is_some(), "the dead head was dropped, and the waiter behind it took the free lock");
    assert!(took < Duration::from_secs(4), "within about a wait timeout (1 s): {took:?}");
    drop(guard);
    assert_no_trace(&mut conn, name);
}

/// A head whose deadline is a wait timeout past the holder's lease, as the grant that made
/// it wrote it, stays where it is when a caller behind it looks: the clock and the lease's
/// PTTL are whole milliseconds, and two readings of the same end differ by one.
///
/// Breaks if the overdue-head check brings back a head written within that rounding (it did:
/// the chain behind a head then came out one millisecond short, now and then).
#[test]
fn a_head_written_at_the_latest_is_left_where_it_is() {
    let server = RedisServer::start();
    let wait = 10_000;
    let client = client_with(&server, |b| b.fair_wait_timeout(Duration::from_millis(wait)));
    let mut conn = server.conn();
    let name = "fair-at-the-latest";
    let holder = client.fair_lock(name).lock().unwrap();
    // The lease's end as one reading makes it, one millisecond later, and a wait timeout on.
    let end: i64 = redis::Script::new(
        "local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) + redis.call('PTTL', KEYS[1])",
    )
    .key(name)
    .invoke(&mut conn)
    .unwrap();
    let written = end + 1 + wait as i64;
    redis::cmd("RPUSH").arg(queue(name)).arg("ghost:1").query::<()>(&mut conn).unwrap();
    redis::cmd("ZADD").arg(timeouts(name)).arg(written).arg("ghost:1").query::<()>(&mut conn).unwrap();
    let other = client.fair_lock(name);
    assert!(thread::spawn(move || other.try_lock().unwrap().is_none()).join().unwrap(), "held");
    let score: i64 = redis::cmd("ZSCORE").arg(timeouts(name)).arg("ghost:1").query(&mut conn).unwrap();
    assert_eq!(score, written, "the head's deadline is left as it was written");
    redis::cmd("DEL").arg(queue(name)).arg(timeouts(name)).query::<()>(&mut conn).unwrap();
    drop(holder);
    assert_no_trace(&mut conn, name);
}

/// A caller behind the queue's head finds the lock free and the head dead (past its
/// deadline): it drops the dead head, and the waiter that becomes the head is woken to take
/// the free lock at once, not left to its own timer (here 30 s).
///
/// Breaks if crowning a head while the lock is free does not wake it.
#[test]
fn a_head_crowned_while_the_lock_is_free_is_woken_to_take_it() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.fair_wait_timeout(Duration::from_secs(30)));
    let mut conn = server.conn();
    let name = "fair-crowned-free";
    let holder = client.fair_lock(name).lock().unwrap();
    let server_ms = |conn: &mut redis::Connection| -> i64 {
        let (s, us): (i64, i64) = redis::cmd("TIME").query(conn).unwrap();
        s * 1000 + us / 1000
    };
    // A head that will die: a place in the queue no client polls for.
    let far = server_ms(&mut conn) + 60_000;
    redis::cmd("RPUSH").arg(queue(name)).arg("ghost:1").query::<()>(&mut conn).unwrap();
    redis::cmd("ZADD").arg(timeouts(name)).arg(far).arg("ghost:1").query::<()>(&mut conn).unwrap();
    let base = calls_of(&mut conn, "evalsha");
    let queued = Queued::up_behind(&client, &mut conn, name, 1, 1);
    // Parked until the head's deadline or 30 s.
    wait_parked(&mut conn, base, 1);
    // The ghost dies, and the lock's lease runs out unreleased.
    let past = server_ms(&mut conn) - 1;
    redis::cmd("ZADD").arg(timeouts(name)).arg(past).arg("ghost:1").query::<()>(&mut conn).unwrap();
    redis::cmd("DEL").arg(name).query::<()>(&mut conn).unwrap();
    let other = client.fair_lock(name);
    let barged = thread::spawn(move || other.try_lock().unwrap().is_some()).join().unwrap();
    assert!(!barged, "the live waiter comes first");
    let started = Instant::now();
    assert_eq!(queued.next_holder(), 0, "the new head took the free lock");
    assert!(started.elapsed() < Duration::from_secs(3), "woken, not by its timer: {:?}", started.elapsed());
    queued.release_in_order();
    drop(holder);
    assert_no_trace(&mut conn, name);
}
