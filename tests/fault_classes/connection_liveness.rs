//! Fault class 3: liveness of a long-lived connection (half-open pub/sub).

use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use redlease::Client;

use super::{Recorder, client_at, recording};
use crate::helpers::*;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

/// The client-side ports (`addr=127.0.0.1:PORT`) of every pub/sub connection Redis has.
fn pubsub_ports(conn: &mut redis::Connection) -> Vec<u16> {
    let list: String = redis::cmd("CLIENT").arg("LIST").arg("TYPE").arg("pubsub").query(conn).expect("CLIENT LIST");
    list.lines().filter_map(client_port).collect()
}

/// The port of `addr=HOST:PORT` in one line of `CLIENT LIST` or `CLIENT INFO`.
fn client_port(line: &str) -> Option<u16> {
    let addr = line.split(' ').find_map(|f| f.strip_prefix("addr="))?;
    addr.rsplit(':').next()?.parse().ok()
}

/// The proxy's per-connection freeze, which the tests below rely on: the frozen connection
/// stays open and silent, its neighbour keeps working, and an unknown port is refused.
///
/// Breaks if `freeze_upstream_port` freezes the wrong connection, closes it, or freezes
/// nothing.
#[test]
fn freezing_one_proxied_connection_silences_it_and_only_it() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let connect = || {
        let conn =
            redis::Client::open(proxy.url()).unwrap().get_connection_with_timeout(Duration::from_secs(2)).unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        conn
    };
    let (mut frozen, mut alive) = (connect(), connect());
    let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut frozen).unwrap();
    let port = client_port(&info).unwrap_or_else(|| panic!("no addr in CLIENT INFO: {info}"));
    assert!(!proxy.freeze_upstream_port(1), "no connection has upstream port 1");
    assert!(proxy.freeze_upstream_port(port));
    let silent = redis::cmd("PING").query::<String>(&mut frozen);
    assert!(silent.as_ref().is_err_and(|e| e.is_timeout()), "the frozen connection answers nothing: {silent:?}");
    assert_eq!(redis::cmd("PING").query::<String>(&mut alive).unwrap(), "PONG", "the other one still works");
    assert_eq!(proxy.connection_count(), 2, "the frozen connection stays open");
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut server.conn()).unwrap();
    assert!(list.lines().any(|l| client_port(l) == Some(port)), "Redis still has it: {list}");
}

/// Waits until `client` has exactly one waiter, Redis has confirmed its subscription to
/// `channel`, and the waiter has made its attempt after subscribing (two script calls since
/// `evalsha_before`): it is parked. Then freezes the pub/sub connection at the proxy and
/// returns its port.
fn freeze_pubsub_of_parked_waiter(
    server: &RedisServer,
    proxy: &Proxy,
    client: &Client,
    channel: &str,
    evalsha_before: u64,
) -> u16 {
    let mut conn = server.conn();
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "{:?}", client.stats());
    assert!(wait_until(Duration::from_secs(5), || subscribers(&mut conn, channel) == 1), "subscribed to {channel}");
    assert!(
        wait_until(Duration::from_secs(5), || calls_of(&mut conn, "evalsha") >= evalsha_before + 2),
        "the waiter tried again after subscribing"
    );
    thread::sleep(Duration::from_millis(50));
    let ports = pubsub_ports(&mut conn);
    assert_eq!(ports.len(), 1, "one pub/sub connection: {ports:?}");
    assert!(proxy.freeze_upstream_port(ports[0]), "the pub/sub connection goes through the proxy");
    ports[0]
}

/// A pub/sub connection that went silent without closing (a frozen proxy, a firewall that
/// drops a connection without telling either side) must be found by the PING check while a
/// thread waits on it: no answer within the command timeout means reconnect, resubscribe
/// and wake every waiter. The release message sent into the frozen connection is lost; the
/// waiter must still get the lock within a few seconds, not at the end of the holder's 20 s
/// lease, and the events must say disconnected, then reconnected.
///
/// Breaks if the subscriber never checks a silent connection (the waiter is then only
/// bounded by the holder's 20 s TTL), if it reconnects without waking the waiter, or if it
/// does not report the disconnect and the reconnect.
#[test]
fn a_half_open_pubsub_connection_is_found_by_ping_and_the_waiter_is_woken() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let recorder = Arc::new(Recorder::default());
    let waiter = client_at(&proxy.url(), |b| {
        recording(&recorder)(b).ping_interval(Duration::from_millis(300)).command_timeout(Duration::from_millis(500))
    });
    let holder = client(&server);
    let guard = holder.lock("h").with_lease(Duration::from_secs(20)).lock().unwrap();
    let evalsha_before = calls_of(&mut server.conn(), "evalsha");

    let (tx, rx) = mpsc::channel();
    let lock = waiter.lock("h");
    thread::spawn(move || {
        let outcome = lock.lock().map(|g| g.unlock().is_ok()).map_err(|e| e.to_string());
        let _ = tx.send((outcome, Instant::now()));
    });
    freeze_pubsub_of_parked_waiter(&server, &proxy, &waiter, "redisson_lock__channel:{h}", evalsha_before);

    let released = Instant::now();
    guard.unlock().unwrap(); // its message goes into the frozen connection
    let (outcome, at) = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| {
        panic!(
            "the waiter did not get the lock within 10 s of the release (the holder's lease was 20 s); events {:?}, {:?}",
            recorder.events(),
            waiter.stats()
        )
    });
    assert_eq!(outcome, Ok(true), "the waiter acquired and released");
    let took = at.saturating_duration_since(released);
    assert!(took < Duration::from_secs(3), "acquired {took:?} after the release");

    assert!(wait_until(Duration::from_secs(3), || waiter.stats().subscriber_connected), "{:?}", waiter.stats());
    let events = recorder.events();
    let disconnected = events.iter().position(|e| e.starts_with("subscriber_disconnected"));
    let reconnected = events.iter().rposition(|e| e == "subscriber_reconnected");
    assert!(
        matches!((disconnected, reconnected), (Some(d), Some(r)) if d < r),
        "disconnected, then reconnected: {events:?}"
    );
}

