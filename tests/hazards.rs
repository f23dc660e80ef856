//! Hazards: faults on the wire and in the keyspace that a lease-based lock must survive, or
//! at least report. Acquires and releases whose replies are lost, lock keys evicted, made
//! persistent, deleted or expired behind the library's back, release messages from another
//! database, a holder frozen past its lease, and a Redis that stops answering for a while.
//!
//! Every test says in a comment what would make it fail.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, ErrorKind, LeaseState, LockEvents};

use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] = &[("hazard_paused_holder", paused_holder)];

/// Slack on top of every timing bound: the machine may be busy running benchmarks, so the
/// bounds are sanity checks, not measurements.
const SLACK: Duration = Duration::from_millis(400);

/// Command timeout of the clients that meet lost replies or a paused Redis.
const COMMAND_TIMEOUT: Duration = Duration::from_millis(300);

fn hkeys(conn: &mut redis::Connection, key: &str) -> Vec<String> {
    redis::cmd("HKEYS").arg(key).query(conn).expect("HKEYS")
}

fn hvals(conn: &mut redis::Connection, key: &str) -> Vec<u64> {
    redis::cmd("HVALS").arg(key).query(conn).expect("HVALS")
}

fn keys_matching(conn: &mut redis::Connection, pattern: &str) -> Vec<String> {
    redis::cmd("KEYS").arg(pattern).query(conn).expect("KEYS")
}

fn config_set(conn: &mut redis::Connection, name: &str, value: &str) {
    redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query::<()>(conn).expect("CONFIG SET");
}

fn used_memory(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(conn).expect("INFO memory");
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO memory")
}

/// `redis://127.0.0.1:PORT/DB`.
fn url_with_db(server: &RedisServer, db: u32) -> String {
    format!("redis://127.0.0.1:{}/{db}", server.port())
}

/// Counts lost leases.
#[derive(Default)]
struct Losses(AtomicUsize);

impl Losses {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl LockEvents for Losses {
    fn lease_lost(&self, _lock: &str) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A client whose lost leases are counted in the returned `Losses`.
fn counting_client(server: &RedisServer, watchdog: Duration) -> (Client, Arc<Losses>) {
    let losses = Arc::new(Losses::default());
    let events: Arc<dyn LockEvents> = Arc::clone(&losses) as _;
    (client_with(server, |b| b.watchdog_timeout(watchdog).events(events)), losses)
}

// -----------------------------------------------------------------------------------------
// Ambiguous outcomes: replies lost on the wire
// -----------------------------------------------------------------------------------------

/// The acquire script runs but its reply never comes back. The caller must get `Timeout`,
/// never a guard, and the lock granted in the dark must not be left behind for its lease:
/// the library undoes it with a release of the same owner.
///
/// Breaks if the acquire reports success without a reply, or if the undo is not sent (the
/// key then lives for the whole 30 s lease).
///
/// FAILS with redlease as it is (see the report): the only pooled connection is the one
/// that timed out, which is discarded; the undo needs a new connection, and the handshake
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
    let proxy = Proxy::start(server.addr());
    let client = Client::builder(proxy.url()).command_timeout(COMMAND_TIMEOUT).build().expect("client builds");
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
    let proxy = Proxy::start(server.addr());
    let client = Client::builder(proxy.url()).command_timeout(COMMAND_TIMEOUT).build().expect("client builds");
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
/// FAILS with redlease as it is (see the report): the undo goes out on a new connection
/// (the timed-out one is discarded), so nothing orders it after the acquire.
#[test]
fn an_acquire_delayed_past_its_timeout_is_not_left_behind_by_its_undo() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let proxied = Client::builder(proxy.url()).command_timeout(COMMAND_TIMEOUT).build().expect("client builds");
    let mut direct = server.conn();
    let lock = proxied.lock("overtaken");
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
    let proxy = Proxy::start(server.addr());
    let client = Client::builder(proxy.url()).command_timeout(COMMAND_TIMEOUT).build().expect("client builds");
    let mut direct = server.conn();
    let lock = client.lock("retried");
    let first = lock.lock().unwrap();
    let second = lock.lock().unwrap();
    assert_eq!(hvals(&mut direct, "retried"), [2]);

