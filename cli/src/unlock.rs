//! `redlease unlock --force NAME`: the library's `force_unlock`, which deletes the lock
//! whoever holds it and wakes its waiters.

use std::io::Write as _;

use redlease::{HolderRole, LockInfo, LockKind};

use crate::args::{Kind, UnlockArgs};
use crate::connect::Settings;
use crate::exit::{self, Failure};
use crate::{locks, names};

/// Why `--force` must be given, before anything is sent.
pub const FORCE_REQUIRED: &str = "unlock --force is required: unlock deletes the lock whoever holds it, \
     so a holder loses it while it may still be working (see redlease unlock --help)";

pub fn unlock(args: &UnlockArgs) -> Result<u8, Failure> {
    if !args.force {
        return Err(Failure::usage(FORCE_REQUIRED));
    }
    names::check(&args.name)?;
    let settings = Settings::from_args(&args.connection)?;
    let client = settings.client(None, None)?;
    // The kind is read from Redis, as `status` reads it: a fair lock's waiters are woken on
    // channels of their own, and a read-write lock is deleted only in its mode, so a wrong
    // kind would delete nothing, or leave waiters asleep.
    let found = client
        .inspect(&args.name)
        .map_err(|e| Failure::from_lock_error(&format!("cannot read {}", exit::shown(&args.name)), &e))?;
    let kind = kind_to_unlock(&found, args.kind)?;
    let lock = locks::handle(&client, kind, &args.name, None, None);
    let deleted = lock.force_unlock().map_err(|e| Failure::from_lock_error("cannot force-unlock", &e))?;
    client.shutdown();
    let name = names::printable(&args.name);
    if deleted {
        let _ = writeln!(std::io::stdout(), "unlocked {name}");
        Ok(exit::OK)
    } else {
        exit::say(&format!("{name} was not locked"));
        Ok(exit::NOT_LOCKED)
    }
}

/// The kind to force open: the one `found` in Redis, which `given` (`--kind`), when given,
/// must agree with; `given` (or a plain lock) when nothing is there. A kind that is not a
/// lock is refused, naming it.
fn kind_to_unlock(found: &LockInfo, given: Option<Kind>) -> Result<Kind, Failure> {
    let name = exit::shown(&found.name);
    let Some(kind) = found.kind else { return Ok(given.unwrap_or(Kind::Lock)) };
    let read_write_mode = || {
        if found.holders.iter().any(|h| h.role == HolderRole::Write) { Kind::Write } else { Kind::Read }
    };
    let fits: &[Kind] = match kind {
        // A fair lock with nobody queued is a plain lock's hash, as Redis shows it.
        LockKind::Lock => &[Kind::Lock, Kind::Spin, Kind::Fair],
        LockKind::Fair => &[Kind::Fair],
        LockKind::ReadWrite => &[Kind::Read, Kind::Write],
        LockKind::Fenced => &[Kind::Fenced],
        _ => {
            return Err(Failure::usage(format!(
                "{name} is a {}, not a lock: unlock --force deletes locks (lock, fair, read-write, fenced, spin)",
                described(kind)
            )));
        }
    };
    match given {
        None if kind == LockKind::ReadWrite => Ok(read_write_mode()),
        None => Ok(fits[0]),
        Some(Kind::Read | Kind::Write) if kind == LockKind::ReadWrite => Ok(read_write_mode()),
        Some(given) if fits.contains(&given) => Ok(given),
        Some(given) => Err(Failure::usage(format!(
            "{name} is a {}, not --kind {}: give --kind {} or leave --kind out",
            described(kind),
            given.name(),
            cli_name(kind)
        ))),
    }
}

/// A lock kind found in Redis, in words.
fn described(kind: LockKind) -> &'static str {
    match kind {
        LockKind::Lock => "plain lock",
        LockKind::Fair => "fair lock",
        LockKind::ReadWrite => "read-write lock",
        LockKind::Fenced => "fenced lock",
        other => other.name(),
    }
}

/// The `--kind` value of a lock kind found in Redis.
fn cli_name(kind: LockKind) -> &'static str {
    match kind {
        LockKind::ReadWrite => "write (or read)",
        other => other.name(),
    }
}
