//! The benchmark of SPEC §10: every figure is set against the physical limit measured in
//! the same run, on the same `redis-server`, over the same kind of connection.
//!
//! ```text
//! cargo bench --bench locks                            # about 80 s on a 2-vCPU VM
//! REDLEASE_BENCH_QUICK=1 cargo bench --bench locks     # fewer samples, about 15 s
//! REDLEASE_BENCH_WRITE_DOC=1 cargo bench --bench locks # also rewrites the results block of docs/performance.md
//! REDLEASE_BENCH_PIN=0 cargo bench --bench locks       # leave placement on the CPUs to the scheduler
//! ```
//!
//! 0. The limit: a trivial `EVALSHA` (`return 1`) round trip on a plain connection, one by
//!    one and pipelined 1000 at a time.
//! 1. Uncontended `try_lock` + `unlock`, with a watchdog lease and with a fixed lease,
//!    interleaved with two trivial calls and with the library's two scripts sent raw.
//! 2. Contended hand-off to a waiter parked in another process (pub/sub wake-up).
//! 3. Throughput of 8 threads in 2 processes, on one lock and on 8 locks.
//! 4. The watchdog renewing 100,000 leases.
//!
//! Child processes are this binary run again with `REDLEASE_BENCH_ROLE` set; they talk back
//! with lines on stdout and take orders as lines on stdin. Every child and server is killed
//! on drop, so a failed run leaves nothing behind.

#[path = "../tests/support/server.rs"]
#[allow(dead_code)]
mod server;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, LockEvents, LockGuard};
use server::RedisServer;

/// Names the role of a child process; unset in the parent.
const ROLE_ENV: &str = "REDLEASE_BENCH_ROLE";
const PARENT_ENV: &str = "REDLEASE_BENCH_PARENT";
const URL_ENV: &str = "REDLEASE_BENCH_URL";
const LOCK_ENV: &str = "REDLEASE_BENCH_LOCK";
const SHARED_ENV: &str = "REDLEASE_BENCH_SHARED";
const PROCESS_ENV: &str = "REDLEASE_BENCH_PROCESS";
/// Set to 1 for a short run.
const QUICK_ENV: &str = "REDLEASE_BENCH_QUICK";
/// Set to 1 to write the results into docs/performance.md.
const WRITE_DOC_ENV: &str = "REDLEASE_BENCH_WRITE_DOC";
/// Set to 0 to leave the processes wherever the scheduler puts them.
const PIN_ENV: &str = "REDLEASE_BENCH_PIN";

/// Threads per process in the throughput runs.
const THREADS_PER_PROCESS: usize = 4;
/// Processes in the throughput runs.
const PROCESSES: usize = 2;
/// Calls per pipeline when measuring pipelined throughput.
const PIPELINE: usize = 1000;
/// The library's default number of leases per renew round trip.
const RENEW_BATCH: u64 = 1000;
/// Watchdog timeout of the renewal run: a renewal every second.
const RENEWAL_WATCHDOG: Duration = Duration::from_secs(3);
/// Round trips made for this long before the limit is measured.
const LIMIT_WARMUP: Duration = Duration::from_secs(1);
/// How long the parent waits for any line from a child.
const CHILD_REPLY_TIMEOUT: Duration = Duration::from_secs(60);

const ACQUIRE_LUA: &str = include_str!("../lua/acquire.lua");
const RELEASE_LUA: &str = include_str!("../lua/release.lua");

// Targets (SPEC §10, as set for this benchmark).
const TARGET_PAIR_RATIO: f64 = 1.15;
const TARGET_HANDOFF_P50_RATIO: f64 = 4.0;
const TARGET_HANDOFF_P99_RATIO: f64 = 20.0;
const TARGET_RENEWAL_FRACTION: f64 = 0.5;

fn main() {
    if let Ok(role) = std::env::var(ROLE_ENV) {
        child_main(&role);
        return;
    }
    let plan = Plan::from_env();
    let started = Instant::now();
    let machine = Machine::read();
    println!("redlease benchmark ({} run)", if plan.quick { "quick" } else { "full" });
    let server = RedisServer::start();
    let placement = place_processes(&server);

    let mut meter = CpuMeter::new(&server);
    let mut step = |name: &str| {
        eprintln!("{name} ...");
        meter.step(name);
    };
    step("0. physical limit");
    let limit = measure_limit(&server, &plan);
    step("1. uncontended acquire + release");
    let uncontended = measure_uncontended(&server, &plan);
    step("2. contended hand-off");
    let handoff = measure_handoff(&server, &plan);
    step("3. throughput");
    let one_lock = measure_throughput(&server, &plan, true);
    let own_locks = measure_throughput(&server, &plan, false);
    step("4. renewal");
    let renewal = measure_renewal(&server, &plan);
    step("");
    let other_work = meter.steps;

    let results = Results { machine, placement, other_work, limit, uncontended, handoff, one_lock, own_locks, renewal };
    let report = results.report();
    println!("\n{report}");
    println!("benchmark time: {:.1} s", started.elapsed().as_secs_f64());
    if std::env::var(WRITE_DOC_ENV).is_ok_and(|v| v == "1") {
        write_doc(&report);
    }
}

/// How many samples each measurement takes.
struct Plan {
    quick: bool,
    warmup: usize,
    round_trips: usize,
    pipelines: usize,
    pairs: usize,
    handoffs: usize,
    throughput_for: Duration,
    leases: usize,
    hold_periods: u32,
}

