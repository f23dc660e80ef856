//! Key and channel names of Redisson's layout, and the checks on names and durations that
//! run before anything is sent.

use std::time::Duration;

use crate::base::error::{Error, Result};

/// Longest name accepted, in bytes, for a lock, a semaphore or a latch: a longer one is
/// refused with [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) before anything
/// is sent. (A name is a Redis key, and part of every other key and channel of its lock.)
pub const MAX_NAME_LEN: usize = 8 * 1024;

/// Shortest lease accepted.
pub(crate) const MIN_LEASE: Duration = Duration::from_millis(1);

/// Longest lease accepted, in milliseconds: the largest count a Lua number holds exactly.
pub(crate) const MAX_LEASE_MILLIS: u64 = (1 << 53) - 1;

/// Longest lease accepted.
pub(crate) const MAX_LEASE: Duration = Duration::from_millis(MAX_LEASE_MILLIS);

/// Shortest watchdog timeout: below this a renewal every third of it cannot keep up with a
/// round trip on a loaded machine.
pub(crate) const MIN_WATCHDOG_TIMEOUT: Duration = Duration::from_millis(30);

/// `parts` joined, in one allocation of the exact size: the keys and channels are built on
/// every acquire and release, where `format!`'s machinery cost more than the rest of the
/// client's own work.
pub(crate) fn joined(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        out.push_str(part);
    }
    out
}

/// `p:name`, or `p:{name}` when the name has no hash tag of its own, so that every key of
/// a lock lands in the lock's Redis Cluster slot.
pub(crate) fn prefixed(prefix: &str, name: &str) -> String {
    joined(&prefixed_parts(prefix, name))
}

/// The parts of [`prefixed`], for writing it into a command without building it.
pub(crate) fn prefixed_parts<'a>(prefix: &'a str, name: &'a str) -> [&'a str; 4] {
    if name.contains('{') { [prefix, ":", name, ""] } else { [prefix, ":{", name, "}"] }
}

/// `name:s`, or `{name}:s` when the name has no hash tag of its own.
pub(crate) fn suffixed(name: &str, suffix: &str) -> String {
    if name.contains('{') { joined(&[name, ":", suffix]) } else { joined(&["{", name, "}:", suffix]) }
}

/// The prefix of a plain (and fenced) lock's channel.
const LOCK_CHANNEL: &str = "redisson_lock__channel";
/// The prefix of the channel beside it on which waiting redlease clients mark that they
/// listen (see `wake_waiters` in `lua/prelude.lua`).
const MARK_CHANNEL: &str = "redlease_mark";
/// The prefix of a waiting redlease client's own wake-up channel for such a lock.
const WAKE_CHANNEL: &str = "redlease_wake";

/// Channel on which a plain (and fenced) lock announces its release.
pub(crate) fn lock_channel(name: &str) -> String {
    prefixed(LOCK_CHANNEL, name)
}

/// The parts of [`lock_channel`].
pub(crate) fn lock_channel_parts(name: &str) -> [&str; 4] {
    prefixed_parts(LOCK_CHANNEL, name)
}

/// The parts of the channel `which` beside the lock `name`'s channel (see
/// [`beside_lock_channel`]), for the client with wake token `token`.
pub(crate) fn beside_lock_parts<'a>(name: &'a str, which: Beside, token: &'a str) -> [&'a str; 6] {
    let [_, colon, name, close] = lock_channel_parts(name);
    match which {
        Beside::Mark => [MARK_CHANNEL, colon, name, close, "", ""],
        Beside::Wake => [WAKE_CHANNEL, colon, name, close, ":", token],
    }
}

/// A channel beside a plain or fenced lock's channel, as a waiting redlease client
/// subscribes to it with the lock's (see [`beside_lock_channel`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Beside {
    /// `redlease_mark:{name}`: its subscribers are the redlease clients listening on the
    /// lock's channel, which a release counts against the lock channel's.
    Mark,
    /// `redlease_wake:{name}:<token>`: where a release names that client.
    Wake,
}

