//! Reading one name's state (`lua/inspect.lua`) and what its layout says: the kind, the
//! holders, the queue, the token, the permits. Every key is Redisson's (see `keys`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::base::keys;
use crate::base::owner;
use crate::base::scripts;
use crate::kind::fair;
use crate::kind::fenced;
use crate::observe::inspection::{Holder, HolderRole, LISTED_PERMITS, LockInfo, LockKind, Permit, Waiter};
use crate::transport::Conn;

/// The script's reply, as it comes.
pub(crate) type Raw = (
    String,
    String,
    Vec<String>,
    String,
    Vec<String>,
    Vec<String>,
    Option<String>,
    Vec<String>,
    Option<String>,
    usize,
    Vec<Vec<u8>>,
    Vec<i64>,
);

/// The field that marks a read-write lock, and the suffix of a writer's field.
const MODE: &str = "mode";
const WRITE_SUFFIX: &str = ":write";
/// The suffixes of a group holder's fields beside a value's.
const EXPIRE_TIME: &str = ":expire_time";
const LOCK_COUNT: &str = ":lock_count";
/// An election's fields beside its leader's owner field.
const VALUE: &str = "value";
const TERM: &str = "term";

/// Reads `name`'s state in one script call (holders' clients not filled in).
pub(crate) fn inspect(conn: &mut Conn, name: &str) -> redis::RedisResult<LockInfo> {
    let raw: Raw = scripts::INSPECT
        .on(conn.pubsub())
        .key(name)
        .key(fair::queue_key(name))
        .key(fair::timeouts_key(name))
        .key(fenced::token_key(name))
        .key(keys::permit_timeouts(name))
        .arg(read_hold_prefix(name))
        .arg(LISTED_PERMITS)
        .arg(keys::lock_channel(name))
        .arg(keys::semaphore_channel(name))
        .invoke(conn)?;
    Ok(decode(name, raw))
}

/// The part before `:<owner>:rwlock_timeout:<k>` of a read hold's key: `{name}`, or the
/// name itself when it has a hash tag.
fn read_hold_prefix(name: &str) -> String {
    if name.contains('{') { name.to_owned() } else { format!("{{{name}}}") }
}

/// Whether `key` is one the library keeps beside a lock rather than a lock's own name: a
/// queue, deadlines, a token, a release latch, a read hold, permits' deadlines, a
/// client's announcement. A listing leaves them out.
pub(crate) fn is_beside_a_lock(key: &str) -> bool {
    const PREFIXES: [&str; 7] = [
        "redlease_term:",
        "redisson_lock_queue:",
        "redisson_lock_timeout:",
        "redisson_lock_token:",
        "redisson_unlock_latch:",
        "redlease_client:",
        "redisson_lock__channel",
    ];
    PREFIXES.iter().any(|p| key.starts_with(p))
        || key.contains(":rwlock_timeout:")
        || (key.starts_with('{') && key.ends_with("}:timeout"))
}