    let evalsha_before = calls_of(&mut direct, "evalsha");
    let dropped = proxy.replies_dropped();
    proxy.set_drop_replies(true);
    let (unlocked, healed) = thread::scope(|scope| {
        // Lets replies through again as soon as the first release has run on the server and
        // its reply was dropped, long before the library's command timeout fires: its retry
        // then gets an answer.
        let healer = scope.spawn(|| {
            let mut conn = server.conn();
            let ran = wait_until(Duration::from_secs(5), || {
                hvals(&mut conn, "retried") == [1] && proxy.replies_dropped() > dropped
            });
            proxy.set_drop_replies(false);
            ran
        });
        let unlocked = second.unlock();
        (unlocked, healer.join().unwrap())
    });
    proxy.set_drop_replies(false);
    assert!(healed, "the first release ran on the server");
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
    let proxy = Proxy::start(server.addr());
    let client = Client::builder(proxy.url()).command_timeout(COMMAND_TIMEOUT).build().expect("client builds");
    let mut direct = server.conn();
    let guard = client.lock("last-release").lock().unwrap();
    let evalsha_before = calls_of(&mut direct, "evalsha");
    let dropped = proxy.replies_dropped();
    proxy.set_drop_replies(true);
    let (unlocked, healed) = thread::scope(|scope| {
        let healer = scope.spawn(|| {
            let mut conn = server.conn();
            // Ran is not enough: the reply may still be on its way through the proxy.
            let ran = wait_until(Duration::from_secs(5), || {
                !exists(&mut conn, "last-release") && proxy.replies_dropped() > dropped
            });
            proxy.set_drop_replies(false);
            ran
        });
        let unlocked = guard.unlock();
        (unlocked, healer.join().unwrap())
    });
    proxy.set_drop_replies(false);
    assert!(healed, "the first release ran on the server");
    assert!(unlocked.is_ok(), "a retry that finds nothing of this owner means done: {unlocked:?}");
    assert_eq!(calls_of(&mut direct, "evalsha") - evalsha_before, 2, "one release and one retry");
    assert!(keys_matching(&mut direct, "redisson_unlock_latch:{last-release}:*").is_empty(), "no latch was needed");
    assert!(!client.lock("last-release").is_locked().unwrap());
}

// -----------------------------------------------------------------------------------------
// Keyspace hazards
// -----------------------------------------------------------------------------------------

/// Eviction under `allkeys-random`: Redis drops the lock key to make room. The holder must
/// learn of it at its next renewal, and a waiter (woken by nothing: eviction publishes no
/// message) must get the lock within the holder's TTL.
///
/// Breaks if the renewal does not report a missing key as lost (checked by making the renew
/// script answer "renewed" for every lease: the guard then reads held for ever), if it
/// re-creates the key (the waiter would never get in), or if the waiter's park were not
/// bounded by the holder's TTL.
#[test]
fn an_evicted_lock_key_is_reported_lost_and_a_waiter_acquires() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let (holder, losses) = counting_client(&server, watchdog);
    let guard = holder.lock("evicted").lock().unwrap();
    let waiter = client(&server);
    let lock = waiter.lock("evicted");
    let waiting = thread::spawn(move || {
        let got = lock.try_lock_for(Duration::from_secs(8)).unwrap();
        (got.as_ref().is_some_and(|g| g.is_held()), Instant::now())
    });
    assert!(wait_until(Duration::from_secs(5), || waiter.stats().waiters == 1));

