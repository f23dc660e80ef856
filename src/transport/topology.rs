//! The seam between the lock logic and the servers: which connections serve a key or a
//! channel. A client talks to one server today, so every key and channel goes to it; a
//! cluster or a sentinel-watched master will give other answers here without touching the
//! floors above.

use std::sync::Arc;
use std::time::Instant;

use crate::config::Config;
use crate::error::{Error, ErrorKind, Result};
use crate::transport::net::Target;
use crate::transport::pool::{Connector, Pool};
use crate::transport::sentinel::{self, Sentinels, SwitchWatch};
use crate::transport::subscriber::{Subscriber, SubscriberStats, Ticket, Timing, Wake};
use crate::transport::tls::Tls;
use crate::transport::url;

/// The Redis deployment a client talks to: one server, its command pool and its pub/sub
/// connection.
pub(crate) struct Topology {
    /// The URL, password hidden.
    url: String,
    pool: Arc<Pool>,
    subscriber: Arc<Subscriber>,
    /// Behind sentinels: the thread that hears when the master moves.
    switch_watch: Option<SwitchWatch>,
}

impl Topology {
    /// Connects to `url`: the first exchange (`PING`, then `prepare`, which loads scripts
    /// and checks permissions) is bounded by the connect timeout. Starts the subscriber
    /// thread. Returns what `prepare` returned.
    pub(crate) fn connect<T>(
        url: &str,
        config: &Config,
        prepare: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<(Topology, T)> {
        let mut sentinels = None;
        let (connector, target) = if url.starts_with(sentinel::SCHEME) {
            if config.tls.is_set() {
                return Err(Error::invalid(
                    "TLS behind Sentinel is not supported yet: use redis-sentinel:// without TLS settings",
                ));
            }
            let found = Arc::new(Sentinels::parse(url, &url::redact(url))?);
            sentinels = Some(Arc::clone(&found));
            (Connector::Sentinel(Arc::clone(&found)), Target::sentinel(found))
        } else {
            Topology::direct(url, config)?
        };
        let pool = Arc::new(Pool::new(connector, config.pool_size, config.connect_timeout, config.command_timeout));
        let mut prepare = prepare;
        let prepared = pool
            .run_within("connecting", Some(config.connect_timeout), |conn| {
                redis::cmd("PING").query::<String>(conn)?;
                prepare(conn)
            })
            .map_err(|err| {
                if err.is_timeout() {
                    let timeout = config.connect_timeout.min(config.command_timeout);
                    Error::new(ErrorKind::Timeout, format!("no answer within the connect timeout ({timeout:?})"))
                        .connection()
                } else {
                    err
                }
            })?;
        let timing = Timing {
            connect: config.connect_timeout,
            command: config.command_timeout,
            ping_interval: config.ping_interval,
        };
        let subscriber = Arc::new(Subscriber::start(target, timing, config.events.clone())?);
        let switch_watch = match sentinels {
            Some(sentinels) => {
                let (moved_pool, moved_subscriber) = (Arc::clone(&pool), Arc::clone(&subscriber));
                let watch = SwitchWatch::start(sentinels, config.connect_timeout, move || {
                    moved_pool.master_moved();
                    moved_subscriber.reconnect("the sentinels switched the master");
                });
                match watch {
                    Ok(watch) => Some(watch),
                    Err(err) => {
                        subscriber.shutdown();
                        return Err(err);
                    }
                }
            }
            None => None,
        };
        Ok((Topology { url: url::redact(url), pool, subscriber, switch_watch }, prepared))
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

    /// The connections that serve `key`.
    pub(crate) fn pool_for(&self, _key: &str) -> &Pool {
        &self.pool
    }

    /// Joins the waiters of `channel` on the connection that receives it (see
    /// [`Subscriber::join`]).
    pub(crate) fn join(&self, channel: &str, deadline: Option<Instant>, wake: Wake, weight: u64) -> Result<Ticket> {
        self.subscriber.join(channel, deadline, wake, weight)
    }

    pub(crate) fn subscriber_stats(&self) -> SubscriberStats {
        self.subscriber.stats()
    }

    /// Wakes every waiter with `Shutdown`, closes the pub/sub connection and every idle
    /// command connection.
    pub(crate) fn stop(&self) {
        if let Some(watch) = &self.switch_watch {
            watch.stop();
        }
        self.subscriber.shutdown();
        self.pool.close_idle();
    }
}
