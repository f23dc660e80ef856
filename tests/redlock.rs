//! Redlock over independent masters: quorum, per-node timeouts, no split brain.

use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, ErrorKind, RedLock};

use crate::helpers::*;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

fn servers(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start()).collect()
}

fn clients(urls: &[String]) -> Vec<Client> {
    urls.iter().map(|u| Client::builder(u.as_str()).command_timeout(Duration::from_secs(1)).build().unwrap()).collect()
}

fn redlock(clients: &[Client], name: &str) -> RedLock {
    RedLock::new(clients.iter().map(|c| c.lock(name)))
}

fn keys_on(server: &RedisServer, name: &str) -> bool {
    exists(&mut server.conn(), name)
}

#[test]
fn a_majority_suffices_and_a_minority_fails_fast_leaving_nothing() {
    let mut nodes = servers(3);
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let clients = clients(&urls);
    let red = redlock(&clients, "red:quorum").with_lease(Duration::from_secs(10));
    nodes[2].kill();
    let guard = red.try_lock().unwrap().expect("two of three suffice");
    let validity = guard.validity();
    assert!(validity > Duration::from_millis(9_000) && validity < Duration::from_secs(10), "{validity:?}");
    assert!(guard.is_held() && keys_on(&nodes[0], "red:quorum") && keys_on(&nodes[1], "red:quorum"));
    guard.unlock().unwrap();
    assert!(!keys_on(&nodes[0], "red:quorum") && !keys_on(&nodes[1], "red:quorum"));
    nodes[1].kill();
    let started = Instant::now();
    assert!(red.try_lock().unwrap().is_none(), "one of three is no majority");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "failed within one attempt's timeout: {took:?}");
    assert!(!keys_on(&nodes[0], "red:quorum"), "the live node's key was released");
}

#[test]
fn five_nodes_need_three() {
    let mut nodes = servers(5);
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let clients = clients(&urls);
    let red = redlock(&clients, "red:five").with_lease(Duration::from_secs(10));
    nodes[3].kill();
    nodes[4].kill();
    let guard = red.try_lock().unwrap().expect("three of five");
    drop(guard);
    nodes[2].kill();
    assert!(red.try_lock().unwrap().is_none(), "two of five is no majority");
    assert!(!keys_on(&nodes[0], "red:five") && !keys_on(&nodes[1], "red:five"));
}

#[test]
fn a_blackholed_node_costs_one_node_timeout_and_a_slow_majority_fails_on_validity() {
    let nodes = servers(3);
    let proxies: Vec<Proxy> = nodes.iter().map(|s| Proxy::start(s.addr())).collect();
    let urls: Vec<String> = proxies.iter().map(Proxy::url).collect();
    let clients = clients(&urls);
    let red =
        redlock(&clients, "red:faults").with_lease(Duration::from_secs(10)).node_timeout(Duration::from_millis(300));
    proxies[0].set_blackhole(true);
    let started = Instant::now();
    let guard = red.try_lock().unwrap().expect("the other two answer");
    let took = started.elapsed();
    // One node timeout, not two: the undo of the silent node's attempt goes out behind it
    // from a thread of its own, and the caller does not wait for it.
    assert!(
        took >= Duration::from_millis(290) && took < Duration::from_millis(550),
        "the attempt ended at one per-node timeout: {took:?}"
    );
    assert!(guard.validity() < Duration::from_secs(10) - Duration::from_millis(290));
    drop(guard);
    proxies[0].set_blackhole(false);

    // Two slow nodes: they grant, but only after the whole 200 ms lease is spent.
    let short =
        redlock(&clients, "red:faults").with_lease(Duration::from_millis(200)).node_timeout(Duration::from_millis(500));
    proxies[1].set_latency(Duration::from_millis(120));
    proxies[2].set_latency(Duration::from_millis(120));
    let started = Instant::now();
    assert!(short.try_lock().unwrap().is_none(), "no validity left");
    assert!(started.elapsed() < Duration::from_secs(2));
    proxies[1].set_latency(Duration::ZERO);
    proxies[2].set_latency(Duration::ZERO);
    thread::sleep(Duration::from_millis(600)); // healed, and past the short lease
    for node in &nodes {
        assert!(!keys_on(node, "red:faults"), "no key remains after healing");
    }
}

#[test]
fn a_slow_node_that_grants_after_its_timeout_is_left_without_the_lock() {
    // The slow node answers after the per-node timeout: the attempt goes on without it, but
    // its late grant must be undone (behind the acquire, on the same connection), or it
    // would keep the lock for a whole lease.
    let nodes = servers(3);
    let slow = Proxy::start(nodes[2].addr());
    let urls = vec![nodes[0].url(), nodes[1].url(), slow.url()];
    let clients = clients(&urls);
    let red = redlock(&clients, "red:slow").with_lease(Duration::from_secs(30)).node_timeout(Duration::from_millis(20));
    slow.set_latency(Duration::from_millis(30));
    for _ in 0..10 {
        let guard = red.try_lock().unwrap().expect("the two fast nodes grant");
        guard.unlock().unwrap();
    }
    let mut conn = nodes[2].conn();
    assert!(
        wait_until(Duration::from_secs(2), || !exists(&mut conn, "red:slow")),
        "the slow node still holds the lock (PTTL {} ms)",
        pttl(&mut conn, "red:slow")
    );
    assert!(!keys_on(&nodes[0], "red:slow") && !keys_on(&nodes[1], "red:slow"));
}

