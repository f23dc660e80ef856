//! The settings a client runs with, their defaults and the checks on their values. The
//! builder that sets them is [`ClientBuilder`](crate::ClientBuilder).

use std::fmt;
use std::time::Duration;

use crate::base::error::{Error, Result};
use crate::base::keys::{MAX_LEASE, MAX_LEASE_MILLIS, MIN_WATCHDOG_TIMEOUT};
use crate::base::span::Span;
use crate::durability::disk_view::SyncMode;
use crate::durability::replica_view::ReplicaAcks;
use crate::observe::events::Events;

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
/// Default time a grant waits for a replica to confirm it (Redisson's `slavesSyncTimeout`).
pub const DEFAULT_REPLICA_SYNC_TIMEOUT: Duration = Duration::from_secs(1);
/// Default time an operation keeps trying to reach Redis through a restart or a failover.
pub const DEFAULT_RETRY_BUDGET: Duration = Duration::from_secs(3);
/// Default most leases renewed by one script call of the watchdog.
pub const DEFAULT_RENEW_BATCH_SIZE: usize = 1000;
/// Default share of a lease taken off its validity for clocks that run at different rates
/// (Redlock's reasoning: the holder's clock and Redis's may disagree by 1 %).
pub const DEFAULT_CLOCK_DRIFT_RATE: f64 = 0.01;
/// Default time taken off every lease's validity besides the drift rate's share.
pub const DEFAULT_CLOCK_DRIFT_MARGIN: Duration = Duration::from_millis(2);

/// Largest drift rate: clocks a quarter apart are broken, not drifting.
const MAX_CLOCK_DRIFT_RATE: f64 = 0.25;

/// Most pooled connections: Redis's default `maxclients`.
const MAX_POOL_SIZE: usize = 10_000;
/// Most leases in one renew call: each takes three arguments, and Redis refuses commands of
/// more than about a million.
const MAX_RENEW_BATCH_SIZE: usize = 100_000;

/// What a grant on a master with replicas waits for before it is given
/// ([`ClientBuilder::replica_policy`](crate::ClientBuilder::replica_policy)); the rules and
/// what each costs are in [`guide::guarantees`](crate::guide::guarantees#replication-and-failover),
/// "Replication and failover".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReplicaPolicy {
    /// A grant on a replicated master is given once an online replica of the master it
    /// was made on confirms it; a master that lost a replica lately, or that has none for
    /// now, grants nothing. No failover has lost a grant given this way in the tests.
    #[default]
    Required,
    /// Redisson's `checkLockSyncedSlaves`: a grant waits for a replica when the master has
    /// one connected, and is given at once when it has none (its replica down, or just
    /// after a failover, before one follows the new master). Grants are never refused for
    /// want of a replica, and a failover may lose some of them: a deployment that prefers
    /// being available to being exclusive across failovers.
    WhenConnected,
    /// Grants wait for no replica (`sync_replicas(false)`): for a server without replicas
    /// on purpose, or replicas no failover ever promotes.
    Off,
}

