//! Small helpers shared by the lock tests.

use std::time::{Duration, Instant};

use redlease::{Client, ClientBuilder};

use crate::support::foreign::wait::{Waited, wait_for};
use crate::support::foreign::{Acquire, Publish};
use crate::support::server::RedisServer;

/// A Redisson owner field (`<uuid>:<thread id>`), as a Java client writes it.
pub const JAVA_OWNER: &str = "6f9619ff-8b86-d011-b42d-00cf4fc964ff:1";

/// Milliseconds since the Unix epoch, as Redisson's scripts take the time.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// The key a client announces itself in.
pub fn announcement_key(client_id: &str) -> String {
    format!("redlease_client:{{{client_id}}}")
}

/// `EVAL script numkeys keys…`, for the caller to add the arguments: how a test sends a
/// script of its own.
pub fn eval(script: &str, keys: &[&str]) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(keys.len()).arg(keys);
    cmd
}

/// A client of `server` with a short command timeout, built by `configure`.
pub fn client_with(server: &RedisServer, configure: impl FnOnce(ClientBuilder) -> ClientBuilder) -> Client {
    configure(Client::builder(server.url()).command_timeout(Duration::from_secs(2))).build().expect("client builds")
}

pub fn client(server: &RedisServer) -> Client {
    client_with(server, |b| b)
}

/// Taken by the tests that fail a whole replicated topology over under load (the storm,
/// the nemesis runs, the no-grant windows), so that they run one at a time beside the light
/// tests: two at once on two cores once starved a replica's resync for a minute (the storm
/// asked six times for a failover that found no replica to promote). The turn is the
/// machine's, not only this process's: scripts/test runs the suite on other servers beside,
/// and their failover runs wait for it too. A test that failed while holding it leaves it
/// usable.
pub struct FailoverTurn {
    _process: std::sync::MutexGuard<'static, ()>,
    _machine: crate::support::turns::Turn,
}

pub fn one_failover_test_at_a_time() -> FailoverTurn {
    static FAILOVER_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let process = FAILOVER_TESTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    FailoverTurn { _process: process, _machine: crate::support::turns::take("failover-tests") }
}

/// Polls `cond` every 5 ms until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The non-atomic read-modify-write that detects two holders at once: GET, then SET of
/// value + 1, as two separate round trips.
pub fn increment_non_atomically(conn: &mut redis::Connection, key: &str) {
    let value: Option<u64> = redis::cmd("GET").arg(key).query(conn).expect("GET");
    redis::cmd("SET").arg(key).arg(value.unwrap_or(0) + 1).query::<()>(conn).expect("SET");
}

pub use crate::support::server::commands_served;

/// Subscribers of `channel` across all connections (PUBSUB NUMSUB).
pub fn subscribers(conn: &mut redis::Connection, channel: &str) -> u64 {
    let reply: (String, u64) = redis::cmd("PUBSUB").arg("NUMSUB").arg(channel).query(conn).expect("NUMSUB");
    reply.1
}

pub fn pttl(conn: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).expect("PTTL")
}

pub fn exists(conn: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query(conn).expect("EXISTS")
}

/// CLOCK_MONOTONIC in nanoseconds: comparable across processes on one host.
pub fn monotonic_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock_gettime");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// Sleeps until CLOCK_MONOTONIC reads `ns`.
pub fn sleep_until_monotonic(ns: u64) {
    let now = monotonic_ns();
    if ns > now {
        std::thread::sleep(Duration::from_nanos(ns - now));
    }
}

/// Calls of one command (e.g. "evalsha") so far.
pub fn calls_of(conn: &mut redis::Connection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).expect("INFO");
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines().find_map(|l| l.strip_prefix(&prefix)?.split(',').next()?.parse::<u64>().ok()).unwrap_or(0)
}

pub fn llen(conn: &mut redis::Connection, key: &str) -> u64 {
    redis::cmd("LLEN").arg(key).query(conn).expect("LLEN")
}

