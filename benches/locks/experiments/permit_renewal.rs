//! Step 8, renewal of many permits: one guard per permit of a `PermitExpirableSemaphore`,
//! held by one thread while the watchdog renews them, then given back one by one.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redlease::{Client, PermitExpirableSemaphore, PermitGuard};
use redlease_testkit::server::RedisServer;

use crate::clock::nanos;
use crate::experiments::limit::{Limit, pipelined_rate};
use crate::experiments::renewal::{
    RENEWAL_WATCHDOG, Renewal, Timed, Watched, each_call, renewal_client, renewal_rate, timed, window_rows,
};
use crate::plan::Plan;
use crate::stats::{reset_server_stats, server_command_stats};
use crate::table::{TARGET_RENEWAL_FRACTION, figure_head, figure_row};

/// The semaphore whose permits are renewed.
const PERMITS_NAME: &str = "bench:permits:renewal";

pub(crate) struct PermitRenewal {
    pub(crate) permits: usize,
    pub(crate) acquired: Timed,
    pub(crate) watched: Watched,
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
    pub(crate) released: Timed,
    /// `release()` calls that returned `Ok`.
    pub(crate) released_ok: usize,
    /// `available_permits()` after every guard was released, and the permits left in the
    /// sorted set.
    pub(crate) available_after: i64,
    pub(crate) left_in_set: u64,
}

pub(crate) fn measure_permit_renewal(server: &RedisServer, plan: &Plan) -> PermitRenewal {
    let (client, events) = renewal_client(Client::builder(server.url()));
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

    let (guards, acquired) = take_permits(&semaphore, permits);

    reset_server_stats(&mut conn);
    let (watched, after) = Watched::hold(&client, plan);
    let (_, server_usec) = server_command_stats(&mut conn, "evalsha");

    let held = guards.iter().filter(|g| g.is_held()).count();
    let (alive, min_remaining_ms) = live_permits(&mut conn, &timeouts);
    let (released, released_ok) = release_permits(guards);
    let available_after = semaphore.available_permits().expect("available_permits");
    let left_in_set: u64 = redis::cmd("ZCARD").arg(&timeouts).query(&mut conn).expect("ZCARD");

    PermitRenewal {
        permits,
        acquired,
        watched,
        server_time: Duration::from_micros(server_usec),
        pipelined_before,
        keys_before,
        scheduled: after.renewals_scheduled,
        held,
        alive,
        min_remaining_ms,
        lost_events: events.lost.load(Ordering::Relaxed),
        failed_renewals: events.renewal_failed.load(Ordering::Relaxed),
        released,
        released_ok,
        available_after,
        left_in_set,
    }
}

/// Takes `permits` permits of `semaphore`, one `try_acquire(1)` each (every one must be
/// left): the guards, and the time they took.
fn take_permits(semaphore: &PermitExpirableSemaphore, permits: usize) -> (Vec<PermitGuard>, Timed) {
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
    (guards, Timed::of(start.elapsed(), acquire_samples))
}

/// Of the permits in the sorted set `timeouts`: how many have a deadline still ahead of the
/// server's now, and the nearest deadline (ms from now).
fn live_permits(conn: &mut redis::Connection, timeouts: &str) -> (u64, i64) {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(conn).expect("TIME");
    let now_ms = secs * 1000 + micros / 1000;
    let alive: u64 = redis::cmd("ZCOUNT")
        .arg(timeouts)
        .arg(format!("({now_ms}"))
        .arg("+inf")
        .query(conn)
        .expect("ZCOUNT of the live permits");
    let first: Vec<(Vec<u8>, f64)> =
        redis::cmd("ZRANGE").arg(timeouts).arg(0).arg(0).arg("WITHSCORES").query(conn).expect("ZRANGE");
    let min_remaining_ms = first.first().map_or(i64::MIN, |(_, deadline)| *deadline as i64 - now_ms);
    (alive, min_remaining_ms)
}

/// Gives `guards` back one by one while the watchdog keeps renewing those still held: the
/// time the releases took, and how many returned `Ok`.
fn release_permits(guards: Vec<PermitGuard>) -> (Timed, usize) {
    let mut release_samples = Vec::with_capacity(guards.len());
    let mut released_ok = 0;
    let start = Instant::now();
    for guard in guards {
        let one = Instant::now();
        let released = guard.release();
        release_samples.push(nanos(one.elapsed()));
        released_ok += usize::from(released.is_ok());
    }
    (Timed::of(start.elapsed(), release_samples), released_ok)
}

/// Step 8's paragraph and table on the renewal of permits, set against the limit and the
/// lock renewal of step 4 (`renewal`).
pub(crate) fn permit_renewal_section(out: &mut String, limit: &Limit, renewal: &Renewal, r: &PermitRenewal) {
    let _ = writeln!(
        out,
        "Renewal: {} permits of one `PermitExpirableSemaphore` (`try_set_permits({})`), one guard each, held by \
         one thread (watchdog {} s, renewal every {} s); the renewal target of the locks is renewals/s ≥ \
         {TARGET_RENEWAL_FRACTION} × pipelined limit:\n",
        r.permits,
        r.permits,
        RENEWAL_WATCHDOG.as_secs(),
        RENEWAL_WATCHDOG.as_secs() / 3
    );
    figure_head(out);
    figure_row(out, "keys in the database before", r.keys_before.to_string());
    figure_row(out, "acquiring them, one `try_acquire(1)` each", timed(&r.acquired));
    window_rows(out, &r.watched, r.server_time, "permit");
    let rate = renewal_rate(&r.watched, limit, r.pipelined_before, "permit");
    let to_locks = r.watched.per_sec() / renewal.watched.per_sec();
    figure_row(
        out,
        "renewals/s (renewed / time in round trips)",
        format!("{rate}; {to_locks:.3} × the lock renewal of step 4"),
    );
    figure_row(
        out,
        "renewals scheduled at the end of the window (the permits of a pass under way are out of the schedule)",
        format!("{} of {}", r.scheduled, r.permits),
    );
    figure_row(out, "guards `is_held()` after the window", format!("{} of {}", r.held, r.permits));
    figure_row(
        out,
        "permits with a deadline ahead after the window (sorted set)",
        format!("{} of {} (nearest {} ms ahead of 3000)", r.alive, r.permits, r.min_remaining_ms),
    );
    figure_row(out, "leases lost / renewals failed (event hook)", format!("{} / {}", r.lost_events, r.failed_renewals));
    let released = &r.released;
    figure_row(
        out,
        "`release()` of every guard, one by one (the watchdog still renewing the rest)",
        format!(
            "{:.2} s, {} of {} `Ok`; {}; {} took over 10 ms",
            released.time.as_secs_f64(),
            r.released_ok,
            r.permits,
            each_call(&released.each),
            released.over_10ms
        ),
    );
    figure_row(
        out,
        "after the releases",
        format!("`available_permits()` {}, {} permits left in the sorted set", r.available_after, r.left_in_set),
    );
    let _ = writeln!(out);
}
