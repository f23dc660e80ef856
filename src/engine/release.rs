//! Releasing: a [`Hold`] (one guard's share of a lease), the local half of a release and
//! the request that follows it, and the undo of an acquire whose outcome is unknown.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::error::{Context, Error, ErrorKind, Result};
use crate::base::keys;
use crate::base::owner;
use crate::engine::core::Engine;
use crate::engine::lease::{Lease, LeaseState, Remaining, Term};
use crate::engine::retry::with_retries;
use crate::kind::{FOUND_FREE, Kind, LockKeys, Release};
use crate::observe::activity::Active;
use crate::observe::trace;
use crate::transport::Conn;

/// One hold of one lock, as recorded by the client that acquired it.
pub(crate) struct Hold {
    engine: Arc<Engine>,
    lease: Arc<Lease>,
    kind: Kind,
    /// Renewed by the watchdog, or until a fixed end.
    term: Term,
    token: Option<u64>,
    /// When it was recorded (just after the grant), for the hold-time histogram.
    since: Instant,
    /// Until when the lock stays taken however soon it is released (a hold kept at least
    /// so long after its grant).
    keep_until: Option<Instant>,
    /// Counts the client active (it announces itself) until the hold is let go.
    _active: Active,
    /// The lock's keys and channels, written once per handle, for the release.
    lock_keys: Option<Arc<LockKeys>>,
}

/// A release whose local bookkeeping is done and whose request is still to be sent; it may
/// be sent from another thread.
pub(crate) struct PendingRelease {
    engine: Arc<Engine>,
    lease: Arc<Lease>,
    kind: Kind,
    /// The lease the owner's remaining holds need; 0 when none remains (the scripts then
    /// release every hold of the owner).
    keep_millis: u64,
    request_id: String,
    /// Until when the hold was valid (`None`: no end): a release is not tried again past it.
    valid_until: Option<Instant>,
    /// The last hold, released before its keep deadline: the lock stays taken this long.
    keep_millis_after: Option<u64>,
    lock_keys: Option<Arc<LockKeys>>,
}

impl Hold {
    /// A hold recorded just after its grant; `active` is the token that counted its
    /// acquisition (taken before the request went out, so the client never counts idle in
    /// between).
    pub(crate) fn new(
        engine: Arc<Engine>,
        lease: Arc<Lease>,
        kind: Kind,
        term: Term,
        token: Option<u64>,
        active: Active,
    ) -> Hold {
        Hold {
            engine,
            lease,
            kind,
            term,
            token,
            since: Instant::now(),
            keep_until: None,
            _active: active,
            lock_keys: None,
        }
    }

    /// This hold, keeping the lock taken until `keep_until` however soon it is released.
    pub(crate) fn keeping_until(self, keep_until: Option<Instant>) -> Hold {
        Hold { keep_until, ..self }
    }

    /// This hold, released with its lock's keys and channels written once for its handle
    /// (they must be its lock's).
    pub(crate) fn with_lock_keys(self, lock_keys: Option<Arc<LockKeys>>) -> Hold {
        Hold { lock_keys, ..self }
    }

    /// The fencing token of a fenced lock's grant.
    pub(crate) fn token(&self) -> Option<u64> {
        self.token
    }

    /// The lock's name.
    pub(crate) fn lock_name(&self) -> &str {
        self.lease.name()
    }

    /// The owner the hold is recorded under, `<client uuid>:<thread number>`.
    pub(crate) fn owner(&self) -> &str {
        self.lease.owner().unwrap_or_default()
    }

    /// The lease's state as this client knows it (no I/O).
    pub(crate) fn state(&self) -> LeaseState {
        self.lease.state()
    }

    /// The lease this hold is one of (shared by the thread's holds of the lock).
    pub(crate) fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }

    /// The engine of the client that holds it.
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The local half of a release: one hold fewer; when no watchdog hold remains, the
    /// renewal is cancelled and any renewal round trip in flight is waited for, so that no
    /// renewal reaches Redis after the release. `Err(NotHeld)` when the lease was already
    /// lost: nothing is to be sent then (a local deadline found passed here is a loss, and
    /// is reported once).
    pub(crate) fn begin_release(self) -> Result<PendingRelease> {
        let engine = &self.engine;
        let name: &str = self.lease.name();
        engine.config().events.held(name, self.kind.label(), self.since.elapsed());
        engine.check_running().on_lock(name)?;
        // A lease that ran out before this release is lost: whatever is under the key now
        // may be someone else's.
        let Remaining { lost, valid_until, last, keep_millis } = engine.release_hold(&self.lease, self.term);
        if last {
            engine.forget_lease(&self.lease);
        }
        if lost {
            return Err(
                Error::new(ErrorKind::NotHeld, "the lease was lost before the release; nothing was sent").on_lock(name)
            );
        }
        let request_id = engine.next_request_id();
        // Released before its keep deadline: the lock stays taken until then, rounded up.
        let keep_millis_after = self
            .keep_until
            .filter(|_| last)
            .and_then(|until| until.checked_duration_since(Instant::now()))
            .filter(|left| !left.is_zero())
            .map(|left| u64::try_from(keys::ceil_millis(left)).unwrap_or(keys::MAX_LEASE_MILLIS));
        Ok(PendingRelease {
            engine: self.engine,
            lease: self.lease,
            kind: self.kind,
            // The last guard's release takes every hold of the owner: Redis may count more
            // than the guards did (a resent acquire that joined its own lost grant).
            keep_millis: if last { 0 } else { keep_millis },
            request_id,
            valid_until,
            keep_millis_after,
            lock_keys: self.lock_keys,
        })
    }
}

