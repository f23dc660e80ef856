//! Step 20, what the `metrics` feature costs: the uncontended pair (`try_lock()` +
//! `unlock()`, watchdog lease) in two child processes of this benchmark built with the
//! feature, one with `metrics-exporter-prometheus`'s recorder installed and a lock label
//! mapped, the other with no recorder (the facade's calls then reach its no-op recorder),
//! in interleaved blocks. Without the feature the step says how to run it.

use std::fmt::Write as _;
use std::time::Instant;

use redlease::Client;
use redlease_testkit::server::RedisServer;

use crate::child::{URL_ENV, Worker, child_env, say};
use crate::clock::nanos;
use crate::plan::Plan;
use crate::stats::{PAIR_BLOCKS, Summary};
use crate::table::verdict;

/// Names whether the child installs a recorder ("1") or not ("0").
const RECORDER_ENV: &str = "REDLEASE_BENCH_RECORDER";
/// Pairs before the first block, in each child.
const WARMUP_PAIRS: usize = 200;

// The step's target, as docs/performance.md states it.
/// The pair with a recorder over the pair without, at most.
const TARGET_METRICS_RATIO: f64 = 1.02;

/// Both pairs' samples.
pub(crate) struct MetricsCost {
    with_recorder: Summary,
    without: Summary,
}

/// The two children, in interleaved blocks of the plan's pairs (`None` when the benchmark
/// was built without the feature).
pub(crate) fn measure_metrics_cost(server: &RedisServer, plan: &Plan) -> Option<MetricsCost> {
    if !cfg!(feature = "metrics") {
        return None;
    }
    let spawn = |recorder: &str| {
        Worker::spawn("metered-pairs", &[(URL_ENV, server.url()), (RECORDER_ENV, recorder.to_string())])
    };
    let mut children = [spawn("1"), spawn("0")];
    for child in &children {
        child.expect("ready");
    }
    let per_block = (plan.pairs / PAIR_BLOCKS).max(1);
    let mut samples: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..PAIR_BLOCKS {
        for (child, samples) in children.iter_mut().zip(&mut samples) {
            child.send(&format!("block {per_block}"));
            let line = child.expect("pairs ");
            samples.extend(line.split_whitespace().map(|s| s.parse::<u64>().expect("a pair's nanoseconds")));
        }
    }
    for child in children {
        child.finish();
    }
    let [with_recorder, without] = samples.map(Summary::of_nanos);
    Some(MetricsCost { with_recorder, without })
}

/// Child: a client (with a recorder installed and a lock label mapped, when told to), then
/// blocks of uncontended pairs on the parent's orders, each pair's time said back.
pub(crate) fn metered_pairs_child() {
    let recorder = child_env(RECORDER_ENV) == "1";
    let mut builder = Client::builder(child_env(URL_ENV));
    if recorder {
        install_recorder();
        builder = builder.metrics_lock_label(|name| name.split_once(':').map(|(service, _)| service.to_owned()));
    }
    let client = builder.build().expect("a client");
    let lock = client.lock(format!("bench:metered:{}", std::process::id()));
    let pair = || lock.try_lock().expect("try_lock").expect("the lock is free").unlock().expect("unlock");
    for _ in 0..WARMUP_PAIRS {
        pair();
    }
    say("ready");
    let stdin = std::io::stdin();
    let mut order = String::new();
    while {
        order.clear();
        std::io::BufRead::read_line(&mut stdin.lock(), &mut order).expect("an order") > 0
    } {
        let n: usize = order.trim().strip_prefix("block ").and_then(|n| n.parse().ok()).expect("block <pairs>");
        let mut line = String::from("pairs");
        for _ in 0..n {
            let start = Instant::now();
            pair();
            let _ = write!(line, " {}", nanos(start.elapsed()));
        }
        say(&line);
    }
}

#[cfg(feature = "metrics")]
fn install_recorder() {
    metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder().expect("the process's one recorder");
}

#[cfg(not(feature = "metrics"))]
fn install_recorder() {}

/// Step 20's section.
pub(crate) fn metrics_cost_section(out: &mut String, cost: Option<&MetricsCost>) {
    let _ = writeln!(
        out,
        "### 20. The `metrics` feature's cost: the uncontended pair (`try_lock()` + `unlock()`, watchdog lease) \
         in two processes, one with `metrics-exporter-prometheus`'s recorder installed and a lock label mapped, \
         one with no recorder, interleaved blocks\n"
    );
    let Some(cost) = cost else {
        let _ = writeln!(
            out,
            "Not measured: the benchmark was built without the feature (`cargo bench --bench locks --features metrics`).\n"
        );
        return;
    };
    let _ = writeln!(out, "| pair | n | mean µs | p50 µs | p99 µs |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for (what, s) in [("recorder installed, lock label", &cost.with_recorder), ("no recorder", &cost.without)] {
        let _ = writeln!(out, "| {what} | {} | {:.1} | {:.1} | {:.1} |", s.n, s.mean, s.p50, s.p99);
    }
    let (mean, p50) = (cost.with_recorder.mean / cost.without.mean, cost.with_recorder.p50 / cost.without.p50);
    let _ = writeln!(
        out,
        "\nWith the recorder over without: mean {mean:.3}, p50 {p50:.3} (target ≤ {TARGET_METRICS_RATIO}: {}).\n",
        verdict(p50 <= TARGET_METRICS_RATIO)
    );
}