/// What the reply says of `name`.
pub(crate) fn decode(name: &str, raw: Raw) -> LockInfo {
    let (now, key_type, fields, pttl, waiting, deadlines, token, reads, value, permits_taken, listed, listeners) = raw;
    let now_ms = now.parse::<u64>().unwrap_or(0);
    let server_time = at_ms(now_ms);
    let fields = pairs(&fields);
    let hash_kind = (key_type == "hash").then(|| hash_kind(&fields)).flatten();
    let mut holders = match hash_kind {
        Some(LockKind::Group) => group_holders(&fields, now_ms),
        Some(LockKind::Election) => {
            let owners: Vec<(String, String)> =
                fields.iter().filter(|(f, _)| f != VALUE && f != TERM).cloned().collect();
            lock_holders(&owners, &[])
        }
        Some(_) => lock_holders(&fields, &pairs(&reads)),
        None => Vec::new(),
    };
    // The writer first, then the others by owner (Redis's hash order is arbitrary).
    holders.sort_by(|a, b| (a.role != HolderRole::Write, &a.owner).cmp(&(b.role != HolderRole::Write, &b.owner)));
    let deadlines = pairs(&deadlines);
    let deadline_of = |owner: &str| {
        deadlines.iter().find(|(o, _)| o == owner).and_then(|(_, score)| score.parse::<f64>().ok()).map(score_time)
    };
    let queue: Vec<Waiter> = waiting
        .iter()
        .enumerate()
        .map(|(i, owner)| Waiter { position: i + 1, owner: owner.clone(), deadline: deadline_of(owner), client: None })
        .collect();
    let permits: Vec<Permit> = listed
        .chunks_exact(2)
        .map(|pair| Permit {
            id: permit_id(&pair[0]),
            deadline: std::str::from_utf8(&pair[1]).ok().and_then(|s| s.parse::<f64>().ok()).and_then(deadline),
        })
        .collect();
    let permits_available = value.as_deref().and_then(|v| v.parse::<i64>().ok());
    // A fenced lock's last token; an election's term.
    let term = fields.iter().find(|(f, _)| f == TERM).and_then(|(_, t)| t.parse::<u64>().ok());
    let token =
        token.as_deref().and_then(|t| t.parse::<u64>().ok()).or(term.filter(|_| hash_kind == Some(LockKind::Election)));
    let is_semaphore = key_type != "hash" && (permits_available.is_some() || permits_taken > 0);
    // A plain lock's hash, or no key at all (a free lock), tells its kind by what lies
    // beside it: a token counter (fenced, kept when free), a queue or its deadlines (fair).
    let plain_or_free = hash_kind == Some(LockKind::Lock) || key_type == "none";
    let kind = if is_semaphore {
        Some(LockKind::Semaphore)
    } else if plain_or_free && token.is_some() {
        Some(LockKind::Fenced)
    } else if plain_or_free && !(queue.is_empty() && deadlines.is_empty()) {
        Some(LockKind::Fair)
    } else {
        hash_kind
    };
    let count = |i: usize| listeners.get(i).and_then(|n| u64::try_from(*n).ok());
    LockInfo {
        name: name.to_owned(),
        kind,
        lease_left: if key_type == "none" { None } else { pttl.parse::<u64>().ok().map(Duration::from_millis) },
        key_type,
        holders,
        queue,
        token,
        permits_available,
        permits_taken,
        permits,
        waiting_clients: count(0).zip(count(1)).map(|(a, b)| a + b),
        server_time,
    }
}

fn pairs(flat: &[String]) -> Vec<(String, String)> {
    flat.chunks_exact(2).map(|pair| (pair[0].clone(), pair[1].clone())).collect()
}

fn at_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// A sorted-set score (epoch milliseconds) as a time.
fn score_time(score: f64) -> SystemTime {
    at_ms(if score.is_finite() && score > 0.0 { score as u64 } else { 0 })
}

/// The deadline the library's scripts give a permit that never expires (year 31,000)
/// and beyond is no deadline.
const NEVER_MS: f64 = 922_337_203_685_477.0;

fn deadline(score: f64) -> Option<SystemTime> {
    (score < NEVER_MS).then(|| score_time(score))
}

/// What a hash's fields make it: a read-write lock (a `mode`), a group lock (values with
/// their holders' `…:expire_time` and `…:lock_count`), a lock (owner fields and counts);
/// `None` when they are none of these (a hash of someone else's).
fn hash_kind(fields: &[(String, String)]) -> Option<LockKind> {
    if fields.is_empty() {
        return None;
    }
    if fields.iter().any(|(f, _)| f == MODE) {
        return Some(LockKind::ReadWrite);
    }
    let group_field = |f: &str| f.ends_with(EXPIRE_TIME) || f.ends_with(LOCK_COUNT) || f.len() == 22;
    if fields.iter().any(|(f, _)| f.ends_with(LOCK_COUNT)) && fields.iter().all(|(f, _)| group_field(f)) {
        return Some(LockKind::Group);
    }
    let owner_with_count = |(f, v): &(String, String)| owner::client_of(f).is_some() && v.parse::<u64>().is_ok();
    let advertised = |(f, _): &(String, String)| f == VALUE || f == TERM;
    if fields.iter().any(|(f, _)| f == TERM) && fields.iter().all(|p| advertised(p) || owner_with_count(p)) {
        return Some(LockKind::Election);
    }
    fields.iter().all(owner_with_count).then_some(LockKind::Lock)
}

