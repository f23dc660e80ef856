//! The multi-lock: all members or none, any mix of kinds and clients, no deadlock.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{AnyLock, ErrorKind, MultiLock};

use crate::helpers::*;
use crate::support::server::RedisServer;

#[test]
fn one_member_held_elsewhere_means_none_is_kept() {
    let server = RedisServer::start();
    let holder = client(&server);
    let client = client(&server);
    let mut conn = server.conn();
    let _b = holder.lock("multi:b").lock().unwrap();
    let multi = MultiLock::new([client.lock("multi:a"), client.lock("multi:b"), client.lock("multi:c")]);
    assert!(multi.try_lock().unwrap().is_none());
    assert!(!exists(&mut conn, "multi:a") && !exists(&mut conn, "multi:c"), "no other member is left held");
    let stats = client.stats();
    assert_eq!((stats.leases, stats.renewals_scheduled), (0, 0), "nor renewed: {stats:?}");
    let started = Instant::now();
    assert!(multi.try_lock_for(Duration::from_millis(300)).unwrap().is_none());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(!exists(&mut conn, "multi:a") && !exists(&mut conn, "multi:c"));
}

#[test]
fn mixed_kinds_on_two_clients_are_taken_and_released_together() {
    let first = RedisServer::start();
    let second = RedisServer::start();
    let (c1, c2) = (client(&first), client(&second));
    let doc = c2.read_write_lock("multi:doc");
    let multi = MultiLock::new([
        AnyLock::from(c1.lock("multi:plain")),
        c1.fair_lock("multi:fair").into(),
        c1.fenced_lock("multi:fenced").into(),
        doc.read().into(),
        c2.read_write_lock("multi:other").write().into(),
    ]);
    assert_eq!(multi.len(), 5);
    let guard = multi.lock().unwrap();
    assert!(guard.is_held());
    let (mut k1, mut k2) = (first.conn(), second.conn());
    for key in ["multi:plain", "multi:fair", "multi:fenced"] {
        assert!(exists(&mut k1, key), "{key}");
    }
    assert!(doc.read().is_locked().unwrap() && c2.read_write_lock("multi:other").write().is_locked().unwrap());
    guard.unlock().unwrap();
    for key in ["multi:plain", "multi:fair", "multi:fenced"] {
        assert!(!exists(&mut k1, key), "{key}");
    }
    assert!(!exists(&mut k2, "multi:doc") && !exists(&mut k2, "multi:other"));
}

#[test]
fn a_fixed_lease_applies_to_every_member() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let multi = MultiLock::new([client.lock("multi:l1"), client.lock("multi:l2")]).with_lease(Duration::from_secs(5));
    let guard = multi.lock().unwrap();
    for key in ["multi:l1", "multi:l2"] {
        let ttl = pttl(&mut conn, key);
        assert!(ttl > 4_000 && ttl <= 5_000, "{key}: {ttl}");
    }
    assert_eq!(client.stats().renewals_scheduled, 0, "fixed leases are not renewed");
    drop(guard);
}

#[test]
fn opposite_orderings_never_deadlock() {
    let server = RedisServer::start();
    let client = client(&server);
    let counter = Arc::new(server.url());
    let runs: Vec<_> = [["multi:x", "multi:y"], ["multi:y", "multi:x"]]
        .into_iter()
        .map(|order| {
            let multi = MultiLock::new(order.map(|n| client.lock(n)));
            let mut conn = redis::Client::open(counter.as_str()).unwrap().get_connection().unwrap();
            thread::spawn(move || {
                for _ in 0..1000 {
                    let guard = multi.try_lock_for(Duration::from_secs(10)).unwrap().expect("no deadlock");
                    increment_non_atomically(&mut conn, "multi:count");
                    drop(guard);
                }
            })
        })
        .collect();
    let started = Instant::now();
    for run in runs {
        run.join().unwrap();
    }
    let count: u64 = redis::cmd("GET").arg("multi:count").query(&mut server.conn()).unwrap();
    assert_eq!(count, 2000);
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[test]
fn an_empty_multi_lock_is_refused() {
    let multi = MultiLock::new(Vec::<AnyLock>::new());
    assert!(multi.is_empty());
    assert_eq!(multi.try_lock().unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(multi.lock().unwrap_err().kind(), ErrorKind::InvalidInput);
}
