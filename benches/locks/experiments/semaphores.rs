//! Step 8, semaphores: uncontended `try_acquire(1)` + `release()` of a `Semaphore` and of a
//! `PermitExpirableSemaphore` interleaved with the limit pair and the plain lock's pair;
//! hand-off of a semaphore of one permit to a waiter in another process, alternating with
//! the plain lock's; renewal of many permits ([`measure_permit_renewal`]).

use std::fmt::Write as _;
use std::time::Instant;

use redlease::{AnyLock, Client};
use redlease_testkit::server::RedisServer;

use crate::experiments::LockKind;
use crate::experiments::contenders::Subject;
use crate::experiments::handoff::{HANDOFF_BLOCKS, measure_handoff_blocks};
use crate::experiments::limit::{Limit, trivial_call, trivial_pair};
use crate::experiments::permit_renewal::{PermitRenewal, measure_permit_renewal, permit_renewal_section};
use crate::experiments::renewal::Renewal;
use crate::experiments::uncontended::library_pair;
use crate::plan::Plan;
use crate::stats::{PAIR_BLOCKS, PairOp, PairStats, Summary, measure_pairs};
use crate::table::{TARGET_PAIR_RATIO, handoff_head, handoff_row, pair_row};

pub(crate) struct Semaphores {
    /// Two trivial `EVALSHA`s, in the blocks in between.
    pub(crate) trivial: PairStats,
    /// The plain lock's `try_lock()` + `unlock()`, for reference.
    pub(crate) lock: PairStats,
    /// `Semaphore::try_acquire(1)` + `SemaphoreGuard::release()`.
    pub(crate) semaphore: PairStats,
    /// `PermitExpirableSemaphore::try_acquire(1)` + `PermitGuard::release()` (watchdog lease).
    pub(crate) permits: PairStats,
    /// Hand-offs of the plain lock, a `Semaphore` of one permit and a
    /// `PermitExpirableSemaphore` of one permit, alternating.
    pub(crate) handoff_lock: Summary,
    pub(crate) handoff_semaphore: Summary,
    pub(crate) handoff_permits: Summary,
    pub(crate) renewal: PermitRenewal,
}

pub(crate) fn measure_semaphores(server: &RedisServer, plan: &Plan) -> Semaphores {
    let client = Client::open(&server.url()).expect("client for the semaphore run");
    let lock: AnyLock = client.lock("bench:semaphores:lock").into();
    let semaphore = client.semaphore("bench:semaphores:semaphore");
    semaphore.try_set_permits(1).expect("set the semaphore's permit");
    let permits = client.permit_expirable_semaphore("bench:semaphores:permits");
    permits.try_set_permits(1).expect("set the permit-expirable semaphore's permit");
    let (mut trivial_conn, mut stats_conn) = (server.conn(), server.conn());
    let trivial = trivial_call(&mut trivial_conn);

    let mut ops: Vec<PairOp> = vec![
        trivial_pair(&trivial, &mut trivial_conn),
        Box::new(|| library_pair(&lock)),
        Box::new(|| {
            let start = Instant::now();
            let guard = semaphore.try_acquire(1).expect("try_acquire").expect("an uncontended permit is free");
            let acquired = start.elapsed();
            guard.release().expect("release");
            acquired
        }),
        Box::new(|| {
            let start = Instant::now();
            let guard = permits.try_acquire(1).expect("try_acquire").expect("an uncontended permit is free");
            let acquired = start.elapsed();
            guard.release().expect("release");
            acquired
        }),
    ];
    let stats = measure_pairs(&mut ops, plan.warmup, plan.pairs / 2, Some(&mut stats_conn));
    drop(ops);
    let mut kinds = stats.into_iter();
    let mut next = || kinds.next().expect("one result per kind");
    let (trivial, lock, semaphore, permits) = (next(), next(), next(), next());

    let subjects = [Subject::Lock(LockKind::Plain), Subject::Semaphore, Subject::Permits];
    let mut handoffs = measure_handoff_blocks(server, &client, &subjects, &[plan.handoffs; 3]).into_iter();
    let mut next = || handoffs.next().expect("one summary per subject");
    let (handoff_lock, handoff_semaphore, handoff_permits) = (next(), next(), next());

    let renewal = measure_permit_renewal(server, plan);
    Semaphores { trivial, lock, semaphore, permits, handoff_lock, handoff_semaphore, handoff_permits, renewal }
}

/// Step 8's section, in round trips of `limit`, the permits' renewal set against the locks'
/// (`renewal`).
pub(crate) fn semaphores_section(out: &mut String, limit: &Limit, renewal: &Renewal, m: &Semaphores) {
    let rtt = limit.rtt.mean;
    let limit_pair = m.trivial.pair.mean;
    let _ = writeln!(
        out,
        "### 8. Semaphores: uncontended `try_acquire(1)` + `release()` of one permit ({PAIR_BLOCKS} blocks per \
         kind, interleaved)\n"
    );
    let _ = writeln!(
        out,
        "Each is one acquire and one release script, as a lock's pair; the locks' target (≤ {TARGET_PAIR_RATIO} \
         × the limit pair) is not set for semaphores and is shown for comparison only.\n"
    );
    let _ = writeln!(
        out,
        "| pair | n | mean µs | p50 µs | p99 µs | acquire mean µs | release mean µs | server µs/`EVALSHA` | mean / (2 × RTT) | mean / limit pair |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (what, x) in [
        ("two trivial `EVALSHA`s (the limit pair)", &m.trivial),
        ("plain lock `try_lock()` + `unlock()`, watchdog lease", &m.lock),
        ("**`Semaphore` `try_acquire(1)` + `release()`**", &m.semaphore),
        ("**`PermitExpirableSemaphore` `try_acquire(1)` + `release()`, watchdog lease**", &m.permits),
    ] {
        pair_row(out, what, x, rtt, limit_pair, format!("{:.2}", x.server_usec));
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Hand-off of one permit to a waiter parked in another process (subscribed to the semaphore's channel), \
         alternating with the plain lock's ({HANDOFF_BLOCKS} blocks each); the semaphores hold 1 permit:\n"
    );
    handoff_head(out, "hand-off");
    handoff_row(out, "plain lock", &m.handoff_lock, rtt, Some("lock target"));
    handoff_row(out, "**`Semaphore`, 1 permit**", &m.handoff_semaphore, rtt, Some("lock target"));
    handoff_row(out, "**`PermitExpirableSemaphore`, 1 permit**", &m.handoff_permits, rtt, Some("lock target"));
    let _ = writeln!(out);
    permit_renewal_section(out, limit, renewal, &m.renewal);
}
