//! Redis Cluster: the slot map, a command pool and a pub/sub connection per master (sharded
//! unless the client's `ShardedSubscriptionMode` says classic), every key routed to the
//! master of its slot, and `MOVED` / `ASK` followed.
//!
//! Hand-written rather than the `redis` crate's sync `ClusterConnection`, which serves one
//! command at a time over one connection per node: redlease needs a pool per node (threads
//! acquire at once), the connection a grant came on for the `WAIT` after it (a replica of
//! *that* master must confirm it), and a timed-out connection handed to the thread that
//! undoes its acquire. The crate's `Slot` does not give its number out, so the slot
//! function (CRC16, hash tags) is here too, checked against `CLUSTER KEYSLOT` in the tests.
//!
//! | event | what the cluster does |
//! |---|---|
//! | built | asks the seeds in turn for `CLUSTER SLOTS` and `PUBSUB SHARDNUMSUB`; every slot must have a master; the pub/sub is chosen |
//! | `MOVED slot host:port` | that slot goes to that node at once; the whole map is read again (at most once a second) |
//! | `ASK slot host:port` | this command goes there once, behind `ASKING` |
//! | a node cannot be reached | the map is read again (at most once every 100 ms) from another node |
//! | a sharded subscription moved | the waiters join again where the map, read again, says |

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use crate::base::error::{Error, ErrorKind, Result, is_transient_refusal};
use crate::observe::events::Events;
use crate::support::config::ShardedSubscriptionMode;
use crate::transport::conn::PubSub;
use crate::transport::connector::Connector;
use crate::transport::net::Target;
use crate::transport::pool::{Pool, Redirect};
use crate::transport::subscriber::{Subscriber, SubscriberStats, Timing};
use crate::transport::url::{NodeList, redact};

/// The scheme of a cluster URL: `redis-cluster://[[user]:password@]host[:port][,...]`, the
/// seed nodes (any node of the cluster; more than one in case one is down).
pub(crate) const SCHEME: &str = "redis-cluster://";
const FORM: &str = "redis-cluster://[[user]:password@]host[:port][,host[:port]...]";

/// A cluster's hash slots.
const SLOTS: usize = 16384;

/// The least time between two reads of the map after `MOVED`, and after a failed node.
const REFRESH_AFTER_MOVED: Duration = Duration::from_secs(1);
const REFRESH_AFTER_FAILURE: Duration = Duration::from_millis(100);

/// The part of `key` that is hashed: the text between the first `{` and the first `}`
/// after it, when that is not empty; else the whole key.
pub(crate) fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let close = key[open + 1..].iter().position(|&b| b == b'}')?;
    let tag = &key[open + 1..open + 1 + close];
    (!tag.is_empty()).then_some(tag)
}

/// The hash slot of `key`: CRC16 (XMODEM) of its hash tag, or of the whole key, mod 16384.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let hashed = hash_tag(key).unwrap_or(key);
    let mut crc: u16 = 0;
    for &byte in hashed {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc % SLOTS as u16
}

/// Checks that every key and channel of the lock `name` lands in one slot. Redisson names a
/// lock's other keys `prefix:{name}`, or `prefix:name` when the name has a `{` of its own,
/// trusting it to be a hash tag: a name with a `{` but no hash tag (`x{}y`, `a}{b`) would
/// spread its keys over several slots (Redisson's own keys for it do too), so a cluster
/// refuses it.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.contains('{') && hash_tag(name.as_bytes()).is_none() {
        return Err(Error::invalid(
            "the name has a '{' but no hash tag (a non-empty {...}): in a cluster its keys would land in different slots; use a name without braces or with a hash tag such as \"{tag}rest\"",
        ));
    }
    Ok(())
}

/// The settings every node's connections share.
pub(crate) struct NodeSettings {
    pub(crate) pool_size: usize,
    pub(crate) timing: Timing,
    /// The client's wake token, which every node's subscriber listens for.
    pub(crate) wake_token: u64,
    /// The client's count of messages and confirmations, which every subscriber adds to.
    pub(crate) seq: Arc<AtomicU64>,
    pub(crate) events: Events,
    /// Which pub/sub the client was told to use (see [`choose_pubsub`]).
    pub(crate) mode: ShardedSubscriptionMode,
}