impl PendingRelease {
    /// The engine of the client whose hold this releases.
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Sends the release script. `retry_timeout`: after a timeout, send once more with the
    /// same request id (the latch makes that safe). `limit`: a tighter bound than the
    /// command timeout.
    pub(crate) fn send(self, retry_timeout: bool, limit: Option<Duration>) -> Result<()> {
        let engine = &self.engine;
        let name: &str = self.lease.name();
        let owner = self.lease.owner().unwrap_or_default();
        // Whether a send may have gone through without its reply being read (a timeout, a
        // connection that broke after it left, the pool's own resend on a stale
        // connection). A later send then replays its latch (only a release that leaves
        // holds behind writes one), and when it finds nothing of this owner the script
        // tells a free lock (this release done: an unknown outcome is not a loss) from one
        // another owner holds (which may have taken it after this release, or after the
        // lease was lost: taken for a loss, the cautious reading).
        let uncertain = Cell::new(false);
        // The run of the server that answered.
        let answered_on = Cell::new(None);
        let send = || {
            engine.pool_for(name).run_within("releasing", limit, |conn| {
                answered_on.set(conn.run());
                let release = Release {
                    name,
                    lock_keys: self.lock_keys.as_deref(),
                    owner,
                    keep_millis: self.keep_millis,
                    request_id: &self.request_id,
                    latch_millis: latch_lifetime(engine.config().command_timeout),
                    wait_millis: engine.fair_wait_millis(),
                    retry: uncertain.get(),
                    always_publish: engine.config().always_publish_releases,
                };
                let reply = match self.keep_millis_after {
                    Some(keep) => self.kind.keep(conn, &release, &owner::keeper_of(owner), keep),
                    None => self.kind.release(conn, &release),
                };
                if reply.as_ref().is_err_and(|err| err.is_io_error() || err.is_timeout() || err.is_connection_dropped())
                {
                    uncertain.set(true);
                }
                reply
            })
        };
        // After a timeout, once more at once, with the same request id (the latch makes
        // that safe).
        let try_once = || match send() {
            Err(err) if retry_timeout && err.is_timeout() => send(),
            other => other,
        };
        // `unlock()` rides out a restart or a failover, and stops trying at the lease's
        // validity deadline (past it the hold may be gone, and another owner's); a drop
        // sends once.
        let span = trace::span!(DEBUG, "release", lock = name, kind = self.kind.label(), client = engine.id(); outcome);
        trace::within!(span, {
            let outcome =
                if retry_timeout { with_retries(engine, self.valid_until, |_| try_once()) } else { try_once() };
            let restarted = {
                let (shown, answered) = (self.lease.shown_run(), answered_on.get());
                shown.zip(answered).is_some_and(|(shown, answered)| shown != answered)
            };
            let result = self.judge(outcome.on_lock(name), restarted);
            trace::record!(span, outcome = release_outcome(&result));
            result
        })
    }

    /// What the release script's answer means for the hold: `restarted`, the server that
    /// answered is another run than the one that last showed the hold.
    fn judge(&self, answer: Result<Option<i64>>, restarted: bool) -> Result<()> {
        let (name, events) = (self.lease.name(), &self.engine.config().events);
        match answer {
            // Nothing of the owner in a free lock, after a send whose outcome is unknown,
            // on another run of the server than the one that last showed the hold: the
            // restart (or failover) between may have taken it, and the lock may have
            // changed hands since. Not taken for this release's doing.
            Ok(Some(FOUND_FREE)) if restarted => {
                self.lease.lost(events);
                Err(Error::new(
                    ErrorKind::NotHeld,
                    "the server restarted (or failed over) since it last showed the hold, and the lock is free: the hold may have been lost before this release",
                )
                .on_lock(name))
            }
            Ok(Some(_)) => Ok(()),
            Ok(None) => {
                // Redis says the owner holds nothing: the lease was lost (a restart, an
                // eviction, a force unlock), and this release is the first to learn it.
                self.lease.lost(events);
                Err(Error::new(ErrorKind::NotHeld, "this owner no longer holds the lock").on_lock(name))
            }
            Err(err) => Err(err),
        }
    }
}