/// The channel `which` beside `lock_channel` (a plain or fenced lock's), for the client
/// with wake token `token`. The same slot as the lock's channel (the same hash tag), under
/// prefixes of their own, so that no lock's name can make one of them another lock's
/// channel.
pub(crate) fn beside_lock_channel(lock_channel: &str, which: Beside, token: &str) -> String {
    let tail = lock_channel.strip_prefix(LOCK_CHANNEL).unwrap_or(lock_channel);
    match which {
        Beside::Mark => joined(&[MARK_CHANNEL, tail]),
        Beside::Wake => joined(&[WAKE_CHANNEL, tail, ":", token]),
    }
}

/// The prefix of the clients' wake-up channels beside `lock_channel`: the token follows.
pub(crate) fn wake_channel_prefix(lock_channel: &str) -> String {
    beside_lock_channel(lock_channel, Beside::Wake, "")
}

/// The key a client announces itself in (see `identity`): `redlease_client:{<id>}`, under
/// a prefix of its own beside Redisson's keys, never inside them.
pub(crate) fn identity_key(client_id: &str) -> String {
    format!("redlease_client:{{{client_id}}}")
}

/// Channel on which a semaphore (either kind) tells how many permits are available.
pub(crate) fn semaphore_channel(name: &str) -> String {
    prefixed("redisson_sc", name)
}

/// The sorted set of a permit-expirable semaphore's permits and their deadlines.
pub(crate) fn permit_timeouts(name: &str) -> String {
    suffixed(name, "timeout")
}

/// Channel of a count-down latch: Redisson writes the braces whatever the name holds.
pub(crate) fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// Latch key that makes one release request idempotent.
pub(crate) fn unlock_latch(name: &str, request_id: &str) -> String {
    joined(&unlock_latch_parts(name, request_id))
}

/// The parts of [`unlock_latch`].
pub(crate) fn unlock_latch_parts<'a>(name: &'a str, request_id: &'a str) -> [&'a str; 6] {
    let [prefix, colon, name, close] = prefixed_parts("redisson_unlock_latch", name);
    [prefix, colon, name, close, ":", request_id]
}

/// Whole milliseconds, rounded up: a lease of 1.5 ms is 2 ms, never 1.
pub(crate) fn ceil_millis(d: Duration) -> u128 {
    d.as_millis() + u128::from(!d.subsec_nanos().is_multiple_of(1_000_000))
}

/// [`ceil_millis`], as a `u64` (`u64::MAX` past it: never, for a deadline).
pub(crate) fn ceil_millis_u64(d: Duration) -> u64 {
    u64::try_from(ceil_millis(d)).unwrap_or(u64::MAX)
}

/// Checks a lock's, a semaphore's or a latch's name: not empty, at most [`MAX_NAME_LEN`]
/// bytes. The message never shows the name (the caller names it, and what it is, with
/// `Error::on_lock` and its kin, which show a long name cut).
pub(crate) fn check_name(name: &str) -> Result<()> {
    check_length("the name", name, MAX_NAME_LEN, "")
}

/// Checks that `text`, which the message calls `what`, is not empty and at most `max`
/// bytes; `why_not_empty` follows the message of an empty one. The message never shows
/// the text.
pub(crate) fn check_length(what: &str, text: &str, max: usize, why_not_empty: &str) -> Result<()> {
    if text.is_empty() {
        return Err(Error::invalid(format!("{what} is empty{why_not_empty}")));
    }
    if text.len() > max {
        return Err(Error::invalid(format!("{what} is {} bytes long, more than the {max} allowed", text.len())));
    }
    Ok(())
}

