//! Step 4, renewal at scale: the watchdog renewing many leases held by one thread, and what
//! is left after their guards drop.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, LockEvents, LockGuard};
use redlease_testkit::server::RedisServer;

use crate::clock::nanos;
use crate::experiments::limit::{PIPELINE, pipelined_rate};
use crate::plan::Plan;
use crate::stats::{Summary, reset_server_stats, server_command_stats};

/// The library's default number of leases per renew round trip.
pub(crate) const RENEW_BATCH: u64 = 1000;
/// Watchdog timeout of the renewal run: a renewal every second.
pub(crate) const RENEWAL_WATCHDOG: Duration = Duration::from_secs(3);

/// Counts what the client reports through its event hook, and keeps the first renewal
/// error's text.
#[derive(Default)]
pub(crate) struct EventCounts {
    pub(crate) lost: AtomicU64,
    pub(crate) renewal_failed: AtomicU64,
    pub(crate) release_failed: AtomicU64,
    pub(crate) first_renewal_error: Mutex<Option<String>>,
}

impl LockEvents for EventCounts {
    fn lease_lost(&self, _lock: &str) {
        self.lost.fetch_add(1, Ordering::Relaxed);
    }
    fn renewal_failed(&self, error: &redlease::Error) {
        self.renewal_failed.fetch_add(1, Ordering::Relaxed);
        self.first_renewal_error.lock().expect("first renewal error").get_or_insert_with(|| error.to_string());
    }
    fn release_failed(&self, _lock: &str, _error: &redlease::Error) {
        self.release_failed.fetch_add(1, Ordering::Relaxed);
    }
}

pub(crate) struct Renewal {
    pub(crate) leases: usize,
    pub(crate) acquire_time: Duration,
    pub(crate) acquire_each: Summary,
    pub(crate) acquire_over_10ms: usize,
    pub(crate) window: Duration,
    pub(crate) passes: u64,
    pub(crate) round_trips: u64,
    pub(crate) renewed: u64,
    pub(crate) renew_time: Duration,
    /// Time Redis spent running the renew script in the window.
    pub(crate) server_time: Duration,
    /// The pipelined limit of step 0, measured again just before the leases were taken (with
    /// no renewal running).
    pub(crate) pipelined_before: f64,
    /// Keys in the database before the leases were taken (what earlier steps left).
    pub(crate) keys_before: u64,
    /// Guards reporting `is_held()` after the window.
    pub(crate) held: usize,
    /// Keys with a TTL > 0 on the server after the window, and the smallest TTL seen (ms).
    pub(crate) keys_alive: usize,
    pub(crate) min_ttl_ms: i64,
    pub(crate) lost_events: u64,
    pub(crate) failed_renewals: u64,
    pub(crate) drop_time: Duration,
    pub(crate) drop_each: Summary,
    pub(crate) drop_over_10ms: usize,
    pub(crate) keys_left: u64,
    /// Release latch keys alive right after the drop (each lives 4 × the command timeout).
    pub(crate) latches_left: u64,
    pub(crate) failed_releases: u64,
}

impl Renewal {
    pub(crate) fn per_sec(&self) -> f64 {
        self.renewed as f64 / self.renew_time.as_secs_f64()
    }
}