/// How a release ended, in words, as the release span records it.
pub(crate) fn release_outcome(result: &Result<()>) -> &'static str {
    match result {
        Ok(()) => "released",
        Err(err) if err.is_not_held() => "not held",
        Err(_) => "failed",
    }
}

/// How long a release latch is kept: long enough for any retry of that release.
fn latch_lifetime(command_timeout: Duration) -> u64 {
    let millis = command_timeout.saturating_mul(4).as_millis().max(1000);
    u64::try_from(millis).unwrap_or(u64::MAX).min(keys::MAX_LEASE_MILLIS)
}

/// After an acquire's connection dropped, its outcome is unknown: the lock may have been
/// granted. When this thread held no live lease on it, release best-effort, on a new
/// connection, so that nothing is left behind until the lease runs out. (When it already
/// held it, a decrement could undo a hold it really has; the extra hold, if any, then lapses
/// with the lease.) An acquire whose reply did not come in time is undone on its own
/// connection instead (see `engine::acquire`).
pub(crate) fn undo_uncertain_acquire(engine: &Engine, kind: Kind, name: &Arc<str>, owner: &str) {
    if !engine.holds(name, kind.role()) {
        send_undo(engine, engine.config().command_timeout, kind, name, owner);
    }
}

/// Takes back a grant that is certain (it was not replicated in time), on the connection
/// it came on: one hold of `owner` fewer, the rest of its holds kept as long as they need.
pub(crate) fn undo_grant(engine: &Engine, conn: &mut Conn, kind: Kind, name: &Arc<str>, owner: &str) {
    let keep_millis = engine.keep_millis_for(name, kind.role());
    Undo::prepare(engine, kind, name, owner, keep_millis, engine.config().command_timeout).send_on(conn);
}

/// The release of [`undo_uncertain_acquire`], without its check (for callers that made it
/// on the owner's thread), on a pooled connection, waiting at most `wait` (and the command
/// timeout) for its reply.
pub(crate) fn send_undo(engine: &Engine, wait: Duration, kind: Kind, name: &str, owner: &str) {
    let undo = Undo::prepare(engine, kind, name, owner, engine.watchdog_millis(), wait);
    let _ = engine.pool_for(name).run_within("undoing an acquire", Some(wait), |conn| undo.send(conn));
}

/// One best-effort release of `owner` on `name`, prepared on the owner's thread with
/// everything it needs owned, so that another thread can send it without the engine.
pub(crate) struct Undo {
    kind: Kind,
    name: String,
    owner: String,
    request_id: String,
    keep_millis: u64,
    latch_millis: u64,
    wait_millis: u64,
    always_publish: bool,
    /// How long its reply is waited for.
    wait: Duration,
}

impl Undo {
    /// An undo that keeps `keep_millis` for the holds that remain and waits at most `wait`
    /// (and the command timeout) for its reply.
    pub(crate) fn prepare(
        engine: &Engine,
        kind: Kind,
        name: &str,
        owner: &str,
        keep_millis: u64,
        wait: Duration,
    ) -> Undo {
        let command_timeout = engine.config().command_timeout;
        Undo {
            kind,
            name: name.to_owned(),
            owner: owner.to_owned(),
            request_id: engine.next_request_id(),
            keep_millis,
            latch_millis: latch_lifetime(command_timeout),
            wait_millis: engine.fair_wait_millis(),
            always_publish: engine.config().always_publish_releases,
            wait: wait.min(command_timeout),
        }
    }

    /// Sends it on `conn` (where a late command may still be ahead of it), waiting for a
    /// reply at most its bound.
    pub(crate) fn send_on(&self, conn: &mut Conn) {
        if conn.set_read_timeout(Some(self.wait)).is_ok() {
            let _ = self.send(conn);
        }
    }

    fn send(&self, conn: &mut Conn) -> redis::RedisResult<Option<i64>> {
        let release = Release {
            name: &self.name,
            lock_keys: None,
            owner: &self.owner,
            keep_millis: self.keep_millis,
            request_id: &self.request_id,
            latch_millis: self.latch_millis,
            wait_millis: self.wait_millis,
            retry: false,
            always_publish: self.always_publish,
        };
        self.kind.release(conn, &release)
    }
}