/// A lock's or a read-write lock's holders.
fn lock_holders(fields: &[(String, String)], read_ttls: &[(String, String)]) -> Vec<Holder> {
    let read_write = fields.iter().any(|(f, _)| f == MODE);
    fields
        .iter()
        .filter(|(field, _)| field != MODE)
        .map(|(field, holds)| {
            let holds = holds.parse::<u64>().unwrap_or(0);
            let holder = |owner: &str, role, lease_left| Holder {
                owner: owner.to_owned(),
                role,
                holds,
                lease_left,
                client: None,
            };
            match (read_write, field.strip_suffix(WRITE_SUFFIX)) {
                (false, _) => holder(field, HolderRole::Lock, None),
                (true, Some(owner)) => holder(owner, HolderRole::Write, None),
                (true, None) => {
                    let ttl = read_ttls.iter().find(|(o, _)| o == field).and_then(|(_, t)| t.parse::<u64>().ok());
                    holder(field, HolderRole::Read, ttl.map(Duration::from_millis))
                }
            }
        })
        .collect()
}

/// A group lock's holders: per owner, the values it holds and until when.
fn group_holders(fields: &[(String, String)], now_ms: u64) -> Vec<Holder> {
    let mut holders: Vec<Holder> = Vec::new();
    for (field, owner) in fields.iter().filter(|(f, _)| f.len() == 22) {
        let ends = fields
            .iter()
            .find(|(f, _)| f.strip_prefix(field.as_str()) == Some(&format!(":{owner}{EXPIRE_TIME}")))
            .and_then(|(_, v)| v.parse::<u64>().ok());
        let left = ends.map(|e| Duration::from_millis(e.saturating_sub(now_ms)));
        match holders.iter_mut().find(|h| &h.owner == owner) {
            Some(h) => {
                h.holds += 1;
                h.lease_left = h.lease_left.max(left);
            }
            None => holders.push(Holder {
                owner: owner.clone(),
                role: HolderRole::Values,
                holds: 1,
                lease_left: left,
                client: None,
            }),
        }
    }
    holders
}