    // Room for about a hundred 4 KiB values: each SET after that evicts a random key, so
    // the lock key goes within a few hundred SETs (each has a 1 in ~100 chance of taking
    // it). Provoked for real: no DEL needed.
    let mut conn = server.conn();
    let limit = used_memory(&mut conn) + 512 * 1024;
    config_set(&mut conn, "maxmemory-policy", "allkeys-random");
    config_set(&mut conn, "maxmemory", &limit.to_string());
    let value = vec![b'x'; 4096];
    let mut evicted_at = None;
    for i in 0..20_000u32 {
        // SET and EXISTS in one round trip: eviction happens before the SET runs.
        let (_, present): ((), bool) =
            redis::pipe().set(format!("filler:{i}"), &value[..]).exists("evicted").query(&mut conn).unwrap();
        if !present {
            evicted_at = Some((Instant::now(), i));
            break;
        }
    }
    config_set(&mut conn, "maxmemory", "0"); // no more evictions: the waiter's lock must stay
    let (evicted_at, sets) = evicted_at.expect("the lock key was evicted within 20000 SETs");
    let evicted_keys: u64 = {
        let info: String = redis::cmd("INFO").arg("stats").query(&mut conn).unwrap();
        info.lines().find_map(|l| l.strip_prefix("evicted_keys:")).unwrap().trim().parse().unwrap()
    };
    assert!(evicted_keys > 0, "gone by eviction, after {sets} SETs");

    assert!(wait_until(Duration::from_secs(3), || !guard.is_held()), "the holder learns of the eviction");
    let seen = evicted_at.elapsed();
    assert!(seen < watchdog / 3 + SLACK, "eviction seen after {seen:?}; renewal interval {:?}", watchdog / 3);
    assert_eq!(guard.lease_state(), LeaseState::Lost);
    assert!(wait_until(Duration::from_secs(1), || losses.count() == 1), "lease_lost is called");

    let (acquired, at) = waiting.join().unwrap();
    assert!(acquired, "the waiter got the evicted lock");
    let waited = at.saturating_duration_since(evicted_at);
    assert!(waited < watchdog + SLACK, "the waiter got in {waited:?} after the eviction (holder's TTL <= 1 s)");
    assert_eq!(guard.unlock().unwrap_err().kind(), ErrorKind::NotHeld);
}

/// `PERSIST` strips the lock key's expiry (an operator's mistake, or a script's). Waiters
/// see a TTL of -1; a timed wait must still end at its deadline, and queries report the
/// missing expiry as `Duration::MAX`. A real release still wakes a waiter.
///
/// Breaks if a TTL of -1 is read as "sleep for ever" or as "sleep one watchdog timeout"
/// without regard to the caller's deadline (checked by breaking it on purpose: the 500 ms
/// wait then took the waiter's whole watchdog timeout), or if the release message stops
/// waking waiters once there is no TTL to fall back on.
#[test]
fn a_persisted_lock_key_does_not_stretch_a_timed_wait() {
    let server = RedisServer::start();
    let holder = client(&server); // 30 s watchdog: no renewal restores the TTL during the test
    let guard = holder.lock("persisted").lock().unwrap();
    let mut conn = server.conn();
    let persisted: bool = redis::cmd("PERSIST").arg("persisted").query(&mut conn).unwrap();
    assert!(persisted);
    assert_eq!(pttl(&mut conn, "persisted"), -1);

    // A key without TTL is looked at again once per watchdog timeout: 5 s here, so a wait
    // that ignored its deadline would take 5 s (and a broken run stays short).
    let waiter = client_with(&server, |b| b.watchdog_timeout(Duration::from_secs(5)));
    let lock = waiter.lock("persisted");
    assert_eq!(lock.remaining_ttl().unwrap(), Some(Duration::MAX));
    let wait = Duration::from_millis(500);
    let started = Instant::now();
    let got = lock.try_lock_for(wait).unwrap();
    let took = started.elapsed();
    assert!(got.is_none(), "held by the holder");
    assert!(took >= wait && took < wait + SLACK, "a {wait:?} wait took {took:?}");
    assert_eq!(waiter.stats().waiters, 0, "the waiter left");

    // The release deletes the persistent key and wakes a waiter at once (nothing else bounds
    // its park but the 5 s recheck).
    let waiting = thread::spawn(move || {
        let got = lock.try_lock_for(Duration::from_secs(8)).unwrap();
        (got.is_some(), Instant::now())
    });
    assert!(wait_until(Duration::from_secs(5), || waiter.stats().waiters == 1));
    let released = Instant::now();
    guard.unlock().unwrap();
    let (acquired, at) = waiting.join().unwrap();
    assert!(acquired);
    let waited = at.saturating_duration_since(released);
    assert!(waited < Duration::from_secs(1), "woken by the release after {waited:?}");
}

