//! Steps 11 and 14, replicated deployments: Redis Cluster (three masters with a replica
//! each, the test kit's `ClusterGroup`) and Sentinel (a master, one replica and three
//! sentinels, its `SentinelGroup`), every server pinned with the first one. The uncontended
//! pair through a client of the deployment against two trivial keyed `EVALSHA`s sent
//! straight to the master that owns the lock, with what each master served per pair; the
//! hand-off to a waiter in another process, in round trips of that master; the watchdog
//! renewing many leases spread over the masters, against the pipelined limit of each. The
//! step's section of the report is in [`report`].

mod report;

pub(crate) use report::replicated_section;

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{AnyLock, Client};
use redlease_testkit::cluster::ClusterGroup;
use redlease_testkit::sentinel::SentinelGroup;
use redlease_testkit::server::RedisServer;

use crate::child::{LOCK_ENV, URL_ENV, Worker, child_env};
use crate::experiments::LockKind;
use crate::experiments::contenders::{Contender, Process, Subject};
use crate::experiments::handoff::{HANDOFF_BLOCKS, HANDOFF_WARMUP, serve_handoffs, timed_release};
use crate::experiments::limit::{PIPELINE, pipelined_rate, trivial_call};
use crate::experiments::renewal::{Timed, Watched, drop_leases, renewal_client, take_leases, ttls};
use crate::experiments::uncontended::{RawPair, library_pair};
use crate::meter::process_ticks;
use crate::plan::Plan;
use crate::stats::{
    BlockCounters, PairOp, PairStats, Summary, measure_pairs_with, reset_server_stats, server_all_command_stats,
    server_command_stats, time_each, twice,
};

/// The kind of replicated deployment a run measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Three masters with a replica each; clients on `redis-cluster://`.
    Cluster,
    /// One master with one replica behind three sentinels; clients on `redis-sentinel://`.
    Sentinel,
}

impl Shape {
    /// How the report names a client of this deployment.
    pub(crate) fn client(self) -> &'static str {
        match self {
            Shape::Cluster => "cluster client",
            Shape::Sentinel => "Sentinel client",
        }
    }

    /// The prefix of the names this step uses.
    fn prefix(self) -> &'static str {
        match self {
            Shape::Cluster => "bench:cluster",
            Shape::Sentinel => "bench:sentinel",
        }
    }
}

/// A replicated deployment, as this step sees it: its URL, its masters and the replica of
/// each, and which master serves a name.
pub(crate) struct Deployment<'a> {
    shape: Shape,
    url: String,
    masters: Vec<&'a RedisServer>,
    /// `replicas[i]` replicates `masters[i]`.
    replicas: Vec<&'a RedisServer>,
    slots: SlotMap,
}

