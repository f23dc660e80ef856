//! Acquiring: the checks made before anything is sent, one attempt and the undo of an
//! uncertain one, and the wait loop every lock kind shares (try, subscribe, try again,
//! park).
//!
//! | step | outcome | next |
//! |------|---------|------|
//! | first attempt | acquired | done |
//! | first attempt | held, no wait asked (or deadline passed) | `Ok(None)` |
//! | first attempt | held | join the channel's waiters; wait for Redis to confirm the subscription |
//! | retry | acquired | leave the waiters, done |
//! | retry | held, deadline passed | leave, `Ok(None)` |
//! | retry | held (TTL `t`) | park until a release message, `t`, or the deadline; retry |
//! | any | error, refusal, or shutdown | leave, `Err` |
//! | a wait (not a single attempt) | another thread interrupts it (before, while parked, between retries) | leave, `Err(Interrupted)`; a grant made in the same instant is given back |

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;

use crate::base::backoff::BackOff;
use crate::base::clock;
use crate::base::error::{Context, Error, ErrorKind, Result};
use crate::base::keys;
use crate::engine::core::Engine;
use crate::engine::grant::{GrantAttempt, Sending};
use crate::engine::release::{Hold, Undo, undo_grant, undo_uncertain_acquire};
use crate::engine::retry::{riding_out, with_retries};
use crate::engine::undos;
use crate::kind::{AcquireArgs, GiveUp, Kind, LockKeys, Reply, Role};
use crate::observe::activity::Outcome;
use crate::observe::trace::{self, Tally};
use crate::support::interrupt;
use crate::transport::{Conn, Meaning, RunId};

/// How long a caller is prepared to wait.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    /// One attempt only.
    No,
    Until(Instant),
    Forever,
}

impl Wait {
    /// Whether this is a wait (which another thread may interrupt), not a single attempt.
    pub(crate) fn waits(self) -> bool {
        !matches!(self, Wait::No)
    }

    /// The caller's deadline, if it set one.
    fn deadline(self) -> Option<Instant> {
        match self {
            Wait::Until(deadline) => Some(deadline),
            Wait::No | Wait::Forever => None,
        }
    }
}

/// What both wait loops begin with: a wait (not a single attempt) on `name` that another
/// thread interrupted before it began fails at once; then `attempt`, tried again after a
/// failure that passes by itself (an uncertain attempt was undone first): a single attempt
/// within the retry budget, a wait until its own deadline (`engine::retry`), an interrupt
/// ending the pauses between tries.
fn begin_waiting<'a, T>(
    engine: &'a Engine,
    name: &'a str,
    wait: Wait,
    mut attempt: impl FnMut() -> Result<Attempt<T>> + 'a,
) -> Result<impl FnMut() -> Result<Attempt<T>> + 'a> {
    if wait.waits() && interrupt::take() {
        return Err(Error::interrupted());
    }
    let deadline = wait.deadline();
    Ok(move || {
        if wait.waits() {
            riding_out(engine, name, deadline, |_| attempt())
        } else {
            with_retries(engine, deadline, |_| attempt())
        }
    })
}

/// A wait of at most `timeout` from now. One whose deadline lies beyond what `Instant`
/// holds (`Duration::MAX`, say) is a wait without deadline, as `lock()`'s is, the way
/// parking_lot's `try_lock_for` reads it: nobody means "until an overflow" as a limit.
pub(crate) fn wait_within(timeout: Duration) -> Wait {
    clock::deadline_in(timeout).map_or(Wait::Forever, Wait::Until)
}

/// The lock an acquire is for: its name, kind, fixed lease (`None`: the watchdog's), for
/// a spin lock how it waits between attempts, and whose the hold is.
#[derive(Clone, Copy)]
pub(crate) struct Request<'a> {
    pub(crate) name: &'a Arc<str>,
    pub(crate) kind: Kind,
    pub(crate) lease: Option<Duration>,
    pub(crate) backoff: Option<BackOff>,
    /// The calling thread's (`true`), or a fresh owner's of its own (a sendable guard's,
    /// which no thread has: nothing it holds is this thread's, and it never reenters).
    pub(crate) per_thread: bool,
    /// What a candidate in an election advertises when it leads.
    pub(crate) advertise: Option<&'a str>,
    /// How long after the grant the lock stays taken at least, released or not.
    pub(crate) keep_at_least: Option<Duration>,
    /// The lock's keys and channels, written once per handle (for the kinds that have them).
    pub(crate) lock_keys: Option<&'a Arc<LockKeys>>,
}

