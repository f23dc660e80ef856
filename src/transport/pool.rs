//! A small blocking pool of command connections (`Mutex` + `Condvar`, as r2d2 does it).
//!
//! Every connection carries the command timeout as its read and write timeout, so no call
//! waits on Redis longer than that. A connection that saw an I/O error or a timeout is
//! dropped instead of going back: after a timeout its reply may still arrive and would be
//! read by the next command.
//!
//! Behind a sentinel the server a new connection goes to is the master the sentinels name;
//! a master that turned replica (a failover) answers writes with `READONLY`, and the
//! command is run once more on a connection to the new master.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::base::clock;
use crate::base::error::{Error, ErrorKind, Result};
use crate::observe::trace;
use crate::transport::conn::{Conn, Origin, PubSub, RunId};
use crate::transport::connector::Connector;

/// Where a cluster sends a command its node answered with `MOVED` or `ASK`.
pub(crate) trait Redirect: Send + Sync {
    /// The node at `host:port` serves `slot` now: its pool.
    fn moved(&self, slot: u16, host: &str, port: u16) -> Option<Arc<Pool>>;
    /// The pool of the node at `host:port` (for one `ASK`).
    fn node(&self, host: &str, port: u16) -> Option<Arc<Pool>>;
    /// A node could not be reached: the map may be out of date.
    fn unreachable(&self);
}

/// Most redirections one command follows (a slot moving while it is sent, then again).
const MAX_REDIRECTS: u8 = 5;

/// How long a command answered `TRYAGAIN` waits before it is sent again.
const TRY_AGAIN_PAUSE: Duration = Duration::from_millis(20);

/// What a run is, for its redirections.
#[derive(Clone, Copy)]
struct Call<'a> {
    what: &'a str,
    limit: Option<Duration>,
    resend: Resend,
    /// A replica refused it (`READONLY`) already: it was sent once more on a new
    /// connection, and is not again on that account (the retry layer, with its pauses and
    /// its budget, takes over: a server that stays a replica must not be asked forever).
    refused: bool,
}

/// How a run came to this pool, and how many more redirections it may follow.
#[derive(Clone, Copy)]
enum Redirected {
    No(u8),
    /// After `ASK`: the command goes behind `ASKING`.
    Asking(u8),
}

impl Redirected {
    fn left(self) -> u8 {
        match self {
            Redirected::No(left) | Redirected::Asking(left) => left,
        }
    }
}

/// Whether a cluster redirected the command (or asked for it again later) before running it.
fn is_redirection(err: &redis::RedisError) -> bool {
    matches!(
        err.kind(),
        redis::ErrorKind::Server(
            redis::ServerErrorKind::Moved | redis::ServerErrorKind::Ask | redis::ServerErrorKind::TryAgain
        )
    )
}

/// Whether a command that failed on a connection found dead may be sent again.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Resend {
    /// When the connection had been idle in the pool: it was almost surely dead before.
    IfStale,
    /// Never: the command must not be carried out twice.
    Never,
}

pub(crate) struct Pool {
    /// Tells pools apart for as long as the process runs.
    id: u64,
    connector: Connector,
    /// In a cluster: where `MOVED` and `ASK` send a command.
    redirect: Option<Weak<dyn Redirect>>,
    /// How the scripts sent on its connections publish.
    pubsub: PubSub,
    size: usize,
    connect_timeout: Duration,
    command_timeout: Duration,
    state: Mutex<State>,
    returned: Condvar,
    /// The generation, for connections to tell whether theirs is still the current one
    /// (written under `state`'s lock, read without it).
    current: Arc<AtomicU64>,
}

struct State {
    /// Idle connections, each with the generation it was opened in.
    idle: Vec<(u64, Conn)>,
    /// Connections in existence: idle, lent out, or being opened.
    open: usize,
    /// Bumped when every connection must go (the master moved): older ones are not reused.
    generation: u64,
    /// Behind sentinels: where this generation's connections go. A new connection that
    /// goes elsewhere starts a new generation: one generation, one server.
    master: Option<(String, u16)>,
}