impl<'a> Deployment<'a> {
    pub(crate) fn cluster(group: &'a ClusterGroup) -> Deployment<'a> {
        let masters = group.masters();
        let replicas = masters.iter().map(|m| group.replica_of(m.port())).collect();
        let ports = masters.iter().map(|m| m.port()).collect();
        let slots = SlotMap::read(group, ports);
        Deployment { shape: Shape::Cluster, url: group.url(), masters, replicas, slots }
    }

    pub(crate) fn sentinel(group: &'a SentinelGroup) -> Deployment<'a> {
        let master_port = group.master_port();
        let (masters, replicas): (Vec<&RedisServer>, Vec<&RedisServer>) =
            group.data_nodes().into_iter().partition(|s| s.port() == master_port);
        assert_eq!((masters.len(), replicas.len()), (1, 1), "a master and one replica");
        let slots = SlotMap { ports: vec![master_port], owner: None };
        Deployment { shape: Shape::Sentinel, url: group.url(), masters, replicas, slots }
    }
}

/// Whether a child's cluster client waits for a replica after each grant ("1") or not.
pub(crate) const SYNC_ENV: &str = "REDLEASE_BENCH_SYNC";
/// Round trips made for this long before the masters' round trips are measured (a VM's
/// idle vCPU wakes slower after a quiet spell).
const RTT_WARMUP: Duration = Duration::from_secs(1);

/// One master of the cluster, in the order the test kit made them.
pub(crate) struct Master {
    /// Slots it serves.
    pub(crate) slots: usize,
    /// A trivial `EVALSHA` round trip on a plain connection to it.
    pub(crate) rtt: Summary,
}

/// The kinds of pair measured, in the order of [`ReplicatedRun::pairs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PairKind {
    /// Two trivial `EVALSHA`s with the lock's name as `KEYS[1]`, straight to its master.
    Limit,
    /// The library's acquire and release scripts (the sharded build on a cluster) sent raw to the master,
    /// with the arguments the library sends: what the pair costs without the client.
    Raw,
    /// The same with `WAIT 1` behind the acquire in one write: the synced floor, what a
    /// grant that waits for the replica costs without the client.
    RawSynced,
    /// `try_lock()` + `unlock()` through a client of the deployment with `sync_replicas(false)`.
    NoSync,
    /// The same with the default settings: every grant waits for a replica (`WAIT 1`).
    Default,
}

/// What one master served during the blocks of one kind of pair, per pair.
#[derive(Default)]
pub(crate) struct Served {
    /// Commands sent to it by clients, by name, most first.
    pub(crate) sent: Vec<(String, f64)>,
    /// Commands run by the scripts it ran.
    pub(crate) in_scripts: f64,
    /// `REPLCONF` from its replica (acknowledgements).
    pub(crate) replication: f64,
    /// Calls in all (not per pair): clients' commands and the scripts' commands, and
    /// `REPLCONF` from its replica.
    pub(crate) calls: u64,
    pub(crate) replication_calls: u64,
}

impl Served {
    pub(crate) fn sent_total(&self) -> f64 {
        self.sent.iter().map(|(_, n)| n).sum()
    }
}

pub(crate) struct ReplicatedPair {
    pub(crate) kind: PairKind,
    pub(crate) stats: PairStats,
    /// Per master, in the order of [`ReplicatedRun::masters`].
    pub(crate) served: Vec<Served>,
    /// CPU time of the owning master and of its replica per pair, µs (`/proc/<pid>/stat`,
    /// in ticks of 10 ms added up over the blocks).
    pub(crate) cpu_owner_us: f64,
    pub(crate) cpu_replica_us: f64,
}

pub(crate) struct ReplicatedRun {
    pub(crate) shape: Shape,
    pub(crate) masters: Vec<Master>,
    /// The master (an index into `masters`) that owns the slots of the pairs' and the
    /// hand-offs' locks.
    pub(crate) owner: usize,
    pub(crate) pairs: Vec<ReplicatedPair>,
    /// Hand-offs with and without replica sync: (`sync_replicas`, summary).
    pub(crate) handoffs: Vec<(bool, Summary)>,
    /// The renewal with the leases' names spread over every slot, then with one hash tag
    /// per master.
    pub(crate) renewals: Vec<ReplicatedRenewal>,
}

/// How the renewal's lease names land on the masters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `bench:cluster:lease:<i>`: spread over the slots, as names without a hash tag are.
    Spread,
    /// `{<tag of the master>}:lease:<i>`: each master's leases in one slot of it.
    OneSlotPerMaster,
}

/// The renewal of many leases spread over the masters.
pub(crate) struct ReplicatedRenewal {
    pub(crate) layout: Layout,
    /// Renewals confirmed by the replicas (the default), or not (`sync_replicas(false)`).
    pub(crate) confirmed: bool,
    pub(crate) leases: usize,
    pub(crate) acquired: Timed,
    pub(crate) watched: Watched,
    /// Per master, in the order of [`ReplicatedRun::masters`].
    pub(crate) nodes: Vec<NodeRenewal>,
    pub(crate) held: usize,
    pub(crate) lost_events: u64,
    pub(crate) failed_renewals: u64,
    /// The first error the event hook reported for a renewal, if any.
    pub(crate) first_error: Option<String>,
    pub(crate) dropped: Timed,
    pub(crate) failed_releases: u64,
}

