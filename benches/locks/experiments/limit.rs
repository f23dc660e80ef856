//! Step 0, the physical limit: a trivial `EVALSHA` round trip on a plain connection, one
//! by one and pipelined.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redlease_testkit::server::RedisServer;

use crate::plan::Plan;
use crate::stats::{PairOp, Summary, reset_server_stats, server_usec_per_call, time_each};

/// Calls per pipeline when measuring pipelined throughput.
pub(crate) const PIPELINE: usize = 1000;
/// Round trips made for this long before the limit is measured.
const LIMIT_WARMUP: Duration = Duration::from_secs(1);

pub(crate) struct Limit {
    /// One trivial EVALSHA round trip.
    pub(crate) rtt: Summary,
    /// Server time of one trivial EVALSHA, µs.
    pub(crate) server_usec: f64,
    /// Trivial EVALSHAs per second, pipelined `PIPELINE` at a time.
    pub(crate) pipelined_per_sec: f64,
}

pub(crate) fn measure_limit(server: &RedisServer, plan: &Plan) -> Limit {
    let mut conn = server.conn();
    let call = trivial_call(&mut conn);
    // Round trips until the machine is in its busy steady state (a VM's idle vCPU wakes
    // slower after a quiet spell), then the measured ones.
    let warm_until = Instant::now() + LIMIT_WARMUP;
    while Instant::now() < warm_until {
        let _: i64 = call.query(&mut conn).expect("trivial EVALSHA");
    }
    reset_server_stats(&mut conn);
    let rtt = time_each(plan.warmup, plan.round_trips, || {
        let one: i64 = call.query(&mut conn).expect("trivial EVALSHA");
        assert_eq!(one, 1);
    });
    let server_usec = server_usec_per_call(&mut conn, "evalsha");
    let pipelined_per_sec = pipelined_rate(&mut conn, plan.pipelines);
    Limit { rtt, server_usec, pipelined_per_sec }
}

/// Step 0's section.
pub(crate) fn limit_section(out: &mut String, l: &Limit) {
    let _ = writeln!(out, "### 0. Physical limit: `EVALSHA` of `return 1` on a plain `redis::Connection`\n");
    let _ =
        writeln!(out, "| calls | mean µs | p50 µs | p99 µs | server µs/call | pipelined, {PIPELINE} per pipeline |");
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        out,
        "| {} | **{:.1}** | {:.1} | {:.1} | {:.2} | **{:.0} calls/s** |\n",
        l.rtt.n, l.rtt.mean, l.rtt.p50, l.rtt.p99, l.server_usec, l.pipelined_per_sec
    );
    let _ = writeln!(out, "RTT in the ratios below is this mean, {:.1} µs.\n", l.rtt.mean);
}

/// The limit pair as a measured op: two trivial calls `call` on `conn`, timed as a pair;
/// returns how long the first took.
pub(crate) fn trivial_pair<'a>(call: &'a redis::Cmd, conn: &'a mut redis::Connection) -> PairOp<'a> {
    Box::new(move || {
        let start = Instant::now();
        let _: i64 = call.query(conn).expect("trivial EVALSHA");
        let first = start.elapsed();
        let _: i64 = call.query(conn).expect("trivial EVALSHA");
        first
    })
}

/// `EVALSHA` of `return 1` (loaded with `SCRIPT LOAD`).
pub(crate) fn trivial_call(conn: &mut redis::Connection) -> redis::Cmd {
    let sha: String =
        redis::cmd("SCRIPT").arg("LOAD").arg("return 1").query(conn).expect("SCRIPT LOAD of the trivial script");
    let mut call = redis::cmd("EVALSHA");
    call.arg(sha).arg(0);
    call
}

/// Trivial `EVALSHA`s per second, `PIPELINE` per pipeline, over `pipelines` pipelines.
pub(crate) fn pipelined_rate(conn: &mut redis::Connection, pipelines: usize) -> f64 {
    let call = trivial_call(conn);
    let mut pipe = redis::pipe();
    for _ in 0..PIPELINE {
        pipe.add_command(call.clone());
    }
    let mut run_pipeline = || {
        let replies: Vec<i64> = pipe.query(conn).expect("pipelined trivial EVALSHA");
        assert_eq!(replies.len(), PIPELINE);
    };
    for _ in 0..pipelines / 10 {
        run_pipeline();
    }
    let start = Instant::now();
    for _ in 0..pipelines {
        run_pipeline();
    }
    (pipelines * PIPELINE) as f64 / start.elapsed().as_secs_f64()
}
