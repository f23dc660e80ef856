//! The client: connections, the two background threads, and the registry of leases this
//! process holds.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::config::{ClientBuilder, Config};
use crate::error::{Error, ErrorKind, Result};
use crate::fair_lock::FairLock;
use crate::fenced_lock::FencedLock;
use crate::guard;
use crate::handle::{Handle, Kind, Release};
use crate::keys;
use crate::lease::{Lease, Role, Term};
use crate::lock::Lock;
use crate::net::Target;
use crate::owner;
use crate::pool::Pool;
use crate::read_write_lock::ReadWriteLock;
use crate::renewal::Renewer;
use crate::scripts;
use crate::subscriber::{Subscriber, Timing};

/// A connection to one Redis server, and the factory of its locks.
///
/// Cheap to clone (an `Arc` inside), `Send` and `Sync`. It owns a pool of command
/// connections, one pub/sub connection, a renewal thread (the watchdog) and a subscriber
/// thread. They stop when [`shutdown`](Client::shutdown) is called or when the last clone,
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
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// This client's UUID, the first half of every owner field it writes.
    pub(crate) id: String,
    url: String,
    pub(crate) config: Config,
    pub(crate) watchdog_millis: u64,
    pub(crate) fair_wait_millis: u64,
    pub(crate) pool: Arc<Pool>,
    /// The leases threads of this client hold.
    leases: Mutex<HashMap<LeaseKey, Arc<Lease>>>,
    pub(crate) renewer: Renewer,
    pub(crate) subscriber: Subscriber,
    shutdown: AtomicBool,
    request_ids: AtomicU64,
}

/// The key on which `build()` checks the user's command permissions (nothing is written).
const PERMISSION_PROBE_KEY: &str = "redlease:permission-check";

/// How long the release that undoes an uncertain acquire waits for its reply.
const UNDO_REPLY_WAIT: Duration = Duration::from_millis(50);

/// A lease's place in the registry: (lock name, thread number, role).
type LeaseKey = (Arc<str>, u64, Role);

/// A snapshot of a client's internal bookkeeping, for monitoring and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ClientStats {
    /// Locks held by threads of this client (reentrant holds of one thread count once).
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
}

impl Client {
    /// Connects with the default settings (see [`ClientBuilder`]).
    ///
    /// Accepts `redis://[[user]:password@]host[:port][/db]` and `unix:///path/to/socket`.
    pub fn open(url: &str) -> Result<Client> {
        Client::builder(url).build()
    }

    /// Starts configuring a client.
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    pub(crate) fn connect(url: &str, config: Config) -> Result<Client> {
        let info = crate::url::connection_info(url)?;
        // No CLIENT SETINFO handshake: redis-rs waits up to the whole connect timeout for each
        // handshake reply, so with it a connect could take several connect timeouts.
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        let info = info.set_redis_settings(settings);
        let target = Target::from_info(&info)?;
        let redis_client =
            redis::Client::open(info).map_err(|e| Error::invalid(format!("invalid redis URL: {}", e.category())))?;
        let pool = Arc::new(Pool::new(redis_client, config.pool_size, config.connect_timeout, config.command_timeout));
        // The first exchange is part of connecting: bounded by the connect timeout.
        let refused = pool
            .run_within("connecting", Some(config.connect_timeout), |conn| {
                redis::cmd("PING").query::<String>(conn)?;
                for script in scripts::all() {
                    script.load(conn)?;
                }
                scripts::CHECK_PERMISSIONS.arg(PERMISSION_PROBE_KEY).invoke::<Vec<String>>(conn)
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
        if !refused.is_empty() {
            return Err(Error::new(
                ErrorKind::PermissionDenied,
                format!(
                    "the user of {} may not run {}, which redlease's scripts need",
                    crate::url::redact(url),
                    refused.join(", ")
                ),
            ));
        }
        let watchdog_millis = keys::lease_millis("watchdog timeout", config.watchdog_timeout)?;
        let fair_wait_millis = keys::lease_millis("fair wait timeout", config.fair_wait_timeout)?;
        let renewer = Renewer::start(Arc::clone(&pool), config.clone(), watchdog_millis)?;
        let timing = Timing {
            connect: config.connect_timeout,
            command: config.command_timeout,
            ping_interval: config.ping_interval,
        };
        let subscriber = Subscriber::start(target, timing, config.events.clone())?;
        let inner = Inner {
            id: uuid::Uuid::new_v4().to_string(),
            url: crate::url::redact(url),
            config,
            watchdog_millis,
            fair_wait_millis,
            pool,
            leases: Mutex::new(HashMap::new()),
            renewer,
            subscriber,
            shutdown: AtomicBool::new(false),
            request_ids: AtomicU64::new(0),
        };
        Ok(Client { inner: Arc::new(inner) })
    }

    /// This client's UUID: the first half of the owner field of every lock it takes.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// A reentrant lock named `name` (its Redis key). No I/O; the name is checked when the
    /// handle is used.
    #[must_use]
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock(Handle::new(Arc::clone(&self.inner), name.into(), Kind::Reentrant))
    }

    /// A read-write lock named `name`: take `.read()` or `.write()`. No I/O; the name is
    /// checked when a side is used.
    #[must_use]
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(Arc::clone(&self.inner), name.into())
    }

