//! Step 13, leader election: the hand-over after a resignation to a candidate parked in
//! another process (pub/sub wake-up), and the time an observer in a third process takes to
//! see the new leader.

use std::fmt::Write as _;
use std::io::BufRead;
use std::thread;
use std::time::{Duration, Instant};

use redlease::Client;
use redlease_testkit::server::RedisServer;

use crate::child::{LOCK_ENV, URL_ENV, Worker, child_env, say};
use crate::clock::mono_ns;
use crate::experiments::handoff::HANDOFF_WARMUP;
use crate::plan::Plan;
use crate::stats::Summary;
use crate::table::{handoff_head, handoff_row};

/// The name of the election the step runs.
const ELECTION: &str = "bench:election";

pub(crate) struct Elections {
    /// From just before the leader's `resign()` to the parked candidate's return from
    /// `campaign()`.
    pub(crate) handover: Summary,
    /// From just before the same `resign()` to an observer's return from the wait that shows
    /// it the new leader.
    pub(crate) observed: Summary,
}

/// Until `what` holds, for at most 5 s (a child that never parks fails the step).
fn settle(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < deadline, "bench: {what} within 5 s");
        thread::sleep(Duration::from_micros(200));
    }
}

fn subscribers(conn: &mut redis::Connection, channel: &str) -> u64 {
    let counts: (String, u64) = redis::cmd("PUBSUB").arg("NUMSUB").arg(channel).query(conn).expect("PUBSUB NUMSUB");
    counts.1
}

pub(crate) fn measure_elections(server: &RedisServer, plan: &Plan) -> Elections {
    let client = Client::open(&server.url()).expect("bench client");
    let election = client.election(ELECTION);
    let env = [(URL_ENV, server.url()), (LOCK_ENV, ELECTION.to_owned())];
    let mut candidate = Worker::spawn("election-candidate", &env);
    let mut observer = Worker::spawn("election-observer", &env);
    candidate.expect("ready");
    observer.expect("ready");
    let mut raw = server.conn();
    // The candidates' channel (as for a plain lock) and the observers' (redlease's layout,
    // docs/design.md "Elections").
    let candidates = format!("redisson_lock__channel:redlease_election:{{{ELECTION}}}");
    let registered = format!("redlease_waiters:redlease_election:{{{ELECTION}}}");
    let observers = format!("redlease_leader:redlease_election:{{{ELECTION}}}");
    let (mut handover, mut observed) = (Vec::new(), Vec::new());
    for round in 0..HANDOFF_WARMUP + plan.handoffs {
        let leadership = election.campaign("bench").expect("the parent leads");
        candidate.send("go");
        candidate.expect("waiting");
        observer.send(&format!("go {}", leadership.term()));
        observer.expect("watching");
        // Parked: its first attempt found the election led (it registered) and its client
        // listens on the candidates' channel.
        settle("the candidate parks", || {
            let waiting: u64 = redis::cmd("ZCARD").arg(&registered).query(&mut raw).expect("ZCARD");
            waiting >= 1 && subscribers(&mut raw, &candidates) >= 1
        });
        settle("the observer parks", || subscribers(&mut raw, &observers) >= 1);
        thread::sleep(Duration::from_millis(2));
        let t0 = mono_ns();
        leadership.resign().expect("resign");
        let t1: u64 = candidate.expect("leading ").parse().expect("the candidate's time");
        let t2: u64 = observer.expect("seen ").parse().expect("the observer's time");
        candidate.send("resign");
        candidate.expect("resigned");
        if round >= HANDOFF_WARMUP {
            handover.push(t1.saturating_sub(t0));
            observed.push(t2.saturating_sub(t0));
        }
    }
    candidate.finish();
    observer.finish();
    Elections { handover: Summary::of_nanos(handover), observed: Summary::of_nanos(observed) }
}

/// A candidate: on each "go", says "waiting", campaigns (parked until the leader resigns),
/// says "leading <time>" with the time it leads, and resigns when told.
pub(crate) fn candidate_child() {
    let client = Client::open(&child_env(URL_ENV)).expect("bench client");
    let election = client.election(child_env(LOCK_ENV));
    say("ready");
    let mut orders = std::io::stdin().lock().lines();
    while let Some(line) = orders.next() {
        match line.expect("read the parent's order").as_str() {
            "go" => {
                say("waiting");
                let leadership = election.campaign("candidate").expect("campaign");
                say(&format!("leading {}", mono_ns()));
                let order = orders.next().expect("an order").expect("read");
                assert_eq!(order, "resign", "the candidate leads until told to resign");
                leadership.resign().expect("resign");
                say("resigned");
            }
            "quit" => return,
            other => panic!("unknown order {other:?}"),
        }
    }
}

/// An observer: on "go <term>", says "watching" and waits until it sees a leader of a later
/// term, then says "seen <time>".
pub(crate) fn observer_child() {
    let client = Client::open(&child_env(URL_ENV)).expect("bench client");
    let election = client.election(child_env(LOCK_ENV));
    say("ready");
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("read the parent's order");
        if line == "quit" {
            return;
        }
        let term: u64 = line.strip_prefix("go ").and_then(|t| t.parse().ok()).expect("go <term>");
        let mut observer = election.observe().expect("observe");
        say("watching");
        loop {
            let now = observer.wait_change().expect("wait for a change");
            if now.is_some_and(|leader| leader.term > term) {
                break;
            }
        }
        say(&format!("seen {}", mono_ns()));
    }
}

/// Step 13's section, in round trips `rtt`.
pub(crate) fn elections_section(out: &mut String, rtt: f64, e: &Elections) {
    let _ = writeln!(
        out,
        "### 13. Leader election: the leader (this process) resigns; a candidate parked in another process \
         leads, and an observer in a third process sees it\n"
    );
    handoff_head(out, "from the `resign()` to");
    handoff_row(out, "the candidate's return from `campaign()`", &e.handover, rtt, Some("lock target"));
    handoff_row(out, "the observer's return from the wait that shows the new leader", &e.observed, rtt, None);
    let _ = writeln!(out);
}