impl Pool {
    pub(crate) fn new(
        connector: Connector,
        pubsub: PubSub,
        size: usize,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Pool {
        static IDS: AtomicU64 = AtomicU64::new(0);
        Pool {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            connector,
            redirect: None,
            pubsub,
            size,
            connect_timeout,
            command_timeout,
            state: Mutex::new(State { idle: Vec::new(), open: 0, generation: 0, master: None }),
            returned: Condvar::new(),
            current: Arc::new(AtomicU64::new(0)),
        }
    }

    /// This pool's id, unique in the process.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Makes this a cluster node's pool: `MOVED` and `ASK` go where `redirect` says.
    pub(crate) fn redirect_with(&mut self, redirect: Weak<dyn Redirect>) {
        self.redirect = Some(redirect);
    }

    /// Runs `op` on a pooled connection. When a connection that had been idle turns out to
    /// be dead (the server restarted or killed it while it sat in the pool), every idle
    /// connection is discarded and `op` runs once more on a new one: such a connection
    /// failed before Redis read the command. `what` names the operation in errors.
    pub(crate) fn run<T>(&self, what: &str, op: impl FnMut(&mut Conn) -> redis::RedisResult<T>) -> Result<T> {
        self.run_within(what, None, op)
    }

    /// [`run`](Pool::run) with a tighter bound than the configured timeouts: connecting,
    /// waiting for a pooled connection and the command's reply each take at most `limit`.
    pub(crate) fn run_within<T>(
        &self,
        what: &str,
        limit: Option<Duration>,
        op: impl FnMut(&mut Conn) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.run_handing_off(what, limit, op, None)
    }

    /// [`run_within`](Pool::run_within), and when the command's reply does not come in
    /// time, the connection goes to `on_timeout` instead of being closed at once: whatever
    /// is sent on it there (the undo of an acquire that may yet be granted) runs after the
    /// late command. `on_timeout` runs on the caller's thread, at most once, and must not
    /// block: it hands the connection to a thread of its own. Borrowed, so that what it
    /// needs is copied only when a reply is late, not on every call.
    pub(crate) fn run_handing_off<T>(
        &self,
        what: &str,
        limit: Option<Duration>,
        op: impl FnMut(&mut Conn) -> redis::RedisResult<T>,
        on_timeout: Option<&mut dyn FnMut(Conn)>,
    ) -> Result<T> {
        self.run_inner(what, limit, op, on_timeout, Resend::IfStale)
    }

    /// Runs `op`, which must not be carried out twice (it is not idempotent), on a pooled
    /// connection. Only a replica's refusal, which did nothing, is sent again at once; any
    /// other error is marked [`once`](Error::once), so that no caller sends it again unless
    /// it never left.
    pub(crate) fn run_once<T>(&self, what: &str, op: impl FnMut(&mut Conn) -> redis::RedisResult<T>) -> Result<T> {
        self.run_inner(what, None, op, None, Resend::Never).map_err(Error::once)
    }

    fn run_inner<T>(
        &self,
        what: &str,
        limit: Option<Duration>,
        mut op: impl FnMut(&mut Conn) -> redis::RedisResult<T>,
        on_timeout: Option<&mut dyn FnMut(Conn)>,
        resend: Resend,
    ) -> Result<T> {
        let call = Call { what, limit, resend, refused: false };
        let result = self.run_dyn(call, &mut op, on_timeout, Redirected::No(MAX_REDIRECTS));
        if let (Err(err), Some(redirect)) = (&result, self.redirect.as_ref().and_then(Weak::upgrade))
            && err.is_connection_error()
        {
            // A node that cannot be reached may have failed over: read the map again.
            redirect.unreachable();
        }
        result
    }

    /// One run of `op` on a connection of this pool, following a cluster's redirections.
    fn run_dyn<T>(
        &self,
        call: Call<'_>,
        op: &mut dyn FnMut(&mut Conn) -> redis::RedisResult<T>,
        mut on_timeout: Option<&mut dyn FnMut(Conn)>,
        redirected: Redirected,
    ) -> Result<T> {
        let Call { what, limit, resend, refused } = call;
        let timeout = limit.map_or(self.command_timeout, |l| l.min(self.command_timeout));
        let (generation, mut conn, reused) = self.checkout(limit)?;
        conn.handed_out();
        let result = self.limit(&conn, timeout).and_then(|()| {
            if let Redirected::Asking(_) = redirected {
                redis::cmd("ASKING").query::<()>(&mut *conn)?;
            }
            op(&mut conn)
        });
        match result {
            Ok(value) => self.finish(generation, conn, Ok(value), what, timeout),
            Err(err) if self.redirect.is_some() && is_redirection(&err) => {
                // MOVED, ASK and TRYAGAIN come before the command runs: it did nothing, and
                // the connection is in step.
                self.checkin(generation, conn);
                self.redirect(call, op, on_timeout, redirected, err, timeout)
            }
            Err(err) if err.is_timeout() && on_timeout.is_some() => {
                // Out of the pool's count now: the hand-off closes it when it is done.
                self.forget_one();
                if let Some(hand_off) = on_timeout.take() {
                    hand_off(conn);
                }
                Err(Error::from_redis(err, what, timeout))
            }
            Err(err)
                if (resend == Resend::IfStale
                    && reused
                    && !conn.heard()
                    && err.is_connection_dropped()
                    && !err.is_timeout())
                    || (is_replica_refusal(&err) && !refused) =>
            {
                // A stale connection failed before Redis read the command (almost surely:
                // the server could also have died right after running it, which is why a
                // command that must not run twice is not sent again; and never once a
                // reply was read on it for this call, which proves it was not stale and
                // the failed request may have run), and a replica
                // refuses a script at its first write, before any effect: either way the
                // command did nothing, and it runs once more on a new connection.
                if is_replica_refusal(&err) {
                    trace::event!(INFO, "failover followed", pool = self.id, by = "READONLY"; error = err);
                    self.connector.master_moved();
                }
                self.discard(conn);
                self.discard_idle();
                // Once more, on a new connection (no idle one is left), redirections and all.
                let once_more = Call { resend: Resend::Never, refused: refused || is_replica_refusal(&err), ..call };
                self.run_dyn(once_more, op, on_timeout, redirected)
            }
            Err(err) => {
                if reused && err.is_connection_dropped() {
                    // The idle ones are likely dead too: the next command gets a new one.
                    self.discard_idle();
                }
                self.finish(generation, conn, Err(err), what, timeout)
            }
        }
    }

    /// Follows a cluster's redirection of `call` (`MOVED`, `ASK`, `TRYAGAIN`), its
    /// connection back in the pool.
    fn redirect<T>(
        &self,
        call: Call<'_>,
        op: &mut dyn FnMut(&mut Conn) -> redis::RedisResult<T>,
        on_timeout: Option<&mut dyn FnMut(Conn)>,
        redirected: Redirected,
        err: redis::RedisError,
        timeout: Duration,
    ) -> Result<T> {
        let what = call.what;
        if redirected.left() == 0 {
            // Still moving (a failover or a migration under way): the retry layer
            // tries again, within its budget, as for a node that cannot be reached.
            return Err(Error::from_redis(err, what, timeout).connection().unsent());
        }
        let left = redirected.left() - 1;
        if left + 1 < MAX_REDIRECTS {
            // Redirected again: give the cluster a moment to agree with itself.
            std::thread::sleep(TRY_AGAIN_PAUSE);
        }
        let target = self.redirect.as_ref().and_then(Weak::upgrade).and_then(|redirect| {
            let (addr, slot) = err.redirect_node()?;
            let (host, port) = addr.rsplit_once(':')?;
            let port = port.parse().ok()?;
            match err.kind() {
                redis::ErrorKind::Server(redis::ServerErrorKind::Ask) => {
                    redirect.node(host, port).map(|pool| (pool, Redirected::Asking(left)))
                }
                _ => redirect.moved(slot, host, port).map(|pool| (pool, Redirected::No(left))),
            }
        });
        match target {
            Some((pool, redirected)) => pool.run_dyn(call, op, on_timeout, redirected),
            // TRYAGAIN (a multi-key command in a slot being migrated): a moment later.
            None if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::TryAgain) => {
                trace::event!(
                    DEBUG,
                    "transient error retried",
                    pause_ms = trace::millis(TRY_AGAIN_PAUSE);
                    error = err
                );
                std::thread::sleep(TRY_AGAIN_PAUSE);
                self.run_dyn(call, op, on_timeout, Redirected::No(left))
            }
            None => Err(Error::from_redis(err, what, timeout).connection().unsent()),
        }
    }

