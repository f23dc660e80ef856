//! Ambiguous outcomes: replies lost on the wire.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, ErrorKind};

use super::{COMMAND_TIMEOUT, SLACK, hkeys, hvals};
use crate::helpers::*;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

fn keys_matching(conn: &mut redis::Connection, pattern: &str) -> Vec<String> {
    redis::cmd("KEYS").arg(pattern).query(conn).expect("KEYS")
}

/// A proxy in front of `server`, and a client through it with the short command timeout.
fn behind_a_proxy(server: &RedisServer) -> (Proxy, Client) {
    let proxy = Proxy::start(server.addr());
    let client = Client::builder(proxy.url()).command_timeout(COMMAND_TIMEOUT).build().expect("client builds");
    (proxy, client)
}

/// The acquire script runs but its reply never comes back. The caller must get `Timeout`,
/// never a guard, and the lock granted in the dark must not be left behind for its lease:
/// the library undoes it with a release of the same owner.
///
/// Breaks if the acquire reports success without a reply, or if the undo is not sent (the
/// key then lives for the whole 30 s lease).
///
/// It failed so before the undo went behind the acquire on its connection: the only pooled
/// connection was the one that timed out, which is discarded; the undo needs a new connection, and the handshake
/// of a new connection (redis-rs pipelines two `CLIENT SETINFO`) needs replies, which are
/// lost too. So the undo never reaches Redis and the lock stays orphaned for its lease, and
/// `try_lock` takes the command timeout plus twice the connect timeout (redis-rs waits the
/// full timeout for each pipelined handshake reply).
#[test]
fn an_acquire_whose_reply_is_lost_is_a_timeout_and_is_undone() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    // Connect timeout 1 s (not the default 5 s) only to keep this test short.
    let client = Client::builder(proxy.url())
        .command_timeout(COMMAND_TIMEOUT)
        .connect_timeout(Duration::from_secs(1))
        .build()
        .expect("client builds");
    let mut direct = server.conn();
    let lock = client.lock("ambiguous"); // watchdog lease: 30 s

    proxy.set_drop_replies(true);
    let started = Instant::now();
    let outcome = lock.try_lock();
    let took = started.elapsed();
    let err = match outcome {
        Ok(got) => panic!("an acquire without a reply must not succeed: got {:?}", got.map(|g| g.is_held())),
        Err(e) => e,
    };
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    // The script did run (only its reply was lost), so the key exists unless it was undone.
    let gone = wait_until(Duration::from_secs(2), || !exists(&mut direct, "ambiguous"));
    assert!(
        gone,
        "the lock granted in the dark was left behind: PTTL {} ms of its 30 s lease, 2 s after try_lock \
         returned Timeout (try_lock took {took:?}); script calls that reached Redis: {} (the acquire is one)",
        pttl(&mut direct, "ambiguous"),
        calls_of(&mut direct, "evalsha")
    );

    proxy.set_drop_replies(false);
    let guard = lock.try_lock().expect("replies flow again").expect("the lock is free");
    assert_eq!(lock.hold_count().unwrap(), 1, "exactly the one new hold, nothing left over");
    guard.unlock().unwrap();
    assert!(!exists(&mut direct, "ambiguous"));
}

/// A call whose connection drops after a reply was read on it for that call: the server's
/// script cache was emptied, so the acquire reads `NOSCRIPT`, loads the script and sends it
/// again, which Redis carries out, and the connection breaks before its reply. The pool
/// must not take that connection for one that died while idle and send the acquire a third
/// time: a connection that answered was alive, and the lost request may have run.
///
/// Breaks if the acquire is sent again: Redis then counts two holds of the owner for one
/// guard (or one guard's worth left behind after an error).
#[test]
fn a_call_that_read_a_reply_is_not_sent_again_when_its_connection_then_drops() {
    let server = RedisServer::start();
    let (proxy, client) = behind_a_proxy(&server);
    let mut direct = server.conn();
    let lock = client.lock("answered");
    // A pooled connection that has served before: the pool's candidate for "stale". The
    // client's announcement, which that acquire set off, goes through the proxy while the
    // lock is held (a client announces itself only while it holds or waits, so a release
    // before the renewal thread gets to it would leave none): the replies counted below
    // are the acquire's alone.
    let warming = lock.lock().unwrap();
    announced(&client, &mut direct);
    warming.unlock().unwrap();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut direct).unwrap();
    // NOSCRIPT and the load's answer go through; the second send runs, its reply is cut.
    proxy.cut_after_replies(2);
    let outcome = lock.try_lock();
    let counts = hvals(&mut direct, "answered");
    assert!(counts.iter().all(|&c| c <= 1), "the acquire ran twice: holds {counts:?} ({:?})", outcome.as_ref().err());
    match outcome {
        // Its outcome unknown, the acquire was undone and tried again: one hold.
        Ok(Some(guard)) => guard.unlock().unwrap(),
        Ok(None) => panic!("nobody else holds it"),
        // Its outcome unknown: the acquire is undone behind it.
        Err(err) => {
            assert!(err.is_connection_error(), "{err}");
            assert!(wait_until(Duration::from_secs(5), || !exists(&mut direct, "answered")), "undone");
        }
    }
    assert!(lock.try_lock().unwrap().is_some(), "free again");
}

