//! Step 3, throughput: threads in several processes looping `lock()` + `unlock()`, on one
//! shared lock or on one lock each; step 9 runs the same with the peers' locks.

use std::fmt::Write as _;
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::Duration;

use redlease_testkit::server::RedisServer;

use crate::child::{KIND_ENV, PROCESS_ENV, SHARED_ENV, URL_ENV, Worker, child_env, read_window, say, send_window};
use crate::clock::{mono_ns, sleep_until_mono};
use crate::experiments::LockKind;
use crate::experiments::contenders::{Process, Subject};
use crate::plan::Plan;
use crate::stats::{reset_server_stats, server_command_stats};

/// Threads per process in the throughput runs.
pub(crate) const THREADS_PER_PROCESS: usize = 4;
/// Processes in the throughput runs.
pub(crate) const PROCESSES: usize = 2;

pub(crate) struct Throughput {
    pub(crate) subject: Subject,
    /// One lock shared by every thread, or one lock per thread.
    pub(crate) shared: bool,
    pub(crate) acquisitions: u64,
    pub(crate) per_sec: f64,
    pub(crate) per_process: Vec<u64>,
    /// Scripts Redis ran (`INFO commandstats`) per acquisition: acquire, release, and the
    /// attempts of waiters that were woken or polled. For a peer, the commands its clients
    /// send (see [`Subject::commands`]).
    pub(crate) scripts: f64,
    /// Redis's time running them, per acquisition, µs.
    pub(crate) server_usec: f64,
    /// The same as a share of the window: how busy Redis was running scripts.
    pub(crate) server_busy: f64,
    /// Of consecutive acquisitions, the fraction that went to the other process, and to
    /// another thread (one exclusive lock only).
    pub(crate) alternation: Option<(f64, f64)>,
}

pub(crate) fn measure_throughput(server: &RedisServer, plan: &Plan, subject: Subject, shared: bool) -> Throughput {
    let mut workers: Vec<Worker> = (0..PROCESSES)
        .map(|p| {
            Worker::spawn(
                "throughput",
                &[
                    (URL_ENV, server.url()),
                    (KIND_ENV, subject.as_str().to_string()),
                    (SHARED_ENV, shared.to_string()),
                    (PROCESS_ENV, p.to_string()),
                ],
            )
        })
        .collect();
    let (mut stats, _) = start_window(server, &mut workers, plan.throughput_for);
    let exclusive = shared && subject != Subject::Lock(LockKind::Read);
    let mut per_process = Vec::new();
    // (time, process, thread) of every acquisition.
    let mut stamps: Vec<(u64, usize, usize)> = Vec::new();
    for (p, worker) in workers.iter().enumerate() {
        per_process.push(worker.expect("count ").parse::<u64>().expect("acquisition count"));
        if exclusive {
            let line = worker.expect("stamps");
            stamps.extend(line.split_whitespace().map(|s| {
                let (at, thread) = s.split_once('/').expect("time/thread");
                (at.parse().expect("timestamp"), p, thread.parse().expect("thread index"))
            }));
        }
    }
    // Every thread has returned: only the window's calls (and their warm-up) were counted.
    let (scripts, server_usec) = subject
        .commands()
        .iter()
        .map(|command| server_command_stats(&mut stats, command))
        .fold((0, 0), |(calls, usec), (c, u)| (calls + c, usec + u));
    for worker in workers {
        worker.finish();
    }
    let acquisitions: u64 = per_process.iter().sum();
    let alternation = exclusive.then(|| {
        // Each stamp was taken while holding the lock, so their order is the order of holds.
        stamps.sort_unstable();
        let pairs = (stamps.len().max(2) - 1) as f64;
        let other_process = stamps.windows(2).filter(|w| w[0].1 != w[1].1).count();
        let other_thread = stamps.windows(2).filter(|w| (w[0].1, w[0].2) != (w[1].1, w[1].2)).count();
        (other_process as f64 / pairs, other_thread as f64 / pairs)
    });
    Throughput {
        subject,
        shared,
        acquisitions,
        per_sec: acquisitions as f64 / plan.throughput_for.as_secs_f64(),
        per_process,
        scripts: scripts as f64 / acquisitions.max(1) as f64,
        server_usec: server_usec as f64 / acquisitions.max(1) as f64,
        server_busy: server_usec as f64 / 1e6 / plan.throughput_for.as_secs_f64(),
        alternation,
    }
}

/// Once every one of `workers` is ready: resets the server's counters and sends the workers
/// a window of `length`; returns the connection to read the counters on after it, and the
/// window (see [`send_window`]).
pub(crate) fn start_window(
    server: &RedisServer,
    workers: &mut [Worker],
    length: Duration,
) -> (redis::Connection, (u64, u64)) {
    for worker in workers.iter() {
        worker.expect("ready");
    }
    let mut stats = server.conn();
    reset_server_stats(&mut stats);
    let window = send_window(workers, length);
    (stats, window)
}