/// The checks every call on a lock makes before it sends anything: the client runs and
/// the name is valid.
pub(crate) fn ready(engine: &Engine, name: &str) -> Result<()> {
    engine
        .check_running()
        .and_then(|()| keys::check_name(name))
        .and_then(|()| engine.topology().check_name(name))
        .on_lock(name)
}

/// Every check an acquire makes before it sends anything: [`ready`], the lease is valid,
/// and the request could ever be granted. Returns the lease in milliseconds and whether
/// the watchdog keeps it.
pub(crate) fn prepare(engine: &Engine, request: Request<'_>) -> Result<(u64, bool)> {
    let name = &**request.name;
    ready(engine, name)?;
    if let Some(backoff) = request.backoff {
        backoff.check().on_lock(name)?;
    }
    let lease = match request.lease {
        Some(lease) => (keys::lease_millis("lease", lease).on_lock(name)?, false),
        None => (engine.watchdog_millis(), true),
    };
    if let Some(keep) = request.keep_at_least {
        check_keep(request.kind, keep, request.lease).on_lock(name)?;
    }
    // A non-reentrant lock this thread holds already would wait on itself: refused before
    // anything is sent, as Redisson's IllegalMonitorStateException.
    if request.per_thread && !request.kind.reentrant() && engine.holds(request.name, request.kind.role()) {
        return Err(Error::new(
            ErrorKind::WouldDeadlock,
            "this thread holds the lock already, and it is not reentrant: asking again would wait on itself forever",
        )
        .on_lock(name));
    }
    let upgrade = request.per_thread
        && request.kind.role() == Role::Write
        && engine.holds(request.name, Role::Read)
        && !engine.holds(request.name, Role::Write);
    if upgrade {
        return Err(Error::new(
            ErrorKind::WouldDeadlock,
            "this thread holds the read lock: asking for the write lock would wait on itself forever",
        )
        .on_lock(name));
    }
    Ok(lease)
}

/// What a hold kept at least `keep` after its grant asks: a kind whose release can leave
/// the lock taken (a plain lock's hash: the reentrant, non-reentrant, spin and fenced
/// kinds), a whole number of milliseconds a lease could be, no longer than a fixed lease.
fn check_keep(kind: Kind, keep: Duration, lease: Option<Duration>) -> Result<()> {
    if !kind.keeps() {
        return Err(Error::invalid(format!(
            "a {} lock cannot be kept after its release (only the plain, non-reentrant, spin and fenced locks can)",
            kind.label()
        )));
    }
    keys::lease_millis("hold kept at least", keep)?;
    if let Some(lease) = lease.filter(|lease| keep > *lease) {
        return Err(Error::invalid(format!(
            "a hold kept at least {keep:?} is longer than its lease of {lease:?}: the lease would end first"
        )));
    }
    Ok(())
}

