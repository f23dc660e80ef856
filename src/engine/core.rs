//! [`Engine`]: the state one client shares among its handles, guards and background threads.
//! Its fields are private; the flows (`acquire`, `release`, `renewal`) and the front door go
//! through its methods.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::base::clock;
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::keys;
use crate::base::owner;
use crate::base::span::Span;
use crate::engine::lease::{Lease, Remaining, Term};
use crate::engine::registry::{self, Registry};
use crate::engine::renewal::{RenewalCounters, Renewer};
use crate::engine::replicas::{Behind, ReplicaSync, ReplicaSyncs, Replication};
use crate::engine::undos::Undos;
use crate::kind::{self, Kind, Role};
use crate::observe::activity::{Active, ActivityStats};
use crate::observe::identity::ClientIdentity;
use crate::support::config::Config;
use crate::transport::{Conn, Pool, SubscriberStats, Topology};

pub(crate) struct Engine {
    /// This client's UUID, the first half of every owner field it writes.
    id: String,
    /// What the client announces of itself while it holds or waits for something.
    identity: ClientIdentity,
    config: Config,
    watchdog_millis: u64,
    /// The watchdog's lease and drift allowance, computed once (a float multiply, on
    /// every grant otherwise).
    watchdog_span: Span,
    fair_wait_millis: u64,
    topology: Arc<Topology>,
    registry: Registry,
    renewer: Renewer,
    /// Replica-synced grants and confirmed renewals, one per master (a cluster has
    /// several), by pool id; shared with the renewal thread.
    replica_syncs: Arc<ReplicaSyncs>,
    /// Undos of late acquires, in flight on threads of their own.
    undos: Arc<Undos>,
    shutdown: AtomicBool,
    request_ids: AtomicU64,
}

/// What the engine tracks right now, for [`ClientStats`](crate::ClientStats).
pub(crate) struct EngineStats {
    pub(crate) leases: usize,
    pub(crate) renewals_scheduled: usize,
    pub(crate) renewal: RenewalCounters,
    pub(crate) subscriber: SubscriberStats,
    pub(crate) activity: ActivityStats,
}

impl Engine {
    /// Checks the settings, connects (loading the scripts and checking the user's
    /// permissions) and starts the background threads.
    pub(crate) fn start(url: &str, mut config: Config) -> Result<Engine> {
        config.check()?;
        // Each client counts its own, whichever builder it came from.
        config.events = config.events.counting_afresh();
        let watchdog_millis = keys::lease_millis("watchdog timeout", config.watchdog_timeout)?;
        let fair_wait_millis = keys::lease_millis("fair wait timeout", config.fair_wait_timeout)?;
        let (topology, refused) = Topology::connect(url, &config, kind::prepare_server)?;
        if !refused.is_empty() {
            topology.stop();
            return Err(Error::new(
                ErrorKind::PermissionDenied,
                format!(
                    "the user of {} may not run {}, which redlease's scripts need",
                    topology.url(),
                    refused.join(", ")
                ),
            ));
        }
        let topology = Arc::new(topology);
        let first = topology.pool_for("");
        let replica_syncs = Arc::new(ReplicaSyncs::new(&config));
        let replica_sync = replica_syncs.of(first.id());
        // What the master's replicas are, known before the first grant.
        if let Err(err) = first.run("reading the replicas", |conn| replica_sync.read_now(conn)) {
            topology.stop();
            return Err(err);
        }
        let id = uuid::Uuid::new_v4().to_string();
        let identity = ClientIdentity::of_this_process(&id);
        let renewer = match Renewer::start(
            Arc::clone(&topology),
            Arc::clone(&replica_syncs),
            config.clone(),
            watchdog_millis,
            identity.clone(),
        ) {
            Ok(renewer) => renewer,
            Err(err) => {
                topology.stop();
                return Err(err);
            }
        };
        let watchdog_span = config.watchdog_span();
        Ok(Engine {
            id,
            identity,
            config,
            watchdog_millis,
            watchdog_span,
            fair_wait_millis,
            topology,
            registry: Registry::default(),
            renewer,
            replica_syncs,
            undos: Arc::default(),
            shutdown: AtomicBool::new(false),
            request_ids: AtomicU64::new(0),
        })
    }

