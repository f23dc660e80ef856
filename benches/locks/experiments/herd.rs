//! Step 10, the herd: N processes of one thread each loop `lock()` + 200 µs of work +
//! release on one lock, for N = 2, 4, 8, 16, plain and fair. What a release costs as the
//! number of waiting processes grows: acquisitions per second, the scripts Redis ran per
//! acquisition (acquire, release, and every attempt of a woken waiter), Redis's time
//! per acquisition, and the context switches of the processes' threads per acquisition.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redlease::Client;
use redlease_testkit::server::RedisServer;

use crate::child::{KIND_ENV, LOCK_ENV, URL_ENV, Worker, child_env, read_window, say};
use crate::clock::{mono_ns, sleep_until_mono};
use crate::experiments::LockKind;
use crate::experiments::throughput::start_window;
use crate::plan::Plan;
use crate::stats::server_command_stats;
use crate::table::verdict;

/// The numbers of processes measured.
pub(crate) const HERD_PROCESSES: [usize; 4] = [2, 4, 8, 16];
/// The work done while holding the lock.
pub(crate) const HERD_WORK: Duration = Duration::from_micros(200);

// The step's targets, as docs/performance.md states them.
/// Scripts per acquisition on one contended lock, whatever the number of processes.
const TARGET_HERD_SCRIPTS: f64 = 3.0;
/// Plain throughput with 16 processes as a share of that with 2.
const TARGET_HERD_KEPT: f64 = 0.9;

/// One kind with one number of processes.
pub(crate) struct HerdRun {
    pub(crate) kind: LockKind,
    pub(crate) processes: usize,
    pub(crate) window: Duration,
    pub(crate) acquisitions: u64,
    pub(crate) per_sec: f64,
    /// The fewest and the most acquisitions of one process.
    pub(crate) per_process: (u64, u64),
    /// `EVALSHA`s Redis ran per acquisition.
    pub(crate) scripts: f64,
    /// Redis's time running them per acquisition, µs.
    pub(crate) server_usec: f64,
    /// The times a thread of a herd process went to sleep and was woken again
    /// (`voluntary_ctxt_switches`, all threads), per acquisition: what each release costs
    /// the processes it does not concern.
    pub(crate) switches: f64,
}

pub(crate) fn measure_herd(server: &RedisServer, plan: &Plan) -> Vec<HerdRun> {
    let mut runs = Vec::new();
    for kind in [LockKind::Plain, LockKind::Fair] {
        for processes in HERD_PROCESSES {
            runs.push(herd_run(server, plan, kind, processes));
        }
    }
    runs
}

fn herd_run(server: &RedisServer, plan: &Plan, kind: LockKind, processes: usize) -> HerdRun {
    let name = format!("bench:herd:{}:{processes}", kind.as_str());
    let mut workers: Vec<Worker> = (0..processes)
        .map(|_| {
            Worker::spawn(
                "herd",
                &[(URL_ENV, server.url()), (KIND_ENV, kind.as_str().to_string()), (LOCK_ENV, name.clone())],
            )
        })
        .collect();
    let (mut stats, _) = start_window(server, &mut workers, plan.throughput_for);
    let reports: Vec<(u64, u64)> = workers
        .iter()
        .map(|w| {
            let report = w.expect("count ");
            let (count, switches) = report.split_once(" switches ").expect("count and switches");
            (count.parse().expect("acquisition count"), switches.parse().expect("context switches"))
        })
        .collect();
    let counts: Vec<u64> = reports.iter().map(|r| r.0).collect();
    let switches: u64 = reports.iter().map(|r| r.1).sum();
    // Every process has released for the last time: the window's scripts (and the last
    // attempts of those that acquired after its end) are counted.
    let (scripts, usec) = server_command_stats(&mut stats, "evalsha");
    for worker in workers {
        worker.finish();
    }
    let acquisitions: u64 = counts.iter().sum();
    HerdRun {
        kind,
        processes,
        window: plan.throughput_for,
        acquisitions,
        per_sec: acquisitions as f64 / plan.throughput_for.as_secs_f64(),
        per_process: (counts.iter().copied().min().unwrap_or(0), counts.iter().copied().max().unwrap_or(0)),
        scripts: scripts as f64 / acquisitions.max(1) as f64,
        server_usec: usec as f64 / acquisitions.max(1) as f64,
        switches: switches as f64 / acquisitions.max(1) as f64,
    }
}