/// A range of slots and its master: (first slot, last slot, master host, master port).
type Range = (u16, u16, String, u16);

/// What a node answered `PUBSUB SHARDNUMSUB`, asked once at build.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Probe {
    /// An answer: the cluster has sharded pub/sub (Redis 7).
    Answered,
    /// `NOPERM`: the client's user may not ask (Redis 7 with an ACL rule).
    NotAllowed,
    /// Another refusal, its text: the server does not know the command (before Redis 7).
    Unknown(String),
}

/// One master: its command pool and its pub/sub connection.
pub(crate) struct Node {
    addr: (String, u16),
    pool: Arc<Pool>,
    subscriber: Arc<Subscriber>,
}

/// A cluster: who serves each slot, and the nodes met so far (kept for the client's life;
/// a node that stops serving slots keeps an idle pool and an idle subscriber thread).
pub(crate) struct Cluster {
    me: Weak<Cluster>,
    url: NodeList,
    /// The URL, password hidden.
    redacted: String,
    settings: NodeSettings,
    /// The node of each slot; empty until the first read.
    map: RwLock<Vec<Arc<Node>>>,
    nodes: Mutex<HashMap<(String, u16), Arc<Node>>>,
    /// When the map was last read.
    read_at: Mutex<Option<Instant>>,
    /// How every node's lock messages travel: chosen once, at build.
    pubsub: PubSub,
}

impl Cluster {
    /// Parses `url`, reads the slot map from the first seed that answers, asks that seed
    /// whether the cluster has sharded pub/sub (Redis 7), and chooses the pub/sub as
    /// `settings.mode` says.
    pub(crate) fn connect(url: &str, settings: NodeSettings) -> Result<Arc<Cluster>> {
        let parsed = NodeList::parse(url, SCHEME, 6379, FORM)?;
        let redacted = redact(url);
        if parsed.db != 0 {
            return Err(Error::invalid(format!("invalid URL {redacted}: a cluster has database 0 only")));
        }
        if parsed.fragment.is_some() {
            return Err(Error::invalid(format!("invalid URL {redacted}: a cluster URL has no #fragment")));
        }
        let timing = settings.timing;
        let read_at = Instant::now();
        // On the connection that gave the map, as Redisson asks on the seed it read first.
        let (ranges, probe) = ask_in_turn(&redacted, &parsed.nodes, |host, port| {
            let (ranges, mut conn) = ask_slots(&parsed, timing, host, port)?;
            let probe = probe_sharded(&mut conn)
                .map_err(|err| Error::from_redis(err, "asking for sharded pub/sub", timing.command))?;
            Ok((ranges, probe))
        })?;
        let pubsub = choose_pubsub(settings.mode, probe, &redacted)?;
        let cluster = Arc::new_cyclic(|me| Cluster {
            me: me.clone(),
            url: parsed,
            redacted,
            settings,
            map: RwLock::new(Vec::new()),
            nodes: Mutex::new(HashMap::new()),
            read_at: Mutex::new(Some(read_at)),
            pubsub,
        });
        cluster.install(ranges)?;
        Ok(cluster)
    }

    /// The URL, password hidden.
    pub(crate) fn url(&self) -> &str {
        &self.redacted
    }

    /// The pool of the master that serves `key`.
    pub(crate) fn pool_for(&self, key: &str) -> Arc<Pool> {
        Arc::clone(&self.node_of(key).pool)
    }

    /// The subscriber of the master that serves `channel`'s slot.
    pub(crate) fn subscriber_for(&self, channel: &str) -> Arc<Subscriber> {
        Arc::clone(&self.node_of(channel).subscriber)
    }

    /// The masters serving slots now, each once. It reads the whole slot map (a master's
    /// slots mostly follow each other, so each is compared with the last one's first):
    /// for inspections and the rare cases that need every master, never a grant's path.
    pub(crate) fn masters(&self) -> Vec<Arc<Pool>> {
        let mut pools: Vec<Arc<Pool>> = Vec::new();
        for node in self.map.read().iter() {
            if pools.last().is_some_and(|p| Arc::ptr_eq(p, &node.pool)) {
                continue;
            }
            if !pools.iter().any(|p| Arc::ptr_eq(p, &node.pool)) {
                pools.push(Arc::clone(&node.pool));
            }
        }
        pools
    }

