//! What every kind's scripts take and answer: the release request, the acquire reply, and
//! the role a hold plays.

use std::time::Duration;

use crate::base::keys::{self, Beside};
use crate::transport::{Arg, Joined, Prewritten, Written};

/// Which kind of hold a lease stands for: a thread's read and write holds on one
/// read-write lock are different hash fields, so they are different leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    Exclusive,
    Read,
    Write,
}

/// What one acquire script call answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Acquired, with the fencing token of a fenced lock; `joined` when the owner held the
    /// lock already in Redis (a reentrant hold, or its own earlier grant whose reply was
    /// lost), not when this is its first hold there.
    Granted { token: Option<u64>, joined: bool },
    /// Held by someone else; how long the caller may sleep before trying again (`None`:
    /// no expiry known).
    Busy { ttl: Option<Duration> },
}

/// The status an acquire script answers with when the owner held the lock already.
const JOINED: &str = "JOINED";

impl Reply {
    /// Reads the reply of a script that answers a grant with nil (the owner's first hold) or
    /// the status `JOINED` (the owner held it already), and anything else with the lock's
    /// PTTL.
    pub(crate) fn from_grant_or_pttl(reply: redis::Value) -> redis::RedisResult<Reply> {
        match reply {
            redis::Value::Nil => Ok(Reply::Granted { token: None, joined: false }),
            redis::Value::SimpleString(status) if status == JOINED => Ok(Reply::Granted { token: None, joined: true }),
            other => Ok(Reply::busy(redis::from_redis_value(other)?)),
        }
    }

    /// Reads the reply of a script that answers `{1, n}` for the owner's first hold, `{2, n}`
    /// when it held the lock already (`n` its token or term), and `{0, pttl}` when another
    /// holds it.
    pub(crate) fn from_table(granted: i64, n: i64) -> Reply {
        match granted {
            1 | 2 => Reply::Granted { token: u64::try_from(n).ok(), joined: granted == 2 },
            _ => Reply::busy(n),
        }
    }

    /// Held by someone else, for `pttl` ms more (negative: no expiry known).
    fn busy(pttl: i64) -> Reply {
        Reply::Busy { ttl: u64::try_from(pttl).ok().map(Duration::from_millis) }
    }
}

/// How long a waiting client's registration lasts (see `lua/acquire.lua`); a waiter parked
/// on a reentrant or fenced lock tries again at least this often, which renews it.
pub(crate) const REGISTRATION: Duration = Duration::from_secs(5);

/// What a release script answers when it was sent before with its outcome unknown and
/// finds nothing of the owner in a lock nobody holds: the release happened, or the hold was
/// gone before it (a restart emptied Redis, and the lock changed hands meanwhile). The
/// client tells them apart by the server's run.
pub(crate) const FOUND_FREE: i64 = 2;

/// The prefix of the sorted set of a plain (or fenced) lock's waiting redlease clients.
pub(crate) const WAITERS: &str = "redlease_waiters";

/// A plain (or fenced) lock's keys and channels as its scripts take them, written once
/// per lock handle: an acquire and a release copy them, where writing each from its parts
/// in every call cost a third of the client's own work.
pub(crate) struct LockKeys(Prewritten<5>);

impl std::fmt::Debug for LockKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockKeys").finish_non_exhaustive()
    }
}

/// Which of a lock's [`LockKeys`].
#[derive(Clone, Copy)]
pub(crate) enum Part {
    Name,
    Waiters,
    Channel,
    Mark,
    WakePrefix,
}

impl Part {
    /// The parts this key or channel of the lock `name` is joined from.
    fn of(self, name: &str) -> [&str; 6] {
        let [a, b, c, d] = match self {
            Part::Name => [name, "", "", ""],
            Part::Waiters => keys::prefixed_parts(WAITERS, name),
            Part::Channel => keys::lock_channel_parts(name),
            Part::Mark => return keys::beside_lock_parts(name, Beside::Mark, ""),
            Part::WakePrefix => return keys::beside_lock_parts(name, Beside::Wake, ""),
        };
        [a, b, c, d, "", ""]
    }
}

