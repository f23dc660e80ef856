//! No-grant windows: how long a fault keeps a lock from every caller, on real topologies
//! (Sentinel with one replica and with two, a Redis Cluster with a replica per master). Two
//! threads, a client each with the defaults, take and give back one lock in a loop
//! (`try_lock_for(30 s)`, a non-atomic GET/SET of a counter on a separate server inside),
//! while the test injects a fault: a graceful failover, the master SIGKILLed, a replica
//! SIGKILLed, a replica restarted. The window is the longest time between two grants, the
//! second of them after the fault. Each scenario prints one line (`--nocapture`); the
//! figures are tabled in `docs/guarantees.md` ("No-grant windows"). The bounds asserted are
//! sanity bounds only, with slack for a loaded machine; the figures are the point.
//!
//! The Sentinel groups run Redis's defaults, so a full resync waits
//! `repl-diskless-sync-delay` (5 s) for more replicas before it starts; the failovers are
//! measured again without that delay, as the cluster runs.
//!
//! No caller may see an error: each waits 30 s. A release does not wait: one in flight when
//! the master is SIGKILLed rides the failover out within the retry budget (3 s) only, and
//! the new master can be named later than that; such a release given up is counted and
//! printed there, not failed (the same thread's next release takes the hold it left).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redlease::Client;

use crate::helpers::*;
use crate::support::cluster::ClusterGroup;
use crate::support::sentinel::SentinelGroup;
use crate::support::server::RedisServer;

/// How long each call waits for the lock: the callers ride out every fault below.
const WAIT: Duration = Duration::from_secs(30);
/// Grants before the fault: the loop's own pauses, for comparison.
const BEFORE: Duration = Duration::from_secs(1);
/// Grants once the topology is whole again.
const AFTER: Duration = Duration::from_millis(1500);
/// A worker's pause between its sections, outside the lock: the loop's resolution, and
/// less load on a small machine.
const PACE: Duration = Duration::from_millis(10);
/// How long a SIGKILLed replica stays down before it is started again.
const DOWN: Duration = Duration::from_secs(3);
/// Slack on the sanity bounds: the machine is noisy.
const SLACK: Duration = Duration::from_secs(3);
/// How long the test waits for a topology to be whole again after a fault.
const SETTLE: Duration = Duration::from_secs(40);
/// The clients' `replica_sync_timeout` (the default): how long a grant's `WAIT` blocks.
const SYNC_TIMEOUT: Duration = Duration::from_secs(1);
/// Redis's default `repl-diskless-sync-delay`: a full resync waits this long to start.
const SYNC_DELAY: Duration = Duration::from_secs(5);
/// The server arguments of the groups measured without that delay.
const NO_SYNC_DELAY: &[&str] = &["--repl-diskless-sync-delay", "0"];

/// The faults measured.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// A replica SIGKILLed, and started again `DOWN` later.
    ReplicaKill,
    /// A replica SIGKILLed, and started again at once.
    ReplicaRestart,
    /// `SENTINEL FAILOVER`, or `CLUSTER FAILOVER` on the master's replica.
    Graceful,
    /// The master SIGKILLed; once a replica is promoted, the killed server is started
    /// again as its replica.
    MasterKill,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fault::ReplicaKill => "replica SIGKILL",
            Fault::ReplicaRestart => "replica restart",
            Fault::Graceful => "graceful failover",
            Fault::MasterKill => "master SIGKILL",
        })
    }
}

/// What a fault did: when it was injected (CLOCK_MONOTONIC ns), and what became of the
/// master where it was failed over.
struct Injected {
    at: u64,
    failover: Failover,
}

/// How long after a fault the replica promoted said it was a master, and the old master
/// that it was a replica; `None` where that did not happen (within 40 s).
#[derive(Clone, Copy, Default)]
struct Failover {
    promotion: Option<Duration>,
    demotion: Option<Duration>,
}

/// What one worker saw: when each call that was granted the lock began and when it
/// returned (CLOCK_MONOTONIC ns), each error with when it came, and apart from them each
/// release given up once the retry budget was spent (`unlock()` does not wait: it rides out
/// a failover within the budget only, 3 s by default, and the same thread's next release
/// takes the hold it left).
#[derive(Default)]
struct Seen {
    grants: Vec<(u64, u64)>,
    errors: Vec<(u64, String)>,
    unlocks_given_up: Vec<(u64, String)>,
}