    /// The counts of every node's subscriber, added up.
    pub(crate) fn subscriber_stats(&self) -> SubscriberStats {
        let nodes: Vec<Arc<Node>> = self.nodes.lock().values().cloned().collect();
        let mut total = SubscriberStats { channels: 0, waiters: 0, connected: false };
        for node in nodes {
            let stats = node.subscriber.stats();
            total.channels += stats.channels;
            total.waiters += stats.waiters;
            total.connected |= stats.connected;
        }
        total
    }

    /// Reads the slot map again if it was read longer than `after` ago; errors are
    /// dropped (the next command's failure says what is wrong).
    pub(crate) fn refresh(&self, after: Duration) {
        let due = self.read_at.lock().is_none_or(|at| at.elapsed() >= after);
        if due {
            let _ = self.read_map();
        }
    }

    /// Stops every subscriber and closes every idle connection.
    pub(crate) fn stop(&self) {
        let nodes: Vec<Arc<Node>> = self.nodes.lock().values().cloned().collect();
        for node in nodes {
            node.subscriber.shutdown();
            node.pool.close_idle();
        }
    }

    fn node_of(&self, key: &str) -> Arc<Node> {
        let slot = usize::from(key_slot(key.as_bytes()));
        // Every slot: `connect` fails unless it reads a map that covers them all, and a map
        // is only ever replaced by another such map.
        Arc::clone(&self.map.read()[slot])
    }

    /// The node at `addr`, met now or before.
    fn node_at(&self, host: &str, port: u16) -> Result<Arc<Node>> {
        let key = (host.to_owned(), port);
        if let Some(node) = self.nodes.lock().get(&key) {
            return Ok(Arc::clone(node));
        }
        let info = self
            .url
            .node_info(host.to_owned(), port)
            .map_err(|e| Error::invalid(format!("invalid node address {host}:{port}: {}", e.category())))?;
        let client = redis::Client::open(info.clone())
            .map_err(|e| Error::invalid(format!("invalid node address {host}:{port}: {}", e.category())))?;
        let timing = self.settings.timing;
        let mut pool = Pool::new(
            Connector::Direct(Box::new(client)),
            self.pubsub,
            self.settings.pool_size,
            timing.connect,
            timing.command,
        );
        let redirect: Weak<dyn Redirect> = self.me.clone();
        pool.redirect_with(redirect);
        let subscriber = Subscriber::start(
            Target::from_info(&info, None)?,
            self.pubsub,
            self.settings.wake_token,
            Arc::clone(&self.settings.seq),
            timing,
            self.settings.events.clone(),
        )?;
        let node = Arc::new(Node { addr: key.clone(), pool: Arc::new(pool), subscriber: Arc::new(subscriber) });
        let mut nodes = self.nodes.lock();
        let node = nodes.entry(key).or_insert(node);
        Ok(Arc::clone(node))
    }

    /// Reads `CLUSTER SLOTS` from the first node that answers (the masters known, then the
    /// seeds) and makes it the map.
    fn read_map(&self) -> Result<()> {
        *self.read_at.lock() = Some(Instant::now());
        let mut candidates: Vec<(String, u16)> = Vec::new();
        for node in self.map.read().iter() {
            if !candidates.contains(&node.addr) {
                candidates.push(node.addr.clone());
            }
        }
        for seed in &self.url.nodes {
            if !candidates.contains(seed) {
                candidates.push(seed.clone());
            }
        }
        let timing = self.settings.timing;
        let (ranges, _) =
            ask_in_turn(&self.redacted, &candidates, |host, port| ask_slots(&self.url, timing, host, port))?;
        self.install(ranges)
    }

