//! What each kind's release messages mean for the threads waiting on its channel: the
//! [`Meaning`]s the subscriber applies to what it reads, decoded here beside the scripts
//! that publish them.

use std::time::Duration;

use crate::base::keys::{self, Beside};
use crate::kind::protocol::REGISTRATION;
use crate::transport::{Delivery, Meaning};

/// A lock's release: one waiter, or every waiter for `1` (a read-write lock's write
/// release, after which every reader may enter).
pub(crate) static RELEASE: Release = Release;
/// A reentrant, fenced or election lock's release, which names the one redlease client to
/// wake (see `wake_waiters` in `lua/prelude.lua`).
pub(crate) static NAMED_RELEASE: NamedRelease = NamedRelease;
/// A fair lock waiter's own channel.
pub(crate) static TURN: Turn = Turn;
/// A semaphore's count of available permits.
pub(crate) static PERMITS: Permits = Permits;
/// A count-down latch's count.
pub(crate) static LATCH: Latch = Latch;
/// Any message wakes every waiter.
pub(crate) static EVERYONE: Everyone = Everyone;

pub(crate) struct Release;

impl Meaning for Release {
    fn deliver(&self, payload: &[u8], _: &mut bool) -> Delivery {
        if payload == b"1" { Delivery::All } else { Delivery::One }
    }
}

/// The subscription covers two channels of this client's beside the lock's
/// ([`keys::beside_lock_channel`]): its own, `redlease_wake:{name}:<token>`, where a message
/// names this client (it wakes one waiter), and `redlease_mark:{name}`, which tells
/// releases that the lock's channel has a redlease subscriber here. The lock's channel
/// carries messages only when someone else listens there too: a name then `0`, which every
/// redlease client takes as handled, or a `0` alone (a Redisson client's release, or nobody
/// named), which wakes one waiter, as for [`Release`].
pub(crate) struct NamedRelease;

impl Meaning for NamedRelease {
    fn beside(&self, channel: &str, token: &str) -> Vec<(String, Delivery)> {
        vec![
            (keys::beside_lock_channel(channel, Beside::Mark, token), Delivery::Nobody),
            (keys::beside_lock_channel(channel, Beside::Wake, token), Delivery::One),
        ]
    }

    /// `named`: a release just named a client; the `0` that follows is handled.
    fn deliver(&self, payload: &[u8], named: &mut bool) -> Delivery {
        if payload != b"0" {
            // A name: the named client was woken on its own channel.
            *named = true;
            return Delivery::Nobody;
        }
        if std::mem::take(named) { Delivery::Nobody } else { Delivery::One }
    }

    /// A waiting client's registration runs out unless it looks again.
    fn look_again_within(&self) -> Option<Duration> {
        Some(REGISTRATION)
    }
}

/// `0` wakes the waiter (its turn); a negative number `-(n + 1)` (it became the head while
/// the lock is held) wakes nobody but says the holder's lease ends in n ms, so the waiter
/// looks by then at the latest.
pub(crate) struct Turn;

impl Meaning for Turn {
    fn deliver(&self, payload: &[u8], _: &mut bool) -> Delivery {
        match number(payload) {
            Some(held) if held < 0 => Delivery::LookWithin(Duration::from_millis(held.unsigned_abs() - 1)),
            _ => Delivery::One,
        }
    }
}

/// The number of permits available now: waiters in order whose permits fit, until it is
/// used up. A message that is no number wakes one.
pub(crate) struct Permits;

impl Meaning for Permits {
    fn deliver(&self, payload: &[u8], _: &mut bool) -> Delivery {
        let available = number(payload).unwrap_or(1);
        Delivery::Fitting(u64::try_from(available).unwrap_or(0))
    }
}

/// `0` (open) wakes every waiter; `1` (a new count) wakes none.
pub(crate) struct Latch;

impl Meaning for Latch {
    fn deliver(&self, payload: &[u8], _: &mut bool) -> Delivery {
        if payload == b"0" { Delivery::All } else { Delivery::Nobody }
    }
}

/// A group lock's release (`0`, on the lock channel of the group's name: each waiter waits
/// for values of its own and only it can tell whether they are free now; Redisson wakes one
/// per process, maybe the wrong one), and an election's change (its observers each read
/// again who leads).
pub(crate) struct Everyone;

impl Meaning for Everyone {
    fn deliver(&self, _: &[u8], _: &mut bool) -> Delivery {
        Delivery::All
    }
}

/// A message's number, if it is one.
fn number(payload: &[u8]) -> Option<i64> {
    std::str::from_utf8(payload).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(meaning: &dyn Meaning, payloads: &[&str]) -> Vec<Delivery> {
        let mut note = false;
        payloads.iter().map(|p| meaning.deliver(p.as_bytes(), &mut note)).collect()
    }

    #[test]
    fn each_kind_decodes_its_own_messages() {
        assert_eq!(read(&RELEASE, &["0", "1", "x"]), [Delivery::One, Delivery::All, Delivery::One]);
        assert_eq!(
            read(&TURN, &["0", "-251", "-1"]),
            [Delivery::One, Delivery::LookWithin(Duration::from_millis(250)), Delivery::LookWithin(Duration::ZERO)]
        );
        assert_eq!(
            read(&PERMITS, &["3", "0", "-2", "nonsense"]),
            [Delivery::Fitting(3), Delivery::Fitting(0), Delivery::Fitting(0), Delivery::Fitting(1)]
        );
        assert_eq!(read(&LATCH, &["1", "0"]), [Delivery::Nobody, Delivery::All]);
        assert_eq!(read(&EVERYONE, &["0", "anything"]), [Delivery::All, Delivery::All]);
    }

    #[test]
    fn a_named_release_is_handled_by_its_name_and_a_bare_zero_wakes_one() {
        // A name then `0` (handled: the named client was woken on its own channel), then a
        // `0` alone (a Redisson client's release).
        assert_eq!(read(&NAMED_RELEASE, &["42", "0", "0"]), [Delivery::Nobody, Delivery::Nobody, Delivery::One]);
        let beside = NAMED_RELEASE.beside(&keys::lock_channel("a"), "7");
        assert_eq!(
            beside,
            [("redlease_mark:{a}".to_owned(), Delivery::Nobody), ("redlease_wake:{a}:7".to_owned(), Delivery::One)]
        );
        assert!(RELEASE.beside("c", "7").is_empty());
        assert_eq!(NAMED_RELEASE.look_again_within(), Some(REGISTRATION));
        assert_eq!(RELEASE.look_again_within(), None);
    }
}