/// The same lost acquire reply, with a spare connection in the pool: the undo travels on it,
/// runs on the server (its own reply is lost too), and the key is gone at once. This is the
/// mechanism the test above expects; here it has a connection to go out on.
///
/// Breaks if the undo is not sent, or is sent with another owner (the release script then
/// finds no field and the 30 s lease stays), or if the acquire reports success.
#[test]
fn an_ambiguous_acquire_is_undone_over_a_spare_pooled_connection() {
    let server = RedisServer::start();
    let (proxy, client) = behind_a_proxy(&server);
    let mut direct = server.conn();
    let lock = client.lock("ambiguous-warm");

    // Three overlapping queries (100 ms round trips) leave three connections in the pool.
    proxy.set_latency(Duration::from_millis(50));
    let barrier = Arc::new(Barrier::new(3));
    let queries: Vec<_> = (0..3)
        .map(|_| {
            let (lock, barrier) = (lock.clone(), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                lock.is_locked().unwrap()
            })
        })
        .collect();
    for q in queries {
        assert!(!q.join().unwrap());
    }
    proxy.set_latency(Duration::ZERO);
    assert!(proxy.connection_count() >= 2, "precondition: a spare pooled connection");

    proxy.set_drop_replies(true);
    let started = Instant::now();
    let err = lock.try_lock().expect_err("an acquire without a reply must not succeed");
    let took = started.elapsed();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    // The acquire is bounded by the command timeout; its undo goes out behind it, from a
    // thread of its own, without holding up the caller.
    assert!(took < COMMAND_TIMEOUT + SLACK, "try_lock took {took:?}");
    assert!(
        wait_until(Duration::from_secs(2), || !exists(&mut direct, "ambiguous-warm")),
        "the undo removed the hold granted in the dark"
    );

    proxy.set_drop_replies(false);
    let guard = lock.try_lock().unwrap().expect("the lock is free");
    assert_eq!(lock.hold_count().unwrap(), 1);
    guard.unlock().unwrap();
    assert!(!exists(&mut direct, "ambiguous-warm"));
}

/// An acquire delayed on the wire past the command timeout still runs when it arrives. The
/// undo (a release of the same owner) must not leave it behind: if the undo reaches Redis
/// first it finds nothing to release, and the late acquire then grants a lock that nobody
/// holds a guard for, for its whole lease.
///
/// Breaks if the undo can overtake the acquire it undoes: the key then stays for 30 s and
/// every other owner is locked out.
///
/// It failed so before the undo went behind the acquire on its connection: the undo went
/// out on a new connection (the timed-out one was discarded), so nothing ordered it after
/// the acquire.
#[test]
fn an_acquire_delayed_past_its_timeout_is_not_left_behind_by_its_undo() {
    let server = RedisServer::start();
    let (proxy, proxied) = behind_a_proxy(&server);
    let mut direct = server.conn();
    let lock = proxied.lock("overtaken");
    // The client announces itself when it first holds something, from its renewal thread,
    // on a connection of its own: done here, before the latency, so that the one request
    // held up below is the acquire (the announcement once was, on a loaded machine, and the
    // acquire went through undelayed and was granted).
    // The warm-up guard is held until the announcement is written: released at once, the
    // renewal thread found the client idle when it woke on a loaded machine and wrote none.
    let warm_up = proxied.lock("overtaken-warm").lock().expect("warm-up");
    announced(&proxied, &mut direct);
    warm_up.unlock().expect("warm-up");
    let evalsha_before = calls_of(&mut direct, "evalsha");

    // The acquire is held up for 1 s on its way to Redis (a retransmission, a congested
    // link); what is sent after it left, the undo included, travels without delay. The
    // latency is lifted once the proxy holds the acquire in its delay queue (lifted at a
    // fixed moment, a loaded machine once sent the acquire after it, and it was granted),
    // and before the command timeout: the undo is sent only after that.
    let delayed = proxy.requests_delayed();
    proxy.set_latency(Duration::from_secs(1));
    let outcome = thread::scope(|scope| {
        scope.spawn(|| {
            assert!(
                wait_until(Duration::from_secs(5), || proxy.requests_delayed() > delayed),
                "the acquire is held up"
            );
            proxy.set_latency(Duration::ZERO);
        });
        lock.try_lock()
    });
    let err = outcome.expect_err("no reply within the command timeout: must be an error");
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    // Both the acquire and its undo have run, in whatever order ...
    assert!(wait_until(Duration::from_secs(3), || calls_of(&mut direct, "evalsha") - evalsha_before >= 2));
    // ... and no hold may be left behind.
    let gone = wait_until(Duration::from_secs(1), || !exists(&mut direct, "overtaken"));
    assert!(
        gone,
        "the late acquire outlived its undo: fields {:?}, PTTL {} ms of its 30 s lease",
        hkeys(&mut direct, "overtaken"),
        pttl(&mut direct, "overtaken")
    );
    let other = client(&server);
    let guard = other.lock("overtaken").try_lock().unwrap().expect("nobody holds the lock");
    guard.unlock().unwrap();
}

