//! Step 17, the waiters curve: 1, 10, 100 and 1,000 threads waiting on one lock, plain and
//! fair, spread over 1, 4 and 16 processes (a client each). Every thread loops `lock()`,
//! holds the lock for [`HOLD`], releases it and thinks for [`THINK`] before it asks again,
//! so that with N waiters one holds while the others wait, and a release hands the lock to
//! a parked waiter. What grows with the waiters: the hand-off (from the release's start to
//! the next grant to a thread that was waiting, across processes on one monotonic clock),
//! the messages a release publishes, the wake-ups it causes and those wasted, Redis's time
//! per hand-off, and the subscriber connections.

use std::fmt::Write as _;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redlease::Client;
use redlease_testkit::server::RedisServer;

use crate::child::{KIND_ENV, LOCK_ENV, URL_ENV, Worker, child_env, read_window, say};
use crate::clock::{mono_ns, sleep_until_mono};
use crate::experiments::LockKind;
use crate::experiments::throughput::start_window;
use crate::plan::Plan;
use crate::plot::{LogLogChart, Series, draw_into};
use crate::stats::server_all_command_stats;
use crate::table::verdict;

/// Threads waiting while one holds: the curve's sizes.
const WAITERS: [usize; 4] = [1, 10, 100, 1_000];
/// Processes the threads are spread over.
const PROCESSES: [usize; 3] = [1, 4, 16];
/// How long a thread holds the lock.
const HOLD: Duration = Duration::from_micros(200);
/// How long a thread waits after its release before it asks again: longer than a
/// hand-off, so that the one who released does not take the lock back before a waiter.
const THINK: Duration = Duration::from_millis(2);
/// The measured part of each point's window; the counters and acquisitions are its own,
/// and none of those of the acquisitions that drain the waiters after the window.
const MEASURED: Duration = Duration::from_millis(2_500);
const QUICK_MEASURED: Duration = Duration::from_millis(800);
/// The part of the window before it, not measured, for `waiters` waiters: every thread asks
/// at once there, and each waiter joins (its first attempt, its `SUBSCRIBE`, and one more
/// attempt once subscribed: a fair lock's queued waiter's `LPOS`). Half a second and a
/// millisecond a waiter: a thousand waiters in one process took longer than a fixed half
/// second to join, and their last attempts after subscribing counted as 0.2 to 0.7 scripts
/// a grant in the measured part (none with 1.5 s).
fn lead_in(waiters: usize) -> Duration {
    Duration::from_millis(500 + u64::try_from(waiters).unwrap_or(u64::MAX))
}
/// Names the threads a child runs.
const THREADS_ENV: &str = "REDLEASE_BENCH_THREADS";
/// The point's [`lead_in`], in ms, for the children.
const LEAD_IN_ENV: &str = "REDLEASE_BENCH_LEAD_IN_MS";

// Targets (docs/performance.md, issue #44 item 2).
/// Hand-off p99 at the most waiters, over one waiter's.
const TARGET_P99_GROWTH: f64 = 2.0;

/// One point: a kind, a number of waiters, a number of processes.
pub(crate) struct WaiterPoint {
    kind: LockKind,
    waiters: usize,
    processes: usize,
    /// Hand-offs to a thread that was waiting when the release began, µs, sorted.
    handoffs: Vec<f64>,
    acquisitions: u64,
    /// Per release: `PUBLISH`es (a script's too) and `SPUBLISH`es.
    published: f64,
    /// Per release: waiters woken, and those whose attempt found the lock taken again.
    woken: f64,
    wasted: f64,
    /// Redis's time on the scripts per acquisition, µs.
    server_usec: f64,
    /// Connections subscribed to something, in the middle of the window.
    subscribers: usize,
    /// The commands Redis spent most time on (a script's included): calls and µs per
    /// acquisition.
    top_commands: Vec<(String, f64, f64)>,
    /// Scripts run per acquisition.
    scripts: f64,
}

impl WaiterPoint {
    fn percentile(&self, p: f64) -> f64 {
        let n = self.handoffs.len();
        if n == 0 {
            return f64::NAN;
        }
        self.handoffs[((n as f64 * p).ceil() as usize).clamp(1, n) - 1]
    }
}

pub(crate) fn measure_waiter_curve(server: &RedisServer, plan: &Plan) -> Vec<WaiterPoint> {
    let measured = if plan.quick { QUICK_MEASURED } else { MEASURED };
    let mut points = Vec::new();
    for kind in [LockKind::Plain, LockKind::Fair] {
        for waiters in WAITERS {
            for processes in PROCESSES.into_iter().filter(|&p| p <= waiters + 1) {
                points.push(waiter_point(server, measured, kind, waiters, processes));
            }
        }
    }
    points
}