/// One master's share of the renewal, from its `INFO commandstats` over the window.
#[derive(Default)]
pub(crate) struct NodeRenewal {
    /// Keys in its database before the leases were taken.
    pub(crate) keys_before: u64,
    /// Leases whose slot it serves.
    pub(crate) leases: usize,
    /// Trivial `EVALSHA`s per second on it, `PIPELINE` per pipeline, measured just before
    /// the leases were taken.
    pub(crate) pipelined_per_sec: f64,
    /// Renew scripts it ran (`EVALSHA`): the watchdog's round trips to it.
    pub(crate) round_trips: u64,
    /// Leases looked at (`HEXISTS`) and renewed (`PEXPIRE`) by those scripts.
    pub(crate) looked_at: u64,
    pub(crate) renewed: u64,
    /// Time it spent running them.
    pub(crate) server_time: Duration,
    /// The confirmations behind the batches: `WAIT`s and `INFO`s it ran, and the time it
    /// spent on them.
    pub(crate) waits: u64,
    pub(crate) infos: u64,
    pub(crate) confirm_time: Duration,
    /// Its lease keys with a TTL > 0 after the window, and the smallest TTL (ms).
    pub(crate) keys_alive: usize,
    pub(crate) min_ttl_ms: i64,
    /// Its lease keys left after every guard dropped.
    pub(crate) keys_left: u64,
}

/// Which master serves each slot, from `CLUSTER SLOTS`, as indexes into `ports`; `None`
/// where one master serves every name.
struct SlotMap {
    ports: Vec<u16>,
    owner: Option<Vec<usize>>,
}

impl SlotMap {
    fn read(group: &ClusterGroup, ports: Vec<u16>) -> SlotMap {
        let owner = group
            .slot_masters()
            .into_iter()
            .map(|port| {
                let port = port.expect("every slot has a master");
                ports.iter().position(|&p| p == port).expect("a master of the group")
            })
            .collect();
        SlotMap { ports, owner: Some(owner) }
    }

    /// Slots `master` serves (every one, when it is the only master).
    fn served_by(&self, master: usize) -> usize {
        self.owner.as_ref().map_or(16384, |owner| owner.iter().filter(|&&o| o == master).count())
    }

    /// The master (index) of each of `keys`, from `CLUSTER KEYSLOT` (pipelined).
    fn masters_of(&self, conn: &mut redis::Connection, keys: &[String]) -> Vec<usize> {
        let Some(owner) = &self.owner else { return vec![0; keys.len()] };
        let mut masters = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(PIPELINE) {
            let mut pipe = redis::pipe();
            for key in chunk {
                pipe.cmd("CLUSTER").arg("KEYSLOT").arg(key);
            }
            let slots: Vec<usize> = pipe.query(conn).expect("CLUSTER KEYSLOT");
            masters.extend(slots.into_iter().map(|slot| owner[slot]));
        }
        masters
    }

    /// The first name `prefix-<i>` whose slot `master` serves.
    fn name_on(&self, conn: &mut redis::Connection, prefix: &str, master: usize) -> String {
        (0..1000)
            .map(|i| format!("{prefix}-{i}"))
            .find(|name| self.masters_of(conn, std::slice::from_ref(name))[0] == master)
            .unwrap_or_else(|| panic!("no name {prefix}-<i> on the master at port {}", self.ports[master]))
    }
}

pub(crate) fn measure_replicated(deployment: &Deployment, plan: &Plan) -> ReplicatedRun {
    let Deployment { shape, url, masters: servers, slots, .. } = deployment;
    let prefix = shape.prefix();

    // The pairs' lock is on the master that serves "<prefix>:pair-0"; the hand-offs' locks
    // on the same master.
    let mut any = servers[0].conn();
    let owner = slots.masters_of(&mut any, &[format!("{prefix}:pair-0")])[0];
    let pair_name = slots.name_on(&mut any, &format!("{prefix}:pair"), owner);
    let raw_name = slots.name_on(&mut any, &format!("{prefix}:raw"), owner);

    // The round trip of each master, one after the other.
    let mut rtts = Vec::new();
    for server in servers {
        let mut conn = server.conn();
        let call = trivial_call(&mut conn);
        let warm_until = Instant::now() + RTT_WARMUP / 3;
        while Instant::now() < warm_until {
            let _: i64 = call.query(&mut conn).expect("trivial EVALSHA");
        }
        rtts.push(time_each(plan.warmup, plan.round_trips / 2, || {
            let one: i64 = call.query(&mut conn).expect("trivial EVALSHA");
            assert_eq!(one, 1);
        }));
    }

    let pairs = measure_pairs(deployment, owner, &pair_name, &raw_name, plan);
    let handoffs = measure_handoffs(deployment, owner, plan);
    // Confirmed renewals (the default) and, for the same names, renewals that wait for no
    // replica (`sync_replicas(false)`), to show what the confirmation costs.
    let layouts = match shape {
        Shape::Cluster => &[(Layout::Spread, true), (Layout::Spread, false), (Layout::OneSlotPerMaster, true)][..],
        // One master: where the names land makes no difference.
        Shape::Sentinel => &[(Layout::Spread, true), (Layout::Spread, false)][..],
    };
    let renewals = layouts
        .iter()
        .map(|&(layout, confirmed)| {
            let names: Vec<String> = match layout {
                Layout::Spread => (0..plan.leases).map(|i| format!("{prefix}:lease:{i}")).collect(),
                Layout::OneSlotPerMaster => {
                    let tags: Vec<String> =
                        (0..servers.len()).map(|m| slots.name_on(&mut any, &format!("{prefix}:tag-{m}"), m)).collect();
                    (0..plan.leases).map(|i| format!("{{{}}}:lease:{i}", tags[i % tags.len()])).collect()
                }
            };
            measure_renewal(url, servers, slots, (layout, confirmed), &names, plan)
        })
        .collect();

    let masters = (0..servers.len()).map(|i| Master { slots: slots.served_by(i), rtt: rtts[i] }).collect();
    ReplicatedRun { shape: *shape, masters, owner, pairs, handoffs, renewals }
}