impl Plan {
    fn from_env() -> Plan {
        if std::env::var(QUICK_ENV).is_ok_and(|v| v == "1") {
            Plan {
                quick: true,
                warmup: 200,
                round_trips: 2_000,
                pipelines: 20,
                pairs: 2_000,
                handoffs: 60,
                throughput_for: Duration::from_secs(1),
                leases: 10_000,
                hold_periods: 3,
            }
        } else {
            Plan {
                quick: false,
                warmup: 2_000,
                round_trips: 20_000,
                pipelines: 500,
                pairs: 20_000,
                handoffs: 400,
                throughput_for: Duration::from_secs(3),
                leases: 100_000,
                hold_periods: 3,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Placement

/// Pins `redis-server` to the last CPU and this process (and so every child and thread it
/// starts later) to the others, so that every round trip crosses CPUs, as it would cross a
/// network. Left to the scheduler, client and server sometimes share a CPU, and a round
/// trip then costs a fraction of a cross-CPU one (on a VM, waking an idle vCPU is what
/// costs): ratios taken minutes apart would compare different limits.
fn place_processes(server: &RedisServer) -> String {
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    if std::env::var(PIN_ENV).is_ok_and(|v| v == "0") {
        return "not pinned (REDLEASE_BENCH_PIN=0)".to_string();
    }
    if cpus < 2 {
        return "not pinned (one CPU)".to_string();
    }
    let server_cpu = cpus - 1;
    let pid = server.pid().expect("the server is running");
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("list the server's threads");
    let server_pinned = tasks
        .flatten()
        .filter_map(|task| task.file_name().to_str().and_then(|tid| tid.parse::<i32>().ok()))
        .all(|tid| pin(tid, &[server_cpu]));
    let client_cpus: Vec<usize> = (0..server_cpu).collect();
    if server_pinned && pin(0, &client_cpus) {
        let clients = if server_cpu == 1 { "CPU 0".to_string() } else { format!("CPUs 0–{}", server_cpu - 1) };
        format!("redis-server pinned to CPU {server_cpu}, the benchmark and its child processes to {clients}")
    } else {
        "not pinned (sched_setaffinity failed)".to_string()
    }
}

/// Restricts thread `tid` (0: the calling thread, and threads it starts later) to `cpus`.
fn pin(tid: i32, cpus: &[usize]) -> bool {
    use nix::libc;
    // SAFETY: `cpu_set_t` is plain data and all zeroes is the empty set; `CPU_SET` writes
    // inside it for any cpu below `CPU_SETSIZE` (checked); `sched_setaffinity` reads
    // exactly `size_of::<cpu_set_t>()` bytes from a valid reference.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            assert!(cpu < libc::CPU_SETSIZE as usize, "CPU {cpu} beyond CPU_SETSIZE");
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// How much CPU processes other than this benchmark (itself, its children, its
/// `redis-server`) use, step by step: the figures are only as good as the machine was quiet.
struct CpuMeter {
    server_pid: u32,
    current: Option<(String, CpuSample)>,
    steps: Vec<(String, f64)>,
}

#[derive(Clone, Copy)]
struct CpuSample {
    at: Instant,
    /// Busy ticks of the whole machine.
    busy: u64,
    /// Ticks of this process, its reaped children and the server.
    ours: u64,
}

impl CpuMeter {
    fn new(server: &RedisServer) -> CpuMeter {
        CpuMeter { server_pid: server.pid().expect("the server is running"), current: None, steps: Vec::new() }
    }

    /// Ends the current step (if any) and starts `name` (none when empty).
    fn step(&mut self, name: &str) {
        let now = self.sample();
        if let Some((previous, start)) = self.current.take() {
            let ticks_per_sec = 100.0; // USER_HZ on Linux
            let elapsed = now.at.duration_since(start.at).as_secs_f64() * ticks_per_sec;
            let other = now.busy.saturating_sub(start.busy).saturating_sub(now.ours.saturating_sub(start.ours));
            self.steps.push((previous, other as f64 / elapsed.max(1.0)));
        }
        if !name.is_empty() {
            self.current = Some((name.to_string(), now));
        }
    }

    fn sample(&self) -> CpuSample {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        // cpu  user nice system idle iowait irq softirq steal ...
        let fields: Vec<u64> =
            stat.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
        let busy = [0, 1, 2, 5, 6].iter().filter_map(|&i| fields.get(i)).sum();
        let ours = process_ticks("self", true) + process_ticks(&self.server_pid.to_string(), false);
        CpuSample { at: Instant::now(), busy, ours }
    }
}

/// utime + stime of a process (and of its reaped children when `children`), in ticks.
fn process_ticks(pid: &str, children: bool) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after "pid (comm) ": state is field 3; utime, stime, cutime, cstime are 14–17.
    let Some((_, rest)) = stat.rsplit_once(") ") else { return 0 };
    let fields: Vec<u64> = rest.split_whitespace().skip(11).take(4).filter_map(|f| f.parse().ok()).collect();
    let count = if children { 4 } else { 2 };
    fields.iter().take(count).sum()
}

// ---------------------------------------------------------------------------------------
// Statistics and clocks

/// Sorted samples reduced to what the report shows, in microseconds.
#[derive(Clone, Copy, Debug)]
struct Summary {
    n: usize,
    mean: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
}

impl Summary {
    /// Summarises samples given in nanoseconds.
    fn of_nanos(mut samples: Vec<u64>) -> Summary {
        assert!(!samples.is_empty(), "no samples to summarise");
        samples.sort_unstable();
        let micros = |ns: u64| ns as f64 / 1_000.0;
        let total: u128 = samples.iter().map(|&s| u128::from(s)).sum();
        Summary {
            n: samples.len(),
            mean: total as f64 / samples.len() as f64 / 1_000.0,
            p50: micros(percentile(&samples, 0.50)),
            p90: micros(percentile(&samples, 0.90)),
            p99: micros(percentile(&samples, 0.99)),
            max: micros(*samples.last().expect("not empty")),
        }
    }
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[u64], q: f64) -> u64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).expect("duration fits in u64 nanoseconds")
}

/// CLOCK_MONOTONIC in nanoseconds: comparable across processes on one host.
fn mono_ns() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock_gettime(CLOCK_MONOTONIC)");
    let secs = u64::try_from(now.tv_sec()).expect("monotonic seconds are positive");
    let subsec = u64::try_from(now.tv_nsec()).expect("monotonic nanoseconds are positive");
    secs * 1_000_000_000 + subsec
}

fn sleep_until_mono(at_ns: u64) {
    let now = mono_ns();
    if at_ns > now {
        thread::sleep(Duration::from_nanos(at_ns - now));
    }
}

/// Times `op` `warmup + n` times and summarises the last `n`.
fn time_each(warmup: usize, n: usize, mut op: impl FnMut()) -> Summary {
    for _ in 0..warmup {
        op();
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        op();
        samples.push(nanos(start.elapsed()));
    }
    Summary::of_nanos(samples)
}

/// `CONFIG RESETSTAT`, so that the next [`server_usec_per_call`] covers only what follows.
fn reset_server_stats(conn: &mut redis::Connection) {
    redis::cmd("CONFIG").arg("RESETSTAT").query::<()>(conn).expect("CONFIG RESETSTAT");
}

/// Server-side microseconds per call of `command` since the last reset (`INFO commandstats`).
/// For `EVALSHA` this is the whole script, including the commands it runs.
fn server_usec_per_call(conn: &mut redis::Connection, command: &str) -> f64 {
    let (calls, usec) = server_command_stats(conn, command);
    usec as f64 / calls.max(1) as f64
}

/// Calls of `command` and server microseconds spent in them since the last reset.
fn server_command_stats(conn: &mut redis::Connection, command: &str) -> (u64, u64) {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).expect("INFO commandstats");
    let prefix = format!("cmdstat_{command}:");
    let Some(fields) = info.lines().find_map(|line| line.strip_prefix(&prefix)) else { return (0, 0) };
    let field =
        |name: &str| fields.split(',').find_map(|f| f.strip_prefix(name)).and_then(|v| v.parse().ok()).unwrap_or(0);
    (field("calls="), field("usec="))
}

