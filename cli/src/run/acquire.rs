//! What `run` acquires and holds, of each kind: a lock of `--kind`, a permit of a
//! permit-expirable semaphore (`--permits`), or the leadership of an election (`elect`).
//! [`Target`] takes it and [`Guard`] holds it, so that the runner and the supervision see
//! one lease whatever its kind. Also what is checked on the server before acquiring (a
//! semaphore's number of permits) and what is read there to say why nothing was acquired
//! (a window's end).

use std::time::{Duration, Instant};

use redlease::{AnyLock, Client, Election, Leadership, LeaseState, LockGuard, PermitExpirableSemaphore, PermitGuard};

use crate::exit::{self, Failure, say, shown};
use crate::status;

/// What `run` acquires: a lock, a permit of a semaphore (`--permits`), or the leadership
/// of an election (`elect`), advertising a value.
pub(super) enum Target {
    Lock(AnyLock),
    Permits(PermitExpirableSemaphore),
    Election(Election, String),
}

/// What `run` holds while the command runs.
pub(super) enum Guard {
    Lock(LockGuard),
    Permit(PermitGuard),
    Leader(Leadership),
}

impl Target {
    pub(super) fn try_once(&self) -> redlease::Result<Option<Guard>> {
        match self {
            Target::Lock(lock) => lock.try_lock().map(|g| g.map(Guard::Lock)),
            Target::Permits(semaphore) => semaphore.try_acquire(1).map(|g| g.map(Guard::Permit)),
            Target::Election(election, value) => election.try_campaign(value).map(|g| g.map(Guard::Leader)),
        }
    }

    pub(super) fn try_for(&self, wait: Duration) -> redlease::Result<Option<Guard>> {
        match self {
            Target::Lock(lock) => lock.try_lock_for(wait).map(|g| g.map(Guard::Lock)),
            Target::Permits(semaphore) => semaphore.try_acquire_for(1, wait).map(|g| g.map(Guard::Permit)),
            Target::Election(election, value) => election.campaign_for(value, wait).map(|g| g.map(Guard::Leader)),
        }
    }

    pub(super) fn wait(&self) -> redlease::Result<Option<Guard>> {
        match self {
            Target::Lock(lock) => lock.lock().map(|g| Some(Guard::Lock(g))),
            Target::Permits(semaphore) => semaphore.acquire(1).map(|g| Some(Guard::Permit(g))),
            Target::Election(election, value) => election.campaign(value).map(|g| Some(Guard::Leader(g))),
        }
    }
}

impl Guard {
    /// Whether the lease is held (or at risk) as far as the client knows (no I/O).
    pub(super) fn is_held(&self) -> bool {
        match self {
            Guard::Lock(guard) => guard.is_held(),
            Guard::Permit(guard) => guard.is_held(),
            Guard::Leader(leadership) => leadership.is_leader(),
        }
    }

    pub(super) fn lease_state(&self) -> LeaseState {
        match self {
            Guard::Lock(guard) => guard.lease_state(),
            Guard::Permit(guard) => guard.lease_state(),
            Guard::Leader(leadership) => leadership.watch().state(),
        }
    }

    /// Until when no other run can hold the lock, as far as this process can tell.
    pub(super) fn valid_until(&self) -> Option<Instant> {
        match self {
            Guard::Lock(guard) => guard.valid_until(),
            Guard::Permit(guard) => guard.valid_until(),
            Guard::Leader(leadership) => leadership.valid_until(),
        }
    }

    /// Releases: `Err(NotHeld)` when the lease was found lost.
    pub(super) fn release(self) -> redlease::Result<()> {
        match self {
            Guard::Lock(guard) => guard.unlock(),
            Guard::Permit(guard) => guard.release(),
            Guard::Leader(leadership) => leadership.resign(),
        }
    }

    pub(super) fn token(&self) -> Option<u64> {
        match self {
            Guard::Lock(guard) => guard.token(),
            Guard::Permit(_) | Guard::Leader(_) => None,
        }
    }
}

/// Until when a window (`--at-least`) keeps the lock `name` taken, when that is what holds
/// it now (one read that writes nothing; `None` also when it cannot be read).
pub(super) fn window_end(client: &Client, name: &str) -> Option<String> {
    let info = client.inspect(name).ok()?;
    match info.holders.as_slice() {
        [keeper] if keeper.is_window_keeper() => Some(status::window_end(&info)),
        _ => None,
    }
}

/// Sets the semaphore to `permits` when it has none; otherwise checks the number it has
/// (permits available plus taken, read at one instant). More than `permits`: refused, as
/// more commands than asked could run at once. Fewer: a warning, and the run goes on (the
/// first run to set the permits decides their number: Redisson's semaphore keeps no total
/// of its own).
pub(super) fn set_permits(client: &Client, semaphore: &PermitExpirableSemaphore, permits: u64) -> Result<(), Failure> {
    let name = shown(semaphore.name());
    let set = semaphore
        .try_set_permits(permits)
        .map_err(|e| Failure::from_lock_error(&format!("cannot set the permits of semaphore {name}"), &e))?;
    if set {
        return Ok(());
    }
    let info = client
        .inspect(semaphore.name())
        .map_err(|e| Failure::from_lock_error(&format!("cannot read semaphore {name}"), &e))?;
    let Some(total) = info.permits_total() else {
        // Deleted since: the next acquire finds no permits and waits for them.
        say(&format!("semaphore {name} has no permits set any more; waiting for one"));
        return Ok(());
    };
    let asked = i64::try_from(permits).unwrap_or(i64::MAX);
    let has = if total == 1 { "1 permit".to_owned() } else { format!("{total} permits") };
    if total > asked {
        return Err(Failure::new(
            exit::CONFIG,
            format!(
                "semaphore {name} has {has}, more than --permits {permits}: not run (the first run sets the number; see docs/cli.md to change it)"
            ),
        ));
    }
    if total < asked {
        say(&format!(
            "semaphore {name} has {has}, not {permits}: at most {total} run at once (the first run sets the number)"
        ));
    }
    Ok(())
}
