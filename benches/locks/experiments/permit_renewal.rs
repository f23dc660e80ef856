//! Step 8, renewal of many permits: one guard per permit of a `PermitExpirableSemaphore`,
//! held by one thread while the watchdog renews them, then given back one by one.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, PermitGuard};
use redlease_testkit::server::RedisServer;

use crate::clock::nanos;
use crate::experiments::limit::pipelined_rate;
use crate::experiments::renewal::{EventCounts, RENEWAL_WATCHDOG, over_10ms};
use crate::plan::Plan;
use crate::stats::{Summary, reset_server_stats, server_command_stats};

/// The semaphore whose permits are renewed.
const PERMITS_NAME: &str = "bench:permits:renewal";

pub(crate) struct PermitRenewal {
    pub(crate) permits: usize,
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
    /// The pipelined limit of step 0, measured again just before the permits were taken.
    pub(crate) pipelined_before: f64,
    /// Keys in the database before the permits were taken.
    pub(crate) keys_before: u64,
    /// Renewals the watchdog had scheduled at the end of the window.
    pub(crate) scheduled: usize,
    /// Guards reporting `is_held()` after the window.
    pub(crate) held: usize,
    /// Permits in the semaphore's sorted set with a deadline still ahead after the window,
    /// and the nearest deadline (ms from the server's now).
    pub(crate) alive: u64,
    pub(crate) min_remaining_ms: i64,
    pub(crate) lost_events: u64,
    pub(crate) failed_renewals: u64,
    pub(crate) release_time: Duration,
    pub(crate) release_each: Summary,
    pub(crate) release_over_10ms: usize,
    /// `release()` calls that returned `Ok`.
    pub(crate) released_ok: usize,
    /// `available_permits()` after every guard was released, and the permits left in the
    /// sorted set.
    pub(crate) available_after: i64,
    pub(crate) left_in_set: u64,
}

impl PermitRenewal {
    pub(crate) fn per_sec(&self) -> f64 {
        self.renewed as f64 / self.renew_time.as_secs_f64()
    }
}

pub(crate) fn measure_permit_renewal(server: &RedisServer, plan: &Plan) -> PermitRenewal {
    let events = Arc::new(EventCounts::default());
    let client = Client::builder(server.url())
        .watchdog_timeout(RENEWAL_WATCHDOG)
        .pool_size(4)
        .events(events.clone())
        .build()
        .expect("client for the permit renewal run");
    let semaphore = client.permit_expirable_semaphore(PERMITS_NAME);
    let permits = plan.leases;
    assert!(
        semaphore.try_set_permits(u64::try_from(permits).expect("permits fit in u64")).expect("try_set_permits"),
        "the renewal semaphore is new"
    );
    let timeouts = format!("{{{PERMITS_NAME}}}:timeout");
    let mut conn = server.conn();
    let keys_before: u64 = redis::cmd("DBSIZE").query(&mut conn).expect("DBSIZE");
    let pipelined_before = pipelined_rate(&mut conn, plan.pipelines);

    let mut acquire_samples = Vec::with_capacity(permits);
    let start = Instant::now();
    let guards: Vec<PermitGuard> = (0..permits)
        .map(|_| {
            let one = Instant::now();
            let guard = semaphore.try_acquire(1).expect("try_acquire").expect("a permit is left");
            acquire_samples.push(nanos(one.elapsed()));
            guard
        })
        .collect();
    let acquire_time = start.elapsed();

    reset_server_stats(&mut conn);
    let before = client.stats();
    let window = RENEWAL_WATCHDOG / 3 * plan.hold_periods;
    thread::sleep(window);
    let after = client.stats();
    let (_, server_usec) = server_command_stats(&mut conn, "evalsha");

    let held = guards.iter().filter(|g| g.is_held()).count();
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(&mut conn).expect("TIME");
    let now_ms = secs * 1000 + micros / 1000;
    let alive: u64 = redis::cmd("ZCOUNT")
        .arg(&timeouts)
        .arg(format!("({now_ms}"))
        .arg("+inf")
        .query(&mut conn)
        .expect("ZCOUNT of the live permits");
    let first: Vec<(Vec<u8>, f64)> =
        redis::cmd("ZRANGE").arg(&timeouts).arg(0).arg(0).arg("WITHSCORES").query(&mut conn).expect("ZRANGE");
    let min_remaining_ms = first.first().map_or(i64::MIN, |(_, deadline)| *deadline as i64 - now_ms);

    // Given back one by one while the watchdog keeps renewing those still held.
    let mut release_samples = Vec::with_capacity(permits);
    let mut released_ok = 0;
    let start = Instant::now();
    for guard in guards {
        let one = Instant::now();
        let released = guard.release();
        release_samples.push(nanos(one.elapsed()));
        released_ok += usize::from(released.is_ok());
    }
    let release_time = start.elapsed();
    let available_after = semaphore.available_permits().expect("available_permits");
    let left_in_set: u64 = redis::cmd("ZCARD").arg(&timeouts).query(&mut conn).expect("ZCARD");

    PermitRenewal {
        permits,
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
        scheduled: after.renewals_scheduled,
        held,
        alive,
        min_remaining_ms,
        lost_events: events.lost.load(Ordering::Relaxed),
        failed_renewals: events.renewal_failed.load(Ordering::Relaxed),
        release_time,
        release_over_10ms: over_10ms(&release_samples),
        release_each: Summary::of_nanos(release_samples),
        released_ok,
        available_after,
        left_in_set,
    }
}
