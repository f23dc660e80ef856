//! Step 4, renewal at scale: the watchdog renewing many leases held by one thread, and what
//! is left after their guards drop.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, ClientBuilder, ClientStats, LockEvents, LockGuard};
use redlease_testkit::server::RedisServer;

use crate::clock::nanos;
use crate::experiments::limit::{Limit, PIPELINE, pipelined_rate};
use crate::plan::Plan;
use crate::stats::{Summary, reset_server_stats, server_command_stats};
use crate::table::{TARGET_RENEWAL_FRACTION, figure_head, figure_row, verdict};

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

/// Calls timed one by one: the time in all, each call's time, and how many took over 10 ms.
pub(crate) struct Timed {
    pub(crate) time: Duration,
    pub(crate) each: Summary,
    pub(crate) over_10ms: usize,
}

impl Timed {
    /// From the time in all and each call's time in nanoseconds.
    pub(crate) fn of(time: Duration, samples: Vec<u64>) -> Timed {
        Timed { time, over_10ms: over_10ms(&samples), each: Summary::of_nanos(samples) }
    }
}

/// What a client's watchdog did while the leases (or permits) were held, from the client's
/// counters before and after the window.
pub(crate) struct Watched {
    pub(crate) window: Duration,
    pub(crate) passes: u64,
    pub(crate) round_trips: u64,
    pub(crate) renewed: u64,
    pub(crate) renew_time: Duration,
}

impl Watched {
    /// Holds what `client` holds for `plan.hold_periods` renewal periods: what its watchdog
    /// did, and the client's counters at the end.
    pub(crate) fn hold(client: &Client, plan: &Plan) -> (Watched, ClientStats) {
        let before = client.stats();
        let window = RENEWAL_WATCHDOG / 3 * plan.hold_periods;
        thread::sleep(window);
        let after = client.stats();
        let watched = Watched {
            window,
            passes: after.renewal_passes - before.renewal_passes,
            round_trips: after.renewal_round_trips - before.renewal_round_trips,
            renewed: after.leases_renewed - before.leases_renewed,
            renew_time: after.renewal_time - before.renewal_time,
        };
        (watched, after)
    }

    pub(crate) fn per_sec(&self) -> f64 {
        self.renewed as f64 / self.renew_time.as_secs_f64()
    }
}

pub(crate) struct Renewal {
    pub(crate) leases: usize,
    pub(crate) acquired: Timed,
    pub(crate) watched: Watched,
    /// Time Redis spent running the renew script in the window.
    pub(crate) server_time: Duration,
    /// The readings behind the batches in the window (`INFO`s: two per batch on a server
    /// without replicas), and Redis's time on them.
    pub(crate) infos: u64,
    pub(crate) info_time: Duration,
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
    pub(crate) dropped: Timed,
    pub(crate) keys_left: u64,
    /// Release latch keys alive right after the drop (each lives 4 × the command timeout).
    pub(crate) latches_left: u64,
    pub(crate) failed_releases: u64,
}

pub(crate) fn measure_renewal(server: &RedisServer, plan: &Plan) -> Renewal {
    let (client, events) = renewal_client(Client::builder(server.url()));
    let names: Vec<String> = (0..plan.leases).map(|i| format!("bench:lease:{i}")).collect();
    let mut conn = server.conn();
    let keys_before: u64 = redis::cmd("DBSIZE").query(&mut conn).expect("DBSIZE");
    let pipelined_before = pipelined_rate(&mut conn, plan.pipelines);

    let (guards, acquired) = take_leases(&client, &names);

    reset_server_stats(&mut conn);
    let (watched, after) = Watched::hold(&client, plan);
    assert_eq!(after.leases, plan.leases, "every lease is still registered");
    // The `INFO`s first: each reading of the stats is an `INFO` itself.
    let (infos, info_usec) = server_command_stats(&mut conn, "info");
    let (_, server_usec) = server_command_stats(&mut conn, "evalsha");

    let held = guards.iter().filter(|g| g.is_held()).count();
    let (keys_alive, min_ttl_ms) = ttls(&mut conn, &names);
    let dropped = drop_leases(guards);
    let mut keys_left = 0;
    for chunk in names.chunks(PIPELINE) {
        let left: u64 = redis::cmd("EXISTS").arg(chunk).query(&mut conn).expect("EXISTS of the lease keys");
        keys_left += left;
    }
    assert_eq!(client.stats().leases, 0, "every lease is forgotten after its guard dropped");
    let latches_left = count_keys(&mut conn, "redisson_unlock_latch:{bench:lease:*");

    Renewal {
        leases: plan.leases,
        acquired,
        watched,
        server_time: Duration::from_micros(server_usec),
        infos,
        info_time: Duration::from_micros(info_usec),
        pipelined_before,
        keys_before,
        held,
        keys_alive,
        min_ttl_ms,
        lost_events: events.lost.load(Ordering::Relaxed),
        failed_renewals: events.renewal_failed.load(Ordering::Relaxed),
        dropped,
        keys_left,
        latches_left,
        failed_releases: events.release_failed.load(Ordering::Relaxed),
    }
}

