//! The watchdog's batched renew scripts: one call renews many leases of one client, the
//! locks' in one script and the permits' in another.
//!
//! On one Redis a batch declares its keys (`KEYS`). On a cluster node the leases of a
//! batch are that master's, in slots that differ, and a command's declared keys must share
//! one slot: there a batch of more than one lease passes its keys as arguments instead (the
//! scripts' cluster build may touch keys of several slots of its node). A lease whose slot
//! the node no longer serves answers [`Outcome::Elsewhere`]; renewed alone, with its key
//! declared, it follows `MOVED` and `ASK` like any other command.

use std::collections::HashMap;

use crate::base::keys;
use crate::base::scripts;
use crate::base::scripts::PubSub;
use crate::kind::semaphore::PermitId;
use crate::transport::Conn;

/// How the renew script may set one lease's expiry (see `lua/renew.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewal<'a> {
    /// The hold is the hash field alone: reset the expiry to the lease.
    Reset,
    /// The same, but only ever lengthen it: the owner also has fixed-lease holds.
    LengthenOnly,
    /// Read holds, with the prefix of their per-hold keys.
    ReadHolds(&'a str),
}

/// One lease in a batch: the lock, the field that holds it, how to renew it.
pub(crate) struct Entry<'a> {
    pub(crate) name: &'a str,
    pub(crate) field: &'a str,
    pub(crate) how: Renewal<'a>,
}

/// One lease of permits in a batch: its semaphore and the permits' ids.
pub(crate) struct PermitEntry<'a> {
    pub(crate) name: &'a str,
    pub(crate) ids: &'a [PermitId],
}

/// One group-lock lease in a batch: its group, owner and values' fields (concatenated).
pub(crate) struct GroupEntry<'a> {
    pub(crate) name: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) fields: &'a str,
}

/// What Redis answered for one lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Renewed,
    /// The owner's field (or a permit) is gone: the lease is lost.
    Gone,
    /// The node that ran the batch no longer serves the lease's slot (a slot moved or
    /// moving): nothing was done for it there.
    Elsewhere,
    /// Redis refused to renew it (an ACL rule); its text.
    Refused(String),
}

/// Whether a batch of `leases` on a connection (`in_cluster`: to a cluster node) passes its
/// keys as arguments.
fn keys_as_arguments(in_cluster: bool, leases: usize) -> bool {
    in_cluster && leases > 1
}

/// A renew script call written out, so that it can be sent apart from reading its reply
/// (the watchdog writes the calls for every master before it reads any reply, with their
/// confirmation behind them): the call in RESP, its script (loaded again on `NOSCRIPT`),
/// and how its reply maps to the batch.
pub(crate) struct Call {
    packed: Vec<u8>,
    script: &'static redis::Script,
    leases: usize,
    /// The place in the batch of each lease in the order sent (`None`: the batch's order).
    order: Option<Vec<usize>>,
}

/// A script call's keys and arguments, as they are given.
struct Written {
    script: &'static redis::Script,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl Written {
    fn new(script: &'static redis::Script) -> Written {
        Written { script, keys: Vec::new(), args: Vec::new() }
    }

    fn key(&mut self, key: impl redis::ToRedisArgs) -> &mut Written {
        self.keys.extend(key.to_redis_args());
        self
    }

    fn arg(&mut self, arg: impl redis::ToRedisArgs) -> &mut Written {
        self.args.extend(arg.to_redis_args());
        self
    }

    fn call(self, leases: usize, order: Option<Vec<usize>>) -> Call {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.script.get_hash()).arg(self.keys.len());
        for part in self.keys.iter().chain(&self.args) {
            cmd.arg(part.as_slice());
        }
        Call { packed: cmd.get_packed_command(), script: self.script, leases, order }
    }
}

impl Call {
    /// The call, in RESP.
    pub(crate) fn packed(&self) -> &[u8] {
        &self.packed
    }

    /// Whether `reply` says the server did not have the call's script (`NOSCRIPT`).
    pub(crate) fn unloaded(reply: &redis::Value) -> bool {
        matches!(reply, redis::Value::ServerError(err) if err.code() == "NOSCRIPT")
    }

