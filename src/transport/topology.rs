//! The seam between the lock logic and the servers: which connections serve a key or a
//! channel. One server (or the master a sentinel names) serves every key and channel; in a
//! cluster the master of the key's slot does, with the pub/sub connection (sharded, or
//! classic as the client's `ShardedSubscriptionMode` says) of the channel's slot.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::base::error::{Error, ErrorKind, Result};
use crate::support::config::Config;
use crate::transport::cluster::{self, Cluster, NodeSettings};
use crate::transport::conn::{Conn, PubSub};
use crate::transport::connector::Connector;
use crate::transport::net::Target;
use crate::transport::pool::Pool;
use crate::transport::sentinel::{self, Sentinels, SwitchWatch};
use crate::transport::subscriber::{Subscriber, SubscriberStats, Ticket, Timing};
use crate::transport::subscriptions::Meaning;
use crate::transport::tls::{self, Tls};
use crate::transport::url;

/// The Redis deployment a client talks to.
pub(crate) struct Topology {
    /// The URL, password hidden.
    url: String,
    servers: Servers,
    /// This client's wake token: a release that names it wakes one of this client's
    /// waiters (see `lua/acquire.lua`). Random, above 2^32 (never a release message `0` or
    /// `1`) and below 2^53 (exact in Lua and in Java's `Long`).
    wake_token: u64,
    /// Messages and confirmations read by this client's subscribers (see
    /// [`Subscriber::join`]).
    seq: Arc<AtomicU64>,
}

enum Servers {
    /// One server, or the master the sentinels name: its command pool and its pub/sub
    /// connection.
    One {
        pool: Arc<Pool>,
        subscriber: Arc<Subscriber>,
        /// Behind sentinels: the thread that hears when the master moves.
        switch_watch: Option<SwitchWatch>,
    },
    Cluster(Arc<Cluster>),
}

impl Topology {
    /// Connects to `url`: the first exchange (`PING`, then `prepare`, which loads scripts
    /// and checks permissions) is bounded by the connect timeout. Starts the subscriber
    /// thread. Returns what `prepare` returned.
    pub(crate) fn connect<T>(
        url: &str,
        config: &Config,
        prepare: impl FnMut(&mut Conn) -> redis::RedisResult<T>,
    ) -> Result<(Topology, T)> {
        let timing = Timing {
            connect: config.connect_timeout,
            command: config.command_timeout,
            ping_interval: config.ping_interval,
        };
        tls::check_available(url, &config.tls)?;
        let wake_token = rand::random_range((1u64 << 32)..(1u64 << 53));
        let seq = Arc::new(AtomicU64::new(0));
        if url.starts_with(cluster::SCHEME) {
            return Topology::cluster(url, config, timing, wake_token, seq, prepare);
        }
        let mut sentinels = None;
        let (connector, target) = if url.starts_with(sentinel::SCHEME) {
            if config.tls.is_set() {
                return Err(Error::invalid(
                    "TLS behind Sentinel is not supported yet: use redis-sentinel:// without TLS settings",
                ));
            }
            let found = Arc::new(Sentinels::parse(url)?);
            sentinels = Some(Arc::clone(&found));
            (Connector::Sentinel(Arc::clone(&found)), Target::sentinel(found))
        } else {
            Topology::direct(url, config)?
        };
        let (plaintext, tls) = (target.is_plaintext_tcp(), target.is_tls());
        let pool = Arc::new(Pool::new(
            connector,
            PubSub::Classic,
            config.pool_size,
            config.connect_timeout,
            config.command_timeout,
        ));
        let mut prepare = prepare;
        let prepared = pool
            .run_within("connecting", Some(config.connect_timeout), |conn| {
                redis::cmd("PING").query::<String>(conn)?;
                prepare(conn)
            })
            .map_err(|err| first_exchange_failed(err, config, plaintext, tls))?;
        let subscriber = Arc::new(Subscriber::start(
            target,
            PubSub::Classic,
            wake_token,
            Arc::clone(&seq),
            timing,
            config.events.clone(),
        )?);
        let switch_watch = match sentinels {
            Some(sentinels) => Some(watch_switches(sentinels, config, &pool, &subscriber)?),
            None => None,
        };
        let servers = Servers::One { pool, subscriber, switch_watch };
        Ok((Topology { url: url::redact(url), servers, wake_token, seq }, prepared))
    }

