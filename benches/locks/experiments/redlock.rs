//! Step 6, Redlock over several `redis-server`s: acquire + release against one node's plain
//! lock and against the same round trips fanned out by hand, healthy and with one node
//! blackholed behind a proxy.

use std::fmt::Write as _;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{AnyLock, Client, RedLock};
use redlease_testkit::proxy::Proxy;
use redlease_testkit::server::RedisServer;

use crate::experiments::limit::trivial_call;
use crate::experiments::uncontended::library_pair;
use crate::plan::Plan;
use crate::stats::{PAIR_BLOCKS, PairOp, PairStats, measure_pairs, twice};
use crate::table::pair_cells;

/// Redlock sizes measured.
pub(crate) const RED_NODES: [usize; 2] = [3, 5];
/// The per-node timeout the Redlock runs set.
pub(crate) const RED_NODE_TIMEOUT: Duration = Duration::from_millis(20);
/// Pairs before the measured ones with one node blackholed.
const BLACKHOLED_WARMUP: usize = 3;

pub(crate) struct RedlockRun {
    pub(crate) nodes: usize,
    /// `try_lock` + `unlock` of a plain lock on the first node.
    pub(crate) plain: PairStats,
    /// Two rounds of a trivial `EVALSHA` to every node from one thread (all sent, then all
    /// read): the limit of a Redlock pair.
    pub(crate) fan_out: PairStats,
    /// The same from one scoped thread per node, as the library asks the nodes.
    pub(crate) fan_out_threads: PairStats,
    /// Two scopes of one thread per node that do nothing: thread start-up alone.
    pub(crate) threads_only: PairStats,
    /// `RedLock::try_lock` + `unlock`.
    pub(crate) red: PairStats,
    /// The first pair after the last node fell silent (behind a blackholed proxy): its
    /// acquire waits the node timeout.
    pub(crate) first_silent: Duration,
    /// The pairs after it: while the undo of that first attempt waits on the silent node,
    /// the owner's attempts count the node as failed at once.
    pub(crate) blackholed: PairStats,
}

pub(crate) fn measure_redlock(servers: &[RedisServer], plan: &Plan) -> RedlockRun {
    let n = servers.len();
    let clients: Vec<Client> = servers.iter().map(|s| Client::open(&s.url()).expect("Redlock node client")).collect();
    let plain: AnyLock = clients[0].lock("bench:redlock:plain").into();
    let red = RedLock::new(clients.iter().map(|c| c.lock("bench:redlock"))).node_timeout(RED_NODE_TIMEOUT);
    let mut one_thread: Vec<redis::Connection> = servers.iter().map(RedisServer::conn).collect();
    let mut per_thread: Vec<redis::Connection> = servers.iter().map(RedisServer::conn).collect();
    let calls: Vec<redis::Cmd> = per_thread.iter_mut().map(trivial_call).collect();
    // Loading the trivial script through `per_thread` loaded it on every node.
    let packed = calls[0].get_packed_command();

    let fan_out = |conns: &mut [redis::Connection]| {
        for conn in conns.iter_mut() {
            conn.send_packed_command(&packed).expect("send a trivial EVALSHA");
        }
        for conn in conns.iter_mut() {
            assert_eq!(conn.recv_response().expect("trivial EVALSHA reply"), redis::Value::Int(1));
        }
    };
    let fan_out_threads = |conns: &mut [redis::Connection]| {
        thread::scope(|scope| {
            for (conn, call) in conns.iter_mut().zip(&calls) {
                scope.spawn(move || {
                    let one: i64 = call.query(conn).expect("trivial EVALSHA");
                    assert_eq!(one, 1);
                });
            }
        });
    };
    let threads_only = || thread::scope(|scope| (0..n).for_each(|_| drop(scope.spawn(|| ()))));
    let red_pair = |red: &RedLock| {
        let start = Instant::now();
        let guard = red.try_lock().expect("Redlock try_lock").expect("the Redlock is granted");
        let acquired = start.elapsed();
        guard.unlock().expect("Redlock unlock");
        acquired
    };
    let mut ops: Vec<PairOp> = vec![
        Box::new(|| library_pair(&plain)),
        twice(|| fan_out(&mut one_thread)),
        twice(|| fan_out_threads(&mut per_thread)),
        twice(threads_only),
        Box::new(|| red_pair(&red)),
    ];
    let stats = measure_pairs(&mut ops, plan.warmup / 4, plan.red_pairs, None);
    drop(ops);
    let mut kinds = stats.into_iter();
    let mut next = || kinds.next().expect("one result per kind");
    let (plain, fan_out, fan_out_threads, threads_only, red_stats) = (next(), next(), next(), next(), next());

    // The last node behind a proxy that swallows everything in both directions.
    let proxy = Proxy::start(servers[n - 1].addr());
    let proxied = Client::open(&proxy.url()).expect("client of the proxied node");
    let nodes = clients[..n - 1].iter().chain([&proxied]);
    let silent = RedLock::new(nodes.map(|c| c.lock("bench:redlock:blackholed"))).node_timeout(RED_NODE_TIMEOUT);
    for _ in 0..BLACKHOLED_WARMUP {
        red_pair(&silent);
    }
    proxy.set_blackhole(true);
    let first = Instant::now();
    red_pair(&silent);
    let first_silent = first.elapsed();
    let mut ops: Vec<PairOp> = vec![Box::new(|| red_pair(&silent))];
    let blackholed = measure_pairs(&mut ops, BLACKHOLED_WARMUP, plan.blackholed_pairs, None).pop().expect("one kind");
    drop(ops);
    drop(silent);
    drop(proxied);
    drop(proxy);
    RedlockRun { nodes: n, plain, fan_out, fan_out_threads, threads_only, red: red_stats, first_silent, blackholed }
}

