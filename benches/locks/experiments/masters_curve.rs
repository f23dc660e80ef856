//! Step 19, the masters curve: a Redis Cluster of 1, 3 and 6 masters (no replicas, every
//! master pinned with the first server), with the locks spread over all of them. Per
//! cluster: the throughput of processes looping on a lock each, spread evenly over the
//! masters, and what each master served of it; then one client holding watchdog leases
//! spread over every slot: the renewal's passes, round trips, Redis's and the client's CPU
//! per lease renewed, and the client's threads, sockets and memory.

use std::fmt::Write as _;
use std::thread;
use std::time::Duration;

use redlease_testkit::cluster::ClusterGroup;

use crate::experiments::contention_curve::{Contention, ContentionPoint, contention_run};
use crate::experiments::lease_curve::{CurvePoint, lease_point};
use crate::plan::Plan;
use crate::plot::{LogLogChart, Series, draw_into};
use crate::servers::Servers;

/// The cluster sizes of the curve.
pub(crate) const MASTER_COUNTS: [usize; 3] = [1, 3, 6];
/// Processes of the throughput run, one thread and one lock each: a multiple of every
/// cluster size, so that each master serves as many locks.
const PROCESSES: usize = 6;
/// Leases the renewal run's client holds, over every slot.
const LEASES: usize = 6_000;

/// One cluster size.
pub(crate) struct MastersPoint {
    masters: usize,
    /// The masters' CPU with no client, as a share of one CPU: the cluster's own upkeep
    /// (its bus, each server's timers).
    idle_share: f64,
    throughput: ContentionPoint,
    renewal: CurvePoint,
}

/// The curve: for each size, a cluster started by `start` (which places its servers), the
/// throughput run, then the renewal run.
pub(crate) fn measure_masters_curve(plan: &Plan, mut start: impl FnMut(usize) -> ClusterGroup) -> Vec<MastersPoint> {
    MASTER_COUNTS
        .iter()
        .map(|&masters| {
            let group = start(masters);
            let mut servers = Servers::masters_of(&group);
            let idle_share = idle_share(&servers);
            let names = spread_names(&group, masters);
            let throughput = contention_run(&mut servers, plan.throughput_for, Contention::OwnLocks, PROCESSES, |p| {
                names[p].clone()
            });
            let renewal = lease_point(&mut servers, LEASES);
            MastersPoint { masters, idle_share, throughput, renewal }
        })
        .collect()
}

/// How long the masters' own upkeep is measured, no client connected.
const IDLE_WINDOW: Duration = Duration::from_secs(2);

/// The masters' CPU over [`IDLE_WINDOW`] with no client, as a share of one CPU.
fn idle_share(servers: &Servers) -> f64 {
    let before = servers.cpu();
    thread::sleep(IDLE_WINDOW);
    Duration::from_nanos(servers.cpu().saturating_sub(before)).as_secs_f64() / IDLE_WINDOW.as_secs_f64()
}

/// A lock name for each process whose slot is served by master `p % masters`, so that each
/// master serves as many of the run's locks.
fn spread_names(group: &ClusterGroup, masters: usize) -> Vec<String> {
    let ports: Vec<u16> = group.masters().iter().map(|m| m.port()).collect();
    let owners = group.slot_masters();
    (0..PROCESSES)
        .map(|p| {
            let want = ports[p % masters];
            (0..)
                .map(|k| format!("bench:masters:{masters}:{p}:{k}"))
                .find(|name| owners[usize::from(group.slot_of(name))] == Some(want))
                .expect("a name on every master")
        })
        .collect()
}

/// Step 19's section: the table and the pictures.
pub(crate) fn masters_curve_section(out: &mut String, points: &[MastersPoint]) {
    let _ = writeln!(
        out,
        "### 19. The masters curve: Redis Cluster of {} masters without replicas, all pinned to the first server's CPU; \
         {PROCESSES} processes loop `lock()` + `unlock()` on a lock each (as many on every master) for {:.0} s, \
         then one client holds {LEASES} watchdog leases over every slot (watchdog 3 s, renewal every 1 s, a window \
         of 3 renewal periods)\n",
        MASTER_COUNTS.map(|n| n.to_string()).join(", "),
        points.first().map_or(0.0, |p| p.throughput.window.as_secs_f64())
    );
    let _ = writeln!(
        out,
        "| masters | masters' CPU with no client | acquisitions/s | per master | masters' CPU (of one CPU) | each master's share of it | \
         Redis µs per acquisition | processes' CPU | processes' µs per acquisition | renewal: round trips per pass | pass mean (ms) | Redis CPU per renewal (µs) | \
         client CPU per renewal (µs) | client: threads / sockets | client memory per lease (B) | lost / failed |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for p in points {
        let (t, r) = (&p.throughput, &p.renewal);
        let shares: Vec<String> = t.server_shares().iter().map(|s| format!("{:.0} %", s * 100.0)).collect();
        let _ = writeln!(
            out,
            "| {} | {:.0} % | {:.0} | {:.0} | {:.0} % | {} | {:.1} | {:.0} % | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {} / {} | {:.0} | {} / {} |",
            p.masters,
            p.idle_share * 100.0,
            t.per_sec(),
            t.per_sec() / p.masters as f64,
            t.server_share() * 100.0,
            shares.join(", "),
            t.server_us(),
            t.clients_share() * 100.0,
            t.clients_us(),
            r.round_trips as f64 / r.passes.max(1) as f64,
            r.mean_pass().as_secs_f64() * 1e3,
            r.server_cpu_us(),
            r.client_cpu_us(),
            r.threads,
            r.sockets,
            r.bytes_per_lease(),
            r.lost,
            r.failed,
        );
    }
    let _ = writeln!(out);
    draw_into(out, masters_charts(points));
}

/// The pictures: throughput, and the cost of a lease renewed, by the masters.
fn masters_charts(points: &[MastersPoint]) -> [LogLogChart<'static>; 2] {
    let series = |name: &str, value: &dyn Fn(&MastersPoint) -> f64| Series {
        name: name.to_string(),
        points: points.iter().map(|p| (p.masters as f64, value(p))).collect(),
    };
    [
        LogLogChart {
            file: "masters-curve-throughput.svg",
            title: "Acquisitions per second, by the cluster's masters",
            x_label: "masters",
            y_label: "acquisitions/s",
            series: vec![
                series("all masters", &|p| p.throughput.per_sec()),
                series("per master", &|p| p.throughput.per_sec() / p.masters as f64),
            ],
        },
        LogLogChart {
            file: "masters-curve-renewal.svg",
            title: "Cost per lease renewed, by the cluster's masters",
            x_label: "masters",
            y_label: "µs per lease renewed",
            series: vec![
                series("the masters' CPU (/proc)", &|p| p.renewal.server_cpu_us()),
                series("client CPU (the process's clock)", &|p| p.renewal.client_cpu_us()),
                series("renewal round trips per pass", &|p| {
                    p.renewal.round_trips as f64 / p.renewal.passes.max(1) as f64
                }),
            ],
        },
    ]
}
