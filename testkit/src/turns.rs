//! Turns shared by every test process of the machine: the suites that run beside each
//! other on different servers (scripts/test runs the integration binary on three) take the
//! same turn for the tests that must not overlap, whichever process runs them.
//!
//! A turn is an exclusive `flock` on a file named after it in the temporary directory. The
//! kernel lets go of it when its holder exits, however it exits, so a test process that
//! crashed or was killed never leaves a turn taken.

use std::fs::{File, OpenOptions};
use std::path::PathBuf;

use nix::fcntl::{Flock, FlockArg};

/// A turn held until dropped.
#[must_use = "the turn is given back when this is dropped"]
pub struct Turn {
    _lock: Flock<File>,
}

/// The file whose lock is the turn `name`.
fn path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("redlease-turn-{name}.lock"))
}

/// Waits for the turn `name` and takes it. Panics (this is test code) when the file cannot be
/// opened or locked.
pub fn take(name: &str) -> Turn {
    let path = path(name);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open the turn file {}: {e}", path.display()));
    let lock = Flock::lock(file, FlockArg::LockExclusive)
        .unwrap_or_else(|(_, e)| panic!("cannot lock the turn file {}: {e}", path.display()));
    Turn { _lock: lock }
}

/// Takes the turn `name` when it is free; `None` when another holds it.
pub fn try_take(name: &str) -> Option<Turn> {
    let path = path(name);
    let file = OpenOptions::new().create(true).truncate(false).write(true).open(&path).ok()?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).ok().map(|lock| Turn { _lock: lock })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_held_until_dropped() {
        let name = format!("selftest-{}", std::process::id());
        let first = take(&name);
        assert!(try_take(&name).is_none(), "a second taker waits while the first holds the turn");
        drop(first);
        let again = try_take(&name);
        assert!(again.is_some(), "the turn is free once dropped");
        drop(again);
        let _ = std::fs::remove_file(path(&name));
    }
}
