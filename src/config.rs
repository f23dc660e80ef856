//! Client configuration: the builder, its defaults and the checks on its values.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::events::{Events, LockEvents};
use crate::keys::{MAX_LEASE, MIN_WATCHDOG_TIMEOUT};

/// Default lease when none is given; the watchdog renews every third of it.
pub const DEFAULT_WATCHDOG_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time a queued fair-lock waiter keeps its place without polling.
pub const DEFAULT_FAIR_WAIT_TIMEOUT: Duration = Duration::from_secs(300);
/// Default number of pooled command connections.
pub const DEFAULT_POOL_SIZE: usize = 8;
/// Default time allowed to open a connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time allowed for one command's reply.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(3);
/// Default time between liveness checks (`PING`) of the pub/sub connection while it has
/// subscriptions.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(10);
/// Default most leases renewed by one script call of the watchdog.
pub const DEFAULT_RENEW_BATCH_SIZE: usize = 1000;

/// Most pooled connections: Redis's default `maxclients`.
const MAX_POOL_SIZE: usize = 10_000;
/// Most leases in one renew call: each takes three arguments, and Redis refuses commands of
/// more than about a million.
const MAX_RENEW_BATCH_SIZE: usize = 100_000;

/// Settings a built client runs with.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) watchdog_timeout: Duration,
    pub(crate) fair_wait_timeout: Duration,
    pub(crate) pool_size: usize,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) renew_batch_size: usize,
    pub(crate) ping_interval: Duration,
    pub(crate) events: Events,
}

/// Builds a [`Client`] with settings other than the defaults.
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redlease::Client::builder("redis://127.0.0.1:6379/")
///     .watchdog_timeout(Duration::from_secs(10))
///     .command_timeout(Duration::from_secs(1))
///     .build()?;
/// # Ok::<(), redlease::Error>(())
/// ```
#[must_use = "a builder does nothing until build() is called"]
pub struct ClientBuilder {
    url: String,
    config: Config,
}

impl ClientBuilder {
    pub(crate) fn new(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            url: url.into(),
            config: Config {
                watchdog_timeout: DEFAULT_WATCHDOG_TIMEOUT,
                fair_wait_timeout: DEFAULT_FAIR_WAIT_TIMEOUT,
                pool_size: DEFAULT_POOL_SIZE,
                connect_timeout: DEFAULT_CONNECT_TIMEOUT,
                command_timeout: DEFAULT_COMMAND_TIMEOUT,
                renew_batch_size: DEFAULT_RENEW_BATCH_SIZE,
                ping_interval: DEFAULT_PING_INTERVAL,
                events: Events::none(),
            },
        }
    }

    /// Lease of every acquisition made without [`with_lease`](crate::Lock::with_lease); the
    /// watchdog renews such leases every third of it while their guard lives, and a crashed
    /// holder's lock frees itself after it. At least 30 ms.
    ///
    /// Defaults to 30 seconds.
    pub fn watchdog_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.config.watchdog_timeout = timeout;
        self
    }

    /// How long a queued fair-lock waiter keeps its place in the queue without polling.
    ///
    /// Defaults to 300 seconds.
    pub fn fair_wait_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.config.fair_wait_timeout = timeout;
        self
    }

    /// Most command connections open at once; a thread that finds them all busy waits for
    /// one, at most the connect timeout. At least 1, at most 10,000 (Redis's default
    /// `maxclients`).
    ///
    /// Defaults to 8.
    pub fn pool_size(mut self, size: usize) -> ClientBuilder {
        self.config.pool_size = size;
        self
    }

    /// Time allowed to open a connection (TCP connect and handshake), and to wait for a
    /// free pooled connection.
    ///
    /// Defaults to 5 seconds.
    pub fn connect_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.config.connect_timeout = timeout;
        self
    }

    /// Time allowed for the reply to one command. When it passes the caller gets
    /// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) and the outcome is unknown.
    ///
    /// Defaults to 3 seconds.
    pub fn command_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.config.command_timeout = timeout;
        self
    }

    /// Most leases renewed by one script call of the watchdog. At least 1, at most 100,000.
    ///
    /// Defaults to 1000.
    pub fn renew_batch_size(mut self, size: usize) -> ClientBuilder {
        self.config.renew_batch_size = size;
        self
    }

    /// How long the pub/sub connection may stay silent, while some thread waits on it,
    /// before it is checked with a `PING`. A connection that does not answer within the
    /// command timeout (a silent firewall drop, a frozen proxy) is closed and opened again,
    /// and every waiter is woken to look at its lock. So a dead pub/sub connection is
    /// noticed within this interval plus the command timeout. An idle client, with no
    /// waiter, sends nothing.
    ///
    /// Defaults to 10 seconds.
    pub fn ping_interval(mut self, interval: Duration) -> ClientBuilder {
        self.config.ping_interval = interval;
        self
    }

    /// Receiver of events no call returns (lost leases, failed renewals and releases,
    /// subscriber reconnects).
    ///
    /// Defaults to a receiver that ignores them.
    pub fn events(mut self, events: Arc<dyn LockEvents>) -> ClientBuilder {
        self.config.events = Events::new(events);
        self
    }

    /// Checks the settings, connects, pings Redis, loads the scripts and starts the
    /// client's two background threads. Fails within the connect timeout, with
    /// [`Error::is_connection_error`], when nothing answers.
    pub fn build(self) -> Result<Client> {
        self.config.check()?;
        Client::connect(&self.url, self.config)
    }
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("url", &crate::url::redact(&self.url))
            .field("config", &self.config)
            .finish()
    }
}