    /// A fenced lock named `name`: a reentrant lock whose every grant carries a fencing
    /// token. No I/O; the name is checked when the handle is used.
    #[must_use]
    pub fn fenced_lock(&self, name: impl Into<String>) -> FencedLock {
        FencedLock(Handle::new(Arc::clone(&self.inner), name.into(), Kind::Fenced))
    }

    /// A fair lock named `name`: reentrant, and waiters are served in arrival order. No
    /// I/O; the name is checked when the handle is used.
    #[must_use]
    pub fn fair_lock(&self, name: impl Into<String>) -> FairLock {
        FairLock(Handle::new(Arc::clone(&self.inner), name.into(), Kind::Fair))
    }

    /// Stops the client: threads waiting for a lock return [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown),
    /// the watchdog stops renewing (locks still held expire after their lease), and guards
    /// dropped later touch nothing. Every later call fails with `Shutdown`. Idempotent.
    pub fn shutdown(&self) {
        self.inner.stop();
    }

    /// Whether [`shutdown`](Client::shutdown) was called.
    pub fn is_shutdown(&self) -> bool {
        self.inner.shutdown.load(Ordering::Acquire)
    }

    /// Counts of what the client tracks right now.
    pub fn stats(&self) -> ClientStats {
        let subscriber = self.inner.subscriber.stats();
        let (renewals_scheduled, renewal) = self.inner.renewer.stats();
        ClientStats {
            leases: self.inner.leases.lock().len(),
            renewals_scheduled,
            renewal_passes: renewal.passes,
            renewal_round_trips: renewal.round_trips,
            leases_renewed: renewal.renewed,
            renewal_time: renewal.busy,
            channels: subscriber.channels,
            waiters: subscriber.waiters,
            subscriber_connected: subscriber.connected,
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("id", &self.inner.id).field("url", &self.inner.url).finish_non_exhaustive()
    }
}

impl Inner {
    /// A request id unique to this client (the suffix of a release's latch key): the
    /// client's UUID and a counter, so no randomness is drawn per release.
    pub(crate) fn next_request_id(&self) -> String {
        format!("{}:{}", self.id, self.request_ids.fetch_add(1, Ordering::Relaxed))
    }

    pub(crate) fn check_running(&self) -> Result<()> {
        if self.shutdown.load(Ordering::Acquire) { Err(Error::shutdown()) } else { Ok(()) }
    }

    fn stop(&self) {
        if self.shutdown.swap(true, Ordering::AcqRel) {
            return;
        }
        self.subscriber.shutdown();
        self.renewer.shutdown();
        self.pool.close_idle();
    }