/// Acquires `request` for the current thread, waiting as `wait` says: `Ok(None)` when the
/// lock was not had in time.
pub(crate) fn acquire(engine: &Arc<Engine>, request: Request<'_>, wait: Wait) -> Result<Option<Hold>> {
    let (lease_millis, watchdog) = prepare(engine, request)?;
    // Counts the client active from here to the end of the hold it may get.
    let active = engine.config().events.active();
    let (name, kind) = (&**request.name, request.kind);
    let owner = if request.per_thread { engine.current_owner() } else { engine.fresh_owner() };
    let args = AcquireArgs {
        lease_millis,
        wait_millis: engine.fair_wait_millis(),
        // A spin waiter polls: it neither queues nor registers its client.
        queue: wait.waits() && request.backoff.is_none(),
        wake_token: engine.topology().wake_token(),
        holds_nothing: true,
        advertise: request.advertise.unwrap_or(""),
        lock_keys: request.lock_keys.map(|keys| &**keys),
    };
    let command_timeout = engine.config().command_timeout;
    // A late undo of an earlier acquire by this thread must not take this one's hold away.
    if engine.undos().any_in_flight()
        && let Some(bound) = clock::deadline_in(command_timeout.saturating_mul(2))
    {
        engine.undos().wait_for(name, &owner, bound);
    }
    let attempt = || attempt_lock(engine, request, &owner, args);
    let result = match request.backoff {
        Some(backoff) => spin_for(engine, name, kind.label(), backoff, wait, attempt),
        None => {
            wait_for(engine, name, kind.label(), || (kind.wait_channel(name, &owner), kind.meaning(), 1), wait, attempt)
        }
    };
    if args.queue && kind.queues() && !matches!(result, Ok(Some(_))) && engine.check_running().is_ok() {
        leave_the_queue(engine, kind, name, &owner);
    }
    let acquired = result.on_lock(name)?;
    let hold = acquired.map(|Grant { sent, token, joined, held_before, run }| {
        if held_before && !joined {
            // Redis had nothing of the thread's hold (a restart emptied it, a force unlock):
            // this grant is a first hold, and the lease of the thread's guards is lost.
            engine.learned_not_held(request.name, kind.role());
        }
        let lease = engine.lease_for(kind, request.name, owner, request.per_thread);
        let term = engine.add_hold(&lease, sent, lease_millis, watchdog);
        lease.shown_on(run);
        // Counted from now, after the grant: the lock is kept at least that long after it.
        let keep_until = request.keep_at_least.and_then(|keep| Instant::now().checked_add(keep));
        Hold::new(Arc::clone(engine), lease, kind, term, token, active)
            .keeping_until(keep_until)
            .with_lock_keys(request.lock_keys.cloned())
    });
    // Granted in the same instant as an interrupt came: given back, as if the wait had
    // ended first (a release, which wakes the next waiter).
    if hold.is_some() && wait.waits() && interrupt::take() {
        if let Some(hold) = hold {
            let _ = hold.begin_release().and_then(|release| release.send(true, None));
        }
        return Err(Error::interrupted().on_lock(name));
    }
    Ok(hold)
}

/// One attempt of `owner` at the lock of `request`: see `engine::grant` for what every
/// grant attempt shares; this is what a lock brings to it.
fn attempt_lock(
    engine: &Arc<Engine>,
    request: Request<'_>,
    owner: &str,
    args: AcquireArgs<'_>,
) -> Result<Attempt<Grant>> {
    let (name, kind) = (&**request.name, request.kind);
    let command_timeout = engine.config().command_timeout;
    let sent = Instant::now();
    // Whether this thread holds the lock already (a reentrant acquire), asked at every
    // attempt: a wait is long enough for that lease to be lost meanwhile.
    let held_before = request.per_thread && engine.holds(request.name, kind.role());
    let args = AcquireArgs { holds_nothing: !held_before, ..args };
    // A reply that does not come in time leaves the outcome unknown: the undo goes out on
    // the same connection, behind the acquire, from a thread of its own (the caller does
    // not wait for it). Not when this thread held the lock already: a decrement could
    // undo a hold it really has.
    let mut undo = |conn| hand_off_undo(engine, request, owner, command_timeout, conn);
    let undo = (!held_before).then_some(&mut undo as &mut dyn FnMut(Conn));
    let granted = engine.attempt_grant(GrantAttempt {
        what: "acquiring",
        key: name,
        sending: Sending::HandingOff(undo),
        send: &|conn| kind.attempt(conn, name, owner, args),
        is_granted: |reply| matches!(reply, Reply::Granted { .. }),
        // Judged by what is known of the master of this connection (after a cluster's
        // redirection, not necessarily the pool's). Granted for certain, but not to be
        // trusted: taken back there, unless the confirmation failed on the connection
        // and the hand-off or the uncertain-acquire undo takes it back instead (once).
        take_back: &|conn| undo_grant(engine, conn, kind, request.name, owner),
        undone_elsewhere: &|err| {
            !held_before && (err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal())
        },
        // Made on the old master just before or after its replica was promoted: taken
        // back on the new master too, so that the next attempt does not find an extra
        // hold of this owner. Not when this thread held the lock already.
        superseded: &|| {
            if !held_before {
                undo_uncertain_acquire(engine, kind, request.name, owner);
            }
        },
        uncertain: &|| undo_uncertain_acquire(engine, kind, request.name, owner),
    });
    match granted.on_lock(name)? {
        (Reply::Granted { token, joined }, run) => {
            Ok(Attempt::Acquired(Grant { sent, token, joined, held_before, run }))
        }
        (Reply::Busy { ttl }, _) => Ok(Attempt::Held { ttl }),
    }
}

