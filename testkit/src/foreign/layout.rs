//! The layout peer: a foreign client written in this project from the layout docs/design.md
//! states, independently of redlease's scripts and of Redisson's. Every operation reads what
//! it needs under `WATCH`, decides in Rust, and writes in one `MULTI`/`EXEC`, tried again when
//! someone wrote a watched key meanwhile; nothing of it is Lua.
//!
//! It never sends a release twice, so it keeps no unlock latch (nobody else reads one it did
//! not write).

use std::collections::HashMap;

use redis::{Connection, Pipeline, RedisResult, Value};

use super::keys::{
    UNLOCK, count_field, expire_field, fair_channel, fair_deadlines, fair_queue, latch_channel, lock_channel,
    semaphore_channel,
};
use super::{Acquire, FAIR_WAIT_MS, Foreign, LEASE_MS, Publish, Release};

/// The foreign client written from the layout.
pub struct LayoutPeer;

/// Sends the transaction `pipe` holds: `Some(outcome)` when it ran, `None` when a watched key
/// changed first (the caller reads again).
fn commit<T>(conn: &mut Connection, pipe: &Pipeline, outcome: T) -> RedisResult<Option<T>> {
    let done: Option<Value> = pipe.query(conn)?;
    Ok(done.map(|_| outcome))
}

/// The owner's holds of the lock hash `name` (its field's count), if any.
fn holds(conn: &mut Connection, name: &str, owner: &str) -> RedisResult<Option<i64>> {
    redis::cmd("HGET").arg(name).arg(owner).query(conn)
}

fn exists(conn: &mut Connection, key: &str) -> RedisResult<bool> {
    redis::cmd("EXISTS").arg(key).query(conn)
}

fn pttl(conn: &mut Connection, key: &str) -> RedisResult<i64> {
    redis::cmd("PTTL").arg(key).query(conn)
}

/// A lock hash taken by `owner`: free, or already the owner's when the kind is reentrant.
fn take_hash(conn: &mut Connection, name: &str, owner: &str, reentrant: bool) -> RedisResult<Acquire> {
    redis::transaction(conn, &[name], |conn, pipe| {
        let mine = holds(conn, name, owner)?;
        if mine.is_none() && exists(conn, name)? {
            return Ok(Some(Acquire::Busy(pttl(conn, name)?)));
        }
        if mine.is_some() && !reentrant {
            return Ok(Some(Acquire::Refused));
        }
        pipe.cmd("HINCRBY").arg(name).arg(owner).arg(1).cmd("PEXPIRE").arg(name).arg(LEASE_MS);
        commit(conn, pipe, Acquire::Granted)
    })
}

/// One hold of `owner` on the lock hash `name` given back; at the last, `0` on `wake` when
/// there is one.
fn give_back(conn: &mut Connection, name: &str, owner: &str, wake: Option<(String, Publish)>) -> RedisResult<Release> {
    redis::transaction(conn, &[name], |conn, pipe| match holds(conn, name, owner)? {
        None => Ok(Some(Release::NotHeld)),
        Some(n) if n > 1 => {
            pipe.cmd("HINCRBY").arg(name).arg(owner).arg(-1).cmd("PEXPIRE").arg(name).arg(LEASE_MS);
            commit(conn, pipe, Release::HoldsRemain)
        }
        Some(_) => {
            pipe.cmd("DEL").arg(name);
            if let Some((channel, publish)) = &wake {
                pipe.cmd(publish.command()).arg(channel).arg(UNLOCK);
            }
            commit(conn, pipe, Release::Freed)
        }
    })
}

/// A fair lock's queue as it stands: the owners in order and their deadlines.
struct Queue {
    owners: Vec<String>,
    deadlines: HashMap<String, i64>,
}

