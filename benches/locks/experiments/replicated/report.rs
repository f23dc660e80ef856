//! The section of steps 11 and 14: the masters, the pairs with what each master served, the
//! hand-offs, and the renewal of leases spread over the masters, one table each.

use std::fmt::Write as _;

use crate::experiments::handoff::HANDOFF_BLOCKS;
use crate::experiments::renewal::{RENEW_BATCH, RENEWAL_WATCHDOG, each_call, least_possible, per_pass, timed};
use crate::stats::PAIR_BLOCKS;
use crate::table::{
    TARGET_PAIR_RATIO, TARGET_RENEWAL_FRACTION, figure_head, figure_row, handoff_head, handoff_row, pair_cells,
    pair_ratios, verdict,
};

use super::{Layout, PairKind, ReplicatedPair, ReplicatedRenewal, ReplicatedRun, Shape};

/// The default pair over the synced floor (issue #44, item 6).
const TARGET_SYNCED_FLOOR: f64 = 1.10;

/// Step 11's section (Redis Cluster) or step 14's (Sentinel); `one_server`: step 4's
/// renewals per second, when it ran.
pub(crate) fn replicated_section(out: &mut String, c: &ReplicatedRun, one_server: Option<f64>) {
    heading(out, c);
    masters_table(out, c);
    pairs_table(out, c);
    handoffs_table(out, c);
    renewal_intro(out, c);
    for r in &c.renewals {
        renewal_tables(out, r, one_server);
    }
}

/// The step's heading: which deployment.
fn heading(out: &mut String, c: &ReplicatedRun) {
    match c.shape {
        Shape::Cluster => {
            let _ = writeln!(
                out,
                "### 11. Redis Cluster: {} masters with a replica each (the test kit's `ClusterGroup`), all {} \
                 servers pinned with the first one; cluster clients on `redis-cluster://` with the masters as \
                 seeds\n",
                c.masters.len(),
                c.masters.len() * 2
            );
        }
        Shape::Sentinel => {
            let _ = writeln!(
                out,
                "### 14. Sentinel: a master with one replica and three sentinels (the test kit's \
                 `SentinelGroup`), all five pinned with the first server; Sentinel clients on \
                 `redis-sentinel://` with the three sentinels\n"
            );
        }
    }
}

/// The masters: the slots each serves and its round trip.
fn masters_table(out: &mut String, c: &ReplicatedRun) {
    let _ = writeln!(out, "| master | slots | RTT mean µs | p50 µs | p99 µs |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for (i, m) in c.masters.iter().enumerate() {
        let what = if i == c.owner && c.masters.len() > 1 {
            format!("{} (serves the locks of the pairs and hand-offs)", master_letter(i))
        } else {
            master_letter(i).to_string()
        };
        let _ = writeln!(out, "| {what} | {} | {:.1} | {:.1} | {:.1} |", m.slots, m.rtt.mean, m.rtt.p50, m.rtt.p99);
    }
    let _ = writeln!(out);
}

/// The uncontended pairs, with what every master served per pair.
fn pairs_table(out: &mut String, c: &ReplicatedRun) {
    let owner = master_letter(c.owner);
    let on = match c.shape {
        Shape::Cluster => format!("on one lock whose slot master {owner} serves"),
        Shape::Sentinel => format!("on one lock of master {owner}"),
    };
    let every_master = match c.shape {
        Shape::Cluster => "Every master's",
        Shape::Sentinel => "The master's",
    };
    let _ = writeln!(
        out,
        "Uncontended acquire + release, one thread, {PAIR_BLOCKS} blocks per kind, interleaved, {on}. The limit \
         pair is two trivial `EVALSHA`s with the lock's name as `KEYS[1]` on a plain connection to {owner}. \
         {every_master} `INFO commandstats` is reset before each block and read after it: the commands clients \
         sent it, those its scripts ran, and its replica's `REPLCONF` (acknowledgements); the CPU time of \
         {owner} and of its replica is read from `/proc` around each block (ticks of 10 ms). RTT: {owner}'s. \
         Target ≤ {TARGET_PAIR_RATIO}.\n"
    );
    let _ = writeln!(
        out,
        "| pair | n | mean µs | p50 µs | p99 µs | acquire mean µs | release mean µs | sent to {owner}, per pair | \
         run by {owner}'s scripts, per pair | {owner}'s replica's `REPLCONF`, per pair | other masters: commands \
         in all (their replicas' `REPLCONF`) | server µs/`EVALSHA` on {owner} | CPU µs per pair: {owner} / its \
         replica | mean / (2 × RTT) | mean / limit pair | target |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---|");
    let limit_pair = c.pairs.iter().find(|p| p.kind == PairKind::Limit).map_or(f64::NAN, |p| p.stats.pair.mean);
    for p in &c.pairs {
        pair_row(out, c, p, limit_pair);
    }
    let _ = writeln!(out);
    synced_floor_line(out, c);
}

