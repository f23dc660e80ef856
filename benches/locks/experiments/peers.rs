//! Step 9, peers: the fastest Rust crates of the same kind, on the same `redis-server` in
//! the same run, each through its public sync API with its default options (see
//! [`Peer`]): the uncontended acquire + release pair interleaved with the limit pair and
//! the library's (its spin lock's too); the hand-off to a waiter in another process,
//! alternating with the library's plain lock and spin lock (whose waiter polls as theirs
//! do); and throughput on one lock across 2 processes.

use std::fmt::Write as _;
use std::time::Duration;

use redlease::{AnyLock, Client};
use redlease_testkit::server::RedisServer;

use crate::experiments::LockKind;
use crate::experiments::contenders::{
    Contender, Peer, Process, SPIN_FIRST_SLEEP, SPIN_MAX_SLEEP, Spin, Subject, contender_pair,
};
use crate::experiments::handoff::{HANDOFF_BLOCKS, measure_handoff_blocks};
use crate::experiments::limit::{PIPELINE, trivial_call, trivial_pair};
use crate::experiments::throughput::{PROCESSES, THREADS_PER_PROCESS, Throughput, measure_throughput, throughput_row};
use crate::experiments::uncontended::library_pair;
use crate::plan::Plan;
use crate::stats::{PAIR_BLOCKS, PairOp, PairStats, Summary, measure_pairs_counting};
use crate::table::{handoff_head, handoff_row, pair_row};

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
        trivial_pair(&trivial, &mut trivial_conn),
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

    let limit_pair = trivial_pair(&trivial, &mut trivial_conn);
    let (crowded_trivial, crowded_redis_lock) = measure_crowded(limit_pair, &mut *redis_lock, &mut stats_conn, plan);
    let handoffs = measure_peer_handoffs(server, &client, plan);
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

/// The limit pair (`limit_pair`) and redis-lock's pair again, with `CROWD` more keys in
/// the database: redis-lock's release scans every key of it.
fn measure_crowded(
    limit_pair: PairOp,
    redis_lock: &mut dyn Contender,
    stats_conn: &mut redis::Connection,
    plan: &Plan,
) -> (PairStats, PairStats) {
    let crowd: Vec<String> = (0..CROWD).map(|i| format!("bench:peers:crowd:{i}")).collect();
    for chunk in crowd.chunks(PIPELINE) {
        let mut pipe = redis::pipe();
        for key in chunk {
            pipe.cmd("SET").arg(key).arg("x").ignore();
        }
        pipe.query::<()>(stats_conn).expect("SET the crowd");
    }
    let mut ops: Vec<PairOp> = vec![limit_pair, Box::new(|| contender_pair(redis_lock))];
    let counted = [&["evalsha"][..], Peer::RedisLock.commands()];
    let stats = measure_pairs_counting(&mut ops, &counted, 5, plan.crowded_pairs, Some(&mut *stats_conn));
    drop(ops);
    for chunk in crowd.chunks(PIPELINE) {
        redis::cmd("DEL").arg(chunk).query::<()>(stats_conn).expect("DEL the crowd");
    }
    let mut kinds = stats.into_iter();
    let mut next = || kinds.next().expect("one result per kind");
    (next(), next())
}

/// Hand-offs of the library's plain lock, its spin lock with either back-off, and the
/// peers' locks, in alternating blocks.
fn measure_peer_handoffs(server: &RedisServer, client: &Client, plan: &Plan) -> Vec<(Subject, Summary)> {
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
    subjects.iter().copied().zip(measure_handoff_blocks(server, client, &subjects, &rounds)).collect()
}

/// Step 9's section, in round trips `rtt`; `step_3` is step 3's plain lock on one shared lock.
pub(crate) fn peers_section(out: &mut String, rtt: f64, p: &Peers, step_3: &Throughput) {
    let (rlock, redis_lock) = (locked_version("rlock"), locked_version("redis-lock"));
    let _ = writeln!(
        out,
        "### 9. Peers on the same server in the same run: `rlock` {rlock} and `redis-lock` {redis_lock}, sync \
         APIs, default options\n"
    );
    peers_intro(out, rlock, redis_lock);
    peers_pairs(out, rtt, p);
    peers_handoffs(out, rtt, p);
    peers_throughput(out, rtt, p, step_3);
}

/// What each of the peers is, in step 9's section.
fn peers_intro(out: &mut String, rlock: &str, redis_lock: &str) {
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
}

/// Step 9's uncontended pairs, and the fastest peer's against the library's.
fn peers_pairs(out: &mut String, rtt: f64, p: &Peers) {
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
    let fastest = [("rlock", &p.rlock), ("rlock without renewal", &p.rlock_no_renewal), ("redis-lock", &p.redis_lock)]
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
}

/// Step 9's hand-offs.
fn peers_handoffs(out: &mut String, rtt: f64, p: &Peers) {
    let _ = writeln!(
        out,
        "Hand-off to a waiter in another process, alternating ({HANDOFF_BLOCKS} blocks each). A polling waiter \
         cannot be seen waiting: the release comes at a random moment of its poll interval, as it would in use; \
         for the spin lock's default back-off, whose sleeps grow, at a random moment of the first {} ms of its \
         wait (its sleeps up to the longest, {} ms, and one longest sleep, jitter aside).\n",
        Spin::Exponential.release_window().as_millis(),
        SPIN_MAX_SLEEP.as_millis()
    );
    handoff_head(out, "hand-off");
    for (subject, h) in &p.handoffs {
        handoff_row(out, &handoff_label(*subject), h, rtt, None);
    }
    let _ = writeln!(out);
}

/// How step 9's hand-off table names the hand-off of `subject`.
fn handoff_label(subject: Subject) -> String {
    match subject {
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
    }
}

/// Step 9's throughput on one lock, the library's row from step 3.
fn peers_throughput(out: &mut String, rtt: f64, p: &Peers, step_3: &Throughput) {
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
    throughput_row(out, "redlease plain, one shared lock (step 3)", step_3, rtt);
    for t in &p.throughput {
        throughput_row(out, &format!("{}, one shared lock", t.subject.as_str()), t, rtt);
    }
    let _ = writeln!(out);
}

/// The version of `package` that Cargo.lock pins (the first, when several are).
fn locked_version(package: &str) -> &'static str {
    const LOCK: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock"));
    let entry = format!("name = \"{package}\"\nversion = \"");
    LOCK.find(&entry).and_then(|at| LOCK[at + entry.len()..].split('"').next()).unwrap_or("unknown")
}
