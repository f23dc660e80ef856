//! The lock operations of a [`Kind`], each read off its [`Spec`](crate::kind::spec::Spec):
//! the engine calls these, and none of them decides anything by the kind's name.

use std::sync::Arc;

use crate::kind::protocol::{LockKeys, Release, Reply, Role};
use crate::kind::spec::{AcquireArgs, GiveUp};
use crate::kind::{Kind, read_write, reentrant};
use crate::transport::{Conn, Meaning};

impl Kind {
    /// The kind in words, as the spans record it.
    pub(crate) fn label(self) -> &'static str {
        self.spec().label
    }

    /// One acquire attempt.
    pub(crate) fn attempt(
        self,
        conn: &mut Conn,
        name: &str,
        owner: &str,
        args: AcquireArgs<'_>,
    ) -> redis::RedisResult<Reply> {
        let spec = self.spec();
        (spec.attempt)(conn, name, owner, &args, spec.reentrant || args.holds_nothing)
    }

    /// One release: `None` when the owner holds nothing, `Some(0)` when holds remain,
    /// `Some(1)` when the lock was freed.
    pub(crate) fn release(self, conn: &mut Conn, release: &Release<'_>) -> redis::RedisResult<Option<i64>> {
        (self.spec().release)(conn, release)
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
        (self.spec().force_unlock)(conn, name, wait_millis)
    }

    /// The channel a waiter listens on.
    pub(crate) fn wait_channel(self, name: &str, owner: &str) -> String {
        (self.spec().wait_channel)(name, owner)
    }

    /// The keys and channels of the lock `name` that its acquire and release write, written
    /// once for a handle: the kinds whose calls are `kind::reentrant`'s (the others build
    /// theirs in each call).
    pub(crate) fn lock_keys(self, name: &str) -> Option<Arc<LockKeys>> {
        self.spec().shares_lock_keys.then(|| Arc::new(LockKeys::new(name)))
    }

    /// Whether a release can leave the lock taken for a while (a plain lock's hash, with no
    /// queue and no read holds): see `reentrant::keep`.
    pub(crate) fn keeps(self) -> bool {
        self.spec().keeps
    }

    /// Whether an owner may hold the lock several times (all but the non-reentrant kinds).
    pub(crate) fn reentrant(self) -> bool {
        self.spec().reentrant
    }

    /// Whether its waiters poll with a backoff rather than listen (the spin lock).
    pub(crate) fn polls(self) -> bool {
        self.spec().polls
    }

    pub(crate) fn role(self) -> Role {
        self.spec().role
    }

    /// The hash field that counts `owner`'s holds of this kind.
    pub(crate) fn field(self, owner: &str) -> String {
        match self.role() {
            Role::Write => read_write::write_field(owner),
            Role::Read | Role::Exclusive => owner.to_owned(),
        }
    }

    /// For read holds, the prefix of the owner's per-hold timeout keys.
    pub(crate) fn hold_keys(self, name: &str, owner: &str) -> Option<String> {
        match self.role() {
            Role::Read => Some(read_write::hold_keys(name, owner)),
            Role::Write | Role::Exclusive => None,
        }
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
        self.spec().give_up.is_some()
    }

    /// What the lock's messages mean for its waiters.
    pub(crate) fn meaning(self) -> &'static dyn Meaning {
        self.spec().meaning
    }

    /// Removes what a waiter left in Redis when it stops waiting without the lock.
    pub(crate) fn give_up(self, conn: &mut Conn, left: &GiveUp<'_>) -> redis::RedisResult<()> {
        match self.spec().give_up {
            Some(give_up) => give_up(conn, left),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the engine takes for granted of every kind's spec.
    #[test]
    fn every_spec_is_one_the_engine_can_run() {
        let mut labels = std::collections::HashSet::new();
        for kind in Kind::ALL {
            let spec = kind.spec();
            assert!(labels.insert(spec.label), "{kind:?}: its label {:?} is another kind's", spec.label);
            // `lua/keep.lua` works on a plain lock's hash, whose keys a handle writes once.
            if spec.keeps {
                assert_eq!(spec.role, Role::Exclusive, "{kind:?} keeps a hash that is not a plain lock's");
                assert!(spec.shares_lock_keys, "{kind:?} keeps a lock whose keys its handle does not write");
            }
            // A poller never registers, and a read-write lock's waiter leaves nothing.
            if spec.polls || spec.role != Role::Exclusive {
                assert!(spec.give_up.is_none(), "{kind:?} leaves something behind a wait it does not register");
            }
        }
    }
}