/// The default pair set against the synced floor (issue #44, item 6).
fn synced_floor_line(out: &mut String, c: &ReplicatedRun) {
    let pair = |kind| c.pairs.iter().find(|p| p.kind == kind).map(|p| &p.stats.pair);
    let (Some(floor), Some(default)) = (pair(PairKind::RawSynced), pair(PairKind::Default)) else { return };
    let (mean, p50) = (default.mean / floor.mean, default.p50 / floor.p50);
    let _ = writeln!(
        out,
        "The default pair against the synced floor: mean {mean:.3}, p50 {p50:.3} (target ≤ \
         {TARGET_SYNCED_FLOOR}: {}).\n",
        verdict(mean <= TARGET_SYNCED_FLOOR)
    );
}

/// One row of the pairs' table.
fn pair_row(out: &mut String, c: &ReplicatedRun, p: &ReplicatedPair, limit_pair: f64) {
    let owner = master_letter(c.owner);
    let rtt = c.masters[c.owner].rtt.mean;
    let client = c.shape.client();
    let what: String = match p.kind {
        PairKind::Limit => format!("two trivial keyed `EVALSHA`s straight to {owner} (the limit pair)"),
        PairKind::Raw => format!("the two scripts sent raw to {owner}"),
        PairKind::RawSynced => {
            format!("the two scripts sent raw to {owner}, `WAIT 1` behind the acquire in one write (the synced floor)")
        }
        PairKind::NoSync => format!("**{client} `try_lock()` + `unlock()`, `sync_replicas(false)`**"),
        PairKind::Default => {
            format!("**{client} `try_lock()` + `unlock()`, default (each grant waits for a replica)**")
        }
    };
    let judged = !matches!(p.kind, PairKind::Limit | PairKind::Raw | PairKind::RawSynced);
    let x = &p.stats;
    let own = &p.served[c.owner];
    let sent: Vec<String> = own.sent.iter().map(|(name, n)| format!("{name} {}", per_pair(*n))).collect();
    let mut others: Vec<String> = p
        .served
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != c.owner)
        .map(|(i, s)| format!("{}: {} ({})", master_letter(i), s.calls, s.replication_calls))
        .collect();
    if others.is_empty() {
        others.push("none".into());
    }
    let (to_rtt, to_pair, target) = pair_ratios(x, rtt, limit_pair, judged);
    let _ = writeln!(
        out,
        "| {what} | {} | {} ({}) | {} | {} | {} | {:.2} | {:.0} / {:.0} \
         | {to_rtt:.3} | {to_pair:.3} | {target} |",
        pair_cells(x),
        per_pair(own.sent_total()),
        sent.join(", "),
        per_pair(own.in_scripts),
        per_pair(own.replication),
        others.join("; "),
        x.server_usec,
        p.cpu_owner_us,
        p.cpu_replica_us
    );
}

/// The hand-offs without and with replica sync.
fn handoffs_table(out: &mut String, c: &ReplicatedRun) {
    let owner = master_letter(c.owner);
    let rtt = c.masters[c.owner].rtt.mean;
    let client = c.shape.client();
    let _ = writeln!(
        out,
        "Hand-off to a waiter parked in another process (a {client} of its own, subscribed to the lock's \
         channel on {owner}), holder and waiter with the same replica setting, alternating ({HANDOFF_BLOCKS} \
         blocks each); RTT: {owner}'s, {rtt:.1} µs:\n"
    );
    handoff_head(out, "hand-off");
    for (sync, h) in &c.handoffs {
        let what = if *sync {
            format!("**{client}, default (the waiter's grant waits for a replica)**")
        } else {
            format!("**{client}, `sync_replicas(false)`**")
        };
        handoff_row(out, &what, h, rtt, Some("target"));
    }
    let _ = writeln!(out);
}

