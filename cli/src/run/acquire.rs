//! What `run` acquires and holds, of each kind: a lock of `--kind`, a permit of a
//! permit-expirable semaphore (`--permits`), or the leadership of an election (`elect`).
//! [`Target`] takes it and [`Guard`] holds it, so that the runner and the supervision see
//! one lease whatever its kind. Also what is checked on the server before acquiring (a
//! semaphore's number of permits) and what is read there to say why nothing was acquired
//! (a window's end).

use std::time::{Duration, Instant};

use redlease::{AnyLock, Client, Election, Leadership, LeaseState, LockGuard, PermitExpirableSemaphore, PermitGuard};

use crate::args::RunArgs;
use crate::exit::{self, Failure, say, shown};
use crate::{locks, status};

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
    /// What `args` ask for, on `client`: an election, a permit of a semaphore (whose number
    /// of permits is set or checked first), or a lock of `--kind`.
    pub(super) fn from_args(args: &RunArgs, client: &Client) -> Result<Target, Failure> {
        Ok(match (&args.elect, args.permits) {
            (Some(value), _) => Target::Election(client.election(args.name.as_str()), value.clone()),
            (None, Some(permits)) => {
                let semaphore = client.permit_expirable_semaphore(args.name.as_str());
                set_permits(client, &semaphore, permits)?;
                Target::Permits(match args.lease {
                    Some(lease) => semaphore.with_lease(lease),
                    None => semaphore,
                })
            }
            (None, None) => Target::Lock(locks::handle(client, args.kind, &args.name, args.lease, args.at_least)),
        })
    }

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

    /// The command's variables of this kind, besides the lock's name and the client's id:
    /// a lock's owner and token (when fenced), a leader's owner and term.
    pub(super) fn variables(&self) -> Vec<(&'static str, String)> {
        let mut env = Vec::new();
        // A permit has no owner field.
        if let Guard::Lock(lock) = self {
            env.push(("REDLEASE_OWNER", lock.owner().to_owned()));
        }
        if let Some(token) = self.token() {
            env.push(("REDLEASE_TOKEN", token.to_string()));
        }
        if let Guard::Leader(leadership) = self {
            env.push(("REDLEASE_OWNER", leadership.owner().to_owned()));
            env.push(("REDLEASE_TERM", leadership.term().to_string()));
        }
        env
    }
}

/// Why nothing was acquired: at once with `--no-wait`, or within `--wait`; for a lock, a
/// window that keeps it taken is named.
pub(super) fn why_not_acquired(args: &RunArgs, client: &Client) -> String {
    if args.no_wait {
        return match (&args.elect, args.permits) {
            (Some(_), _) => format!("election {} is led by someone else", shown(&args.name)),
            (None, Some(_)) => format!("no permit of semaphore {} is free", shown(&args.name)),
            (None, None) => match window_end(client, &args.name) {
                Some(end) => format!("lock {} is kept taken by a window until {end}", shown(&args.name)),
                None => format!("lock {} is held by someone else", shown(&args.name)),
            },
        };
    }
    let wait = humantime::format_duration(args.wait.unwrap_or_default());
    match (&args.elect, args.permits) {
        (Some(_), _) => format!("election {} was not won within {wait}", shown(&args.name)),
        (None, Some(_)) => format!("no permit of semaphore {} was free within {wait}", shown(&args.name)),
        (None, None) => match window_end(client, &args.name) {
            Some(end) => {
                format!("lock {} was not free within {wait}: a window keeps it taken until {end}", shown(&args.name))
            }
            None => format!("lock {} was not free within {wait}", shown(&args.name)),
        },
    }
}

/// Until when a window (`--at-least`) keeps the lock `name` taken, when that is what holds
/// it now (one read that writes nothing; `None` also when it cannot be read).
fn window_end(client: &Client, name: &str) -> Option<String> {
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
fn set_permits(client: &Client, semaphore: &PermitExpirableSemaphore, permits: u64) -> Result<(), Failure> {
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
