//! `redlease unlock --force NAME`: the library's `force_unlock`, which deletes the lock
//! whoever holds it and wakes its waiters.

use std::io::Write as _;

use crate::args::UnlockArgs;
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
    let lock = locks::handle(&client, args.kind, &args.name, None, None);
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
