//! The report: the results of a run, assembled into Markdown from the section each
//! experiment writes beside its measurement, and the rewriter of the results block of
//! docs/performance.md. The targets and the rows and verdicts that several steps share are
//! in [`table`](crate::table), below this module and the experiments alike; nothing imports
//! this module but `main`.

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
