//! What the `redlease` command costs (`cargo bench -p redlease-cli`), against a real
//! `redis-server` on loopback:
//!
//! 1. one raw Redis round trip (`PING`), the physical limit every lock operation pays;
//! 2. the wall time of `redlease run NAME -- true` against `true` alone, for a free lock,
//!    and what the library alone takes for the same work in-process (build a client,
//!    acquire, release);
//! 3. the time from `redlease` starting to its command's first instruction, against the
//!    same command started directly (the command is this benchmark's own binary, which
//!    prints `CLOCK_MONOTONIC` first thing: the clock is the same in every process);
//! 4. the hand-off: from one run's command exiting to the next, waiting, run's command
//!    starting.
//!
//! Each figure is a median (and p90) over many runs, with the machine it ran on.

use std::fs;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::time::{ClockId, clock_gettime};
use redlease_testkit::server::RedisServer;

const BIN: &str = env!("CARGO_BIN_EXE_redlease");
/// Set in the environment of this binary started as a command under `redlease run`.
const CHILD_ENV: &str = "REDLEASE_BENCH_CHILD";

fn now_ns() -> u128 {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    t.tv_sec() as u128 * 1_000_000_000 + t.tv_nsec() as u128
}

fn main() {
    // As a command: say when it started; "hold:<ms>" waits that long, then says when it
    // leaves.
    if let Ok(mode) = std::env::var(CHILD_ENV) {
        let started = now_ns();
        if let Some(ms) = mode.strip_prefix("hold:") {
            thread::sleep(Duration::from_millis(ms.parse().unwrap_or(0)));
            println!("start {started} exit {}", now_ns());
        } else {
            println!("start {started}");
        }
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 40 } else { 300 };
    let server = RedisServer::start();
    let url = server.url();
    let machine = machine();
    let pinned = pin(&server);
    println!("redlease CLI overhead ({} runs each{})", n, if quick { ", --quick" } else { "" });
    println!("machine: {machine}");
    println!("placement: {pinned}");
    println!("load average before: {}", load());
    println!();

    let rtt = round_trip(&server, n * 10);
    row("raw Redis round trip (PING)", &rtt, None);

    let plain = wall(n, || Command::new("true").status().is_ok_and(|s| s.success()));
    row("`true` alone, wall", &plain, None);
    let under = wall(n, || {
        Command::new(BIN).args(["run", "--url", &url, "bench-wall", "--", "true"]).status().is_ok_and(|s| s.success())
    });
    row("`redlease run NAME -- true`, wall", &under, None);
    let overhead = Stats::of(under.samples.iter().zip(&plain.samples).map(|(u, p)| u.saturating_sub(*p)).collect());
    row("  overhead (run - true)", &overhead, Some(rtt.median));

    // What the library alone costs for the same work, in this process: connect (PING,
    // loading the scripts, the permission check, ROLE), acquire, release, shut down.
    let library = wall(n, || {
        let client = redlease::Client::open(&url).expect("client");
        let released = client.lock("bench-library").try_lock().ok().flatten().is_some_and(|g| g.unlock().is_ok());
        client.shutdown();
        released
    });
    row("  of which the library: build + try_lock + unlock", &library, Some(rtt.median));

    let me = std::env::current_exe().expect("current_exe");
    let direct = start_latency(n, || {
        let mut cmd = Command::new(&me);
        cmd.env(CHILD_ENV, "1");
        cmd
    });
    row("start to command, command alone", &direct, None);
    let through = start_latency(n, || {
        let mut cmd = Command::new(BIN);
        cmd.args(["run", "--url", &url, "bench-start", "--"]).arg(&me).env(CHILD_ENV, "1");
        cmd
    });
    row("start to command, under redlease run", &through, None);
    let added = Stats::of(through.samples.iter().zip(&direct.samples).map(|(t, d)| t.saturating_sub(*d)).collect());
    row("  added by redlease (start to exec)", &added, Some(rtt.median));

    let handoff = hand_off(&url, &me, if quick { 10 } else { 40 });
    row("hand-off: command exits -> next run's command starts", &handoff, Some(rtt.median));
    println!();
    println!("load average after: {}", load());
}