    /// Sets the reply timeout of `conn` when it differs from the configured one.
    fn limit(&self, conn: &Conn, timeout: Duration) -> redis::RedisResult<()> {
        if timeout == self.command_timeout {
            return Ok(());
        }
        conn.set_read_timeout(Some(timeout))?;
        conn.set_write_timeout(Some(timeout))
    }

    fn finish<T>(
        &self,
        generation: u64,
        conn: Conn,
        result: redis::RedisResult<T>,
        what: &str,
        timeout: Duration,
    ) -> Result<T> {
        let faulty = result.as_ref().err().is_some_and(is_connection_fault);
        let restored = timeout == self.command_timeout || {
            let configured = Some(self.command_timeout);
            conn.set_read_timeout(configured).and_then(|()| conn.set_write_timeout(configured)).is_ok()
        };
        if faulty || !restored {
            self.discard(conn);
        } else {
            self.checkin(generation, conn);
        }
        result.map_err(|err| Error::from_redis(err, what, timeout))
    }

    /// An idle connection (reused = true), or a new one while fewer than `size` are open,
    /// or the first one returned within the connect timeout (or `limit`, if shorter).
    fn checkout(&self, limit: Option<Duration>) -> Result<(u64, Conn, bool)> {
        let patience = limit.map_or(self.connect_timeout, |l| l.min(self.connect_timeout));
        // Read off the clock only when a wait begins: an idle connection is nearly always
        // there. A patience too long for `Instant` waits without a deadline.
        let mut deadline = None;
        let mut state = self.state.lock();
        loop {
            if let Some((generation, conn)) = state.idle.pop() {
                return Ok((generation, conn, true));
            }
            if state.open < self.size {
                state.open += 1;
                drop(state);
                return self
                    .connect_within(patience)
                    .map(|conn| (conn.generation(), conn, false))
                    .inspect_err(|_| self.forget_one());
            }
            let deadline = *deadline.get_or_insert_with(|| clock::deadline_in(patience));
            match deadline {
                Some(deadline) if Instant::now() >= deadline => {
                    return Err(Error::new(
                        ErrorKind::Timeout,
                        format!("no pooled connection became free within {patience:?}; all {} are busy", self.size),
                    ));
                }
                Some(deadline) => {
                    self.returned.wait_until(&mut state, deadline);
                }
                None => self.returned.wait(&mut state),
            }
        }
    }

