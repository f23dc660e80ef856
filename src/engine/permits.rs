//! Semaphores and the count-down latch: taking permits (through the wait loop the locks
//! use), giving them back, the leases of a permit-expirable semaphore's permits (renewed by
//! the same watchdog), and waiting for a latch to open.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::RngCore;

use crate::base::error::{Context, Error, ErrorKind, Result};
use crate::base::keys;
use crate::engine::acquire::{Attempt, Wait, ready, wait_for, wait_loop};
use crate::engine::core::Engine;
use crate::engine::grant::{GrantAttempt, Sending};
use crate::engine::lease::{Lease, LeaseState, Renews, Term};
use crate::engine::release::release_outcome;
use crate::engine::retry::with_retries;
use crate::engine::undos;
use crate::kind::semaphore::{self, PermitId, Taken};
use crate::kind::wake;
use crate::observe::activity::Active;
use crate::observe::events::Events;
use crate::observe::trace;
use crate::support::interrupt;

/// Most permits one call may take or add: what Redis's integers and Lua's numbers hold.
const MAX_PERMITS: u64 = 1 << 48;

/// Checks a number of permits a caller asks for: at least 1, at most [`MAX_PERMITS`].
pub(crate) fn check_permits(name: &str, permits: u64) -> Result<()> {
    if permits == 0 || permits > MAX_PERMITS {
        return Err(Error::invalid(format!("{permits} permits: ask for 1 ..= {MAX_PERMITS}")).on_semaphore(name));
    }
    Ok(())
}

/// Takes `permits` of the semaphore `name`, waiting as `wait` says; `Ok(false)` when they
/// were not had in time. An acquire whose reply is lost is neither undone nor sent again:
/// giving back permits that were never taken would let more holders in than there are
/// permits, and a second send could take them twice; such permits stay taken (the
/// permit-expirable semaphore has no such leak). Permits taken on a master that cannot be
/// trusted with them (replica-synced grants, as for the locks) are given back on the
/// connection they were taken on, and there only: whether the master the client follows
/// next has them is not known, and a blind give-back there could add a permit.
pub(crate) fn acquire(engine: &Engine, name: &Arc<str>, permits: u64, wait: Wait) -> Result<bool> {
    ready(engine, name).on_semaphore(name)?;
    check_permits(name, permits)?;
    let attempt = || {
        let taken = engine.attempt_grant(GrantAttempt {
            what: "taking permits",
            key: name,
            sending: Sending::Once,
            send: &|conn| semaphore::acquire(conn, name, permits),
            is_granted: |taken| *taken == Taken::Yes,
            take_back: &|conn| drop(semaphore::add(conn, name, i64::try_from(permits).unwrap_or(i64::MAX))),
            // A confirmation that failed leaves the permits taken: safe, and not sent again.
            undone_elsewhere: &|_| true,
            // Whether the master the client follows now has them is not known: a blind
            // give-back there could add a permit.
            superseded: &|| {},
            uncertain: &|| {},
        });
        match taken.on_semaphore(name)? {
            (Taken::Yes, _) => Ok(Attempt::Acquired(())),
            (Taken::No { retry_in }, _) => Ok(Attempt::Held { ttl: retry_in }),
        }
    };
    let taken =
        wait_for(engine, name, "semaphore", || (keys::semaphore_channel(name), &wake::PERMITS, permits), wait, attempt);
    let taken = taken.on_semaphore(name)?.is_some();
    if !taken {
        no_permits_at_all(engine, name, wait)?;
    }
    // Taken in the same instant as an interrupt came: given back (these permits are surely
    // this call's, so adding them back is exact), as if the wait had ended first.
    if taken && wait.waits() && interrupt::take() {
        let given_back = i64::try_from(permits).unwrap_or(i64::MAX);
        let _ = engine.pool_for(name).run_once("giving permits back", |conn| semaphore::add(conn, name, given_back));
        return Err(Error::interrupted().on_semaphore(name));
    }
    Ok(taken)
}