// ---------------------------------------------------------------------------------------
// 0. The physical limit

struct Limit {
    /// One trivial EVALSHA round trip.
    rtt: Summary,
    /// Server time of one trivial EVALSHA, µs.
    server_usec: f64,
    /// Trivial EVALSHAs per second, pipelined `PIPELINE` at a time.
    pipelined_per_sec: f64,
}

fn measure_limit(server: &RedisServer, plan: &Plan) -> Limit {
    let mut conn = server.conn();
    let call = trivial_call(&mut conn);
    // Round trips until the machine is in its busy steady state (a VM's idle vCPU wakes
    // slower after a quiet spell), then the measured ones.
    let warm_until = Instant::now() + LIMIT_WARMUP;
    while Instant::now() < warm_until {
        let _: i64 = call.query(&mut conn).expect("trivial EVALSHA");
    }
    reset_server_stats(&mut conn);
    let rtt = time_each(plan.warmup, plan.round_trips, || {
        let one: i64 = call.query(&mut conn).expect("trivial EVALSHA");
        assert_eq!(one, 1);
    });
    let server_usec = server_usec_per_call(&mut conn, "evalsha");
    let pipelined_per_sec = pipelined_rate(&mut conn, plan.pipelines);
    Limit { rtt, server_usec, pipelined_per_sec }
}

/// `EVALSHA` of `return 1` (loaded with `SCRIPT LOAD`).
fn trivial_call(conn: &mut redis::Connection) -> redis::Cmd {
    let sha: String =
        redis::cmd("SCRIPT").arg("LOAD").arg("return 1").query(conn).expect("SCRIPT LOAD of the trivial script");
    let mut call = redis::cmd("EVALSHA");
    call.arg(sha).arg(0);
    call
}

/// Trivial `EVALSHA`s per second, `PIPELINE` per pipeline, over `pipelines` pipelines.
fn pipelined_rate(conn: &mut redis::Connection, pipelines: usize) -> f64 {
    let call = trivial_call(conn);
    let mut pipe = redis::pipe();
    for _ in 0..PIPELINE {
        pipe.add_command(call.clone());
    }
    let mut run_pipeline = || {
        let replies: Vec<i64> = pipe.query(conn).expect("pipelined trivial EVALSHA");
        assert_eq!(replies.len(), PIPELINE);
    };
    for _ in 0..pipelines / 10 {
        run_pipeline();
    }
    let start = Instant::now();
    for _ in 0..pipelines {
        run_pipeline();
    }
    (pipelines * PIPELINE) as f64 / start.elapsed().as_secs_f64()
}

// ---------------------------------------------------------------------------------------
// 1. Uncontended acquire + release

/// Pairs per block; the kinds of pair are measured in interleaved blocks so that the
/// machine's drift (a noisy 2-core VM) hits them alike.
const PAIR_BLOCKS: usize = 10;

/// One kind of acquire + release pair: the whole pair, its first call (acquire) and the
/// rest (release), and the server time per `EVALSHA` while it ran.
struct PairStats {
    pair: Summary,
    acquire: Summary,
    release: Summary,
    server_usec: f64,
}

/// Samples of one kind of pair, gathered block by block.
#[derive(Default)]
struct PairSamples {
    pair: Vec<u64>,
    acquire: Vec<u64>,
    release: Vec<u64>,
    server_calls: u64,
    server_usec: u64,
}

impl PairSamples {
    fn finish(self) -> PairStats {
        PairStats {
            pair: Summary::of_nanos(self.pair),
            acquire: Summary::of_nanos(self.acquire),
            release: Summary::of_nanos(self.release),
            server_usec: self.server_usec as f64 / self.server_calls.max(1) as f64,
        }
    }
}

struct Uncontended {
    /// Two trivial `EVALSHA`s: the limit, measured again between the other blocks.
    trivial: PairStats,
    /// `lua/acquire.lua` and `lua/release.lua` sent raw on a plain connection, with the
    /// arguments the library sends: the scripts' cost without the library's own work.
    raw_scripts: PairStats,
    watchdog: PairStats,
    fixed: PairStats,
}

/// A timed operation that returns how long its first half took.
type PairOp<'a> = Box<dyn FnMut() -> Duration + 'a>;

