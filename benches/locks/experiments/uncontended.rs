//! Step 1, uncontended acquire + release of every lock kind, interleaved with two trivial
//! calls, with the plain lock's two scripts sent raw, and with Redisson's own two scripts
//! for the same lock sent raw when a Redisson checkout is named (`REDLEASE_REDISSON_SRC`:
//! the test kit reads them out of its Java sources; docs/design.md, "Interop").

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redlease::{AnyLock, Client};
use redlease_testkit::foreign::Foreign;
use redlease_testkit::foreign::redisson::{RedissonScripts, SOURCE_ENV};
use redlease_testkit::server::RedisServer;

use crate::experiments::limit::{Limit, trivial_call, trivial_pair};
use crate::plan::Plan;
use crate::stats::{PAIR_BLOCKS, PairOp, PairStats, measure_pairs};
use crate::table::{TARGET_PAIR_RATIO, pair_cells, pair_ratios};

/// As the library loads them: both scripts call functions of the prelude.
const ACQUIRE_LUA: &str = concat!(include_str!("../../../lua/prelude.lua"), include_str!("../../../lua/acquire.lua"));
const RELEASE_LUA: &str = concat!(include_str!("../../../lua/prelude.lua"), include_str!("../../../lua/release.lua"));

/// `lua/acquire.lua` and `lua/release.lua` as the library loads them (in the sharded build
/// of a cluster when `sharded`), sent raw with the arguments the library sends for
/// `try_lock()` and `unlock()` of a client with id `client_id`, on the lock `name`.
pub(crate) struct RawPair {
    acquire: redis::Script,
    release: redis::Script,
    name: String,
    waiters: String,
    client_id: String,
    owner: String,
    request: u64,
}

impl RawPair {
    pub(crate) fn new(client_id: &str, name: &str, sharded: bool) -> RawPair {
        let build = |source: &str| {
            redis::Script::new(&if sharded { source.replace("'publish'", "'spublish'") } else { source.to_string() })
        };
        RawPair {
            acquire: build(ACQUIRE_LUA),
            release: build(RELEASE_LUA),
            name: name.to_string(),
            waiters: format!("redlease_waiters:{{{name}}}"),
            client_id: client_id.to_string(),
            owner: format!("{client_id}:1"),
            request: 0,
        }
    }

    /// The acquire as the library sends it for `try_lock()` (no wake token: the caller
    /// does not wait).
    fn acquire(&self) -> redis::ScriptInvocation<'_> {
        let mut invocation = self.acquire.key(&self.name);
        invocation.key(&self.waiters).arg(30_000).arg(&self.owner).arg("").arg(5_000);
        invocation
    }

    /// One acquire and one release on `conn`; returns how long the acquire took.
    pub(crate) fn run(&mut self, conn: &mut redis::Connection) -> Duration {
        let start = Instant::now();
        let reply: Option<i64> = self.acquire().invoke(conn).expect("raw acquire");
        assert_eq!(reply, None, "raw acquire of a free lock");
        let first = start.elapsed();
        self.release(conn);
        first
    }

    /// The synced floor of a replicated master: the acquire with `WAIT replicas` behind it
    /// in one write (one round trip), then the release; returns how long the acquire and
    /// its acknowledgement took. The acquire script must have been loaded on `conn`'s
    /// server ([`run`](Self::run) loads it).
    pub(crate) fn run_synced(&mut self, conn: &mut redis::Connection, replicas: u64) -> Duration {
        let start = Instant::now();
        let (reply, acked): (Option<i64>, u64) = redis::pipe()
            .invoke_script(&self.acquire())
            .cmd("WAIT")
            .arg(replicas)
            .arg(1_000)
            .query(conn)
            .expect("raw acquire with WAIT behind it");
        assert_eq!(reply, None, "raw acquire of a free lock");
        assert!(acked >= replicas, "WAIT {replicas} answered {acked}");
        let first = start.elapsed();
        self.release(conn);
        first
    }

    fn release(&mut self, conn: &mut redis::Connection) {
        self.request += 1;
        // The request id as the library makes it: the client's UUID and a counter.
        let reply: Option<i64> = self
            .release
            .key(&self.name)
            .key(format!("redisson_unlock_latch:{{{}}}:{}:{}", self.name, self.client_id, self.request))
            .key(&self.waiters)
            .arg(0)
            .arg(30_000)
            .arg(&self.owner)
            .arg(12_000)
            .arg(format!("redisson_lock__channel:{{{}}}", self.name))
            .arg("0")
            .invoke(conn)
            .expect("raw release");
        assert_eq!(reply, Some(1), "raw release of a held lock");
    }
}