/// After a timed wait for permits that ran out: `Err` when the semaphore has no permits at
/// all (none was ever set, or its keys were deleted), rather than `Ok(None)`, since nothing
/// would ever have come back: a semaphore waits for permits someone sets, as Redisson's
/// does, and a caller deserves to hear why its wait could not succeed.
fn no_permits_at_all(engine: &Engine, name: &str, wait: Wait) -> Result<()> {
    let Wait::Until(_) = wait else { return Ok(()) };
    let set = engine.pool_for(name).run("reading the permits", |conn| semaphore::has_permits(conn, name));
    match set {
        Ok(false) => Err(Error::new(
            ErrorKind::Timeout,
            "the wait ran out on a semaphore that has no permits at all: none was ever set (try_set_permits, add_permits) or its keys were deleted",
        )
        .on_semaphore(name)),
        _ => Ok(()),
    }
}

/// Sets the permits of the semaphore `name` when none is set yet; whether it did.
pub(crate) fn try_set(engine: &Engine, name: &str, permits: u64, ttl: Option<Duration>) -> Result<bool> {
    ready(engine, name).on_semaphore(name)?;
    check_permits(name, permits)?;
    let ttl_millis = ttl.map(|ttl| keys::lease_millis("time to live", ttl)).transpose().on_semaphore(name)?;
    with_retries(engine, None, |_| {
        engine.pool_for(name).run_once("setting permits", |conn| semaphore::try_set(conn, name, permits, ttl_millis))
    })
    .on_semaphore(name)
}

/// Gives `permits` back to the semaphore `name` only if it exists (Redisson's
/// `releaseIfExists`): whether it did. A semaphore whose keys are gone (deleted, or past
/// a time to live) is not brought back by a late give-back.
pub(crate) fn release_if_exists(engine: &Engine, name: &str, permits: u64) -> Result<bool> {
    ready(engine, name).on_semaphore(name)?;
    check_permits(name, permits)?;
    let permits = i64::try_from(permits).unwrap_or(i64::MAX);
    with_retries(engine, None, |_| {
        engine.pool_for(name).run_once("giving permits back", |conn| semaphore::add_if(conn, name, permits, true))
    })
    .map(|available| available.is_some())
    .on_semaphore(name)
}

/// The permits available in the semaphore `name` now.
pub(crate) fn available(engine: &Engine, name: &str) -> Result<i64> {
    ready(engine, name).on_semaphore(name)?;
    with_retries(engine, None, |_| {
        engine.pool_for(name).run("reading the permits", |conn| semaphore::available(conn, name))
    })
    .on_semaphore(name)
}

/// Adds `permits` to the semaphore `name` (negative: takes them away) and wakes waiters;
/// the permits available after. Sent again only when it never left (it is not idempotent).
pub(crate) fn add(engine: &Engine, name: &str, permits: i64) -> Result<i64> {
    ready(engine, name).on_semaphore(name)?;
    let amount = permits.unsigned_abs();
    if amount > MAX_PERMITS {
        return Err(Error::invalid(format!("{permits} permits: at most {MAX_PERMITS} at once")).on_semaphore(name));
    }
    with_retries(engine, None, |_| {
        engine.pool_for(name).run_once("adding permits", |conn| semaphore::add(conn, name, permits))
    })
    .on_semaphore(name)
}

/// One guard's permits of a permit-expirable semaphore.
pub(crate) struct PermitHold {
    engine: Arc<Engine>,
    lease: Arc<Lease>,
    term: Term,
    /// When they were taken, for the hold-time histogram.
    since: Instant,
    /// Counts the client active (it announces itself) until the permits are let go.
    _active: Active,
}