/// One scenario's figures.
struct Window {
    scenario: String,
    fault: Fault,
    failover: Failover,
    /// The longest time between two grants, the second of them after the fault.
    longest: Duration,
    /// When that window began, in ms from the fault (negative: before it).
    began_ms: i64,
    /// How long the call granted at the window's end had been waiting.
    ending_call: Duration,
    /// When the test had the topology whole again (every replica online at the master),
    /// in ms from the fault.
    whole_ms: i64,
    /// The longest time between two grants before the fault: the loop's own pauses.
    before: Duration,
    sections: u64,
    counter: u64,
    /// Grants once the test had the topology whole again.
    after_whole: usize,
    /// Tries sent again by the two clients (`ClientStats::retries`): the refusals ridden out.
    retries: u64,
    errors: Vec<String>,
    /// Releases given up at the end of the retry budget (see [`Seen`]).
    unlocks_given_up: Vec<String>,
}

impl Window {
    /// The scenario's line: promotion and demotion, the window (when it began, how long the
    /// call that ended it had waited), when the topology was whole again, the loop's own
    /// pauses before the fault, sections and counter, tries again, errors.
    fn line(&self) -> String {
        let secs = |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{:+.2} s", d.as_secs_f64()));
        let (promotion, demotion) = (secs(self.failover.promotion), secs(self.failover.demotion));
        format!(
            "no-grant window | {} | promotion {promotion}, old master a replica {demotion} | window {:.2} s \
             (from {:+.2} s, its last call {:.2} s) | whole at {:+.2} s | before the fault {:.2} s \
             | {} sections, counter {} | {} tries again | {} errors{} | {} unlocks given up{}",
            self.scenario,
            self.longest.as_secs_f64(),
            self.began_ms as f64 / 1000.0,
            self.ending_call.as_secs_f64(),
            self.whole_ms as f64 / 1000.0,
            self.before.as_secs_f64(),
            self.sections,
            self.counter,
            self.retries,
            self.errors.len(),
            self.errors.first().map_or(String::new(), |e| format!(", first: {e}")),
            self.unlocks_given_up.len(),
            self.unlocks_given_up.first().map_or(String::new(), |e| format!(", first: {e}"))
        )
    }

    /// When the window ended, from the fault.
    fn ended(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.began_ms.max(0)).unwrap_or(0)) + self.longest
    }

    /// What is wrong whatever the topology: an error, a release given up but where the
    /// master was killed (the new master can be named after the release's retry budget
    /// ran out, as `docs/guarantees.md` says), an increment lost, no grant once the
    /// topology was whole again, or grants that came back only well after that.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !self.errors.is_empty() {
            problems.push(format!("{}: {} errors: {:?}", self.scenario, self.errors.len(), self.errors));
        }
        if self.fault != Fault::MasterKill && !self.unlocks_given_up.is_empty() {
            problems.push(format!("{}: releases given up: {:?}", self.scenario, self.unlocks_given_up));
        }
        if self.counter != self.sections {
            problems.push(format!(
                "{}: the non-atomic counter is {} after {} sections",
                self.scenario, self.counter, self.sections
            ));
        }
        if self.after_whole == 0 {
            problems.push(format!("{}: no grant once the topology was whole again", self.scenario));
        }
        let whole = Duration::from_millis(u64::try_from(self.whole_ms.max(0)).unwrap_or(0));
        if self.ended() > whole + SLACK {
            problems.push(format!(
                "{}: the window ended at +{:?}, the topology was whole at +{whole:?}",
                self.scenario,
                self.ended()
            ));
        }
        problems
    }

    /// `Some(why)` when the window is longer than `bound`.
    fn longer_than(&self, bound: Duration, what: &str) -> Option<String> {
        (self.longest > bound)
            .then(|| format!("{}: window {:?}, more than {what} ({bound:?})", self.scenario, self.longest))
    }

    /// The promotion, which a failover has (else the bounds that count from it fail).
    fn promotion(&self) -> Duration {
        self.failover.promotion.unwrap_or(Duration::ZERO)
    }
}