    /// Opens a connection, connect and handshake bounded by `patience`.
    fn connect_within(&self, patience: Duration) -> Result<Conn> {
        let started = Instant::now();
        let timed_out = || {
            let which = if patience == self.connect_timeout { "the connect timeout" } else { "the per-call limit" };
            Error::new(ErrorKind::Timeout, format!("no connection within {which} ({patience:?})")).connection().unsent()
        };
        let (mut conn, master) = self.connector.connect(patience).map_err(|err| {
            if err.is_timeout() {
                timed_out()
            } else {
                let what = match crate::base::error::is_authentication_failure(&err) {
                    true => format!("logging in to {} as user {:?}", self.connector.describe(), self.connector.user()),
                    false => format!("connecting to {}", self.connector.describe()),
                };
                Error::from_redis(err, &what, self.command_timeout).connection().unsent()
            }
        })?;
        let configure = |conn: &redis::Connection, timeout| {
            conn.set_read_timeout(Some(timeout))
                .and_then(|()| conn.set_write_timeout(Some(timeout)))
                .map_err(|err| Error::from_redis(err, "configuring a connection", self.command_timeout).connection())
        };
        // The handshake's last step, within what is left of the patience: which run of the
        // server this is (a hold Redis showed on another run may be gone).
        let left = patience.saturating_sub(started.elapsed()).min(self.command_timeout).max(Duration::from_millis(1));
        configure(&conn, left)?;
        let run = RunId::read(&mut conn).map_err(|err| {
            // Named by the bound that fired: the patience when it is the shorter, else the
            // command timeout (the reply to a command, as any other).
            if err.is_timeout() && patience < self.command_timeout {
                timed_out()
            } else if err.is_timeout() {
                let limit = self.command_timeout;
                Error::new(
                    ErrorKind::Timeout,
                    format!("no reply within the command timeout ({limit:?}) while connecting"),
                )
                .connection()
                .unsent()
            } else {
                Error::from_redis(err, "connecting", self.command_timeout).connection().unsent()
            }
        })?;
        configure(&conn, self.command_timeout)?;
        let generation = self.generation_of(master);
        let origin = Origin { pool: self.id, generation, current: Arc::clone(&self.current) };
        Ok(Conn::new(conn, self.pubsub, origin, run))
    }

