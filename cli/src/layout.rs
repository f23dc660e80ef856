//! Redisson's data layout, read directly: the lock hash `NAME` (owner fields
//! `<uuid>:<n>` → hold count; `mode` and `<owner>:write` for a read-write lock, with one
//! key per read hold), the fair lock's queue `redisson_lock_queue:{NAME}` and deadlines
//! `redisson_lock_timeout:{NAME}` (scores: server epoch milliseconds), the fenced
//! lock's counter `redisson_lock_token:{NAME}`, and a semaphore's string `NAME` (the
//! permits available) with, for a permit-expirable one, the sorted set `{NAME}:timeout`
//! (each taken permit's id scored by its deadline). A name with a `{` keeps its own hash
//! tag.
//!
//! One script reads all of it at once, so that a snapshot is consistent; it runs on the
//! library client's own connection (`Client::with_connection`), which goes to the server
//! that holds the name, whatever the URL.

use redlease::Client;

use crate::exit::Failure;

/// `prefix:{name}`, or `prefix:name` when the name has a hash tag of its own.
pub fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') { format!("{prefix}:{name}") } else { format!("{prefix}:{{{name}}}") }
}

pub fn queue_key(name: &str) -> String {
    prefixed("redisson_lock_queue", name)
}

pub fn timeouts_key(name: &str) -> String {
    prefixed("redisson_lock_timeout", name)
}

pub fn token_key(name: &str) -> String {
    prefixed("redisson_lock_token", name)
}

/// A permit-expirable semaphore's permits and their deadlines: `{name}:timeout`, or
/// `name:timeout` when the name has a hash tag.
pub fn permit_timeouts_key(name: &str) -> String {
    format!("{}:timeout", tagged(name))
}

/// Most permits a status lists (the count is always whole).
const LISTED_PERMITS: usize = 100;

/// The part before `:<owner>:rwlock_timeout:<k>` of a read hold's key: `{name}`, or the
/// name itself when it has a hash tag.
fn tagged(name: &str) -> String {
    if name.contains('{') { name.to_owned() } else { format!("{{{name}}}") }
}

/// The field that marks a read-write lock, and the suffix of a writer's field.
const MODE: &str = "mode";
const WRITE_SUFFIX: &str = ":write";

const SNAPSHOT: &str = r"
local name, queue, timeouts, token, permits = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kind = redis.call('type', name)['ok']
local fields, reads = {}, {}
if kind == 'hash' then
    fields = redis.call('hgetall', name)
    if redis.call('hexists', name, 'mode') == 1 then
        for i = 1, #fields, 2 do
            local owner = fields[i]
            if owner ~= 'mode' and string.sub(owner, -6) ~= ':write' then
                local best = -2
                -- At most 1000 keys per reader: a status must not keep Redis busy.
                for k = 1, math.min(tonumber(fields[i + 1]) or 0, 1000) do
                    local ttl = redis.call('pttl', ARGV[1] .. ':' .. owner .. ':rwlock_timeout:' .. k)
                    if ttl == -1 or best == -1 then best = -1 elseif ttl > best then best = ttl end
                end
                table.insert(reads, owner)
                table.insert(reads, tostring(best))
            end
        end
    end
end
local waiting, deadlines, last = {}, {}, false
if redis.call('type', queue)['ok'] == 'list' then waiting = redis.call('lrange', queue, 0, -1) end
if redis.call('type', timeouts)['ok'] == 'zset' then
    deadlines = redis.call('zrange', timeouts, 0, -1, 'withscores')
end
if redis.call('type', token)['ok'] == 'string' then last = redis.call('get', token) end
local value, taken, listed = false, 0, {}
if kind == 'string' then value = redis.call('get', name) end
if redis.call('type', permits)['ok'] == 'zset' then
    taken = redis.call('zcard', permits)
    listed = redis.call('zrange', permits, 0, tonumber(ARGV[2]) - 1, 'withscores')
