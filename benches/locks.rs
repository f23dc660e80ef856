//! The benchmark of SPEC §10: every figure is set against the physical limit measured in
//! the same run, on the same `redis-server`, over the same kind of connection.
//!
//! ```text
//! cargo bench --bench locks                            # about 2 min 10 s on a 2-vCPU VM
//! REDLEASE_BENCH_QUICK=1 cargo bench --bench locks     # fewer samples, about 25 s
//! REDLEASE_BENCH_WRITE_DOC=1 cargo bench --bench locks # also rewrites the results block of docs/performance.md
//! REDLEASE_BENCH_PIN=0 cargo bench --bench locks       # leave placement on the CPUs to the scheduler
//! ```
//!
//! 0. The limit: a trivial `EVALSHA` (`return 1`) round trip on a plain connection, one by
//!    one and pipelined 1000 at a time.
//! 1. Uncontended `try_lock` + `unlock` of the plain lock (watchdog and fixed lease), the
//!    fair lock and both sides of the read-write lock, interleaved with two trivial calls
//!    and with the plain lock's two scripts sent raw.
//! 2. Contended hand-off to a waiter parked in another process (pub/sub wake-up), plain
//!    and fair lock in interleaved blocks.
//! 3. Throughput of 8 threads in 2 processes: plain lock on one lock and on 8 locks, fair
//!    lock on one lock, read side of one read-write lock.
//! 4. The watchdog renewing 100,000 leases.
//! 5. A writer under continuously overlapping readers (Redisson's reader preference).
//! 6. Redlock over 3 and 5 `redis-server`s: acquire + release against one node's plain
//!    lock and against the same round trips fanned out by hand, healthy and with one node
//!    blackholed behind a proxy.
//!
//! Child processes are this binary run again with `REDLEASE_BENCH_ROLE` set; they talk back
//! with lines on stdout and take orders as lines on stdin. Every child, server and proxy is
//! stopped on drop, so a failed run leaves nothing behind.

#[path = "../tests/support/server.rs"]
#[allow(dead_code)]
mod server;

#[path = "../tests/support/proxy.rs"]
#[allow(dead_code)]
mod proxy;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use proxy::Proxy;
use redlease::{AnyLock, Client, LockEvents, LockGuard, RedLock};
use server::RedisServer;

/// Names the role of a child process; unset in the parent.
const ROLE_ENV: &str = "REDLEASE_BENCH_ROLE";
const PARENT_ENV: &str = "REDLEASE_BENCH_PARENT";
const URL_ENV: &str = "REDLEASE_BENCH_URL";
const LOCK_ENV: &str = "REDLEASE_BENCH_LOCK";
/// The lock kind a child uses (see [`LockKind`]).
const KIND_ENV: &str = "REDLEASE_BENCH_KIND";
/// Whether the throughput threads share one lock ("true") or take one each.
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

// Targets (SPEC §10, as set for this benchmark). The pair target applies to every lock
// kind's uncontended pair (each is one acquire and one release round trip), the hand-off
// targets to the plain and the fair lock alike.
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
    let placement = Placement::apply(&server);

    let mut meter = CpuMeter::new(&server);
    meter.step("0. physical limit");
    let limit = measure_limit(&server, &plan);
    meter.step("1. uncontended acquire + release");
    let uncontended = measure_uncontended(&server, &plan);
    meter.step("2. contended hand-off");
    let handoff = measure_handoffs(&server, &plan);
    meter.step("3. throughput");
    let throughput = [
        measure_throughput(&server, &plan, LockKind::Plain, true),
        measure_throughput(&server, &plan, LockKind::Plain, false),
        measure_throughput(&server, &plan, LockKind::Fair, true),
        measure_throughput(&server, &plan, LockKind::Read, true),
    ];
    meter.step("4. renewal");
    let renewal = measure_renewal(&server, &plan);
    meter.step("5. writer under readers");
    let writer = measure_writer_under_readers(&server, &plan);
    meter.step("6. Redlock");
    let red_servers: Vec<RedisServer> = (0..RED_NODES.iter().copied().max().unwrap_or(0))
        .map(|_| {
            let node = RedisServer::start();
            placement.pin_server(&node);
            meter.add_server(&node);
            node
        })
        .collect();
    let redlock: Vec<RedlockRun> = RED_NODES.iter().map(|&n| measure_redlock(&red_servers[..n], &plan)).collect();
    meter.step("");
    drop(red_servers);
    let other_work = meter.steps;

    let results = Results {
        machine,
        placement: placement.description,
        other_work,
        limit,
        uncontended,
        handoff,
        throughput,
        renewal,
        writer,
        redlock,
    };
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
    /// Rounds in which the writer waits for the readers to stop.
    writer_rounds: usize,
    /// How long the readers keep reading after the writer started waiting.
    readers_for: Duration,
    /// Pairs per kind in the healthy Redlock runs.
    red_pairs: usize,
    /// Pairs in the Redlock runs with one node blackholed.
    blackholed_pairs: usize,
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
                writer_rounds: 2,
                readers_for: Duration::from_millis(300),
                red_pairs: 300,
                blackholed_pairs: 20,
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
                writer_rounds: 5,
                readers_for: Duration::from_secs(1),
                red_pairs: 2_000,
                blackholed_pairs: 100,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Placement