/// Leaves whatever a wait that ended without the lock left in Redis (a fair lock's place in
/// the queue, a plain lock's waiting client).
fn leave_the_queue(engine: &Engine, kind: Kind, name: &str, owner: &str) {
    let left = GiveUp {
        name,
        owner,
        wait_millis: engine.fair_wait_millis(),
        wake_token: engine.topology().wake_token(),
        always_publish: engine.config().always_publish_releases,
    };
    let _ = engine.pool_for(name).run("leaving the queue", |conn| kind.give_up(conn, &left));
}

/// One attempt for `owner` (computed on the owner's thread) within `limit`, for a Redlock
/// node: `None` when it failed or took too long. When `undo_on_timeout`, an attempt whose
/// reply did not come in time is undone right behind it, on its connection, so that a
/// slow node that grants late does not keep the lock.
pub(crate) fn attempt_within(
    engine: &Arc<Engine>,
    request: Request<'_>,
    owner: &str,
    lease_millis: u64,
    limit: Duration,
    undo_on_timeout: bool,
) -> Option<Reply> {
    let (name, kind) = (&**request.name, request.kind);
    let args = AcquireArgs {
        lease_millis,
        wait_millis: engine.fair_wait_millis(),
        queue: false,
        wake_token: engine.topology().wake_token(),
        // Decided on the owner's thread, as whether to undo a late grant.
        holds_nothing: undo_on_timeout,
        advertise: request.advertise.unwrap_or(""),
        lock_keys: request.lock_keys.map(|keys| &**keys),
    };
    // The undo of a late node's grant does not hold up the attempt: it goes from a thread
    // of its own, on the node's connection, behind the acquire.
    let command_timeout = engine.config().command_timeout;
    // A late undo of this owner's earlier attempt must not take this one's grant away; the
    // node was slow a moment ago, and this attempt counts it as failed rather than wait.
    if engine.undos().in_flight_for(name, owner) {
        return None;
    }
    let mut undo = |conn| hand_off_undo(engine, request, owner, command_timeout, conn);
    let undo = undo_on_timeout.then_some(&mut undo as &mut dyn FnMut(Conn));
    engine
        .pool_for(name)
        .run_handing_off("acquiring", Some(limit), |conn| kind.attempt(conn, name, owner, args), undo)
        .ok()
}

/// The undo of an acquire whose reply did not come in time, on the connection the pool
/// hands over: prepared here (only then: an attempt that is answered, nearly all of them,
/// copies nothing for it), sent from a thread of its own behind the late acquire.
fn hand_off_undo(engine: &Engine, request: Request<'_>, owner: &str, command_timeout: Duration, conn: Conn) {
    let undo = Undo::prepare(engine, request.kind, request.name, owner, engine.watchdog_millis(), command_timeout);
    undos::hand_off(engine.undos(), request.name, owner, conn, move |mut conn| undo.send_on(&mut conn));
}

/// A lock's grant, as the attempt that got it saw it.
struct Grant {
    /// When its request was sent: the hold is valid from then.
    sent: Instant,
    /// A fenced lock's token, an election's term.
    token: Option<u64>,
    /// The owner held the lock in Redis already.
    joined: bool,
    /// The thread held a live lease of the lock when the attempt began.
    held_before: bool,
    /// The run of the server that granted it.
    run: Option<RunId>,
}

/// What one attempt found.
pub(crate) enum Attempt<T> {
    Acquired(T),
    /// Someone else holds it; `ttl` is how long it may stay so, when that is known.
    Held {
        ttl: Option<Duration>,
    },
}