/// `EVALSHA` of `return 1` (loaded with `SCRIPT LOAD` on `conn`) with `key` as `KEYS[1]`.
fn keyed_trivial_call(conn: &mut redis::Connection, key: &str) -> redis::Cmd {
    let sha: String =
        redis::cmd("SCRIPT").arg("LOAD").arg("return 1").query(conn).expect("SCRIPT LOAD of the trivial script");
    let mut call = redis::cmd("EVALSHA");
    call.arg(sha).arg(1).arg(key);
    call
}

/// How a command seen in `INFO commandstats` came to a master.
#[derive(PartialEq, Eq)]
enum Origin {
    /// The benchmark's own reading and resetting of the counters.
    Benchmark,
    /// Its replica's acknowledgements (`REPLCONF ACK`).
    Replication,
    /// A client sent it.
    Client,
    /// A script ran it (every command a client of this benchmark does not send itself).
    Script,
}

fn origin(command: &str) -> Origin {
    let base = command.split('|').next().unwrap_or(command);
    match base {
        // The benchmark resets with `CONFIG RESETSTAT` and reads with `INFO commandstats`,
        // which the reading it returns does not count yet: every `INFO` counted is a
        // client's (the library's readings behind its grants, the sentinels').
        "config" => Origin::Benchmark,
        "replconf" | "psync" | "sync" => Origin::Replication,
        "info" | "evalsha" | "eval" | "evalsha_ro" | "eval_ro" | "fcall" | "fcall_ro" | "wait" | "role" | "ping"
        | "asking" | "readonly" | "readwrite" | "select" | "hello" | "auth" | "echo" | "quit" | "multi" | "exec"
        | "discard" | "script" | "cluster" | "client" | "pubsub" | "command" | "ssubscribe" | "sunsubscribe"
        | "subscribe" | "unsubscribe" | "psubscribe" | "punsubscribe" => Origin::Client,
        _ => Origin::Script,
    }
}

/// Every master's counters, reset before each block and added up per kind of pair after
/// it; the server time counted for a pair is the `EVALSHA`s' on the owning master.
struct MasterCounters {
    conns: Vec<redis::Connection>,
    owner: usize,
    /// Per kind of pair, per master: calls by command.
    calls: Vec<Vec<HashMap<String, u64>>>,
    /// The owning master's and its replica's process ids, their CPU ticks when the block
    /// started, and per kind of pair the ticks added up.
    pids: [String; 2],
    ticks_at_reset: [u64; 2],
    ticks: Vec<[u64; 2]>,
}

impl MasterCounters {
    fn cpu_ticks(&self) -> [u64; 2] {
        [process_ticks(&self.pids[0], false), process_ticks(&self.pids[1], false)]
    }
}

impl BlockCounters for MasterCounters {
    fn reset(&mut self, _op: usize) {
        for conn in &mut self.conns {
            reset_server_stats(conn);
        }
        self.ticks_at_reset = self.cpu_ticks();
    }