/// A permit's id as stored when it is printable ASCII, else in hexadecimal.
fn permit_id(id: &[u8]) -> String {
    if !id.is_empty() && id.iter().all(|b| b.is_ascii_graphic()) {
        String::from_utf8_lossy(id).into_owned()
    } else {
        id.iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    fn raw(key_type: &str, fields: &[&str]) -> Raw {
        (
            "1000".into(),
            key_type.into(),
            s(fields),
            "500".into(),
            vec![],
            vec![],
            None,
            vec![],
            None,
            0,
            vec![],
            vec![0, 0],
        )
    }

    #[test]
    fn a_read_write_lock_lists_the_writer_first() {
        let mut r = raw("hash", &["mode", "write", "b:1", "1", "a:1:write", "2"]);
        r.4 = s(&["q:1"]);
        r.5 = s(&["q:1", "2000", "gone:1", "3000"]);
        r.7 = s(&["b:1", "400"]);
        r.11 = vec![2, 0];
        let info = decode("n", r);
        assert_eq!(info.kind, Some(LockKind::ReadWrite));
        assert_eq!(
            (info.holders[0].owner.as_str(), info.holders[0].role, info.holders[0].holds),
            ("a:1", HolderRole::Write, 2)
        );
        assert_eq!(
            (info.holders[1].role, info.holders[1].lease_left),
            (HolderRole::Read, Some(Duration::from_millis(400)))
        );
        assert_eq!(info.queue[0].deadline, Some(at_ms(2000)));
        assert_eq!(info.lease_left, Some(Duration::from_millis(500)));
        assert_eq!(info.waiting_clients, Some(2));
        assert!(info.is_held());
    }

    #[test]
    fn the_kind_is_read_off_the_layout() {
        let kind = |r: Raw| decode("n", r).kind;
        assert_eq!(kind(raw("hash", &["6d1f:3", "1"])), Some(LockKind::Lock));
        let mut fenced = raw("hash", &["6d1f:3", "1"]);
        fenced.6 = Some("41".into());
        assert_eq!(kind(fenced.clone()), Some(LockKind::Fenced));
        fenced.1 = "none".into();
        fenced.2 = vec![];
        assert_eq!(kind(fenced), Some(LockKind::Fenced), "a free fenced lock keeps its counter");
        let mut fair = raw("hash", &["a:1", "1"]);
        fair.4 = s(&["b:1"]);
        assert_eq!(kind(fair), Some(LockKind::Fair));
        let field = "AAAAAAAAAAAAAAAAAAAAAA";
        let group = raw(
            "hash",
            &[field, "o:1", &format!("{field}:o:1:expire_time"), "1600", &format!("{field}:o:1:lock_count"), "1"],
        );
        let info = decode("g", group);
        assert_eq!(info.kind, Some(LockKind::Group));
        assert_eq!((info.holders[0].role, info.holders[0].holds), (HolderRole::Values, 1));
        assert_eq!(info.holders[0].lease_left, Some(Duration::from_millis(600)));
        let election = decode("e", raw("hash", &["6d1f:3", "1", "value", "127.0.0.7:80", "term", "12"]));
        assert_eq!((election.kind, election.token, election.holders.len()), (Some(LockKind::Election), Some(12), 1));
        assert_eq!(election.holders[0].owner, "6d1f:3");
        let mut sem = raw("string", &[]);
        sem.8 = Some("3".into());
        assert_eq!(kind(sem), Some(LockKind::Semaphore));
        let mut text = raw("string", &[]);
        text.8 = Some("hello".into());
        let text = decode("t", text);
        assert_eq!(text.kind, None);
        assert!(text.is_foreign());
        let users_hash = decode("h", raw("hash", &["name", "Ada"]));
        assert!(users_hash.is_foreign(), "a hash of someone else's is no lock");
        let absent = decode("x", raw("none", &[]));
        assert!(!absent.is_foreign() && absent.kind.is_none() && absent.lease_left.is_none());
    }

    #[test]
    fn a_semaphore_shows_its_permits() {
        let mut r = raw("string", &[]);
        r.3 = "-1".into();
        r.8 = Some("1".into());
        r.9 = 2;
        r.10 = vec![vec![0xab, 0x01], b"900".to_vec(), b"3f2a".to_vec(), b"1500".to_vec()];
        r.11 = vec![0, -1];
        let info = decode("s", r);
        assert_eq!((info.permits_available, info.permits_total()), (Some(1), Some(3)));
        assert_eq!((info.permits[0].id.as_str(), info.permits[1].id.as_str()), ("ab01", "3f2a"));
        assert_eq!(info.permits[1].deadline, Some(at_ms(1500)));
        assert_eq!(info.live_permits(), 1, "the first is past its deadline");
        assert_eq!(info.lease_left, None, "no expiry");
        assert_eq!(info.waiting_clients, None, "not allowed to count");
        assert!(info.is_held());
    }

    #[test]
    fn keys_beside_a_lock_are_not_locks() {
        for beside in [
            "redisson_lock_queue:{a}",
            "redisson_lock_timeout:{a}",
            "redisson_lock_token:{a}",
            "redisson_unlock_latch:{a}:x",
            "redlease_client:{6d1f}",
            "{a}:6d1f:3:rwlock_timeout:1",
            "{a}:timeout",
        ] {
            assert!(is_beside_a_lock(beside), "{beside}");
        }
        for lock in ["a", "jobs:timeout", "{a}b"] {
            assert!(!is_beside_a_lock(lock), "{lock}");
        }
    }
}