impl LockKeys {
    pub(crate) fn new(name: &str) -> LockKeys {
        let [n, w, c, m, p] =
            [Part::Name, Part::Waiters, Part::Channel, Part::Mark, Part::WakePrefix].map(|part| Joined(part.of(name)));
        LockKeys(Prewritten::new([&n, &w, &c, &m, &p]))
    }
}

/// A key or channel of the lock `name`: copied from its handle's keys when they are at
/// hand (`lock_keys`, which are `name`'s), else written from its parts.
pub(crate) fn lock_arg<'a>(lock_keys: Option<&'a LockKeys>, part: Part, name: &'a str) -> LockArg<'a> {
    match lock_keys {
        Some(lock_keys) => LockArg::Written(lock_keys.0.arg(part as usize)),
        None => LockArg::Parts(Joined(part.of(name))),
    }
}

pub(crate) enum LockArg<'a> {
    Written(Written<'a>),
    Parts(Joined<'a, 6>),
}

impl Arg for LockArg<'_> {
    fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            LockArg::Written(written) => written.write_to(out),
            LockArg::Parts(parts) => parts.write_to(out),
        }
    }
}

/// One release request, as the release scripts take it.
pub(crate) struct Release<'a> {
    pub(crate) name: &'a str,
    /// The lock's keys and channels, written once per handle (`name`'s), when at hand.
    pub(crate) lock_keys: Option<&'a LockKeys>,
    pub(crate) owner: &'a str,
    /// Lease the owner's remaining holds need, when holds remain; 0 for the last guard's
    /// release, which takes every hold of the owner (Redis may count more than the guards
    /// did: a resent acquire that joined its own lost grant).
    pub(crate) keep_millis: u64,
    pub(crate) request_id: &'a str,
    pub(crate) latch_millis: u64,
    /// The client's fair wait timeout (fair locks hand the head a new deadline).
    pub(crate) wait_millis: u64,
    /// This request was sent before: the script looks for the outcome its latch stored.
    /// A first send skips that look, since no latch can exist yet.
    pub(crate) retry: bool,
    /// A release that frees a plain or fenced lock publishes on its channel whoever
    /// listens there (see `ClientBuilder::always_publish_releases`).
    pub(crate) always_publish: bool,
}

impl Release<'_> {
    /// The script argument of [`retry`](Release::retry).
    pub(crate) fn retry_arg(&self) -> &'static str {
        if self.retry { "1" } else { "0" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key copied from a handle's keys is the one written from its parts, and the parts
    /// join to the names `keys` builds.
    #[test]
    fn lock_keys_written_once_are_the_keys_written_each_time() {
        for name in ["a", "{a}:redlease", "{a}x", "orders:42"] {
            let lock_keys = LockKeys::new(name);
            for part in [Part::Name, Part::Waiters, Part::Channel, Part::Mark, Part::WakePrefix] {
                let (mut copied, mut written) = (Vec::new(), Vec::new());
                lock_arg(Some(&lock_keys), part, name).write_to(&mut copied);
                lock_arg(None, part, name).write_to(&mut written);
                assert_eq!(copied, written, "{name}");
            }
            let channel = keys::lock_channel(name);
            let joined = |part: Part| keys::joined(&part.of(name));
            assert_eq!(joined(Part::Name), name);
            assert_eq!(joined(Part::Waiters), keys::prefixed(WAITERS, name));
            assert_eq!(joined(Part::Channel), channel);
            assert_eq!(joined(Part::Mark), keys::beside_lock_channel(&channel, Beside::Mark, ""));
            assert_eq!(joined(Part::WakePrefix), keys::wake_channel_prefix(&channel));
        }
    }
}
