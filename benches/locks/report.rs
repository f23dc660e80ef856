//! The report: the figures as Markdown, judged against the targets, and the rewriter of the
//! results block of docs/performance.md.

use std::fmt::Write as _;
use std::time::Duration;

use crate::experiments::LockKind;
use crate::experiments::contenders::{Peer, SPIN_FIRST_SLEEP, SPIN_MAX_SLEEP, Spin, Subject};
use crate::experiments::durable::{Durable, durable_section};
use crate::experiments::election::Elections;
use crate::experiments::group::GroupLocks;
use crate::experiments::handoff::{HANDOFF_BLOCKS, Handoffs};
use crate::experiments::herd::{HERD_PROCESSES, HERD_WORK, HerdRun};
use crate::experiments::limit::{Limit, PIPELINE};
use crate::experiments::peers::{CROWD, LIBRARY_FIXED_LEASE, Peers};
use crate::experiments::redlock::{RED_NODE_TIMEOUT, RedlockRun};
use crate::experiments::renewal::{RENEW_BATCH, RENEWAL_WATCHDOG, Renewal};
use crate::experiments::replicated::{Layout, PairKind, ReplicatedRenewal, ReplicatedRun, Shape};
use crate::experiments::semaphores::Semaphores;
use crate::experiments::throughput::{PROCESSES, THREADS_PER_PROCESS, Throughput};
use crate::experiments::tls::TlsRun;
use crate::experiments::uncontended::Uncontended;
use crate::experiments::writer::{
    READER_HOLD, READER_STAGGER, STARVED_WAIT, WRITER_DELAY, WRITER_READERS, WRITER_WAIT, WriterRound,
    WriterUnderReaders,
};
use crate::machine::Machine;
use crate::meter::OtherWork;
use crate::stats::{PAIR_BLOCKS, PairStats, Summary};

// Targets: the project's performance targets, as docs/performance.md states them. The pair
// target applies to every lock kind's uncontended pair (each is one acquire and one release
// round trip), the hand-off targets to the plain and the fair lock alike.
const TARGET_PAIR_RATIO: f64 = 1.15;
const TARGET_HANDOFF_P50_RATIO: f64 = 4.0;
const TARGET_HANDOFF_P99_RATIO: f64 = 20.0;
const TARGET_RENEWAL_FRACTION: f64 = 0.5;
/// Scripts per acquisition on one contended lock, whatever the number of processes.
const TARGET_HERD_SCRIPTS: f64 = 3.0;
/// Plain throughput with 16 processes as a share of that with 2.
const TARGET_HERD_KEPT: f64 = 0.9;

pub(crate) struct Results {
    pub(crate) machine: Machine,
    pub(crate) placement: String,
    /// Per step: the share of one CPU that processes other than the benchmark's used.
    pub(crate) other_work: Vec<OtherWork>,
    pub(crate) limit: Limit,
    pub(crate) uncontended: Uncontended,
    pub(crate) handoff: Handoffs,
    pub(crate) throughput: [Throughput; 4],
    pub(crate) renewal: Renewal,
    pub(crate) writer: WriterUnderReaders,
    pub(crate) redlock: Vec<RedlockRun>,
    pub(crate) tls: TlsRun,
    pub(crate) semaphores: Semaphores,
    pub(crate) peers: Peers,
    pub(crate) herd: Vec<HerdRun>,
    pub(crate) cluster: ReplicatedRun,
    pub(crate) sentinel: ReplicatedRun,
    pub(crate) group_locks: GroupLocks,
    pub(crate) elections: Elections,
    pub(crate) durable: Option<Durable>,
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "missed" }
}