/// The loop's shared state: when to stop, and the latest grant (CLOCK_MONOTONIC ns).
#[derive(Default)]
struct Loop {
    stop: AtomicBool,
    last_grant: AtomicU64,
}

/// Takes and gives back `name` until told to stop, with the non-atomic increment of
/// `counter` on the record server inside.
fn worker(client: &Client, name: &str, record: &mut redis::Connection, counter: &str, shared: &Loop) -> Seen {
    let lock = client.lock(name);
    let mut seen = Seen::default();
    while !shared.stop.load(Ordering::Relaxed) {
        let called = monotonic_ns();
        match lock.try_lock_for(WAIT) {
            Ok(Some(guard)) => {
                let now = monotonic_ns();
                seen.grants.push((now, called));
                shared.last_grant.fetch_max(now, Ordering::Relaxed);
                increment_non_atomically(record, counter);
                match guard.unlock() {
                    Ok(()) => {}
                    Err(err) if err.is_transient() => seen.unlocks_given_up.push((monotonic_ns(), err.to_string())),
                    Err(err) => seen.errors.push((monotonic_ns(), format!("unlock: {err}"))),
                }
            }
            // Its one rival holds it for a few ms: not having it in 30 s is an outage.
            Ok(None) => seen.errors.push((monotonic_ns(), format!("not had within {WAIT:?}"))),
            Err(err) => {
                seen.errors.push((monotonic_ns(), format!("lock: {err}")));
                thread::sleep(Duration::from_millis(20));
            }
        }
        thread::sleep(PACE);
    }
    seen
}

/// Polls `ROLE` every 20 ms, for up to 40 s, from `at` (CLOCK_MONOTONIC ns): how long after
/// it one of the servers on `candidates` said it was a master (the promotion), and the old
/// master on `old` said it was a replica (demoted, or started again as one).
fn watch_failover(candidates: Vec<u16>, old: u16, at: u64) -> thread::JoinHandle<Failover> {
    thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(40);
        let mut seen = Failover::default();
        let since = || Some(Duration::from_nanos(monotonic_ns().saturating_sub(at)));
        while Instant::now() < end && (seen.promotion.is_none() || seen.demotion.is_none()) {
            if seen.promotion.is_none() && candidates.iter().any(|&port| role(port).as_deref() == Some("master")) {
                seen.promotion = since();
            }
            if seen.demotion.is_none() && role(old).as_deref() == Some("slave") {
                seen.demotion = since();
            }
            thread::sleep(Duration::from_millis(20));
        }
        seen
    })
}

/// `master` or `slave`, from `ROLE` of the server on `port`; `None` when it does not answer.
fn role(port: u16) -> Option<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let mut conn = client.get_connection_with_timeout(Duration::from_millis(200)).ok()?;
    conn.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    match redis::cmd("ROLE").query::<Vec<redis::Value>>(&mut conn).ok()?.first() {
        Some(redis::Value::BulkString(role)) => Some(String::from_utf8_lossy(role).into_owned()),
        _ => None,
    }
}

