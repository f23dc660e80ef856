//! Detection of a lost lease: a holder frozen past its lease, a lock key deleted or expired
//! under its holder.

use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, ErrorKind, LeaseState};

use super::{SLACK, counting_client, hkeys, hvals};
use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::server::RedisServer;

/// Lock name of the frozen-holder test.
const FROZEN: &str = "frozen";
/// The frozen holder's watchdog timeout (renewal every 200 ms).
const FROZEN_WATCHDOG: Duration = Duration::from_millis(600);
/// A jump of the monotonic clock between two looks this long means the process was stopped.
const FROZEN_GAP: Duration = Duration::from_millis(400);

/// Child role: takes FROZEN with a 600 ms watchdog, says "held", then watches `is_held()`
/// every millisecond, saying each transition. Once resumed from a stop (seen as a jump of
/// the monotonic clock), it says how many ms after resuming its guard first read
/// `is_held() == false`, and at which CLOCK_MONOTONIC time, then the outcome of `unlock()`.
pub(super) fn paused_holder() {
    let client = Client::builder(child::env("REDIS_URL")).watchdog_timeout(FROZEN_WATCHDOG).build().unwrap();
    let guard = client.lock(FROZEN).lock().unwrap();
    // Read before saying "held": the parent may stop this process right after that line,
    // and the stop must show up as a jump from here at the latest.
    let mut last = monotonic_ns();
    child::say("held");
    let gap = FROZEN_GAP.as_nanos() as u64;
    let end = Instant::now() + Duration::from_secs(20);
    let mut resumed_at: Option<u64> = None;
    let mut held = true;
    loop {
        let before = monotonic_ns();
        let now_held = guard.is_held();
        let after = monotonic_ns();
        // The latest jump counts (a long scheduling stall before the stop must not).
        if before - last > gap || after - before > gap {
            resumed_at = Some(if before - last > gap { before } else { after });
            child::say(&format!("resumed after a {} ms gap", (before - last).max(after - before) / 1_000_000));
        }
        if now_held != held {
            held = now_held;
            child::say(&format!("is_held {now_held} at {after}"));
        }
        if !now_held {
            match resumed_at {
                Some(resumed) => child::say(&format!(
                    "lost {} ms after resuming, at {after}",
                    after.saturating_sub(resumed) / 1_000_000
                )),
                None => child::say("lost before any pause"),
            }
            break;
        }
        if Instant::now() >= end {
            child::say("lost never seen");
            break;
        }
        last = after;
        thread::sleep(Duration::from_millis(1));
    }
    let unlock = guard.unlock().map_err(|e| e.kind());
    child::say(&format!("unlock {unlock:?}"));
}