/// Where the processes run. [`Placement::apply`] pins `redis-server` to the last CPU and
/// this process (and so every child and thread it starts later) to the others, so that
/// every round trip crosses CPUs, as it would cross a network. Left to the scheduler,
/// client and server sometimes share a CPU, and a round trip then costs a fraction of a
/// cross-CPU one (on a VM, waking an idle vCPU is what costs): ratios taken minutes apart
/// would compare different limits. The Redlock nodes started later go to the server's CPU
/// too ([`Placement::pin_server`]).
struct Placement {
    description: String,
    /// The CPU the servers are pinned to, when pinning worked.
    server_cpu: Option<usize>,
}

impl Placement {
    fn apply(server: &RedisServer) -> Placement {
        let cpus = thread::available_parallelism().map_or(1, |n| n.get());
        let unpinned = |why: &str| Placement { description: format!("not pinned ({why})"), server_cpu: None };
        if std::env::var(PIN_ENV).is_ok_and(|v| v == "0") {
            return unpinned("REDLEASE_BENCH_PIN=0");
        }
        if cpus < 2 {
            return unpinned("one CPU");
        }
        let server_cpu = cpus - 1;
        let client_cpus: Vec<usize> = (0..server_cpu).collect();
        if pin_process(server, server_cpu) && pin(0, &client_cpus) {
            let clients = if server_cpu == 1 { "CPU 0".to_string() } else { format!("CPUs 0–{}", server_cpu - 1) };
            Placement {
                description: format!(
                    "redis-server pinned to CPU {server_cpu}, the benchmark and its child processes to {clients}"
                ),
                server_cpu: Some(server_cpu),
            }
        } else {
            unpinned("sched_setaffinity failed")
        }
    }

    /// Puts another server where the first one is (nothing when unpinned).
    fn pin_server(&self, server: &RedisServer) {
        if let Some(cpu) = self.server_cpu {
            assert!(pin_process(server, cpu), "pin a Redlock node to CPU {cpu}");
        }
    }
}

/// Pins every thread of `server` to `cpu`.
fn pin_process(server: &RedisServer, cpu: usize) -> bool {
    let pid = server.pid().expect("the server is running");
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("list the server's threads");
    tasks
        .flatten()
        .filter_map(|task| task.file_name().to_str().and_then(|tid| tid.parse::<i32>().ok()))
        .all(|tid| pin(tid, &[cpu]))
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
    server_pids: Vec<u32>,
    current: Option<(String, CpuSample)>,
    steps: Vec<OtherWork>,
}

/// What the machine did besides the benchmark during one step, in shares of one CPU.
struct OtherWork {
    step: String,
    /// Processes other than the benchmark's.
    others: f64,
    /// Time the hypervisor ran something else on our vCPUs (steal).
    steal: f64,
}

#[derive(Clone, Copy)]
struct CpuSample {
    at: Instant,
    /// Busy ticks of the whole machine.
    busy: u64,
    /// Ticks of this process, its reaped children and the server.
    ours: u64,
    /// Steal ticks of the whole machine.
    steal: u64,
}

impl CpuMeter {
    fn new(server: &RedisServer) -> CpuMeter {
        CpuMeter { server_pids: vec![server.pid().expect("the server is running")], current: None, steps: Vec::new() }
    }

    /// Counts `server` as the benchmark's own from now on.
    fn add_server(&mut self, server: &RedisServer) {
        self.server_pids.push(server.pid().expect("the server is running"));
    }

