//! The benchmark of the project's performance targets (docs/performance.md): every figure
//! is set against the physical limit measured in the same run, on the same `redis-server`,
//! over the same kind of connection.
//!
//! ```text
//! cargo bench --bench locks                            # about 3 min 30 s on a 2-vCPU VM
//! REDLEASE_BENCH_QUICK=1 cargo bench --bench locks     # fewer samples, about 50 s
//! REDLEASE_BENCH_WRITE_DOC=1 cargo bench --bench locks # also rewrites the results block of docs/performance.md
//! REDLEASE_BENCH_PIN=0 cargo bench --bench locks       # leave placement on the CPUs to the scheduler
//! REDLEASE_BENCH_ONLY=12 cargo bench --bench locks     # the limit, then step 12 alone (or 1, 11, 14, 15, 16, 17, or 1,12)
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
//! 7. TLS: the limit over TLS against the plain one, and the pair over TLS.
//! 8. Semaphores: uncontended `try_acquire(1)` + `release()` of a `Semaphore` and of a
//!    `PermitExpirableSemaphore`, hand-off of one permit to a waiter in another process,
//!    and the watchdog renewing 100,000 permits.
//! 9. Peers: `rlock` and `redis-lock` on the same server: the uncontended pair, the
//!    hand-off to a waiter in another process, and throughput on one lock in 2 processes;
//!    the library's spin lock (no pub/sub, a waiter that polls) in the first two.
//! 10. The herd: 2, 4, 8 and 16 processes of one thread each on one lock, plain and fair:
//!     acquisitions per second, scripts and Redis time per acquisition.
//! 11. Redis Cluster (3 masters, a replica each): the pair through a cluster client against
//!     two trivial keyed calls sent straight to the lock's master, with what every master
//!     served per pair; the hand-off to a waiter in another process; the watchdog renewing
//!     100,000 leases spread over the masters, against each master's pipelined limit.
//! 12. The group lock: uncontended `try_lock` + `unlock` of 1, 10 and 100 values against a
//!     `MultiLock` over as many plain locks, interleaved with the limit pair; a group of
//!     10,000 values (the most it takes), with Redis's time in each of its two scripts.
//! 13. Leader election: the hand-over after a resignation to a candidate parked in another
//!     process, and the time an observer in a third process takes to see the new leader.
//! 14. Sentinel (a master, one replica, three sentinels): step 11's pairs, hand-offs and
//!     renewal behind `redis-sentinel://`, the most common replicated deployment.
//! 15. `sync_mode` on Valkey 9.1 with an AOF synced every second: the pair waiting for the
//!     master's disk (`Auto`) against `Wait`, the limit pair and a durable write's floor.
//! 16. The leases curve: 1 to 100,000 watchdog leases held by one client (a process per
//!     size), per lease renewed: Redis's time and CPU, the client's CPU, commands and bytes,
//!     the passes; memory per lease, releasing them all; drawn as SVG (docs/curves/ when the
//!     run writes the docs, target/bench-curves/ otherwise).
//! 17. The waiters curve: 1 to 1,000 threads waiting on one lock, plain and fair, over 1,
//!     4 and 16 processes: the hand-off, the messages and wake-ups per release, Redis's
//!     time, the subscriber connections; drawn as SVG.
//!
//! Child processes are this binary run again with `REDLEASE_BENCH_ROLE` set; they talk back
//! with lines on stdout and take orders as lines on stdin. Every child, server and proxy is
//! stopped on drop, so a failed run leaves nothing behind.
//!
//! One module per concern: the plan of the run ([`plan`]), placement on the CPUs
//! ([`placement`]), the other work on the machine ([`meter`]), the machine itself
//! ([`machine`]), clocks ([`clock`]), statistics ([`stats`]), one module per experiment
//! under [`experiments`] (its measurement and its section of the report), child processes
//! ([`child`]), the targets and the table rows the sections share ([`table`], below both
//! the experiments and the report), the report assembled from the sections ([`report`])
//! and the curves drawn as pictures ([`plot`]).

mod child;
mod clock;
mod experiments;
mod machine;
mod meter;
mod placement;
mod plan;
mod plot;
mod report;
mod servers;
mod stats;
mod table;

use std::time::Instant;

use redlease_testkit::cluster::ClusterGroup;
use redlease_testkit::sentinel::SentinelGroup;
use redlease_testkit::server::RedisServer;