impl Config {
    /// The longest one pooled round trip can take: waiting for a connection or opening one,
    /// the reply, and one retry on a new connection when a pooled one was found dead.
    pub(crate) fn round_trip_bound(&self) -> Duration {
        self.connect_timeout.saturating_add(self.command_timeout).saturating_mul(2)
    }

    fn check(&self) -> Result<()> {
        let positive = |what: &str, d: Duration| {
            if d.is_zero() { Err(Error::invalid(format!("{what} must be longer than zero"))) } else { Ok(()) }
        };
        if self.watchdog_timeout < MIN_WATCHDOG_TIMEOUT {
            return Err(Error::invalid(format!(
                "watchdog timeout {:?} is too short to renew; it must be at least {MIN_WATCHDOG_TIMEOUT:?}",
                self.watchdog_timeout
            )));
        }
        if self.watchdog_timeout > MAX_LEASE {
            return Err(Error::invalid(format!(
                "watchdog timeout {:?} is longer than {MAX_LEASE:?}",
                self.watchdog_timeout
            )));
        }
        positive("fair wait timeout", self.fair_wait_timeout)?;
        if self.fair_wait_timeout > MAX_LEASE {
            return Err(Error::invalid(format!(
                "fair wait timeout {:?} is longer than {MAX_LEASE:?}",
                self.fair_wait_timeout
            )));
        }
        positive("connect timeout", self.connect_timeout)?;
        positive("ping interval", self.ping_interval)?;
        positive("command timeout", self.command_timeout)?;
        if !(1..=MAX_POOL_SIZE).contains(&self.pool_size) {
            return Err(Error::invalid(format!(
                "pool size {} is out of range: it must be 1 ..= {MAX_POOL_SIZE}",
                self.pool_size
            )));
        }
        if !(1..=MAX_RENEW_BATCH_SIZE).contains(&self.renew_batch_size) {
            return Err(Error::invalid(format!(
                "renew batch size {} is out of range: it must be 1 ..= {MAX_RENEW_BATCH_SIZE}",
                self.renew_batch_size
            )));
        }
        Ok(())
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("watchdog_timeout", &self.watchdog_timeout)
            .field("fair_wait_timeout", &self.fair_wait_timeout)
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("renew_batch_size", &self.renew_batch_size)
            .field("ping_interval", &self.ping_interval)
            .finish_non_exhaustive()
    }
}