/// What the renewal runs measured, and the limit they are set against.
fn renewal_intro(out: &mut String, c: &ReplicatedRun) {
    let client = c.shape.client();
    let _ = writeln!(
        out,
        "Renewal: watchdog leases {}, held by one thread of one {client} (watchdog {} s, renewal every {} s), \
         confirmed (the default: the replication reading and `WAIT` for every online replica behind each \
         batch, in the same write) and not (`sync_replicas(false)`); target: renewals/s ≥ \
         {TARGET_RENEWAL_FRACTION} × the pipelined limit. {} `INFO commandstats` over the window: the renew \
         scripts it ran (one per round trip) and the leases they looked at (`HEXISTS`) and renewed \
         (`PEXPIRE`).{}\n",
        match c.shape {
            Shape::Cluster => format!("spread over the {} masters", c.masters.len()),
            Shape::Sentinel => "on the master".to_owned(),
        },
        RENEWAL_WATCHDOG.as_secs(),
        RENEWAL_WATCHDOG.as_secs() / 3,
        match c.shape {
            Shape::Cluster => "Per master, from its",
            Shape::Sentinel => "From the master's",
        },
        match c.shape {
            Shape::Cluster => {
                " The watchdog is one thread that writes every master's batch before it reads a reply, and \
                 here the masters share one vCPU: so the limit it is set against is the masters' pipelined \
                 limits in series (the time the limit takes for the same number of calls on each master, one \
                 master after the other: the renewed leases over the sum of renewed on a master / its limit), \
                 not their sum, which only masters on separate hosts renewing in parallel could approach \
                 (shown too)."
            }
            Shape::Sentinel => " Its replica applies every renewal too, on the same vCPU.",
        }
    );
}

/// One renewal run: where its names landed, a table of what each master did, and a table
/// of the run's figures.
fn renewal_tables(out: &mut String, r: &ReplicatedRenewal, one_server: Option<f64>) {
    let layout = match r.layout {
        Layout::Spread => {
            "names `bench:<cluster or sentinel>:lease:<i>` (spread over the slots on a cluster, as names without \
             a hash tag are)"
        }
        Layout::OneSlotPerMaster => {
            "names `{<tag>}:lease:<i>` with one hash tag per master, so that each master's leases share one slot"
        }
    };
    let confirmed =
        if r.confirmed { "confirmed by the replicas (the default)" } else { "not confirmed (`sync_replicas(false)`)" };
    let _ = writeln!(out, "Renewal of {} leases, {layout}, {confirmed}:\n", r.leases);
    nodes_table(out, r);
    renewal_figures(out, r, one_server);
}

/// What each master did in one renewal run.
fn nodes_table(out: &mut String, r: &ReplicatedRenewal) {
    let _ = writeln!(
        out,
        "| master | leases on it (keys before) | renew round trips | leases looked at / renewed | round trips per \
         pass / ceil(renewed per pass / {RENEW_BATCH}) | round trips vs the least possible (ceil(renewed / \
         {RENEW_BATCH}) … that + passes) | Redis running the scripts: s (µs per lease) | pipelined limit: calls/s \
         (µs per call) | keys with TTL > 0 after the window (smallest TTL) | lease keys left after the drop |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, n) in r.nodes.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {} | {} ({}) | {} | {} / {} | {} | {} | {:.3} ({:.2}) | {:.0} ({:.2}) | {} of {} ({} ms) | {} |",
            master_letter(i),
            n.leases,
            n.keys_before,
            n.round_trips,
            n.looked_at,
            n.renewed,
            per_pass(n.round_trips, n.renewed, r.watched.passes),
            least_possible(n.round_trips, n.renewed, r.watched.passes),
            n.server_time.as_secs_f64(),
            n.server_time.as_secs_f64() * 1e6 / n.renewed.max(1) as f64,
            n.pipelined_per_sec,
            1e6 / n.pipelined_per_sec,
            n.keys_alive,
            n.leases,
            n.min_ttl_ms,
            n.keys_left
        );
    }
    let _ = writeln!(out);
}

