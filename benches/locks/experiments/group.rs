//! Step 12, the group lock against a `MultiLock` over the same values: uncontended
//! `try_lock()` + `unlock()` of n values, one thread, interleaved with the limit pair, for
//! each of [`GROUP_SIZES`]; then a few pairs of the largest group a group lock takes, with
//! the time Redis spent in each of its two script calls.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redlease::{Client, MultiLock};
use redlease_testkit::server::RedisServer;

use crate::clock::nanos;
use crate::experiments::limit::{trivial_call, trivial_pair};
use crate::meter::process_ticks;
use crate::plan::Plan;
use crate::stats::{PAIR_BLOCKS, PairOp, PairStats, Summary, measure_pairs, reset_server_stats, server_command_stats};
use crate::table::pair_cells;

/// The numbers of values compared.
pub(crate) const GROUP_SIZES: [usize; 3] = [1, 10, 100];
/// The most values a group lock takes.
pub(crate) const LARGEST_GROUP: usize = redlease::MAX_GROUP_VALUES;
/// Pairs of the largest group made before the measured ones.
const LARGEST_WARMUP: usize = 3;
/// µs per tick of `/proc/<pid>/stat` (USER_HZ 100).
const TICK_US: f64 = 10_000.0;

/// One group size: the limit pair, the group lock's pair and the `MultiLock`'s, in
/// interleaved blocks.
pub(crate) struct GroupRun {
    pub(crate) values: usize,
    pub(crate) trivial: PairStats,
    pub(crate) group: PairStats,
    pub(crate) multi: PairStats,
}

/// The largest group, pair by pair after a limit pair.
pub(crate) struct LargestGroup {
    pub(crate) values: usize,
    pub(crate) trivial: PairStats,
    pub(crate) group: PairStats,
    /// Redis's time in each acquire script and in each release script (`INFO
    /// commandstats`, reset before each call and read after it).
    pub(crate) acquire_script: Summary,
    pub(crate) release_script: Summary,
    /// The CPU time of `redis-server` around the acquires and around the releases, per
    /// call, µs (`/proc/<pid>/stat`, ticks of 10 ms added up over the calls): what the
    /// scripts cost it without the time other processes took its CPU.
    pub(crate) acquire_cpu_us: f64,
    pub(crate) release_cpu_us: f64,
}

pub(crate) struct GroupLocks {
    pub(crate) runs: Vec<GroupRun>,
    pub(crate) largest: LargestGroup,
}

pub(crate) fn measure_group_locks(server: &RedisServer, plan: &Plan) -> GroupLocks {
    let client = Client::open(&server.url()).expect("client for the group lock run");
    let runs = GROUP_SIZES
        .iter()
        .zip(plan.group_pairs)
        .map(|(&n, pairs)| measure_size(server, &client, plan, n, pairs))
        .collect();
    let largest = measure_largest(server, &client, plan.largest_group_pairs);
    GroupLocks { runs, largest }
}

/// The values of a group of `n`.
fn values(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("value:{i}")).collect()
}

fn measure_size(server: &RedisServer, client: &Client, plan: &Plan, n: usize, pairs: usize) -> GroupRun {
    let values = values(n);
    let group = client.group_lock(format!("bench:group:{n}"), &values);
    // One plain lock per value, all on the one server.
    let multi = MultiLock::new(values.iter().map(|v| client.lock(format!("bench:group:multi:{n}:{v}"))));
    let (mut trivial_conn, mut stats_conn) = (server.conn(), server.conn());
    let trivial = trivial_call(&mut trivial_conn);
    let mut ops: Vec<PairOp> = vec![
        trivial_pair(&trivial, &mut trivial_conn),
        Box::new(|| {
            let start = Instant::now();
            let guard = group.try_lock().expect("try_lock").expect("an uncontended group is free");
            let acquired = start.elapsed();
            guard.unlock().expect("unlock");
            acquired
        }),
        Box::new(|| {
            let start = Instant::now();
            let guard = multi.try_lock().expect("try_lock").expect("uncontended locks are free");
            let acquired = start.elapsed();
            guard.unlock().expect("unlock");
            acquired
        }),
    ];
    // A MultiLock pair of n values is 2 × n round trips: fewer warm-up pairs for larger n.
    let warmup = (plan.warmup / n).max(10);
    let stats = measure_pairs(&mut ops, warmup, pairs, Some(&mut stats_conn));
    drop(ops);
    let mut kinds = stats.into_iter();
    let mut next = || kinds.next().expect("one result per kind");
    GroupRun { values: n, trivial: next(), group: next(), multi: next() }
}