/// Runs the loop of two workers on `name` through `url` for `BEFORE`, injects `fault`
/// (`inject` returns once the topology is whole again), waits for a grant after that and
/// lets the loop run `AFTER` more, and measures.
fn measure(
    topology: &str,
    fault: Fault,
    url: &str,
    name: &str,
    record: &RedisServer,
    inject: impl FnOnce() -> Injected,
) -> Window {
    let counter = format!("{name}:count");
    let clients: Vec<Client> =
        (0..2).map(|_| build_patiently(Duration::from_secs(10), || Client::builder(url))).collect();
    let shared = Loop::default();
    let (injected, whole, seen) = thread::scope(|scope| {
        let workers: Vec<_> = clients
            .iter()
            .map(|client| {
                let (mut conn, counter, shared) = (record.conn(), &counter, &shared);
                scope.spawn(move || worker(client, name, &mut conn, counter, shared))
            })
            .collect();
        thread::sleep(BEFORE);
        let injected = inject();
        let whole = monotonic_ns();
        // The grants go on once the topology is whole (the test's bounds say how soon).
        wait_until(WAIT, || shared.last_grant.load(Ordering::Relaxed) > whole);
        thread::sleep(AFTER);
        shared.stop.store(true, Ordering::Relaxed);
        let seen: Vec<Seen> = workers.into_iter().map(|w| w.join().expect("worker")).collect();
        (injected, whole, seen)
    });
    let mut calls: Vec<(u64, u64)> = seen.iter().flat_map(|s| s.grants.iter().copied()).collect();
    calls.sort_unstable();
    let grants: Vec<u64> = calls.iter().map(|&(granted, _)| granted).collect();
    let since = |ns: u64| (ns as i64 - injected.at as i64) / 1_000_000;
    let (longest, began, ending_call) = calls
        .windows(2)
        .filter(|w| w[1].0 > injected.at)
        .map(|w| (w[1].0 - w[0].0, w[0].0, w[1].0 - w[1].1))
        .max()
        .unwrap_or((0, injected.at, 0));
    let before = grants.windows(2).filter(|w| w[1] <= injected.at).map(|w| w[1] - w[0]).max().unwrap_or(0);
    let timed = |pick: fn(&Seen) -> &Vec<(u64, String)>| -> Vec<String> {
        let mut all: Vec<&(u64, String)> = seen.iter().flat_map(|s| pick(s).iter()).collect();
        all.sort();
        all.into_iter().map(|(at, e)| format!("{:+} ms {e}", since(*at))).collect()
    };
    let counter: u64 =
        redis::cmd("GET").arg(&counter).query::<Option<u64>>(&mut record.conn()).expect("GET").unwrap_or(0);
    Window {
        scenario: format!("{topology}, {fault}"),
        fault,
        failover: injected.failover,
        longest: Duration::from_nanos(longest),
        began_ms: since(began),
        ending_call: Duration::from_nanos(ending_call),
        whole_ms: since(whole),
        before: Duration::from_nanos(before),
        sections: grants.len() as u64,
        counter,
        after_whole: grants.iter().filter(|&&g| g > whole).count(),
        retries: clients.iter().map(|c| c.stats().retries).sum(),
        errors: timed(|s| &s.errors),
        unlocks_given_up: timed(|s| &s.unlocks_given_up),
    }
}

/// CLOCK_MONOTONIC at `instant` (the standard library's `Instant` reads the same clock).
fn monotonic_at(instant: Instant) -> u64 {
    monotonic_ns().saturating_sub(instant.elapsed().as_nanos() as u64)
}

/// Runs `faults` one after the other on a Sentinel group with `replicas` replicas, its
/// data nodes started with `server_args`, each fault leaving the group whole again (its
/// scenario ends once the master has all its replicas online again; before a failover, the
/// sentinels are waited for).
fn sentinel_windows(replicas: usize, server_args: &[&str], faults: &[Fault]) -> Vec<Window> {
    let mut group = SentinelGroup::start_with(replicas, server_args);
    let record = RedisServer::start();
    let url = group.url();
    let mut topology = format!("Sentinel, {replicas} replica(s)");
    if !server_args.is_empty() {
        topology.push_str(&format!(" ({})", server_args.join(" ")));
    }
    let mut windows = Vec::new();
    for (i, &fault) in faults.iter().enumerate() {
        if matches!(fault, Fault::Graceful | Fault::MasterKill) {
            // The sentinels have a replica to promote.
            group.wait_ready_replicas(replicas, SETTLE);
        }
        let name = format!("windows:{i}");
        windows.push(measure(&topology, fault, &url, &name, &record, || match fault {
            Fault::ReplicaKill | Fault::ReplicaRestart => {
                let port = group.replica_ports()[0];
                let at = monotonic_ns();
                group.server(port).kill();
                if fault == Fault::ReplicaKill {
                    thread::sleep(DOWN);
                }
                group.start_replica_again(port);
                group.wait_replicas_online(replicas, SETTLE);
                Injected { at, failover: Failover::default() }
            }
            Fault::Graceful => {
                let (old, candidates) = (group.master_port(), group.replica_ports());
                let at = monotonic_at(group.request_failover(SETTLE));
                let watched = watch_failover(candidates, old, at);
                group.wait_for_new_master(old, SETTLE);
                group.wait_replicas_online(replicas, SETTLE);
                Injected { at, failover: watched.join().expect("watcher") }
            }
            Fault::MasterKill => {
                let (old, candidates) = (group.master_port(), group.replica_ports());
                let at = monotonic_ns();
                let watched = watch_failover(candidates, old, at);
                group.kill_master_and_rejoin();
                group.wait_replicas_online(replicas, SETTLE);
                Injected { at, failover: watched.join().expect("watcher") }
            }
        }));
    }
    windows
}