/// The spin lock's wait loop: no subscription, no message; between attempts, the sleeps of
/// `backoff` (Redisson's), each cut to the caller's deadline, and ended by an interrupt.
/// Counted as an acquisition of `lock`, of the kind `kind` (in words).
pub(crate) fn spin_for<T>(
    engine: &Engine,
    lock: &str,
    kind: &'static str,
    backoff: BackOff,
    wait: Wait,
    attempt: impl FnMut() -> Result<Attempt<T>>,
) -> Result<Option<T>> {
    counted(engine, lock, kind, wait, |waited, tries| {
        spin_loop(engine, lock, backoff, wait, tries.counting(attempt), waited)
    })
}

/// Runs a wait loop (told to say whether it waited, and given a tally for its attempts)
/// and counts how the acquisition ended; traced as the span `acquire`.
fn counted<T>(
    engine: &Engine,
    lock: &str,
    kind: &'static str,
    wait: Wait,
    wait_loop: impl FnOnce(&mut bool, &Tally) -> Result<Option<T>>,
) -> Result<Option<T>> {
    let started = Instant::now();
    let _active = engine.acquisition_begins();
    let mut waited = false;
    let tries = Tally::default();
    let span =
        trace::span!(DEBUG, "acquire", lock = lock, kind = kind, client = engine.id(); outcome, waited_ms, attempts);
    let result = trace::within!(span, wait_loop(&mut waited, &tries));
    let outcome = match &result {
        Ok(Some(_)) if waited => Outcome::AfterWaiting(started.elapsed()),
        Ok(Some(_)) => Outcome::AtOnce,
        Ok(None) if matches!(wait, Wait::No) => Outcome::Busy,
        Ok(None) => Outcome::TimedOut,
        Err(err) if err.is_interrupted() => Outcome::Interrupted,
        Err(_) => Outcome::Failed,
    };
    engine.config().events.acquisition(kind, lock, outcome, started.elapsed());
    // `waited_ms`: from the call to its end (for an acquire at once, its round trips).
    trace::record!(
        span,
        outcome = outcome.label(),
        waited_ms = trace::millis(started.elapsed()),
        attempts = tries.calls()
    );
    result
}

fn spin_loop<T>(
    engine: &Engine,
    lock: &str,
    backoff: BackOff,
    wait: Wait,
    attempt: impl FnMut() -> Result<Attempt<T>>,
    waited: &mut bool,
) -> Result<Option<T>> {
    let deadline = wait.deadline();
    let mut attempt = begin_waiting(engine, lock, wait, attempt)?;
    if let Attempt::Acquired(value) = attempt()? {
        return Ok(Some(value));
    }
    if !wait.waits() {
        return Ok(None);
    }
    *waited = true;
    let mut sleeps = backoff.sleeps();
    loop {
        let now = Instant::now();
        let left = deadline.map(|d| d.saturating_duration_since(now));
        if left.is_some_and(|left| left.is_zero()) {
            return Ok(None);
        }
        let sleep = sleeps.next(|n| rand::rng().random_range(0..n));
        if interrupt::nap(left.map_or(sleep, |left| sleep.min(left))) && interrupt::take() {
            return Err(Error::interrupted());
        }
        engine.check_running()?;
        if let Attempt::Acquired(value) = attempt()? {
            return Ok(Some(value));
        }
    }
}