/// Takes `permits` of the permit-expirable semaphore `name`, each with `lease` (`None`: the
/// watchdog's, renewed while the guard lives), waiting as `wait` says.
pub(crate) fn acquire_expirable(
    engine: &Arc<Engine>,
    name: &Arc<str>,
    permits: u64,
    lease: Option<Duration>,
    wait: Wait,
) -> Result<Option<PermitHold>> {
    ready(engine, name).on_semaphore(name)?;
    check_permits(name, permits)?;
    if permits > 1 << 16 {
        return Err(Error::invalid(format!("{permits} permits: a guard holds at most 65536")).on_semaphore(name));
    }
    // Counts the client active from here to the end of the hold it may get.
    let active = engine.config().events.active();
    let (lease_millis, watchdog) = match lease {
        Some(lease) => (keys::lease_millis("lease", lease).on_semaphore(name)?, false),
        None => (engine.watchdog_millis(), true),
    };
    let ids = fresh_permit_ids(permits);
    let command_timeout = engine.config().command_timeout;
    let attempt = || {
        let sent = Instant::now();
        // A reply that does not come in time: give the ids back, behind the acquire on its
        // connection (idempotent: ids that were not taken are simply not there).
        let mut undo = |conn| {
            let (theirs, ids) = (name.to_string(), ids.clone());
            undos::hand_off(engine.undos(), name, "", conn, move |mut conn| {
                if conn.set_read_timeout(Some(command_timeout)).is_ok() {
                    let _ = semaphore::release_permits(&mut conn, &theirs, &ids);
                }
            });
        };
        let give_back = || {
            let _ =
                engine.pool_for(name).run("giving permits back", |conn| semaphore::release_permits(conn, name, &ids));
        };
        let taken = engine.attempt_grant(GrantAttempt {
            what: "taking permits",
            key: name,
            sending: Sending::HandingOff(Some(&mut undo)),
            send: &|conn| semaphore::acquire_permits(conn, name, &ids, Some(lease_millis)),
            is_granted: |taken| *taken == Taken::Yes,
            // Replica-synced, as the locks' grants; ids that cannot be trusted are given
            // back (idempotent: ids that are not there are simply not there).
            take_back: &|conn| drop(semaphore::release_permits(conn, name, &ids)),
            undone_elsewhere: &|_| true,
            // The master the client follows now may have them from replication.
            superseded: &give_back,
            // Ids taken on a connection that broke run out with their lease.
            uncertain: &|| {},
        });
        match taken.on_semaphore(name)? {
            (Taken::Yes, _) => Ok(Attempt::Acquired(sent)),
            (Taken::No { retry_in }, _) => Ok(Attempt::Held { ttl: retry_in }),
        }
    };
    let taken = wait_for(
        engine,
        name,
        "permit semaphore",
        || (keys::semaphore_channel(name), &wake::PERMITS, permits),
        wait,
        attempt,
    );
    let Some(sent) = taken.on_semaphore(name)? else {
        no_permits_at_all(engine, name, wait)?;
        return Ok(None);
    };
    // Taken in the same instant as an interrupt came: given back, as if the wait had ended
    // first.
    if wait.waits() && interrupt::take() {
        let _ = engine.pool_for(name).run("giving permits back", |conn| semaphore::release_permits(conn, name, &ids));
        return Err(Error::interrupted().on_semaphore(name));
    }
    let lease = Arc::new(Lease::new(Arc::clone(name), Renews::Permits(ids), engine.watchdog_span()));
    let term = engine.add_hold(&lease, sent, lease_millis, watchdog);
    Ok(Some(PermitHold { engine: Arc::clone(engine), lease, term, since: Instant::now(), _active: active }))
}

/// `permits` new random permit ids.
fn fresh_permit_ids(permits: u64) -> Vec<PermitId> {
    let mut ids: Vec<PermitId> = vec![[0; 16]; usize::try_from(permits).unwrap_or(usize::MAX)];
    for id in &mut ids {
        rand::rng().fill_bytes(id);
    }
    ids
}

