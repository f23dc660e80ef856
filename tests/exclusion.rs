//! Mutual exclusion across threads and processes, checked with a non-atomic counter: two
//! holders at once would lose an increment. Run through every lock kind that excludes.

use std::time::Duration;

use redlease::{Client, MultiLock, RedLock};

use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] = &[("exclusion_worker", worker)];

/// Takes the lock; the guard (a `LockGuard`, a sendable one or a `GroupGuard`) releases it
/// when dropped.
type Acquire = Box<dyn Fn() -> redlease::Result<Box<dyn std::any::Any>> + Send>;

fn boxed<G: 'static>(guard: redlease::Result<G>) -> redlease::Result<Box<dyn std::any::Any>> {
    guard.map(|g| Box::new(g) as Box<dyn std::any::Any>)
}

/// How a worker takes "the" lock, by KIND: a plain, fair or fenced lock on the first
/// server, a multi-lock over two locks on it, or a Redlock over every server.
fn acquirer(kind: &str, clients: &[Client]) -> Acquire {
    let first = &clients[0];
    match kind {
        "plain" => {
            let lock = first.lock("exclusive");
            Box::new(move || boxed(lock.lock()))
        }
        "fair" => {
            let lock = first.fair_lock("exclusive");
            Box::new(move || boxed(lock.lock()))
        }
        "spin" => {
            let lock = first.spin_lock("exclusive");
            Box::new(move || boxed(lock.lock()))
        }
        "non_reentrant" => {
            let lock = first.non_reentrant_lock("exclusive");
            Box::new(move || boxed(lock.lock()))
        }
        "non_reentrant_fair" => {
            let lock = first.non_reentrant_fair_lock("exclusive");
            Box::new(move || boxed(lock.lock()))
        }
        "sendable" => {
            let lock = first.non_reentrant_lock("exclusive").sendable();
            Box::new(move || boxed(lock.lock()))
        }
        // Every section takes both values: the group excludes on the one they share.
        "group" => {
            let lock = first.group_lock("exclusive", ["counter", "ledger"]);
            Box::new(move || boxed(lock.lock()))
        }
        "multi" => {
            let multi = MultiLock::new([first.lock("exclusive"), first.lock("exclusive:b")]);
            Box::new(move || boxed(multi.lock()))
        }
        "redlock" => {
            let red = RedLock::new(clients.iter().map(|c| c.lock("exclusive"))).retry_delay(Duration::from_millis(5));
            Box::new(move || boxed(red.lock()))
        }
        other => panic!("unknown lock kind {other}"),
    }
}

/// THREADS threads, each entering the critical section SECTIONS times through the lock
/// kind KIND, over the servers REDIS_URLS; says "done".
fn worker() {
    let urls: Vec<String> = child::env("REDIS_URLS").split(',').map(str::to_owned).collect();
    let kind = child::env("KIND");
    let threads: usize = child::env("THREADS").parse().unwrap();
    let sections: usize = child::env("SECTIONS").parse().unwrap();
    let clients: Vec<Client> = urls.iter().map(|u| Client::open(u).unwrap()).collect();
    run_threads(threads, &urls[0], |_, conn| {
        let acquire = acquirer(&kind, &clients);
        for _ in 0..sections {
            let guard = acquire().unwrap();
            increment_non_atomically(conn, "exclusive:count");
            drop(guard);
        }
    });
    child::say("done");
}

fn exclusion_across_processes(kind: &str, servers: usize, threads: usize, sections: usize) {
    let servers: Vec<RedisServer> = (0..servers).map(|_| RedisServer::start()).collect();
    let urls = servers.iter().map(RedisServer::url).collect::<Vec<_>>().join(",");
    let env = [
        ("REDIS_URLS", urls),
        ("KIND", kind.to_string()),
        ("THREADS", threads.to_string()),
        ("SECTIONS", sections.to_string()),
    ];
    let mut workers: Vec<Child> = (0..2).map(|_| Child::spawn("exclusion_worker", &env)).collect();
    for w in &mut workers {
        w.wait_line("done", Duration::from_secs(240));
        assert!(w.wait(Duration::from_secs(10)).success());
    }
    let mut conn = servers[0].conn();
    let count: u64 = redis::cmd("GET").arg("exclusive:count").query(&mut conn).unwrap();
    assert_eq!(count, (2 * threads * sections) as u64);
    for server in &servers {
        let mut conn = server.conn();
        let left: Vec<String> = redis::cmd("KEYS").arg("*exclusive*").query(&mut conn).unwrap();
        let left: Vec<&String> =
            left.iter().filter(|k| *k != "exclusive:count" && !k.starts_with("redisson_unlock_latch")).collect();
        assert!(left.is_empty(), "left behind: {left:?}");
        assert_eq!(subscribers(&mut conn, "redisson_lock__channel:{exclusive}"), 0);
    }
}

#[test]
fn two_processes_of_four_threads_never_overlap() {
    exclusion_across_processes("plain", 1, 4, 200);
}

#[test]
fn two_processes_of_four_threads_never_overlap_on_a_fair_lock() {
    exclusion_across_processes("fair", 1, 4, 200);
}

#[test]
fn two_processes_of_four_threads_never_overlap_on_a_spin_lock() {
    exclusion_across_processes("spin", 1, 4, 100);
}

#[test]
fn two_processes_of_four_threads_never_overlap_on_the_non_reentrant_locks() {
    exclusion_across_processes("non_reentrant", 1, 4, 100);
    exclusion_across_processes("non_reentrant_fair", 1, 4, 100);
}

#[test]
fn two_processes_of_four_threads_never_overlap_on_sendable_guards_and_a_group_lock() {
    exclusion_across_processes("sendable", 1, 4, 100);
    exclusion_across_processes("group", 1, 4, 100);
}

#[test]
fn two_processes_never_overlap_through_a_multi_lock() {
    exclusion_across_processes("multi", 1, 4, 100);
}

#[test]
fn two_processes_never_overlap_through_a_redlock() {
    exclusion_across_processes("redlock", 3, 2, 50);
}