/// The lease in whole milliseconds, checked against what Redis and Lua hold exactly.
pub(crate) fn lease_millis(what: &str, lease: Duration) -> Result<u64> {
    if lease < MIN_LEASE {
        return Err(Error::invalid(format!("{what} {lease:?} is shorter than {MIN_LEASE:?}")));
    }
    if lease > MAX_LEASE {
        return Err(Error::invalid(format!(
            "{what} {lease:?} is longer than {MAX_LEASE:?}, the most Lua holds exactly"
        )));
    }
    u64::try_from(ceil_millis(lease)).map_err(|_| Error::invalid(format!("{what} {lease:?} is out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_tags_follow_redisson() {
        assert_eq!(prefixed("redisson_lock__channel", "orders:42"), "redisson_lock__channel:{orders:42}");
        assert_eq!(prefixed("redisson_lock__channel", "{orders}:42"), "redisson_lock__channel:{orders}:42");
        assert_eq!(suffixed("doc", "x"), "{doc}:x");
        assert_eq!(suffixed("{doc}7", "x"), "{doc}7:x");
        assert_eq!(unlock_latch("a", "r1"), "redisson_unlock_latch:{a}:r1");
    }

    /// The channels beside a lock's channel share its hash tag and are never another lock's
    /// channel, whatever braces a name holds.
    #[test]
    fn channels_beside_a_lock_channel_map_back_and_never_collide() {
        for name in ["a", "{a}:redlease", "{a}x", "orders:42"] {
            let channel = lock_channel(name);
            let mark = beside_lock_channel(&channel, Beside::Mark, "77");
            let wake = beside_lock_channel(&channel, Beside::Wake, "77");
            assert!(mark.starts_with("redlease_mark:") && wake.starts_with("redlease_wake:"), "{mark} {wake}");
            let tail = channel.strip_prefix(LOCK_CHANNEL).unwrap();
            assert_eq!(mark, format!("{MARK_CHANNEL}{tail}"));
            assert_eq!(wake, format!("{WAKE_CHANNEL}{tail}:77"));
            assert_eq!(wake_channel_prefix(&channel) + "77", wake);
        }
        assert_eq!(beside_lock_channel(&lock_channel("a"), Beside::Mark, "7"), "redlease_mark:{a}");
        // The parts written into commands without building the names are the same names.
        for name in ["a", "{a}:redlease", "{a}x", "orders:42"] {
            let channel = lock_channel(name);
            assert_eq!(joined(&lock_channel_parts(name)), channel);
            for which in [Beside::Mark, Beside::Wake] {
                assert_eq!(joined(&beside_lock_parts(name, which, "77")), beside_lock_channel(&channel, which, "77"));
            }
            assert_eq!(joined(&beside_lock_parts(name, Beside::Wake, "")), wake_channel_prefix(&channel));
            assert_eq!(joined(&unlock_latch_parts(name, "r1")), unlock_latch(name, "r1"));
        }
        assert_eq!(beside_lock_channel(&lock_channel("a"), Beside::Wake, "7"), "redlease_wake:{a}:7");
    }

    #[test]
    fn names_and_leases_are_checked() {
        assert!(check_name("").unwrap_err().is_invalid_input());
        assert!(check_name(&"x".repeat(MAX_NAME_LEN + 1)).unwrap_err().is_invalid_input());
        let long = check_name(&"x".repeat(100_000)).unwrap_err().to_string();
        assert_eq!(long, "invalid input: the name is 100000 bytes long, more than the 8192 allowed");
        assert!(check_name(&"x".repeat(MAX_NAME_LEN)).is_ok());
        assert!(lease_millis("lease", Duration::from_micros(999)).is_err());
        assert!(lease_millis("lease", MAX_LEASE + Duration::from_millis(1)).is_err());
        assert_eq!(lease_millis("lease", MAX_LEASE).unwrap(), (1 << 53) - 1);
        assert_eq!(lease_millis("lease", Duration::from_micros(1500)).unwrap(), 2);
        assert_eq!(lease_millis("lease", Duration::from_secs(30)).unwrap(), 30_000);
    }
}
