//! Mutual exclusion across threads and processes, checked with a non-atomic counter: two
//! holders at once would lose an increment.

use std::thread;
use std::time::Duration;

use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] = &[("exclusion_worker", worker)];

const THREADS: usize = 4;
const SECTIONS: usize = 200;

/// THREADS threads, each entering the critical section SECTIONS times through the lock
/// kind KIND ("plain" or "fair"); says "done".
fn worker() {
    let url = child::env("REDIS_URL");
    let client = redlease::Client::open(&url).unwrap();
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let lock = client.lock("exclusive");
            let fair = client.fair_lock("exclusive");
            let is_fair = child::env("KIND") == "fair";
            let mut conn = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
            thread::spawn(move || {
                for _ in 0..SECTIONS {
                    let guard = if is_fair { fair.lock() } else { lock.lock() }.unwrap();
                    increment_non_atomically(&mut conn, "exclusive:count");
                    drop(guard);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    child::say("done");
}

#[test]
fn two_processes_of_four_threads_never_overlap() {
    exclusion_across_processes("plain");
}

#[test]
fn two_processes_of_four_threads_never_overlap_on_a_fair_lock() {
    exclusion_across_processes("fair");
}

fn exclusion_across_processes(kind: &str) {
    let server = RedisServer::start();
    let env = [("REDIS_URL", server.url()), ("KIND", kind.to_string())];
    let mut workers: Vec<Child> = (0..2).map(|_| Child::spawn("exclusion_worker", &env)).collect();
    for w in &mut workers {
        w.wait_line("done", Duration::from_secs(240));
        assert!(w.wait(Duration::from_secs(10)).success());
    }
    let mut conn = server.conn();
    let count: u64 = redis::cmd("GET").arg("exclusive:count").query(&mut conn).unwrap();
    assert_eq!(count, (2 * THREADS * SECTIONS) as u64);
    assert!(!exists(&mut conn, "exclusive"));
    assert_eq!(subscribers(&mut conn, "redisson_lock__channel:{exclusive}"), 0);
    assert!(
        !exists(&mut conn, "redisson_lock_queue:{exclusive}")
            && !exists(&mut conn, "redisson_lock_timeout:{exclusive}")
    );
}