    /// Loads the call's script on `conn`'s server.
    pub(crate) fn load(&self, conn: &mut Conn) -> redis::RedisResult<()> {
        self.script.load(&mut **conn).map(drop)
    }

    /// What the reply `reply` to this call says of each lease, in the batch's order.
    /// `NOSCRIPT` is an error here: the caller, which knows what else is in flight on the
    /// connection, [`load`](Call::load)s the script and sends the call again.
    pub(crate) fn outcomes_of(&self, reply: redis::Value) -> redis::RedisResult<Vec<Outcome>> {
        let reply = reply.extract_error()?;
        let sent = outcomes(redis::from_redis_value(reply)?, self.leases)?;
        let Some(order) = &self.order else { return Ok(sent) };
        let mut back = vec![Outcome::Renewed; self.leases];
        for (outcome, &at) in sent.into_iter().zip(order) {
            back[at] = outcome;
        }
        Ok(back)
    }
}

/// Renews `entries` for `lease_millis`, in one script call for a connection of `pubsub`'s
/// kind. The reply has one outcome per entry, in order.
///
/// The script takes the plain resets first, grouped by the field they renew (one thread's
/// leases share it), then the others (see `lua/renew.lua`): the batch goes out in that
/// order and the outcomes are put back in the caller's.
pub(crate) fn renew_call(pubsub: PubSub, lease_millis: u64, entries: &[Entry<'_>]) -> Call {
    let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
    let mut group_of: HashMap<&str, usize> = HashMap::new();
    // The other leases, each with how to renew it (see `lua/renew.lua`).
    let mut others: Vec<(usize, &str)> = Vec::new();
    for (at, entry) in entries.iter().enumerate() {
        match entry.how {
            Renewal::Reset => {
                let group = *group_of.entry(entry.field).or_insert_with(|| {
                    groups.push((entry.field, Vec::new()));
                    groups.len() - 1
                });
                groups[group].1.push(at);
            }
            Renewal::LengthenOnly => others.push((at, "+")),
            Renewal::ReadHolds(prefix) => others.push((at, prefix)),
        }
    }
    // The places of the entries in the order they are sent.
    let order: Vec<usize> = groups
        .iter()
        .flat_map(|(_, members)| members.iter().copied())
        .chain(others.iter().map(|&(at, _)| at))
        .collect();
    let as_arguments = keys_as_arguments(pubsub.in_cluster(), entries.len());
    let mut call = Written::new(scripts::RENEW.on(pubsub));
    call.arg(lease_millis).arg(order.len()).arg(order.len() - others.len()).arg(groups.len());
    for &at in &order {
        if as_arguments {
            call.arg(entries[at].name);
        } else {
            call.key(entries[at].name);
        }
    }
    for (field, members) in &groups {
        call.arg(*field).arg(members.len());
    }
    for &(at, how) in &others {
        call.arg(entries[at].field).arg(how);
    }
    call.call(entries.len(), Some(order))
}

/// Renews every lease of `entries` for `lease_millis`, in one script call for a connection
/// of `pubsub`'s kind: per entry, renewed when all its permits were still there in time.
pub(crate) fn renew_permits_call(pubsub: PubSub, lease_millis: u64, entries: &[PermitEntry<'_>]) -> Call {
    let as_arguments = keys_as_arguments(pubsub.in_cluster(), entries.len());
    let mut call = Written::new(scripts::PERMIT_RENEW.on(pubsub));
    if !as_arguments {
        for entry in entries {
            call.key(keys::permit_timeouts(entry.name));
        }
    }
    call.arg(lease_millis);
    for entry in entries {
        if as_arguments {
            call.arg(keys::permit_timeouts(entry.name));
        }
        call.arg(entry.ids.concat());
    }
    call.call(entries.len(), None)
}

/// Renews every group-lock lease of `entries` for `lease_millis`, in one script call for a
/// connection of `pubsub`'s kind: per entry, renewed when the owner still held all its
/// values in time.
pub(crate) fn renew_groups_call(pubsub: PubSub, lease_millis: u64, entries: &[GroupEntry<'_>]) -> Call {
    let as_arguments = keys_as_arguments(pubsub.in_cluster(), entries.len());
    let mut call = Written::new(scripts::GROUP_RENEW.on(pubsub));
    if !as_arguments {
        for entry in entries {
            call.key(entry.name);
        }
    }
    call.arg(lease_millis);
    for entry in entries {
        if as_arguments {
            call.arg(entry.name);
        }
        call.arg(entry.owner).arg(entry.fields);
    }
    call.call(entries.len(), None)
}

/// A renew script's reply: how many leases it went through, then each lease not renewed
/// by its place in the batch (from 1) and what Redis said for it; every other lease was
/// renewed. One outcome per lease, in the batch's order.
fn outcomes(reply: Vec<redis::Value>, leases: usize) -> redis::RedisResult<Vec<Outcome>> {
    let malformed = |what: &'static str| redis::RedisError::from((redis::ErrorKind::Parse, what));
    let mut reply = reply.into_iter();
    match reply.next() {
        Some(redis::Value::Int(seen)) if usize::try_from(seen).ok() == Some(leases) => {}
        _ => return Err(malformed("the renew script went through another number of leases than it was sent")),
    }
    let mut outcomes = vec![Outcome::Renewed; leases];
    while let Some(at) = reply.next() {
        let slot = match at {
            redis::Value::Int(at) => usize::try_from(at).ok().and_then(|at| at.checked_sub(1)),
            _ => None,
        };
        match (slot.and_then(|slot| outcomes.get_mut(slot)), reply.next().and_then(not_renewed)) {
            (Some(entry), Some(said)) => *entry = said,
            _ => return Err(malformed("the renew script named a lease it was not sent, or no reason")),
        }
    }
    Ok(outcomes)
}

/// Why a lease the script listed was not renewed; `None` for anything else (a listed lease
/// is never taken for renewed).
fn not_renewed(reply: redis::Value) -> Option<Outcome> {
    match reply {
        redis::Value::Int(0) => Some(Outcome::Gone),
        redis::Value::Int(_) => None,
        redis::Value::BulkString(text) => {
            let text = String::from_utf8_lossy(&text).into_owned();
            // Redis's words for a key of a slot the node does not serve now (moved, or
            // migrating and already gone from it), met by a script.
            Some(if text.contains("non local key") { Outcome::Elsewhere } else { Outcome::Refused(text) })
        }
        other => Some(Outcome::Refused(format!("{other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_names_each_lease_not_renewed() {
        let text = |s: &str| redis::Value::BulkString(s.as_bytes().to_vec());
        let int = redis::Value::Int;
        let replies = vec![
            int(5),
            int(2),
            int(0),
            int(3),
            text("ERR Script attempted to access a non local key in a cluster node script: f_1"),
            int(5),
            text("NOPERM this user has no permissions to access one of the keys"),
        ];
        let got = outcomes(replies, 5).unwrap();
        assert_eq!(got[..4], [Outcome::Renewed, Outcome::Gone, Outcome::Elsewhere, Outcome::Renewed]);
        assert!(matches!(&got[4], Outcome::Refused(t) if t.starts_with("NOPERM")));
        assert_eq!(outcomes(vec![int(2)], 2).unwrap(), [Outcome::Renewed, Outcome::Renewed], "the usual reply");
        assert!(outcomes(vec![int(1)], 2).is_err(), "it went through fewer leases than sent");
        assert!(outcomes(vec![int(2), int(3), int(0)], 2).is_err(), "a lease it was not sent");
        assert!(outcomes(vec![int(2), int(0), int(0)], 2).is_err(), "places count from 1");
        assert!(outcomes(vec![int(2), int(1)], 2).is_err(), "a place without its outcome");
        assert!(outcomes(vec![int(2), int(1), int(1)], 2).is_err(), "a listed lease is never renewed");
        assert!(outcomes(vec![], 2).is_err(), "an empty reply");
    }
}