/// Which pub/sub a client uses on a Redis Cluster: Redisson's `shardedSubscriptionMode`
/// (`ClusterServersConfig`), with its three values and its default
/// ([`ClientBuilder::sharded_subscription_mode`](crate::ClientBuilder::sharded_subscription_mode)).
/// redlease and Redisson clients on the same locks must use the same pub/sub: a sharded
/// `SSUBSCRIBE` does not hear a classic `PUBLISH`, nor a `SUBSCRIBE` an `SPUBLISH`, and a
/// waiter that hears nothing waits until the holder's lease runs out. Outside a cluster
/// (one server, Sentinel) it changes nothing: messages go by `PUBLISH` / `SUBSCRIBE` there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ShardedSubscriptionMode {
    /// Sharded pub/sub when the cluster has it, as Redisson's `AUTO` decides: `build()` sends
    /// `PUBSUB SHARDNUMSUB` on the seed node that gives the slot map; an answer means
    /// sharded (every Redis 7 cluster), a refusal of the client's user (an ACL rule without
    /// `pubsub|shardnumsub`, `NOPERM`) means classic, as Redisson decides for that user.
    #[default]
    Auto,
    /// Sharded pub/sub (`SPUBLISH`, `SSUBSCRIBE` on the master of the channel's slot),
    /// without asking, as Redisson's `ON`.
    On,
    /// Classic pub/sub, as Redisson's `OFF`: releases `PUBLISH` (which the cluster carries to
    /// every node) and waiters `SUBSCRIBE` on the master of the channel's slot.
    Off,
}

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
    /// Wait for a replica to confirm every grant (while the master has replicas).
    pub(crate) replica_policy: ReplicaPolicy,
    /// How many replicas must confirm a grant or a renewal.
    pub(crate) replica_acks: ReplicaAcks,
    pub(crate) replica_sync_timeout: Duration,
    /// Whether a grant also waits for its master's AOF.
    pub(crate) sync_mode: SyncMode,
    pub(crate) retry_budget: Duration,
    /// The clock-drift allowance taken off every lease's validity: this share of the
    /// lease, plus `drift_margin`.
    pub(crate) drift_rate: f64,
    pub(crate) drift_margin: Duration,
    /// Every release of a plain or fenced lock also publishes on the lock's channel, for
    /// waiters the master cannot count (Redisson clients subscribed on replicas).
    pub(crate) always_publish_releases: bool,
    /// Which pub/sub a cluster client uses.
    pub(crate) sharded_subscription_mode: ShardedSubscriptionMode,
    pub(crate) tls: TlsSettings,
    pub(crate) events: Events,
}

/// How `rediss://` connections check the server and present the client (PEM bytes).
#[derive(Clone, Default)]
pub(crate) struct TlsSettings {
    /// The roots to trust instead of the system's.
    pub(crate) root_certificates: Option<Vec<u8>>,
    /// The client's certificate chain and private key, for mutual TLS.
    pub(crate) client_certificate: Option<(Vec<u8>, Vec<u8>)>,
    /// Accept any server certificate.
    pub(crate) accept_invalid_certificates: bool,
}

impl TlsSettings {
    /// Whether anything was set (and so TLS is expected).
    pub(crate) fn is_set(&self) -> bool {
        self.root_certificates.is_some() || self.client_certificate.is_some() || self.accept_invalid_certificates
    }
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Key material never shows.
        let set = |present: bool| if present { "set" } else { "none" };
        f.debug_struct("TlsSettings")
            .field("root_certificates", &set(self.root_certificates.is_some()))
            .field("client_certificate", &set(self.client_certificate.is_some()))
            .field("accept_invalid_certificates", &self.accept_invalid_certificates)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            watchdog_timeout: DEFAULT_WATCHDOG_TIMEOUT,
            fair_wait_timeout: DEFAULT_FAIR_WAIT_TIMEOUT,
            pool_size: DEFAULT_POOL_SIZE,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            renew_batch_size: DEFAULT_RENEW_BATCH_SIZE,
            ping_interval: DEFAULT_PING_INTERVAL,
            replica_policy: ReplicaPolicy::Required,
            replica_acks: ReplicaAcks::All,
            replica_sync_timeout: DEFAULT_REPLICA_SYNC_TIMEOUT,
            sync_mode: SyncMode::default(),
            retry_budget: DEFAULT_RETRY_BUDGET,
            drift_rate: DEFAULT_CLOCK_DRIFT_RATE,
            drift_margin: DEFAULT_CLOCK_DRIFT_MARGIN,
            always_publish_releases: false,
            sharded_subscription_mode: ShardedSubscriptionMode::Auto,
            tls: TlsSettings::default(),
            events: Events::none(),
        }
    }
}