    fn read(&mut self, op: usize) -> (u64, u64) {
        let now = self.cpu_ticks();
        for (total, (now, then)) in self.ticks[op].iter_mut().zip(now.iter().zip(self.ticks_at_reset)) {
            *total += now.saturating_sub(then);
        }
        let mut counted = (0, 0);
        for (i, conn) in self.conns.iter_mut().enumerate() {
            for (command, calls, usec) in server_all_command_stats(conn) {
                if i == self.owner && command == "evalsha" {
                    counted = (calls, usec);
                }
                *self.calls[op][i].entry(command).or_default() += calls;
            }
        }
        counted
    }
}

fn measure_pairs(
    deployment: &Deployment,
    owner: usize,
    name: &str,
    raw_name: &str,
    plan: &Plan,
) -> Vec<ReplicatedPair> {
    let (url, servers, replica) = (&deployment.url, &deployment.masters, deployment.replicas[owner]);
    let no_sync = Client::builder(url).sync_replicas(false).build().expect("client without replica sync");
    let default = Client::open(url).expect("client with the default settings");
    let no_sync_lock: AnyLock = no_sync.lock(name).into();
    let default_lock: AnyLock = default.lock(name).into();
    let mut limit_conn = servers[owner].conn();
    let limit = keyed_trivial_call(&mut limit_conn, name);
    let mut raw_conn = servers[owner].conn();
    let mut raw = RawPair::new(no_sync.id(), raw_name, deployment.shape == Shape::Cluster);
    let mut synced_conn = servers[owner].conn();
    // Loads the acquire script for the synced floor's `EVALSHA`.
    raw.run(&mut raw_conn);
    let raw = std::cell::RefCell::new(raw);
    let kinds = [PairKind::Limit, PairKind::Raw, PairKind::RawSynced, PairKind::NoSync, PairKind::Default];
    let mut counters = MasterCounters {
        conns: servers.iter().map(|s| s.conn()).collect(),
        owner,
        calls: kinds.iter().map(|_| servers.iter().map(|_| HashMap::new()).collect()).collect(),
        pids: [servers[owner], replica].map(|s| s.pid().expect("a running server").to_string()),
        ticks_at_reset: [0; 2],
        ticks: vec![[0; 2]; kinds.len()],
    };
    let mut ops: Vec<PairOp> = vec![
        twice(|| {
            let one: i64 = limit.query(&mut limit_conn).expect("keyed trivial EVALSHA");
            assert_eq!(one, 1);
        }),
        Box::new(|| raw.borrow_mut().run(&mut raw_conn)),
        Box::new(|| raw.borrow_mut().run_synced(&mut synced_conn, 1)),
        Box::new(|| library_pair(&no_sync_lock)),
        Box::new(|| library_pair(&default_lock)),
    ];
    let stats = measure_pairs_with(&mut ops, plan.warmup, plan.pairs / 2, Some(&mut counters));
    drop(ops);
    kinds
        .into_iter()
        .zip(stats)
        .zip(counters.calls)
        .zip(counters.ticks)
        .map(|(((kind, stats), per_master), ticks)| {
            let pairs = stats.pair.n as f64;
            // USER_HZ ticks of 10 ms.
            let [cpu_owner_us, cpu_replica_us] = ticks.map(|t| t as f64 * 10_000.0 / pairs);
            let served = per_master
                .into_iter()
                .map(|calls| {
                    let mut served = Served::default();
                    for (command, n) in calls {
                        match origin(&command) {
                            Origin::Benchmark => {}
                            Origin::Replication => {
                                served.replication += n as f64 / pairs;
                                served.replication_calls += n;
                            }
                            Origin::Client => {
                                served.sent.push((command, n as f64 / pairs));
                                served.calls += n;
                            }
                            Origin::Script => {
                                served.in_scripts += n as f64 / pairs;
                                served.calls += n;
                            }
                        }
                    }
                    served.sent.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                    served
                })
                .collect();
            ReplicatedPair { kind, stats, served, cpu_owner_us, cpu_replica_us }
        })
        .collect()
}

/// One holder here and one waiter in a child process, each with a client of the deployment
/// that does (or does not) wait for a replica after its grants, handing a lock back and
/// forth.
struct HandoffRig {
    channel: String,
    /// `PUBSUB`'s count of the channel's subscribers: `SHARDNUMSUB` on a cluster.
    numsub: &'static str,
    holder: Box<dyn Contender>,
    child: Worker,
    /// To the master that serves the lock's slot (and its channel's shard).
    raw: redis::Connection,
}