    /// Makes `ranges` the map, if they cover every slot.
    fn install(&self, ranges: Vec<Range>) -> Result<()> {
        let mut owners: Vec<Option<Arc<Node>>> = vec![None; SLOTS];
        for (first, last, host, port) in ranges {
            let node = self.node_at(&host, port)?;
            let last = usize::from(last).min(SLOTS - 1);
            for owner in owners.iter_mut().take(last + 1).skip(usize::from(first)) {
                *owner = Some(Arc::clone(&node));
            }
        }
        let uncovered = owners.iter().filter(|o| o.is_none()).count();
        if uncovered > 0 {
            let first = owners.iter().position(Option::is_none).unwrap_or(0);
            return Err(Error::new(
                ErrorKind::Redis,
                format!(
                    "the cluster of {} leaves {uncovered} slots without a master (the first is {first})",
                    self.redacted
                ),
            ));
        }
        *self.map.write() = owners.into_iter().flatten().collect();
        Ok(())
    }
}

/// Asks `candidates` in turn with `ask` until one answers; an `InvalidInput` answer ends
/// the round at once (a seed not in cluster mode), and when none answers the error names
/// each and what it said.
fn ask_in_turn<T>(
    redacted: &str,
    candidates: &[(String, u16)],
    mut ask: impl FnMut(&str, u16) -> Result<T>,
) -> Result<T> {
    let mut failures = Vec::new();
    for (host, port) in candidates {
        match ask(host, *port) {
            Ok(answer) => return Ok(answer),
            Err(err) if err.kind() == ErrorKind::InvalidInput => return Err(err),
            Err(err) => failures.push(format!("{host}:{port} ({err:#})")),
        }
    }
    Err(Error::new(ErrorKind::Redis, format!("no node of {redacted} gave its slot map: {}", failures.join("; ")))
        .connection()
        .unsent())
}

/// `CLUSTER SLOTS` of one node, and the connection it came on.
fn ask_slots(url: &NodeList, timing: Timing, host: &str, port: u16) -> Result<(Vec<Range>, redis::Connection)> {
    let info = url
        .node_info(host.to_owned(), port)
        .map_err(|e| Error::invalid(format!("invalid node address {host}:{port}: {}", e.category())))?;
    let asked = || -> redis::RedisResult<(redis::Value, redis::Connection)> {
        let mut conn = redis::Client::open(info.clone())?.get_connection_with_timeout(timing.connect)?;
        conn.set_read_timeout(Some(timing.command))?;
        conn.set_write_timeout(Some(timing.command))?;
        let reply = redis::cmd("CLUSTER").arg("SLOTS").query(&mut conn)?;
        Ok((reply, conn))
    };
    let (reply, conn) = asked().map_err(|err| {
        if err.to_string().contains("cluster support disabled") {
            Error::invalid(format!(
                "{host}:{port} is not in cluster mode (for a single server use redis://{host}:{port}/)"
            ))
        } else {
            Error::from_redis(err, "reading the slot map", timing.command)
        }
    })?;
    let ranges = parse_slots(&reply, host)
        .ok_or_else(|| Error::new(ErrorKind::Redis, "CLUSTER SLOTS answered in an unknown form"))?;
    Ok((ranges, conn))
}

/// Asks `PUBSUB SHARDNUMSUB`, as Redisson's `PublishSubscribeService.checkShardingSupport`
/// does. A connection that fails, or a refusal for a state that passes (`LOADING`, …), is
/// an error (the next seed is asked); any other refusal is an answer too.
fn probe_sharded(conn: &mut redis::Connection) -> redis::RedisResult<Probe> {
    match redis::cmd("PUBSUB").arg("SHARDNUMSUB").query::<redis::Value>(conn) {
        Ok(_) => Ok(Probe::Answered),
        Err(err) if err.code() == Some("NOPERM") => Ok(Probe::NotAllowed),
        Err(err) if err.code().is_some() && !is_transient_refusal(&err) => Ok(Probe::Unknown(err.to_string())),
        Err(err) => Err(err),
    }
}