pub(crate) fn measure_renewal(server: &RedisServer, plan: &Plan) -> Renewal {
    let events = Arc::new(EventCounts::default());
    let client = Client::builder(server.url())
        .watchdog_timeout(RENEWAL_WATCHDOG)
        .pool_size(4)
        .events(events.clone())
        .build()
        .expect("client for the renewal run");
    let names: Vec<String> = (0..plan.leases).map(|i| format!("bench:lease:{i}")).collect();
    let mut conn = server.conn();
    let keys_before: u64 = redis::cmd("DBSIZE").query(&mut conn).expect("DBSIZE");
    let pipelined_before = pipelined_rate(&mut conn, plan.pipelines);

    let (guards, acquire_time, acquire_samples) = take_leases(&client, &names);

    reset_server_stats(&mut conn);
    let before = client.stats();
    let window = RENEWAL_WATCHDOG / 3 * plan.hold_periods;
    thread::sleep(window);
    let after = client.stats();
    assert_eq!(after.leases, plan.leases, "every lease is still registered");
    let (_, server_usec) = server_command_stats(&mut conn, "evalsha");

    let held = guards.iter().filter(|g| g.is_held()).count();
    let (keys_alive, min_ttl_ms) = ttls(&mut conn, &names);
    let (drop_time, drop_samples) = drop_leases(guards);
    let mut keys_left = 0;
    for chunk in names.chunks(PIPELINE) {
        let left: u64 = redis::cmd("EXISTS").arg(chunk).query(&mut conn).expect("EXISTS of the lease keys");
        keys_left += left;
    }
    assert_eq!(client.stats().leases, 0, "every lease is forgotten after its guard dropped");
    let latches_left = count_keys(&mut conn, "redisson_unlock_latch:{bench:lease:*");

    Renewal {
        leases: plan.leases,
        acquire_time,
        acquire_over_10ms: over_10ms(&acquire_samples),
        acquire_each: Summary::of_nanos(acquire_samples),
        window,
        passes: after.renewal_passes - before.renewal_passes,
        round_trips: after.renewal_round_trips - before.renewal_round_trips,
        renewed: after.leases_renewed - before.leases_renewed,
        renew_time: after.renewal_time - before.renewal_time,
        server_time: Duration::from_micros(server_usec),
        pipelined_before,
        keys_before,
        held,
        keys_alive,
        min_ttl_ms,
        lost_events: events.lost.load(Ordering::Relaxed),
        failed_renewals: events.renewal_failed.load(Ordering::Relaxed),
        drop_time,
        drop_over_10ms: over_10ms(&drop_samples),
        drop_each: Summary::of_nanos(drop_samples),
        keys_left,
        latches_left,
        failed_releases: events.release_failed.load(Ordering::Relaxed),
    }
}

/// Takes each of `names` with one `try_lock` (every one must be free): the guards, the
/// time they took in all, and each one's in nanoseconds.
pub(crate) fn take_leases(client: &Client, names: &[String]) -> (Vec<LockGuard>, Duration, Vec<u64>) {
    let mut samples = Vec::with_capacity(names.len());
    let start = Instant::now();
    let guards = names
        .iter()
        .map(|name| {
            let one = Instant::now();
            let guard = client.lock(name.as_str()).try_lock().expect("try_lock").expect("a fresh lease lock is free");
            samples.push(nanos(one.elapsed()));
            guard
        })
        .collect();
    (guards, start.elapsed(), samples)
}

/// Drops `guards` one by one, while the watchdog keeps renewing those still held: the time
/// in all, and each drop's in nanoseconds.
pub(crate) fn drop_leases(guards: Vec<LockGuard>) -> (Duration, Vec<u64>) {
    let mut samples = Vec::with_capacity(guards.len());
    let start = Instant::now();
    for guard in guards {
        let one = Instant::now();
        drop(guard);
        samples.push(nanos(one.elapsed()));
    }
    (start.elapsed(), samples)
}

/// Of the keys `names` on `conn` (pipelined `PTTL`, one key per command): how many have a
/// TTL > 0, and the smallest TTL seen (ms).
pub(crate) fn ttls(conn: &mut redis::Connection, names: &[impl AsRef<str>]) -> (usize, i64) {
    let (mut alive, mut min_ttl_ms) = (0, i64::MAX);
    for chunk in names.chunks(PIPELINE) {
        let mut pipe = redis::pipe();
        for name in chunk {
            pipe.cmd("PTTL").arg(name.as_ref());
        }
        let ttls: Vec<i64> = pipe.query(conn).expect("PTTL of the lease keys");
        alive += ttls.iter().filter(|&&t| t > 0).count();
        min_ttl_ms = ttls.into_iter().fold(min_ttl_ms, i64::min);
    }
    (alive, min_ttl_ms)
}

pub(crate) fn over_10ms(samples: &[u64]) -> usize {
    samples.iter().filter(|&&ns| ns > 10_000_000).count()
}

/// Keys matching `pattern` (SCAN).
fn count_keys(conn: &mut redis::Connection, pattern: &str) -> u64 {
    let mut cursor = 0u64;
    let mut count = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(10_000)
            .query(conn)
            .expect("SCAN");
        count += keys.len() as u64;
        if next == 0 {
            return count;
        }
        cursor = next;
    }
}