/// Step 6's section.
pub(crate) fn redlock_section(out: &mut String, runs: &[RedlockRun]) {
    let _ = writeln!(
        out,
        "### 6. Redlock: one `redis-server` per node (pinned with the first one), one client each; node timeout \
         {} ms; interleaved blocks ({PAIR_BLOCKS} per kind)\n",
        RED_NODE_TIMEOUT.as_millis()
    );
    let _ = writeln!(
        out,
        "The limit of a Redlock pair is two rounds of requests sent to every node at once: \"fan-out\" sends a \
         trivial `EVALSHA` on every node's connection from one thread, then reads every reply. The library \
         asks the nodes from one scoped thread per node, at acquire and at release.\n"
    );
    let _ = writeln!(
        out,
        "| nodes | pair | n | mean µs | p50 µs | p99 µs | acquire mean µs | release mean µs | mean / plain pair | mean / fan-out pair |"
    );
    let _ = writeln!(out, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in runs {
        redlock_rows(out, r);
    }
    let _ = writeln!(out);
    for r in runs {
        redlock_note(out, r);
    }
    let _ = writeln!(out);
}

/// The rows of one Redlock size in step 6's table.
fn redlock_rows(out: &mut String, r: &RedlockRun) {
    let (plain, limit) = (r.plain.pair.mean, r.fan_out.pair.mean);
    let rows = [
        ("plain lock `try_lock()` + `unlock()` on the first node".to_string(), &r.plain),
        ("two fan-out rounds of a trivial `EVALSHA`, one thread (the limit)".to_string(), &r.fan_out),
        (format!("the same from {} scoped threads per round", r.nodes), &r.fan_out_threads),
        (format!("two scopes of {} threads that do nothing", r.nodes), &r.threads_only),
        ("**`RedLock` `try_lock()` + `unlock()`**".to_string(), &r.red),
        (
            "**the same, one node blackholed**, after the first such pair (the node counted as failed while \
             that pair's undo waits on it)"
                .to_string(),
            &r.blackholed,
        ),
    ];
    for (what, x) in rows {
        let _ = writeln!(
            out,
            "| {} | {what} | {} | {:.3} | {:.3} |",
            r.nodes,
            pair_cells(x),
            x.pair.mean / plain,
            x.pair.mean / limit
        );
    }
}

/// Step 6's note on one Redlock size: what the threads, the fan-out and a silent node cost.
fn redlock_note(out: &mut String, r: &RedlockRun) {
    let floor = RED_NODE_TIMEOUT.as_secs_f64() * 1e6 + r.fan_out.acquire.mean;
    let _ = writeln!(
        out,
        "- {} nodes: thread start-up {:.1} µs per pair ({} threads twice; {:.0} % of the Redlock pair); fan-out \
         from threads costs {:.1} µs more than from one thread; the Redlock pair {:.1} µs more than the \
         threaded fan-out. Blackholed: the first pair after the node fell silent took {:.2} ms = {:.3} × \
         the floor of {:.2} ms (the node timeout of {} ms and one fan-out round); the pairs after it, while \
         that attempt's undo waits on the silent node (up to the command timeout), count it as failed at \
         once: acquire mean {:.2} ms, release mean {:.1} µs, pair {:.2} ms.",
        r.nodes,
        r.threads_only.pair.mean,
        r.nodes,
        r.threads_only.pair.mean / r.red.pair.mean * 100.0,
        r.fan_out_threads.pair.mean - r.fan_out.pair.mean,
        r.red.pair.mean - r.fan_out_threads.pair.mean,
        r.first_silent.as_secs_f64() * 1e3,
        r.first_silent.as_secs_f64() * 1e6 / floor,
        floor / 1e3,
        RED_NODE_TIMEOUT.as_millis(),
        r.blackholed.acquire.mean / 1e3,
        r.blackholed.release.mean,
        r.blackholed.pair.mean / 1e3,
    );
}