/// Pub/sub channels are not database-scoped: a client on db 1 locking and unlocking a lock
/// of the same name publishes on the very channel a db-0 waiter listens on. Those messages
/// wake the db-0 waiter, but it must only re-check (the db-0 lock is still held), and it
/// must still get in promptly when the db-0 holder really releases.
///
/// Breaks if db-1 activity could hand the db-0 waiter a guard while the db-0 holder holds
/// (keys or grants mixed up across databases), if the foreign wake-ups cut the timed wait
/// short (checked by breaking it on purpose: it returned after 0.7 ms), or if the stream of
/// foreign messages kept the waiter from taking the real release.
#[test]
fn release_messages_from_another_database_do_not_let_a_waiter_in() {
    let server = RedisServer::start();
    let db0_holder = Client::builder(url_with_db(&server, 0)).build().unwrap();
    let db0_waiter = Client::builder(url_with_db(&server, 0)).build().unwrap();
    let db1_noise = Client::builder(url_with_db(&server, 1)).build().unwrap();
    let guard = db0_holder.lock("shared-name").lock().unwrap();
    let mut conn = server.conn();
    let evalsha_before = calls_of(&mut conn, "evalsha");

    let stop = AtomicBool::new(false);
    let cycles = AtomicU64::new(0);
    let (got, waited) = thread::scope(|scope| {
        let noise = scope.spawn(|| {
            let lock = db1_noise.lock("shared-name");
            while !stop.load(Ordering::SeqCst) {
                lock.lock().unwrap().unlock().unwrap(); // free on db 1; publishes on release
                cycles.fetch_add(1, Ordering::SeqCst);
            }
        });
        let started = Instant::now();
        let got = db0_waiter.lock("shared-name").try_lock_for(Duration::from_millis(1500)).unwrap().is_some();
        let waited = started.elapsed();
        stop.store(true, Ordering::SeqCst);
        noise.join().unwrap();
        (got, waited)
    });
    assert!(!got, "the db-0 waiter got in while the db-0 holder held the lock");
    assert!(waited >= Duration::from_millis(1500), "the foreign messages cut the wait short: {waited:?}");
    assert!(waited < Duration::from_millis(1500) + SLACK, "a 1.5 s wait took {waited:?}");
    let cycles = cycles.load(Ordering::SeqCst);
    assert!(cycles >= 10, "the db-1 client published only {cycles} times");
    // The hazard was real: every db-1 cycle is two script calls (acquire, release); the
    // rest are the db-0 waiter's attempts: its first, the one after subscribing, and one per
    // wake-up by a db-1 message.
    let waiter_attempts = (calls_of(&mut conn, "evalsha") - evalsha_before).saturating_sub(2 * cycles);
    assert!(waiter_attempts >= 5, "db-1 messages woke the db-0 waiter ({waiter_attempts} attempts)");
    assert_eq!(hkeys(&mut conn, "shared-name").len(), 1, "the db-0 holder still holds");
    assert!(guard.is_held());

    let lock = db0_waiter.lock("shared-name");
    let waiting = thread::spawn(move || {
        let got = lock.try_lock_for(Duration::from_secs(8)).unwrap();
        (got.is_some(), Instant::now())
    });
    assert!(wait_until(Duration::from_secs(5), || db0_waiter.stats().waiters == 1));
    let released = Instant::now();
    guard.unlock().unwrap();
    let (acquired, at) = waiting.join().unwrap();
    assert!(acquired, "the db-0 waiter gets the lock once the db-0 holder releases");
    let waited = at.saturating_duration_since(released);
    assert!(waited < Duration::from_secs(1), "woken by the release after {waited:?} (the lease is 30 s)");
}

// -----------------------------------------------------------------------------------------
// Detection of a lost lease
// -----------------------------------------------------------------------------------------

/// Lock name of the frozen-holder test.
const FROZEN: &str = "frozen";
/// The frozen holder's watchdog timeout (renewal every 200 ms).
const FROZEN_WATCHDOG: Duration = Duration::from_millis(600);
/// A jump of the monotonic clock between two looks this long means the process was stopped.
const FROZEN_GAP: Duration = Duration::from_millis(400);