fn waiter_point(
    server: &RedisServer,
    measured: Duration,
    kind: LockKind,
    waiters: usize,
    processes: usize,
) -> WaiterPoint {
    let name = format!("bench:waiters:{}:{waiters}:{processes}", kind.as_str());
    let threads = waiters + 1;
    let mut workers: Vec<Worker> = (0..processes)
        .map(|i| {
            // The threads dealt out as evenly as they go.
            let mine = threads / processes + usize::from(i < threads % processes);
            Worker::spawn(
                "waiters",
                &[
                    (URL_ENV, server.url()),
                    (KIND_ENV, kind.as_str().to_string()),
                    (LOCK_ENV, name.clone()),
                    (THREADS_ENV, mine.to_string()),
                    (LEAD_IN_ENV, lead_in(waiters).as_millis().to_string()),
                ],
            )
        })
        .collect();
    let (mut stats, (from, end)) = start_window(server, &mut workers, lead_in(waiters) + measured);
    let measured = measured_from(from, lead_in(waiters));
    sleep_until_mono(measured);
    let before = server_all_command_stats(&mut stats);
    sleep_until_mono(from + (end - from) / 2);
    let subscribers = subscribed_connections(&mut stats);
    sleep_until_mono(end);
    let after = server_all_command_stats(&mut stats);
    let commands = command_stats_between(&before, &after);
    let mut records = Vec::new();
    let (mut woken, mut wasted) = (0, 0);
    for worker in &workers {
        let report = worker.expect("records ");
        let (counts, list) = report.split_once(" | ").unwrap_or((report.as_str(), ""));
        let mut counts = counts.split_whitespace().map(|n| n.parse::<u64>().expect("a wake-up count"));
        woken += counts.next().unwrap_or(0);
        wasted += counts.next().unwrap_or(0);
        records.extend(list.split(';').filter(|r| !r.is_empty()).map(Record::parse));
    }
    for worker in workers {
        worker.finish();
    }
    records.retain(|r| r.acquired >= measured && r.acquired < end);
    let calls = |names: &[&str]| commands.iter().filter(|c| names.contains(&c.0.as_str())).map(|c| c.1).sum::<u64>();
    let usec = commands.iter().filter(|c| c.0 == "evalsha").map(|c| c.2).sum::<u64>();
    let acquisitions = records.len() as u64;
    let per = |n: u64| n as f64 / acquisitions.max(1) as f64;
    WaiterPoint {
        kind,
        waiters,
        processes,
        handoffs: handoffs(records),
        acquisitions,
        published: per(calls(&["publish", "spublish"])),
        woken: per(woken),
        wasted: per(wasted),
        server_usec: per(usec),
        subscribers,
        top_commands: top_commands(&commands, acquisitions),
        scripts: per(calls(&["evalsha", "eval"])),
    }
}

/// The five commands Redis spent the most time on, scripts' own commands among them (the
/// scripts themselves, `CONFIG` and `INFO` left out): calls and µs per acquisition.
fn top_commands(commands: &[(String, u64, u64)], acquisitions: u64) -> Vec<(String, f64, f64)> {
    let per = |n: u64| n as f64 / acquisitions.max(1) as f64;
    let mut top: Vec<(String, f64, f64)> = commands
        .iter()
        .filter(|c| !c.0.starts_with("config") && !["info", "evalsha", "eval"].contains(&c.0.as_str()))
        .map(|c| (c.0.clone(), per(c.1), per(c.2)))
        .collect();
    top.sort_by(|a, b| b.2.total_cmp(&a.2));
    top.truncate(5);
    top
}

/// One acquisition: when its `lock()` was called, when it returned, when the release
/// began (CLOCK_MONOTONIC nanoseconds).
#[derive(Clone, Copy)]
struct Record {
    called: u64,
    acquired: u64,
    released: u64,
}

impl Record {
    fn parse(text: &str) -> Record {
        let mut fields = text.split(',').map(|n| n.parse::<u64>().expect("a time"));
        let mut next = || fields.next().expect("three times a record");
        Record { called: next(), acquired: next(), released: next() }
    }
}