impl HandoffRig {
    fn new(url: &str, owner: &RedisServer, shape: Shape, name: String, sync: bool) -> HandoffRig {
        let client = Client::builder(url).sync_replicas(sync).build().expect("client for the hand-offs");
        let mut holder = Process::with_client(Subject::Lock(LockKind::Plain), &client).contender(&name);
        let child = Worker::spawn(
            "replicated-handoff",
            &[(URL_ENV, url.to_string()), (LOCK_ENV, name.clone()), (SYNC_ENV, u8::from(sync).to_string())],
        );
        child.expect("ready");
        assert!(holder.try_take(), "the hand-off lock starts free");
        let numsub = if shape == Shape::Cluster { "SHARDNUMSUB" } else { "NUMSUB" };
        HandoffRig { channel: format!("redisson_lock__channel:{{{name}}}"), numsub, holder, child, raw: owner.conn() }
    }

    /// One hand-off, as step 2's: from just before the release to the child's return from
    /// `lock()`, in nanoseconds.
    fn round(&mut self) -> u64 {
        self.child.send("go");
        self.child.expect("waiting");
        // Parked: subscribed to the lock's channel (on its shard).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (_, count): (String, u64) =
                redis::cmd("PUBSUB").arg(self.numsub).arg(&self.channel).query(&mut self.raw).expect("PUBSUB NUMSUB");
            if count >= 1 {
                break;
            }
            assert!(Instant::now() < deadline, "the waiting child did not park on {} within 10 s", self.channel);
            thread::sleep(Duration::from_micros(100));
        }
        timed_release(self.holder.as_mut(), &self.child)
    }

    fn finish(mut self) {
        self.holder.give_back();
        self.child.send("quit");
        self.child.finish();
    }
}

/// Hand-offs without and with replica sync, in alternating blocks, on locks served by
/// `owner`.
fn measure_handoffs(deployment: &Deployment, owner: usize, plan: &Plan) -> Vec<(bool, Summary)> {
    let owner_server = deployment.masters[owner];
    let mut conn = owner_server.conn();
    let mut rigs: Vec<(bool, HandoffRig)> = [false, true]
        .into_iter()
        .map(|sync| {
            let prefix = format!("{}:handoff:sync-{sync}", deployment.shape.prefix());
            let name = deployment.slots.name_on(&mut conn, &prefix, owner);
            (sync, HandoffRig::new(&deployment.url, owner_server, deployment.shape, name, sync))
        })
        .collect();
    for (_, rig) in &mut rigs {
        for _ in 0..HANDOFF_WARMUP {
            rig.round();
        }
    }
    let mut samples: Vec<Vec<u64>> = rigs.iter().map(|_| Vec::with_capacity(plan.handoffs)).collect();
    for _ in 0..HANDOFF_BLOCKS {
        for ((_, rig), samples) in rigs.iter_mut().zip(&mut samples) {
            for _ in 0..(plan.handoffs / HANDOFF_BLOCKS).max(1) {
                samples.push(rig.round());
            }
        }
    }
    let syncs: Vec<bool> = rigs.iter().map(|(sync, _)| *sync).collect();
    for (_, rig) in rigs {
        rig.finish();
    }
    syncs.into_iter().zip(samples.into_iter().map(Summary::of_nanos)).collect()
}

/// Child: the waiter of the hand-offs, with a client of the deployment that waits for a
/// replica after its grants when `SYNC_ENV` is "1".
pub(crate) fn replicated_handoff_child() {
    let sync = child_env(SYNC_ENV) == "1";
    let client = Client::builder(child_env(URL_ENV)).sync_replicas(sync).build().expect("client of the waiter");
    serve_handoffs(Process::with_client(Subject::Lock(LockKind::Plain), &client).contender(&child_env(LOCK_ENV)));
    let _ = std::io::stdout().flush();
}

