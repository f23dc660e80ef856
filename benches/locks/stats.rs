//! Statistics: samples reduced to summaries (nearest-rank percentiles), the timing loops
//! that gather them, and the server's own counters per command (`INFO commandstats`).

use std::time::{Duration, Instant};

use crate::clock::nanos;

/// Sorted samples reduced to what the report shows, in microseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Summary {
    pub(crate) n: usize,
    pub(crate) mean: f64,
    pub(crate) p50: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
    pub(crate) max: f64,
}

impl Summary {
    /// Summarises samples given in nanoseconds.
    pub(crate) fn of_nanos(mut samples: Vec<u64>) -> Summary {
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

    /// Summarises samples given in microseconds.
    pub(crate) fn of_micros(samples: Vec<u64>) -> Summary {
        Summary::of_nanos(samples.into_iter().map(|us| us.saturating_mul(1_000)).collect())
    }
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[u64], q: f64) -> u64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Times `op` `warmup + n` times and summarises the last `n`.
pub(crate) fn time_each(warmup: usize, n: usize, mut op: impl FnMut()) -> Summary {
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

/// Pairs per block; the kinds of pair are measured in interleaved blocks so that the
/// machine's drift (a noisy 2-core VM) hits them alike.
pub(crate) const PAIR_BLOCKS: usize = 10;

/// One kind of acquire + release pair: the whole pair, its first call (acquire) and the
/// rest (release), and the server time per `EVALSHA` (or per call of the commands counted
/// for it) while it ran.
pub(crate) struct PairStats {
    pub(crate) pair: Summary,
    pub(crate) acquire: Summary,
    pub(crate) release: Summary,
    pub(crate) server_usec: f64,
    /// Calls of the commands counted, per pair.
    pub(crate) server_calls_per_pair: f64,
    /// Server time in them, per pair, µs.
    pub(crate) server_usec_per_pair: f64,
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
        let pairs = self.pair.len().max(1) as f64;
        PairStats {
            server_calls_per_pair: self.server_calls as f64 / pairs,
            server_usec_per_pair: self.server_usec as f64 / pairs,
            pair: Summary::of_nanos(self.pair),
            acquire: Summary::of_nanos(self.acquire),
            release: Summary::of_nanos(self.release),
            server_usec: self.server_usec as f64 / self.server_calls.max(1) as f64,
        }
    }
}

/// A timed operation that returns how long its first half took.
pub(crate) type PairOp<'a> = Box<dyn FnMut() -> Duration + 'a>;

/// Runs every op `warmup` times, then `pairs` times each in `PAIR_BLOCKS` interleaved
/// blocks. With `stats`, the server time per `EVALSHA` of each block is read on it (reset
/// before the block).
pub(crate) fn measure_pairs(
    ops: &mut [PairOp],
    warmup: usize,
    pairs: usize,
    stats: Option<&mut redis::Connection>,
) -> Vec<PairStats> {
    let counted = vec![&["evalsha"][..]; ops.len()];
    measure_pairs_counting(ops, &counted, warmup, pairs, stats)
}

/// [`measure_pairs`], reading for `ops[i]` the server time of the commands `counted[i]`
/// (those its client sends itself, whose time includes that of the commands their scripts
/// run).
pub(crate) fn measure_pairs_counting(
    ops: &mut [PairOp],
    counted: &[&[&str]],
    warmup: usize,
    pairs: usize,
    stats: Option<&mut redis::Connection>,
) -> Vec<PairStats> {
    assert_eq!(ops.len(), counted.len(), "the commands counted for every op");
    match stats {
        Some(conn) => measure_pairs_with(ops, warmup, pairs, Some(&mut OneServer { conn, counted })),
        None => measure_pairs_with(ops, warmup, pairs, None),
    }
}

/// What is read on the server (or servers) around each block of pairs.
pub(crate) trait BlockCounters {
    /// Before a block of `ops[op]`.
    fn reset(&mut self, op: usize);
    /// After it: the calls and the server microseconds to count for `ops[op]`.
    fn read(&mut self, op: usize) -> (u64, u64);
}

/// The commands `counted[op]` on one server.
struct OneServer<'a, 'b> {
    conn: &'a mut redis::Connection,
    counted: &'a [&'b [&'b str]],
}

impl BlockCounters for OneServer<'_, '_> {
    fn reset(&mut self, _op: usize) {
        reset_server_stats(self.conn);
    }