impl Results {
    /// The figures as Markdown: printed, and optionally written into docs/performance.md.
    pub(crate) fn report(&self) -> String {
        let mut out = String::new();
        self.report_machine(&mut out);
        self.report_limit(&mut out);
        self.report_uncontended(&mut out);
        self.report_handoff(&mut out);
        self.report_throughput(&mut out);
        self.report_renewal(&mut out);
        self.report_writer(&mut out);
        self.report_redlock(&mut out);
        self.report_tls(&mut out);
        self.report_semaphores(&mut out);
        self.report_peers(&mut out);
        self.report_herd(&mut out);
        self.report_cluster(&mut out);
        self.report_group(&mut out);
        self.report_elections(&mut out);
        self.report_sentinel(&mut out);
        durable_section(&mut out, self.durable.as_ref());
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

    fn report_tls(&self, out: &mut String) {
        let t = &self.tls;
        let _ = writeln!(
            out,
            "### 7. TLS: one `redis-server` with a plain and a TLS port (rustls client, ECDSA P-256 certificate), interleaved blocks\n"
        );
        let _ =
            writeln!(out, "| pair | n | mean µs | p50 µs | p99 µs | mean / plain limit pair | mean / TLS limit pair |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
        let plain = t.plain_limit.pair.mean;
        let tls = t.tls_limit.pair.mean;
        for (what, stats) in [
            ("two trivial `EVALSHA`s, plain (the plain limit pair)", &t.plain_limit),
            ("two trivial `EVALSHA`s over TLS (the TLS limit pair)", &t.tls_limit),
            ("**`try_lock()` + `unlock()` over TLS**", &t.tls_pair),
        ] {
            let s = &stats.pair;
            let _ = writeln!(
                out,
                "| {what} | {} | {:.1} | {:.1} | {:.1} | {:.3} | {:.3} |",
                s.n,
                s.mean,
                s.p50,
                s.p99,
                s.mean / plain,
                s.mean / tls
            );
        }
        let _ = writeln!(out);
    }

    fn report_semaphores(&self, out: &mut String) {
        let (m, rtt) = (&self.semaphores, self.limit.rtt.mean);
        let limit_pair = m.trivial.pair.mean;
        let _ = writeln!(
            out,
            "### 8. Semaphores: uncontended `try_acquire(1)` + `release()` of one permit ({PAIR_BLOCKS} blocks per \
             kind, interleaved)\n"
        );
        let _ = writeln!(
            out,
            "Each is one acquire and one release script, as a lock's pair; the locks' target (≤ {TARGET_PAIR_RATIO} \
             × the limit pair) is not set for semaphores and is shown for comparison only.\n"
        );
        let _ = writeln!(
            out,
            "| pair | n | mean µs | p50 µs | p99 µs | acquire mean µs | release mean µs | server µs/`EVALSHA` | mean / (2 × RTT) | mean / limit pair |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (what, x) in [
            ("two trivial `EVALSHA`s (the limit pair)", &m.trivial),
            ("plain lock `try_lock()` + `unlock()`, watchdog lease", &m.lock),
            ("**`Semaphore` `try_acquire(1)` + `release()`**", &m.semaphore),
            ("**`PermitExpirableSemaphore` `try_acquire(1)` + `release()`, watchdog lease**", &m.permits),
        ] {
            pair_row(out, what, x, rtt, limit_pair, format!("{:.2}", x.server_usec));
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Hand-off of one permit to a waiter parked in another process (subscribed to the semaphore's channel), \
             alternating with the plain lock's ({HANDOFF_BLOCKS} blocks each); the semaphores hold 1 permit:\n"
        );
        let _ = writeln!(out, "| hand-off | n | p50 µs | p90 µs | p99 µs | max µs | p50 / RTT | p99 / RTT |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
        handoff_row(out, "plain lock", &m.handoff_lock, rtt, Some("lock target"));
        handoff_row(out, "**`Semaphore`, 1 permit**", &m.handoff_semaphore, rtt, Some("lock target"));
        handoff_row(out, "**`PermitExpirableSemaphore`, 1 permit**", &m.handoff_permits, rtt, Some("lock target"));
        let _ = writeln!(out);

        let r = &m.renewal;
        let passes = r.passes.max(1) as f64;
        let per_pass = r.renewed as f64 / passes;
        let ideal_per_pass = (per_pass / RENEW_BATCH as f64).ceil();
        let floor = r.renewed.div_ceil(RENEW_BATCH);
        let fraction = r.per_sec() / self.limit.pipelined_per_sec;
        let fraction_again = r.per_sec() / r.pipelined_before;
        let _ = writeln!(
            out,
            "Renewal: {} permits of one `PermitExpirableSemaphore` (`try_set_permits({})`), one guard each, held by \
             one thread (watchdog {} s, renewal every {} s); the renewal target of the locks is renewals/s ≥ \
             {TARGET_RENEWAL_FRACTION} × pipelined limit:\n",
            r.permits,
            r.permits,
            RENEWAL_WATCHDOG.as_secs(),
            RENEWAL_WATCHDOG.as_secs() / 3
        );
        let _ = writeln!(out, "| figure | value |");
        let _ = writeln!(out, "|---|---:|");
        let mut row = |what: &str, value: String| {
            let _ = writeln!(out, "| {what} | {value} |");
        };
        row("keys in the database before", r.keys_before.to_string());
        row(
            "acquiring them, one `try_acquire(1)` each",
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
        row("permits renewed in the window", r.renewed.to_string());
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
                "{:.3} s ({:.3} s): {:.2} µs per permit ({:.2} µs)",
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
                 measured again just before the permits were taken ({:.0} calls/s, {}); {:.3} × the lock renewal of \
                 step 4",
                r.per_sec(),
                verdict(fraction >= TARGET_RENEWAL_FRACTION),
                r.pipelined_before,
                verdict(fraction_again >= TARGET_RENEWAL_FRACTION),
                r.per_sec() / self.renewal.per_sec()
            ),
        );
        row(
            "renewals scheduled at the end of the window (the permits of a pass under way are out of the schedule)",
            format!("{} of {}", r.scheduled, r.permits),
        );
        row("guards `is_held()` after the window", format!("{} of {}", r.held, r.permits));
        row(
            "permits with a deadline ahead after the window (sorted set)",
            format!("{} of {} (nearest {} ms ahead of 3000)", r.alive, r.permits, r.min_remaining_ms),
        );
        row("leases lost / renewals failed (event hook)", format!("{} / {}", r.lost_events, r.failed_renewals));
        row(
            "`release()` of every guard, one by one (the watchdog still renewing the rest)",
            format!(
                "{:.2} s, {} of {} `Ok`; each: mean {:.0} µs, p50 {:.0}, p90 {:.0}, p99 {:.0}, max {:.0}; {} took \
                 over 10 ms",
                r.release_time.as_secs_f64(),
                r.released_ok,
                r.permits,
                r.release_each.mean,
                r.release_each.p50,
                r.release_each.p90,
                r.release_each.p99,
                r.release_each.max,
                r.release_over_10ms
            ),
        );
        row(
            "after the releases",
            format!("`available_permits()` {}, {} permits left in the sorted set", r.available_after, r.left_in_set),
        );
        let _ = writeln!(out);
    }

    fn report_peers(&self, out: &mut String) {
        let (p, rtt) = (&self.peers, self.limit.rtt.mean);
        let (rlock, redis_lock) = (locked_version("rlock"), locked_version("redis-lock"));
        let _ = writeln!(
            out,
            "### 9. Peers on the same server in the same run: `rlock` {rlock} and `redis-lock` {redis_lock}, sync \
             APIs, default options\n"
        );
        let _ = writeln!(
            out,
            "- **redlease**: reentrant; watchdog lease (30 s, renewed every 10 s, batched by one thread per client); a \
             waiter parks on pub/sub and the release wakes it; Redisson's layout. Its **spin lock** (Redisson's \
             `RSpinLock`) is the same lock without pub/sub: the same scripts, a release that publishes nothing, a \
             waiter that polls, sleeping {} ms, doubling (plus a jitter of at most a millisecond per attempt so \
             far) up to {} ms by default, or a constant sleep (`BackOff::constant`).\n\
             - **rlock {rlock}**: not reentrant; acquire is `SET NX PX`, release a script; 10 s TTL renewed every 5 s \
             by a thread spawned per guard (`RenewalMode::Disabled`: no thread, the TTL runs out); a waiter polls \
             every {} ms, nothing wakes it.\n\
             - **redis-lock {redis_lock}**: locks sets of resources (Redis functions, Redis ≥ 7); not reentrant; no \
             renewal: a fixed expiration (default 1 h, sent in ms to a `SET … EX` that takes seconds, so it lasts \
             1000 × longer); a waiter polls every {} ms (for up to 60 s); the release `SCAN`s every key of the \
             database for its own.\n",
            SPIN_FIRST_SLEEP.as_millis(),
            SPIN_MAX_SLEEP.as_millis(),
            Peer::Rlock.poll_interval().as_millis(),
            Peer::RedisLock.poll_interval().as_millis()
        );
        let _ = writeln!(
            out,
            "Uncontended acquire + release, one thread, {PAIR_BLOCKS} blocks per kind, interleaved; {} keys in the \
             database. Redis calls and µs per pair are those of the commands each client sends (`EVALSHA`; rlock \
             `SET` + `EVALSHA`; redis-lock `FCALL`), their scripts' commands included.\n",
            p.keys
        );
        let _ = writeln!(
            out,
            "| pair | n | mean µs | p50 µs | p99 µs | acquire mean µs | release mean µs | Redis calls, µs per pair | mean / (2 × RTT) | mean / limit pair |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        let server = |x: &PairStats| format!("{:.2}, {:.1}", x.server_calls_per_pair, x.server_usec_per_pair);
        let limit_pair = p.trivial.pair.mean;
        let fixed = format!("redlease `try_lock()` + `unlock()`, `with_lease({} s)`", LIBRARY_FIXED_LEASE.as_secs());
        for (what, x) in [
            ("two trivial `EVALSHA`s (the limit pair)", &p.trivial),
            ("**redlease `try_lock()` + `unlock()`, watchdog lease**", &p.watchdog),
            (fixed.as_str(), &p.fixed),
            ("**redlease spin lock `try_lock()` + `unlock()`, watchdog lease** (no publish)", &p.spin),
            ("**rlock `try_acquire_mutex()` + `release()`, default options**", &p.rlock),
            ("rlock, `RenewalMode::Disabled`", &p.rlock_no_renewal),
            ("**redis-lock `try_acquire()` + `release()`**", &p.redis_lock),
        ] {
            pair_row(out, what, x, rtt, limit_pair, server(x));
        }
        let crowded_limit = p.crowded_trivial.pair.mean;
        let crowd = format!("the limit pair, {CROWD} more keys in the database");
        let crowded = format!("redis-lock, {CROWD} more keys in the database (ratio to the line above)");
        pair_row(out, &crowd, &p.crowded_trivial, rtt, crowded_limit, server(&p.crowded_trivial));
        pair_row(out, &crowded, &p.crowded_redis_lock, rtt, crowded_limit, server(&p.crowded_redis_lock));
        let fastest =
            [("rlock", &p.rlock), ("rlock without renewal", &p.rlock_no_renewal), ("redis-lock", &p.redis_lock)]
                .into_iter()
                .min_by(|a, b| a.1.pair.mean.total_cmp(&b.1.pair.mean))
                .expect("peers measured");
        let _ = writeln!(
            out,
            "\nFastest peer pair: {} at {:.1} µs = {:.3} × the limit pair; redlease {:.1} µs = {:.3} × (watchdog \
             lease), {:.1} µs = {:.3} × (fixed lease).\n",
            fastest.0,
            fastest.1.pair.mean,
            fastest.1.pair.mean / limit_pair,
            p.watchdog.pair.mean,
            p.watchdog.pair.mean / limit_pair,
            p.fixed.pair.mean,
            p.fixed.pair.mean / limit_pair
        );
        let _ = writeln!(
            out,
            "Hand-off to a waiter in another process, alternating ({HANDOFF_BLOCKS} blocks each). A polling waiter \
             cannot be seen waiting: the release comes at a random moment of its poll interval, as it would in use; \
             for the spin lock's default back-off, whose sleeps grow, at a random moment of the first {} ms of its \
             wait (its sleeps up to the longest, {} ms, and one longest sleep, jitter aside).\n",
            Spin::Exponential.release_window().as_millis(),
            SPIN_MAX_SLEEP.as_millis()
        );
        let _ = writeln!(out, "| hand-off | n | p50 µs | p90 µs | p99 µs | max µs | p50 / RTT | p99 / RTT |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
        for (subject, h) in &p.handoffs {
            let what = match subject {
                Subject::Lock(LockKind::Plain) => "redlease plain lock (pub/sub wake-up)".to_string(),
                Subject::Spin(Spin::Exponential) => format!(
                    "**redlease spin lock, default back-off** (polls after {}, {}, {}, … {} ms)",
                    SPIN_FIRST_SLEEP.as_millis(),
                    SPIN_FIRST_SLEEP.as_millis() * 2,
                    SPIN_FIRST_SLEEP.as_millis() * 4,
                    SPIN_MAX_SLEEP.as_millis()
                ),
                Subject::Spin(Spin::Constant1Ms) => format!(
                    "**redlease spin lock, `BackOff::constant({} ms)`** (polls every {} ms)",
                    Spin::Constant1Ms.release_window().as_millis(),
                    Spin::Constant1Ms.release_window().as_millis()
                ),
                Subject::Peer(peer) => {
                    format!("{} (polls every {} ms)", subject.as_str(), peer.poll_interval().as_millis())
                }
                other => unreachable!("{other:?} among the peers' hand-offs"),
            };
            handoff_row(out, &what, h, rtt, None);
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Throughput on one lock, {PROCESSES} processes × {THREADS_PER_PROCESS} threads, acquire + release in a \
             loop; the redlease row is step 3's. Redis calls per acquisition: for a peer, every command its clients \
             sent (failed polls included).\n"
        );
        let _ = writeln!(
            out,
            "| lock | acquisitions | per process | acquisitions/s | µs per acquisition | Redis calls per acquisition | Redis running them, µs per acquisition (share of the window) | to the other process | to another thread |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        throughput_row(out, "redlease plain, one shared lock (step 3)", &self.throughput[0], rtt);
        for t in &p.throughput {
            throughput_row(out, &format!("{}, one shared lock", t.subject.as_str()), t, rtt);
        }
        let _ = writeln!(out);
    }

    fn report_herd(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "### 10. The herd: N processes of one thread each loop `lock()` + {} µs of work + release on one lock \
             for {:.0} s (N = {}); Redis's `INFO commandstats` over the window\n",
            HERD_WORK.as_micros(),
            self.herd.first().map_or(0.0, |r| r.window.as_secs_f64()),
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
        for r in &self.herd {
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
        let of = |kind: LockKind, n: usize| self.herd.iter().find(|r| r.kind == kind && r.processes == n);
        let _ = writeln!(out, "| figure | value | target |");
        let _ = writeln!(out, "|---|---:|---|");
        for kind in [LockKind::Plain, LockKind::Fair] {
            let most = self.herd.iter().filter(|r| r.kind == kind).map(|r| r.scripts).fold(0.0, f64::max);
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

    fn report_cluster(&self, out: &mut String) {
        replicated_section(out, &self.cluster, Some(self.renewal.per_sec()));
    }

    fn report_sentinel(&self, out: &mut String) {
        replicated_section(out, &self.sentinel, Some(self.renewal.per_sec()));
    }
}

/// Step 11's section (Redis Cluster) or step 14's (Sentinel); `one_server`: step 4's
/// renewals per second, when it ran.
pub(crate) fn replicated_section(out: &mut String, c: &ReplicatedRun, one_server: Option<f64>) {
    {
        let owner = master_letter(c.owner);
        let rtt = c.masters[c.owner].rtt.mean;
        let client = c.shape.client();
        match c.shape {
            Shape::Cluster => {
                let _ = writeln!(
                    out,
                    "### 11. Redis Cluster: {} masters with a replica each (the test kit's `ClusterGroup`), all {} \
                     servers pinned with the first one; cluster clients on `redis-cluster://` with the masters as \
                     seeds\n",
                    c.masters.len(),
                    c.masters.len() * 2
                );
            }
            Shape::Sentinel => {
                let _ = writeln!(
                    out,
                    "### 14. Sentinel: a master with one replica and three sentinels (the test kit's \
                     `SentinelGroup`), all five pinned with the first server; Sentinel clients on \
                     `redis-sentinel://` with the three sentinels\n"
                );
            }
        }
        let _ = writeln!(out, "| master | slots | RTT mean µs | p50 µs | p99 µs |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|");
        for (i, m) in c.masters.iter().enumerate() {
            let what = if i == c.owner && c.masters.len() > 1 {
                format!("{} (serves the locks of the pairs and hand-offs)", master_letter(i))
            } else {
                master_letter(i).to_string()
            };
            let _ = writeln!(out, "| {what} | {} | {:.1} | {:.1} | {:.1} |", m.slots, m.rtt.mean, m.rtt.p50, m.rtt.p99);
        }
        let _ = writeln!(out);
        let on = match c.shape {
            Shape::Cluster => format!("on one lock whose slot master {owner} serves"),
            Shape::Sentinel => format!("on one lock of master {owner}"),
        };
        let every_master = match c.shape {
            Shape::Cluster => "Every master's",
            Shape::Sentinel => "The master's",
        };
        let _ = writeln!(
            out,
            "Uncontended acquire + release, one thread, {PAIR_BLOCKS} blocks per kind, interleaved, {on}. The limit \
             pair is two trivial `EVALSHA`s with the lock's name as `KEYS[1]` on a plain connection to {owner}. \
             {every_master} `INFO commandstats` is reset before each block and read after it: the commands clients \
             sent it, those its scripts ran, and its replica's `REPLCONF` (acknowledgements); the CPU time of \
             {owner} and of its replica is read from `/proc` around each block (ticks of 10 ms). RTT: {owner}'s. \
             Target ≤ {TARGET_PAIR_RATIO}.\n"
        );
        let _ = writeln!(
            out,
            "| pair | n | mean µs | p50 µs | p99 µs | acquire mean µs | release mean µs | sent to {owner}, per pair | \
             run by {owner}'s scripts, per pair | {owner}'s replica's `REPLCONF`, per pair | other masters: commands \
             in all (their replicas' `REPLCONF`) | server µs/`EVALSHA` on {owner} | CPU µs per pair: {owner} / its \
             replica | mean / (2 × RTT) | mean / limit pair | target |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---|");
        let limit_pair = c.pairs.iter().find(|p| p.kind == PairKind::Limit).map_or(f64::NAN, |p| p.stats.pair.mean);
        for p in &c.pairs {
            let what: String = match p.kind {
                PairKind::Limit => format!("two trivial keyed `EVALSHA`s straight to {owner} (the limit pair)"),
                PairKind::Raw => format!("the two scripts sent raw to {owner}"),
                PairKind::NoSync => format!("**{client} `try_lock()` + `unlock()`, `sync_replicas(false)`**"),
                PairKind::Default => {
                    format!("**{client} `try_lock()` + `unlock()`, default (each grant waits for a replica)**")
                }
            };
            let judged = !matches!(p.kind, PairKind::Limit | PairKind::Raw);
            let x = &p.stats;
            let own = &p.served[c.owner];
            let sent: Vec<String> = own.sent.iter().map(|(name, n)| format!("{name} {}", per_pair(*n))).collect();
            let mut others: Vec<String> = p
                .served
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != c.owner)
                .map(|(i, s)| format!("{}: {} ({})", master_letter(i), s.calls, s.replication_calls))
                .collect();
            if others.is_empty() {
                others.push("none".into());
            }
            let (to_rtt, to_pair, target) = pair_ratios(x, rtt, limit_pair, judged);
            let _ = writeln!(
                out,
                "| {what} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} ({}) | {} | {} | {} | {:.2} | {:.0} / {:.0} \
                 | {to_rtt:.3} | {to_pair:.3} | {target} |",
                x.pair.n,
                x.pair.mean,
                x.pair.p50,
                x.pair.p99,
                x.acquire.mean,
                x.release.mean,
                per_pair(own.sent_total()),
                sent.join(", "),
                per_pair(own.in_scripts),
                per_pair(own.replication),
                others.join("; "),
                x.server_usec,
                p.cpu_owner_us,
                p.cpu_replica_us
            );
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Hand-off to a waiter parked in another process (a {client} of its own, subscribed to the lock's \
             channel on {owner}), holder and waiter with the same replica setting, alternating ({HANDOFF_BLOCKS} \
             blocks each); RTT: {owner}'s, {rtt:.1} µs:\n"
        );
        let _ = writeln!(out, "| hand-off | n | p50 µs | p90 µs | p99 µs | max µs | p50 / RTT | p99 / RTT |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
        for (sync, h) in &c.handoffs {
            let what = if *sync {
                format!("**{client}, default (the waiter's grant waits for a replica)**")
            } else {
                format!("**{client}, `sync_replicas(false)`**")
            };
            handoff_row(out, &what, h, rtt, Some("target"));
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Renewal: watchdog leases {}, held by one thread of one {client} (watchdog {} s, renewal every {} s, \
             `sync_replicas(false)`: renewals never wait for replicas); target: renewals/s ≥ \
             {TARGET_RENEWAL_FRACTION} × the pipelined limit. {} `INFO commandstats` over the window: the renew \
             scripts it ran (one per round trip) and the leases they looked at (`HEXISTS`) and renewed \
             (`PEXPIRE`).{}\n",
            match c.shape {
                Shape::Cluster => format!("spread over the {} masters", c.masters.len()),
                Shape::Sentinel => "on the master".to_owned(),
            },
            RENEWAL_WATCHDOG.as_secs(),
            RENEWAL_WATCHDOG.as_secs() / 3,
            match c.shape {
                Shape::Cluster => "Per master, from its",
                Shape::Sentinel => "From the master's",
            },
            match c.shape {
                Shape::Cluster => {
                    " The watchdog is one thread that writes every master's batch before it reads a reply, and \
                     here the masters share one vCPU: so the limit it is set against is the masters' pipelined \
                     limits in series (the time the limit takes for the same number of calls on each master, one \
                     master after the other: the renewed leases over the sum of renewed on a master / its limit), \
                     not their sum, which only masters on separate hosts renewing in parallel could approach \
                     (shown too)."
                }
                Shape::Sentinel => " Its replica applies every renewal too, on the same vCPU.",
            }
        );
        for r in &c.renewals {
            renewal_section(out, r, one_server);
        }
    }
}

fn renewal_section(out: &mut String, r: &ReplicatedRenewal, one_server: Option<f64>) {
    {
        let passes = r.passes.max(1) as f64;
        let layout = match r.layout {
            Layout::Spread => {
                "names `bench:<cluster or sentinel>:lease:<i>` (spread over the slots on a cluster, as names without \
                 a hash tag are)"
            }
            Layout::OneSlotPerMaster => {
                "names `{<tag>}:lease:<i>` with one hash tag per master, so that each master's leases share one slot"
            }
        };
        let _ = writeln!(out, "Renewal of {} leases, {layout}:\n", r.leases);
        let _ = writeln!(
            out,
            "| master | leases on it (keys before) | renew round trips | leases looked at / renewed | round trips per \
             pass / ceil(renewed per pass / {RENEW_BATCH}) | round trips vs the least possible (ceil(renewed / \
             {RENEW_BATCH}) … that + passes) | Redis running the scripts: s (µs per lease) | pipelined limit: calls/s \
             (µs per call) | keys with TTL > 0 after the window (smallest TTL) | lease keys left after the drop |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (i, n) in r.nodes.iter().enumerate() {
            let floor = n.renewed.div_ceil(RENEW_BATCH);
            let ideal_per_pass = (n.renewed as f64 / passes / RENEW_BATCH as f64).ceil();
            let _ = writeln!(
                out,
                "| {} | {} ({}) | {} | {} / {} | {:.2} / {ideal_per_pass:.0} | {} vs {floor} … {} | {:.3} ({:.2}) | \
                 {:.0} ({:.2}) | {} of {} ({} ms) | {} |",
                master_letter(i),
                n.leases,
                n.keys_before,
                n.round_trips,
                n.looked_at,
                n.renewed,
                n.round_trips as f64 / passes,
                n.round_trips,
                floor + r.passes,
                n.server_time.as_secs_f64(),
                n.server_time.as_secs_f64() * 1e6 / n.renewed.max(1) as f64,
                n.pipelined_per_sec,
                1e6 / n.pipelined_per_sec,
                n.keys_alive,
                n.leases,
                n.min_ttl_ms,
                n.keys_left
            );
        }
        let _ = writeln!(out);
        let renewed_at_masters: u64 = r.nodes.iter().map(|n| n.renewed).sum();
        let series_secs: f64 = r.nodes.iter().map(|n| n.renewed as f64 / n.pipelined_per_sec).sum();
        let series = renewed_at_masters as f64 / series_secs;
        let sum: f64 = r.nodes.iter().map(|n| n.pipelined_per_sec).sum();
        let server_secs: f64 = r.nodes.iter().map(|n| n.server_time.as_secs_f64()).sum();
        let _ = writeln!(out, "| figure | value |");
        let _ = writeln!(out, "|---|---:|");
        let mut row = |what: &str, value: String| {
            let _ = writeln!(out, "| {what} | {value} |");
        };
        row(
            "acquiring them, one `try_lock` each",
            format!(
                "{:.2} s; each: mean {:.0} µs, p50 {:.0}, p90 {:.0}, p99 {:.0}, max {:.0}",
                r.acquire_time.as_secs_f64(),
                r.acquire_each.mean,
                r.acquire_each.p50,
                r.acquire_each.p90,
                r.acquire_each.p99,
                r.acquire_each.max
            ),
        );
        row("window held", format!("{:.1} s", r.window.as_secs_f64()));
        row("renewal passes in the window", r.passes.to_string());
        row(
            "renew round trips in the window: the client's count / scripts the masters ran",
            format!("{} / {}", r.round_trips, r.nodes.iter().map(|n| n.round_trips).sum::<u64>()),
        );
        row(
            "leases renewed in the window: the client's count / `PEXPIRE`s at the masters",
            format!("{} / {renewed_at_masters}", r.renewed),
        );
        row(
            "time in renew round trips (of which Redis running the scripts)",
            if r.renewed == 0 {
                format!("{:.3} s ({server_secs:.3} s), none renewed", r.renew_time.as_secs_f64())
            } else {
                format!(
                    "{:.3} s ({server_secs:.3} s): {:.2} µs per lease ({:.2} µs)",
                    r.renew_time.as_secs_f64(),
                    r.renew_time.as_secs_f64() * 1e6 / r.renewed as f64,
                    server_secs * 1e6 / r.renewed as f64
                )
            },
        );
        let rate = if r.renewed == 0 || renewed_at_masters == 0 {
            "none renewed: 0 × the pipelined limit (missed)".to_string()
        } else {
            let (to_series, to_sum) = (r.per_sec() / series, r.per_sec() / sum);
            let to_one = one_server.map_or_else(
                || "step 4 not run".to_owned(),
                |one| format!("{:.3} × the one server's renewal of step 4", r.per_sec() / one),
            );
            format!(
                "{:.0} = {to_series:.3} × the masters' pipelined limits in series ({series:.0} calls/s; {}); \
                 {to_sum:.3} × their sum ({sum:.0} calls/s); {to_one}",
                r.per_sec(),
                verdict(to_series >= TARGET_RENEWAL_FRACTION),
            )
        };
        row("renewals/s (renewed / time in round trips)", rate);
        row("guards `is_held()` after the window", format!("{} of {}", r.held, r.leases));
        row("leases lost / renewals failed (event hook)", format!("{} / {}", r.lost_events, r.failed_renewals));
        if let Some(error) = &r.first_error {
            row("the first failed renewal's error (event hook)", format!("`{}`", error.replace('|', "\\|")));
        }
        row(
            "dropping all guards, one by one (the watchdog still renewing the rest)",
            format!(
                "{:.2} s; each: mean {:.0} µs, p50 {:.0}, p90 {:.0}, p99 {:.0}, max {:.0}; {} took over 10 ms; {} \
                 releases failed",
                r.drop_time.as_secs_f64(),
                r.drop_each.mean,
                r.drop_each.p50,
                r.drop_each.p90,
                r.drop_each.p99,
                r.drop_each.max,
                r.drop_over_10ms,
                r.failed_releases
            ),
        );
        let _ = writeln!(out);
    }
}

impl Results {
    fn report_group(&self, out: &mut String) {
        group_section(out, &self.group_locks);
    }

    fn report_elections(&self, out: &mut String) {
        let (e, rtt) = (&self.elections, self.limit.rtt.mean);
        let _ = writeln!(
            out,
            "### 13. Leader election: the leader (this process) resigns; a candidate parked in another process \
             leads, and an observer in a third process sees it\n"
        );
        let _ =
            writeln!(out, "| from the `resign()` to | n | p50 µs | p90 µs | p99 µs | max µs | p50 / RTT | p99 / RTT |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
        handoff_row(out, "the candidate's return from `campaign()`", &e.handover, rtt, Some("lock target"));
        handoff_row(out, "the observer's return from the wait that shows the new leader", &e.observed, rtt, None);
        let _ = writeln!(out);
    }

    fn report_limit(&self, out: &mut String) {
        limit_section(out, &self.limit);
    }

    fn report_uncontended(&self, out: &mut String) {
        uncontended_section(out, &self.limit, &self.uncontended);
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
            handoff_row(out, what, h, rtt, Some("target"));
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
                    "**the same, one node blackholed**, after the first such pair (the node counted as failed while \
                     that pair's undo waits on it)"
                        .to_string(),
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
                 threaded fan-out. Blackholed: the first pair after the node fell silent took {:.2} ms = {:.3} × \
                 the floor of {:.2} ms (the node timeout of {} ms and one fan-out round); the pairs after it, while \
                 that attempt's undo waits on the silent node (up to the command timeout), count it as failed at \
                 once: acquire mean {:.2} ms, release mean {:.1} µs, pair {:.2} ms.",
                r.nodes,
                r.threads_only.pair.mean,
                r.nodes,
                r.threads_only.pair.mean / r.red.pair.mean * 100.0,
                r.fan_out_threads.pair.mean - r.fan_out.pair.mean,
                r.red.pair.mean - r.fan_out_threads.pair.mean,
                r.first_silent.as_secs_f64() * 1e3,
                r.first_silent.as_secs_f64() * 1e6 / floor,
                floor / 1e3,
                RED_NODE_TIMEOUT.as_millis(),
                r.blackholed.acquire.mean / 1e3,
                r.blackholed.release.mean,
                r.blackholed.pair.mean / 1e3,
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

/// One row of a hand-off table, judged against the hand-off targets when `label` names
/// them.
/// Step 0's section.
pub(crate) fn limit_section(out: &mut String, l: &Limit) {
    let _ = writeln!(out, "### 0. Physical limit: `EVALSHA` of `return 1` on a plain `redis::Connection`\n");
    let _ =
        writeln!(out, "| calls | mean µs | p50 µs | p99 µs | server µs/call | pipelined, {PIPELINE} per pipeline |");
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        out,
        "| {} | **{:.1}** | {:.1} | {:.1} | {:.2} | **{:.0} calls/s** |\n",
        l.rtt.n, l.rtt.mean, l.rtt.p50, l.rtt.p99, l.server_usec, l.pipelined_per_sec
    );
    let _ = writeln!(out, "RTT in the ratios below is this mean, {:.1} µs.\n", l.rtt.mean);
}

/// Step 1's section, its ratios to `limit`.
pub(crate) fn uncontended_section(out: &mut String, limit: &Limit, u: &Uncontended) {
    let rtt = limit.rtt.mean;
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
    let redisson = u.redisson_scripts.as_ref().ok().map(|(stats, _)| stats);
    let rows = [
        ("two trivial `EVALSHA`s (the limit pair)", Some(&u.trivial), false),
        ("the two scripts sent raw", Some(&u.raw_scripts), false),
        ("Redisson's own two scripts for the same lock, sent raw", redisson, false),
        ("**`try_lock()` + `unlock()`, watchdog lease**", Some(&u.watchdog), true),
        ("**`try_lock()` + `unlock()`, `with_lease(30 s)`**", Some(&u.fixed), true),
        ("**fair lock `try_lock()` + `unlock()`**", Some(&u.fair), true),
        ("**read lock `try_lock()` + `unlock()`**", Some(&u.read), true),
        ("**write lock `try_lock()` + `unlock()`**", Some(&u.write), true),
    ];
    for (what, x, judged) in rows {
        let Some(x) = x else { continue };
        let (to_rtt, to_pair, target) = pair_ratios(x, rtt, limit_pair, judged);
        let _ = writeln!(
            out,
            "| {what} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {to_rtt:.3} | {to_pair:.3} | {target} |",
            x.pair.n, x.pair.mean, x.pair.p50, x.pair.p99, x.acquire.mean, x.release.mean, x.server_usec
        );
    }
    let _ = writeln!(out);
    match &u.redisson_scripts {
        Ok((_, who)) => {
            let _ = writeln!(
                out,
                "The row of Redisson's own scripts: {who}, read from its Java sources by the test kit.\n"
            );
        }
        Err(why) => {
            let _ = writeln!(out, "Redisson's own two scripts: {why} (docs/design.md, \"Interop\").\n");
        }
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

fn handoff_row(out: &mut String, what: &str, h: &Summary, rtt: f64, label: Option<&str>) {
    let (p50, p99) = (h.p50 / rtt, h.p99 / rtt);
    let judged = |ratio: f64, target: f64| match label {
        Some(label) => format!("{ratio:.2} ({label} ≤ {target}: {})", verdict(ratio <= target)),
        None => format!("{ratio:.2}"),
    };
    let _ = writeln!(
        out,
        "| {what} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} |",
        h.n,
        h.p50,
        h.p90,
        h.p99,
        h.max,
        judged(p50, TARGET_HANDOFF_P50_RATIO),
        judged(p99, TARGET_HANDOFF_P99_RATIO)
    );
}

/// The name of the `i`-th master in the report.
/// A pair's mean over two round trips and over the limit pair, and its verdict against the
/// target on both when it is `judged` ("–" otherwise).
fn pair_ratios(x: &PairStats, rtt: f64, limit_pair: f64, judged: bool) -> (f64, f64, String) {
    let (to_rtt, to_pair) = (x.pair.mean / (2.0 * rtt), x.pair.mean / limit_pair);
    let target = if judged {
        format!("{} / {}", verdict(to_rtt <= TARGET_PAIR_RATIO), verdict(to_pair <= TARGET_PAIR_RATIO))
    } else {
        "–".to_string()
    };
    (to_rtt, to_pair, target)
}

fn master_letter(i: usize) -> &'static str {
    ["A", "B", "C", "D", "E", "F"].get(i).copied().unwrap_or("?")
}

/// A count per pair: two decimals, or four when it is below 0.01 but not nothing.
fn per_pair(n: f64) -> String {
    if n > 0.0 && n < 0.01 { format!("{n:.4}") } else { format!("{n:.2}") }
}

/// One row of a throughput table.
fn throughput_row(out: &mut String, what: &str, t: &Throughput, rtt: f64) {
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

/// One row of a table of pairs: the pair, its halves, Redis's share, and its ratios to
/// 2 × RTT and to `limit_pair`.
fn pair_row(out: &mut String, what: &str, x: &PairStats, rtt: f64, limit_pair: f64, server: String) {
    let _ = writeln!(
        out,
        "| {what} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {server} | {:.3} | {:.3} |",
        x.pair.n,
        x.pair.mean,
        x.pair.p50,
        x.pair.p99,
        x.acquire.mean,
        x.release.mean,
        x.pair.mean / (2.0 * rtt),
        x.pair.mean / limit_pair
    );
}

/// One row of the group lock's table: `x` for `values` values, against the limit pair and
/// against its own limit, `round_trips` limit pairs.
fn group_row(out: &mut String, values: usize, what: &str, x: &PairStats, limit_pair: f64, round_trips: usize) {
    let _ = writeln!(
        out,
        "| {values} | {what} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2}, {:.1} | {:.3} | {:.3} |",
        x.pair.n,
        x.pair.mean,
        x.pair.p50,
        x.pair.p99,
        x.acquire.mean,
        x.release.mean,
        x.server_calls_per_pair,
        x.server_usec_per_pair,
        x.pair.mean / limit_pair,
        x.pair.mean / (limit_pair * round_trips as f64)
    );
}

/// The version of `package` that Cargo.lock pins (the first, when several are).
fn locked_version(package: &str) -> &'static str {
    const LOCK: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock"));
    let entry = format!("name = \"{package}\"\nversion = \"");
    LOCK.find(&entry).and_then(|at| LOCK[at + entry.len()..].split('"').next()).unwrap_or("unknown")
}

const DOC_BEGIN: &str = "<!-- bench-results:begin -->";
const DOC_END: &str = "<!-- bench-results:end -->";

/// Replaces the results block of docs/performance.md (between the two markers) with `report`.
pub(crate) fn write_doc(report: &str) {
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
