//! Elections (redlease's own layout; Redisson has none), all in the slot of the election's
//! name: the hash `redlease_election:{NAME}` holds the leader's owner field, the `value` it
//! advertises and its `term`, and lives as long as the leader's lease (renewed and released
//! as a plain lock's hash); the counter `redlease_term:redlease_election:{NAME}` gives each
//! leader the next term and never expires; observers listen on
//! `redlease_leader:redlease_election:{NAME}`, where a new leader's term and a resignation's
//! `0` are published. Candidates wait as for a plain lock (the lock channel of the
//! election's hash, and the channels beside it).

use std::time::Duration;

use crate::base::keys;
use crate::base::scripts;
use crate::kind::protocol::Reply;
use crate::kind::protocol::Role;
use crate::kind::reentrant;
use crate::kind::spec::Spec;
use crate::kind::wake;
use crate::transport::Conn;

/// The election's hash, the key its candidates contend for: `redlease_election:{NAME}`
/// (`redlease_election:NAME` when the name has a hash tag of its own).
pub(crate) fn election_key(name: &str) -> String {
    keys::prefixed("redlease_election", name)
}

/// The name of the election whose hash is `key` (the inverse of [`election_key`]), or
/// `None` when `key` is no election's hash.
pub(crate) fn election_name(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("redlease_election:")?;
    match rest.strip_prefix('{').and_then(|inner| inner.strip_suffix('}')) {
        Some(inner) if !inner.contains('{') && !inner.contains('}') => Some(inner),
        _ if rest.contains('{') => Some(rest),
        _ => None,
    }
}

/// The term counter of the election whose hash is `key`.
pub(crate) fn term_key(key: &str) -> String {
    keys::prefixed("redlease_term", key)
}

/// The observers' channel of the election whose hash is `key`.
pub(crate) fn leader_channel(key: &str) -> String {
    keys::prefixed("redlease_leader", key)
}

/// One campaign attempt for `owner`, advertising `value`; `token` is the client's wake
/// token when the caller waits (it registers, as for a plain lock).
pub(crate) fn campaign(
    conn: &mut Conn,
    key: &str,
    owner: &str,
    lease_millis: u64,
    token: Option<u64>,
    value: &str,
) -> redis::RedisResult<Reply> {
    let (granted, n): (i64, i64) = scripts::ELECTION_CAMPAIGN
        .on(conn.pubsub())
        .key(key)
        .key(term_key(key))
        .key(reentrant::waiters_key(key))
        .arg(lease_millis)
        .arg(owner)
        .arg(reentrant::token_arg(token))
        .arg(reentrant::registration_millis())
        .arg(value)
        .arg(leader_channel(key))
        .invoke(conn)?;
    Ok(Reply::from_table(granted, n))
}

/// Who leads the election whose hash is `key`: the value it
/// advertises, its term and its lease left; `None` when nobody does.
pub(crate) fn leader(conn: &mut Conn, key: &str) -> redis::RedisResult<Option<(String, u64, Option<Duration>)>> {
    // Not a `MULTI`: the `redis` crate panics on a transaction whose command Redis refuses
    // at queueing (an ACL rule). A lease that ends between the two reads reads as no leader.
    let ((value, term), pttl): ((Option<String>, Option<u64>), i64) =
        redis::pipe().cmd("HMGET").arg(key).arg("value").arg("term").cmd("PTTL").arg(key).query(conn)?;
    if pttl == -2 {
        return Ok(None);
    }
    Ok(match (value, term) {
        (Some(value), Some(term)) => Some((value, term, u64::try_from(pttl).ok().map(Duration::from_millis))),
        _ => None,
    })
}

/// An election: the plain lock's hash, one hold per leader, the next term with every
/// grant, and its observers told of every change.
pub(crate) static ELECTION: Spec = Spec {
    label: "election",
    reentrant: false,
    keeps: false,
    role: Role::Exclusive,
    shares_lock_keys: true,
    polls: false,
    meaning: &wake::NAMED_RELEASE,
    attempt: |conn, key, owner, args, _| campaign(conn, key, owner, args.lease_millis, args.token(), args.advertise),
    release: |conn, r| reentrant::release(conn, r, true, Some(&leader_channel(r.name))),
    force_unlock: reentrant::force_unlock_telling_waiters,
    wait_channel: reentrant::lock_channel,
    give_up: Some(reentrant::leave_waiting),
};

#[cfg(test)]
mod tests {
    use super::*;

    /// A name and its election's hash go both ways, hash tag of its own or not; other keys
    /// are no election's.
    #[test]
    fn an_elections_name_is_read_back_from_its_key() {
        for name in ["scheduler", "a:b", "x{tag}y", "{tagged}:jobs"] {
            assert_eq!(election_name(&election_key(name)), Some(name), "{name}");
        }
        for key in ["scheduler", "redlease_term:redlease_election:{a}", "redlease_election:plain"] {
            assert_eq!(election_name(key), None, "{key}");
        }
    }
}