end
return {tostring(now), kind, fields, tostring(redis.call('pttl', name)), waiting, deadlines, last, reads,
    value, taken, listed}
";

/// What a holder holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The only holder of a plain, fair or fenced lock.
    Lock,
    Read,
    Write,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Lock => "lock",
            Role::Read => "read",
            Role::Write => "write",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Holder {
    /// `<client uuid>:<thread number>`.
    pub owner: String,
    pub role: Role,
    pub holds: i64,
    /// For a reader: the longest lease left among its read holds (-1: one has no expiry).
    pub ttl_ms: Option<i64>,
}

/// A permit taken from a permit-expirable semaphore.
#[derive(Debug, Clone)]
pub struct Permit {
    /// Its id: as stored when printable, else in hexadecimal (this library's ids are 16
    /// random bytes).
    pub id: String,
    /// When it lapses unless renewed (server epoch milliseconds).
    pub deadline_ms: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct Waiter {
    pub owner: String,
    /// When the waiter loses its place unless it polls (server epoch milliseconds).
    pub deadline_ms: Option<i64>,
}

/// One lock's state at one instant.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub name: String,
    /// Redis's type of the key `NAME`: `hash` for a lock, `none` when absent.
    pub key_type: String,
    /// `read` or `write` for a read-write lock.
    pub mode: Option<String>,
    pub holders: Vec<Holder>,
    /// The lock's remaining lease: `None` when there is no key, -1 when it has no expiry.
    pub ttl_ms: Option<i64>,
    pub queue: Vec<Waiter>,
    /// Deadlines of owners no longer in the queue (left behind; they expire by themselves).
    pub stale_deadlines: usize,
    /// The last fencing token given.
    pub token: Option<i64>,
    /// A semaphore's permits available (the string `NAME` holds a number).
    pub available_permits: Option<i64>,
    /// How many permits of a permit-expirable semaphore are taken (`{NAME}:timeout`),
    /// and the first of them by deadline (at most 100).
    pub permits_taken: usize,
    pub permits: Vec<Permit>,
    /// The server's clock (epoch milliseconds) when the snapshot was taken.
    pub server_time_ms: i64,
}

type Reply = (
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
);

impl Snapshot {
    /// Reads `name`'s state in one script call, on the client's own connection.
    pub fn read(client: &Client, name: &str) -> Result<Snapshot, Failure> {
        let script = redis::Script::new(SNAPSHOT);
        let reply: Reply = client
            .with_connection(name, |conn| {
                script
                    .key(name)
                    .key(queue_key(name))
                    .key(timeouts_key(name))
                    .key(token_key(name))
                    .key(permit_timeouts_key(name))
                    .arg(tagged(name))
                    .arg(LISTED_PERMITS)
                    .invoke(conn)
            })
            .map_err(|e| Failure::from_lock_error(&format!("cannot read {}", crate::exit::shown(name)), &e))?;
        Ok(Snapshot::from_reply(name, reply))
    }

