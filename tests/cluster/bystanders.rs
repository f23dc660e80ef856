//! The bystanders of a killed master: threads that take and give back locks served by the
//! healthy masters while another master is SIGKILLed and failed over, a watch of what the
//! cluster said meanwhile, and the checks of what they saw
//! (`a_killed_master_costs_the_locks_on_the_other_masters_nothing`).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::thread;
use std::time::Duration;

use redlease::Client;

use crate::helpers::*;
use crate::support::cluster::ClusterGroup;
use crate::support::server::RedisServer;

/// How long a caller rides out an unreachable or refusing cluster (`retry_budget`, and the
/// wait of each acquisition, since retries never pass the caller's deadline): the cluster's
/// failover of a killed master takes the node timeout (1 s) to suspect it, a moment to agree
/// it failed, the replica's election delay (0.5 to 1 s) and one vote round (a failed round
/// is tried again after 2 node timeouts, 4 s); 10 s covers that with a round to spare.
pub(super) const RIDE_OUT: Duration = Duration::from_secs(10);

/// What one bystander thread saw (CLOCK_MONOTONIC ns): when it entered each section, and
/// each error with when it came.
#[derive(Default)]
struct Bystander {
    entered: Vec<u64>,
    errors: Vec<(u64, String)>,
}

/// Takes and gives back `name` until `stop`, with the non-atomic increment of its counter
/// on the record server inside.
fn bystander(
    client: &Client,
    name: &str,
    record: &mut redis::Connection,
    stop: &std::sync::atomic::AtomicBool,
) -> Bystander {
    let lock = client.lock(name);
    let mut seen = Bystander::default();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        match lock.try_lock_for(RIDE_OUT) {
            Ok(Some(guard)) => {
                seen.entered.push(monotonic_ns());
                increment_non_atomically(record, &format!("{name}:count"));
                if let Err(err) = guard.unlock() {
                    seen.errors.push((monotonic_ns(), format!("unlock: {err}")));
                }
            }
            // Its one rival holds it for a few ms: not having it in 10 s is no progress.
            Ok(None) => seen.errors.push((monotonic_ns(), format!("not had within {RIDE_OUT:?}"))),
            Err(err) => {
                seen.errors.push((monotonic_ns(), format!("lock: {err}")));
                thread::sleep(Duration::from_millis(20));
            }
        }
    }
    seen
}

/// Polls the node at `port` every 20 ms until `stop`: the first and the last moment it said
/// `cluster_state:fail` (the state in which it answers `CLUSTERDOWN`), if it ever did.
fn watch_cluster_state(port: u16, stop: &std::sync::atomic::AtomicBool) -> Option<(u64, u64)> {
    let mut failed: Option<(u64, u64)> = None;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if crate::support::cluster::cluster_state(port).as_deref() == Some("fail") {
            let now = monotonic_ns();
            failed = Some((failed.map_or(now, |(first, _)| first), now));
        }
        thread::sleep(Duration::from_millis(20));
    }
    failed
}

/// The longest time between two sections entered, in ms.
fn longest_gap_ms(entered: &[u64]) -> u64 {
    entered.windows(2).map(|w| (w[1] - w[0]) / 1_000_000).max().unwrap_or(0)
}

/// One kill among the bystanders (CLOCK_MONOTONIC ns): when the kill began, when the
/// cluster was whole again, what each bystander thread saw with the name of its lock, and
/// the first and last moment the watched node said it was down.
pub(super) struct KillRun<'n> {
    killed: u64,
    whole: u64,
    seen: Vec<(&'n String, Bystander)>,
    down: Option<(u64, u64)>,
}