    /// Ends the current step (if any) and starts `name` (none when empty).
    fn step(&mut self, name: &str) {
        if !name.is_empty() {
            eprintln!("{name} ...");
        }
        let now = self.sample();
        if let Some((previous, start)) = self.current.take() {
            let ticks_per_sec = 100.0; // USER_HZ on Linux
            let elapsed = now.at.duration_since(start.at).as_secs_f64() * ticks_per_sec;
            let other = now.busy.saturating_sub(start.busy).saturating_sub(now.ours.saturating_sub(start.ours));
            let steal = now.steal.saturating_sub(start.steal);
            self.steps.push(OtherWork {
                step: previous,
                others: other as f64 / elapsed.max(1.0),
                steal: steal as f64 / elapsed.max(1.0),
            });
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
        let ours = process_ticks("self", true)
            + self.server_pids.iter().map(|pid| process_ticks(&pid.to_string(), false)).sum::<u64>();
        CpuSample { at: Instant::now(), busy, ours, steal: fields.get(7).copied().unwrap_or(0) }
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

/// A timed operation that returns how long its first half took.
type PairOp<'a> = Box<dyn FnMut() -> Duration + 'a>;

/// Runs every op `warmup` times, then `pairs` times each in `PAIR_BLOCKS` interleaved
/// blocks. With `stats`, the server time per `EVALSHA` of each block is read on it (reset
/// before the block).
fn measure_pairs(
    ops: &mut [PairOp],
    warmup: usize,
    pairs: usize,
    mut stats: Option<&mut redis::Connection>,
) -> Vec<PairStats> {
    for op in ops.iter_mut() {
        for _ in 0..warmup {
            op();
        }
    }
    let mut samples: Vec<PairSamples> = ops.iter().map(|_| PairSamples::default()).collect();
    for _ in 0..PAIR_BLOCKS {
        for (op, kind) in ops.iter_mut().zip(&mut samples) {
            if let Some(conn) = stats.as_deref_mut() {
                reset_server_stats(conn);
            }
            for _ in 0..pairs / PAIR_BLOCKS {
                let start = Instant::now();
                let first = nanos(op());
                let pair = nanos(start.elapsed());
                kind.pair.push(pair);
                kind.acquire.push(first);
                kind.release.push(pair - first);
            }
            if let Some(conn) = stats.as_deref_mut() {
                let (calls, usec) = server_command_stats(conn, "evalsha");
                kind.server_calls += calls;
                kind.server_usec += usec;
            }
        }
    }
    samples.into_iter().map(PairSamples::finish).collect()
}

/// `op` twice, as a pair whose first half is the first call.
fn twice<'a>(mut op: impl FnMut() + 'a) -> PairOp<'a> {
    Box::new(move || {
        let start = Instant::now();
        op();
        let first = start.elapsed();
        op();
        first
    })
}

/// `try_lock()` (which must succeed) then `unlock()`; returns how long the acquire took.
fn library_pair(lock: &AnyLock) -> Duration {
    let start = Instant::now();
    let guard = lock.try_lock().expect("try_lock").expect("an uncontended lock is free");
    let acquired = start.elapsed();
    guard.unlock().expect("unlock");
    acquired
}

struct Uncontended {
    /// Two trivial `EVALSHA`s: the limit, measured again between the other blocks.
    trivial: PairStats,
    /// `lua/acquire.lua` and `lua/release.lua` sent raw on a plain connection, with the
    /// arguments the library sends: the scripts' cost without the library's own work.
    raw_scripts: PairStats,
    watchdog: PairStats,
    fixed: PairStats,
    fair: PairStats,
    read: PairStats,
    write: PairStats,
}

fn measure_uncontended(server: &RedisServer, plan: &Plan) -> Uncontended {
    let client = Client::open(&server.url()).expect("client for the uncontended run");
    let rw = client.read_write_lock("bench:uncontended:rw");
    let locks: Vec<AnyLock> = vec![
        client.lock("bench:uncontended").into(),
        client.lock("bench:uncontended:fixed").with_lease(Duration::from_secs(30)).into(),
        client.fair_lock("bench:uncontended:fair").into(),
        rw.read().into(),
        rw.write().into(),
    ];
    let (mut trivial_conn, mut raw_conn, mut stats_conn) = (server.conn(), server.conn(), server.conn());
    let trivial = trivial_call(&mut trivial_conn);
    let (acquire_script, release_script) = (redis::Script::new(ACQUIRE_LUA), redis::Script::new(RELEASE_LUA));
    let raw_name = "bench:uncontended:raw";
    let owner = format!("{}:1", client.id());
    let mut request = 0u64;

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
            // The request id as the library makes it: the client's UUID and a counter.
            let reply: Option<i64> = release_script
                .key(raw_name)
                .key(format!("redisson_lock__channel:{{{raw_name}}}"))
                .key(format!("redisson_unlock_latch:{{{raw_name}}}:{}:{request}", client.id()))
                .arg(0)
                .arg(30_000)
                .arg(&owner)
                .arg(12_000)
                .invoke(&mut raw_conn)
                .expect("raw release");
            assert_eq!(reply, Some(1), "raw release of a held lock");
            first
        }),
    ];
    for lock in &locks {
        ops.push(Box::new(move || library_pair(lock)));
    }
    let stats = measure_pairs(&mut ops, plan.warmup, plan.pairs, Some(&mut stats_conn));
    drop(ops);
    let mut kinds = stats.into_iter();
    let mut next = || kinds.next().expect("one result per kind");
    Uncontended {
        trivial: next(),
        raw_scripts: next(),
        watchdog: next(),
        fixed: next(),
        fair: next(),
        read: next(),
        write: next(),
    }
}

// ---------------------------------------------------------------------------------------
// 2. Contended hand-off across processes

/// Rounds before the measured ones (they open the child's pub/sub connection).
const HANDOFF_WARMUP: usize = 20;
/// How long a subscribed waiter is given to retry and park before the release.
const HANDOFF_SETTLE: Duration = Duration::from_millis(2);
/// The plain and the fair hand-off alternate in this many blocks each.
const HANDOFF_BLOCKS: usize = 8;

/// The lock kind a child process or a measurement uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LockKind {
    Plain,
    Fair,
    /// The read side of a read-write lock.
    Read,
}

impl LockKind {
    fn as_str(self) -> &'static str {
        match self {
            LockKind::Plain => "plain",
            LockKind::Fair => "fair",
            LockKind::Read => "read",
        }
    }

    fn parse(kind: &str) -> LockKind {
        match kind {
            "plain" => LockKind::Plain,
            "fair" => LockKind::Fair,
            "read" => LockKind::Read,
            other => panic!("unknown lock kind {other:?}"),
        }
    }

    /// The handle of this kind named `name` (watchdog lease).
    fn handle(self, client: &Client, name: String) -> AnyLock {
        match self {
            LockKind::Plain => client.lock(name).into(),
            LockKind::Fair => client.fair_lock(name).into(),
            LockKind::Read => client.read_write_lock(name).read().into(),
        }
    }
}

struct Handoffs {
    plain: Summary,
    fair: Summary,
}

/// One holder here and one waiter in a child process, handing a lock back and forth.
struct HandoffRig {
    kind: LockKind,
    name: String,
    lock: AnyLock,
    child: Worker,
    raw: redis::Connection,
    guard: Option<LockGuard>,
}