/// Child role: takes FROZEN with a 600 ms watchdog, says "held", then watches `is_held()`
/// every millisecond, saying each transition. Once resumed from a stop (seen as a jump of
/// the monotonic clock), it says how many ms after resuming its guard first read
/// `is_held() == false`, and at which CLOCK_MONOTONIC time, then the outcome of `unlock()`.
fn paused_holder() {
    let client = Client::builder(child::env("REDIS_URL")).watchdog_timeout(FROZEN_WATCHDOG).build().unwrap();
    let guard = client.lock(FROZEN).lock().unwrap();
    // Read before saying "held": the parent may stop this process right after that line,
    // and the stop must show up as a jump from here at the latest.
    let mut last = monotonic_ns();
    child::say("held");
    let gap = FROZEN_GAP.as_nanos() as u64;
    let end = Instant::now() + Duration::from_secs(20);
    let mut resumed_at: Option<u64> = None;
    let mut held = true;
    loop {
        let before = monotonic_ns();
        let now_held = guard.is_held();
        let after = monotonic_ns();
        // The latest jump counts (a long scheduling stall before the stop must not).
        if before - last > gap || after - before > gap {
            resumed_at = Some(if before - last > gap { before } else { after });
            child::say(&format!("resumed after a {} ms gap", (before - last).max(after - before) / 1_000_000));
        }
        if now_held != held {
            held = now_held;
            child::say(&format!("is_held {now_held} at {after}"));
        }
        if !now_held {
            match resumed_at {
                Some(resumed) => child::say(&format!(
                    "lost {} ms after resuming, at {after}",
                    after.saturating_sub(resumed) / 1_000_000
                )),
                None => child::say("lost before any pause"),
            }
            break;
        }
        if Instant::now() >= end {
            child::say("lost never seen");
            break;
        }
        last = after;
        thread::sleep(Duration::from_millis(1));
    }
    let unlock = guard.unlock().map_err(|e| e.kind());
    child::say(&format!("unlock {unlock:?}"));
}