    /// The generation of a new connection to `master` (behind sentinels; `None` for one
    /// server): the current one, or a new one when the master is not where this
    /// generation's connections go (the sentinels named another since).
    fn generation_of(&self, master: Option<(String, u16)>) -> u64 {
        let mut state = self.state.lock();
        match (&state.master, master) {
            (Some(known), Some(master)) if *known != master => {
                // Kept for the event (a failover is rare: two small copies).
                let (from, to) = (known.clone(), master.clone());
                state.master = Some(master);
                let stale = self.next_generation(&mut state);
                let generation = state.generation;
                drop(state);
                drop(stale);
                self.returned.notify_all();
                let by = "the sentinels naming another master";
                trace::event!(INFO, "failover followed", pool = self.id, by = by; from = Addr(&from), to = Addr(&to));
                generation
            }
            (None, master @ Some(_)) => {
                state.master = master;
                state.generation
            }
            _ => state.generation,
        }
    }

    /// Starts a new generation: older connections are not reused. Returns the idle ones, to
    /// be closed once the lock is released.
    fn next_generation(&self, state: &mut State) -> Vec<(u64, Conn)> {
        state.generation += 1;
        self.current.store(state.generation, Ordering::Release);
        let stale = std::mem::take(&mut state.idle);
        state.open = state.open.saturating_sub(stale.len());
        stale
    }

    fn checkin(&self, generation: u64, conn: Conn) {
        let mut state = self.state.lock();
        if generation < state.generation {
            // Opened before the master moved: it may go to the old one.
            state.open = state.open.saturating_sub(1);
            drop(state);
            drop(conn);
        } else {
            state.idle.push((generation, conn));
            drop(state);
        }
        self.returned.notify_one();
    }

    fn discard(&self, conn: Conn) {
        drop(conn);
        self.forget_one();
    }

    fn forget_one(&self) {
        let mut state = self.state.lock();
        state.open = state.open.saturating_sub(1);
        drop(state);
        self.returned.notify_one();
    }

    fn discard_idle(&self) {
        let mut state = self.state.lock();
        let stale = std::mem::take(&mut state.idle);
        state.open = state.open.saturating_sub(stale.len());
        drop(state);
        drop(stale);
        self.returned.notify_all();
    }

