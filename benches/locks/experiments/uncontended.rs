//! Step 1, uncontended acquire + release of every lock kind, interleaved with two trivial
//! calls and with the plain lock's two scripts sent raw.

use std::time::{Duration, Instant};

use redlease::{AnyLock, Client};
use redlease_testkit::server::RedisServer;

use crate::experiments::limit::trivial_call;
use crate::plan::Plan;
use crate::stats::{PairOp, PairStats, measure_pairs};

const ACQUIRE_LUA: &str = include_str!("../../../lua/acquire.lua");
/// As the library loads it: the release script calls `publish` of the prelude.
const RELEASE_LUA: &str = concat!(include_str!("../../../lua/prelude.lua"), include_str!("../../../lua/release.lua"));

/// `try_lock()` (which must succeed) then `unlock()`; returns how long the acquire took.
pub(crate) fn library_pair(lock: &AnyLock) -> Duration {
    let start = Instant::now();
    let guard = lock.try_lock().expect("try_lock").expect("an uncontended lock is free");
    let acquired = start.elapsed();
    guard.unlock().expect("unlock");
    acquired
}

pub(crate) struct Uncontended {
    /// Two trivial `EVALSHA`s: the limit, measured again between the other blocks.
    pub(crate) trivial: PairStats,
    /// `lua/acquire.lua` and `lua/release.lua` sent raw on a plain connection, with the
    /// arguments the library sends: the scripts' cost without the library's own work.
    pub(crate) raw_scripts: PairStats,
    pub(crate) watchdog: PairStats,
    pub(crate) fixed: PairStats,
    pub(crate) fair: PairStats,
    pub(crate) read: PairStats,
    pub(crate) write: PairStats,
}

pub(crate) fn measure_uncontended(server: &RedisServer, plan: &Plan) -> Uncontended {
    let client = Client::open(&server.url()).expect("client for the uncontended run");
    let rw = client.read_write_lock("bench:uncontended:rw");
    let locks: Vec<AnyLock> = vec![
        client.lock("bench:uncontended").into(),
        client.lock("bench:uncontended:fixed").with_lease(Duration::from_secs(30)).into(),
        client.fair_lock("bench:uncontended:fair").into(),
        rw.read().into(),
        rw.write().into(),
    ];
    let (mut trivial_conn, mut raw_conn, mut stats_conn) = (server.conn(), server.conn(), server.conn());
    let trivial = trivial_call(&mut trivial_conn);
    let (acquire_script, release_script) = (redis::Script::new(ACQUIRE_LUA), redis::Script::new(RELEASE_LUA));
    let raw_name = "bench:uncontended:raw";
    let owner = format!("{}:1", client.id());
    let mut request = 0u64;

    let mut ops: Vec<PairOp> = vec![
        Box::new(|| {
            let start = Instant::now();
            let _: i64 = trivial.query(&mut trivial_conn).expect("trivial EVALSHA");
            let first = start.elapsed();
            let _: i64 = trivial.query(&mut trivial_conn).expect("trivial EVALSHA");
            first
        }),
        Box::new(|| {
            let start = Instant::now();
            let reply: Option<i64> =
                acquire_script.key(raw_name).arg(30_000).arg(&owner).invoke(&mut raw_conn).expect("raw acquire");
            assert_eq!(reply, None, "raw acquire of a free lock");
            let first = start.elapsed();
            request += 1;
            // The request id as the library makes it: the client's UUID and a counter.
            let reply: Option<i64> = release_script
                .key(raw_name)
                .key(format!("redisson_unlock_latch:{{{raw_name}}}:{}:{request}", client.id()))
                .arg(0)
                .arg(30_000)
                .arg(&owner)
                .arg(12_000)
                .arg(format!("redisson_lock__channel:{{{raw_name}}}"))
                .arg("0")
                .invoke(&mut raw_conn)
                .expect("raw release");
            assert_eq!(reply, Some(1), "raw release of a held lock");
            first
        }),
    ];
    for lock in &locks {
        ops.push(Box::new(move || library_pair(lock)));
    }
    let stats = measure_pairs(&mut ops, plan.warmup, plan.pairs, Some(&mut stats_conn));
    drop(ops);
    let mut kinds = stats.into_iter();
    let mut next = || kinds.next().expect("one result per kind");
    Uncontended {
        trivial: next(),
        raw_scripts: next(),
        watchdog: next(),
        fixed: next(),
        fair: next(),
        read: next(),
        write: next(),
    }
}
