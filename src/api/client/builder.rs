//! [`ClientBuilder`]: every setting of a [`Client`], its default and its check, and the
//! build that starts the client's threads.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::base::error::Result;
use crate::durability::disk_view::SyncMode;
use crate::durability::replica_view::ReplicaAcks;
use crate::observe::events::LockEvents;
use crate::support::config::{Config, ReplicaPolicy, ShardedSubscriptionMode};
use crate::transport;

use super::Client;

/// Builds a [`Client`] with settings other than the defaults.
///
/// `Duration::MAX` follows one rule in every duration setting. A time the client only waits
/// for ([`connect_timeout`](ClientBuilder::connect_timeout),
/// [`command_timeout`](ClientBuilder::command_timeout),
/// [`ping_interval`](ClientBuilder::ping_interval),
/// [`retry_budget`](ClientBuilder::retry_budget)) may be `Duration::MAX`: no limit. A time
/// sent to Redis in milliseconds ([`watchdog_timeout`](ClientBuilder::watchdog_timeout),
/// [`fair_wait_timeout`](ClientBuilder::fair_wait_timeout),
/// [`replica_sync_timeout`](ClientBuilder::replica_sync_timeout)) must be at most 2^53 - 1
/// ms (about 285,000 years), the most Redis's scripts hold exactly: a longer one is
/// [`InvalidInput`](crate::ErrorKind::InvalidInput) at [`build`](ClientBuilder::build),
/// naming the setting. The [clock drift margin](ClientBuilder::clock_drift_margin) must
/// leave most of the watchdog lease, so `Duration::MAX` is refused there too.
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
        ClientBuilder { url: url.into(), config: Config::default() }
    }

    /// Lease of every acquisition made without [`with_lease`](crate::Lock::with_lease); the
    /// watchdog renews such leases every third of it while their guard lives, and a crashed
    /// holder's lock frees itself after it. At least 30 ms, at most 2^53 - 1 ms (it is
    /// written into Redis: `Duration::MAX` is `InvalidInput`).
    ///
    /// Defaults to 30 seconds.
    pub fn watchdog_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.config.watchdog_timeout = timeout;
        self
    }

    /// How long a queued fair-lock waiter keeps its place in the queue without polling.
    /// Longer than zero, at most 2^53 - 1 ms (it is written into Redis: `Duration::MAX` is
    /// `InvalidInput`).
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
    /// free pooled connection. `Duration::MAX`: no limit.
    ///
    /// Defaults to 5 seconds.
    pub fn connect_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.config.connect_timeout = timeout;
        self
    }

    /// Time allowed for the reply to one command. When it passes the caller gets
    /// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) and the outcome is unknown.
    /// `Duration::MAX`: no limit (a server that never answers blocks the call for ever).
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
    /// waiter, sends nothing. `Duration::MAX`: never checked (a dead connection is then
    /// noticed only by each waiter's look at its lock, at the latest one lease later).
    ///
    /// Defaults to 10 seconds.
    pub fn ping_interval(mut self, interval: Duration) -> ClientBuilder {
        self.config.ping_interval = interval;
        self
    }

    /// Whether every release of a plain or fenced lock that frees it also publishes
    /// Redisson's release message on the lock's channel. Without it, a release that names a
    /// waiting redlease client publishes there only when the master counts a subscriber
    /// there that is not a redlease client (a Redisson waiter), so that the other waiting
    /// redlease processes read nothing. Turn it on when Redisson clients on the same locks
    /// subscribe on replicas (Redisson's `subscriptionMode = SLAVE`): the master cannot
    /// count those, and they would otherwise wait for their lease-long re-check.
    ///
    /// Defaults to `false`, as Redisson subscribes on the master by default.
    pub fn always_publish_releases(mut self, always: bool) -> ClientBuilder {
        self.config.always_publish_releases = always;
        self
    }

    /// Which pub/sub lock messages use on a Redis Cluster: Redisson's
    /// `shardedSubscriptionMode`, which must match that of the Redisson clients on the same
    /// locks (else neither hears the other's releases, and a waiter waits until the holder's
    /// lease runs out). [`Auto`](ShardedSubscriptionMode::Auto) chooses as Redisson does:
    /// sharded (`SPUBLISH` / `SSUBSCRIBE`) when the cluster answers `PUBSUB SHARDNUMSUB`;
    /// [`On`](ShardedSubscriptionMode::On) is sharded;
    /// [`Off`](ShardedSubscriptionMode::Off) is classic `PUBLISH` / `SUBSCRIBE`, for a
    /// deployment whose Redisson clients set `shardedSubscriptionMode = OFF`. Every lock
    /// kind, semaphore, latch and election follows it. Outside a cluster (`redis://`,
    /// `rediss://`, `unix://`, `redis-sentinel://`) it changes nothing: messages go by
    /// `PUBLISH` / `SUBSCRIBE` there, as Redisson's do.
    ///
    /// Defaults to [`ShardedSubscriptionMode::Auto`], as Redisson's.
    pub fn sharded_subscription_mode(mut self, mode: ShardedSubscriptionMode) -> ClientBuilder {
        self.config.sharded_subscription_mode = mode;
        self
    }

    /// Whether a grant (a lock's, or a semaphore's permits) is trusted only once an online
    /// replica of the master it was made on has it (`WAIT`): it is undone and refused with
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated) when none confirms it
    /// within [`replica_sync_timeout`](ClientBuilder::replica_sync_timeout), when the master
    /// lost a replica lately, when a replicated master has no replica for now (after a
    /// failover, until one follows the new master), or when the client has followed the
    /// master elsewhere since. A failover right after a confirmed grant does not lose it. A
    /// single server (no replica, no replication backlog) grants at once. It costs a round
    /// trip plus the replication delay per grant on a replicated master, and nothing on a
    /// single server. Renewals do not wait. The rules, and what they leave open, are in
    /// [`guide::guarantees`](crate::guide::guarantees#replication-and-failover).
    ///
    /// Defaults to `true`, as Redisson's `checkLockSyncedSlaves`: a lock a failover can
    /// silently lose is a lock two owners can hold. `true` is
    /// [`ReplicaPolicy::Required`], `false`
    /// [`ReplicaPolicy::Off`]; see
    /// [`replica_policy`](ClientBuilder::replica_policy) for the one between.
    pub fn sync_replicas(mut self, sync: bool) -> ClientBuilder {
        self.config.replica_policy = if sync { ReplicaPolicy::Required } else { ReplicaPolicy::Off };
        self
    }

    /// What a grant on a master with replicas waits for: an online replica always
    /// ([`Required`](ReplicaPolicy::Required)), one only when the master has one connected,
    /// as Redisson does ([`WhenConnected`](ReplicaPolicy::WhenConnected): no grant refused
    /// for want of a replica, at the cost of grants a failover can lose), or none
    /// ([`Off`](ReplicaPolicy::Off)). The costs of each, measured, are in
    /// [`guide::guarantees`](crate::guide::guarantees#replication-and-failover), "Replication and failover".
    ///
    /// Defaults to [`ReplicaPolicy::Required`].
    pub fn replica_policy(mut self, policy: ReplicaPolicy) -> ClientBuilder {
        self.config.replica_policy = policy;
        self
    }

    /// How many of the master's replicas must confirm a grant or a watchdog renewal
    /// before it counts: every one the master lists online
    /// ([`ReplicaAcks::All`]), so that whichever replica a failover promotes has it, or at
    /// least a number of them ([`ReplicaAcks::AtLeast`]; Redisson's rule is `AtLeast(1)`),
    /// which keeps granting while one replica cannot confirm, at the cost of grants a
    /// failover to that replica loses. A grant short of it is undone and refused with
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated); a renewal short of it
    /// does not extend the lease (it turns at risk, and is lost at its deadline unless a
    /// later renewal is confirmed). `AtLeast(0)` is `InvalidInput`.
    ///
    /// Defaults to [`ReplicaAcks::All`].
    pub fn replica_acks(mut self, acks: ReplicaAcks) -> ClientBuilder {
        self.config.replica_acks = acks;
        self
    }

    /// Whether a grant also waits until its master's append-only file has it on disk
    /// (`WAITAOF 1 0`, sent behind the grant in the same write): Redisson's `syncMode`. With
    /// `appendonly yes` and `appendfsync everysec`, a crash of the master's host, or of the
    /// server while a slow disk holds its AOF's sync back, loses the last second of writes:
    /// a lock granted there is free again when the server starts from its AOF, while its
    /// holder works on. [`SyncMode::Auto`] waits for the disk where the master has an AOF
    /// and `WAITAOF` (Redis 7.2 or later, Valkey), [`SyncMode::WaitAof`] everywhere
    /// (refusing grants a master cannot persist). A grant the disk did not confirm within
    /// [`replica_sync_timeout`](ClientBuilder::replica_sync_timeout) is undone and refused
    /// with [`ErrorKind::NotPersisted`](crate::ErrorKind::NotPersisted). The replicas are
    /// waited for as the [replica policy](ClientBuilder::replica_policy) says, in every
    /// mode. Renewals and releases do not wait. A grant waits for the server's next sync:
    /// with `appendfsync everysec` Valkey makes it at its cron's next tick (100 ms at its
    /// default `hz 10`); with `appendfsync always` the write is on disk before the reply,
    /// and `Wait` already keeps it. What it costs and what it keeps, measured, is in
    /// [`guide::guarantees`](crate::guide::guarantees#persistence-and-crashes).
    ///
    /// Defaults to [`SyncMode::Wait`], as Redisson's locks: the replicas only.
    pub fn sync_mode(mut self, mode: SyncMode) -> ClientBuilder {
        self.config.sync_mode = mode;
        self
    }

    /// How long a grant waits for a replica to confirm it (see
    /// [`sync_replicas`](ClientBuilder::sync_replicas)). Longer than zero, at most 2^53 - 1
    /// ms (it is sent to Redis as `WAIT`'s timeout: `Duration::MAX` is `InvalidInput`).
    ///
    /// Defaults to 1 second, as Redisson's `slavesSyncTimeout`.
    pub fn replica_sync_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.config.replica_sync_timeout = timeout;
        self
    }

    /// How long an operation that does not wait (`try_lock`, `unlock()`, a query) keeps
    /// trying when its command cannot reach Redis (the connection is refused, breaks, or
    /// cannot be made: a restart, a failover), pausing 50 ms to 1 s (jittered) between
    /// tries. A wait (`lock`, `try_lock_for`, `try_lock_until`, the semaphores', the
    /// latch's, a campaign) keeps trying until its own deadline instead (`lock()`: until
    /// held), a grant no replica confirmed included, and tells
    /// [`LockEvents::waiting_through_outage`] once it has failed for this long. A command
    /// that got no reply within the command timeout is not tried again: its outcome is
    /// unknown. An acquire that may have been granted before its connection broke is undone
    /// before it is tried again. `ZERO` returns the first error of a call that does not
    /// wait; `Duration::MAX` keeps it trying without limit.
    ///
    /// Defaults to 3 seconds.
    pub fn retry_budget(mut self, budget: Duration) -> ClientBuilder {
        self.config.retry_budget = budget;
        self
    }

    /// The share of a lease taken off its validity for clocks that run at different rates:
    /// a hold is trusted until the last successful acquire or renewal was *sent*, plus the
    /// lease, less `rate` × the lease and the [margin](ClientBuilder::clock_drift_margin)
    /// (see [`LockGuard::valid_until`](crate::LockGuard::valid_until)). It must be within
    /// `0 ..= 0.25`, and the allowance for the watchdog lease less than a third of it;
    /// `build()` refuses other values with `InvalidInput`.
    ///
    /// Defaults to 0.01 (1 %), Redlock's allowance.
    pub fn clock_drift_rate(mut self, rate: f64) -> ClientBuilder {
        self.config.drift_rate = rate;
        self
    }

    /// The time taken off every lease's validity besides the
    /// [drift rate](ClientBuilder::clock_drift_rate)'s share. With the rate's share it must
    /// be less than a third of the watchdog timeout (`Duration::MAX` is `InvalidInput`).
    ///
    /// Defaults to 2 milliseconds, Redlock's allowance.
    pub fn clock_drift_margin(mut self, margin: Duration) -> ClientBuilder {
        self.config.drift_margin = margin;
        self
    }

    /// Trusts these certificates (PEM: one or more, typically the CA that signed the
    /// server's certificate) for a `rediss://` URL, instead of the system's roots. A bundle
    /// that does not parse is `InvalidInput` at [`build`](ClientBuilder::build).
    ///
    /// Defaults to the system's root certificates.
    pub fn tls_root_certificates(mut self, pem: impl Into<Vec<u8>>) -> ClientBuilder {
        self.config.tls.root_certificates = Some(pem.into());
        self
    }

    /// Presents this certificate chain and private key (PEM) to a `rediss://` server that
    /// checks its clients (`tls-auth-clients yes`): mutual TLS. Either not parsing, the two
    /// not belonging together, or an X.509 v1 certificate (what `openssl x509 -req` makes
    /// without `-extfile`; rustls reads v3 only, and the message says how to reissue it) is
    /// `InvalidInput` at [`build`](ClientBuilder::build).
    ///
    /// Defaults to no client certificate.
    pub fn tls_client_certificate(
        mut self,
        chain_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> ClientBuilder {
        self.config.tls.client_certificate = Some((chain_pem.into(), key_pem.into()));
        self
    }

    /// **Turns off the check of the server's certificate** for a `rediss://` URL: any
    /// certificate, from anyone, for any name, expired or not, is accepted. The connection
    /// is still encrypted, but anyone who can intercept it can read and change it. Only for
    /// tests and for servers whose certificate cannot be checked any other way.
    ///
    /// This is the one way to turn the check off: a `rediss://...#insecure` URL (which the
    /// `redis` crate reads) is [`InvalidInput`](crate::ErrorKind::InvalidInput) at
    /// [`build`](ClientBuilder::build), naming this switch.
    ///
    /// Defaults to `false`: the certificate must be valid, unexpired, for the URL's host and
    /// signed by a trusted root.
    pub fn danger_accept_invalid_certificates(mut self, accept: bool) -> ClientBuilder {
        self.config.tls.accept_invalid_certificates = accept;
        self
    }

    /// Receiver of events no call returns (lost leases, failed renewals and releases,
    /// subscriber reconnects).
    ///
    /// Defaults to a receiver that ignores them.
    pub fn events(mut self, events: Arc<dyn LockEvents>) -> ClientBuilder {
        self.config.events = self.config.events.with_receiver(events);
        self
    }

    /// The `lock` label of a lock's metrics (feature `metrics`): `label` maps a lock's name
    /// (a semaphore's, a group's) to the label's value, or to `None` for no label. Every
    /// value is a series of its own in the exporter, so map names to a bounded set: a
    /// fixed list, or a prefix. Called on the thread that records, once per metric
    /// recorded: keep it cheap. A mapping that panics labels nothing. Without the feature
    /// the mapping is kept and never called.
    ///
    /// Defaults to no label: a lock's metrics carry its kind and outcome only.
    ///
    /// ```
    /// # fn main() -> redlease::Result<()> {
    /// let builder = redlease::Client::builder("redis://127.0.0.1:6379/")
    ///     .metrics_lock_label(|name| name.split_once(':').map(|(service, _)| service.to_owned()));
    /// # let _ = builder;
    /// # Ok(())
    /// # }
    /// ```
    pub fn metrics_lock_label(
        mut self,
        label: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> ClientBuilder {
        self.config.events = self.config.events.with_lock_label(Arc::new(label));
        self
    }

    /// Checks the settings, connects, pings Redis, loads the scripts and starts the
    /// client's two background threads. Fails within the connect timeout, with
    /// [`Error::is_connection_error`](crate::Error::is_connection_error), when nothing answers.
    pub fn build(self) -> Result<Client> {
        Client::connect(&self.url, self.config)
    }
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("url", &transport::redact_url(&self.url))
            .field("config", &self.config)
            .finish()
    }
}
