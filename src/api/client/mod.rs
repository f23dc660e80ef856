//! The front door: [`Client`], its [`ClientBuilder`] and [`ClientStats`], and
//! [`redact_url`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::api::election::Election;
use crate::api::fair_lock::FairLock;
use crate::api::fenced_lock::FencedLock;
use crate::api::group_lock::GroupLock;
use crate::api::handle::Handle;
use crate::api::latch::CountDownLatch;
use crate::api::lock::Lock;
use crate::api::non_reentrant_lock::{NonReentrantFairLock, NonReentrantLock};
use crate::api::permit_semaphore::PermitExpirableSemaphore;
use crate::api::read_write_lock::ReadWriteLock;
use crate::api::semaphore::Semaphore;
use crate::api::spin_lock::SpinLock;
use crate::base::error::Result;
use crate::engine::{self, Engine, GroupValues, with_retries};
use crate::kind::Kind;
use crate::observe::histogram::DurationHistogram;
use crate::observe::identity::ClientIdentity;
use crate::observe::inspection::LockInfo;
use crate::support::config::Config;
use crate::transport;

mod builder;

pub use builder::ClientBuilder;

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
    /// Each renewal pass's time, from its first batch sent to its last answer (passes
    /// that sent nothing are not counted). A pass is due every third of the watchdog
    /// timeout; one that takes a sizeable part of that (many leases, a slow server) is
    /// time the leases renewed last spend nearer their deadline.
    pub renewal_pass_time: DurationHistogram,
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
    /// Leases reported lost ([`LockEvents::lease_lost`](crate::LockEvents::lease_lost)).
    pub leases_lost: u64,
    /// Renewal failures reported ([`LockEvents::renewal_failed`](crate::LockEvents::renewal_failed)).
    pub renewals_failed: u64,
    /// Releases on drop that failed ([`LockEvents::release_failed`](crate::LockEvents::release_failed)).
    pub releases_failed: u64,
    /// Times a waiting thread was woken by a message.
    pub wake_ups: u64,
    /// Wake-ups whose next attempt found the lock (permits, values) taken again.
    pub wasted_wake_ups: u64,
    /// Tries sent again after a failure that passes by itself (Redis unreachable for a
    /// moment, a failover, a replica that had not confirmed a grant yet).
    pub retries: u64,
    /// Waits that kept trying past the retry budget, through an outage longer than it
    /// ([`LockEvents::waiting_through_outage`](crate::LockEvents::waiting_through_outage)).
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
            renewal_pass_time: stats.renewal.pass_time,
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