    fn from_reply(name: &str, reply: Reply) -> Snapshot {
        let (now, key_type, fields, pttl, waiting, deadlines, token, reads, value, permits_taken, listed) = reply;
        let number = |s: &str| s.parse::<i64>().ok();
        let pairs = |flat: &[String]| -> Vec<(String, String)> {
            flat.chunks_exact(2).map(|pair| (pair[0].clone(), pair[1].clone())).collect()
        };
        let fields = pairs(&fields);
        let mode = fields.iter().find(|(field, _)| field == MODE).map(|(_, v)| v.clone());
        let read_ttls = pairs(&reads);
        let mut holders: Vec<Holder> = fields
            .iter()
            .filter(|(field, _)| field != MODE)
            .map(|(field, holds)| {
                let holds = number(holds).unwrap_or(0);
                match (&mode, field.strip_suffix(WRITE_SUFFIX)) {
                    (None, _) => Holder { owner: field.clone(), role: Role::Lock, holds, ttl_ms: None },
                    (Some(_), Some(owner)) => {
                        Holder { owner: owner.to_owned(), role: Role::Write, holds, ttl_ms: None }
                    }
                    (Some(_), None) => {
                        let ttl = read_ttls.iter().find(|(o, _)| o == field).and_then(|(_, t)| number(t));
                        Holder { owner: field.clone(), role: Role::Read, holds, ttl_ms: ttl.filter(|t| *t != -2) }
                    }
                }
            })
            .collect();
        // The writer first, then readers; each group in owner order (Redis's hash order is
        // arbitrary).
        holders.sort_by(|a, b| (a.role != Role::Write, &a.owner).cmp(&(b.role != Role::Write, &b.owner)));
        let deadlines = pairs(&deadlines);
        let deadline_of = |owner: &str| {
            deadlines
                .iter()
                .find(|(o, _)| o == owner)
                .and_then(|(_, score)| score.parse::<f64>().ok())
                .map(|s| s as i64)
        };
        let queue: Vec<Waiter> =
            waiting.iter().map(|owner| Waiter { owner: owner.clone(), deadline_ms: deadline_of(owner) }).collect();
        let stale_deadlines = deadlines.iter().filter(|(o, _)| !waiting.contains(o)).count();
        let permits = listed
            .chunks_exact(2)
            .map(|pair| Permit {
                id: permit_id(&pair[0]),
                deadline_ms: std::str::from_utf8(&pair[1]).ok().and_then(|s| s.parse::<f64>().ok()).map(|s| s as i64),
            })
            .collect();
        Snapshot {
            name: name.to_owned(),
            ttl_ms: if key_type == "none" { None } else { number(&pttl).filter(|t| *t != -2) },
            key_type,
            mode,
            holders,
            queue,
            stale_deadlines,
            token: token.as_deref().and_then(number),
            available_permits: value.as_deref().and_then(number),
            permits_taken,
            permits,
            server_time_ms: number(&now).unwrap_or(0),
        }
    }

    /// Whether someone holds the lock, or a permit of the semaphore.
    pub fn is_held(&self) -> bool {
        if self.is_semaphore() {
            return self.live_permits() > 0;
        }
        self.key_type == "hash" && self.holders.iter().any(|h| h.holds > 0)
    }

    /// Whether this is a semaphore: a string `NAME` that holds a number, or taken permits.
    pub fn is_semaphore(&self) -> bool {
        self.key_type != "hash" && (self.available_permits.is_some() || self.permits_taken > 0)
    }

    /// The permits taken whose deadline has not passed (a permit past it is returned by
    /// the next acquire); all of them when more are taken than listed.
    pub fn live_permits(&self) -> usize {
        if self.permits_taken > self.permits.len() {
            return self.permits_taken;
        }
        self.permits.iter().filter(|p| p.deadline_ms.is_none_or(|d| d >= self.server_time_ms)).count()
    }

    /// A semaphore's permits in all: available plus taken (`None` for a lock).
    pub fn total_permits(&self) -> Option<i64> {
        self.is_semaphore().then(|| {
            self.available_permits.unwrap_or(0).saturating_add(i64::try_from(self.permits_taken).unwrap_or(i64::MAX))
        })
    }

    /// The kind the data shows: `read-write` (a `mode` field), `fenced` (a token counter),
    /// `fair` (a queue or deadlines), `lock` (a lock hash alone), `semaphore` (a number
    /// of permits, or taken permits); `None` when nothing is there.
    pub fn kind(&self) -> Option<&'static str> {
        if self.is_semaphore() {
            Some("semaphore")
        } else if self.mode.is_some() {
            Some("read-write")
        } else if self.token.is_some() {
            Some("fenced")
        } else if !self.queue.is_empty() || self.stale_deadlines > 0 {
            Some("fair")
        } else if self.key_type == "hash" {
            Some("lock")
        } else {
            None
        }
    }

    /// Whether the key `NAME` exists but is neither a lock nor a semaphore.
    pub fn is_foreign(&self) -> bool {
        self.key_type != "hash" && self.key_type != "none" && !self.is_semaphore()
    }
}