/// Samples of one kind of pair and the `EVALSHA`s Redis ran for it.
#[derive(Default)]
struct Samples {
    pair: Vec<u64>,
    acquire: Vec<u64>,
    release: Vec<u64>,
    calls: u64,
    usec: u64,
}

impl Samples {
    fn push(&mut self, acquire: Duration, release: Duration, (calls, usec): (u64, u64)) {
        self.acquire.push(nanos(acquire));
        self.release.push(nanos(release));
        self.pair.push(nanos(acquire + release));
        self.calls += calls;
        self.usec += usec;
    }

    fn finish(self) -> PairStats {
        let pairs = self.pair.len().max(1) as f64;
        PairStats {
            server_calls_per_pair: self.calls as f64 / pairs,
            server_usec_per_pair: self.usec as f64 / pairs,
            server_usec: self.usec as f64 / self.calls.max(1) as f64,
            pair: Summary::of_nanos(self.pair),
            acquire: Summary::of_nanos(self.acquire),
            release: Summary::of_nanos(self.release),
        }
    }
}

/// `pairs` pairs of a group of `LARGEST_GROUP` values, each after a limit pair; Redis's
/// counters and its CPU time are read around each call of the group lock, so that each
/// script's own time is known.
fn measure_largest(server: &RedisServer, client: &Client, pairs: usize) -> LargestGroup {
    let group = client.group_lock("bench:group:largest", values(LARGEST_GROUP));
    let pid = server.pid().expect("a running server").to_string();
    let (mut acquire_ticks, mut release_ticks) = (0, 0);
    let (mut trivial_conn, mut stats_conn) = (server.conn(), server.conn());
    let trivial = trivial_call(&mut trivial_conn);
    let (mut limit, mut largest) = (Samples::default(), Samples::default());
    let (mut acquire_script, mut release_script) = (Vec::with_capacity(pairs), Vec::with_capacity(pairs));
    for round in 0..LARGEST_WARMUP + pairs {
        let measured = round >= LARGEST_WARMUP;
        reset_server_stats(&mut stats_conn);
        let start = Instant::now();
        let _: i64 = trivial.query(&mut trivial_conn).expect("trivial EVALSHA");
        let first = start.elapsed();
        let _: i64 = trivial.query(&mut trivial_conn).expect("trivial EVALSHA");
        let second = start.elapsed() - first;
        let counted = server_command_stats(&mut stats_conn, "evalsha");
        if measured {
            limit.push(first, second, counted);
        }

        reset_server_stats(&mut stats_conn);
        let ticks = process_ticks(&pid, false);
        let start = Instant::now();
        let guard = group.try_lock().expect("try_lock").expect("an uncontended group is free");
        let acquired = start.elapsed();
        let acquire_cpu = process_ticks(&pid, false) - ticks;
        let (acquire_calls, acquire_usec) = server_command_stats(&mut stats_conn, "evalsha");
        reset_server_stats(&mut stats_conn);
        let ticks = process_ticks(&pid, false);
        let start = Instant::now();
        guard.unlock().expect("unlock");
        let released = start.elapsed();
        let release_cpu = process_ticks(&pid, false) - ticks;
        let (release_calls, release_usec) = server_command_stats(&mut stats_conn, "evalsha");
        if measured {
            acquire_ticks += acquire_cpu;
            release_ticks += release_cpu;
            largest.push(acquired, released, (acquire_calls + release_calls, acquire_usec + release_usec));
            acquire_script.push(acquire_usec);
            release_script.push(release_usec);
        }
    }
    LargestGroup {
        values: LARGEST_GROUP,
        trivial: limit.finish(),
        group: largest.finish(),
        acquire_script: Summary::of_micros(acquire_script),
        release_script: Summary::of_micros(release_script),
        acquire_cpu_us: acquire_ticks as f64 * TICK_US / pairs.max(1) as f64,
        release_cpu_us: release_ticks as f64 * TICK_US / pairs.max(1) as f64,
    }
}