/// The hand-offs, µs, sorted: each acquisition after the first, when its thread was
/// already waiting as the one before released (else the lock was free for a while, and
/// nobody was handed anything).
fn handoffs(mut records: Vec<Record>) -> Vec<f64> {
    records.sort_unstable_by_key(|r| r.acquired);
    let mut gaps: Vec<f64> = records
        .windows(2)
        .filter(|pair| pair[1].called < pair[0].released)
        .map(|pair| pair[1].acquired.saturating_sub(pair[0].released) as f64 / 1_000.0)
        .collect();
    gaps.sort_unstable_by(f64::total_cmp);
    gaps
}

/// Where the measured part of a window from `from` (ns) begins, after its `lead_in`.
fn measured_from(from: u64, lead_in: Duration) -> u64 {
    from + u64::try_from(lead_in.as_nanos()).unwrap_or(u64::MAX)
}

/// What `INFO commandstats` counted between two readings: (command, calls, µs).
fn command_stats_between(before: &[(String, u64, u64)], after: &[(String, u64, u64)]) -> Vec<(String, u64, u64)> {
    after
        .iter()
        .map(|(name, calls, usec)| {
            let (calls_before, usec_before) = before.iter().find(|b| &b.0 == name).map_or((0, 0), |b| (b.1, b.2));
            (name.clone(), calls.saturating_sub(calls_before), usec.saturating_sub(usec_before))
        })
        .collect()
}

/// Connections of the server subscribed to at least one channel (`CLIENT LIST`).
fn subscribed_connections(conn: &mut redis::Connection) -> usize {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(conn).expect("CLIENT LIST");
    list.lines()
        .filter(|line| {
            let count = |field: &str| {
                line.split_whitespace()
                    .find_map(|f| f.strip_prefix(field))
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            count("sub=") + count("psub=") + count("ssub=") > 0
        })
        .count()
}

/// Child: `THREADS_ENV` threads sharing one client loop `lock()`, [`HOLD`], release,
/// [`THINK`] on one lock within the window; says every acquisition that began in it, and
/// the client's wake-ups.
pub(crate) fn waiters_child() {
    let kind = LockKind::parse(&child_env(KIND_ENV));
    let threads: usize = child_env(THREADS_ENV).parse().expect("a thread count");
    let client = Client::open(&child_env(URL_ENV)).expect("client of a waiters process");
    let warm = client.lock(format!("bench:waiters:warm:{}", std::process::id()));
    for _ in 0..5 {
        warm.try_lock().expect("warm-up try_lock").expect("the warm-up lock is free").unlock().expect("unlock");
    }
    let name = child_env(LOCK_ENV);
    let records = Arc::new(Mutex::new(Vec::new()));
    let start = Arc::new(Barrier::new(threads + 1));
    let window = Arc::new(Mutex::new((0u64, 0u64)));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let lock = kind.handle(&client, name.clone());
            let (records, start, window) = (Arc::clone(&records), Arc::clone(&start), Arc::clone(&window));
            thread::spawn(move || {
                start.wait();
                let (from, end) = *window.lock().expect("the window");
                sleep_until_mono(from);
                let mut mine = Vec::new();
                loop {
                    let called = mono_ns();
                    let guard = lock.lock().expect("lock");
                    let acquired = mono_ns();
                    let held = Instant::now();
                    while held.elapsed() < HOLD {
                        std::hint::spin_loop();
                    }
                    let released = mono_ns();
                    drop(guard);
                    if acquired >= end {
                        break;
                    }
                    mine.push(Record { called, acquired, released });
                    thread::sleep(THINK);
                }
                records.lock().expect("the records").extend(mine);
            })
        })
        .collect();
    say("ready");
    let (from, end) = read_window();
    *window.lock().expect("the window") = (from, end);
    start.wait();
    // The wake-ups of the measured part alone, as the parent reads Redis's counters.
    let lead_in = Duration::from_millis(child_env(LEAD_IN_ENV).parse().expect("a lead-in in ms"));
    sleep_until_mono(measured_from(from, lead_in));
    let before = client.stats();
    sleep_until_mono(end);
    let after = client.stats();
    for handle in handles {
        handle.join().expect("a waiter thread");
    }
    let records = records.lock().expect("the records");
    let list: Vec<String> = records.iter().map(|r| format!("{},{},{}", r.called, r.acquired, r.released)).collect();
    say(&format!(
        "records {} {} | {}",
        after.wake_ups - before.wake_ups,
        after.wasted_wake_ups - before.wasted_wake_ups,
        list.join(";")
    ));
}