/// A permit's id as stored when it is printable ASCII, else in hexadecimal.
fn permit_id(id: &[u8]) -> String {
    if !id.is_empty() && id.iter().all(|b| b.is_ascii_graphic()) {
        String::from_utf8_lossy(id).into_owned()
    } else {
        id.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A semaphore's permits in all, read at one instant: those available (`NAME`) plus
/// those taken (`{NAME}:timeout`, which also keeps permits past their deadline until an
/// acquire returns them). `None` when no permits are set.
pub fn permit_total(client: &Client, name: &str) -> Result<Option<i64>, Failure> {
    let (available, taken): (Option<i64>, i64) = client
        .with_connection(name, |conn| {
            redis::pipe().atomic().cmd("GET").arg(name).cmd("ZCARD").arg(permit_timeouts_key(name)).query(conn)
        })
        .map_err(|e| Failure::from_lock_error(&format!("cannot read semaphore {}", crate::exit::shown(name)), &e))?;
    Ok(available.map(|a| a.saturating_add(taken)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_redisson_and_keep_a_hash_tag() {
        assert_eq!(queue_key("orders:42"), "redisson_lock_queue:{orders:42}");
        assert_eq!(timeouts_key("{orders}:42"), "redisson_lock_timeout:{orders}:42");
        assert_eq!(token_key("x"), "redisson_lock_token:{x}");
        assert_eq!(permit_timeouts_key("jobs"), "{jobs}:timeout");
        assert_eq!(permit_timeouts_key("{jobs}:1"), "{jobs}:1:timeout");
        assert_eq!(tagged("doc"), "{doc}");
        assert_eq!(tagged("{doc}7"), "{doc}7");
    }

    #[test]
    fn a_read_write_snapshot_sorts_the_writer_first() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let reply: Reply = (
            "1000".into(),
            "hash".into(),
            s(&["mode", "write", "b:1", "1", "a:1:write", "2"]),
            "500".into(),
            s(&["q:1"]),
            s(&["q:1", "2000", "gone:1", "3000"]),
            None,
            s(&["b:1", "400"]),
            None,
            0,
            vec![],
        );
        let snap = Snapshot::from_reply("n", reply);
        assert_eq!(snap.kind(), Some("read-write"));
        assert_eq!(snap.holders[0].owner, "a:1");
        assert_eq!((snap.holders[0].role, snap.holders[0].holds), (Role::Write, 2));
        assert_eq!((snap.holders[1].role, snap.holders[1].ttl_ms), (Role::Read, Some(400)));
        assert_eq!(snap.queue[0].deadline_ms, Some(2000));
        assert_eq!(snap.stale_deadlines, 1);
        assert_eq!(snap.ttl_ms, Some(500));
        assert!(snap.is_held());
    }

    #[test]
    fn a_semaphore_shows_its_permits() {
        let reply: Reply = (
            "1000".into(),
            "string".into(),
            vec![],
            "-1".into(),
            vec![],
            vec![],
            None,
            vec![],
            Some("1".into()),
            2,
            vec![vec![0xab, 0x01], b"900".to_vec(), b"3f2a".to_vec(), b"1500".to_vec()],
        );
        let snap = Snapshot::from_reply("s", reply);
        assert_eq!(snap.kind(), Some("semaphore"));
        assert!(!snap.is_foreign());
        assert_eq!((snap.available_permits, snap.total_permits()), (Some(1), Some(3)));
        assert_eq!(snap.permits[0].id, "ab01");
        assert_eq!(snap.permits[1].id, "3f2a");
        assert_eq!(snap.permits[1].deadline_ms, Some(1500));
        assert_eq!(snap.live_permits(), 1, "the first is past its deadline");
        assert!(snap.is_held());
    }
}