/// Two bystander threads on each of `names` for 1.5 s, then the master of `victim_slot`
/// killed (returning once the cluster is whole again), then 2 s more; the node at `watched`
/// is polled throughout.
pub(super) fn kill_among_bystanders<'n>(
    group: &mut ClusterGroup,
    victim_slot: u16,
    watched: u16,
    client: &Client,
    names: &'n [String],
    record: &RedisServer,
) -> KillRun<'n> {
    let stop = AtomicBool::new(false);
    let (killed, whole, seen, down) = thread::scope(|scope| {
        let stop = &stop;
        let watcher = scope.spawn(move || watch_cluster_state(watched, stop));
        let threads: Vec<_> = names
            .iter()
            .flat_map(|name| [name, name])
            .map(|name| {
                let mut conn = record.conn();
                (name, scope.spawn(move || bystander(client, name, &mut conn, stop)))
            })
            .collect();
        thread::sleep(Duration::from_millis(1500));
        let killed = monotonic_ns();
        group.kill_master_of(victim_slot);
        let whole = monotonic_ns();
        thread::sleep(Duration::from_secs(2));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let seen: Vec<(&String, Bystander)> = threads.into_iter().map(|(n, t)| (n, t.join().unwrap())).collect();
        (killed, whole, seen, watcher.join().unwrap())
    });
    KillRun { killed, whole, seen, down }
}

impl KillRun<'_> {
    /// Milliseconds from the kill to `at` (negative before it).
    fn since_kill(&self, at: u64) -> i64 {
        (at as i64 - self.killed as i64) / 1_000_000
    }

    /// How long the watched node said `cluster_state:fail`, in ms.
    fn down_ms(&self) -> u64 {
        self.down.map_or(0, |(first, last)| (last - first) / 1_000_000)
    }

    /// Every error a bystander met, each with its moment after the kill.
    pub(super) fn errors(&self) -> Vec<String> {
        self.seen
            .iter()
            .flat_map(|(_, b)| b.errors.iter().map(|(at, e)| format!("+{} ms {e}", self.since_kill(*at))))
            .collect()
    }

    /// The report's first line: the kill, the cluster whole again, how long `watched` said
    /// it was down, and the number of errors.
    pub(super) fn summary(&self, watched: u16, errors: usize) -> String {
        format!(
            "killed at 0 ms, whole again at +{} ms; {watched} said cluster_state:fail for {} ms (from +{} ms); {} errors",
            self.since_kill(self.whole),
            self.down_ms(),
            self.down.map_or(0, |(first, _)| self.since_kill(first)),
            errors
        )
    }

    /// The report line of the bystanders of `name`, whose counter reads `count`, and what
    /// they got wrong: increments lost, no progress on one side of the kill, or a pause much
    /// longer than the cluster said it was down.
    pub(super) fn check(&self, name: &str, count: u64) -> (String, Vec<String>) {
        let mut entered: Vec<u64> =
            self.seen.iter().filter(|(n, _)| *n == name).flat_map(|(_, b)| b.entered.iter().copied()).collect();
        entered.sort_unstable();
        let (before, after) =
            (entered.iter().filter(|&&t| t < self.killed).count(), entered.iter().filter(|&&t| t > self.whole).count());
        let gap = longest_gap_ms(&entered);
        let down_ms = self.down_ms();
        let line = format!(
            "{name}: {} sections, {before} before the kill, {after} once whole, counter {count}, longest pause {gap} ms",
            entered.len()
        );
        let mut problems = Vec::new();
        if count != entered.len() as u64 {
            problems.push(format!("{name}: the non-atomic counter is {count} after {} sections", entered.len()));
        }
        if before == 0 || after == 0 {
            problems.push(format!("{name}: no progress before the kill ({before}) or once whole ({after})"));
        }
        // A call waiting out the refusals retries at most 1 s apart: sanity bound, slack 3 s.
        if gap > down_ms + 3000 {
            problems.push(format!("{name}: paused {gap} ms, the cluster said it was down {down_ms} ms"));
        }
        (line, problems)
    }
}

/// The same error over and over: counted once each, without its moment.
pub(super) fn by_message(errors: &[String]) -> BTreeMap<&str, usize> {
    let mut distinct: BTreeMap<&str, usize> = BTreeMap::new();
    for e in errors {
        *distinct.entry(e.split_once(" ms ").map_or(e.as_str(), |(_, text)| text)).or_default() += 1;
    }
    distinct
}