/// The figures of one renewal run, the client's counts beside the masters'.
fn renewal_figures(out: &mut String, r: &ReplicatedRenewal, one_server: Option<f64>) {
    let w = &r.watched;
    let renewed_at_masters: u64 = r.nodes.iter().map(|n| n.renewed).sum();
    let server_secs: f64 = r.nodes.iter().map(|n| n.server_time.as_secs_f64()).sum();
    figure_head(out);
    let acquired = &r.acquired;
    figure_row(
        out,
        "acquiring them, one `try_lock` each",
        format!("{:.2} s; {}", acquired.time.as_secs_f64(), each_call(&acquired.each)),
    );
    figure_row(out, "window held", format!("{:.1} s", w.window.as_secs_f64()));
    figure_row(out, "renewal passes in the window", w.passes.to_string());
    figure_row(
        out,
        "renew round trips in the window: the client's count / scripts the masters ran",
        format!("{} / {}", w.round_trips, r.nodes.iter().map(|n| n.round_trips).sum::<u64>()),
    );
    figure_row(
        out,
        "leases renewed in the window: the client's count / `PEXPIRE`s at the masters",
        format!("{} / {renewed_at_masters}", w.renewed),
    );
    let time = if w.renewed == 0 {
        format!("{:.3} s ({server_secs:.3} s), none renewed", w.renew_time.as_secs_f64())
    } else {
        format!(
            "{:.3} s ({server_secs:.3} s): {:.2} µs per lease ({:.2} µs)",
            w.renew_time.as_secs_f64(),
            w.renew_time.as_secs_f64() * 1e6 / w.renewed as f64,
            server_secs * 1e6 / w.renewed as f64
        )
    };
    figure_row(out, "time in renew round trips (of which Redis running the scripts)", time);
    let (waits, infos): (u64, u64) = r.nodes.iter().fold((0, 0), |(w, i), n| (w + n.waits, i + n.infos));
    let confirm_secs: f64 = r.nodes.iter().map(|n| n.confirm_time.as_secs_f64()).sum();
    figure_row(
        out,
        "confirmations at the masters: `WAIT`s / `INFO`s run (Redis's time on them, per renew round trip)",
        format!(
            "{waits} / {infos} ({:.1} µs)",
            confirm_secs * 1e6 / r.nodes.iter().map(|n| n.round_trips).sum::<u64>().max(1) as f64
        ),
    );
    figure_row(out, "renewals/s (renewed / time in round trips)", rate(r, renewed_at_masters, one_server));
    figure_row(out, "guards `is_held()` after the window", format!("{} of {}", r.held, r.leases));
    figure_row(out, "leases lost / renewals failed (event hook)", format!("{} / {}", r.lost_events, r.failed_renewals));
    if let Some(error) = &r.first_error {
        figure_row(out, "the first failed renewal's error (event hook)", format!("`{}`", error.replace('|', "\\|")));
    }
    figure_row(
        out,
        "dropping all guards, one by one (the watchdog still renewing the rest)",
        format!("{}; {} releases failed", timed(&r.dropped), r.failed_releases),
    );
    let _ = writeln!(out);
}

/// Renewals per second against the masters' pipelined limits in series (judged), against
/// their sum, and against step 4's one server when it ran (`one_server`).
fn rate(r: &ReplicatedRenewal, renewed_at_masters: u64, one_server: Option<f64>) -> String {
    let per_sec = r.watched.per_sec();
    if r.watched.renewed == 0 || renewed_at_masters == 0 {
        return "none renewed: 0 × the pipelined limit (missed)".to_string();
    }
    let series_secs: f64 = r.nodes.iter().map(|n| n.renewed as f64 / n.pipelined_per_sec).sum();
    let series = renewed_at_masters as f64 / series_secs;
    let sum: f64 = r.nodes.iter().map(|n| n.pipelined_per_sec).sum();
    let (to_series, to_sum) = (per_sec / series, per_sec / sum);
    let to_one = one_server.map_or_else(
        || "step 4 not run".to_owned(),
        |one| format!("{:.3} × the one server's renewal of step 4", per_sec / one),
    );
    format!(
        "{per_sec:.0} = {to_series:.3} × the masters' pipelined limits in series ({series:.0} calls/s; {}); \
         {to_sum:.3} × their sum ({sum:.0} calls/s); {to_one}",
        verdict(to_series >= TARGET_RENEWAL_FRACTION),
    )
}

/// The name of the `i`-th master in the report.
fn master_letter(i: usize) -> &'static str {
    ["A", "B", "C", "D", "E", "F"].get(i).copied().unwrap_or("?")
}

/// A count per pair: two decimals, or four when it is below 0.01 but not nothing.
fn per_pair(n: f64) -> String {
    if n > 0.0 && n < 0.01 { format!("{n:.4}") } else { format!("{n:.2}") }
}