impl HandoffRig {
    fn new(server: &RedisServer, client: &Client, kind: LockKind) -> HandoffRig {
        let name = format!("bench:handoff:{}", kind.as_str());
        let lock = kind.handle(client, name.clone());
        let child = Worker::spawn(
            "handoff",
            &[(URL_ENV, server.url()), (LOCK_ENV, name.clone()), (KIND_ENV, kind.as_str().to_string())],
        );
        child.expect("ready");
        let guard = Some(lock.try_lock().expect("try_lock").expect("the hand-off lock starts free"));
        HandoffRig { kind, name, lock, child, raw: server.conn(), guard }
    }

    /// One hand-off: the child waits, this side releases; the time from just before the
    /// release to the child's return from `lock()`, in nanoseconds.
    fn round(&mut self) -> u64 {
        self.child.send("go");
        self.child.expect("waiting");
        self.wait_until_parked();
        thread::sleep(HANDOFF_SETTLE);
        let guard = self.guard.take().expect("held between rounds");
        let t0 = mono_ns();
        guard.unlock().expect("unlock for the hand-off");
        let t1: u64 = self.child.expect("acquired ").parse().expect("the child's acquisition time");
        self.guard = Some(self.lock.try_lock().expect("try_lock").expect("the child has released"));
        t1.checked_sub(t0).expect("the child acquired after the release")
    }

    /// Until the child waits where a release will wake it: subscribed to the lock's channel
    /// (plain), or queued and subscribed to its own channel (fair).
    fn wait_until_parked(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let conn = &mut self.raw;
        let name = &self.name;
        let parked = |conn: &mut redis::Connection| match self.kind {
            LockKind::Plain => {
                let channel = format!("redisson_lock__channel:{{{name}}}");
                let (_, count): (String, u64) =
                    redis::cmd("PUBSUB").arg("NUMSUB").arg(channel).query(conn).expect("PUBSUB NUMSUB");
                count >= 1
            }
            LockKind::Fair => {
                let queued: u64 =
                    redis::cmd("LLEN").arg(format!("redisson_lock_queue:{{{name}}}")).query(conn).expect("LLEN");
                let own: Vec<String> = redis::cmd("PUBSUB")
                    .arg("CHANNELS")
                    .arg(format!("redisson_lock__channel:{{{name}}}:*"))
                    .query(conn)
                    .expect("PUBSUB CHANNELS");
                queued >= 1 && !own.is_empty()
            }
            LockKind::Read => unreachable!("no read hand-off"),
        };
        while !parked(conn) {
            assert!(Instant::now() < deadline, "the waiting child did not park on {name} within 10 s");
            thread::sleep(Duration::from_micros(100));
        }
    }

    fn finish(mut self) {
        self.guard.take().expect("held at the end").unlock().expect("final unlock");
        self.child.send("quit");
        self.child.finish();
    }
}

/// The plain and the fair hand-off, in alternating blocks.
fn measure_handoffs(server: &RedisServer, plan: &Plan) -> Handoffs {
    let client = Client::open(&server.url()).expect("client for the hand-off run");
    let mut rigs =
        [HandoffRig::new(server, &client, LockKind::Plain), HandoffRig::new(server, &client, LockKind::Fair)];
    for rig in &mut rigs {
        for _ in 0..HANDOFF_WARMUP {
            rig.round();
        }
    }
    let mut samples = [Vec::with_capacity(plan.handoffs), Vec::with_capacity(plan.handoffs)];
    for _ in 0..HANDOFF_BLOCKS {
        for (rig, samples) in rigs.iter_mut().zip(&mut samples) {
            for _ in 0..plan.handoffs / HANDOFF_BLOCKS {
                samples.push(rig.round());
            }
        }
    }
    for rig in rigs {
        rig.finish();
    }
    let [plain, fair] = samples;
    Handoffs { plain: Summary::of_nanos(plain), fair: Summary::of_nanos(fair) }
}

/// Child: on each "go", blocks in `lock()`, notes the time it returned, releases, reports.
fn handoff_child() {
    let client = Client::open(&child_env(URL_ENV)).expect("child client");
    let lock = LockKind::parse(&child_env(KIND_ENV)).handle(&client, child_env(LOCK_ENV));
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
    kind: LockKind,
    /// One lock shared by every thread, or one lock per thread.
    shared: bool,
    acquisitions: u64,
    per_sec: f64,
    per_process: Vec<u64>,
    /// Scripts Redis ran (`INFO commandstats`) per acquisition: acquire, release, and the
    /// attempts of waiters that were woken or polled.
    scripts: f64,
    /// Redis's time running them, per acquisition, µs.
    server_usec: f64,
    /// The same as a share of the window: how busy Redis was running scripts.
    server_busy: f64,
    /// Of consecutive acquisitions, the fraction that went to the other process, and to
    /// another thread (one exclusive lock only).
    alternation: Option<(f64, f64)>,
}

