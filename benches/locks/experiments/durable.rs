//! Step 15, grants a crash cannot take back (`ClientBuilder::sync_mode`): what waiting for
//! the master's append-only file costs a pair. On Valkey 9.1 (the test matrix's server with
//! `WAITAOF`, fetched by `scripts/ensure-servers`) with `appendonly yes` and `appendfsync
//! everysec`, its data on this machine's disk: the pair under `SyncMode::Wait` and
//! `SyncMode::Auto`, interleaved with the limit pair (two trivial calls) and with the floor
//! of a durable grant (a trivial write and `WAITAOF 1 0` in one round trip, then a trivial
//! call); the same two pairs on a Valkey with `appendfsync always`; and `Auto` on a Valkey
//! without AOF, where it asks about the disk once a second. A durable grant waits for a
//! sync the server makes at its cron's ticks, so the step takes [`PAIRS`] of each kind
//! in a quick run as in a full one.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use redlease::{AnyLock, Client, SyncMode};
use redlease_testkit::server::RedisServer;

use crate::experiments::limit::{trivial_call, trivial_pair};
use crate::experiments::uncontended::library_pair;
use crate::placement::Placement;
use crate::stats::{PairOp, PairStats, measure_pairs};

/// Pairs of each kind (a tenth of a second each for a grant that waits for the disk).
const PAIRS: usize = 200;
/// Pairs of each kind before the measured ones.
const WARMUP: usize = 10;

/// Where `scripts/ensure-servers` puts Valkey 9.1.
const VALKEY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/target/servers/valkey-9.1/valkey-server");

pub(crate) struct Durable {
    /// What `valkey-server --version` says.
    pub(crate) server: String,
    pub(crate) limit: PairStats,
    pub(crate) floor: PairStats,
    pub(crate) wait: PairStats,
    pub(crate) auto: PairStats,
    /// `Wait` and `Auto` on the server with `appendfsync always`.
    pub(crate) wait_always: PairStats,
    pub(crate) auto_always: PairStats,
    /// `Auto` on the server without AOF.
    pub(crate) auto_without_aof: PairStats,
}

/// `None` when Valkey has not been fetched (`scripts/ensure-servers`).
pub(crate) fn measure_durable(placement: &Placement) -> Option<Durable> {
    let binary = PathBuf::from(VALKEY);
    if !binary.is_file() {
        return None;
    }
    let version = std::process::Command::new(&binary).arg("--version").output().ok()?;
    let server = String::from_utf8_lossy(&version.stdout).split(" sha=").next().unwrap_or_default().to_owned();
    let aof = RedisServer::start_binary_with(binary.clone(), &["--appendonly", "yes", "--appendfsync", "everysec"]);
    let always = RedisServer::start_binary_with(binary.clone(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let plain = RedisServer::start_binary_with(binary, &[]);
    for server in [&aof, &always, &plain] {
        placement.pin_server(server);
    }

    let client = |server: &RedisServer, mode: SyncMode| {
        Client::builder(server.url()).sync_mode(mode).build().expect("client for the durable run")
    };
    let clients = [
        client(&aof, SyncMode::Wait),
        client(&aof, SyncMode::Auto),
        client(&always, SyncMode::Wait),
        client(&always, SyncMode::Auto),
        client(&plain, SyncMode::Auto),
    ];
    let locks: Vec<AnyLock> = clients.iter().map(|client| client.lock("bench:durable").into()).collect();
    let (mut trivial_conn, mut floor_conn, mut stats_conn) = (aof.conn(), aof.conn(), aof.conn());
    let trivial = trivial_call(&mut trivial_conn);
    let floor_trivial = trivial_call(&mut floor_conn);
    let write = redis::Script::new("return redis.call('incr', KEYS[1])");
    let mut durable_write = redis::pipe();
    durable_write.cmd("EVALSHA").arg(write.get_hash()).arg(1).arg("bench:durable:floor");
    durable_write.cmd("WAITAOF").arg(1).arg(0).arg(1000);
    // Loaded once, so that the pipeline's EVALSHA finds it.
    let _: i64 = write.key("bench:durable:floor").invoke(&mut floor_conn).expect("the floor's write");

    let mut ops: Vec<PairOp> = vec![
        trivial_pair(&trivial, &mut trivial_conn),
        Box::new(|| {
            let start = Instant::now();
            let (_, synced): (i64, (i64, i64)) = durable_write.query(&mut floor_conn).expect("a write and WAITAOF");
            assert_eq!(synced.0, 1, "the write is on the disk");
            let first = start.elapsed();
            let _: i64 = floor_trivial.query(&mut floor_conn).expect("trivial EVALSHA");
            first
        }),
    ];
    for lock in &locks {
        ops.push(Box::new(move || library_pair(lock)));
    }
    let stats = measure_pairs(&mut ops, WARMUP, PAIRS, Some(&mut stats_conn));
    drop(ops);
    let mut kinds = stats.into_iter();
    let mut next = || kinds.next().expect("one result per kind");
    Some(Durable {
        server,
        limit: next(),
        floor: next(),
        wait: next(),
        auto: next(),
        wait_always: next(),
        auto_always: next(),
        auto_without_aof: next(),
    })
}

/// Step 15's section of the report.
pub(crate) fn durable_section(out: &mut String, durable: Option<&Durable>) {
    let _ = writeln!(out, "### 15. Grants a crash cannot take back (`sync_mode`)\n");
    let Some(d) = durable else {
        let _ = writeln!(out, "Left out: no Valkey under target/servers/ (`scripts/ensure-servers` fetches it).\n");
        return;
    };
    let _ = writeln!(
        out,
        "{} with `appendonly yes`, `appendfsync everysec` (unless a row says otherwise), its data on \
         this machine's disk, {PAIRS} pairs of each kind; ratios to the limit pair on the same server, \
         in the blocks in between.\n",
        d.server
    );
    let _ = writeln!(out, "| pair | n | mean µs | p50 µs | p99 µs | acquire mean µs | mean / limit pair |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    let limit = d.limit.pair.mean;
    let rows = [
        ("two trivial `EVALSHA`s (the limit pair)", &d.limit),
        ("a trivial write + `WAITAOF 1 0` in one round trip, then a trivial call (the floor)", &d.floor),
        ("**`try_lock()` + `unlock()`, `SyncMode::Wait`**", &d.wait),
        ("**`try_lock()` + `unlock()`, `SyncMode::Auto`**", &d.auto),
        ("`try_lock()` + `unlock()`, `SyncMode::Wait`, `appendfsync always`", &d.wait_always),
        ("`try_lock()` + `unlock()`, `SyncMode::Auto`, `appendfsync always`", &d.auto_always),
        ("`try_lock()` + `unlock()`, `SyncMode::Auto`, a server without AOF", &d.auto_without_aof),
    ];
    for (what, x) in rows {
        let _ = writeln!(
            out,
            "| {what} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} |",
            x.pair.n,
            x.pair.mean,
            x.pair.p50,
            x.pair.p99,
            x.acquire.mean,
            x.pair.mean / limit
        );
    }
    let _ = writeln!(out);
}