    /// Connects to a cluster: reads its slot map, then runs `prepare` on every master.
    fn cluster<T>(
        url: &str,
        config: &Config,
        timing: Timing,
        wake_token: u64,
        seq: Arc<AtomicU64>,
        mut prepare: impl FnMut(&mut Conn) -> redis::RedisResult<T>,
    ) -> Result<(Topology, T)> {
        if config.tls.is_set() {
            return Err(Error::invalid(
                "TLS in cluster mode is not supported yet: use redis-cluster:// without TLS settings",
            ));
        }
        let settings = NodeSettings {
            pool_size: config.pool_size,
            timing,
            wake_token,
            seq: Arc::clone(&seq),
            events: config.events.clone(),
            mode: config.sharded_subscription_mode,
        };
        let cluster = Cluster::connect(url, settings)?;
        let servers = Servers::Cluster(Arc::clone(&cluster));
        let topology = Topology { url: cluster.url().to_owned(), servers, wake_token, seq };
        let mut prepared = None;
        for pool in cluster.masters() {
            let done = pool.run_within("connecting", Some(config.connect_timeout), |conn| prepare(conn));
            match done {
                Ok(value) => prepared = Some(value),
                Err(err) => {
                    topology.stop();
                    return Err(err);
                }
            }
        }
        match prepared {
            Some(prepared) => Ok((topology, prepared)),
            None => {
                topology.stop();
                Err(Error::new(ErrorKind::Redis, format!("the cluster of {} has no master", cluster.url())))
            }
        }
    }

    /// The connector and pub/sub target of a `redis://`, `rediss://` or `unix://` URL.
    fn direct(url: &str, config: &Config) -> Result<(Connector, Target)> {
        let info = url::connection_info(url)?;
        // No CLIENT SETINFO handshake: redis-rs waits up to the whole connect timeout for each
        // handshake reply, so with it a connect could take several connect timeouts.
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        let info = info.set_redis_settings(settings);
        let tls = match info.addr() {
            redis::ConnectionAddr::TcpTls { .. } => Some(Tls::new(&config.tls)?),
            _ if config.tls.is_set() => {
                return Err(Error::invalid(format!(
                    "TLS settings were given, but {} does not use TLS: use rediss://",
                    url::redact(url)
                )));
            }
            _ => None,
        };
        let target = Target::from_info(&info, tls.as_ref())?;
        let client = match &tls {
            Some(tls) => tls.redis_client(info)?,
            None => redis::Client::open(info)
                .map_err(|e| Error::invalid(format!("invalid redis URL {}: {}", url::redact(url), e.category())))?,
        };
        Ok((Connector::Direct(Box::new(client)), target))
    }

    /// The URL, password hidden.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// This client's wake token.
    pub(crate) fn wake_token(&self) -> u64 {
        self.wake_token
    }

    /// The connections that serve `key`.
    pub(crate) fn pool_for(&self, key: &str) -> Arc<Pool> {
        match &self.servers {
            Servers::One { pool, .. } => Arc::clone(pool),
            Servers::Cluster(cluster) => cluster.pool_for(key),
        }
    }

    /// The pool whose id is `id`, if it is one of the masters' still.
    pub(crate) fn pool_with_id(&self, id: u64) -> Option<Arc<Pool>> {
        match &self.servers {
            Servers::One { pool, .. } => (pool.id() == id).then(|| Arc::clone(pool)),
            Servers::Cluster(cluster) => cluster.masters().into_iter().find(|pool| pool.id() == id),
        }
    }

    /// Every master's pool: the one server's, or each cluster master's.
    pub(crate) fn masters(&self) -> Vec<Arc<Pool>> {
        match &self.servers {
            Servers::One { pool, .. } => vec![Arc::clone(pool)],
            Servers::Cluster(cluster) => cluster.masters(),
        }
    }

    /// Checks what the deployment asks of a lock's name: in a cluster, that its keys share
    /// one slot.
    pub(crate) fn check_name(&self, name: &str) -> Result<()> {
        match &self.servers {
            Servers::One { .. } => Ok(()),
            Servers::Cluster(_) => cluster::check_name(name),
        }
    }