/// Redisson's own `RedissonLock` scripts, acquire and release of one lock, sent raw as
/// Redisson sends them: what Redisson's layout costs with Redisson's own scripts, the floor
/// redlease's scripts for the same layout are set against.
struct RedissonPair {
    acquire: redis::Script,
    release: redis::Script,
    name: String,
    request: u64,
}

impl RedissonPair {
    fn new(scripts: &RedissonScripts, name: &str) -> RedissonPair {
        let (acquire, release) = scripts.lock_pair();
        RedissonPair { acquire, release, name: name.to_string(), request: 0 }
    }

    /// One acquire and one release on `conn`; returns how long the acquire took.
    fn run(&mut self, conn: &mut redis::Connection) -> Duration {
        let owner = "5f0c3a1e-8d2b-4c6f-9a7e-1b2c3d4e5f60:1";
        let start = Instant::now();
        let reply: Option<i64> =
            self.acquire.key(&self.name).arg(30_000).arg(owner).invoke(conn).expect("Redisson's acquire");
        assert_eq!(reply, None, "Redisson's acquire of a free lock");
        let first = start.elapsed();
        self.request += 1;
        let reply: Option<i64> = self
            .release
            .key(&self.name)
            .key(format!("redisson_lock__channel:{{{}}}", self.name))
            .key(format!("redisson_unlock_latch:{{{}}}:{}", self.name, self.request))
            .arg(0)
            .arg(30_000)
            .arg(owner)
            .arg("publish")
            .arg(12_000)
            .invoke(conn)
            .expect("Redisson's release");
        assert_eq!(reply, Some(1), "Redisson's release of a held lock");
        first
    }
}

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
    /// Redisson's own scripts for the same pair, sent raw: the layout's cost with Redisson's
    /// scripts, and which Redisson they came from; or why they were left out.
    pub(crate) redisson_scripts: Result<(PairStats, String), String>,
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
    let mut redisson_conn = server.conn();
    let trivial = trivial_call(&mut trivial_conn);
    let mut raw = RawPair::new(client.id(), "bench:uncontended:raw", false);
    let redisson_scripts = match RedissonScripts::from_env() {
        Ok(Some(scripts)) => Ok(scripts),
        Ok(None) => Err(format!("left out: {SOURCE_ENV} names no Redisson checkout to read them from")),
        Err(problem) => panic!("{SOURCE_ENV}: {problem}"),
    };
    let mut redisson = redisson_scripts.as_ref().ok().map(|s| RedissonPair::new(s, "bench:uncontended:redisson"));

    let mut ops: Vec<PairOp> = vec![trivial_pair(&trivial, &mut trivial_conn), Box::new(|| raw.run(&mut raw_conn))];
    if let Some(redisson) = redisson.as_mut() {
        ops.push(Box::new(|| redisson.run(&mut redisson_conn)));
    }
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
        redisson_scripts: redisson_scripts.map(|scripts| (next(), scripts.who())),
        watchdog: next(),
        fixed: next(),
        fair: next(),
        read: next(),
        write: next(),
    }
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
            "| {what} | {} | {:.2} | {to_rtt:.3} | {to_pair:.3} | {target} |",
            pair_cells(x),
            x.server_usec
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