/// A holder process frozen by SIGSTOP for twice its lease (a GC pause, a stopped VM) loses
/// the lock to another process. On resuming, its guard must say so within one renewal
/// interval, its `unlock()` must be `NotHeld`, and the new holder's key must be untouched.
///
/// Breaks if the resumed guard goes on reading held for more than a renewal interval (it
/// knows at once from its local deadline, which passed while it was frozen, and would know
/// from its overdue renewal, which runs as soon as it resumes), if its `unlock()` reports
/// success, or if its unlock or its renewal disturbs the new holder's key.
#[test]
fn a_holder_frozen_past_its_lease_sees_the_loss_on_resuming_and_leaves_the_new_holder_alone() {
    let server = RedisServer::start();
    let mut frozen = Child::spawn("hazard_paused_holder", &[("REDIS_URL", server.url())]);
    frozen.wait_line("held", Duration::from_secs(10));
    frozen.stop();
    let stopped = Instant::now();

    let client = client(&server);
    let guard = client.lock(FROZEN).try_lock_for(Duration::from_secs(5)).unwrap().expect("the frozen lease ran out");
    let mut conn = server.conn();
    let fields = hkeys(&mut conn, FROZEN);
    assert!(fields.len() == 1 && fields[0].starts_with(client.id()), "the new holder holds: {fields:?}");

    // Frozen for twice the lease in all.
    let frozen_for = FROZEN_WATCHDOG * 2;
    thread::sleep(frozen_for.saturating_sub(stopped.elapsed()));
    let resumed_ns = monotonic_ns();
    frozen.cont();

    let lost = frozen.wait_line("lost", Duration::from_secs(5));
    let after_ms: u64 = lost
        .strip_prefix("lost ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("the child saw the loss before its pause, or never: {lost:?}"));
    let at_ns: u64 = lost.rsplit(' ').next().unwrap().parse().unwrap();
    let renewal_interval = FROZEN_WATCHDOG / 3;
    // As the child measured it, from the clock jump it saw ...
    assert!(Duration::from_millis(after_ms) < renewal_interval + SLACK, "{lost}; lines {:?}", frozen.lines());
    // ... and from when this process sent SIGCONT (same CLOCK_MONOTONIC).
    let since_cont = Duration::from_nanos(at_ns.saturating_sub(resumed_ns));
    assert!(since_cont < renewal_interval + SLACK, "loss seen {since_cont:?} after SIGCONT; {lost}");
    assert_eq!(
        frozen.wait_line("unlock", Duration::from_secs(5)),
        format!("unlock {:?}", Err::<(), _>(ErrorKind::NotHeld))
    );
    assert!(frozen.wait(Duration::from_secs(10)).success());

    // The new holder's key: its field, one hold, and a live lease (the resumed child's
    // renewal found its own field gone and touched nothing).
    let fields = hkeys(&mut conn, FROZEN);
    assert!(fields.len() == 1 && fields[0].starts_with(client.id()), "new holder's field intact: {fields:?}");
    assert_eq!(hvals(&mut conn, FROZEN), [1]);
    assert!(pttl(&mut conn, FROZEN) > 0);
    assert!(guard.is_held());
    guard.unlock().unwrap();
    assert!(!exists(&mut conn, FROZEN));
}

/// The lock key vanishes under a live holder: deleted (`DEL`, as a careless script would)
/// or expired (`PEXPIRE 1`). The next renewal finds the owner's field gone; the guard must
/// read lost within one renewal interval, `lease_lost` must be called exactly once per loss,
/// and the renewal must not bring the key back.
///
/// Breaks if the renewal script re-creates or keeps the key, if the loss is seen only at the
/// local deadline (900 ms after the last renewal, not 300), or if `lease_lost` is called
/// twice (say once by the renewal and again when the local deadline passes) or not at all.
#[test]
fn a_lock_key_deleted_or_expired_under_its_holder_is_reported_lost_once() {
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(900);
    let (client, losses) = counting_client(&server, watchdog);
    let mut conn = server.conn();
    for (round, how) in ["DEL", "PEXPIRE"].into_iter().enumerate() {
        let name = format!("vanishing-{how}");
        let guard = client.lock(&*name).lock().unwrap();
        // Strike right after a renewal: the next one is a full renewal interval away, and
        // the local deadline a whole watchdog timeout away.
        let renewed = client.stats().leases_renewed;
        assert!(wait_until(Duration::from_secs(3), || client.stats().leases_renewed > renewed));
        match how {
            "DEL" => redis::cmd("DEL").arg(&name).query::<()>(&mut conn).unwrap(),
            _ => redis::cmd("PEXPIRE").arg(&name).arg(1).query::<()>(&mut conn).unwrap(),
        }
        let struck = Instant::now();
        assert!(wait_until(Duration::from_secs(3), || !guard.is_held()), "{how}: the loss is seen");
        let seen = struck.elapsed();
        assert!(seen < watchdog / 3 + Duration::from_millis(300), "{how}: loss seen after {seen:?}");
        assert_eq!(guard.lease_state(), LeaseState::Lost);
        assert!(wait_until(Duration::from_secs(1), || losses.count() == round + 1), "{how}: lease_lost called");
        // Past the local deadline and two more renewal intervals: no second call, no key.
        thread::sleep(watchdog.saturating_sub(struck.elapsed()) + watchdog / 3 * 2);
        assert_eq!(losses.count(), round + 1, "{how}: lease_lost called exactly once");
        assert!(!exists(&mut conn, &name), "{how}: the renewal did not bring the key back");
        assert_eq!(guard.unlock().unwrap_err().kind(), ErrorKind::NotHeld);
        assert_eq!(client.stats().renewals_scheduled, 0);
    }
}

// -----------------------------------------------------------------------------------------
// A paused Redis
// -----------------------------------------------------------------------------------------

/// `CLIENT PAUSE ... ALL` holds back every command: an acquire must come back with a
/// timeout within about the command timeout, not when the pause ends, and leave nothing.
/// The retry budget is zero: the client's announcement, which a first acquisition starts,
/// may take the one pooled connection, and the acquire then opens another, whose handshake
/// gets no answer either; with a budget, that connection (nothing sent on it) would be
/// tried again for the budget's 3 s (seen once on a loaded machine: 3.58 s).
///
/// Breaks if `try_lock` waits for Redis instead of its timeout (checked by clearing the
/// connections' read timeout on purpose: the acquire then waited out the pause and returned
/// a guard), reports anything but a timeout, or leaves the key behind.
#[test]
fn an_acquire_against_a_paused_redis_times_out_and_leaves_nothing() {
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .command_timeout(COMMAND_TIMEOUT)
        .retry_budget(Duration::ZERO)
        .build()
        .expect("client builds");
    let lock = client.lock("paused");
    let mut admin = server.conn();
    // Long enough that a test thread held up on a loaded machine still sends its acquire
    // inside the pause (with 2 s, one got there after it and was granted).
    let pause = Duration::from_secs(5);
    redis::cmd("CLIENT").arg("PAUSE").arg(pause.as_millis() as u64).arg("ALL").query::<()>(&mut admin).unwrap();
    let paused = Instant::now();
    let err = lock.try_lock().expect_err("no reply while Redis is paused: must be an error");
    let took = paused.elapsed();
    assert!(took < pause, "the acquire was sent and answered inside the pause: {took:?}");
    assert!(err.is_timeout(), "{err}");
    // The acquire times out: one command timeout (its undo goes out behind it on the same
    // connection, from a thread of its own).
    assert!(took < COMMAND_TIMEOUT + SLACK, "try_lock took {took:?} against a {pause:?} pause");
    // Returns when the pause ends: every command is held back until then.
    let _: String = redis::cmd("PING").query(&mut admin).unwrap();
    assert!(paused.elapsed() + Duration::from_millis(50) >= pause, "the pause was real");
    assert!(wait_until(Duration::from_secs(2), || !exists(&mut admin, "paused")), "nothing left behind");
    let guard = lock.try_lock().unwrap().expect("usable after the pause");
    assert!(guard.is_held());
    guard.unlock().unwrap();
    assert!(!exists(&mut admin, "paused"));
}

/// Redis restarts under callers: a `lock()`, an `unlock()` and a query made while it is
/// down ride the restart out within the retry budget; a caller's own deadline still ends
/// its wait; with a budget of zero the first connection error comes back at once.
///
/// Breaks if calls fail at the first refused connection despite the budget (no retry), if
/// a retry runs past the caller's deadline, or if a zero budget still retries.
#[test]
fn calls_ride_out_a_restart_within_the_retry_budget_and_never_past_their_deadline() {
    let mut server = RedisServer::start();
    let patient = client_with(&server, |b| b.retry_budget(Duration::from_secs(10)));
    let impatient = client_with(&server, |b| b.retry_budget(Duration::ZERO));
    let held = patient.lock("restart-held").lock().expect("held");
    let lock = patient.lock("restart-new");
    server.kill();

    let started = Instant::now();
    let err = impatient.lock("restart-new").try_lock().expect_err("down, no budget");
    assert!(err.is_connection_error(), "{err}");
    assert!(started.elapsed() < SLACK * 2, "no budget: at once ({:?})", started.elapsed());

    let started = Instant::now();
    let err = lock.try_lock_for(Duration::from_millis(300)).expect_err("down past the deadline");
    assert!(err.is_connection_error(), "{err}");
    let took = started.elapsed();
    assert!(took < Duration::from_millis(300) + SLACK, "the deadline ends the retries: {took:?}");

    let restarter = thread::spawn(move || {
        thread::sleep(Duration::from_millis(800));
        server.start_again();
        server
    });
    let started = Instant::now();
    let guard = lock.lock().expect("lock() rides out the restart");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(700), "it waited for the server: {took:?}");
    assert!(guard.is_held());
    assert_eq!(lock.hold_count().expect("a query after the restart"), 1);
    guard.unlock().expect("released");
    // The lock held across the restart was lost with the data (no persistence).
    assert_eq!(held.unlock().expect_err("lost in the restart").kind(), ErrorKind::NotHeld);
    let server = restarter.join().expect("restarter");
    assert!(!exists(&mut server.conn(), "restart-new"));
}