impl Config {
    /// The longest one pooled round trip can take: waiting for a connection or opening one,
    /// the reply, and one retry on a new connection when a pooled one was found dead.
    pub(crate) fn round_trip_bound(&self) -> Duration {
        self.connect_timeout.saturating_add(self.command_timeout).saturating_mul(2)
    }

    /// The clock-drift allowance for a lease of `lease`: what is taken off it to know until
    /// when no other owner can hold the lock.
    fn drift(&self, lease: Duration) -> Duration {
        lease.mul_f64(self.drift_rate).saturating_add(self.drift_margin)
    }

    /// A lease of `lease` with its clock-drift allowance.
    pub(crate) fn span(&self, lease: Duration) -> Span {
        Span { lease, drift: self.drift(lease) }
    }

    /// The watchdog's lease with its clock-drift allowance.
    pub(crate) fn watchdog_span(&self) -> Span {
        self.span(self.watchdog_timeout)
    }

    /// Every setting within its range: `InvalidInput` before anything is sent.
    pub(crate) fn check(&self) -> Result<()> {
        let positive = |what: &str, d: Duration| {
            if d.is_zero() { Err(Error::invalid(format!("{what} must be longer than zero"))) } else { Ok(()) }
        };
        if self.watchdog_timeout < MIN_WATCHDOG_TIMEOUT {
            return Err(Error::invalid(format!(
                "watchdog timeout {:?} is too short to renew; it must be at least {MIN_WATCHDOG_TIMEOUT:?}",
                self.watchdog_timeout
            )));
        }
        // What Redis is told in milliseconds must fit what its scripts hold exactly; the
        // times the client only waits for may be `Duration::MAX`, "no limit".
        let in_redis = |what: &str, d: Duration, how: &str| {
            if d > MAX_LEASE {
                Err(Error::invalid(format!(
                    "{what} {d:?} is longer than {MAX_LEASE:?} ({MAX_LEASE_MILLIS} milliseconds), the longest time sent to Redis (a script counts milliseconds exactly only up to that): {how}"
                )))
            } else {
                Ok(())
            }
        };
        in_redis("watchdog timeout", self.watchdog_timeout, "it is the lease written into Redis")?;
        positive("fair wait timeout", self.fair_wait_timeout)?;
        in_redis(
            "fair wait timeout",
            self.fair_wait_timeout,
            "it is written into Redis as each queued waiter's deadline",
        )?;
        positive("replica sync timeout", self.replica_sync_timeout)?;
        in_redis("replica sync timeout", self.replica_sync_timeout, "it is sent to Redis as WAIT's timeout")?;
        if self.replica_acks == ReplicaAcks::AtLeast(0) {
            return Err(Error::invalid(
                "replica acks AtLeast(0) confirms nothing: use ReplicaPolicy::Off to wait for no replica",
            ));
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
        if !(0.0..=MAX_CLOCK_DRIFT_RATE).contains(&self.drift_rate) {
            return Err(Error::invalid(format!(
                "clock drift rate {} is out of range: it must be 0 ..= {MAX_CLOCK_DRIFT_RATE} (a share of the lease)",
                self.drift_rate
            )));
        }
        // An allowance as long as the renewal period would leave a watchdog lease invalid
        // before its renewal is due.
        let span = self.watchdog_span();
        if !span.drift_fits() {
            return Err(Error::invalid(format!(
                "the clock drift allowance ({:?}: {} of the lease plus the clock drift margin {:?}) must be less than a third of the watchdog timeout {:?}",
                span.drift, self.drift_rate, self.drift_margin, self.watchdog_timeout
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
            .field("replica_policy", &self.replica_policy)
            .field("replica_acks", &self.replica_acks)
            .field("replica_sync_timeout", &self.replica_sync_timeout)
            .field("sync_mode", &self.sync_mode)
            .field("retry_budget", &self.retry_budget)
            .field("drift_rate", &self.drift_rate)
            .field("drift_margin", &self.drift_margin)
            .field("sharded_subscription_mode", &self.sharded_subscription_mode)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}
