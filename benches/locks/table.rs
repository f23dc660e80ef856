//! What the report's sections share, below the report and the experiments alike (it
//! imports neither): the project's performance targets, the verdict on a target, and the
//! heads and rows of the tables several steps write (hand-offs, pairs, figures).

use std::fmt::Write as _;

use crate::stats::{PairStats, Summary};

// Targets: the project's performance targets, as docs/performance.md states them. The pair
// target applies to every lock kind's uncontended pair (each is one acquire and one release
// round trip), the hand-off targets to the plain and the fair lock alike.
pub(crate) const TARGET_PAIR_RATIO: f64 = 1.15;
const TARGET_HANDOFF_P50_RATIO: f64 = 4.0;
const TARGET_HANDOFF_P99_RATIO: f64 = 20.0;
pub(crate) const TARGET_RENEWAL_FRACTION: f64 = 0.5;

pub(crate) fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "missed" }
}

/// The head of a hand-off table whose first column is `first`.
pub(crate) fn handoff_head(out: &mut String, first: &str) {
    let _ = writeln!(out, "| {first} | n | p50 µs | p90 µs | p99 µs | max µs | p50 / RTT | p99 / RTT |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
}

/// One row of a hand-off table, judged against the hand-off targets when `label` names
/// them.
pub(crate) fn handoff_row(out: &mut String, what: &str, h: &Summary, rtt: f64, label: Option<&str>) {
    let (p50, p99) = (h.p50 / rtt, h.p99 / rtt);
    let judged = |ratio: f64, target: f64| match label {
        Some(label) => format!("{ratio:.2} ({label} ≤ {target}: {})", verdict(ratio <= target)),
        None => format!("{ratio:.2}"),
    };
    let _ = writeln!(
        out,
        "| {what} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} |",
        h.n,
        h.p50,
        h.p90,
        h.p99,
        h.max,
        judged(p50, TARGET_HANDOFF_P50_RATIO),
        judged(p99, TARGET_HANDOFF_P99_RATIO)
    );
}

/// A pair's mean over two round trips and over the limit pair, and its verdict against the
/// target on both when it is `judged` ("–" otherwise).
pub(crate) fn pair_ratios(x: &PairStats, rtt: f64, limit_pair: f64, judged: bool) -> (f64, f64, String) {
    let (to_rtt, to_pair) = (x.pair.mean / (2.0 * rtt), x.pair.mean / limit_pair);
    let target = if judged {
        format!("{} / {}", verdict(to_rtt <= TARGET_PAIR_RATIO), verdict(to_pair <= TARGET_PAIR_RATIO))
    } else {
        "–".to_string()
    };
    (to_rtt, to_pair, target)
}

/// One row of a table of pairs: the pair, its halves, Redis's share, and its ratios to
/// 2 × RTT and to `limit_pair`.
pub(crate) fn pair_row(out: &mut String, what: &str, x: &PairStats, rtt: f64, limit_pair: f64, server: String) {
    let _ = writeln!(
        out,
        "| {what} | {} | {server} | {:.3} | {:.3} |",
        pair_cells(x),
        x.pair.mean / (2.0 * rtt),
        x.pair.mean / limit_pair
    );
}

/// The cells every table of pairs starts with: n, the pair's mean, p50 and p99, and the
/// means of its acquire and of its release.
pub(crate) fn pair_cells(x: &PairStats) -> String {
    format!(
        "{} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1}",
        x.pair.n, x.pair.mean, x.pair.p50, x.pair.p99, x.acquire.mean, x.release.mean
    )
}

/// The head of a two-column table of figures.
pub(crate) fn figure_head(out: &mut String) {
    let _ = writeln!(out, "| figure | value |");
    let _ = writeln!(out, "|---|---:|");
}

/// One row of a two-column table of figures.
pub(crate) fn figure_row(out: &mut String, what: &str, value: String) {
    let _ = writeln!(out, "| {what} | {value} |");
}