/// The pub/sub of a cluster whose seed answered `probe`, as Redisson chooses for `mode`:
/// `Auto` is sharded when the seed answered and classic when the user may not ask (Redisson
/// takes any failure for "no sharded pub/sub"), `On` is sharded and `Off` classic. A cluster
/// that does not know the command (before Redis 7) is refused whatever the mode: the
/// scripts' cluster build needs Redis 7 (`#!lua flags=allow-cross-slot-keys`).
fn choose_pubsub(mode: ShardedSubscriptionMode, probe: Probe, redacted: &str) -> Result<PubSub> {
    match (mode, probe) {
        (_, Probe::Unknown(refusal)) => Err(Error::invalid(format!(
            "the cluster of {redacted} has no sharded pub/sub (PUBSUB SHARDNUMSUB answered {refusal}): redlease needs Redis 7 in cluster mode"
        ))),
        (ShardedSubscriptionMode::Auto, Probe::Answered) | (ShardedSubscriptionMode::On, _) => Ok(PubSub::Sharded),
        (ShardedSubscriptionMode::Auto, Probe::NotAllowed) | (ShardedSubscriptionMode::Off, _) => {
            Ok(PubSub::ClusterClassic)
        }
    }
}

impl Redirect for Cluster {
    fn moved(&self, slot: u16, host: &str, port: u16) -> Option<Arc<Pool>> {
        let node = self.node_at(host, port).ok()?;
        {
            let mut map = self.map.write();
            if let Some(owner) = map.get_mut(usize::from(slot)) {
                *owner = Arc::clone(&node);
            }
        }
        // A failover or a migration moves more than one slot: learn the rest at once.
        self.refresh(REFRESH_AFTER_MOVED);
        Some(Arc::clone(&node.pool))
    }

    fn node(&self, host: &str, port: u16) -> Option<Arc<Pool>> {
        self.node_at(host, port).ok().map(|node| Arc::clone(&node.pool))
    }

    fn unreachable(&self) {
        self.refresh(REFRESH_AFTER_FAILURE);
    }
}

/// `CLUSTER SLOTS`: `[[first, last, [host, port, id, ...], replicas...], ...]`. An empty
/// host means the node asked.
fn parse_slots(reply: &redis::Value, asked: &str) -> Option<Vec<Range>> {
    let redis::Value::Array(ranges) = reply else { return None };
    let mut parsed = Vec::with_capacity(ranges.len());
    for range in ranges {
        let redis::Value::Array(fields) = range else { return None };
        let (Some(redis::Value::Int(first)), Some(redis::Value::Int(last)), Some(redis::Value::Array(master))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            return None;
        };
        let host = match master.first() {
            Some(redis::Value::BulkString(host)) if !host.is_empty() => String::from_utf8_lossy(host).into_owned(),
            Some(redis::Value::BulkString(_) | redis::Value::Nil) => asked.to_owned(),
            _ => return None,
        };
        let Some(redis::Value::Int(port)) = master.get(1) else { return None };
        parsed.push((u16::try_from(*first).ok()?, u16::try_from(*last).ok()?, host, u16::try_from(*port).ok()?));
    }
    Some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_redis_hash_tags() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(hash_tag(b"foo{}{bar}"), None);
        assert_eq!(hash_tag(b"foo{{bar}}zap"), Some(&b"{bar"[..]));
        assert_eq!(hash_tag(b"foo{bar}{zap}"), Some(&b"bar"[..]));
        assert_eq!(hash_tag(b"x{}y"), None);
        assert_eq!(hash_tag(b"x}{y"), None);
    }

    #[test]
    fn the_pubsub_is_chosen_as_redisson_chooses() {
        use ShardedSubscriptionMode::{Auto, Off, On};
        let chosen = |mode, probe| choose_pubsub(mode, probe, "redis-cluster://seed").ok();
        assert_eq!(chosen(Auto, Probe::Answered), Some(PubSub::Sharded));
        assert_eq!(chosen(Auto, Probe::NotAllowed), Some(PubSub::ClusterClassic));
        assert_eq!(chosen(On, Probe::Answered), Some(PubSub::Sharded));
        assert_eq!(chosen(On, Probe::NotAllowed), Some(PubSub::Sharded));
        assert_eq!(chosen(Off, Probe::Answered), Some(PubSub::ClusterClassic));
        assert_eq!(chosen(Off, Probe::NotAllowed), Some(PubSub::ClusterClassic));
        for mode in [Auto, On, Off] {
            let err = choose_pubsub(mode, Probe::Unknown("ERR unknown subcommand".into()), "redis-cluster://seed")
                .expect_err("before Redis 7");
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
            assert!(err.to_string().contains("needs Redis 7"), "{err}");
        }
    }
}