impl Queue {
    fn read(conn: &mut Connection, name: &str) -> RedisResult<Queue> {
        let owners: Vec<String> = redis::cmd("LRANGE").arg(fair_queue(name)).arg(0).arg(-1).query(conn)?;
        let scored: Vec<(String, f64)> =
            redis::cmd("ZRANGE").arg(fair_deadlines(name)).arg(0).arg(-1).arg("WITHSCORES").query(conn)?;
        let deadlines = scored.into_iter().map(|(owner, at)| (owner, at as i64)).collect();
        Ok(Queue { owners, deadlines })
    }

    /// How many owners at the front have a deadline that has passed: they are dropped.
    fn dead_heads(&self, now_ms: u64) -> usize {
        self.owners.iter().take_while(|o| self.deadlines.get(*o).is_some_and(|&at| at <= now_ms as i64)).count()
    }

    /// Writes into `pipe` the removal of the first `n` owners.
    fn drop_first(&self, name: &str, n: usize, pipe: &mut Pipeline) {
        for owner in &self.owners[..n] {
            pipe.cmd("LPOP").arg(fair_queue(name)).cmd("ZREM").arg(fair_deadlines(name)).arg(owner);
        }
    }
}

/// The holder of a group's value (by its field) and when that holder's lease ends.
fn group_holder(conn: &mut Connection, group: &str, field: &str) -> RedisResult<Option<(String, Option<i64>)>> {
    let holder: Option<String> = redis::cmd("HGET").arg(group).arg(field).query(conn)?;
    let Some(holder) = holder else { return Ok(None) };
    let ends: Option<i64> = redis::cmd("HGET").arg(group).arg(expire_field(field, &holder)).query(conn)?;
    Ok(Some((holder, ends)))
}

impl Foreign for LayoutPeer {
    fn who(&self) -> String {
        "the layout peer".into()
    }

    fn lock_acquire(&self, conn: &mut Connection, name: &str, owner: &str) -> RedisResult<Acquire> {
        take_hash(conn, name, owner, true)
    }

    fn lock_release(&self, conn: &mut Connection, name: &str, owner: &str, publish: Publish) -> RedisResult<Release> {
        give_back(conn, name, owner, Some((lock_channel(name), publish)))
    }

    fn spin_acquire(&self, conn: &mut Connection, name: &str, owner: &str) -> RedisResult<Acquire> {
        take_hash(conn, name, owner, true)
    }

    fn spin_release(&self, conn: &mut Connection, name: &str, owner: &str) -> RedisResult<Release> {
        give_back(conn, name, owner, None)
    }

    fn non_reentrant_acquire(&self, conn: &mut Connection, name: &str, owner: &str) -> RedisResult<Acquire> {
        take_hash(conn, name, owner, false)
    }

    /// A non-reentrant fair lock's acquire: dead heads dropped; the lock taken when it is free
    /// and nobody live is queued ahead; otherwise the owner queued once, its deadline a wait
    /// after the last waiter's (or after the holder's lease when nobody waits).
    fn non_reentrant_fair_acquire(
        &self,
        conn: &mut Connection,
        name: &str,
        owner: &str,
        now_ms: u64,
    ) -> RedisResult<Acquire> {
        let (queue_key, deadlines_key) = (fair_queue(name), fair_deadlines(name));
        let now = now_ms as i64;
        redis::transaction(conn, &[name, &queue_key, &deadlines_key], |conn, pipe| {
            let queue = Queue::read(conn, name)?;
            let dead = queue.dead_heads(now_ms);
            let live = &queue.owners[dead..];
            let held = exists(conn, name)?;
            if !held && live.first().is_none_or(|head| head == owner) {
                queue.drop_first(name, dead, pipe);
                if !live.is_empty() {
                    pipe.cmd("LPOP").arg(&queue_key).cmd("ZREM").arg(&deadlines_key).arg(owner);
                }
                // Everyone behind moves up one place: their deadlines one wait earlier.
                for behind in live.iter().skip(1) {
                    pipe.cmd("ZINCRBY").arg(&deadlines_key).arg(-(FAIR_WAIT_MS as i64)).arg(behind);
                }
                pipe.cmd("HSET").arg(name).arg(owner).arg(1).cmd("PEXPIRE").arg(name).arg(LEASE_MS);
                return commit(conn, pipe, Acquire::Granted);
            }
            if holds(conn, name, owner)?.is_some() {
                return Ok(Some(Acquire::Refused));
            }
            let ttl = pttl(conn, name)?.max(0);
            if queue.deadlines.contains_key(owner) {
                return Ok(Some(Acquire::Busy(ttl)));
            }
            let last = live.iter().rev().find(|o| *o != owner).and_then(|o| queue.deadlines.get(o));
            let wait = last.map_or(ttl, |&at| at - now);
            pipe.cmd("ZADD").arg(&deadlines_key).arg(now + wait + FAIR_WAIT_MS as i64).arg(owner);
            pipe.cmd("RPUSH").arg(&queue_key).arg(owner);
            commit(conn, pipe, Acquire::Busy(wait))
        })
    }

