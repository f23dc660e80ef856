//! The plan of a run, from the environment: how many samples each measurement takes
//! (`REDLEASE_BENCH_QUICK`), and the other switches a user sets.

use std::time::Duration;

/// Set to 1 for a short run.
const QUICK_ENV: &str = "REDLEASE_BENCH_QUICK";
/// Set to 1 to write the results into docs/performance.md.
pub(crate) const WRITE_DOC_ENV: &str = "REDLEASE_BENCH_WRITE_DOC";
/// Set to 0 to leave the processes wherever the scheduler puts them.
pub(crate) const PIN_ENV: &str = "REDLEASE_BENCH_PIN";
/// Set to a list of steps (`1`, `11`, `12`, `14`, `16`, `18`, `1,12`) to run only those, after the limit.
pub(crate) const ONLY_ENV: &str = "REDLEASE_BENCH_ONLY";
/// The steps that can run alone: their reports need nothing but the limit and themselves.
pub(crate) const ALONE_STEPS: [u32; 10] = [1, 11, 12, 14, 15, 16, 17, 18, 19, 20];

/// The steps `REDLEASE_BENCH_ONLY` names, or `None` for the whole run.
pub(crate) fn only_steps() -> Option<Vec<u32>> {
    let list = std::env::var(ONLY_ENV).ok()?;
    let steps: Vec<u32> = list
        .split(',')
        .map(|s| match s.trim().parse() {
            Ok(step) if ALONE_STEPS.contains(&step) => step,
            _ => panic!("{ONLY_ENV}={list}: the steps that run alone are {ALONE_STEPS:?}"),
        })
        .collect();
    Some(steps)
}

/// How many samples each measurement takes.
pub(crate) struct Plan {
    pub(crate) quick: bool,
    pub(crate) warmup: usize,
    pub(crate) round_trips: usize,
    pub(crate) pipelines: usize,
    pub(crate) pairs: usize,
    pub(crate) handoffs: usize,
    pub(crate) throughput_for: Duration,
    pub(crate) leases: usize,
    pub(crate) hold_periods: u32,
    /// Rounds in which the writer waits for the readers to stop.
    pub(crate) writer_rounds: usize,
    /// How long the readers keep reading after the writer started waiting.
    pub(crate) readers_for: Duration,
    /// Pairs per kind in the healthy Redlock runs.
    pub(crate) red_pairs: usize,
    /// Pairs in the Redlock runs with one node blackholed.
    pub(crate) blackholed_pairs: usize,
    /// Hand-offs of each peer (whose waiters poll: each takes up to a poll interval).
    pub(crate) peer_handoffs: usize,
    /// Pairs of redis-lock with many keys in the database.
    pub(crate) crowded_pairs: usize,
    /// Pairs per kind of the group lock step, for each of its group sizes
    /// ([`GROUP_SIZES`](crate::experiments::group::GROUP_SIZES)): a `MultiLock` pair takes
    /// 2 × n round trips.
    pub(crate) group_pairs: [usize; 3],
    /// Pairs of the largest group a group lock takes.
    pub(crate) largest_group_pairs: usize,
}

impl Plan {
    pub(crate) fn from_env() -> Plan {
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
                peer_handoffs: 8,
                crowded_pairs: 20,
                group_pairs: [1_000, 200, 40],
                largest_group_pairs: 20,
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
                peer_handoffs: 40,
                crowded_pairs: 200,
                group_pairs: [10_000, 2_000, 200],
                largest_group_pairs: 20,
            }
        }
    }
}