    /// The count of messages and confirmations this client's subscribers have read: read it
    /// before a first attempt and give it to [`join`](Topology::join).
    pub(crate) fn message_seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// Joins the waiters of `channel` on the connection that receives it (see
    /// [`Subscriber::join`]); `since` is [`message_seq`](Topology::message_seq) as read
    /// before the caller's first attempt.
    pub(crate) fn join(
        &self,
        channel: &str,
        deadline: Option<Instant>,
        meaning: &'static dyn Meaning,
        weight: u64,
        since: u64,
    ) -> Result<Ticket> {
        match &self.servers {
            Servers::One { subscriber, .. } => subscriber.join(channel, deadline, meaning, weight, since),
            Servers::Cluster(cluster) => {
                cluster.subscriber_for(channel).join(channel, deadline, meaning, weight, since)
            }
        }
    }

    /// Joins again after the ticket's channel moved to another node, once the slot map
    /// has been read again.
    pub(crate) fn rejoin(
        &self,
        channel: &str,
        deadline: Option<Instant>,
        meaning: &'static dyn Meaning,
        weight: u64,
    ) -> Result<Ticket> {
        if let Servers::Cluster(cluster) = &self.servers {
            cluster.refresh(Duration::ZERO);
        }
        // Never fresh: the caller looks at its lock again.
        self.join(channel, deadline, meaning, weight, 0)
    }

    pub(crate) fn subscriber_stats(&self) -> SubscriberStats {
        match &self.servers {
            Servers::One { subscriber, .. } => subscriber.stats(),
            Servers::Cluster(cluster) => cluster.subscriber_stats(),
        }
    }

    /// Wakes every waiter with `Shutdown`, closes the pub/sub connections and every idle
    /// command connection.
    pub(crate) fn stop(&self) {
        match &self.servers {
            Servers::One { pool, subscriber, switch_watch } => {
                if let Some(watch) = switch_watch {
                    watch.stop();
                }
                subscriber.shutdown();
                pool.close_idle();
            }
            Servers::Cluster(cluster) => cluster.stop(),
        }
    }
}

/// What a failed first exchange with a server says, with a hint where the failure has a
/// likely cause: a timeout names the timeout that bounded it; TLS spoken to a plaintext
/// port, or plaintext to a TLS port, and a login the URL does not give, say so.
fn first_exchange_failed(err: Error, config: &Config, plaintext: bool, tls: bool) -> Error {
    // A plaintext port reads a TLS handshake as the start of a command and waits for
    // the rest: the client sees no answer, not a refusal.
    let tls_hint = "no answer to the TLS handshake: if the server speaks plaintext on that port, use redis://";
    if err.is_timeout() && !err.was_unsent() {
        // A reply that did not come: the first exchange is bounded by the shorter
        // of the two timeouts. (A connection that could not be made already says
        // it was the connect timeout.)
        let (which, limit) = if config.connect_timeout <= config.command_timeout {
            ("connect timeout", config.connect_timeout)
        } else {
            ("command timeout", config.command_timeout)
        };
        let err = Error::new(ErrorKind::Timeout, format!("no answer within the {which} ({limit:?}) while connecting"))
            .connection();
        if tls { err.hint(tls_hint) } else { err }
    } else if err.is_timeout() && tls {
        err.connection().hint(tls_hint)
    } else if err.is_timeout() {
        err.connection()
    } else if err.is_authentication() && err.redis_error().is_some_and(|e| e.code() == Some("NOAUTH")) {
        err.hint("the server wants a login, and the URL gives no password (user \"default\"): redis://:PASSWORD@host/ or redis://USER:PASSWORD@host/")
    } else if plaintext && err.is_closed_by_peer() {
        // A TLS port closes or resets a plaintext client's first exchange.
        err.hint("the server closed the connection at the first exchange: if it wants TLS, use rediss://")
    } else {
        err
    }
}

/// Starts the watch on the sentinels' announcements of a new master: the pool and the
/// subscriber follow each switch. On failure the subscriber is stopped.
fn watch_switches(
    sentinels: Arc<Sentinels>,
    config: &Config,
    pool: &Arc<Pool>,
    subscriber: &Arc<Subscriber>,
) -> Result<SwitchWatch> {
    let (moved_pool, moved_subscriber) = (Arc::clone(pool), Arc::clone(subscriber));
    let watch = SwitchWatch::start(sentinels, config.connect_timeout, move || {
        moved_pool.master_moved();
        moved_subscriber.reconnect("the sentinels switched the master");
    });
    if watch.is_err() {
        subscriber.shutdown();
    }
    watch
}