/// Child: one client, one thread, looping `lock()` + `HERD_WORK` + release between the
/// start and end times the parent sends; says how many acquisitions fell in the window.
pub(crate) fn herd_child() {
    let kind = LockKind::parse(&child_env(KIND_ENV));
    let client = Client::open(&child_env(URL_ENV)).expect("client of a herd process");
    let lock = kind.handle(&client, child_env(LOCK_ENV));
    // Open the pooled connection before the clock starts.
    let warm = client.lock(format!("bench:herd:warm:{}", std::process::id()));
    for _ in 0..5 {
        warm.try_lock().expect("warm-up try_lock").expect("the warm-up lock is free").unlock().expect("unlock");
    }
    say("ready");
    let (start, end) = read_window();
    sleep_until_mono(start);
    let switches_before = voluntary_switches();
    let mut count = 0u64;
    loop {
        let guard = lock.lock().expect("lock");
        if mono_ns() >= end {
            drop(guard);
            break;
        }
        let work = Instant::now();
        while work.elapsed() < HERD_WORK {
            std::hint::spin_loop();
        }
        drop(guard);
        count += 1;
    }
    let switches = voluntary_switches().saturating_sub(switches_before);
    say(&format!("count {count} switches {switches}"));
}

/// This process's voluntary context switches so far, summed over its threads.
fn voluntary_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .filter_map(|status| {
            status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:")?.trim().parse::<u64>().ok())
        })
        .sum()
}

/// Step 10's section.
pub(crate) fn herd_section(out: &mut String, herd: &[HerdRun]) {
    let _ = writeln!(
        out,
        "### 10. The herd: N processes of one thread each loop `lock()` + {} µs of work + release on one lock \
         for {:.0} s (N = {}); Redis's `INFO commandstats` over the window\n",
        HERD_WORK.as_micros(),
        herd.first().map_or(0.0, |r| r.window.as_secs_f64()),
        HERD_PROCESSES.map(|n| n.to_string()).join(", ")
    );
    let _ = writeln!(
        out,
        "Scripts per acquisition: every `EVALSHA` Redis ran (acquires, releases, the attempts of woken waiters, \
         waiters leaving) over the acquisitions. Context switches: the times a thread of a herd process slept \
         and was woken (`voluntary_ctxt_switches` from `/proc`, every thread of every process) over the \
         acquisitions. Targets: ≤ {TARGET_HERD_SCRIPTS} for both kinds whatever N; plain \
         throughput with 16 processes ≥ {TARGET_HERD_KEPT} × that with 2; fair Redis time per acquisition flat in \
         N.\n"
    );
    let _ = writeln!(
        out,
        "| kind | processes | acquisitions | acquisitions/s | per process: fewest – most | scripts per acquisition | \
         Redis µs per acquisition | context switches per acquisition |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in herd {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {} – {} | {:.2} | {:.1} | {:.1} |",
            r.kind.as_str(),
            r.processes,
            r.acquisitions,
            r.per_sec,
            r.per_process.0,
            r.per_process.1,
            r.scripts,
            r.server_usec,
            r.switches
        );
    }
    let _ = writeln!(out);
    herd_targets(out, herd);
}

/// Step 10's table of the figures its targets judge.
fn herd_targets(out: &mut String, herd: &[HerdRun]) {
    let of = |kind: LockKind, n: usize| herd.iter().find(|r| r.kind == kind && r.processes == n);
    let _ = writeln!(out, "| figure | value | target |");
    let _ = writeln!(out, "|---|---:|---|");
    for kind in [LockKind::Plain, LockKind::Fair] {
        let most = herd.iter().filter(|r| r.kind == kind).map(|r| r.scripts).fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "| {} scripts per acquisition, the most over N | {most:.2} | ≤ {TARGET_HERD_SCRIPTS}: {} |",
            kind.as_str(),
            verdict(most <= TARGET_HERD_SCRIPTS)
        );
    }
    if let (Some(two), Some(sixteen)) = (of(LockKind::Plain, 2), of(LockKind::Plain, 16)) {
        let kept = sixteen.per_sec / two.per_sec;
        let _ = writeln!(
            out,
            "| plain acquisitions/s with 16 processes ÷ with 2 | {kept:.2} | ≥ {TARGET_HERD_KEPT}: {} |",
            verdict(kept >= TARGET_HERD_KEPT)
        );
    }
    if let (Some(two), Some(sixteen)) = (of(LockKind::Fair, 2), of(LockKind::Fair, 16)) {
        let _ = writeln!(
            out,
            "| fair Redis µs per acquisition with 16 processes ÷ with 2 | {:.2} | flat |",
            sixteen.server_usec / two.server_usec
        );
    }
    let _ = writeln!(out);
}