fn measure_throughput(server: &RedisServer, plan: &Plan, kind: LockKind, shared: bool) -> Throughput {
    let mut workers: Vec<Worker> = (0..PROCESSES)
        .map(|p| {
            Worker::spawn(
                "throughput",
                &[
                    (URL_ENV, server.url()),
                    (KIND_ENV, kind.as_str().to_string()),
                    (SHARED_ENV, shared.to_string()),
                    (PROCESS_ENV, p.to_string()),
                ],
            )
        })
        .collect();
    for worker in &workers {
        worker.expect("ready");
    }
    let mut stats = server.conn();
    reset_server_stats(&mut stats);
    let start = mono_ns() + nanos(Duration::from_millis(100));
    let end = start + nanos(plan.throughput_for);
    for worker in &mut workers {
        worker.send(&format!("start {start} {end}"));
    }
    let exclusive = shared && kind != LockKind::Read;
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
    let (scripts, server_usec) = server_command_stats(&mut stats, "evalsha");
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
        kind,
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

/// Child: `THREADS_PER_PROCESS` threads sharing one client loop `lock(); unlock()` between
/// the start and end times the parent sends, on one shared lock or on one lock each.
fn throughput_child() {
    let kind = LockKind::parse(&child_env(KIND_ENV));
    let shared = child_env(SHARED_ENV) == "true";
    let process = child_env(PROCESS_ENV);
    let client = Client::open(&child_env(URL_ENV)).expect("child client");
    let ready = Arc::new(Barrier::new(THREADS_PER_PROCESS + 1));
    let window: Arc<OnceLock<(u64, u64)>> = Arc::default();
    let threads: Vec<_> = (0..THREADS_PER_PROCESS)
        .map(|t| {
            let (client, ready, window) = (client.clone(), Arc::clone(&ready), Arc::clone(&window));
            let name = if shared {
                format!("bench:throughput:{}", kind.as_str())
            } else {
                format!("bench:throughput:{}:{process}:{t}", kind.as_str())
            };
            let warm = format!("bench:throughput:warm:{process}:{t}");
            thread::spawn(move || {
                // Open this thread's pooled connection before the clock starts.
                let warm = client.lock(warm);
                for _ in 0..20 {
                    warm.try_lock().expect("warm-up try_lock").expect("warm-up lock is free").unlock().expect("unlock");
                }
                let lock = kind.handle(&client, name);
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
                    stamps.push((now - start, t));
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
    let stamps: Vec<(u64, usize)> = threads.into_iter().flat_map(|t| t.join().expect("throughput thread")).collect();
    say(&format!("count {}", stamps.len()));
    if shared && kind != LockKind::Read {
        let mut line = String::from("stamps");
        for (at, thread) in &stamps {
            write!(line, " {at}/{thread}").expect("write to a String");
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
    /// Keys in the database before the leases were taken (what earlier steps left).
    keys_before: u64,
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
    let keys_before: u64 = redis::cmd("DBSIZE").query(&mut conn).expect("DBSIZE");
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
// 5. A writer under continuously overlapping readers

/// Reader threads in the writer run.
const WRITER_READERS: usize = 4;
/// How long each reader holds the read lock before it releases and takes it again.
const READER_HOLD: Duration = Duration::from_millis(20);
/// The readers start this far apart, so that at any time at least three of them hold.
const READER_STAGGER: Duration = Duration::from_millis(5);
/// The writer starts waiting this long after the first reader.
const WRITER_DELAY: Duration = Duration::from_millis(100);
/// The writer's wait in the round that shows starvation: shorter than the readers' run.
const STARVED_WAIT: Duration = Duration::from_millis(500);
/// The writer's wait in the other rounds: longer than the readers' run.
const WRITER_WAIT: Duration = Duration::from_secs(10);

/// One round: readers overlap, a writer calls `try_lock_for`, the readers stop.
struct WriterRound {
    /// How long the writer's `try_lock_for` took.
    waited: Duration,
    granted: bool,
    /// From the writer's call to the last reader's release (taken just before `unlock()`).
    readers_went_on: Duration,
    /// From the last reader's release to the writer's return with the lock, ns (negative:
    /// the writer got in before the readers stopped).
    after_last_release: Option<i64>,
    /// Read acquisitions granted while the writer waited.
    reads_while_waiting: usize,
}

struct WriterUnderReaders {
    /// The round whose writer gives up (`STARVED_WAIT`) while the readers still overlap.
    starved: WriterRound,
    /// Rounds whose writer waits longer (`WRITER_WAIT`) than the readers read.
    rounds: Vec<WriterRound>,
    readers_for: Duration,
}

fn measure_writer_under_readers(server: &RedisServer, plan: &Plan) -> WriterUnderReaders {
    let readers = Client::open(&server.url()).expect("client of the readers");
    let writer = Client::open(&server.url()).expect("client of the writer");
    let name = "bench:rw:writer";
    let starved = writer_round(&readers, &writer, name, STARVED_WAIT * 2, STARVED_WAIT);
    let rounds = (0..plan.writer_rounds).map(|_| writer_round(&readers, &writer, name, plan.readers_for, WRITER_WAIT));
    WriterUnderReaders { starved, rounds: rounds.collect(), readers_for: plan.readers_for }
}

/// `WRITER_READERS` threads of `readers` take the read lock `name` in a loop, each holding it
/// `READER_HOLD`, from the start until `readers_for` after the writer (a thread of `writer`)
/// started waiting up to `wait` for the write lock.
fn writer_round(readers: &Client, writer: &Client, name: &str, readers_for: Duration, wait: Duration) -> WriterRound {
    let begin = mono_ns() + nanos(Duration::from_millis(10));
    let writer_at = begin + nanos(WRITER_DELAY);
    let stop_at = writer_at + nanos(readers_for);
    let (reads, last_release, (w_start, w_end, granted)) = thread::scope(|scope| {
        let reader_threads: Vec<_> = (0..WRITER_READERS)
            .map(|i| {
                let lock = readers.read_write_lock(name).read();
                scope.spawn(move || {
                    sleep_until_mono(begin + i as u64 * nanos(READER_STAGGER));
                    let (mut acquired, mut last_release) = (Vec::new(), 0);
                    while mono_ns() < stop_at {
                        let guard = lock.lock().expect("read lock()");
                        acquired.push(mono_ns());
                        thread::sleep(READER_HOLD);
                        last_release = mono_ns();
                        guard.unlock().expect("read unlock");
                    }
                    (acquired, last_release)
                })
            })
            .collect();
        let write = writer.read_write_lock(name).write();
        let writer_thread = scope.spawn(move || {
            sleep_until_mono(writer_at);
            let start = mono_ns();
            let guard = write.try_lock_for(wait).expect("write try_lock_for");
            let end = mono_ns();
            let granted = guard.is_some();
            if let Some(guard) = guard {
                guard.unlock().expect("write unlock");
            }
            (start, end, granted)
        });
        let mut reads = Vec::new();
        let mut last_release = 0;
        for reader in reader_threads {
            let (acquired, last) = reader.join().expect("reader thread");
            reads.extend(acquired);
            last_release = last_release.max(last);
        }
        (reads, last_release, writer_thread.join().expect("writer thread"))
    });
    let signed = |ns: u64, from: u64| i64::try_from(ns).unwrap_or(i64::MAX) - i64::try_from(from).unwrap_or(i64::MAX);
    WriterRound {
        waited: Duration::from_nanos(w_end - w_start),
        granted,
        readers_went_on: Duration::from_nanos(last_release.saturating_sub(w_start)),
        after_last_release: granted.then(|| signed(w_end, last_release)),
        reads_while_waiting: reads.iter().filter(|&&at| at >= w_start && at < w_end).count(),
    }
}

// ---------------------------------------------------------------------------------------
// 6. Redlock

/// Redlock sizes measured.
const RED_NODES: [usize; 2] = [3, 5];
/// The per-node timeout the Redlock runs set.
const RED_NODE_TIMEOUT: Duration = Duration::from_millis(20);
/// Pairs before the measured ones with one node blackholed.
const BLACKHOLED_WARMUP: usize = 3;

struct RedlockRun {
    nodes: usize,
    /// `try_lock` + `unlock` of a plain lock on the first node.
    plain: PairStats,
    /// Two rounds of a trivial `EVALSHA` to every node from one thread (all sent, then all
    /// read): the limit of a Redlock pair.
    fan_out: PairStats,
    /// The same from one scoped thread per node, as the library asks the nodes.
    fan_out_threads: PairStats,
    /// Two scopes of one thread per node that do nothing: thread start-up alone.
    threads_only: PairStats,
    /// `RedLock::try_lock` + `unlock`.
    red: PairStats,
    /// The same with the last node behind a blackholed proxy.
    blackholed: PairStats,
}

fn measure_redlock(servers: &[RedisServer], plan: &Plan) -> RedlockRun {
    let n = servers.len();
    let clients: Vec<Client> = servers.iter().map(|s| Client::open(&s.url()).expect("Redlock node client")).collect();
    let plain: AnyLock = clients[0].lock("bench:redlock:plain").into();
    let red = RedLock::new(clients.iter().map(|c| c.lock("bench:redlock"))).node_timeout(RED_NODE_TIMEOUT);
    let mut one_thread: Vec<redis::Connection> = servers.iter().map(RedisServer::conn).collect();
    let mut per_thread: Vec<redis::Connection> = servers.iter().map(RedisServer::conn).collect();
    let calls: Vec<redis::Cmd> = per_thread.iter_mut().map(trivial_call).collect();
    // Loading the trivial script through `per_thread` loaded it on every node.
    let packed = calls[0].get_packed_command();

    let fan_out = |conns: &mut [redis::Connection]| {
        for conn in conns.iter_mut() {
            conn.send_packed_command(&packed).expect("send a trivial EVALSHA");
        }
        for conn in conns.iter_mut() {
            assert_eq!(conn.recv_response().expect("trivial EVALSHA reply"), redis::Value::Int(1));
        }
    };
    let fan_out_threads = |conns: &mut [redis::Connection]| {
        thread::scope(|scope| {
            for (conn, call) in conns.iter_mut().zip(&calls) {
                scope.spawn(move || {
                    let one: i64 = call.query(conn).expect("trivial EVALSHA");
                    assert_eq!(one, 1);
                });
            }
        });
    };
    let threads_only = || thread::scope(|scope| (0..n).for_each(|_| drop(scope.spawn(|| ()))));
    let red_pair = |red: &RedLock| {
        let start = Instant::now();
        let guard = red.try_lock().expect("Redlock try_lock").expect("the Redlock is granted");
        let acquired = start.elapsed();
        guard.unlock().expect("Redlock unlock");
        acquired
    };
    let mut ops: Vec<PairOp> = vec![
        Box::new(|| library_pair(&plain)),
        twice(|| fan_out(&mut one_thread)),
        twice(|| fan_out_threads(&mut per_thread)),
        twice(threads_only),
        Box::new(|| red_pair(&red)),
    ];
    let stats = measure_pairs(&mut ops, plan.warmup / 4, plan.red_pairs, None);
    drop(ops);
    let mut kinds = stats.into_iter();
    let mut next = || kinds.next().expect("one result per kind");
    let (plain, fan_out, fan_out_threads, threads_only, red_stats) = (next(), next(), next(), next(), next());

    // The last node behind a proxy that swallows everything in both directions.
    let proxy = Proxy::start(servers[n - 1].addr());
    let proxied = Client::open(&proxy.url()).expect("client of the proxied node");
    let nodes = clients[..n - 1].iter().chain([&proxied]);
    let silent = RedLock::new(nodes.map(|c| c.lock("bench:redlock:blackholed"))).node_timeout(RED_NODE_TIMEOUT);
    for _ in 0..BLACKHOLED_WARMUP {
        red_pair(&silent);
    }
    proxy.set_blackhole(true);
    let mut ops: Vec<PairOp> = vec![Box::new(|| red_pair(&silent))];
    let blackholed = measure_pairs(&mut ops, BLACKHOLED_WARMUP, plan.blackholed_pairs, None).pop().expect("one kind");
    drop(ops);
    drop(silent);
    drop(proxied);
    drop(proxy);
    RedlockRun { nodes: n, plain, fan_out, fan_out_threads, threads_only, red: red_stats, blackholed }
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
    other_work: Vec<OtherWork>,
    limit: Limit,
    uncontended: Uncontended,
    handoff: Handoffs,
    throughput: [Throughput; 4],
    renewal: Renewal,
    writer: WriterUnderReaders,
    redlock: Vec<RedlockRun>,
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
        self.report_writer(&mut out);
        self.report_redlock(&mut out);
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
             in between (the same limit, free of the machine's drift between steps). Target ≤ {TARGET_PAIR_RATIO} \
             for every lock kind (each is one acquire and one release round trip). Watchdog lease unless \
             stated.\n"
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
            ("**fair lock `try_lock()` + `unlock()`**", &u.fair, true),
            ("**read lock `try_lock()` + `unlock()`**", &u.read, true),
            ("**write lock `try_lock()` + `unlock()`**", &u.write, true),
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
        let rtt = self.limit.rtt.mean;
        let _ = writeln!(
            out,
            "### 2. Contended hand-off to a waiter parked in another process ({HANDOFF_BLOCKS} blocks per lock, \
             alternating)\n"
        );
        let _ = writeln!(out, "| lock | n | p50 µs | p90 µs | p99 µs | max µs | p50 / RTT | p99 / RTT |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
        for (what, h) in [("plain", &self.handoff.plain), ("fair", &self.handoff.fair)] {
            let (p50, p99) = (h.p50 / rtt, h.p99 / rtt);
            let _ = writeln!(
                out,
                "| {what} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {p50:.2} (target ≤ {TARGET_HANDOFF_P50_RATIO}: {}) | {p99:.2} (target ≤ {TARGET_HANDOFF_P99_RATIO}: {}) |",
                h.n,
                h.p50,
                h.p90,
                h.p99,
                h.max,
                verdict(p50 <= TARGET_HANDOFF_P50_RATIO),
                verdict(p99 <= TARGET_HANDOFF_P99_RATIO)
            );
        }
        let _ = writeln!(out);
    }

    fn report_throughput(&self, out: &mut String) {
        let rtt = self.limit.rtt.mean;
        let _ = writeln!(
            out,
            "### 3. Throughput, {PROCESSES} processes × {THREADS_PER_PROCESS} threads, `lock()` + `unlock()` in a loop\n"
        );
        let _ = writeln!(
            out,
            "| lock | acquisitions | per process | acquisitions/s | µs per acquisition | scripts per acquisition | Redis running them, µs per acquisition (share of the window) | to the other process | to another thread |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for t in &self.throughput {
            let what = match (t.kind, t.shared) {
                (LockKind::Plain, true) => "plain, one shared lock",
                (LockKind::Plain, false) => "plain, one lock per thread (8)",
                (LockKind::Fair, true) => "fair, one shared lock",
                (LockKind::Fair, false) => "fair, one lock per thread (8)",
                (LockKind::Read, true) => "read side of one read-write lock (8 readers)",
                (LockKind::Read, false) => "read side, one lock per thread (8)",
            };
            let per_process: Vec<String> = t.per_process.iter().map(u64::to_string).collect();
            let percent = |f: f64| format!("{:.0} %", f * 100.0);
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
        let _ = writeln!(out);
    }

    fn report_writer(&self, out: &mut String) {
        let w = &self.writer;
        let _ = writeln!(
            out,
            "### 5. A writer under {WRITER_READERS} readers in one process, each holding the read lock {} ms in a \
             loop, started {} ms apart (always at least {} holding); the writer (its own client) calls \
             `write().try_lock_for(d)` {} ms after the first reader\n",
            READER_HOLD.as_millis(),
            READER_STAGGER.as_millis(),
            WRITER_READERS - 1,
            WRITER_DELAY.as_millis()
        );
        let _ = writeln!(
            out,
            "| round | d | readers went on after the writer's call for | writer waited | got in | from the last reader's release to the writer's entry | read acquisitions while it waited |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---|---:|---:|");
        let mut row = |what: String, d: Duration, r: &WriterRound| {
            let entry = r.after_last_release.map_or_else(
                || "–".to_string(),
                |ns| {
                    if ns >= 0 {
                        format!("{:.1} µs", ns as f64 / 1e3)
                    } else {
                        format!("{:.1} µs before it", -ns as f64 / 1e3)
                    }
                },
            );
            let _ = writeln!(
                out,
                "| {what} | {} ms | {:.1} ms | {:.1} ms | {} | {entry} | {} |",
                d.as_millis(),
                r.readers_went_on.as_secs_f64() * 1e3,
                r.waited.as_secs_f64() * 1e3,
                if r.granted { "yes" } else { "no" },
                r.reads_while_waiting
            );
        };
        row("starvation: d shorter than the readers' run".to_string(), STARVED_WAIT, &w.starved);
        for (i, r) in w.rounds.iter().enumerate() {
            row(
                format!("{}: readers stop {} ms after the writer's call", i + 1, w.readers_for.as_millis()),
                WRITER_WAIT,
                r,
            );
        }
        let entries: Vec<u64> =
            w.rounds.iter().filter_map(|r| r.after_last_release).map(|ns| u64::try_from(ns).unwrap_or(0)).collect();
        let early = w.rounds.iter().filter(|r| r.after_last_release.is_some_and(|ns| ns < 0)).count();
        if !entries.is_empty() {
            let s = Summary::of_nanos(entries);
            let _ = writeln!(
                out,
                "\nEntry after the last reader's release, over {} rounds: p50 {:.1} µs ({:.2} RTT), max {:.1} µs; \
                 rounds in which the writer got in while readers still held: {early}.",
                s.n,
                s.p50,
                s.p50 / self.limit.rtt.mean,
                s.max
            );
        }
        let _ = writeln!(out);
    }

    fn report_redlock(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "### 6. Redlock: one `redis-server` per node (pinned with the first one), one client each; node timeout \
             {} ms; interleaved blocks ({PAIR_BLOCKS} per kind)\n",
            RED_NODE_TIMEOUT.as_millis()
        );
        let _ = writeln!(
            out,
            "The limit of a Redlock pair is two rounds of requests sent to every node at once: \"fan-out\" sends a \
             trivial `EVALSHA` on every node's connection from one thread, then reads every reply. The library \
             asks the nodes from one scoped thread per node, at acquire and at release.\n"
        );
        let _ = writeln!(
            out,
            "| nodes | pair | n | mean µs | p50 µs | p99 µs | acquire mean µs | release mean µs | mean / plain pair | mean / fan-out pair |"
        );
        let _ = writeln!(out, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &self.redlock {
            let (plain, limit) = (r.plain.pair.mean, r.fan_out.pair.mean);
            let rows = [
                ("plain lock `try_lock()` + `unlock()` on the first node".to_string(), &r.plain),
                ("two fan-out rounds of a trivial `EVALSHA`, one thread (the limit)".to_string(), &r.fan_out),
                (format!("the same from {} scoped threads per round", r.nodes), &r.fan_out_threads),
                (format!("two scopes of {} threads that do nothing", r.nodes), &r.threads_only),
                ("**`RedLock` `try_lock()` + `unlock()`**".to_string(), &r.red),
                (
                    format!(
                        "**the same, one node blackholed** (floor ≈ {} ms + one fan-out round)",
                        RED_NODE_TIMEOUT.as_millis()
                    ),
                    &r.blackholed,
                ),
            ];
            for (what, x) in rows {
                let _ = writeln!(
                    out,
                    "| {} | {what} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} | {:.3} |",
                    r.nodes,
                    x.pair.n,
                    x.pair.mean,
                    x.pair.p50,
                    x.pair.p99,
                    x.acquire.mean,
                    x.release.mean,
                    x.pair.mean / plain,
                    x.pair.mean / limit
                );
            }
        }
        let _ = writeln!(out);
        for r in &self.redlock {
            let floor = RED_NODE_TIMEOUT.as_secs_f64() * 1e6 + r.fan_out.acquire.mean;
            let _ = writeln!(
                out,
                "- {} nodes: thread start-up {:.1} µs per pair ({} threads twice; {:.0} % of the Redlock pair); fan-out \
                 from threads costs {:.1} µs more than from one thread; the Redlock pair {:.1} µs more than the \
                 threaded fan-out. Blackholed: acquire mean {:.2} ms against the node timeout of {} ms, release mean \
                 {:.1} µs; pair {:.2} ms = {:.3} × the floor of {:.2} ms.",
                r.nodes,
                r.threads_only.pair.mean,
                r.nodes,
                r.threads_only.pair.mean / r.red.pair.mean * 100.0,
                r.fan_out_threads.pair.mean - r.fan_out.pair.mean,
                r.red.pair.mean - r.fan_out_threads.pair.mean,
                r.blackholed.acquire.mean / 1e3,
                RED_NODE_TIMEOUT.as_millis(),
                r.blackholed.release.mean,
                r.blackholed.pair.mean / 1e3,
                r.blackholed.pair.mean / floor,
                floor / 1e3
            );
        }
        let _ = writeln!(out);
    }

    fn report_other_work(&self, out: &mut String) {
        let shares: Vec<String> = self
            .other_work
            .iter()
            .map(|w| format!("{}: {:.0} % ({:.1} % steal)", w.step, w.others * 100.0, w.steal * 100.0))
            .collect();
        let _ = writeln!(
            out,
            "Other processes on the machine during each step, in % of one CPU, and in brackets the time the \
             hypervisor gave our vCPUs to others (steal), from `/proc/stat`: {}.\n",
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
        row("keys in the database before (left by earlier steps)", r.keys_before.to_string());
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