/// A release whose reply is lost is sent again with the same request id; the latch makes
/// the second send replay the first one's outcome, so exactly one of two holds is released.
///
/// Breaks if the retry uses a new request id (checked by breaking it on purpose: both holds
/// went, hold count 0 and the key deleted), or if there is no retry (`unlock()` is
/// `Err(Timeout)`).
#[test]
fn a_release_whose_reply_is_lost_is_retried_and_releases_exactly_one_hold() {
    let server = RedisServer::start();
    let (proxy, client) = behind_a_proxy(&server);
    let mut direct = server.conn();
    let lock = client.lock("retried");
    let first = lock.lock().unwrap();
    let second = lock.lock().unwrap();
    assert_eq!(hvals(&mut direct, "retried"), [2]);

    let evalsha_before = calls_of(&mut direct, "evalsha");
    let dropped = proxy.replies_dropped();
    // The first release's reply is lost; its retry, and what the client's renewal thread
    // writes meanwhile, get theirs.
    proxy.drop_reply_to(b"EVALSHA");
    let unlocked = second.unlock();
    assert_eq!(proxy.replies_dropped() - dropped, 1, "the first release's reply was lost");
    assert!(unlocked.is_ok(), "the retry got the replayed outcome: {unlocked:?}");
    // Two sends of the release script (the first reply lost, the retry answered) ...
    assert_eq!(calls_of(&mut direct, "evalsha") - evalsha_before, 2, "one release and one retry");
    // ... and exactly one hold released: the latch replayed the first outcome.
    assert_eq!(hvals(&mut direct, "retried"), [1], "exactly one of the two holds is gone");
    assert_eq!(lock.hold_count().unwrap(), 1);
    let latches = keys_matching(&mut direct, "redisson_unlock_latch:{retried}:*");
    assert_eq!(latches.len(), 1, "one latch for the one request: {latches:?}");
    let stored: String = redis::cmd("GET").arg(&latches[0]).query(&mut direct).unwrap();
    assert_eq!(stored, "0", "the latch holds the outcome \"one hold released, still held\"");
    assert!(first.is_held());
    first.unlock().unwrap();
    assert!(!exists(&mut direct, "retried"));
}

/// The reply to the release of the *last* hold is lost. That release writes no latch (only
/// a release that leaves holds does), so the retry finds no field of this owner: the client
/// must take that as done, not as `NotHeld`, and the lock must be free exactly once.
///
/// Breaks if the retry's "nothing held" were reported as an error, or if the first release
/// had not run (the key would remain).
#[test]
fn a_lost_reply_to_the_last_release_is_retried_and_reported_done() {
    let server = RedisServer::start();
    let (proxy, client) = behind_a_proxy(&server);
    let mut direct = server.conn();
    let guard = client.lock("last-release").lock().unwrap();
    let evalsha_before = calls_of(&mut direct, "evalsha");
    let dropped = proxy.replies_dropped();
    proxy.drop_reply_to(b"EVALSHA");
    let unlocked = guard.unlock();
    assert_eq!(proxy.replies_dropped() - dropped, 1, "the first release's reply was lost");
    assert!(unlocked.is_ok(), "a retry that finds nothing of this owner means done: {unlocked:?}");
    assert_eq!(calls_of(&mut direct, "evalsha") - evalsha_before, 2, "one release and one retry");
    assert!(keys_matching(&mut direct, "redisson_unlock_latch:{last-release}:*").is_empty(), "no latch was needed");
    assert!(!client.lock("last-release").is_locked().unwrap());
}