    /// A fair lock's release: one hold fewer; at the last the lock goes, dead heads are dropped,
    /// and the head (only) is told on its own channel.
    fn fair_release(
        &self,
        conn: &mut Connection,
        name: &str,
        owner: &str,
        now_ms: u64,
        publish: Publish,
    ) -> RedisResult<Release> {
        let (queue_key, deadlines_key) = (fair_queue(name), fair_deadlines(name));
        redis::transaction(conn, &[name, &queue_key, &deadlines_key], |conn, pipe| match holds(conn, name, owner)? {
            None => Ok(Some(Release::NotHeld)),
            Some(n) if n > 1 => {
                pipe.cmd("HINCRBY").arg(name).arg(owner).arg(-1).cmd("PEXPIRE").arg(name).arg(LEASE_MS);
                commit(conn, pipe, Release::HoldsRemain)
            }
            Some(_) => {
                let queue = Queue::read(conn, name)?;
                let dead = queue.dead_heads(now_ms);
                queue.drop_first(name, dead, pipe);
                pipe.cmd("DEL").arg(name);
                if let Some(head) = queue.owners.get(dead) {
                    pipe.cmd(publish.command()).arg(fair_channel(name, head)).arg(UNLOCK);
                }
                commit(conn, pipe, Release::Freed)
            }
        })
    }

    fn semaphore_try_acquire(&self, conn: &mut Connection, name: &str, permits: u32) -> RedisResult<bool> {
        redis::transaction(conn, &[name], |conn, pipe| {
            let count: Option<i64> = redis::cmd("GET").arg(name).query(conn)?;
            if count.unwrap_or(0) < i64::from(permits) {
                return Ok(Some(false));
            }
            pipe.cmd("DECRBY").arg(name).arg(permits);
            commit(conn, pipe, true)
        })
    }

    fn latch_count_down(&self, conn: &mut Connection, name: &str, publish: Publish) -> RedisResult<()> {
        redis::transaction(conn, &[name], |conn, pipe| {
            let count: Option<i64> = redis::cmd("GET").arg(name).query(conn)?;
            match count {
                // No latch: open already, nothing to count.
                None => return Ok(Some(())),
                Some(count) if count > 1 => {
                    pipe.cmd("DECR").arg(name);
                }
                Some(_) => {
                    pipe.cmd("DEL").arg(name).cmd(publish.command()).arg(latch_channel(name)).arg(UNLOCK);
                }
            }
            commit(conn, pipe, ())
        })
    }

    fn semaphore_release_if_exists(
        &self,
        conn: &mut Connection,
        name: &str,
        permits: u32,
        publish: Publish,
    ) -> RedisResult<bool> {
        redis::transaction(conn, &[name], |conn, pipe| {
            let count: Option<i64> = redis::cmd("GET").arg(name).query(conn)?;
            let Some(count) = count else { return Ok(Some(false)) };
            let after = count + i64::from(permits);
            pipe.cmd("INCRBY").arg(name).arg(permits).cmd(publish.command()).arg(semaphore_channel(name)).arg(after);
            commit(conn, pipe, true)
        })
    }