fn measure_uncontended(server: &RedisServer, plan: &Plan) -> Uncontended {
    let client = Client::open(&server.url()).expect("client for the uncontended run");
    let watchdog = client.lock("bench:uncontended");
    let fixed = client.lock("bench:uncontended:fixed").with_lease(Duration::from_secs(30));
    let (mut trivial_conn, mut raw_conn, mut stats_conn) = (server.conn(), server.conn(), server.conn());
    let trivial = trivial_call(&mut trivial_conn);
    let (acquire_script, release_script) = (redis::Script::new(ACQUIRE_LUA), redis::Script::new(RELEASE_LUA));
    let raw_name = "bench:uncontended:raw";
    let owner = format!("{}:1", client.id());
    let mut request = 0u64;

    let library_pair = |lock: &redlease::Lock| {
        let start = Instant::now();
        let guard = lock.try_lock().expect("try_lock").expect("an uncontended lock is free");
        let acquired = start.elapsed();
        guard.unlock().expect("unlock");
        acquired
    };
    let mut ops: Vec<PairOp> = vec![
        Box::new(|| {
            let start = Instant::now();
            let _: i64 = trivial.query(&mut trivial_conn).expect("trivial EVALSHA");
            let first = start.elapsed();
            let _: i64 = trivial.query(&mut trivial_conn).expect("trivial EVALSHA");
            first
        }),
        Box::new(|| {
            let start = Instant::now();
            let reply: Option<i64> =
                acquire_script.key(raw_name).arg(30_000).arg(&owner).invoke(&mut raw_conn).expect("raw acquire");
            assert_eq!(reply, None, "raw acquire of a free lock");
            let first = start.elapsed();
            request += 1;
            let reply: Option<i64> = release_script
                .key(raw_name)
                .key(format!("redisson_lock__channel:{{{raw_name}}}"))
                .key(format!("redisson_unlock_latch:{{{raw_name}}}:{request:032x}"))
                .arg(0)
                .arg(30_000)
                .arg(&owner)
                .arg(12_000)
                .invoke(&mut raw_conn)
                .expect("raw release");
            assert_eq!(reply, Some(1), "raw release of a held lock");
            first
        }),
        Box::new(|| library_pair(&watchdog)),
        Box::new(|| library_pair(&fixed)),
    ];
    for op in &mut ops {
        for _ in 0..plan.warmup {
            op();
        }
    }
    let mut samples: Vec<PairSamples> = ops.iter().map(|_| PairSamples::default()).collect();
    for _ in 0..PAIR_BLOCKS {
        for (op, kind) in ops.iter_mut().zip(&mut samples) {
            reset_server_stats(&mut stats_conn);
            for _ in 0..plan.pairs / PAIR_BLOCKS {
                let start = Instant::now();
                let first = nanos(op());
                let pair = nanos(start.elapsed());
                kind.pair.push(pair);
                kind.acquire.push(first);
                kind.release.push(pair - first);
            }
            let (calls, usec) = server_command_stats(&mut stats_conn, "evalsha");
            kind.server_calls += calls;
            kind.server_usec += usec;
        }
    }
    drop(ops);
    let mut kinds = samples.into_iter().map(PairSamples::finish);
    let mut next = || kinds.next().expect("one result per kind");
    Uncontended { trivial: next(), raw_scripts: next(), watchdog: next(), fixed: next() }
}

// ---------------------------------------------------------------------------------------
// 2. Contended hand-off across processes

/// Rounds before the measured ones (they open the child's pub/sub connection).
const HANDOFF_WARMUP: usize = 20;
/// How long a subscribed waiter is given to retry and park before the release.
const HANDOFF_SETTLE: Duration = Duration::from_millis(2);

fn measure_handoff(server: &RedisServer, plan: &Plan) -> Summary {
    let name = "bench:handoff";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let client = Client::open(&server.url()).expect("client for the hand-off run");
    let lock = client.lock(name);
    let mut raw = server.conn();
    let mut child = Worker::spawn("handoff", &[(URL_ENV, server.url()), (LOCK_ENV, name.to_string())]);
    child.expect("ready");
    let mut guard = lock.try_lock().expect("try_lock").expect("the hand-off lock starts free");
    let mut samples = Vec::with_capacity(plan.handoffs);
    for round in 0..HANDOFF_WARMUP + plan.handoffs {
        child.send("go");
        child.expect("waiting");
        wait_for_subscriber(&mut raw, &channel);
        thread::sleep(HANDOFF_SETTLE);
        let t0 = mono_ns();
        guard.unlock().expect("unlock for the hand-off");
        let t1: u64 = child.expect("acquired ").parse().expect("the child's acquisition time");
        if round >= HANDOFF_WARMUP {
            samples.push(t1.checked_sub(t0).expect("the child acquired after the release"));
        }
        guard = lock.try_lock().expect("try_lock").expect("the child has released");
    }
    guard.unlock().expect("final unlock");
    child.send("quit");
    child.finish();
    Summary::of_nanos(samples)
}

/// Polls `PUBSUB NUMSUB` until someone is subscribed to `channel`.
fn wait_for_subscriber(conn: &mut redis::Connection, channel: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, count): (String, u64) =
            redis::cmd("PUBSUB").arg("NUMSUB").arg(channel).query(conn).expect("PUBSUB NUMSUB");
        if count >= 1 {
            return;
        }
        assert!(Instant::now() < deadline, "the waiting child did not subscribe to {channel} within 10 s");
        thread::sleep(Duration::from_micros(100));
    }
}