    /// Which pub/sub this pool's server speaks (a cluster node's: sharded), which picks a
    /// script's build.
    pub(crate) fn pubsub(&self) -> PubSub {
        self.pubsub
    }

    /// A connection lent for a call split in two: written now, its reply read later, once
    /// calls to other pools are written too (the watchdog's pass over several masters).
    /// Its replies are bounded by `limit` (and the command timeout). Nothing is sent again
    /// on a stale connection: a caller that needs that uses [`run_within`](Pool::run_within).
    pub(crate) fn lend(&self, limit: Option<Duration>) -> Result<Lent<'_>> {
        let timeout = limit.map_or(self.command_timeout, |l| l.min(self.command_timeout));
        let (generation, mut conn, _) = self.checkout(limit)?;
        conn.handed_out();
        if let Err(err) = self.limit(&conn, timeout) {
            self.discard(conn);
            return Err(Error::from_redis(err, "lending a connection", timeout).connection());
        }
        Ok(Lent { pool: self, generation, conn: Some(conn), timeout })
    }

    /// A connection of its own, opened within `timeout` and never pooled, to another server
    /// of this pool's deployment at `host:port` (a replica the master lists), with the
    /// pool's login.
    pub(crate) fn connect_to_node(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> redis::RedisResult<redis::Connection> {
        let conn = self.connector.connect_to_node(host, port, timeout)?;
        conn.set_read_timeout(Some(timeout))?;
        conn.set_write_timeout(Some(timeout))?;
        Ok(conn)
    }

    /// Closes every idle connection (at shutdown).
    pub(crate) fn close_idle(&self) {
        self.discard_idle();
    }

    /// The master moved: forgets where it was, closes every idle connection, and keeps the
    /// ones lent out from coming back (and their grants from being confirmed).
    pub(crate) fn master_moved(&self) {
        self.connector.master_moved();
        let mut state = self.state.lock();
        state.master = None;
        let stale = self.next_generation(&mut state);
        drop(state);
        drop(stale);
        self.returned.notify_all();
    }
}

/// A connection lent by [`Pool::lend`]: back to its pool with [`finish`](Lent::finish),
/// which says whether it is still in step; one dropped without is closed.
pub(crate) struct Lent<'p> {
    pool: &'p Pool,
    generation: u64,
    conn: Option<Conn>,
    timeout: Duration,
}

impl Lent<'_> {
    /// The connection: `None` only once finished.
    pub(crate) fn conn(&mut self) -> Option<&mut Conn> {
        self.conn.as_mut()
    }

    /// Gives the connection back, or closes it when `result` failed on it, and turns
    /// `result` into the library's error, naming `what` was done.
    pub(crate) fn finish<T>(mut self, result: redis::RedisResult<T>, what: &str) -> Result<T> {
        match self.conn.take() {
            Some(conn) => self.pool.finish(self.generation, conn, result, what, self.timeout),
            None => result.map_err(|err| Error::from_redis(err, what, self.timeout)),
        }
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            // Not finished: a reply may be left unread on it.
            self.pool.discard(conn);
        }
    }
}

/// A server's address as `host:port`, for an event's field.
struct Addr<'a>(&'a (String, u16));

impl std::fmt::Display for Addr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.0.0, self.0.1)
    }
}

/// Whether the connection can no longer be trusted to be in step with the server, or goes
/// to a server that is no longer the master.
fn is_connection_fault(err: &redis::RedisError) -> bool {
    err.is_io_error()
        || err.is_connection_dropped()
        || err.is_timeout()
        || err.is_unrecoverable_error()
        || is_replica_refusal(err)
}

/// Whether a replica refused a write (`READONLY`): the server was the master once and is
/// not any more.
fn is_replica_refusal(err: &redis::RedisError) -> bool {
    err.code() == Some("READONLY") || err.to_string().contains("READONLY")
}