    /// Records a granted hold, acquired by a request sent at `sent`, and schedules its
    /// renewal when the watchdog keeps it. Returns the lease and the hold's term.
    pub(crate) fn add_hold(
        &self,
        kind: Kind,
        name: &Arc<str>,
        owner: String,
        sent: Instant,
        lease_millis: u64,
        watchdog: bool,
    ) -> (Arc<Lease>, Term) {
        let key = (Arc::clone(name), owner::thread_number(), kind.role());
        let lease = {
            let mut leases = self.leases.lock();
            match leases.get(&key) {
                Some(lease) if lease.lock().is_live() => Arc::clone(lease),
                _ => {
                    let field = kind.field(&owner);
                    let hold_keys = kind.hold_keys(name, &owner);
                    let lease = Arc::new(Lease::new(Arc::clone(name), owner, kind.role(), field, hold_keys));
                    leases.insert(key, Arc::clone(&lease));
                    lease
                }
            }
        };
        let term =
            if watchdog { Term::Watchdog } else { Term::Until(sent.checked_add(Duration::from_millis(lease_millis))) };
        let mut inner = lease.lock();
        inner.add(term, sent, self.config.watchdog_timeout);
        if watchdog && inner.renewal.is_none() && !inner.renewing {
            self.renewer.schedule(&lease, &mut inner, sent + self.config.watchdog_timeout / 3);
        }
        drop(inner);
        (lease, term)
    }

    /// The current thread learned from Redis that it holds nothing of `role` on `name`
    /// (a query answered so): a live lease it has there is lost, and reported so.
    pub(crate) fn learned_not_held(&self, name: &Arc<str>, role: Role) {
        let key = (Arc::clone(name), owner::thread_number(), role);
        let lease = self.leases.lock().get(&key).cloned();
        if let Some(lease) = lease {
            lease.lose(lease.lock(), &self.config.events);
        }
    }

    /// Whether the current thread holds a live lease of `role` on the lock `name`.
    pub(crate) fn holds(&self, name: &Arc<str>, role: Role) -> bool {
        let key = (Arc::clone(name), owner::thread_number(), role);
        self.leases.lock().get(&key).is_some_and(|l| l.lock().is_live())
    }

    /// Removes a lease whose last guard is gone from the registry (unless a newer lease of
    /// the same thread has replaced it).
    pub(crate) fn forget_lease(&self, lease: &Arc<Lease>) {
        let key = (Arc::clone(&lease.name), owner::thread_number(), lease.role);
        let mut leases = self.leases.lock();
        if leases.get(&key).is_some_and(|l| Arc::ptr_eq(l, lease)) {
            leases.remove(&key);
        }
    }

    /// After an acquire timed out, or its connection dropped, its outcome is unknown: the
    /// lock may have been granted. When this thread held no live lease on it, release
    /// best-effort so that nothing is left behind until the lease runs out. (When it already
    /// held it, a decrement could undo a hold it really has; the extra hold, if any, then
    /// lapses with the lease.)
    ///
    /// `conn` is the connection the acquire went out on, when it is still open: the release
    /// then goes right behind the acquire, so Redis runs it after the acquire however late
    /// that arrives, and needs no new connection (whose handshake could be lost too). Its
    /// reply is not waited for long: the order, not the answer, is what matters.
    pub(crate) fn undo_uncertain_acquire(
        &self,
        conn: Option<&mut redis::Connection>,
        kind: Kind,
        name: &Arc<str>,
        owner: &str,
    ) {
        if !self.holds(name, kind.role()) {
            // On the acquire's own connection only the order matters, not the reply; a new
            // connection gets the whole command timeout.
            let wait = if conn.is_some() { UNDO_REPLY_WAIT } else { self.config.command_timeout };
            self.send_undo(conn, wait, kind, name, owner);
        }
    }

    /// The release of [`undo_uncertain_acquire`](Inner::undo_uncertain_acquire), without
    /// its check (for callers that made it on the owner's thread). It goes out on `conn`
    /// when given, else on a pooled connection; either way it takes at most `wait` (and the
    /// command timeout) for its reply.
    pub(crate) fn send_undo(
        &self,
        conn: Option<&mut redis::Connection>,
        wait: Duration,
        kind: Kind,
        name: &str,
        owner: &str,
    ) {
        let request_id = self.next_request_id();
        let release = Release {
            name,
            owner,
            keep_millis: self.watchdog_millis,
            request_id: &request_id,
            latch_millis: guard::latch_lifetime(self.config.command_timeout),
            wait_millis: self.fair_wait_millis,
        };
        match conn {
            Some(conn) => {
                if conn.set_read_timeout(Some(wait.min(self.config.command_timeout))).is_ok() {
                    let _ = kind.release(conn, &release);
                }
            }
            None => {
                let _ = self.pool.run_within("undoing an acquire", Some(wait), |conn| kind.release(conn, &release));
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop();
    }
}