/// As `benches/locks` does: `redis-server` on CPU 0, this process and every process it
/// starts on CPU 1, so that each round trip crosses CPUs as it would cross a network and
/// the scheduler does not switch between the two placements during a run.
fn pin(server: &RedisServer) -> String {
    let cpus = thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let Some(pid) = server.pid() else { return "unpinned (no server pid)".to_owned() };
    if cpus < 2 || std::env::var_os("REDLEASE_BENCH_PIN").is_some_and(|v| v == "0") {
        return "unpinned".to_owned();
    }
    let server_pinned = Command::new("taskset")
        .args(["-pc", "0", &pid.to_string()])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let mut mine = nix::sched::CpuSet::new();
    let self_pinned =
        mine.set(1).is_ok() && nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &mine).is_ok();
    if server_pinned && self_pinned {
        "redis-server on CPU 0, the benchmark and its processes on CPU 1".to_owned()
    } else {
        "unpinned (taskset or sched_setaffinity failed)".to_owned()
    }
}

fn load() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Round trips of `PING` on one connection.
fn round_trip(server: &RedisServer, n: usize) -> Stats {
    let mut conn = server.conn();
    for _ in 0..100 {
        let _: String = redis::cmd("PING").query(&mut conn).expect("PING");
    }
    Stats::of(
        (0..n)
            .map(|_| {
                let t = Instant::now();
                let _: String = redis::cmd("PING").query(&mut conn).expect("PING");
                t.elapsed()
            })
            .collect(),
    )
}

/// Wall times of `n` runs of `f` (after a few warm-up runs).
fn wall(n: usize, mut f: impl FnMut() -> bool) -> Stats {
    for _ in 0..5 {
        assert!(f(), "warm-up run failed");
    }
    Stats::of(
        (0..n)
            .map(|_| {
                let t = Instant::now();
                assert!(f(), "a run failed");
                t.elapsed()
            })
            .collect(),
    )
}

/// From spawning `cmd()` to the command's own first clock reading.
fn start_latency(n: usize, mut cmd: impl FnMut() -> Command) -> Stats {
    let mut samples = Vec::with_capacity(n);
    for i in 0..n + 5 {
        let spawned = now_ns();
        let out = cmd().stderr(Stdio::inherit()).output().expect("run");
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let started: u128 = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("a start time");
        if i >= 5 {
            samples.push(Duration::from_nanos((started - spawned) as u64));
        }
    }
    Stats::of(samples)
}

/// Two runs on one name: the first's command holds for a while; the second waits; the
/// time from the first command's exit to the second command's start.
fn hand_off(url: &str, me: &std::path::Path, n: usize) -> Stats {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let first = Command::new(BIN)
            .args(["run", "--quiet", "--url", url, "bench-handoff", "--"])
            .arg(me)
            .env(CHILD_ENV, "hold:300")
            .stdout(Stdio::piped())
            .spawn()
            .expect("first");
        // Let the first take the lock and the second start waiting before the first leaves.
        thread::sleep(Duration::from_millis(100));
        let second = Command::new(BIN)
            .args(["run", "--quiet", "--url", url, "bench-handoff", "--"])
            .arg(me)
            .env(CHILD_ENV, "1")
            .stdout(Stdio::piped())
            .spawn()
            .expect("second");
        let first = first.wait_with_output().expect("first");
        let second = second.wait_with_output().expect("second");
        assert!(first.status.success() && second.status.success());
        let first = String::from_utf8_lossy(&first.stdout).into_owned();
        let second = String::from_utf8_lossy(&second.stdout).into_owned();
        let exited: u128 = first.split_whitespace().nth(3).and_then(|s| s.parse().ok()).expect("exit time");
        let started: u128 = second.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("start time");
        assert!(started > exited, "the second command started before the first left: {first} / {second}");
        samples.push(Duration::from_nanos((started - exited) as u64));
    }
    Stats::of(samples)
}

struct Stats {
    samples: Vec<Duration>,
    median: Duration,
    p90: Duration,
}

impl Stats {
    fn of(samples: Vec<Duration>) -> Stats {
        let mut sorted = samples.clone();
        sorted.sort();
        let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
        Stats { median: at(0.5), p90: at(0.9), samples }
    }
}

fn row(what: &str, s: &Stats, per_rtt: Option<Duration>) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let ratio = per_rtt
        .map(|rtt| format!("  = {:.0} round trips", s.median.as_secs_f64() / rtt.as_secs_f64()))
        .unwrap_or_default();
    println!("{what:<55} median {:>8.3} ms  p90 {:>8.3} ms{ratio}", ms(s.median), ms(s.p90));
}

fn machine() -> String {
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let redis = Command::new("redis-server")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).split_whitespace().nth(2).unwrap_or("").to_owned())
        .unwrap_or_default();
    format!("{cpu}, {cores} cores, Linux {}, redis-server {redis}", kernel.trim())
}
