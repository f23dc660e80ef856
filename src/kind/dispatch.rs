//! The lock kinds, and the dispatch of each operation to its kind's scripts. They share
//! Redisson's lock hash and differ in how they queue, wake and release.

use std::sync::Arc;

use crate::keys;
use crate::kind::protocol::{LockKeys, Release, Reply, Role};
use crate::kind::{election, fair, fenced, read_write, reentrant, wake};
use crate::transport::{Conn, Meaning};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Reentrant,
    Fair,
    /// Redisson's `RNonReentrantLock`: the reentrant lock's layout, one hold per owner.
    NonReentrant,
    /// Redisson's `RNonReentrantFairLock`: the fair lock's layout, one hold per owner.
    NonReentrantFair,
    /// Redisson's `RSpinLock`: the reentrant lock's layout, no messages at all; its waiters
    /// poll.
    Spin,
    /// The read side of a read-write lock.
    Read,
    /// The write side of a read-write lock.
    Write,
    /// A reentrant lock whose every grant carries a fencing token.
    Fenced,
    /// An election: one leader at a time, each with the next term and a value it
    /// advertises (redlease's own layout; see `kind::election`). Waits, renews and releases
    /// as a plain lock, and tells its observers of every change.
    Election,
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

impl Kind {
    /// The kind in words, as the spans record it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::Reentrant => "reentrant",
            Kind::Fair => "fair",
            Kind::NonReentrant => "non-reentrant",
            Kind::NonReentrantFair => "non-reentrant fair",
            Kind::Spin => "spin",
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Fenced => "fenced",
            Kind::Election => "election",
        }
    }

    /// One acquire attempt.
    pub(crate) fn attempt(
        self,
        conn: &mut Conn,
        name: &str,
        owner: &str,
        args: AcquireArgs<'_>,
    ) -> redis::RedisResult<Reply> {
        let lease = args.lease_millis;
        let token = args.queue.then_some(args.wake_token);
        match self {
            Kind::Reentrant | Kind::NonReentrant => {
                let reentrant = self.reentrant() || args.holds_nothing;
                reentrant::acquire(conn, name, owner, lease, token, reentrant, args.lock_keys)
                    .and_then(Reply::from_grant_or_pttl)
            }
            // A spin waiter listens on no channel: it never registers its client.
            Kind::Spin => reentrant::acquire(conn, name, owner, lease, None, true, args.lock_keys)
                .and_then(Reply::from_grant_or_pttl),
            Kind::Fair | Kind::NonReentrantFair => {
                let reentrant = self.reentrant() || args.holds_nothing;
                fair::acquire(conn, name, owner, lease, args.wait_millis, args.queue, reentrant)
                    .and_then(Reply::from_grant_or_pttl)
            }
            Kind::Read => read_write::read_acquire(conn, name, owner, lease).and_then(Reply::from_grant_or_pttl),
            Kind::Write => read_write::write_acquire(conn, name, owner, lease).and_then(Reply::from_grant_or_pttl),
            Kind::Fenced => fenced::acquire(conn, name, owner, lease, token),
            Kind::Election => election::campaign(conn, name, owner, lease, token, args.advertise),
        }
    }

    /// One release: `None` when the owner holds nothing, `Some(0)` when holds remain,
    /// `Some(1)` when the lock was freed.
    pub(crate) fn release(self, conn: &mut Conn, release: &Release<'_>) -> redis::RedisResult<Option<i64>> {
        match self {
            Kind::Reentrant | Kind::NonReentrant | Kind::Fenced => reentrant::release(conn, release, true, None),
            Kind::Spin => reentrant::release(conn, release, false, None),
            Kind::Election => {
                let observers = election::leader_channel(release.name);
                reentrant::release(conn, release, true, Some(&observers))
            }
            Kind::Fair | Kind::NonReentrantFair => fair::release(conn, release),
            Kind::Read => read_write::read_release(conn, release),
            Kind::Write => read_write::write_release(conn, release),
        }
    }

    /// Releases the owner's last hold but keeps the lock taken by `keeper` for `keep_millis`
    /// (only for the kinds that [`keeps`](Kind::keeps); the others release).
    pub(crate) fn keep(
        self,
        conn: &mut Conn,
        release: &Release<'_>,
        keeper: &str,
        keep_millis: u64,
    ) -> redis::RedisResult<Option<i64>> {
        if self.keeps() {
            reentrant::keep(conn, release.name, release.owner, keeper, keep_millis)
        } else {
            self.release(conn, release)
        }
    }

    /// Deletes the lock whoever holds it; 1 when there was one.
    pub(crate) fn force_unlock(self, conn: &mut Conn, name: &str, wait_millis: u64) -> redis::RedisResult<i64> {
        match self {
            Kind::Reentrant | Kind::NonReentrant | Kind::Fenced | Kind::Election => {
                reentrant::force_unlock(conn, name, true)
            }
            Kind::Spin => reentrant::force_unlock(conn, name, false),
            Kind::Fair | Kind::NonReentrantFair => fair::force_unlock(conn, name, wait_millis),
            Kind::Read => read_write::force_unlock(conn, name, "read"),
            Kind::Write => read_write::force_unlock(conn, name, "write"),
        }
    }

    /// The channel a waiter listens on.
    pub(crate) fn wait_channel(self, name: &str, owner: &str) -> String {
        match self {
            Kind::Reentrant | Kind::NonReentrant | Kind::Spin | Kind::Fenced | Kind::Election => {
                keys::lock_channel(name)
            }
            Kind::Fair | Kind::NonReentrantFair => fair::waiter_channel(name, owner),
            Kind::Read | Kind::Write => read_write::channel(name),
        }
    }

    /// The keys and channels of the lock `name` that its acquire and release write, written
    /// once for a handle: the kinds whose calls are `kind::reentrant`'s (the others build
    /// theirs in each call).
    pub(crate) fn lock_keys(self, name: &str) -> Option<Arc<LockKeys>> {
        matches!(self, Kind::Reentrant | Kind::NonReentrant | Kind::Spin | Kind::Fenced | Kind::Election)
            .then(|| Arc::new(LockKeys::new(name)))
    }

    /// Whether a release can leave the lock taken for a while (a plain lock's hash, with no
    /// queue and no read holds): see `reentrant::keep`.
    pub(crate) fn keeps(self) -> bool {
        matches!(self, Kind::Reentrant | Kind::NonReentrant | Kind::Spin | Kind::Fenced)
    }

    /// Whether an owner may hold the lock several times (all but the non-reentrant kinds).
    pub(crate) fn reentrant(self) -> bool {
        !matches!(self, Kind::NonReentrant | Kind::NonReentrantFair | Kind::Election)
    }

    pub(crate) fn role(self) -> Role {
        match self {
            Kind::Read => Role::Read,
            Kind::Write => Role::Write,
            // Every other kind is one hash of exclusive holders.
            _ => Role::Exclusive,
        }
    }

    /// The hash field that counts `owner`'s holds of this kind.
    pub(crate) fn field(self, owner: &str) -> String {
        match self {
            Kind::Write => read_write::write_field(owner),
            _ => owner.to_owned(),
        }
    }

    /// For read holds, the prefix of the owner's per-hold timeout keys.
    pub(crate) fn hold_keys(self, name: &str, owner: &str) -> Option<String> {
        (self == Kind::Read).then(|| read_write::hold_keys(name, owner))
    }

    pub(crate) fn is_locked(self, conn: &mut Conn, name: &str) -> redis::RedisResult<bool> {
        match self.role() {
            Role::Read => read_write::has_read_holds(conn, name),
            Role::Write => read_write::is_write_locked(conn, name),
            Role::Exclusive => redis::cmd("EXISTS").arg(name).query(conn),
        }
    }

    /// Whether a wait that ends without the lock leaves something to remove in Redis: a
    /// fair lock's place in the queue, a reentrant or fenced lock's waiting client.
    pub(crate) fn queues(self) -> bool {
        matches!(
            self,
            Kind::Fair | Kind::NonReentrantFair | Kind::Reentrant | Kind::NonReentrant | Kind::Fenced | Kind::Election
        )
    }

    /// What the lock's messages mean for its waiters.
    pub(crate) fn meaning(self) -> &'static dyn Meaning {
        match self {
            Kind::Reentrant | Kind::NonReentrant | Kind::Fenced | Kind::Election => &wake::NAMED_RELEASE,
            Kind::Fair | Kind::NonReentrantFair => &wake::TURN,
            _ => &wake::RELEASE,
        }
    }

    /// Removes what a waiter left in Redis when it stops waiting without the lock.
    pub(crate) fn give_up(
        self,
        conn: &mut Conn,
        name: &str,
        owner: &str,
        wait_millis: u64,
        wake_token: u64,
        always_publish: bool,
    ) -> redis::RedisResult<()> {
        match self {
            Kind::Fair | Kind::NonReentrantFair => fair::give_up(conn, name, owner, wait_millis).map(drop),
            Kind::Reentrant | Kind::NonReentrant | Kind::Fenced | Kind::Election => {
                reentrant::leave(conn, name, wake_token, always_publish).map(drop)
            }
            Kind::Read | Kind::Write | Kind::Spin => Ok(()),
        }
    }
}
