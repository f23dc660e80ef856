//! The front door: [`Client`], its [`ClientBuilder`] and [`ClientStats`], and
//! [`redact_url`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, ReplicaPolicy, ShardedSubscriptionMode};
use crate::disk_view::SyncMode;
use crate::election::Election;
use crate::engine::{self, Engine, GroupValues, with_retries};
use crate::error::Result;
use crate::events::{Events, LockEvents};
use crate::fair_lock::FairLock;
use crate::fenced_lock::FencedLock;
use crate::group_lock::GroupLock;
use crate::handle::Handle;
use crate::histogram::DurationHistogram;
use crate::identity::ClientIdentity;
use crate::inspection::LockInfo;
use crate::kind::Kind;
use crate::latch::CountDownLatch;
use crate::lock::Lock;
use crate::non_reentrant_lock::{NonReentrantFairLock, NonReentrantLock};
use crate::permit_semaphore::PermitExpirableSemaphore;
use crate::read_write_lock::ReadWriteLock;
use crate::semaphore::Semaphore;
use crate::spin_lock::SpinLock;
use crate::transport;

/// A connection to one Redis deployment (a server, a master watched by Sentinel, or a
/// cluster), and the factory of its locks.
///
/// Cheap to clone (an `Arc` inside), `Send` and `Sync`. It owns a pool of command
/// connections, one pub/sub connection, a renewal thread (the watchdog) and a subscriber
/// thread (in a cluster: a pool, a pub/sub connection and a subscriber thread per master). They stop when [`shutdown`](Client::shutdown) is called or when the last clone,
/// lock handle and guard are dropped.
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let guard = client.lock("nightly-report").lock()?;
/// // ... only one process in the fleet runs this at a time ...
/// drop(guard);
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    engine: Arc<Engine>,
}

/// A snapshot of a client's bookkeeping and of what its calls and leases did since it was
/// built, for monitoring (export the counters as they are: they only grow) and tests.
/// Counting costs an uncontended atomic add or two per event; nothing waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ClientStats {
    /// Locks held by threads of this client (reentrant holds of one thread count once). A
    /// [`Sendable`](crate::Sendable) guard's lease is no thread's and is not counted here;
    /// `renewals_scheduled` counts it while the watchdog keeps it.
    pub leases: usize,
    /// Leases scheduled for renewal by the watchdog.
    pub renewals_scheduled: usize,
    /// Watchdog wake-ups that renewed something, since the client was built.
    pub renewal_passes: u64,
    /// Renew round trips (one script call for up to `renew_batch_size` leases) so far.
    pub renewal_round_trips: u64,
    /// Leases renewed so far.
    pub leases_renewed: u64,
    /// Time spent waiting for renew round trips so far.
    pub renewal_time: Duration,
    /// Channels the subscriber is subscribed to or is changing.
    pub channels: usize,
    /// Threads waiting for a release message.
    pub waiters: usize,
    /// Whether the pub/sub connection is open (it opens when the first thread waits).
    pub subscriber_connected: bool,
    /// Acquisitions (of a lock, of permits, of a group's values; since the client was
    /// built) granted by their first attempt.
    pub acquired_at_once: u64,
    /// Acquisitions granted after waiting; how long each waited is in `wait_time`.
    pub acquired_after_waiting: u64,
    /// Single attempts (`try_lock`, `try_acquire`) that found it taken.
    pub busy: u64,
    /// Timed acquisitions that ran out (`try_lock_for`, `try_lock_until`, ...).
    pub timed_out: u64,
    /// Acquisitions ended by an [`Interrupter`](crate::Interrupter).
    pub interrupted: u64,
    /// Acquisitions that failed once their request had gone out (Redis unreachable, a
    /// timeout, a grant not replicated past the retry budget, ...). Bad input, refused
    /// before anything is sent, is not counted.
    pub failed: u64,
    /// How long the acquisitions granted after waiting waited.
    pub wait_time: DurationHistogram,
    /// How long guards held what they were granted, from the grant to their release (each
    /// lock of a `MultiLock` or `RedLock` counts; a plain semaphore's permits do not).
    pub hold_time: DurationHistogram,
    /// Leases reported lost ([`LockEvents::lease_lost`]).
    pub leases_lost: u64,
    /// Renewal failures reported ([`LockEvents::renewal_failed`]).
    pub renewals_failed: u64,
    /// Releases on drop that failed ([`LockEvents::release_failed`]).
    pub releases_failed: u64,
    /// Times a waiting thread was woken by a message.
    pub wake_ups: u64,
    /// Wake-ups whose next attempt found the lock (permits, values) taken again.
    pub wasted_wake_ups: u64,
    /// Tries sent again after a failure that passes by itself (Redis unreachable for a
    /// moment, a failover, a replica that had not confirmed a grant yet).
    pub retries: u64,
    /// Waits that kept trying past the retry budget, through an outage longer than it
    /// ([`LockEvents::waiting_through_outage`]).
    pub waits_through_outage: u64,
}