/// The client of a renewal run, built by `builder`: its watchdog renews every
/// `RENEWAL_WATCHDOG / 3`, and what its event hook reports is counted.
pub(crate) fn renewal_client(builder: ClientBuilder) -> (Client, Arc<EventCounts>) {
    let events = Arc::new(EventCounts::default());
    let client = builder
        .watchdog_timeout(RENEWAL_WATCHDOG)
        .pool_size(4)
        .events(events.clone())
        .build()
        .expect("client for the renewal run");
    (client, events)
}

/// Takes each of `names` with one `try_lock` (every one must be free): the guards, and the
/// time they took.
pub(crate) fn take_leases(client: &Client, names: &[String]) -> (Vec<LockGuard>, Timed) {
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
    (guards, Timed::of(start.elapsed(), samples))
}

/// Drops `guards` one by one, while the watchdog keeps renewing those still held: the time
/// the drops took.
pub(crate) fn drop_leases(guards: Vec<LockGuard>) -> Timed {
    let mut samples = Vec::with_capacity(guards.len());
    let start = Instant::now();
    for guard in guards {
        let one = Instant::now();
        drop(guard);
        samples.push(nanos(one.elapsed()));
    }
    Timed::of(start.elapsed(), samples)
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

fn over_10ms(samples: &[u64]) -> usize {
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

/// Step 4's section, its rates set against `limit`.
pub(crate) fn renewal_section(out: &mut String, limit: &Limit, r: &Renewal) {
    let _ = writeln!(
        out,
        "### 4. Renewal: {} watchdog leases held by one thread (watchdog {} s, renewal every {} s); \
         target: renewals/s ≥ {TARGET_RENEWAL_FRACTION} × pipelined limit\n",
        r.leases,
        RENEWAL_WATCHDOG.as_secs(),
        RENEWAL_WATCHDOG.as_secs() / 3
    );
    figure_head(out);
    figure_row(out, "keys in the database before (left by earlier steps)", r.keys_before.to_string());
    figure_row(out, "acquiring them, one `try_lock` each", timed(&r.acquired));
    window_rows(out, &r.watched, r.server_time, "lease");
    figure_row(
        out,
        "readings behind the batches (a renewal counts once confirmed): `INFO`s run (Redis's time on them, per round trip)",
        format!("{} ({:.1} µs)", r.infos, r.info_time.as_secs_f64() * 1e6 / r.watched.round_trips.max(1) as f64),
    );
    let rate = renewal_rate(&r.watched, limit, r.pipelined_before, "lease");
    figure_row(out, "renewals/s (renewed / time in round trips)", rate);
    figure_row(out, "guards `is_held()` after the window", format!("{} of {}", r.held, r.leases));
    figure_row(
        out,
        "keys with TTL > 0 after the window",
        format!("{} of {} (smallest TTL {} ms)", r.keys_alive, r.leases, r.min_ttl_ms),
    );
    figure_row(out, "leases lost / renewals failed (event hook)", format!("{} / {}", r.lost_events, r.failed_renewals));
    figure_row(out, "dropping all guards, one by one (the watchdog still renewing the rest)", timed(&r.dropped));
    figure_row(
        out,
        "after the drop",
        format!("{} lease keys left, {} releases failed", r.keys_left, r.failed_releases),
    );
    figure_row(
        out,
        "release latch keys alive right after the drop",
        format!("{} (each kept 4 × the command timeout, 12 s by default)", r.latches_left),
    );
    let _ = writeln!(out);
}

/// The rows the lock renewal and the permit renewal share, from the window held to the
/// time in renew round trips; `unit` names what was renewed ("lease", "permit").
pub(crate) fn window_rows(out: &mut String, w: &Watched, server_time: Duration, unit: &str) {
    figure_row(out, "window held", format!("{:.1} s", w.window.as_secs_f64()));
    figure_row(out, "renewal passes in the window", w.passes.to_string());
    figure_row(out, "renew round trips in the window", w.round_trips.to_string());
    figure_row(out, &format!("{unit}s renewed in the window"), w.renewed.to_string());
    figure_row(
        out,
        "round trips per pass / ceil(renewed per pass / 1000)",
        per_pass(w.round_trips, w.renewed, w.passes),
    );
    figure_row(
        out,
        "round trips vs the least possible (ceil(renewed / 1000) … that + passes)",
        least_possible(w.round_trips, w.renewed, w.passes),
    );
    figure_row(
        out,
        "time in renew round trips (of which Redis running the script)",
        format!(
            "{:.3} s ({:.3} s): {:.2} µs per {unit} ({:.2} µs)",
            w.renew_time.as_secs_f64(),
            server_time.as_secs_f64(),
            w.renew_time.as_secs_f64() * 1e6 / w.renewed.max(1) as f64,
            server_time.as_secs_f64() * 1e6 / w.renewed.max(1) as f64
        ),
    );
}

/// Renewals per second against step 0's pipelined limit and against the same limit
/// measured again just before the `unit`s were taken, judged against the target.
pub(crate) fn renewal_rate(w: &Watched, limit: &Limit, pipelined_before: f64, unit: &str) -> String {
    let fraction = w.per_sec() / limit.pipelined_per_sec;
    let fraction_again = w.per_sec() / pipelined_before;
    format!(
        "{:.0} = {fraction:.3} × the pipelined limit of step 0 ({}); {fraction_again:.3} × the same limit \
         measured again just before the {unit}s were taken ({:.0} calls/s, {})",
        w.per_sec(),
        verdict(fraction >= TARGET_RENEWAL_FRACTION),
        pipelined_before,
        verdict(fraction_again >= TARGET_RENEWAL_FRACTION)
    )
}

/// Renew round trips per pass, against the fewest a pass could make (`RENEW_BATCH` leases
/// each).
pub(crate) fn per_pass(round_trips: u64, renewed: u64, passes: u64) -> String {
    let passes = passes.max(1) as f64;
    let ideal_per_pass = (renewed as f64 / passes / RENEW_BATCH as f64).ceil();
    format!("{:.2} / {ideal_per_pass:.0}", round_trips as f64 / passes)
}

/// Renew round trips against the least possible: every renewed lease in full batches, and
/// that plus one round trip per pass.
pub(crate) fn least_possible(round_trips: u64, renewed: u64, passes: u64) -> String {
    let floor = renewed.div_ceil(RENEW_BATCH);
    format!("{round_trips} vs {floor} … {}", floor + passes)
}

/// Calls timed one by one, as the renewal tables show them: the time in all, then each
/// call's.
pub(crate) fn timed(t: &Timed) -> String {
    format!("{:.2} s; {}; {} took over 10 ms", t.time.as_secs_f64(), each_call(&t.each), t.over_10ms)
}

/// Each call's time, as the renewal tables show it.
pub(crate) fn each_call(each: &Summary) -> String {
    format!(
        "each: mean {:.0} µs, p50 {:.0}, p90 {:.0}, p99 {:.0}, max {:.0}",
        each.mean, each.p50, each.p90, each.p99, each.max
    )
}