/// Runs `faults` one after the other at the master of one lock's slot in a cluster (three
/// masters, a replica each), each leaving the cluster whole again.
fn cluster_windows(faults: &[Fault]) -> Vec<Window> {
    let mut group = ClusterGroup::start();
    let record = RedisServer::start();
    let slot = group.slot_of("{windows}");
    let mut windows = Vec::new();
    for (i, &fault) in faults.iter().enumerate() {
        let (url, name) = (group.url(), format!("{{windows}}:{i}"));
        windows.push(measure("Cluster, 1 replica", fault, &url, &name, &record, || {
            let old = group.master_of(slot).port();
            let replica = group.replica_of(old).port();
            let at = monotonic_ns();
            match fault {
                Fault::ReplicaKill | Fault::ReplicaRestart => {
                    group.server(replica).kill();
                    if fault == Fault::ReplicaKill {
                        thread::sleep(DOWN);
                    }
                    group.server(replica).start_again();
                    group.wait_healthy(SETTLE);
                    Injected { at, failover: Failover::default() }
                }
                Fault::Graceful | Fault::MasterKill => {
                    let watched = watch_failover(vec![replica], old, at);
                    if fault == Fault::Graceful {
                        group.failover(slot);
                    } else {
                        group.kill_master_of(slot);
                    }
                    Injected { at, failover: watched.join().expect("watcher") }
                }
            }
        }));
    }
    windows
}