use child::{ROLE_ENV, Role, child_main};
use experiments::LockKind;
use experiments::contenders::Subject;
use experiments::contention_curve::{ContentionPoint, contention_curve_section, measure_contention_curve};
use experiments::durable::{durable_section, measure_durable};
use experiments::election::measure_elections;
use experiments::group::{group_section, measure_group_locks};
use experiments::handoff::measure_handoffs;
use experiments::herd::measure_herd;
use experiments::lease_curve::{CurvePoint, lease_curve_section, measure_lease_curve};
use experiments::limit::{limit_section, measure_limit};
use experiments::masters_curve::{MastersPoint, masters_curve_section, measure_masters_curve};
use experiments::metrics_cost::{MetricsCost, measure_metrics_cost, metrics_cost_section};
use experiments::peers::measure_peers;
use experiments::redlock::{RED_NODES, RedlockRun, measure_redlock};
use experiments::renewal::measure_renewal;
use experiments::replicated::{Deployment, measure_replicated, replicated_section};
use experiments::semaphores::measure_semaphores;
use experiments::throughput::measure_throughput;
use experiments::tls::measure_tls;
use experiments::uncontended::{measure_uncontended, uncontended_section};
use experiments::waiter_curve::{WaiterPoint, measure_waiter_curve, waiter_curve_section};
use experiments::writer::measure_writer_under_readers;
use machine::Machine;
use meter::CpuMeter;
use placement::Placement;
use plan::{Plan, WRITE_DOC_ENV, only_steps};
use report::{Results, write_doc};

/// The roles of the child processes, by the name a parent spawns them under.
const ROLES: &[Role] = &[
    ("handoff", experiments::handoff::handoff_child),
    ("throughput", experiments::throughput::throughput_child),
    ("replicated-handoff", experiments::replicated::replicated_handoff_child),
    ("herd", experiments::herd::herd_child),
    ("election-candidate", experiments::election::candidate_child),
    ("election-observer", experiments::election::observer_child),
    ("leases", experiments::lease_curve::leases_child),
    ("waiters", experiments::waiter_curve::waiters_child),
    ("contending", experiments::contention_curve::contending_child),
    ("metered-pairs", experiments::metrics_cost::metered_pairs_child),
];

fn main() {
    if let Ok(role) = std::env::var(ROLE_ENV) {
        child_main(&role, ROLES);
        return;
    }
    let plan = Plan::from_env();
    let started = Instant::now();
    let machine = Machine::read();
    println!("redlease benchmark ({} run)", if plan.quick { "quick" } else { "full" });
    let server = RedisServer::start();
    let placement = Placement::apply(&server);
    if let Some(steps) = only_steps() {
        run_alone(&server, &placement, &plan, &steps);
        println!("benchmark time: {:.1} s", started.elapsed().as_secs_f64());
        return;
    }

    let (results, curves) = run_all(&server, placement, &plan, machine);
    let mut report = results.report();
    lease_curve_section(&mut report, &curves.leases);
    waiter_curve_section(&mut report, &curves.waiters, results.limit.rtt.mean);
    contention_curve_section(&mut report, &curves.contention);
    masters_curve_section(&mut report, &curves.masters);
    metrics_cost_section(&mut report, curves.metrics.as_ref());
    println!("\n{report}");
    println!("benchmark time: {:.1} s", started.elapsed().as_secs_f64());
    if std::env::var(WRITE_DOC_ENV).is_ok_and(|v| v == "1") {
        write_doc(&report);
    }
}

/// The scale curves (issue #44), whose sections follow the report's.
struct Curves {
    leases: Vec<CurvePoint>,
    waiters: Vec<WaiterPoint>,
    contention: Vec<ContentionPoint>,
    masters: Vec<MastersPoint>,
    metrics: Option<MetricsCost>,
}

/// Every step in the report's order, with what other processes did on the machine
/// meanwhile; the curves apart (their sections follow the report's).
fn run_all(server: &RedisServer, placement: Placement, plan: &Plan, machine: Machine) -> (Results, Curves) {
    let mut meter = CpuMeter::new(server);
    meter.step("0. physical limit");
    let limit = measure_limit(server, plan);
    meter.step("1. uncontended acquire + release");
    let uncontended = measure_uncontended(server, plan);
    meter.step("2. contended hand-off");
    let handoff = measure_handoffs(server, plan);
    meter.step("3. throughput");
    let throughput = [
        measure_throughput(server, plan, Subject::Lock(LockKind::Plain), true),
        measure_throughput(server, plan, Subject::Lock(LockKind::Plain), false),
        measure_throughput(server, plan, Subject::Lock(LockKind::Fair), true),
        measure_throughput(server, plan, Subject::Lock(LockKind::Read), true),
    ];
    meter.step("4. renewal");
    let renewal = measure_renewal(server, plan);
    meter.step("5. writer under readers");
    let writer = measure_writer_under_readers(server, plan);
    meter.step("6. Redlock");
    let redlock = measure_redlocks(&placement, &mut meter, plan);
    meter.step("7. TLS");
    let tls = measure_tls(&placement, plan);
    meter.step("8. semaphores");
    let semaphores = measure_semaphores(server, plan);
    meter.step("9. peers");
    let peers = measure_peers(server, plan);
    meter.step("10. the herd");
    let herd = measure_herd(server, plan);
    meter.step("11. Redis Cluster");
    let group = start_cluster(&placement, Some(&mut meter));
    let cluster = measure_replicated(&Deployment::cluster(&group), plan);
    meter.step("12. group lock");
    drop(group);
    let group_locks = measure_group_locks(server, plan);
    meter.step("13. election");
    let elections = measure_elections(server, plan);
    meter.step("14. Sentinel");
    let sentinels = start_sentinels(&placement, Some(&mut meter));
    let sentinel = measure_replicated(&Deployment::sentinel(&sentinels), plan);
    drop(sentinels);
    meter.step("15. sync_mode");
    let durable = measure_durable(&placement);
    meter.step("16. leases curve");
    let curve = measure_lease_curve(server, plan);
    meter.step("17. waiters curve");
    let waiters = measure_waiter_curve(server, plan);
    meter.step("18. contention curve");
    let contention = measure_contention_curve(server, plan);
    meter.step("19. masters curve");
    let masters = measure_masters_curve(plan, |n| start_masters(&placement, Some(&mut meter), n));
    meter.step("20. metrics feature");
    let metrics = measure_metrics_cost(server, plan);
    meter.step("");
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
        tls,
        semaphores,
        peers,
        herd,
        cluster,
        group_locks,
        elections,
        sentinel,
        durable,
    };
    (results, Curves { leases: curve, waiters, contention, masters, metrics })
}