/// Runs `threads` threads, each given its index and a raw connection of its own to `url`
/// (for the checks it makes under the lock), and waits for them all.
pub fn run_threads(threads: usize, url: &str, body: impl Fn(usize, &mut redis::Connection) + Sync) {
    std::thread::scope(|scope| {
        for index in 0..threads {
            let body = &body;
            let mut conn = redis::Client::open(url).expect("url").get_connection().expect("connection");
            scope.spawn(move || body(index, &mut conn));
        }
    });
}

/// Builds the client `builder` makes, trying again for up to `within` while the server is
/// unreachable (a failover, a restart under way).
pub fn build_patiently(within: Duration, builder: impl Fn() -> ClientBuilder) -> Client {
    let end = Instant::now() + within;
    loop {
        match builder().build() {
            Ok(client) => return client,
            Err(e) if Instant::now() < end && e.is_connection_error() => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("cannot connect: {e}"),
        }
    }
}

/// Waits until `client` has announced itself (its first acquire has the renewal thread
/// write `redlease_client:{id}` a moment later), so that a window counting the commands
/// the server serves does not count that write.
pub fn announced(client: &Client, conn: &mut redis::Connection) {
    let key = announcement_key(client.id());
    assert!(wait_until(Duration::from_secs(5), || exists(conn, &key)), "the client announced itself");
}

/// Listeners of `channel` on the server `conn` is connected to: classic subscribers
/// (`PUBSUB NUMSUB`) or sharded ones (`PUBSUB SHARDNUMSUB`), as `publish` reaches them.
pub fn listeners(conn: &mut redis::Connection, channel: &str, publish: Publish) -> u64 {
    let which = if publish == Publish::Sharded { "SHARDNUMSUB" } else { "NUMSUB" };
    let reply: (String, u64) = redis::cmd("PUBSUB").arg(which).arg(channel).query(conn).expect("PUBSUB");
    reply.1
}

/// Where a foreign waiter listens: the channel, how it is published to, and which of its
/// messages wake the waiter.
pub type WaitsOn<'a> = (&'a str, Publish, fn(&[u8]) -> bool);

/// A foreign client's waiter, parked on `channel` (opened by `open`, woken by the messages
/// `wakes` accepts) with `attempt`, is woken by `release`, run once it is subscribed: it got
/// what it waited for within 3 s of the release, well before any holder's 30 s lease could
/// run out.
pub fn assert_foreign_woken(
    who: &str,
    open: &(dyn Fn() -> redis::Connection + Sync),
    (channel, publish, wakes): WaitsOn,
    attempt: &(dyn Fn(&mut redis::Connection) -> redis::RedisResult<Acquire> + Sync),
    release: impl FnOnce(),
) {
    let (released_at, waited) = std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            let mut conn = open();
            wait_for(open, channel, publish, wakes, Duration::from_secs(20), || attempt(&mut conn))
        });
        let mut conn = open();
        assert!(wait_until(Duration::from_secs(5), || listeners(&mut conn, channel, publish) == 1), "{who}: parked");
        std::thread::sleep(Duration::from_millis(100));
        let released_at = Instant::now();
        release();
        (released_at, waiting.join().unwrap().expect("no error"))
    });
    match waited {
        Waited::Granted(at) => {
            let took = at.saturating_duration_since(released_at);
            assert!(took < Duration::from_secs(3), "{who}: woken by the release: {took:?}");
        }
        other => panic!("{who}: the foreign waiter got nothing: {other:?}"),
    }
}

/// Counts the waits that said they outlasted the retry budget
/// (`LockEvents::waiting_through_outage`), each with a transient error.
#[derive(Default)]
pub struct Outages(std::sync::atomic::AtomicUsize);

impl Outages {
    pub fn count(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl redlease::LockEvents for Outages {
    fn waiting_through_outage(&self, _lock: &str, error: &redlease::Error) {
        assert!(error.is_transient(), "{error}");
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}
