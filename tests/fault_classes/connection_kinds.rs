//! Class 10: a connection failure wrapped into another kind. Redis unreachable or a
//! connection broken is `ErrorKind::Connection`, a connection error and transient, on every
//! path that meets it: a call's own, the renewal thread's (where one failed round trip
//! fails every call of its batch), the pub/sub connection's, and finding the master behind
//! sentinels or a cluster's slot map.
//!
//! Breaks if a path builds an error of its own for a connection failure and forgets what
//! it is, as the renewal batch did: its first call said "connecting to … failed", and the
//! others `ErrorKind::Redis`, "its round trip failed", neither a connection error nor
//! transient.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use redlease::{Client, ClientBuilder, ErrorKind, LockEvents};
use redlease_testkit::proxy::Proxy;
use redlease_testkit::server::RedisServer;

use super::client_at;
use crate::helpers::wait_until;

/// What an error says of itself: its kind, whether it is a connection error, whether
/// transient, and its text.
type Said = (ErrorKind, bool, bool, String);

fn said(error: &redlease::Error) -> Said {
    (error.kind(), error.is_connection_error(), error.is_transient(), error.to_string())
}

/// The renewal failures and pub/sub disconnections a client reports.
#[derive(Default)]
struct Failures {
    renewals: Mutex<Vec<Said>>,
    subscriber: Mutex<Vec<Said>>,
    other: Mutex<Vec<String>>,
}

impl LockEvents for Failures {
    fn renewal_failed(&self, error: &redlease::Error) {
        self.renewals.lock().unwrap_or_else(|p| p.into_inner()).push(said(error));
    }

    fn lease_at_risk(&self, lock: &str, _: std::time::Instant) {
        self.other.lock().unwrap().push(format!("at risk {lock}"));
    }

    fn lease_lost(&self, lock: &str) {
        self.other.lock().unwrap().push(format!("lost {lock}"));
    }

    fn subscriber_disconnected(&self, error: &redlease::Error) {
        self.subscriber.lock().unwrap_or_else(|p| p.into_inner()).push(said(error));
    }
}

fn assert_connection(what: &str, said: &Said) {
    let (kind, connection, transient, text) = said;
    assert_eq!(*kind, ErrorKind::Connection, "{what}: {text}");
    assert!(*connection && *transient, "{what}: a connection error, transient: {text}");
}

/// A closed port on loopback: nothing listens there.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// A server behind a proxy, and a client through it, set up by `configure`, whose
/// failures are recorded.
fn behind_a_proxy(
    configure: impl FnOnce(ClientBuilder) -> ClientBuilder,
) -> (RedisServer, Proxy, Arc<Failures>, Client) {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let failures = Arc::new(Failures::default());
    let events: Arc<dyn LockEvents> = Arc::clone(&failures) as _;
    let client = client_at(&proxy.url(), |b| configure(b).events(events));
    (server, proxy, failures, client)
}

#[test]
fn a_renewal_batch_cut_off_from_its_master_reports_every_call_as_a_connection_failure() {
    let (_server, proxy, failures, client) = behind_a_proxy(|b| b.watchdog_timeout(Duration::from_millis(1500)));
    // Three kinds, three scripts: one batch of three calls.
    let plain = client.lock("kinds:plain").lock().expect("plain");
    let fair = client.fair_lock("kinds:fair").lock().expect("fair");
    let read = client.read_write_lock("kinds:doc").read().lock().expect("read");
    proxy.set_refusing(true);
    proxy.cut_all();
    assert!(
        wait_until(Duration::from_secs(5), || failures.renewals.lock().unwrap().len() >= 6),
        "renewals failed: {:?} {:?} {:?}",
        failures.renewals.lock().unwrap(),
        failures.other.lock().unwrap(),
        client.stats()
    );
    for failure in failures.renewals.lock().unwrap().iter() {
        assert_connection("a renewal", failure);
    }
    proxy.set_refusing(false);
    drop((plain, fair, read));
}

#[test]
fn every_call_against_a_server_refusing_connections_says_connection() {
    let (server, proxy, failures, client) = behind_a_proxy(|b| b.retry_budget(Duration::from_millis(300)));
    let held = client.lock("kinds:held").with_lease(Duration::from_secs(30)).lock().expect("held");
    // A waiter's pub/sub connection, up before the server goes.
    let other = client.lock("kinds:held");
    let waiter =
        thread::spawn(move || other.try_lock_for(Duration::from_secs(3)).map(|g| g.is_some()).map_err(|e| said(&e)));
    let mut direct = server.conn();
    let subscribed = || {
        let (_, n): (String, u64) =
            redis::cmd("PUBSUB").arg("NUMSUB").arg("redisson_lock__channel:{kinds:held}").query(&mut direct).unwrap();
        n == 1
    };
    assert!(wait_until(Duration::from_secs(5), subscribed), "the waiter subscribed");
    proxy.set_refusing(true);
    proxy.cut_all();
    let calls: Vec<(&str, redlease::Result<()>)> = vec![
        ("try_lock", client.lock("kinds:new").try_lock().map(drop)),
        ("is_locked", client.lock("kinds:held").is_locked().map(drop)),
        ("inspect", client.inspect("kinds:held").map(drop)),
        ("locks", client.locks("kinds:*").map(drop)),
        ("semaphore", client.semaphore("kinds:slots").try_acquire(1).map(drop)),
        ("leader", client.election("kinds:vote").leader().map(drop)),
        ("unlock", held.unlock()),
    ];
    for (what, result) in calls {
        assert_connection(what, &said(&result.expect_err(what)));
    }
    let waited = waiter.join().expect("waiter");
    if let Err(error) = &waited {
        assert_connection("a wait", error);
    }
    assert!(
        wait_until(Duration::from_secs(5), || !failures.subscriber.lock().unwrap().is_empty()),
        "the pub/sub connection's loss is reported"
    );
    for failure in failures.subscriber.lock().unwrap().iter() {
        assert_connection("the pub/sub connection", failure);
    }
}

#[test]
fn finding_the_master_behind_refusing_sentinels_or_cluster_nodes_says_connection() {
    let (a, b) = (closed_port(), closed_port());
    for url in [
        format!("redis-sentinel://127.0.0.1:{a},127.0.0.1:{b}/#mymaster"),
        format!("redis-cluster://127.0.0.1:{a},127.0.0.1:{b}"),
        format!("redis://127.0.0.1:{a}/"),
    ] {
        let error = Client::builder(url.as_str())
            .connect_timeout(Duration::from_secs(1))
            .retry_budget(Duration::from_millis(300))
            .build()
            .expect_err(&url);
        assert_connection(&url, &said(&error));
    }
}