/// Step 12's section.
pub(crate) fn group_section(out: &mut String, g: &GroupLocks) {
    let _ = writeln!(
        out,
        "### 12. Group lock: uncontended `try_lock()` + `unlock()` of n values, one thread: a `GroupLock` (one \
         script call each way, whatever n) against a `MultiLock` over n plain locks (one round trip per lock each \
         way), {PAIR_BLOCKS} blocks per kind, interleaved with the limit pair, for each n\n"
    );
    let _ = writeln!(
        out,
        "Redis calls and µs per pair: the `EVALSHA`s Redis ran, their scripts' commands included (`INFO \
         commandstats`, read around each block). The limit of a pair is the limit pair for the group lock, \
         whatever n, and n limit pairs for the `MultiLock` (\"its limit\"). The group of {} values (the most a \
         group lock takes) is measured pair by pair, each after a limit pair, with Redis's counters read \
         around each of its two calls.\n",
        g.largest.values
    );
    let _ = writeln!(
        out,
        "| values | pair | n | mean µs | p50 µs | p99 µs | acquire mean µs | release mean µs | Redis calls, µs per pair | mean / limit pair | mean / its limit |"
    );
    let _ = writeln!(out, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &g.runs {
        let limit_pair = r.trivial.pair.mean;
        let multi = format!("**`MultiLock` over {} plain lock{}**", r.values, if r.values == 1 { "" } else { "s" });
        group_row(out, r.values, "two trivial `EVALSHA`s (the limit pair)", &r.trivial, limit_pair, 1);
        group_row(out, r.values, "**group lock**", &r.group, limit_pair, 1);
        group_row(out, r.values, &multi, &r.multi, limit_pair, r.values);
    }
    let l = &g.largest;
    let limit_pair = l.trivial.pair.mean;
    let before = "two trivial `EVALSHA`s (the limit pair), before each pair below";
    group_row(out, l.values, before, &l.trivial, limit_pair, 1);
    group_row(out, l.values, "**group lock**", &l.group, limit_pair, 1);
    let _ = writeln!(out);
    let ratios: Vec<String> =
        g.runs.iter().map(|r| format!("{}: {:.3}", r.values, r.group.pair.mean / r.multi.pair.mean)).collect();
    let _ = writeln!(
        out,
        "Group lock pair ÷ `MultiLock` pair, by n: {}. A group lock of {} values: the pair took {:.2} ms ({:.1} × \
         the limit pair); Redis ran its acquire script for {:.0} µs per call (p50 {:.0}, max {:.0}) and its \
         release script for {:.0} µs (p50 {:.0}, max {:.0}), serving nothing else meanwhile (`INFO \
         commandstats`, around each call); `redis-server`'s CPU time around the calls (`/proc`, ticks of 10 ms \
         added up): {:.0} µs per acquire, {:.0} µs per release.\n",
        ratios.join("; "),
        l.values,
        l.group.pair.mean / 1e3,
        l.group.pair.mean / limit_pair,
        l.acquire_script.mean,
        l.acquire_script.p50,
        l.acquire_script.max,
        l.release_script.mean,
        l.release_script.p50,
        l.release_script.max,
        l.acquire_cpu_us,
        l.release_cpu_us
    );
}

/// One row of the group lock's table: `x` for `values` values, against the limit pair and
/// against its own limit, `round_trips` limit pairs.
fn group_row(out: &mut String, values: usize, what: &str, x: &PairStats, limit_pair: f64, round_trips: usize) {
    let _ = writeln!(
        out,
        "| {values} | {what} | {} | {:.2}, {:.1} | {:.3} | {:.3} |",
        pair_cells(x),
        x.server_calls_per_pair,
        x.server_usec_per_pair,
        x.pair.mean / limit_pair,
        x.pair.mean / (limit_pair * round_trips as f64)
    );
}