/// A holder process frozen by SIGSTOP for twice its lease (a GC pause, a stopped VM) loses
/// the lock to another process. On resuming, its guard must say so within one renewal
/// interval, its `unlock()` must be `NotHeld`, and the new holder's key must be untouched.
///
/// Breaks if the resumed guard goes on reading held for more than a renewal interval (it
/// knows at once from its local deadline, which passed while it was frozen, and would know
/// from its overdue renewal, which runs as soon as it resumes), if its `unlock()` reports
/// success, or if its unlock or its renewal disturbs the new holder's key.
#[test]
fn a_holder_frozen_past_its_lease_sees_the_loss_on_resuming_and_leaves_the_new_holder_alone() {
    let server = RedisServer::start();
    let mut frozen = Child::spawn("hazard_paused_holder", &[("REDIS_URL", server.url())]);
    frozen.wait_line("held", Duration::from_secs(10));
    frozen.stop();
    let stopped = Instant::now();

    let client = client(&server);
    let guard = client.lock(FROZEN).try_lock_for(Duration::from_secs(5)).unwrap().expect("the frozen lease ran out");
    let mut conn = server.conn();
    let fields = hkeys(&mut conn, FROZEN);
    assert!(fields.len() == 1 && fields[0].starts_with(client.id()), "the new holder holds: {fields:?}");

    // Frozen for twice the lease in all.
    let frozen_for = FROZEN_WATCHDOG * 2;
    thread::sleep(frozen_for.saturating_sub(stopped.elapsed()));
    let resumed_ns = monotonic_ns();
    frozen.cont();

    let lost = frozen.wait_line("lost", Duration::from_secs(5));
    let after_ms: u64 = lost
        .strip_prefix("lost ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("the child saw the loss before its pause, or never: {lost:?}"));
    let at_ns: u64 = lost.rsplit(' ').next().unwrap().parse().unwrap();
    let renewal_interval = FROZEN_WATCHDOG / 3;
    // As the child measured it, from the clock jump it saw ...
    assert!(Duration::from_millis(after_ms) < renewal_interval + SLACK, "{lost}; lines {:?}", frozen.lines());
    // ... and from when this process sent SIGCONT (same CLOCK_MONOTONIC).
    let since_cont = Duration::from_nanos(at_ns.saturating_sub(resumed_ns));
    assert!(since_cont < renewal_interval + SLACK, "loss seen {since_cont:?} after SIGCONT; {lost}");
    assert_eq!(
        frozen.wait_line("unlock", Duration::from_secs(5)),
        format!("unlock {:?}", Err::<(), _>(ErrorKind::NotHeld))
    );
    assert!(frozen.wait(Duration::from_secs(10)).success());

    // The new holder's key: its field, one hold, and a live lease (the resumed child's
    // renewal found its own field gone and touched nothing).
    let fields = hkeys(&mut conn, FROZEN);
    assert!(fields.len() == 1 && fields[0].starts_with(client.id()), "new holder's field intact: {fields:?}");
    assert_eq!(hvals(&mut conn, FROZEN), [1]);
    assert!(pttl(&mut conn, FROZEN) > 0);
    assert!(guard.is_held());
    guard.unlock().unwrap();
    assert!(!exists(&mut conn, FROZEN));
}

/// The lock key vanishes under a live holder: deleted (`DEL`, as a careless script would)
/// or expired (`PEXPIRE 1`). The next renewal finds the owner's field gone; the guard must
/// read lost within one renewal interval, `lease_lost` must be called exactly once per loss,
/// and the renewal must not bring the key back.
///
/// Breaks if the renewal script re-creates or keeps the key, if the loss is seen only at the
/// local deadline (900 ms after the last renewal, not 300), or if `lease_lost` is called
/// twice (say once by the renewal and again when the local deadline passes) or not at all.
#[test]
fn a_lock_key_deleted_or_expired_under_its_holder_is_reported_lost_once() {
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(900);
    let (client, losses) = counting_client(&server, watchdog);
    let mut conn = server.conn();
    for (round, how) in ["DEL", "PEXPIRE"].into_iter().enumerate() {
        let name = format!("vanishing-{how}");
        let guard = client.lock(&*name).lock().unwrap();
        // Strike right after a renewal: the next one is a full renewal interval away, and
        // the local deadline a whole watchdog timeout away.
        let renewed = client.stats().leases_renewed;
        assert!(wait_until(Duration::from_secs(3), || client.stats().leases_renewed > renewed));
        match how {
            "DEL" => redis::cmd("DEL").arg(&name).query::<()>(&mut conn).unwrap(),
            _ => redis::cmd("PEXPIRE").arg(&name).arg(1).query::<()>(&mut conn).unwrap(),
        }
        let struck = Instant::now();
        assert!(wait_until(Duration::from_secs(3), || !guard.is_held()), "{how}: the loss is seen");
        let seen = struck.elapsed();
        assert!(seen < watchdog / 3 + Duration::from_millis(300), "{how}: loss seen after {seen:?}");
        assert_eq!(guard.lease_state(), LeaseState::Lost);
        assert!(wait_until(Duration::from_secs(1), || losses.count() == round + 1), "{how}: lease_lost called");
        // Past the local deadline and two more renewal intervals: no second call, no key.
        thread::sleep(watchdog.saturating_sub(struck.elapsed()) + watchdog / 3 * 2);
        assert_eq!(losses.count(), round + 1, "{how}: lease_lost called exactly once");
        assert!(!exists(&mut conn, &name), "{how}: the renewal did not bring the key back");
        assert_eq!(guard.unlock().unwrap_err().kind(), ErrorKind::NotHeld);
        assert_eq!(client.stats().renewals_scheduled, 0);
    }
}