/// Child: on each "go", blocks in `lock()`, notes the time it returned, releases, reports.
fn handoff_child() {
    let client = Client::open(&child_env(URL_ENV)).expect("child client");
    let lock = client.lock(child_env(LOCK_ENV));
    say("ready");
    for line in std::io::stdin().lock().lines() {
        match line.expect("read the parent's order").as_str() {
            "go" => {
                say("waiting");
                let guard = lock.lock().expect("child lock()");
                let t1 = mono_ns();
                guard.unlock().expect("child unlock");
                say(&format!("acquired {t1}"));
            }
            "quit" => return,
            other => panic!("unknown order {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// 3. Throughput

struct Throughput {
    acquisitions: u64,
    per_sec: f64,
    per_process: Vec<u64>,
    /// Of consecutive acquisitions, the fraction that went to the other process (one lock only).
    alternation: Option<f64>,
}

fn measure_throughput(server: &RedisServer, plan: &Plan, one_lock: bool) -> Throughput {
    let mut workers: Vec<Worker> = (0..PROCESSES)
        .map(|p| {
            Worker::spawn(
                "throughput",
                &[(URL_ENV, server.url()), (SHARED_ENV, one_lock.to_string()), (PROCESS_ENV, p.to_string())],
            )
        })
        .collect();
    for worker in &workers {
        worker.expect("ready");
    }
    let start = mono_ns() + nanos(Duration::from_millis(100));
    let end = start + nanos(plan.throughput_for);
    for worker in &mut workers {
        worker.send(&format!("start {start} {end}"));
    }
    let mut per_process = Vec::new();
    let mut stamps: Vec<(u64, usize)> = Vec::new();
    for (p, worker) in workers.iter().enumerate() {
        per_process.push(worker.expect("count ").parse::<u64>().expect("acquisition count"));
        if one_lock {
            let line = worker.expect("stamps");
            stamps.extend(line.split_whitespace().map(|s| (s.parse::<u64>().expect("timestamp"), p)));
        }
    }
    for worker in workers {
        worker.finish();
    }
    let acquisitions: u64 = per_process.iter().sum();
    let alternation = one_lock.then(|| {
        // Each stamp was taken while holding the lock, so their order is the order of holds.
        stamps.sort_unstable();
        let switches = stamps.windows(2).filter(|w| w[0].1 != w[1].1).count();
        switches as f64 / (stamps.len().max(2) - 1) as f64
    });
    Throughput {
        acquisitions,
        per_sec: acquisitions as f64 / plan.throughput_for.as_secs_f64(),
        per_process,
        alternation,
    }
}

/// Child: `THREADS_PER_PROCESS` threads sharing one client loop `lock(); unlock()` between
/// the start and end times the parent sends, on one shared lock or on one lock each.
fn throughput_child() {
    let one_lock = child_env(SHARED_ENV) == "true";
    let process = child_env(PROCESS_ENV);
    let client = Client::open(&child_env(URL_ENV)).expect("child client");
    let ready = Arc::new(Barrier::new(THREADS_PER_PROCESS + 1));
    let window: Arc<OnceLock<(u64, u64)>> = Arc::default();
    let threads: Vec<_> = (0..THREADS_PER_PROCESS)
        .map(|t| {
            let (client, ready, window) = (client.clone(), Arc::clone(&ready), Arc::clone(&window));
            let name =
                if one_lock { "bench:throughput".to_string() } else { format!("bench:throughput:{process}:{t}") };
            let warm = format!("bench:throughput:warm:{process}:{t}");
            thread::spawn(move || {
                // Open this thread's pooled connection before the clock starts.
                let warm = client.lock(warm);
                for _ in 0..20 {
                    warm.try_lock().expect("warm-up try_lock").expect("warm-up lock is free").unlock().expect("unlock");
                }
                let lock = client.lock(name);
                ready.wait();
                ready.wait();
                let (start, end) = *window.get().expect("start time set before the second barrier");
                sleep_until_mono(start);
                let mut stamps = Vec::new();
                loop {
                    let guard = lock.lock().expect("lock()");
                    let now = mono_ns();
                    if now >= end {
                        guard.unlock().expect("unlock");
                        return stamps;
                    }
                    stamps.push(now - start);
                    guard.unlock().expect("unlock");
                }
            })
        })
        .collect();
    ready.wait();
    say("ready");
    let mut order = String::new();
    std::io::stdin().lock().read_line(&mut order).expect("read the start order");
    let times: Vec<u64> = order.split_whitespace().skip(1).map(|s| s.parse().expect("start and end times")).collect();
    window.set((times[0], times[1])).expect("the window is set once");
    ready.wait();
    let stamps: Vec<u64> = threads.into_iter().flat_map(|t| t.join().expect("throughput thread")).collect();
    say(&format!("count {}", stamps.len()));
    if one_lock {
        let mut line = String::from("stamps");
        for s in &stamps {
            write!(line, " {s}").expect("write to a String");
        }
        say(&line);
    }
}

// ---------------------------------------------------------------------------------------
// 4. Renewal at scale

/// Counts what the client reports through its event hook.
#[derive(Default)]
struct EventCounts {
    lost: AtomicU64,
    renewal_failed: AtomicU64,
    release_failed: AtomicU64,
}

impl LockEvents for EventCounts {
    fn lease_lost(&self, _lock: &str) {
        self.lost.fetch_add(1, Ordering::Relaxed);
    }
    fn renewal_failed(&self, _error: &redlease::Error) {
        self.renewal_failed.fetch_add(1, Ordering::Relaxed);
    }
    fn release_failed(&self, _lock: &str, _error: &redlease::Error) {
        self.release_failed.fetch_add(1, Ordering::Relaxed);
    }
}

struct Renewal {
    leases: usize,
    acquire_time: Duration,
    acquire_each: Summary,
    acquire_over_10ms: usize,
    window: Duration,
    passes: u64,
    round_trips: u64,
    renewed: u64,
    renew_time: Duration,
    /// Time Redis spent running the renew script in the window.
    server_time: Duration,
    /// The pipelined limit of step 0, measured again just before the leases were taken (with
    /// no renewal running).
    pipelined_before: f64,
    /// Guards reporting `is_held()` after the window.
    held: usize,
    /// Keys with a TTL > 0 on the server after the window, and the smallest TTL seen (ms).
    keys_alive: usize,
    min_ttl_ms: i64,
    lost_events: u64,
    failed_renewals: u64,
    drop_time: Duration,
    drop_each: Summary,
    drop_over_10ms: usize,
    keys_left: u64,
    /// Release latch keys alive right after the drop (each lives 4 × the command timeout).
    latches_left: u64,
    failed_releases: u64,
}

impl Renewal {
    fn per_sec(&self) -> f64 {
        self.renewed as f64 / self.renew_time.as_secs_f64()
    }
}

fn measure_renewal(server: &RedisServer, plan: &Plan) -> Renewal {
    let events = Arc::new(EventCounts::default());
    let client = Client::builder(server.url())
        .watchdog_timeout(RENEWAL_WATCHDOG)
        .pool_size(4)
        .events(events.clone())
        .build()
        .expect("client for the renewal run");
    let names: Vec<String> = (0..plan.leases).map(|i| format!("bench:lease:{i}")).collect();
    let mut conn = server.conn();
    let pipelined_before = pipelined_rate(&mut conn, plan.pipelines);

    let mut acquire_samples = Vec::with_capacity(plan.leases);
    let start = Instant::now();
    let guards: Vec<LockGuard> = names
        .iter()
        .map(|name| {
            let one = Instant::now();
            let guard = client.lock(name.as_str()).try_lock().expect("try_lock").expect("a fresh lease lock is free");
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
    assert_eq!(after.leases, plan.leases, "every lease is still registered");
    let (_, server_usec) = server_command_stats(&mut conn, "evalsha");

    let held = guards.iter().filter(|g| g.is_held()).count();
    let mut keys_alive = 0;
    let mut min_ttl_ms = i64::MAX;
    for chunk in names.chunks(PIPELINE) {
        let mut pipe = redis::pipe();
        for name in chunk {
            pipe.cmd("PTTL").arg(name);
        }
        let ttls: Vec<i64> = pipe.query(&mut conn).expect("PTTL of the lease keys");
        keys_alive += ttls.iter().filter(|&&t| t > 0).count();
        min_ttl_ms = ttls.into_iter().fold(min_ttl_ms, i64::min);
    }

    // Dropped one by one while the watchdog keeps renewing those still held.
    let mut drop_samples = Vec::with_capacity(plan.leases);
    let start = Instant::now();
    for guard in guards {
        let one = Instant::now();
        drop(guard);
        drop_samples.push(nanos(one.elapsed()));
    }
    let drop_time = start.elapsed();
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

// ---------------------------------------------------------------------------------------
// Child processes

fn child_main(role: &str) {
    watch_parent();
    match role {
        "handoff" => handoff_child(),
        "throughput" => throughput_child(),
        other => panic!("unknown bench role {other:?}"),
    }
    let _ = std::io::stdout().flush();
}

fn child_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|e| panic!("bench child needs {name}: {e}"))
}

/// In a child: one line for the parent.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).expect("write to the parent");
}

/// Ends this child if the parent bench process goes away.
fn watch_parent() {
    let Some(parent) = std::env::var(PARENT_ENV).ok().and_then(|p| p.parse::<u32>().ok()) else { return };
    thread::spawn(move || {
        loop {
            if std::os::unix::process::parent_id() != parent {
                std::process::exit(102);
            }
            thread::sleep(Duration::from_millis(100));
        }
    });
}

/// A child process playing a role: orders go to its stdin, its stdout lines come back
/// through a reader thread. Killed and reaped on drop unless it finished.
struct Worker {
    role: String,
    process: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: Receiver<String>,
    reaped: bool,
}

impl Worker {
    fn spawn(role: &str, env: &[(&str, String)]) -> Worker {
        let exe = std::env::current_exe().expect("current_exe");
        let mut command = Command::new(&exe);
        command
            .args(std::env::args_os().skip(1))
            .env(ROLE_ENV, role)
            .env(PARENT_ENV, std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut process = command.spawn().unwrap_or_else(|e| panic!("cannot spawn bench child {role:?}: {e}"));
        let stdin = process.stdin.take();
        let stdout = process.stdout.take().expect("child stdout is piped");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Worker { role: role.to_string(), process, stdin, lines, reaped: false }
    }

    fn send(&mut self, order: &str) {
        let stdin = self.stdin.as_mut().expect("the child's stdin is open");
        writeln!(stdin, "{order}").and_then(|()| stdin.flush()).expect("write an order to the child");
    }

    /// The next line, which must start with `prefix`; returns the rest of it.
    fn expect(&self, prefix: &str) -> String {
        let line = match self.lines.recv_timeout(CHILD_REPLY_TIMEOUT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                panic!("bench child {:?} said nothing for {CHILD_REPLY_TIMEOUT:?} (expected {prefix:?})", self.role)
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("bench child {:?} exited before saying {prefix:?}", self.role)
            }
        };
        match line.strip_prefix(prefix) {
            Some(rest) => rest.to_string(),
            None => panic!("bench child {:?} said {line:?}, expected {prefix:?}", self.role),
        }
    }

    /// Closes stdin and waits for a clean exit.
    fn finish(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.process.try_wait().expect("try_wait on a bench child") {
                self.reaped = true;
                assert!(status.success(), "bench child {:?} failed: {status}", self.role);
                return;
            }
            assert!(Instant::now() < deadline, "bench child {:?} did not exit within 30 s", self.role);
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.process.kill();
            let _ = self.process.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------
// The report

struct Machine {
    cpus: usize,
    model: String,
    virtualized: bool,
    /// The 1-minute load average when the run started (other work on the machine).
    load: String,
    memory_gib: f64,
    kernel: String,
    redis: String,
    rustc: String,
}

impl Machine {
    fn read() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let virtualized =
            cpuinfo.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"));
        let model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim()))
            .unwrap_or("unknown")
            .to_string();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .unwrap_or(f64::NAN);
        let redis_binary = std::env::var(server::REDIS_SERVER_ENV).unwrap_or_else(|_| "redis-server".into());
        let redis = command_output(&redis_binary, "--version")
            .split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .map_or_else(|| "unknown".to_string(), |v| format!("redis-server {v}"));
        Machine {
            cpus: thread::available_parallelism().map_or(0, |n| n.get()),
            model,
            virtualized,
            load: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|l| l.split_whitespace().next().map(str::to_string))
                .unwrap_or_else(|| "unknown".to_string()),
            memory_gib: memory_kib / (1024.0 * 1024.0),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string(),
            redis,
            rustc: command_output("rustc", "--version").trim().to_string(),
        }
    }
}

fn command_output(program: &str, arg: &str) -> String {
    Command::new(program)
        .arg(arg)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_else(|_| "unknown".to_string())
}

struct Results {
    machine: Machine,
    placement: String,
    /// Per step: the share of one CPU that processes other than the benchmark's used.
    other_work: Vec<(String, f64)>,
    limit: Limit,
    uncontended: Uncontended,
    handoff: Summary,
    one_lock: Throughput,
    own_locks: Throughput,
    renewal: Renewal,
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "missed" }
}

impl Results {
    /// The figures as Markdown: printed, and optionally written into docs/performance.md.
    fn report(&self) -> String {
        let mut out = String::new();
        self.report_machine(&mut out);
        self.report_limit(&mut out);
        self.report_uncontended(&mut out);
        self.report_handoff(&mut out);
        self.report_throughput(&mut out);
        self.report_renewal(&mut out);
        self.report_other_work(&mut out);
        out
    }

    fn report_machine(&self, out: &mut String) {
        let m = &self.machine;
        let _ = writeln!(
            out,
            "Machine: {} CPUs ({}{}), {:.1} GiB RAM, Linux {}, {}, {}; client and server on one host, loopback TCP.\n",
            m.cpus,
            m.model,
            if m.virtualized { ", virtual machine" } else { "" },
            m.memory_gib,
            m.kernel,
            m.redis,
            m.rustc
        );
        let _ =
            writeln!(out, "Placement: {}. Load average (1 min) when the run started: {}.\n", self.placement, m.load);
    }

    fn report_limit(&self, out: &mut String) {
        let l = &self.limit;
        let _ = writeln!(out, "### 0. Physical limit: `EVALSHA` of `return 1` on a plain `redis::Connection`\n");
        let _ = writeln!(
            out,
            "| calls | mean µs | p50 µs | p99 µs | server µs/call | pipelined, {PIPELINE} per pipeline |"
        );
        let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|");
        let _ = writeln!(
            out,
            "| {} | **{:.1}** | {:.1} | {:.1} | {:.2} | **{:.0} calls/s** |\n",
            l.rtt.n, l.rtt.mean, l.rtt.p50, l.rtt.p99, l.server_usec, l.pipelined_per_sec
        );
        let _ = writeln!(out, "RTT in the ratios below is this mean, {:.1} µs.\n", l.rtt.mean);
    }

    fn report_uncontended(&self, out: &mut String) {
        let (u, rtt) = (&self.uncontended, self.limit.rtt.mean);
        let limit_pair = u.trivial.pair.mean;
        let _ = writeln!(
            out,
            "### 1. Uncontended acquire + release, one thread ({PAIR_BLOCKS} blocks per kind, interleaved)\n"
        );
        let _ = writeln!(
            out,
            "Ratios: to 2 × the RTT of step 0, and to the pair of trivial calls measured in the blocks \
             in between (the same limit, free of the machine's drift between steps). Target ≤ {TARGET_PAIR_RATIO}.\n"
        );
        let _ = writeln!(
            out,
            "| pair | n | mean µs | p50 µs | p99 µs | acquire mean µs | release mean µs | server µs/`EVALSHA` | mean / (2 × RTT) | mean / limit pair | target |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        let rows = [
            ("two trivial `EVALSHA`s (the limit pair)", &u.trivial, false),
            ("the two scripts sent raw", &u.raw_scripts, false),
            ("**`try_lock()` + `unlock()`, watchdog lease**", &u.watchdog, true),
            ("**`try_lock()` + `unlock()`, `with_lease(30 s)`**", &u.fixed, true),
        ];
        for (what, x, judged) in rows {
            let (to_rtt, to_pair) = (x.pair.mean / (2.0 * rtt), x.pair.mean / limit_pair);
            let target = if judged {
                format!("{} / {}", verdict(to_rtt <= TARGET_PAIR_RATIO), verdict(to_pair <= TARGET_PAIR_RATIO))
            } else {
                "–".to_string()
            };
            let _ = writeln!(
                out,
                "| {what} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {to_rtt:.3} | {to_pair:.3} | {target} |",
                x.pair.n, x.pair.mean, x.pair.p50, x.pair.p99, x.acquire.mean, x.release.mean, x.server_usec
            );
        }
        let _ = writeln!(out);
    }

    fn report_handoff(&self, out: &mut String) {
        let (h, rtt) = (&self.handoff, self.limit.rtt.mean);
        let (p50, p99) = (h.p50 / rtt, h.p99 / rtt);
        let _ = writeln!(out, "### 2. Contended hand-off to a waiter parked in another process\n");
        let _ = writeln!(out, "| n | p50 µs | p90 µs | p99 µs | max µs | p50 / RTT | p99 / RTT |");
        let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|");
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {p50:.2} (target ≤ {TARGET_HANDOFF_P50_RATIO}: {}) | {p99:.2} (target ≤ {TARGET_HANDOFF_P99_RATIO}: {}) |\n",
            h.n,
            h.p50,
            h.p90,
            h.p99,
            h.max,
            verdict(p50 <= TARGET_HANDOFF_P50_RATIO),
            verdict(p99 <= TARGET_HANDOFF_P99_RATIO)
        );
    }

    fn report_throughput(&self, out: &mut String) {
        let rtt = self.limit.rtt.mean;
        let _ = writeln!(
            out,
            "### 3. Throughput, {PROCESSES} processes × {THREADS_PER_PROCESS} threads, `lock()` + `unlock()` in a loop\n"
        );
        let _ = writeln!(
            out,
            "| locks | acquisitions | per process | acquisitions/s | µs per acquisition | to the other process |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
        for (what, t) in [("one shared lock", &self.one_lock), ("one lock per thread (8)", &self.own_locks)] {
            let per_process: Vec<String> = t.per_process.iter().map(u64::to_string).collect();
            let alternation = t.alternation.map_or_else(|| "–".to_string(), |a| format!("{:.0} %", a * 100.0));
            let _ = writeln!(
                out,
                "| {what} | {} | {} | {:.0} | {:.1} ({:.2} RTT) | {alternation} |",
                t.acquisitions,
                per_process.join(" / "),
                t.per_sec,
                1e6 / t.per_sec,
                1e6 / t.per_sec / rtt
            );
        }
        let _ = writeln!(out);
    }

    fn report_other_work(&self, out: &mut String) {
        let shares: Vec<String> =
            self.other_work.iter().map(|(step, share)| format!("{step}: {:.0} %", share * 100.0)).collect();
        let _ = writeln!(
            out,
            "Other processes on the machine during each step, in % of one CPU (from `/proc/stat`): {}.\n",
            shares.join("; ")
        );
    }

    fn report_renewal(&self, out: &mut String) {
        let r = &self.renewal;
        let passes = r.passes.max(1) as f64;
        let per_pass = r.renewed as f64 / passes;
        let ideal_per_pass = (per_pass / RENEW_BATCH as f64).ceil();
        let floor = r.renewed.div_ceil(RENEW_BATCH);
        let fraction = r.per_sec() / self.limit.pipelined_per_sec;
        let fraction_again = r.per_sec() / r.pipelined_before;
        let _ = writeln!(
            out,
            "### 4. Renewal: {} watchdog leases held by one thread (watchdog {} s, renewal every {} s); \
             target: renewals/s ≥ {TARGET_RENEWAL_FRACTION} × pipelined limit\n",
            r.leases,
            RENEWAL_WATCHDOG.as_secs(),
            RENEWAL_WATCHDOG.as_secs() / 3
        );
        let _ = writeln!(out, "| figure | value |");
        let _ = writeln!(out, "|---|---:|");
        let mut row = |what: &str, value: String| {
            let _ = writeln!(out, "| {what} | {value} |");
        };
        row(
            "acquiring them, one `try_lock` each",
            format!(
                "{:.2} s; each: mean {:.0} µs, p50 {:.0}, p90 {:.0}, p99 {:.0}, max {:.0}; {} took over 10 ms",
                r.acquire_time.as_secs_f64(),
                r.acquire_each.mean,
                r.acquire_each.p50,
                r.acquire_each.p90,
                r.acquire_each.p99,
                r.acquire_each.max,
                r.acquire_over_10ms
            ),
        );
        row("window held", format!("{:.1} s", r.window.as_secs_f64()));
        row("renewal passes in the window", r.passes.to_string());
        row("renew round trips in the window", r.round_trips.to_string());
        row("leases renewed in the window", r.renewed.to_string());
        row(
            "round trips per pass / ceil(renewed per pass / 1000)",
            format!("{:.2} / {ideal_per_pass:.0}", r.round_trips as f64 / passes),
        );
        row(
            "round trips vs the least possible (ceil(renewed / 1000) … that + passes)",
            format!("{} vs {floor} … {}", r.round_trips, floor + r.passes),
        );
        row(
            "time in renew round trips (of which Redis running the script)",
            format!(
                "{:.3} s ({:.3} s): {:.2} µs per lease ({:.2} µs)",
                r.renew_time.as_secs_f64(),
                r.server_time.as_secs_f64(),
                r.renew_time.as_secs_f64() * 1e6 / r.renewed.max(1) as f64,
                r.server_time.as_secs_f64() * 1e6 / r.renewed.max(1) as f64
            ),
        );
        row(
            "renewals/s (renewed / time in round trips)",
            format!(
                "{:.0} = {fraction:.3} × the pipelined limit of step 0 ({}); {fraction_again:.3} × the same limit \
                 measured again just before the leases were taken ({:.0} calls/s, {})",
                r.per_sec(),
                verdict(fraction >= TARGET_RENEWAL_FRACTION),
                r.pipelined_before,
                verdict(fraction_again >= TARGET_RENEWAL_FRACTION)
            ),
        );
        row("guards `is_held()` after the window", format!("{} of {}", r.held, r.leases));
        row(
            "keys with TTL > 0 after the window",
            format!("{} of {} (smallest TTL {} ms)", r.keys_alive, r.leases, r.min_ttl_ms),
        );
        row("leases lost / renewals failed (event hook)", format!("{} / {}", r.lost_events, r.failed_renewals));
        row(
            "dropping all guards, one by one (the watchdog still renewing the rest)",
            format!(
                "{:.2} s; each: mean {:.0} µs, p50 {:.0}, p90 {:.0}, p99 {:.0}, max {:.0}; {} took over 10 ms",
                r.drop_time.as_secs_f64(),
                r.drop_each.mean,
                r.drop_each.p50,
                r.drop_each.p90,
                r.drop_each.p99,
                r.drop_each.max,
                r.drop_over_10ms
            ),
        );
        row("after the drop", format!("{} lease keys left, {} releases failed", r.keys_left, r.failed_releases));
        row(
            "release latch keys alive right after the drop",
            format!("{} (each kept 4 × the command timeout, 12 s by default)", r.latches_left),
        );
        let _ = writeln!(out);
    }
}

const DOC_BEGIN: &str = "<!-- bench-results:begin -->";
const DOC_END: &str = "<!-- bench-results:end -->";

/// Replaces the results block of docs/performance.md (between the two markers) with `report`.
fn write_doc(report: &str) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/performance.md");
    let doc = std::fs::read_to_string(path).expect("read docs/performance.md");
    let (Some(begin), Some(end)) = (doc.find(DOC_BEGIN), doc.find(DOC_END)) else {
        eprintln!("docs/performance.md has no {DOC_BEGIN} … {DOC_END} block; not written");
        return;
    };
    let updated = format!("{}{DOC_BEGIN}\n\n{report}{}", &doc[..begin], &doc[end..]);
    std::fs::write(path, updated).expect("write docs/performance.md");
    eprintln!("wrote the results into docs/performance.md");
}