    /// This client's UUID.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn identity(&self) -> &ClientIdentity {
        &self.identity
    }

    /// An acquisition begins: counted active, and the client's announcement scheduled
    /// unless one is (a flag read, nothing sent on this thread).
    pub(crate) fn acquisition_begins(&self) -> Active {
        let active = self.config.events.active();
        self.renewer.announce_soon();
        active
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// Replica-synced grants on the master `conn` goes to (its pool's).
    pub(crate) fn replica_sync_of(&self, conn: &Conn) -> Arc<ReplicaSync> {
        self.replica_syncs.of(conn.pool_id())
    }

    /// Runs `attempt`, one script call that may grant, on `conn`, with the grant's
    /// confirmation sent behind it in the same write when it will read and wait (see
    /// [`ReplicaSync::send_with_grant`]); [`confirm_grant`](Engine::confirm_grant) then
    /// takes the replies, with what rode behind. When the reply is not a grant (`granted`
    /// says), or the call failed, what rode behind it is dropped.
    pub(crate) fn attempt_with_confirmation<T>(
        &self,
        conn: &mut Conn,
        attempt: impl FnOnce(&mut Conn) -> redis::RedisResult<T>,
        granted: impl FnOnce(&T) -> bool,
    ) -> redis::RedisResult<(T, Behind)> {
        let behind = self.replica_sync_of(conn).send_with_grant(conn, self.config.command_timeout);
        let reply = attempt(conn);
        if !reply.as_ref().is_ok_and(granted) {
            let _ = conn.take_trailing_replies();
        }
        reply.map(|reply| (reply, behind))
    }

    /// Confirms a grant just made on `conn`, `behind` it what rode with it, with its master's replicas (replica-synced
    /// grants: see [`ReplicaSync`]), and takes it back there with `take_back` when it
    /// cannot be trusted: not confirmed, or the confirmation failed and
    /// `take_back_on_error` says to (else something else takes it back, or it is left to
    /// run out).
    pub(crate) fn confirm_grant(
        &self,
        conn: &mut Conn,
        behind: Behind,
        take_back_on_error: impl FnOnce(&redis::RedisError) -> bool,
        take_back: impl FnOnce(&mut Conn),
    ) -> redis::RedisResult<Replication> {
        let pool_id = conn.pool_id();
        let pool = || self.topology.pool_with_id(pool_id);
        let synced = self.replica_sync_of(conn).confirm(conn, behind, pool, self.config.command_timeout);
        let untrusted = match &synced {
            Ok(Replication::Confirmed) => false,
            Ok(Replication::Unconfirmed(_)) => true,
            Err(err) => take_back_on_error(err),
        };
        if untrusted {
            take_back(conn);
        }
        synced
    }

    /// The lease `role` of the current thread on `name` still needs in Redis after one hold
    /// fewer (for undoing a grant that was not replicated): its remaining holds' need, or
    /// the watchdog's when it has none.
    pub(crate) fn keep_millis_for(&self, name: &Arc<str>, role: Role) -> u64 {
        self.registry
            .current(name, role)
            .and_then(|lease| lease.keep_millis(self.watchdog_millis))
            .unwrap_or(self.watchdog_millis)
    }

    /// The watchdog lease in milliseconds.
    pub(crate) fn watchdog_millis(&self) -> u64 {
        self.watchdog_millis
    }

    /// The fair wait timeout in milliseconds.
    pub(crate) fn fair_wait_millis(&self) -> u64 {
        self.fair_wait_millis
    }

    pub(crate) fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The connections that serve the lock `name`.
    pub(crate) fn pool_for(&self, name: &str) -> Arc<Pool> {
        self.topology.pool_for(name)
    }

    /// The owner field of the current thread: `<client uuid>:<thread number>`.
    pub(crate) fn current_owner(&self) -> String {
        owner::owner_of_current_thread(&self.id)
    }

    /// An owner field of its own for one acquisition: `<client uuid>:<number>`, a number no
    /// thread has.
    pub(crate) fn fresh_owner(&self) -> String {
        owner::fresh_owner(&self.id)
    }

    /// A request id unique to this client (the suffix of a release's latch key): the
    /// client's UUID and a counter, so no randomness is drawn per release.
    pub(crate) fn next_request_id(&self) -> String {
        let n = self.request_ids.fetch_add(1, Ordering::Relaxed).to_string();
        keys::joined(&[&self.id, ":", &n])
    }

    pub(crate) fn check_running(&self) -> Result<()> {
        if self.is_shutdown() { Err(Error::shutdown()) } else { Ok(()) }
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Stops the client (idempotent): waiters return `Shutdown`, renewal stops, idle
    /// connections close.
    pub(crate) fn stop(&self) {
        if self.shutdown.swap(true, Ordering::AcqRel) {
            return;
        }
        self.renewer.shutdown();
        // An undo in flight has its own connection; it ends within its command's bound.
        if let Some(deadline) = clock::deadline_in(self.config.round_trip_bound()) {
            self.undos.wait_for_all(deadline);
        }
        self.topology.stop();
    }

    /// Undos of late acquires in flight.
    pub(crate) fn undos(&self) -> &Arc<Undos> {
        &self.undos
    }

    pub(crate) fn stats(&self) -> EngineStats {
        let (renewals_scheduled, renewal) = self.renewer.stats();
        EngineStats {
            leases: self.registry.len(),
            renewals_scheduled,
            renewal,
            subscriber: self.topology.subscriber_stats(),
            activity: self.config.events.activity().snapshot(),
        }
    }

    /// The watchdog's lease and its clock-drift allowance.
    pub(crate) fn watchdog_span(&self) -> Span {
        self.watchdog_span
    }

    /// The term of a hold with a fixed lease of `lease_millis`, acquired by a request sent
    /// at `sent`: valid until then plus the lease, less its drift allowance.
    fn fixed_term(&self, sent: Instant, lease_millis: u64) -> Term {
        Term::Until(self.config.span(Duration::from_millis(lease_millis)).valid_until(sent))
    }

    /// The lease a granted hold of `owner` joins: a `per_thread` hold joins the thread's
    /// lease of the lock (the registry's); any other has a lease of its own.
    pub(crate) fn lease_for(&self, kind: Kind, name: &Arc<str>, owner: String, per_thread: bool) -> Arc<Lease> {
        let span = self.watchdog_span;
        if per_thread {
            self.registry.lease_for(kind, name, owner, span)
        } else {
            registry::new_lease(kind, name, owner, span)
        }
    }

    /// Records a granted hold on `lease` (a lock's, or a lease of its own: a permit
    /// lease's, a group lock's), acquired by a request sent at `sent`, and schedules its
    /// renewal when the watchdog keeps it. Returns the hold's term.
    pub(crate) fn add_hold(&self, lease: &Arc<Lease>, sent: Instant, lease_millis: u64, watchdog: bool) -> Term {
        let term = if watchdog { Term::Watchdog } else { self.fixed_term(sent, lease_millis) };
        lease.hold_added(term, sent, &self.renewer, &self.config.events);
        term
    }

    /// The local half of releasing one hold of `lease` (see [`Lease::hold_released`]): when
    /// no watchdog hold remains, its renewal is stopped and one in flight waited for, so
    /// that nothing renews it after the release; a lease lost before is reported now.
    pub(crate) fn release_hold(&self, lease: &Lease, term: Term) -> Remaining {
        let bound = self.config.round_trip_bound();
        lease.hold_released(term, &self.renewer, bound, self.watchdog_millis, &self.config.events)
    }

    /// Whether the current thread holds a live lease of `role` on the lock `name`.
    pub(crate) fn holds(&self, name: &Arc<str>, role: Role) -> bool {
        self.registry.holds(name, role)
    }

    /// The current thread learned from Redis that it holds nothing of `role` on `name`
    /// (a query answered so): a live lease it has there is lost, and reported so.
    pub(crate) fn learned_not_held(&self, name: &Arc<str>, role: Role) {
        if let Some(lease) = self.registry.current(name, role) {
            lease.lost(&self.config.events);
        }
    }

    /// Removes a lease whose last guard is gone from the registry.
    pub(crate) fn forget_lease(&self, lease: &Arc<Lease>) {
        self.registry.forget(lease);
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
    }
}