    fn semaphore_try_set_permits_with_ttl(
        &self,
        conn: &mut Connection,
        name: &str,
        permits: u32,
        ttl_ms: u64,
        publish: Publish,
    ) -> RedisResult<bool> {
        redis::transaction(conn, &[name], |conn, pipe| {
            if exists(conn, name)? {
                return Ok(Some(false));
            }
            pipe.cmd("SET").arg(name).arg(permits).arg("PX").arg(ttl_ms);
            pipe.cmd(publish.command()).arg(semaphore_channel(name)).arg(permits);
            commit(conn, pipe, true)
        })
    }

    fn group_acquire(
        &self,
        conn: &mut Connection,
        group: &str,
        owner: &str,
        now_ms: u64,
        fields: &[&str],
    ) -> RedisResult<Acquire> {
        let now = now_ms as i64;
        let lease = LEASE_MS as i64;
        redis::transaction(conn, &[group], |conn, pipe| {
            // Busy until the latest lease of another live holder of one of the values.
            let mut busy_until = None;
            for field in fields {
                if let Some((holder, Some(ends))) = group_holder(conn, group, field)?
                    && holder != owner
                    && ends > now
                {
                    busy_until = busy_until.max(Some(ends));
                }
            }
            if let Some(ends) = busy_until {
                return Ok(Some(Acquire::Busy(ends - now)));
            }
            for field in fields {
                let expire = expire_field(field, owner);
                let ends: Option<i64> = redis::cmd("HGET").arg(group).arg(&expire).query(conn)?;
                pipe.cmd("HSET").arg(group).arg(*field).arg(owner);
                if ends.is_none_or(|ends| ends < now + lease) {
                    pipe.cmd("HSET").arg(group).arg(&expire).arg(now + lease);
                }
                pipe.cmd("HINCRBY").arg(group).arg(count_field(field, owner)).arg(1);
            }
            // The hash lives at least as long as the lease just given.
            let ttl = pttl(conn, group)?;
            if ttl == -2 || (0..lease).contains(&ttl) {
                pipe.cmd("PEXPIRE").arg(group).arg(lease);
            }
            commit(conn, pipe, Acquire::Granted)
        })
    }

    fn group_release(
        &self,
        conn: &mut Connection,
        group: &str,
        owner: &str,
        now_ms: u64,
        fields: &[&str],
        publish: Publish,
    ) -> RedisResult<Release> {
        let now = now_ms as i64;
        redis::transaction(conn, &[group], |conn, pipe| {
            let mut counts = Vec::with_capacity(fields.len());
            for field in fields {
                match group_holder(conn, group, field)? {
                    Some((holder, Some(ends))) if holder == owner && ends >= now => {
                        let count: Option<i64> =
                            redis::cmd("HGET").arg(group).arg(count_field(field, owner)).query(conn)?;
                        counts.push(count.unwrap_or(1));
                    }
                    _ => return Ok(Some(Release::NotHeld)),
                }
            }
            let (mut freed, mut kept) = (0, 0);
            for (field, count) in fields.iter().zip(counts) {
                if count > 1 {
                    pipe.cmd("HINCRBY").arg(group).arg(count_field(field, owner)).arg(-1);
                    kept += 1;
                } else {
                    pipe.cmd("HDEL")
                        .arg(group)
                        .arg(*field)
                        .arg(expire_field(field, owner))
                        .arg(count_field(field, owner));
                    freed += 1;
                }
            }
            // A value freed may be what a waiter wants: every waiter of the group looks again.
            if freed > 0 {
                pipe.cmd(publish.command()).arg(lock_channel(group)).arg(UNLOCK);
            }
            commit(conn, pipe, if kept == 0 { Release::Freed } else { Release::HoldsRemain })
        })
    }

    fn group_is_locked(&self, conn: &mut Connection, group: &str, now_ms: u64, fields: &[&str]) -> RedisResult<bool> {
        for field in fields {
            if let Some((_, Some(ends))) = group_holder(conn, group, field)?
                && ends >= now_ms as i64
            {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