/// Child: `THREADS_PER_PROCESS` threads sharing one client (or a peer's manager) loop
/// `lock(); unlock()` between the start and end times the parent sends, on one shared lock
/// or on one lock each.
pub(crate) fn throughput_child() {
    let subject = Subject::parse(&child_env(KIND_ENV));
    let shared = child_env(SHARED_ENV) == "true";
    let process_index = child_env(PROCESS_ENV);
    let process = Process::open(subject, &child_env(URL_ENV));
    let ready = Arc::new(Barrier::new(THREADS_PER_PROCESS + 1));
    let window: Arc<OnceLock<(u64, u64)>> = Arc::default();
    let threads: Vec<_> = (0..THREADS_PER_PROCESS)
        .map(|t| {
            let (process, ready, window) = (process.clone(), Arc::clone(&ready), Arc::clone(&window));
            let name = if shared {
                format!("bench:throughput:{}", subject.as_str())
            } else {
                format!("bench:throughput:{}:{process_index}:{t}", subject.as_str())
            };
            let warm = format!("bench:throughput:warm:{process_index}:{t}");
            thread::spawn(move || {
                let mut lock = process.contender(&name);
                // Open this thread's connection before the clock starts: the client's pooled
                // one, or the peer's (redis-lock's is the contender's own).
                match process.client() {
                    Some(client) => {
                        let warm = client.lock(warm);
                        for _ in 0..20 {
                            let guard = warm.try_lock().expect("warm-up try_lock").expect("warm-up lock is free");
                            guard.unlock().expect("unlock");
                        }
                    }
                    None => {
                        for _ in 0..20 {
                            if lock.try_take() {
                                lock.give_back();
                            }
                        }
                    }
                }
                ready.wait();
                ready.wait();
                let (start, end) = *window.get().expect("start time set before the second barrier");
                sleep_until_mono(start);
                let mut stamps = Vec::new();
                loop {
                    lock.take();
                    let now = mono_ns();
                    if now >= end {
                        lock.give_back();
                        return stamps;
                    }
                    stamps.push((now - start, t));
                    lock.give_back();
                }
            })
        })
        .collect();
    ready.wait();
    say("ready");
    window.set(read_window()).expect("the window is set once");
    ready.wait();
    let stamps: Vec<(u64, usize)> = threads.into_iter().flat_map(|t| t.join().expect("throughput thread")).collect();
    say(&format!("count {}", stamps.len()));
    if shared && subject != Subject::Lock(LockKind::Read) {
        let mut line = String::from("stamps");
        for (at, thread) in &stamps {
            write!(line, " {at}/{thread}").expect("write to a String");
        }
        say(&line);
    }
}

/// Step 3's section, in round trips `rtt`.
pub(crate) fn throughput_section(out: &mut String, rtt: f64, runs: &[Throughput]) {
    let _ = writeln!(
        out,
        "### 3. Throughput, {PROCESSES} processes × {THREADS_PER_PROCESS} threads, `lock()` + `unlock()` in a loop\n"
    );
    let _ = writeln!(
        out,
        "| lock | acquisitions | per process | acquisitions/s | µs per acquisition | scripts per acquisition | Redis running them, µs per acquisition (share of the window) | to the other process | to another thread |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for t in runs {
        let what = match (t.subject, t.shared) {
            (Subject::Lock(LockKind::Plain), true) => "plain, one shared lock",
            (Subject::Lock(LockKind::Plain), false) => "plain, one lock per thread (8)",
            (Subject::Lock(LockKind::Fair), true) => "fair, one shared lock",
            (Subject::Lock(LockKind::Fair), false) => "fair, one lock per thread (8)",
            (Subject::Lock(LockKind::Read), true) => "read side of one read-write lock (8 readers)",
            (Subject::Lock(LockKind::Read), false) => "read side, one lock per thread (8)",
            (subject, _) => unreachable!("{subject:?} in step 3"),
        };
        throughput_row(out, what, t, rtt);
    }
    let _ = writeln!(out);
}

/// One row of a throughput table (step 3's, and step 9's of the peers).
pub(crate) fn throughput_row(out: &mut String, what: &str, t: &Throughput, rtt: f64) {
    let per_process: Vec<String> = t.per_process.iter().map(u64::to_string).collect();
    // Whole percents, but a share below 1 % is not rounded to nothing.
    let percent = |f: f64| match f {
        f if f > 0.0 && f < 0.0001 => "< 0.01 %".to_string(),
        f if f > 0.0 && f < 0.01 => format!("{:.2} %", f * 100.0),
        f => format!("{:.0} %", f * 100.0),
    };
    let (process, thread) =
        t.alternation.map_or_else(|| ("–".to_string(), "–".to_string()), |(p, t)| (percent(p), percent(t)));
    let _ = writeln!(
        out,
        "| {what} | {} | {} | {:.0} | {:.1} ({:.2} RTT) | {:.2} | {:.1} ({:.0} %) | {process} | {thread} |",
        t.acquisitions,
        per_process.join(" / "),
        t.per_sec,
        1e6 / t.per_sec,
        1e6 / t.per_sec / rtt,
        t.scripts,
        t.server_usec,
        t.server_busy * 100.0
    );
}