/// Redis is down for 1.5 s, six times a 250 ms retry budget. `lock()` (no deadline) rides
/// it out and gets the lock once Redis is back, having said once that it waits through an
/// outage; a `try_lock()` gives up within the budget; a second `lock()`, interrupted while
/// Redis is down, ends at once.
///
/// Breaks if a wait without deadline gives up at the retry budget (it returned the
/// connection error after 250 ms), if it never says it is riding an outage out, if calls
/// that do not wait lose their budget, or if an interrupt waits for Redis.
#[test]
fn lock_rides_out_an_outage_longer_than_the_budget_and_says_so() {
    let mut server = RedisServer::start();
    let outages = Arc::new(Outages::default());
    let events: Arc<dyn LockEvents> = outages.clone();
    let budget = Duration::from_millis(250);
    let client = client_with(&server, |b| b.retry_budget(budget).events(events));
    client.lock("outage-warm").lock().unwrap().unlock().unwrap();
    server.kill();
    let waiting = {
        let lock = client.lock("outage");
        thread::spawn(move || {
            let started = Instant::now();
            let got = lock.lock().and_then(|guard| guard.unlock());
            (got, started.elapsed())
        })
    };
    let (interrupter_tx, interrupter_rx) = std::sync::mpsc::channel();
    let interrupted = {
        let lock = client.lock("outage-interrupted");
        thread::spawn(move || {
            interrupter_tx.send(redlease::Interrupter::current()).unwrap();
            let started = Instant::now();
            (lock.lock().map(drop), started.elapsed())
        })
    };
    let started = Instant::now();
    let err = client.lock("outage-single").try_lock().expect_err("down");
    assert!(err.is_connection_error(), "{err}");
    assert!(started.elapsed() < budget + SLACK, "a single attempt keeps the budget: {:?}", started.elapsed());
    thread::sleep(Duration::from_millis(700));
    let interrupt_sent = Instant::now();
    interrupter_rx.recv().unwrap().interrupt();
    let (result, _) = interrupted.join().unwrap();
    assert!(result.expect_err("interrupted").is_interrupted());
    assert!(interrupt_sent.elapsed() < SLACK, "at once: {:?}", interrupt_sent.elapsed());
    thread::sleep(Duration::from_millis(800));
    server.start_again();
    let (got, took) = waiting.join().unwrap();
    got.expect("lock() got the lock once Redis was back");
    assert!(took >= Duration::from_millis(1400), "it waited for Redis: {took:?}");
    assert_eq!(outages.count(), 2, "each wait said it once (the interrupted one too)");
    assert_eq!(client.stats().waits_through_outage, 2);
}