#[test]
fn three_contenders_never_both_win_a_round() {
    let nodes = servers(3);
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let rounds = 200;
    let start = Arc::new(Barrier::new(3));
    let done = Arc::new(Barrier::new(3));
    let winners = Arc::new(Mutex::new(vec![0u32; rounds]));
    let contenders: Vec<_> = (0..3)
        .map(|_| {
            let clients = clients(&urls);
            let (start, done, winners) = (Arc::clone(&start), Arc::clone(&done), Arc::clone(&winners));
            thread::spawn(move || {
                let red = redlock(&clients, "red:contended")
                    .with_lease(Duration::from_secs(5))
                    .retry_delay(Duration::from_millis(10));
                for round in 0..rounds {
                    start.wait();
                    // Losers retry (with random pauses) until the round's winner is known.
                    let guard = red.try_lock_for(Duration::from_millis(60)).unwrap();
                    if guard.is_some() {
                        winners.lock().unwrap()[round] += 1;
                    }
                    done.wait(); // the winner holds until every contender has given up
                    drop(guard);
                }
            })
        })
        .collect();
    for c in contenders {
        c.join().unwrap();
    }
    let winners = winners.lock().unwrap();
    assert!(winners.iter().all(|&w| w <= 1), "two winners in a round: {winners:?}");
    let without = winners.iter().filter(|&&w| w == 0).count();
    assert_eq!(without, 0, "{without} of {rounds} rounds had no winner within 60 ms of retries");
}

#[test]
fn the_watchdog_keeps_a_redlock_while_a_majority_holds() {
    let mut nodes = servers(3);
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let clients: Vec<Client> = urls
        .iter()
        .map(|u| Client::builder(u.as_str()).watchdog_timeout(Duration::from_millis(600)).build().unwrap())
        .collect();
    let red = redlock(&clients, "red:renewed");
    let guard = red.lock().unwrap();
    thread::sleep(Duration::from_millis(1500)); // past two leases
    assert!(guard.is_held());
    assert!(nodes.iter().all(|n| keys_on(n, "red:renewed")));
    nodes[0].restart(); // the lock is gone there
    assert!(wait_until(Duration::from_secs(2), || clients[0].stats().leases == 1), "local record stays until release");
    thread::sleep(Duration::from_millis(500));
    assert!(guard.is_held(), "two of three still hold");
    nodes[1].restart();
    assert!(wait_until(Duration::from_secs(2), || !guard.is_held()), "one of three is no majority: the lease is lost");
    assert_eq!(guard.unlock().unwrap_err().kind(), ErrorKind::NotHeld);
    assert!(!keys_on(&nodes[2], "red:renewed"), "the remaining node's hold was released");
}

#[test]
fn fewer_than_three_nodes_are_refused() {
    let nodes = servers(2);
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let two = clients(&urls);
    let err = redlock(&two, "red:two").try_lock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let three = servers(3);
    let clients = clients(&three.iter().map(RedisServer::url).collect::<Vec<_>>());
    let err = redlock(&clients, "red:zero").node_timeout(Duration::ZERO).try_lock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = redlock(&clients, "").try_lock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

/// A node's client configured with a larger clock-drift allowance shortens the Redlock's
/// validity to it: the guard never claims longer than that client's own guards would.
///
/// Breaks if the Redlock takes the algorithm's fixed 1 % + 2 ms over the clients' settings.
#[test]
fn the_largest_drift_allowance_of_the_nodes_bounds_the_validity() {
    let nodes = servers(3);
    let mut clients: Vec<Client> = nodes.iter().take(2).map(client).collect();
    clients.push(client_with(&nodes[2], |b| b.clock_drift_rate(0.25)));
    let red = redlock(&clients, "red:drift").with_lease(Duration::from_secs(10));
    let guard = red.try_lock().unwrap().expect("free");
    let validity = guard.validity();
    assert!(validity <= Duration::from_millis(7_498), "10 s less a quarter and the margin: {validity:?}");
    assert!(validity > Duration::from_millis(7_000), "{validity:?}");
    guard.unlock().unwrap();
}

/// A retry delay beyond the lease is cut to the lease: a `lock()` with
/// `retry_delay(Duration::MAX)` takes the lock once its holder's lease ran out.
///
/// Breaks if the pause between attempts is the delay as given (it sleeps for ever).
#[test]
fn a_retry_delay_longer_than_the_lease_is_cut_to_it() {
    let nodes = servers(3);
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let holder = clients(&urls);
    let held = redlock(&holder, "red:long-delay").with_lease(Duration::from_millis(500));
    let guard = held.try_lock().unwrap().expect("free");
    std::mem::forget(guard); // its holder went away: the lock ends with its lease
    let waiter = clients(&urls);
    let red = redlock(&waiter, "red:long-delay").with_lease(Duration::from_secs(1)).retry_delay(Duration::MAX);
    let (done, got) = std::sync::mpsc::channel();
    let started = Instant::now();
    thread::spawn(move || {
        let _ = done.send(red.lock().map(|g| g.is_held()));
    });
    let held = got.recv_timeout(Duration::from_secs(10)).expect("lock() returned within 10 s");
    assert!(held.unwrap(), "held");
    assert!(started.elapsed() < Duration::from_secs(10));
}