impl PermitHold {
    /// The lease's state as this client knows it (no I/O).
    pub(crate) fn state(&self) -> LeaseState {
        self.lease.state()
    }

    /// The permits' lease.
    pub(crate) fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }

    /// How long the permits' lease has left in Redis (Redisson's `getLeaseTime`), by the
    /// server's clock: `None` when they are gone (taken back past their deadline).
    pub(crate) fn remaining_lease(&self) -> Result<Option<Duration>> {
        let name: &str = self.lease.name();
        let Some(id) = self.ids().first() else { return Ok(None) };
        let deadline = with_retries(&self.engine, None, |_| {
            self.engine
                .pool_for(name)
                .run("reading the permits' lease", |conn| semaphore::permit_deadline(conn, name, id))
        })
        .on_semaphore(name)?;
        Ok(deadline.map(|(deadline, now)| Duration::from_millis(deadline.saturating_sub(now))))
    }

    /// The semaphore's name.
    pub(crate) fn name(&self) -> &str {
        self.lease.name()
    }

    /// The permits' ids.
    fn ids(&self) -> &[PermitId] {
        match self.lease.renews() {
            Renews::Permits(ids) => ids,
            Renews::Hash { .. } | Renews::Group { .. } => &[],
        }
    }

    /// The event hook of the client that holds them.
    pub(crate) fn events(&self) -> Events {
        self.engine.config().events.clone()
    }

    /// The number of permits held.
    pub(crate) fn permits(&self) -> usize {
        self.ids().len()
    }

    /// Gives the permits back. `Err(NotHeld)` when they were lost (their deadline passed):
    /// reported once as `lease_lost`, nothing sent when it was known before.
    pub(crate) fn release(self) -> Result<()> {
        let span = trace::span!(DEBUG, "release", lock = self.name(), kind = "permit semaphore", client = self.engine.id(); outcome);
        let result = trace::within!(span, self.release_untraced());
        trace::record!(span, outcome = release_outcome(&result));
        result
    }

    fn release_untraced(self) -> Result<()> {
        let engine = &self.engine;
        let name = self.name();
        engine.config().events.held(name, "semaphore", self.since.elapsed());
        engine.check_running().on_semaphore(name)?;
        if engine.release_hold(&self.lease, self.term).lost {
            return Err(Error::new(
                ErrorKind::NotHeld,
                "the permits' lease was lost before the release; nothing was sent",
            )
            .on_semaphore(name));
        }
        let ids = self.ids();
        let returned = with_retries(engine, None, |_| {
            engine.pool_for(name).run_once("giving permits back", |conn| semaphore::release_permits(conn, name, ids))
        })
        .on_semaphore(name)?;
        if returned.late + returned.gone > 0 {
            self.lease.lost(&engine.config().events);
            return Err(Error::new(
                ErrorKind::NotHeld,
                format!(
                    "{} of {} permits had passed their deadline (taken back by others: {})",
                    returned.late + returned.gone,
                    ids.len(),
                    returned.gone
                ),
            )
            .on_semaphore(name));
        }
        Ok(())
    }
}

/// Waits until the latch `name` is open (its count is zero), as `wait` says; `Ok(false)`
/// when it was not open in time.
pub(crate) fn await_latch(engine: &Engine, name: &Arc<str>, wait: Wait) -> Result<bool> {
    ready(engine, name).on_latch(name)?;
    let attempt = || {
        let count = with_retries(engine, None, |_| {
            engine.pool_for(name).run("reading the latch", |conn| semaphore::latch_count(conn, name))
        });
        match count.on_latch(name)? {
            0 => Ok(Attempt::Acquired(())),
            _ => Ok(Attempt::Held { ttl: None }),
        }
    };
    // Not an acquisition: not counted as one.
    let opened = wait_loop(engine, name, || (keys::latch_channel(name), &wake::LATCH, 1), wait, attempt, None);
    Ok(opened.on_latch(name)?.is_some())
}
