//! What makes a lock kind what it is, as one [`Spec`] per kind, declared in the kind's own
//! module (`REENTRANT` in `reentrant`, `FAIR` in `fair`, …): its scripts (through the
//! functions it names), its channels, what its messages mean, what its guard carries and
//! how a wait ends. `Kind::spec` is the only match on a kind; every other decision reads
//! the spec (`kind::dispatch`), so a new kind is decided in full where it is declared.

use crate::kind::protocol::{LockKeys, Release, Reply, Role};
use crate::transport::{Conn, Meaning};

/// A lock kind, declared once.
pub(crate) struct Spec {
    /// The kind in words, as the spans and the errors say it.
    pub(crate) label: &'static str,
    /// An owner may hold the lock several times.
    pub(crate) reentrant: bool,
    /// A release can leave the lock taken a while (a plain lock's hash, with no queue and
    /// no read holds): see `reentrant::keep`.
    pub(crate) keeps: bool,
    /// Who holds it: exclusive holders of one hash, or a read-write lock's side. The role
    /// says what a guard carries (its owner's field, a read hold's timeout keys) and so
    /// what its renewals name.
    pub(crate) role: Role,
    /// A handle writes the lock's keys and channels once ([`LockKeys`]): the kind's calls
    /// are `kind::reentrant`'s.
    pub(crate) shares_lock_keys: bool,
    /// Its waiters poll with a backoff and listen on no channel (the spin lock).
    pub(crate) polls: bool,
    /// What the lock's messages mean for its waiters.
    pub(crate) meaning: &'static dyn Meaning,
    /// One acquire attempt of `owner` on the lock `name`; `joins`: the grant may add a hold
    /// to one the owner has in Redis (the kind is reentrant, or that hold is a leftover:
    /// see [`AcquireArgs::holds_nothing`]).
    pub(crate) attempt: fn(&mut Conn, &str, &str, &AcquireArgs<'_>, bool) -> redis::RedisResult<Reply>,
    /// One release: `None` when the owner holds nothing, `Some(0)` when holds remain,
    /// `Some(1)` when the lock was freed.
    pub(crate) release: fn(&mut Conn, &Release<'_>) -> redis::RedisResult<Option<i64>>,
    /// Deletes the lock whoever holds it (the client's fair wait timeout given): 1 when
    /// there was one.
    pub(crate) force_unlock: fn(&mut Conn, &str, u64) -> redis::RedisResult<i64>,
    /// The channel a waiter for the lock `name` listens on, as `owner`.
    pub(crate) wait_channel: fn(&str, &str) -> String,
    /// Removes what a waiter left in Redis when it stops waiting without the lock (a fair
    /// lock's place in the queue, a plain lock's waiting client); `None`: a wait leaves
    /// nothing.
    pub(crate) give_up: Option<fn(&mut Conn, &GiveUp<'_>) -> redis::RedisResult<()>>,
}

/// What a kind's acquire needs besides the lock and its owner.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AcquireArgs<'a> {
    pub(crate) lease_millis: u64,
    /// The client's fair wait timeout (how long a queued fair waiter keeps its place).
    pub(crate) wait_millis: u64,
    /// A fair lock may queue the caller (it is prepared to wait); a reentrant or fenced
    /// lock registers the caller's client as waiting.
    pub(crate) queue: bool,
    /// The client's wake token (see `lua/acquire.lua`).
    pub(crate) wake_token: u64,
    /// The client holds no live lease of this owner on the lock: a hold of the owner that
    /// Redis still has is a leftover (a release or an undo lost in a failover, a lease this
    /// client counts as lost), backed by no guard. A non-reentrant acquire joins it, as a
    /// reentrant one does, rather than refuse it as a reentry: the count goes on, so that a
    /// late decrement of the leftover still balances, and the last guard's release takes
    /// every hold of the owner.
    pub(crate) holds_nothing: bool,
    /// What a candidate in an election advertises when it leads ("" for the locks).
    pub(crate) advertise: &'a str,
    /// The lock's keys and channels, written once per handle, when at hand.
    pub(crate) lock_keys: Option<&'a LockKeys>,
}

impl AcquireArgs<'_> {
    /// The client's wake token when the caller waits (it registers), else `None`.
    pub(crate) fn token(&self) -> Option<u64> {
        self.queue.then_some(self.wake_token)
    }
}

/// What a waiter that stops waiting without the lock leaves behind, to be removed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GiveUp<'a> {
    pub(crate) name: &'a str,
    pub(crate) owner: &'a str,
    /// The client's fair wait timeout.
    pub(crate) wait_millis: u64,
    pub(crate) wake_token: u64,
    pub(crate) always_publish: bool,
}
