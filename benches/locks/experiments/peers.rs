//! Step 9, peers: the fastest Rust crates of the same kind, on the same `redis-server` in
//! the same run, each through its public sync API with its default options (see
//! [`Peer`]): the uncontended acquire + release pair interleaved with the limit pair and
//! the library's (its spin lock's too); the hand-off to a waiter in another process,
//! alternating with the library's plain lock and spin lock (whose waiter polls as theirs
//! do); and throughput on one lock across 2 processes.

use std::time::Duration;

use redlease::{AnyLock, Client};
use redlease_testkit::server::RedisServer;

use crate::experiments::LockKind;
use crate::experiments::contenders::{Peer, Process, Spin, Subject, contender_pair};
use crate::experiments::handoff::measure_handoff_blocks;
use crate::experiments::limit::{PIPELINE, trivial_call};
use crate::experiments::throughput::{Throughput, measure_throughput};
use crate::experiments::uncontended::library_pair;
use crate::plan::Plan;
use crate::stats::{PairOp, PairStats, Summary, measure_pairs_counting, twice};

/// Unrelated keys added for the second redis-lock measurement: its release scans them all.
pub(crate) const CROWD: usize = 10_000;
/// The fixed lease of the library's second row: rlock's default TTL.
pub(crate) const LIBRARY_FIXED_LEASE: Duration = Duration::from_secs(10);

pub(crate) struct Peers {
    /// Keys in the database while the pairs ran.
    pub(crate) keys: u64,
    pub(crate) trivial: PairStats,
    /// The library's plain lock, watchdog lease and fixed lease.
    pub(crate) watchdog: PairStats,
    pub(crate) fixed: PairStats,
    /// The library's spin lock (the plain lock's scripts, no publish), watchdog lease.
    pub(crate) spin: PairStats,
    pub(crate) rlock: PairStats,
    pub(crate) rlock_no_renewal: PairStats,
    pub(crate) redis_lock: PairStats,
    /// The limit pair and redis-lock's pair again with `CROWD` more keys in the database.
    pub(crate) crowded_trivial: PairStats,
    pub(crate) crowded_redis_lock: PairStats,
    /// Hand-offs: the library's plain lock, its spin lock with the default and with a
    /// constant 1 ms back-off, rlock, redis-lock.
    pub(crate) handoffs: Vec<(Subject, Summary)>,
    /// Throughput of rlock and redis-lock on one lock.
    pub(crate) throughput: Vec<Throughput>,
}

pub(crate) fn measure_peers(server: &RedisServer, plan: &Plan) -> Peers {
    let url = server.url();
    let client = Client::open(&url).expect("client for the peers run");
    let watchdog: AnyLock = client.lock("bench:peers:watchdog").into();
    let fixed: AnyLock = client.lock("bench:peers:fixed").with_lease(LIBRARY_FIXED_LEASE).into();
    let spin: AnyLock = client.spin_lock("bench:peers:spin").into();
    let open = |peer: Peer, name: &str| Process::open(Subject::Peer(peer), &url).contender(name);
    let mut rlock = open(Peer::Rlock, "bench:peers:rlock");
    let mut rlock_no_renewal = open(Peer::RlockNoRenewal, "bench:peers:rlock-no-renewal");
    let mut redis_lock = open(Peer::RedisLock, "bench:peers:redis-lock");
    let (mut trivial_conn, mut stats_conn) = (server.conn(), server.conn());
    let trivial = trivial_call(&mut trivial_conn);
    let keys: u64 = redis::cmd("DBSIZE").query(&mut stats_conn).expect("DBSIZE");

    let evalsha: &[&str] = &["evalsha"];
    let counted = [
        evalsha,
        evalsha,
        evalsha,
        evalsha,
        Peer::Rlock.commands(),
        Peer::RlockNoRenewal.commands(),
        Peer::RedisLock.commands(),
    ];
    let mut ops: Vec<PairOp> = vec![
        twice(|| {
            let _: i64 = trivial.query(&mut trivial_conn).expect("trivial EVALSHA");
        }),
        Box::new(|| library_pair(&watchdog)),
        Box::new(|| library_pair(&fixed)),
        Box::new(|| library_pair(&spin)),
        Box::new(|| contender_pair(&mut *rlock)),
        Box::new(|| contender_pair(&mut *rlock_no_renewal)),
        Box::new(|| contender_pair(&mut *redis_lock)),
    ];
    let stats = measure_pairs_counting(&mut ops, &counted, plan.warmup, plan.pairs / 2, Some(&mut stats_conn));
    drop(ops);
    let mut kinds = stats.into_iter();
    let mut next = || kinds.next().expect("one result per kind");
    let (trivial_stats, watchdog, fixed, spin, rlock_stats, rlock_no_renewal, redis_lock_stats) =
        (next(), next(), next(), next(), next(), next(), next());

    // redis-lock's release scans every key of the database: the same with more of them.
    let crowd: Vec<String> = (0..CROWD).map(|i| format!("bench:peers:crowd:{i}")).collect();
    for chunk in crowd.chunks(PIPELINE) {
        let mut pipe = redis::pipe();
        for key in chunk {
            pipe.cmd("SET").arg(key).arg("x").ignore();
        }
        pipe.query::<()>(&mut stats_conn).expect("SET the crowd");
    }
    let mut ops: Vec<PairOp> = vec![
        twice(|| {
            let _: i64 = trivial.query(&mut trivial_conn).expect("trivial EVALSHA");
        }),
        Box::new(|| contender_pair(&mut *redis_lock)),
    ];
    let counted = [evalsha, Peer::RedisLock.commands()];
    let stats = measure_pairs_counting(&mut ops, &counted, 5, plan.crowded_pairs, Some(&mut stats_conn));
    drop(ops);
    for chunk in crowd.chunks(PIPELINE) {
        redis::cmd("DEL").arg(chunk).query::<()>(&mut stats_conn).expect("DEL the crowd");
    }
    let mut kinds = stats.into_iter();
    let mut next = || kinds.next().expect("one result per kind");
    let (crowded_trivial, crowded_redis_lock) = (next(), next());

    // A spin waiter with the default back-off sleeps up to 128 ms between attempts, as the
    // peers' waiters poll: as many rounds as theirs. With 1 ms, a round lasts a few ms: as
    // many as the plain lock's.
    let subjects = [
        Subject::Lock(LockKind::Plain),
        Subject::Spin(Spin::Exponential),
        Subject::Spin(Spin::Constant1Ms),
        Subject::Peer(Peer::Rlock),
        Subject::Peer(Peer::RedisLock),
    ];
    let rounds = [plan.handoffs, plan.peer_handoffs, plan.handoffs, plan.peer_handoffs, plan.peer_handoffs];
    let handoffs = subjects.iter().copied().zip(measure_handoff_blocks(server, &client, &subjects, &rounds)).collect();

    let throughput = [Peer::Rlock, Peer::RedisLock]
        .into_iter()
        .map(|peer| measure_throughput(server, plan, Subject::Peer(peer), true))
        .collect();

    Peers {
        keys,
        trivial: trivial_stats,
        watchdog,
        fixed,
        spin,
        rlock: rlock_stats,
        rlock_no_renewal,
        redis_lock: redis_lock_stats,
        crowded_trivial,
        crowded_redis_lock,
        handoffs,
        throughput,
    }
}