/// The watchdog of one client of the deployment renewing the leases `names`, held by one
/// thread, with the pipelined limit of each master measured just before they were taken;
/// its renewals `confirmed` by the replicas (the default: each batch waits for them) or not
/// (`sync_replicas(false)`, whose grants do not wait either).
fn measure_renewal(
    url: &str,
    servers: &[&RedisServer],
    slots: &SlotMap,
    (layout, confirmed): (Layout, bool),
    names: &[String],
    plan: &Plan,
) -> ReplicatedRenewal {
    let (client, events) = renewal_client(Client::builder(url).sync_replicas(confirmed));
    let mut conns: Vec<redis::Connection> = servers.iter().map(|s| s.conn()).collect();
    let master_of = slots.masters_of(&mut conns[0], names);
    let mut on_node: Vec<Vec<&String>> = servers.iter().map(|_| Vec::new()).collect();
    for (name, &master) in names.iter().zip(&master_of) {
        on_node[master].push(name);
    }
    let mut nodes = nodes_before(&mut conns, &on_node, plan);

    let (guards, acquired) = take_leases(&client, names);

    for conn in &mut conns {
        reset_server_stats(conn);
    }
    let (watched, after) = Watched::hold(&client, plan);
    assert_eq!(after.leases, names.len(), "every lease is still registered");
    read_renewal_counters(&mut nodes, &mut conns);

    let held = guards.iter().filter(|g| g.is_held()).count();
    for ((node, conn), names) in nodes.iter_mut().zip(&mut conns).zip(&on_node) {
        (node.keys_alive, node.min_ttl_ms) = ttls(conn, names);
    }
    let dropped = drop_leases(guards);
    for ((node, conn), names) in nodes.iter_mut().zip(&mut conns).zip(&on_node) {
        node.keys_left = keys_left(conn, names);
    }
    assert_eq!(client.stats().leases, 0, "every lease is forgotten after its guard dropped");

    ReplicatedRenewal {
        layout,
        confirmed,
        leases: names.len(),
        acquired,
        watched,
        nodes,
        held,
        lost_events: events.lost.load(Ordering::Relaxed),
        failed_renewals: events.renewal_failed.load(Ordering::Relaxed),
        first_error: events.first_renewal_error.lock().expect("first renewal error").clone(),
        dropped,
        failed_releases: events.release_failed.load(Ordering::Relaxed),
    }
}

/// Each master before the leases `on_node[i]` are taken: the keys in its database, its
/// leases, and its pipelined limit.
fn nodes_before(conns: &mut [redis::Connection], on_node: &[Vec<&String>], plan: &Plan) -> Vec<NodeRenewal> {
    let mut nodes: Vec<NodeRenewal> = on_node
        .iter()
        .zip(conns.iter_mut())
        .map(|(names, conn)| NodeRenewal {
            keys_before: redis::cmd("DBSIZE").query(conn).expect("DBSIZE"),
            leases: names.len(),
            ..NodeRenewal::default()
        })
        .collect();
    for (node, conn) in nodes.iter_mut().zip(conns) {
        node.pipelined_per_sec = pipelined_rate(conn, plan.pipelines);
    }
    nodes
}

/// Each master's renew scripts over the window, and the leases they looked at and renewed.
fn read_renewal_counters(nodes: &mut [NodeRenewal], conns: &mut [redis::Connection]) {
    for (node, conn) in nodes.iter_mut().zip(conns) {
        // The `INFO`s first: each reading of the stats is an `INFO` itself.
        let (infos, info_usec) = server_command_stats(conn, "info");
        let (round_trips, usec) = server_command_stats(conn, "evalsha");
        node.round_trips = round_trips;
        node.server_time = Duration::from_micros(usec);
        node.looked_at = server_command_stats(conn, "hexists").0;
        node.renewed = server_command_stats(conn, "pexpire").0;
        let (waits, wait_usec) = server_command_stats(conn, "wait");
        (node.waits, node.infos) = (waits, infos);
        node.confirm_time = Duration::from_micros(wait_usec + info_usec);
    }
}

/// How many of the keys `names` are left on `conn`.
fn keys_left(conn: &mut redis::Connection, names: &[&String]) -> u64 {
    let mut left_in_all = 0;
    for chunk in names.chunks(PIPELINE) {
        // One key per command: a cluster node refuses keys of several slots in one.
        let mut pipe = redis::pipe();
        for name in chunk {
            pipe.cmd("EXISTS").arg(name.as_str());
        }
        let left: Vec<u64> = pipe.query(conn).expect("EXISTS of the lease keys");
        left_in_all += left.iter().sum::<u64>();
    }
    left_in_all
}