/// Prints each window's line, and fails on what is wrong beyond the figures
/// ([`Window::problems`]) and on the `bounds` broken.
fn report(windows: &[Window], bounds: impl Fn(&Window) -> Option<String>) {
    for window in windows {
        println!("{}", window.line());
    }
    let problems: Vec<String> = windows.iter().flat_map(|w| w.problems().into_iter().chain(bounds(w))).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

const EVERY_FAULT: &[Fault] = &[Fault::ReplicaKill, Fault::ReplicaRestart, Fault::Graceful, Fault::MasterKill];
const FAILOVERS: &[Fault] = &[Fault::Graceful, Fault::MasterKill];

/// One replica under Sentinel, Redis's defaults: each fault, and how long it keeps the lock
/// from everyone. A replica SIGKILLed costs the first grant after it its `WAIT` (1 s, sent
/// with the reading that shows the loss; then the client finds the replica's server gone,
/// and the master grants alone), or two when that grant's reading came before the master
/// saw the replica go; a replica started again loads what it kept of its last sync and
/// resyncs from the master's backlog, which costs next to nothing. A failover leaves the
/// new master alone: it grants once the old master follows it and has synced (the
/// sentinels demote a reachable old master about 11 s on; a killed one is started again by
/// the test as soon as the sentinels name the new master), a full resync that waits
/// `repl-diskless-sync-delay` (5 s) to start.
///
/// Breaks if a caller waiting 30 s sees an error, if two sections overlap (the counter
/// loses an increment), if grants do not come back within a few seconds of the master
/// having its replica online again, or if losing the replica costs more than two `WAIT`s.
#[test]
fn with_one_replica_under_sentinel_a_window_ends_once_the_master_has_a_replica_again() {
    let _one_at_a_time = one_failover_test_at_a_time();
    let windows = sentinel_windows(1, &[], EVERY_FAULT);
    report(&windows, |w| match w.fault {
        Fault::ReplicaKill | Fault::ReplicaRestart => w.longer_than(SYNC_TIMEOUT * 2 + SLACK, "two WAITs"),
        Fault::Graceful | Fault::MasterKill => None,
    });
}

/// Two replicas under Sentinel, Redis's defaults: a grant waits for both. Losing one
/// replica, for seconds or for a restart, costs the grant in flight its `WAIT` (it waits for
/// the two it was sent for; then a reading shows the replica went, the client finds its
/// server gone, and the other confirms): one `WAIT` at most. A SIGKILLed master costs its
/// promotion and the other replica's partial resync with the new master. A graceful
/// failover costs its promotion and the other replica's *full* resync: the old master kept
/// taking writes after its replica was promoted (Sentinel does not pause it), so the other
/// replica has data the new master lacks, and must start over, after
/// `repl-diskless-sync-delay` (5 s).
///
/// Breaks if a caller waiting 30 s sees an error, if two sections overlap, if losing one of
/// two replicas keeps the lock from everyone for more than one `WAIT` (before a grant that
/// had waited for both looked at the replicas again, two), or if a failover costs more than
/// its promotion, 2 s (and the sync delay, where a full resync waits for it) and slack.
#[test]
fn with_two_replicas_under_sentinel_a_lost_replica_costs_a_wait_and_a_failover_its_promotion_and_a_resync() {
    let _one_at_a_time = one_failover_test_at_a_time();
    let windows = sentinel_windows(2, &[], EVERY_FAULT);
    report(&windows, |w| match w.fault {
        Fault::ReplicaKill | Fault::ReplicaRestart => {
            w.longer_than(SYNC_TIMEOUT + Duration::from_millis(600), "one WAIT and 0.6 s")
        }
        Fault::Graceful => {
            w.longer_than(w.promotion() + Duration::from_secs(2) + SYNC_DELAY + SLACK, "promotion + 2 s + sync delay")
        }
        Fault::MasterKill => w.longer_than(w.promotion() + Duration::from_secs(2) + SLACK, "promotion + 2 s"),
    });
}

/// The failovers of one replica under Sentinel again, with `repl-diskless-sync-delay 0` (a
/// full resync starts at once): a graceful failover still waits for the sentinels to
/// demote the old master, and a killed master for the operator to start it again, then
/// each for the old master's resync.
///
/// Breaks if a caller waiting 30 s sees an error, if two sections overlap, or if grants do
/// not come back within a few seconds of the master having its replica online again.
#[test]
fn without_a_sync_delay_a_failover_with_one_replica_costs_the_old_master_coming_back() {
    let _one_at_a_time = one_failover_test_at_a_time();
    let windows = sentinel_windows(1, NO_SYNC_DELAY, FAILOVERS);
    report(&windows, |_| None);
}

/// The failovers of two replicas under Sentinel again, with `repl-diskless-sync-delay 0`:
/// the other replica's resync with the new master starts at once, and neither failover
/// keeps the lock from everyone longer than its promotion and 2 s.
///
/// Breaks if a caller waiting 30 s sees an error, if two sections overlap, or if a failover
/// costs more than its promotion, 2 s and slack.
#[test]
fn without_a_sync_delay_a_failover_with_two_replicas_costs_its_promotion_and_2_s_at_most() {
    let _one_at_a_time = one_failover_test_at_a_time();
    let windows = sentinel_windows(2, NO_SYNC_DELAY, FAILOVERS);
    report(&windows, |w| w.longer_than(w.promotion() + Duration::from_secs(2) + SLACK, "promotion + 2 s"));
}

/// A cluster of three masters with a replica each (`repl-diskless-sync-delay 0`, node
/// timeout 1 s), each fault at the master of the lock's slot: its replica SIGKILLed costs
/// one `WAIT` or two, as with Sentinel; `CLUSTER FAILOVER` (the replica catches up with a
/// paused master, then takes over, and the old master follows it at once) costs next to
/// nothing; a SIGKILLed master costs the cluster's failover and the killed node's return
/// and resync as the new master's replica.
///
/// Breaks if a caller waiting 30 s sees an error, if two sections overlap, if losing the
/// replica costs more than two `WAIT`s, or if a failover costs more than its promotion, 2 s
/// and slack.
#[test]
fn in_a_cluster_a_lost_replica_costs_a_wait_and_a_failover_its_promotion_and_2_s_at_most() {
    let _one_at_a_time = one_failover_test_at_a_time();
    let windows = cluster_windows(&[Fault::ReplicaKill, Fault::Graceful, Fault::MasterKill]);
    report(&windows, |w| match w.fault {
        Fault::ReplicaKill | Fault::ReplicaRestart => w.longer_than(SYNC_TIMEOUT * 2 + SLACK, "two WAITs"),
        Fault::Graceful | Fault::MasterKill => {
            w.longer_than(w.promotion() + Duration::from_secs(2) + SLACK, "promotion + 2 s")
        }
    });
}