/// The limit, then each of `steps` (those of [`plan::ALONE_STEPS`]), their sections
/// printed and nothing written to the docs: for comparing two builds step by step.
fn run_alone(server: &RedisServer, placement: &Placement, plan: &Plan, steps: &[u32]) {
    let mut report = String::new();
    let limit = measure_limit(server, plan);
    limit_section(&mut report, &limit);
    for step in steps {
        match step {
            1 => uncontended_section(&mut report, &limit, &measure_uncontended(server, plan)),
            11 => {
                let group = start_cluster(placement, None);
                replicated_section(&mut report, &measure_replicated(&Deployment::cluster(&group), plan), None);
            }
            14 => {
                let sentinels = start_sentinels(placement, None);
                replicated_section(&mut report, &measure_replicated(&Deployment::sentinel(&sentinels), plan), None);
            }
            12 => group_section(&mut report, &measure_group_locks(server, plan)),
            15 => durable_section(&mut report, measure_durable(placement).as_ref()),
            16 => lease_curve_section(&mut report, &measure_lease_curve(server, plan)),
            17 => waiter_curve_section(&mut report, &measure_waiter_curve(server, plan), limit.rtt.mean),
            18 => contention_curve_section(&mut report, &measure_contention_curve(server, plan)),
            19 => {
                masters_curve_section(&mut report, &measure_masters_curve(plan, |n| start_masters(placement, None, n)))
            }
            20 => metrics_cost_section(&mut report, measure_metrics_cost(server, plan).as_ref()),
            _ => unreachable!("only_steps allows {:?}", plan::ALONE_STEPS),
        }
    }
    println!("\n{report}");
}

/// Places `node` with the first server, and meters it when there is a `meter`.
fn place(placement: &Placement, meter: Option<&mut CpuMeter>, node: &RedisServer) {
    placement.pin_server(node);
    if let Some(meter) = meter {
        meter.add_server(node);
    }
}

/// Step 6: Redlock over each of [`RED_NODES`] servers, started for it and placed with the
/// first server.
fn measure_redlocks(placement: &Placement, meter: &mut CpuMeter, plan: &Plan) -> Vec<RedlockRun> {
    let red_servers: Vec<RedisServer> = (0..RED_NODES.iter().copied().max().unwrap_or(0))
        .map(|_| {
            let node = RedisServer::start();
            place(placement, Some(&mut *meter), &node);
            node
        })
        .collect();
    RED_NODES.iter().map(|&n| measure_redlock(&red_servers[..n], plan)).collect()
}

/// Step 11's deployment, every server of it placed with the first server (and metered).
fn start_cluster(placement: &Placement, mut meter: Option<&mut CpuMeter>) -> ClusterGroup {
    let group = ClusterGroup::start();
    for node in group.masters().into_iter().chain(group.replicas()) {
        place(placement, meter.as_deref_mut(), node);
    }
    group
}

/// Step 19's cluster of `masters` masters, every one placed with the first server (and
/// metered).
fn start_masters(placement: &Placement, mut meter: Option<&mut CpuMeter>, masters: usize) -> ClusterGroup {
    let group = ClusterGroup::start_masters(masters);
    for node in group.masters() {
        place(placement, meter.as_deref_mut(), node);
    }
    group
}

/// Step 14's deployment, every process of it placed with the first server (and metered).
fn start_sentinels(placement: &Placement, mut meter: Option<&mut CpuMeter>) -> SentinelGroup {
    let group = SentinelGroup::start();
    for node in group.data_nodes() {
        place(placement, meter.as_deref_mut(), node);
    }
    for pid in group.sentinel_pids() {
        placement.pin_pid(pid);
        if let Some(meter) = meter.as_deref_mut() {
            meter.add_pid(pid);
        }
    }
    group
}