impl Client {
    /// Connects with the default settings (see [`ClientBuilder`]).
    ///
    /// Accepts `redis://[[user]:password@]host[:port][/db]`, `rediss://...` (the same over
    /// TLS: see [`ClientBuilder::tls_root_certificates`]), `unix:///path/to/socket`,
    /// `redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master-name`
    /// (the master the sentinels name, followed through failovers) and
    /// `redis-cluster://[[user]:password@]host[:port][,host[:port]...]` (seed nodes of a
    /// Redis 7 cluster: every command goes to the master of its key's slot, lock messages
    /// use sharded pub/sub unless
    /// [`sharded_subscription_mode`](ClientBuilder::sharded_subscription_mode) says
    /// otherwise). See [`guide::deployment`](crate::guide::deployment).
    pub fn open(url: &str) -> Result<Client> {
        Client::builder(url).build()
    }

    /// Starts configuring a client.
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    fn connect(url: &str, config: Config) -> Result<Client> {
        Ok(Client { engine: Arc::new(Engine::start(url, config)?) })
    }

    /// This client's UUID: the first half of the owner field of every lock it takes.
    pub fn id(&self) -> &str {
        self.engine.id()
    }

    /// A reentrant lock named `name` (its Redis key). No I/O; the name is checked when the
    /// handle is used.
    #[must_use]
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock(Handle::new(Arc::clone(&self.engine), name.into(), Kind::Reentrant))
    }

    /// A read-write lock named `name`: take `.read()` or `.write()`. No I/O; the name is
    /// checked when a side is used.
    #[must_use]
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(Arc::clone(&self.engine), name.into())
    }

    /// A fenced lock named `name`: a reentrant lock whose every grant carries a fencing
    /// token. No I/O; the name is checked when the handle is used.
    #[must_use]
    pub fn fenced_lock(&self, name: impl Into<String>) -> FencedLock {
        FencedLock(Handle::new(Arc::clone(&self.engine), name.into(), Kind::Fenced))
    }

    /// A fair lock named `name`: reentrant, and waiters are served in arrival order. No
    /// I/O; the name is checked when the handle is used.
    #[must_use]
    pub fn fair_lock(&self, name: impl Into<String>) -> FairLock {
        FairLock(Handle::new(Arc::clone(&self.engine), name.into(), Kind::Fair))
    }

    /// A non-reentrant lock named `name` (Redisson's `RNonReentrantLock`): a thread that
    /// holds it and asks again gets `WouldDeadlock`. No I/O.
    #[must_use]
    pub fn non_reentrant_lock(&self, name: impl Into<String>) -> NonReentrantLock {
        NonReentrantLock(Handle::new(Arc::clone(&self.engine), name.into(), Kind::NonReentrant))
    }

    /// A non-reentrant fair lock named `name` (Redisson's `RNonReentrantFairLock`). No I/O.
    #[must_use]
    pub fn non_reentrant_fair_lock(&self, name: impl Into<String>) -> NonReentrantFairLock {
        NonReentrantFairLock(Handle::new(Arc::clone(&self.engine), name.into(), Kind::NonReentrantFair))
    }

    /// A spin lock named `name` (Redisson's `RSpinLock`): a reentrant lock whose waiters
    /// poll, for deployments without pub/sub. No I/O.
    #[must_use]
    pub fn spin_lock(&self, name: impl Into<String>) -> SpinLock {
        SpinLock(Handle::new(Arc::clone(&self.engine), name.into(), Kind::Spin))
    }

    /// A group lock over `values` of the group `group` (its Redis key), Redisson's
    /// `RedissonFasterMultiLock`: all values taken or none, in one round trip. The values
    /// are hashed here (no I/O); bad ones (none, more than 1,000, one twice) are
    /// `InvalidInput` from every call on the handle, before anything is sent.
    #[must_use]
    pub fn group_lock<V: AsRef<[u8]>>(
        &self,
        group: impl Into<String>,
        values: impl IntoIterator<Item = V>,
    ) -> GroupLock {
        GroupLock::new(Arc::clone(&self.engine), group.into(), GroupValues::new(values))
    }

    /// A leader election among the processes that campaign under `name`: see
    /// [`Election`].
    pub fn election(&self, name: impl Into<String>) -> Election {
        Election::new(Arc::clone(&self.engine), name.into())
    }

    /// A semaphore named `name` (its Redis key), Redisson's `RSemaphore`. No I/O.
    #[must_use]
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore::new(Arc::clone(&self.engine), name.into())
    }

    /// A permit-expirable semaphore named `name`, Redisson's `RPermitExpirableSemaphore`,
    /// whose permits the watchdog renews. No I/O.
    #[must_use]
    pub fn permit_expirable_semaphore(&self, name: impl Into<String>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(Arc::clone(&self.engine), name.into())
    }

    /// A count-down latch named `name`, Redisson's `RCountDownLatch`. No I/O.
    #[must_use]
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch::new(Arc::clone(&self.engine), name.into())
    }

    /// Stops the client: threads waiting for a lock return [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown),
    /// the watchdog stops renewing (locks still held expire after their lease), and guards
    /// dropped later touch nothing. Every later call fails with `Shutdown`. Idempotent.
    pub fn shutdown(&self) {
        self.engine.stop();
    }

    /// Runs `f` on one of the client's pooled connections to the master that serves `key`,
    /// and returns what it returned: for the few commands of one's own that belong beside
    /// the locks (reading a lock's state for a status page, a key the locked section
    /// guards), without a second connection setup that would have to repeat the URL's
    /// handling: whatever the URL's form (`redis://`, `rediss://`, `unix://`,
    /// `redis-sentinel://`, `redis-cluster://`), the connection goes where the client's own
    /// commands go, with the client's login, TLS settings and database.
    ///
    /// `key` picks the server in a cluster (the master of its slot; a `MOVED` or `ASK`
    /// answer to `f`'s first command is followed); with one server it only names what `f`
    /// works on. Every command `f` sends is bounded by the command timeout.
    ///
    /// Retries follow the client's rules for commands that must not run twice: `f` is
    /// called again only when what it sent cannot have been carried out (no connection
    /// could be made, a replica refused it, the cluster redirected it), within the client's
    /// [`retry_budget`](ClientBuilder::retry_budget). A connection that breaks under `f` —
    /// a pooled one the server closed while it sat idle included, which cannot be told
    /// from one that broke after Redis carried the command out — fails the call with a
    /// connection error and is replaced: calling again is the caller's choice, who knows
    /// whether `f` may run twice. A reply that does not come in time is an
    /// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout), not a retry.
    ///
    /// Leave the connection as it was found: no `SELECT`, `SUBSCRIBE`, `CLIENT REPLY` or
    /// `MULTI` left open; it goes back to the pool and serves the locks next. A connection
    /// whose command failed with an I/O error is not reused.
    ///
    /// The connection is the `redis` crate's, which redlease re-exports as
    /// [`redlease::redis`](crate::redis): commands are built with it, and a program needs
    /// no `redis` dependency of its own (one that has one, `redis = "1.8"`, gets the same
    /// crate).
    ///
    /// ```no_run
    /// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
    /// // Who holds "nightly-report" now: the fields of its lock hash.
    /// let holders: Vec<String> = client.with_connection("nightly-report", |conn| {
    ///     redlease::redis::cmd("HKEYS").arg("nightly-report").query(conn)
    /// })?;
    /// # Ok::<(), redlease::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As for the client's own commands: [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown)
    /// after [`shutdown`](Client::shutdown); a connection failure or timeout
    /// ([`Error::is_connection_error`](crate::Error::is_connection_error),
    /// [`Error::is_timeout`](crate::Error::is_timeout)); `PermissionDenied` for an ACL
    /// refusal; `Redis` for any other error reply, quoted in the message, with the `redis`
    /// crate's error as [`Error::redis_error`](crate::Error::redis_error).
    pub fn with_connection<T>(
        &self,
        key: &str,
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.engine.check_running()?;
        with_retries(&self.engine, None, |_| {
            self.engine.pool_for(key).run_once("running the caller's commands", |conn| f(conn.raw()))
        })
    }

    /// What Redis holds for `name` right now, read in one script call that writes
    /// nothing: its kind as the layout shows it, its holders with their hold counts and
    /// clients, the lease left, a fair lock's queue with positions and deadlines, a fenced
    /// lock's last token, a semaphore's permits available and taken, and how many clients
    /// wait on its channel. A lock nobody holds reads with no holders (a key that is not a
    /// lock: [`LockInfo::is_foreign`]). A name with nothing under its own key is looked up
    /// as an election's name too: an election that has a leader reads as one.
    ///
    /// A holder's [`client`](crate::Holder::client) is what its client announced of
    /// itself (host, pid, program, since when, version): redlease clients announce
    /// themselves while they hold or wait for something; a Redisson client's is `None`.
    ///
    /// ```no_run
    /// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
    /// let info = client.inspect("nightly-report")?;
    /// for holder in &info.holders {
    ///     let who = holder.client.as_ref().map_or("an unknown client".to_owned(), |c| format!("pid {} on {}", c.pid, c.host));
    ///     assert!(!who.is_empty());
    /// }
    /// # Ok::<(), redlease::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a name the locks refuse; otherwise as
    /// [`with_connection`](Client::with_connection).
    pub fn inspect(&self, name: &str) -> Result<LockInfo> {
        engine::inspect(&self.engine, name)
    }

    /// The locks, semaphores, group locks and elections whose names match `pattern`
    /// (Redis's glob syntax: `*`, `?`, `[a-z]`, `\` to escape), inspected as
    /// [`inspect`](Client::inspect) does, by name (an election by the name it was given). Every master is scanned with `SCAN` (never `KEYS`): the cost grows
    /// with the keys in the database, not only the matches, so list with a pattern where
    /// the database holds much else. The keys the library keeps beside a lock (queues,
    /// tokens, announcements) are left out, and so is whatever is not a lock.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for an empty pattern or one longer than
    /// [`MAX_NAME_LEN`](crate::MAX_NAME_LEN); otherwise as
    /// [`with_connection`](Client::with_connection).
    pub fn locks(&self, pattern: &str) -> Result<Vec<LockInfo>> {
        engine::locks(&self.engine, pattern)
    }

    /// What this client announces of itself while it holds or waits for something (in
    /// the key `redlease_client:{<id>}`, expiring a watchdog timeout after its last
    /// refresh): what [`inspect`](Client::inspect) shows beside its owner fields.
    pub fn identity(&self) -> &ClientIdentity {
        self.engine.identity()
    }

    /// Whether [`shutdown`](Client::shutdown) was called.
    pub fn is_shutdown(&self) -> bool {
        self.engine.is_shutdown()
    }

    /// Counts of what the client tracks right now.
    pub fn stats(&self) -> ClientStats {
        let stats = self.engine.stats();
        ClientStats {
            leases: stats.leases,
            renewals_scheduled: stats.renewals_scheduled,
            renewal_passes: stats.renewal.passes,
            renewal_round_trips: stats.renewal.round_trips,
            leases_renewed: stats.renewal.renewed,
            renewal_time: stats.renewal.busy,
            channels: stats.subscriber.channels,
            waiters: stats.subscriber.waiters,
            subscriber_connected: stats.subscriber.connected,
            acquired_at_once: stats.activity.at_once,
            acquired_after_waiting: stats.activity.after_waiting,
            busy: stats.activity.busy,
            timed_out: stats.activity.timed_out,
            interrupted: stats.activity.interrupted,
            failed: stats.activity.failed,
            wait_time: stats.activity.wait_time,
            hold_time: stats.activity.hold_time,
            leases_lost: stats.activity.leases_lost,
            renewals_failed: stats.activity.renewals_failed,
            releases_failed: stats.activity.releases_failed,
            wake_ups: stats.activity.wake_ups,
            wasted_wake_ups: stats.activity.wasted_wake_ups,
            retries: stats.activity.retries,
            waits_through_outage: stats.activity.waits_through_outage,
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.engine.id())
            .field("url", &self.engine.topology().url())
            .finish_non_exhaustive()
    }
}

/// `url` with its password replaced by `***`, as the library's own messages and `Debug`
/// output show a URL: for a message about a URL given to [`Client::builder`] (say, one
/// that could not be used) that must not show the password.
///
/// ```
/// assert_eq!(redlease::redact_url("redis://app:s3cret@cache:6379/0"), "redis://app:***@cache:6379/0");
/// assert_eq!(redlease::redact_url("redis://cache:6379/"), "redis://cache:6379/");
/// ```
#[must_use]
pub fn redact_url(url: &str) -> String {
    transport::redact_url(url)
}

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
        self.config.events = Events::new(events);
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