/// The PING check runs only while some thread waits: an idle client sends nothing, even
/// with a 100 ms ping interval, both before it ever waited and after a wait ended (its
/// pub/sub connection then stays open with nothing subscribed). As a control, while a
/// thread does wait, PINGs are seen.
///
/// Breaks if an idle client pings (before or after a wait), or if a waiting one does not.
#[test]
fn an_idle_client_sends_no_ping_however_short_its_ping_interval() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.ping_interval(Duration::from_millis(100)));
    let other = crate::helpers::client(&server);
    let mut conn = server.conn();
    let pings_over_a_second = |conn: &mut redis::Connection| {
        let before = calls_of(conn, "ping");
        thread::sleep(Duration::from_secs(1));
        calls_of(conn, "ping") - before
    };

    client.lock("idle").lock().unwrap().unlock().unwrap();
    assert_eq!(pings_over_a_second(&mut conn), 0, "an idle client that never waited pinged");

    // A wait that ends at once leaves the pub/sub connection open and unsubscribed.
    let waited = |name: &'static str, hold_for: Duration| {
        let guard = other.lock(name).lock().unwrap();
        let lock = client.lock(name);
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(lock.try_lock_for(Duration::from_secs(20)).map(|g| g.is_some()).map_err(|e| e.to_string()));
        });
        assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "{:?}", client.stats());
        thread::sleep(hold_for);
        drop(guard);
        let got = rx.recv_timeout(Duration::from_secs(10)).expect("the waiter returns after the release");
        assert_eq!(got, Ok(true));
    };
    waited("briefly", Duration::ZERO);
    let idle = || {
        let s = client.stats();
        (s.waiters, s.channels) == (0, 0)
    };
    assert!(wait_until(Duration::from_secs(5), idle), "{:?}", client.stats());
    assert_eq!(pings_over_a_second(&mut conn), 0, "an idle client pinged after a wait had ended");

    // Control: while a thread waits for a second, the connection is checked.
    let before = calls_of(&mut conn, "ping");
    waited("control", Duration::from_secs(1));
    let during = calls_of(&mut conn, "ping") - before;
    assert!(during >= 3, "only {during} PINGs during a 1 s wait with a 100 ms ping interval");
}

/// A new waiter whose `SUBSCRIBE` goes into a frozen pub/sub connection waits for a
/// confirmation that cannot come. The PING check (the connection is pinged because waiter A
/// waits on it) must replace the connection, so waiter B's subscription is confirmed soon,
/// and B, whose lock is released 200 ms after it started waiting, gets it within about 2 s,
/// not after the connect plus the command timeout (5.5 s). Waiter A then gets its lock once
/// it is released too.
///
/// Breaks if a waiter's wait for its subscription is bounded only by the connect and
/// command timeouts, or if the frozen connection is never replaced (A then waits for the
/// holder's 20 s lease).
#[test]
fn a_new_waiter_is_not_held_up_by_a_frozen_pubsub_connection() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let recorder = Arc::new(Recorder::default());
    let waiters = client_at(&proxy.url(), |b| {
        recording(&recorder)(b).ping_interval(Duration::from_millis(300)).command_timeout(Duration::from_millis(500))
    });
    let holder = client(&server);
    let lease = Duration::from_secs(20);
    let guard_a = holder.lock("a").with_lease(lease).lock().unwrap();
    let guard_b = holder.lock("b").with_lease(lease).lock().unwrap();
    let evalsha_before = calls_of(&mut server.conn(), "evalsha");

    let spawn_waiter = |name: &str| {
        let (tx, rx) = mpsc::channel();
        let lock = waiters.lock(name);
        thread::spawn(move || {
            let started = Instant::now();
            let outcome = lock.try_lock_for(Duration::from_secs(30)).map(|g| g.is_some()).map_err(|e| e.to_string());
            let _ = tx.send((outcome, started, Instant::now()));
        });
        rx
    };
    let waiting_a = spawn_waiter("a");
    freeze_pubsub_of_parked_waiter(&server, &proxy, &waiters, "redisson_lock__channel:{a}", evalsha_before);

    let waiting_b = spawn_waiter("b");
    thread::sleep(Duration::from_millis(200));
    guard_b.unlock().unwrap();
    let (outcome, started, at) = waiting_b
        .recv_timeout(Duration::from_secs(15))
        .unwrap_or_else(|_| panic!("waiter B never returned; events {:?}", recorder.events()));
    assert_eq!(outcome, Ok(true), "waiter B got b");
    let took = at.saturating_duration_since(started);
    assert!(
        took < Duration::from_millis(2500),
        "waiter B got its free lock after {took:?}; events {:?}",
        recorder.events()
    );

    let released = Instant::now();
    guard_a.unlock().unwrap();
    let (outcome, _, at) = waiting_a.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| {
        panic!("waiter A did not get a within 10 s of its release; events {:?}", recorder.events())
    });
    assert_eq!(outcome, Ok(true), "waiter A got a");
    let took = at.saturating_duration_since(released);
    assert!(took < Duration::from_secs(2), "waiter A got a {took:?} after its release");
}