/// The holder's server refuses connections from the moment `unlock()` begins until 150 ms
/// before the guard's fixed lease ends. The release keeps trying until then, its last try
/// a moment before the lease's end: the unlock succeeds and the lock is free at once.
///
/// Breaks if the retries end as soon as the next pause (up to 1 s) would pass the lease's
/// end (seen: the unlock returned the connection error and the lock stayed held to its
/// expiry, in 3 of 5 runs), or if they go on past it.
#[test]
fn a_release_rides_out_refused_connections_until_its_lease_ends() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let client = Client::builder(proxy.url())
        .command_timeout(COMMAND_TIMEOUT)
        .retry_budget(Duration::from_secs(30))
        .build()
        .expect("client builds");
    let lease = Duration::from_secs(2);
    let guard = client.lock("release-to-the-end").with_lease(lease).lock().unwrap();
    let valid_until = guard.valid_until().expect("a fixed lease ends");
    let heal_at = valid_until - Duration::from_millis(150);
    proxy.set_refusing(true);
    proxy.cut_all();
    let (unlocked, took) = thread::scope(|scope| {
        scope.spawn(|| {
            thread::sleep(heal_at.saturating_duration_since(Instant::now()));
            proxy.set_refusing(false);
        });
        let started = Instant::now();
        (guard.unlock(), started.elapsed())
    });
    assert!(unlocked.is_ok(), "the release's last try came after the refusals ended: {unlocked:?} after {took:?}");
    assert!(Instant::now() <= valid_until + SLACK, "and not past the lease's end ({took:?})");
    let mut direct = server.conn();
    assert!(!exists(&mut direct, "release-to-the-end"), "released, not left to expire");
}