/// Step 17's section: the table, the targets, the picture.
pub(crate) fn waiter_curve_section(out: &mut String, points: &[WaiterPoint], rtt: f64) {
    if points.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "### 17. The waiters curve: N threads waiting on one lock while one holds it, spread over 1, 4 and 16 \
         processes (a client each); each holds {} µs, releases, thinks {} ms, asks again; {:.1} s measured a point, \
         after {} ms and 1 ms a waiter (where the N waiters join) not measured\n",
        HOLD.as_micros(),
        THINK.as_millis(),
        MEASURED.as_secs_f64(),
        lead_in(0).as_millis()
    );
    let _ = writeln!(
        out,
        "A hand-off: from the release's start to the next grant, when that thread was waiting as the release \
         began (CLOCK_MONOTONIC across the processes). Counted in the measured part only (grants, Redis's \
         counters, the clients' wake-ups), not the waiters' joining nor their drain after the window. Per release: the `PUBLISH`es Redis ran (scripts' \
         included), the waiters woken and those of them that found the lock taken again (the clients' \
         `ClientStats`); Redis's time on the scripts per acquisition; connections subscribed to a channel, \
         mid-window (`CLIENT LIST`). RTT: step 0's, {rtt:.1} µs. Target: the hand-off's p99 at 1,000 \
         waiters within {TARGET_P99_GROWTH}× one waiter's; the messages per release flat in N.\n"
    );
    let _ = writeln!(
        out,
        "| kind | waiters | processes | acquisitions | hand-offs | p50 µs | p99 µs | p50 / RTT | p99 / RTT | \
         published per release | woken / wasted per release | Redis µs per acquisition | subscribers | \
         commands Redis spent most on, per acquisition |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|");
    for p in points {
        let (p50, p99) = (p.percentile(0.5), p.percentile(0.99));
        let top: Vec<String> =
            p.top_commands.iter().map(|(name, n, us)| format!("{name} {n:.1}× {us:.0} µs")).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {p50:.0} | {p99:.0} | {:.2} | {:.2} | {:.3} | {:.3} / {:.3} | {:.1} | {} | \
             scripts {:.1}: {} |",
            p.kind.as_str(),
            p.waiters,
            p.processes,
            p.acquisitions,
            p.handoffs.len(),
            p50 / rtt,
            p99 / rtt,
            p.published,
            p.woken,
            p.wasted,
            p.server_usec,
            p.subscribers,
            p.scripts,
            top.join(", ")
        );
    }
    let _ = writeln!(out);
    waiter_targets(out, points);
    draw_into(out, [waiter_chart(points)]);
}

/// The targets, judged per kind on one process and on the most processes measured.
fn waiter_targets(out: &mut String, points: &[WaiterPoint]) {
    let _ = writeln!(
        out,
        "| kind, processes | p99 at the most waiters / at one waiter | published per release, least – most |"
    );
    let _ = writeln!(out, "|---|---|---|");
    for kind in [LockKind::Plain, LockKind::Fair] {
        for processes in PROCESSES {
            let line: Vec<&WaiterPoint> =
                points.iter().filter(|p| p.kind == kind && p.processes == processes).collect();
            let (Some(first), Some(last)) = (line.first(), line.last()) else { continue };
            let growth = last.percentile(0.99) / first.percentile(0.99);
            let published = line.iter().map(|p| p.published);
            let (least, most) = published.fold((f64::MAX, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
            let _ = writeln!(
                out,
                "| {}, {processes} | {growth:.2} ({} → {} waiters; ≤ {TARGET_P99_GROWTH}: {}) | {least:.3} – {most:.3} |",
                kind.as_str(),
                first.waiters,
                last.waiters,
                verdict(growth <= TARGET_P99_GROWTH)
            );
        }
    }
    let _ = writeln!(out);
}

/// The hand-off's p50 and p99 by the waiters, one line per kind and spread.
fn waiter_chart(points: &[WaiterPoint]) -> LogLogChart<'static> {
    let mut series = Vec::new();
    for kind in [LockKind::Plain, LockKind::Fair] {
        for processes in [1, 16] {
            for (label, p) in [("p50", 0.5), ("p99", 0.99)] {
                series.push(Series {
                    name: format!("{} lock, {processes} process(es): {label}", kind.as_str()),
                    points: points
                        .iter()
                        .filter(|w| w.kind == kind && w.processes == processes)
                        .map(|w| (w.waiters as f64, w.percentile(p)))
                        .collect(),
                });
            }
        }
    }
    LogLogChart {
        file: "waiter-curve-handoff.svg",
        title: "Hand-off time by the threads waiting on one lock",
        x_label: "waiters",
        y_label: "µs",
        series,
    }
}
