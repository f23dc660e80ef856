//! The report: the results of a run, assembled into Markdown from the section each
//! experiment writes beside its measurement; the targets and the rows and verdicts that
//! several steps share; and the rewriter of the results block of docs/performance.md.

use std::fmt::Write as _;

use crate::experiments::durable::{Durable, durable_section};
use crate::experiments::election::{Elections, elections_section};
use crate::experiments::group::{GroupLocks, group_section};
use crate::experiments::handoff::{Handoffs, handoff_section};
use crate::experiments::herd::{HerdRun, herd_section};
use crate::experiments::limit::{Limit, limit_section};
use crate::experiments::peers::{Peers, peers_section};
use crate::experiments::redlock::{RedlockRun, redlock_section};
use crate::experiments::renewal::{Renewal, renewal_section};
use crate::experiments::replicated::{ReplicatedRun, replicated_section};
use crate::experiments::semaphores::{Semaphores, semaphores_section};
use crate::experiments::throughput::{Throughput, throughput_section};
use crate::experiments::tls::{TlsRun, tls_section};
use crate::experiments::uncontended::{Uncontended, uncontended_section};
use crate::experiments::writer::{WriterUnderReaders, writer_section};
use crate::machine::Machine;
use crate::meter::OtherWork;
use crate::stats::{PairStats, Summary};

// Targets: the project's performance targets, as docs/performance.md states them. The pair
// target applies to every lock kind's uncontended pair (each is one acquire and one release
// round trip), the hand-off targets to the plain and the fair lock alike.
pub(crate) const TARGET_PAIR_RATIO: f64 = 1.15;
const TARGET_HANDOFF_P50_RATIO: f64 = 4.0;
const TARGET_HANDOFF_P99_RATIO: f64 = 20.0;
pub(crate) const TARGET_RENEWAL_FRACTION: f64 = 0.5;

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

pub(crate) fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "missed" }
}

impl Results {
    /// The figures as Markdown: printed, and optionally written into docs/performance.md.
    pub(crate) fn report(&self) -> String {
        let mut out = String::new();
        let rtt = self.limit.rtt.mean;
        self.report_machine(&mut out);
        limit_section(&mut out, &self.limit);
        uncontended_section(&mut out, &self.limit, &self.uncontended);
        handoff_section(&mut out, rtt, &self.handoff);
        throughput_section(&mut out, rtt, &self.throughput);
        renewal_section(&mut out, &self.limit, &self.renewal);
        writer_section(&mut out, rtt, &self.writer);
        redlock_section(&mut out, &self.redlock);
        tls_section(&mut out, &self.tls);
        semaphores_section(&mut out, &self.limit, &self.renewal, &self.semaphores);
        peers_section(&mut out, rtt, &self.peers, &self.throughput[0]);
        herd_section(&mut out, &self.herd);
        replicated_section(&mut out, &self.cluster, Some(self.renewal.watched.per_sec()));
        group_section(&mut out, &self.group_locks);
        elections_section(&mut out, rtt, &self.elections);
        replicated_section(&mut out, &self.sentinel, Some(self.renewal.watched.per_sec()));
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
}

/// The head of a hand-off table whose first column is `first`.
pub(crate) fn handoff_head(out: &mut String, first: &str) {
    let _ = writeln!(out, "| {first} | n | p50 µs | p90 µs | p99 µs | max µs | p50 / RTT | p99 / RTT |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
}

/// One row of a hand-off table, judged against the hand-off targets when `label` names
/// them.
pub(crate) fn handoff_row(out: &mut String, what: &str, h: &Summary, rtt: f64, label: Option<&str>) {
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

/// A pair's mean over two round trips and over the limit pair, and its verdict against the
/// target on both when it is `judged` ("–" otherwise).
pub(crate) fn pair_ratios(x: &PairStats, rtt: f64, limit_pair: f64, judged: bool) -> (f64, f64, String) {
    let (to_rtt, to_pair) = (x.pair.mean / (2.0 * rtt), x.pair.mean / limit_pair);
    let target = if judged {
        format!("{} / {}", verdict(to_rtt <= TARGET_PAIR_RATIO), verdict(to_pair <= TARGET_PAIR_RATIO))
    } else {
        "–".to_string()
    };
    (to_rtt, to_pair, target)
}

/// One row of a table of pairs: the pair, its halves, Redis's share, and its ratios to
/// 2 × RTT and to `limit_pair`.
pub(crate) fn pair_row(out: &mut String, what: &str, x: &PairStats, rtt: f64, limit_pair: f64, server: String) {
    let _ = writeln!(
        out,
        "| {what} | {} | {server} | {:.3} | {:.3} |",
        pair_cells(x),
        x.pair.mean / (2.0 * rtt),
        x.pair.mean / limit_pair
    );
}

/// The cells every table of pairs starts with: n, the pair's mean, p50 and p99, and the
/// means of its acquire and of its release.
pub(crate) fn pair_cells(x: &PairStats) -> String {
    format!(
        "{} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1}",
        x.pair.n, x.pair.mean, x.pair.p50, x.pair.p99, x.acquire.mean, x.release.mean
    )
}

/// The head of a two-column table of figures.
pub(crate) fn figure_head(out: &mut String) {
    let _ = writeln!(out, "| figure | value |");
    let _ = writeln!(out, "|---|---:|");
}

/// One row of a two-column table of figures.
pub(crate) fn figure_row(out: &mut String, what: &str, value: String) {
    let _ = writeln!(out, "| {what} | {value} |");
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