    fn read(&mut self, op: usize) -> (u64, u64) {
        self.counted[op].iter().fold((0, 0), |(calls, usec), command| {
            let (c, u) = server_command_stats(self.conn, command);
            (calls + c, usec + u)
        })
    }
}

/// Runs every op `warmup` times, then `pairs` times each in `PAIR_BLOCKS` interleaved
/// blocks, with `counters` reset before each block and read after it.
pub(crate) fn measure_pairs_with(
    ops: &mut [PairOp],
    warmup: usize,
    pairs: usize,
    mut counters: Option<&mut dyn BlockCounters>,
) -> Vec<PairStats> {
    for op in ops.iter_mut() {
        for _ in 0..warmup {
            op();
        }
    }
    let mut samples: Vec<PairSamples> = ops.iter().map(|_| PairSamples::default()).collect();
    for _ in 0..PAIR_BLOCKS {
        for (i, (op, kind)) in ops.iter_mut().zip(&mut samples).enumerate() {
            if let Some(counters) = counters.as_deref_mut() {
                counters.reset(i);
            }
            for _ in 0..pairs / PAIR_BLOCKS {
                let start = Instant::now();
                let first = nanos(op());
                let pair = nanos(start.elapsed());
                kind.pair.push(pair);
                kind.acquire.push(first);
                kind.release.push(pair - first);
            }
            if let Some(counters) = counters.as_deref_mut() {
                let (calls, usec) = counters.read(i);
                kind.server_calls += calls;
                kind.server_usec += usec;
            }
        }
    }
    samples.into_iter().map(PairSamples::finish).collect()
}

/// `op` twice, as a pair whose first half is the first call.
pub(crate) fn twice<'a>(mut op: impl FnMut() + 'a) -> PairOp<'a> {
    Box::new(move || {
        let start = Instant::now();
        op();
        let first = start.elapsed();
        op();
        first
    })
}

/// `CONFIG RESETSTAT`, so that the next [`server_usec_per_call`] covers only what follows.
pub(crate) fn reset_server_stats(conn: &mut redis::Connection) {
    redis::cmd("CONFIG").arg("RESETSTAT").query::<()>(conn).expect("CONFIG RESETSTAT");
}

/// Server-side microseconds per call of `command` since the last reset (`INFO commandstats`).
/// For `EVALSHA` this is the whole script, including the commands it runs.
pub(crate) fn server_usec_per_call(conn: &mut redis::Connection, command: &str) -> f64 {
    let (calls, usec) = server_command_stats(conn, command);
    usec as f64 / calls.max(1) as f64
}

/// Calls of `command` and server microseconds spent in them since the last reset.
pub(crate) fn server_command_stats(conn: &mut redis::Connection, command: &str) -> (u64, u64) {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).expect("INFO commandstats");
    let prefix = format!("cmdstat_{command}:");
    let Some(fields) = info.lines().find_map(|line| line.strip_prefix(&prefix)) else { return (0, 0) };
    let field =
        |name: &str| fields.split(',').find_map(|f| f.strip_prefix(name)).and_then(|v| v.parse().ok()).unwrap_or(0);
    (field("calls="), field("usec="))
}

/// Every command's calls and server microseconds since the last reset (`INFO
/// commandstats`), by name (`evalsha`, `config|resetstat`, ...). Commands a script runs are
/// counted under their own names too.
pub(crate) fn server_all_command_stats(conn: &mut redis::Connection) -> Vec<(String, u64, u64)> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).expect("INFO commandstats");
    info.lines()
        .filter_map(|line| line.strip_prefix("cmdstat_"))
        .filter_map(|line| {
            let (name, fields) = line.split_once(':')?;
            let field = |f: &str| fields.split(',').find_map(|x| x.strip_prefix(f)).and_then(|v| v.parse().ok());
            Some((name.to_string(), field("calls=")?, field("usec=")?))
        })
        .collect()
}