/// The wait loop of an acquisition of `lock`, of the kind `kind` (in words), counted as
/// one (see [`wait_loop`]).
pub(crate) fn wait_for<T>(
    engine: &Engine,
    lock: &str,
    kind: &'static str,
    waiting: impl FnOnce() -> (String, &'static dyn Meaning, u64),
    wait: Wait,
    attempt: impl FnMut() -> Result<Attempt<T>>,
) -> Result<Option<T>> {
    counted(engine, lock, kind, wait, |waited, tries| {
        wait_loop(engine, lock, waiting, wait, tries.counting(attempt), Some(waited))
    })
}

/// The wait loop. `waiting` names the channel to wait on, how its messages wake, and how
/// many permits this waiter wants (1 for a lock); it is asked for only when the first
/// attempt fails and the caller waits (an uncontended acquire never needs it). `waited`,
/// when given, is set when the loop waits, and the wake-ups are counted: the loop of an
/// acquisition.
pub(crate) fn wait_loop<T>(
    engine: &Engine,
    name: &str,
    waiting: impl FnOnce() -> (String, &'static dyn Meaning, u64),
    wait: Wait,
    attempt: impl FnMut() -> Result<Attempt<T>>,
    mut waited: Option<&mut bool>,
) -> Result<Option<T>> {
    let deadline = wait.deadline();
    let mut attempt = begin_waiting(engine, name, wait, attempt)?;
    // What the subscribers had read before the first attempt: a subscription confirmed,
    // and silent, since then has missed nothing after it.
    let since = engine.topology().message_seq();
    let first_ttl = match attempt()? {
        Attempt::Acquired(value) => return Ok(Some(value)),
        Attempt::Held { ttl } => ttl,
    };
    if matches!(wait, Wait::No) {
        return Ok(None);
    }
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Ok(None);
    }
    if let Some(waited) = waited.as_deref_mut() {
        *waited = true;
    }
    // Wake-ups are counted for an acquisition's loop: wasted when the attempt after one
    // finds the lock taken again.
    let activity = waited.is_some().then(|| engine.config().events.activity());
    let mut woken = false;
    let (channel, meaning, weight) = waiting();
    let mut ticket = engine.topology().join(&channel, deadline, meaning, weight, since)?;
    if interrupt::take() {
        return Err(Error::interrupted());
    }
    // A subscription kept from an earlier wait, silent since before the first attempt: any
    // release after that attempt will wake this waiter, so it parks at once.
    let mut parked_first = ticket.fresh().then_some(first_ttl);
    loop {
        engine.check_running()?;
        let held = match parked_first.take() {
            Some(ttl) => Attempt::Held { ttl },
            None => attempt()?,
        };
        if let Some(activity) = activity.filter(|_| std::mem::take(&mut woken)) {
            activity.woken(matches!(held, Attempt::Held { .. }));
        }
        let ttl = match held {
            Attempt::Acquired(value) => {
                ticket.acquired();
                return Ok(Some(value));
            }
            Attempt::Held { ttl } => ttl,
        };
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(None);
        }
        // A lost message costs at most the holder's TTL; a key with no TTL is looked at
        // again after one watchdog timeout, and sooner when the channel's meaning says so
        // (a waiter that registered its client renews the registration by looking).
        let mut recheck = ttl.unwrap_or(engine.config().watchdog_timeout);
        if let Some(within) = meaning.look_again_within() {
            recheck = recheck.min(within);
        }
        let until = clock::earliest(now.checked_add(recheck), deadline);
        woken = ticket.park(until);
        if interrupt::take() {
            return Err(Error::interrupted());
        }
        // Redis may have refused the subscription meanwhile (after a reconnect).
        ticket.check()?;
        if ticket.moved() {
            // A cluster moved the channel's slot to another node: its messages go there.
            drop(ticket);
            ticket = engine.topology().rejoin(&channel, deadline, meaning, weight)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_whose_deadline_overflows_has_none() {
        assert!(matches!(wait_within(Duration::MAX), Wait::Forever));
        assert!(matches!(wait_within(Duration::from_secs(u64::MAX)), Wait::Forever));
        assert!(matches!(wait_within(Duration::from_millis(5)), Wait::Until(_)));
        assert!(matches!(wait_within(Duration::ZERO), Wait::Until(_)));
    }

    #[test]
    fn only_a_plain_locks_hash_is_kept_and_within_its_lease() {
        let second = Duration::from_secs(1);
        for kind in [Kind::Reentrant, Kind::NonReentrant, Kind::Spin, Kind::Fenced] {
            assert!(check_keep(kind, second, None).is_ok(), "{kind:?}");
            assert!(check_keep(kind, second, Some(second)).is_ok(), "{kind:?}");
            assert!(check_keep(kind, second * 2, Some(second)).unwrap_err().is_invalid_input());
        }
        for kind in [Kind::Fair, Kind::NonReentrantFair, Kind::Read, Kind::Write, Kind::Election] {
            let err = check_keep(kind, second, None).unwrap_err();
            assert!(err.is_invalid_input() && err.to_string().contains(kind.label()), "{err}");
        }
        assert!(check_keep(Kind::Reentrant, Duration::ZERO, None).unwrap_err().is_invalid_input());
    }
}
