//! Redlock: one lock on a majority of independent Redis masters.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;

use crate::api::guard::LockGuard;
use crate::api::handle::Handle;
use crate::api::multi_lock::AnyLock;
use crate::base::clock;
use crate::base::error::{Error, Result};
use crate::base::keys;
use crate::engine::{self, Hold};
use crate::kind::Reply;
use crate::support::fan_out;
use crate::support::interrupt;

/// Fewest nodes a Redlock accepts.
const MIN_NODES: usize = 3;

/// The Redlock algorithm over independent Redis masters: the same lock name on N ≥ 3
/// servers (an odd number is best), each through its own [`Client`](crate::Client).
///
/// One attempt asks every node at once, each bounded by a short per-node timeout. It is
/// granted when a majority (N/2 + 1) granted **and** time is left: the guard's
/// [`validity`](RedLockGuard::validity) is lease − time spent − drift (the algorithm's
/// 0.01 × lease + 2 ms, or the largest of the nodes' clients'
/// [drift allowances](crate::ClientBuilder::clock_drift_rate) when that is more),
/// measured on the monotonic clock from before the first request, and must be positive.
/// A failed attempt releases on **every** node, including those whose reply was lost or
/// late, then waits a random delay before the next, so that competing clients do not split
/// the vote forever.
///
/// With the watchdog (the default), each node's lease is renewed by its own client, and the
/// guard counts as held while a majority of the nodes' leases are held; when fewer are, the
/// lease is lost ([`LockGuard::is_held`] turns false and each client reports its lost
/// node through [`LockEvents`](crate::LockEvents)). What Redlock does and does not promise
/// is in [`guide::guarantees`](crate::guide::guarantees#redlock); in short, it needs bounded clock drift and pauses, and it
/// gives no fencing token.
///
/// ```no_run
/// use redlease::{Client, RedLock};
///
/// let nodes: Vec<Client> = ["redis://10.0.0.1/", "redis://10.0.0.2/", "redis://10.0.0.3/"]
///     .into_iter()
///     .map(Client::open)
///     .collect::<Result<_, _>>()?;
/// let red = RedLock::new(nodes.iter().map(|c| c.lock("invoice-run")));
/// let guard = red.lock()?;
/// let validity: std::time::Duration = guard.validity();
/// // ... finish well within `validity` ...
/// # let _ = validity;
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct RedLock {
    nodes: Vec<Handle>,
    lease: Option<Duration>,
    node_timeout: Option<Duration>,
    retry_delay: Duration,
}

impl RedLock {
    /// A Redlock over `locks`, one per master. No I/O; fewer than 3 nodes are refused when
    /// used.
    pub fn new<I>(locks: I) -> RedLock
    where
        I: IntoIterator,
        I::Item: Into<AnyLock>,
    {
        RedLock {
            nodes: locks.into_iter().map(|l| l.into().0).collect(),
            lease: None,
            node_timeout: None,
            retry_delay: Duration::from_millis(50),
        }
    }

    /// Every node takes this fixed lease (not renewed).
    ///
    /// Defaults to each node's watchdog lease, renewed.
    #[must_use = "with_lease returns a new RedLock and leaves this one unchanged"]
    pub fn with_lease(mut self, lease: Duration) -> RedLock {
        self.lease = Some(lease);
        self
    }

    /// How long one node may take to answer one request before the attempt goes on
    /// without it.
    ///
    /// Defaults to 1/50 of the lease, at least 10 ms, at most the node's command timeout.
    #[must_use = "node_timeout returns a new RedLock and leaves this one unchanged"]
    pub fn node_timeout(mut self, timeout: Duration) -> RedLock {
        self.node_timeout = Some(timeout);
        self
    }

    /// Longest random pause between two attempts (each pause is drawn between half of it
    /// and all of it). A delay longer than the lease (the fixed one, or the watchdog's) is
    /// cut to the lease: by then a holder that went away has lost the lock, and a wait
    /// without deadline (`lock()`, an overflowing `try_lock_for`) still looks again.
    ///
    /// Defaults to 50 ms.
    #[must_use = "retry_delay returns a new RedLock and leaves this one unchanged"]
    pub fn retry_delay(mut self, delay: Duration) -> RedLock {
        self.retry_delay = delay;
        self
    }

    /// Blocks until a majority is held.
    pub fn lock(&self) -> Result<RedLockGuard> {
        self.acquire(None, false)?.ok_or_else(Error::shutdown)
    }

    /// One attempt: `Ok(None)` when no majority could be had in time.
    pub fn try_lock(&self) -> Result<Option<RedLockGuard>> {
        self.acquire(None, true)
    }

    /// Attempts until one succeeds or `timeout` has passed (a timeout that overflows the
    /// clock, `Duration::MAX`: until one succeeds, as `lock`).
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<RedLockGuard>> {
        self.acquire(clock::deadline_in(timeout), false)
    }

    /// Attempts until one succeeds or `deadline` has passed.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<RedLockGuard>> {
        self.acquire(Some(deadline), false)
    }

    /// The lease every node takes, and whether the watchdog renews it.
    fn lease(&self) -> Result<(u64, bool)> {
        match self.lease {
            Some(lease) => Ok((keys::lease_millis("lease", lease)?, false)),
            None => Ok((self.nodes.iter().map(|n| n.engine.watchdog_millis()).min().unwrap_or(0), true)),
        }
    }

    fn node_limit(&self, node: &Handle, lease_millis: u64) -> Duration {
        let command = node.engine.config().command_timeout;
        let limit = self
            .node_timeout
            .unwrap_or_else(|| Duration::from_millis(lease_millis / 50).max(Duration::from_millis(10)));
        limit.min(command)
    }

    fn check(&self) -> Result<()> {
        if self.nodes.len() < MIN_NODES {
            return Err(Error::invalid(format!(
                "a Redlock needs at least {MIN_NODES} nodes, got {}",
                self.nodes.len()
            )));
        }
        if self.node_timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::invalid("the per-node timeout must be longer than zero"));
        }
        self.nodes.iter().try_for_each(Handle::ready)
    }

    fn acquire(&self, deadline: Option<Instant>, once: bool) -> Result<Option<RedLockGuard>> {
        self.check()?;
        let (lease_millis, watchdog) = self.lease()?;
        // A wait (not a single attempt) is interruptible: before it, between its rounds,
        // and when a round wins in the same instant (the majority is given back).
        let interrupted = || !once && interrupt::take();
        if interrupted() {
            return Err(Error::interrupted());
        }
        loop {
            if let Some(guard) = self.attempt(lease_millis, watchdog)? {
                if interrupted() {
                    drop(guard);
                    return Err(Error::interrupted());
                }
                return Ok(Some(guard));
            }
            if once || deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            let delay = self.retry_delay.min(Duration::from_millis(lease_millis));
            let max = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX).max(2);
            let pause = Duration::from_micros(rand::rng().random_range(max / 2..=max));
            let pause = deadline.map_or(pause, |d| pause.min(d.saturating_duration_since(Instant::now())));
            if interrupt::nap(pause) && interrupted() {
                return Err(Error::interrupted());
            }
            for node in &self.nodes {
                node.engine.check_running()?;
            }
        }
    }

    /// One round over every node at once.
    fn attempt(&self, lease_millis: u64, watchdog: bool) -> Result<Option<RedLockGuard>> {
        let owners: Vec<String> = self.nodes.iter().map(|n| n.engine.current_owner()).collect();
        // Whether this thread already held the lock on each node (a reentrant Redlock),
        // decided here on the owner's thread.
        let held_before: Vec<bool> = self.nodes.iter().map(|n| n.engine.holds(&n.name, n.kind.role())).collect();
        let limits: Vec<Duration> = self.nodes.iter().map(|n| self.node_limit(n, lease_millis)).collect();
        let started = Instant::now();
        let asks: Vec<_> = self.nodes.iter().zip(&owners).zip(&limits).zip(&held_before).collect();
        let replies: Vec<Option<Reply>> = fan_out::concurrently(asks, |(((node, owner), &limit), &held_before)| {
            // A slow node may still grant it: unless the thread held it already, the attempt
            // is undone right behind it when its reply does not come in time.
            engine::attempt_within(&node.engine, node.request(), owner, lease_millis, limit, !held_before)
        })
        .into_iter()
        .map(Option::flatten)
        .collect();
        let elapsed = started.elapsed();
        let lease = Duration::from_millis(lease_millis);
        // The algorithm's 1 % + 2 ms, or the largest drift allowance the nodes' clients are
        // configured with when that is more: validity never longer than any of their own
        // guards', nor than the algorithm allows.
        let floor = lease / 100 + Duration::from_millis(2);
        let drift = self.nodes.iter().map(|n| n.engine.config().span(lease).drift).fold(floor, Duration::max);
        let validity = lease.checked_sub(elapsed + drift).filter(|v| !v.is_zero());
        let granted = replies.iter().filter(|r| matches!(r, Some(Reply::Granted { .. }))).count();
        let quorum = self.nodes.len() / 2 + 1;
        match validity {
            Some(validity) if granted >= quorum => {
                let holds = self
                    .nodes
                    .iter()
                    .zip(&owners)
                    .zip(&replies)
                    .filter(|(_, reply)| matches!(reply, Some(Reply::Granted { .. })))
                    .map(|((node, owner), _)| {
                        let engine = &node.engine;
                        let lease = engine.lease_for(node.kind, &node.name, owner.clone(), true);
                        let term = engine.add_hold(&lease, started, lease_millis, watchdog);
                        Hold::new(Arc::clone(engine), lease, node.kind, term, None, engine.config().events.active())
                            .with_lock_keys(node.lock_keys.clone())
                    })
                    .collect();
                let release_limit = limits.iter().copied().max().unwrap_or(Duration::from_millis(10));
                let guard = LockGuard::of(holds, quorum, None, Some(release_limit));
                Ok(Some(RedLockGuard { guard, validity }))
            }
            _ => {
                self.release_everywhere(&owners, &limits, &held_before);
                Ok(None)
            }
        }
    }

    /// After a failed attempt: release on every node, whether or not it said yes, since a
    /// reply may have been lost or late. Nodes on which this thread already held the lock
    /// (a reentrant Redlock) are left alone: a decrement there could undo a real hold.
    fn release_everywhere(&self, owners: &[String], limits: &[Duration], held_before: &[bool]) {
        let undos: Vec<_> = self
            .nodes
            .iter()
            .zip(owners)
            .zip(limits)
            .zip(held_before)
            .filter(|(_, held)| !**held)
            .map(|((node_owner, &limit), _)| (node_owner, limit))
            .collect();
        fan_out::concurrently(undos, |((node, owner), limit)| {
            engine::send_undo(&node.engine, limit, node.kind, &node.name, owner);
        });
    }
}

impl fmt::Debug for RedLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.nodes.iter().map(|n| &*n.name).collect();
        f.debug_struct("RedLock")
            .field("nodes", &names)
            .field("lease", &self.lease)
            .field("node_timeout", &self.node_timeout)
            .field("retry_delay", &self.retry_delay)
            .finish()
    }
}

/// A [`RedLock`]'s guard: a [`LockGuard`] over the majority's holds (everything it offers,
/// by `Deref`) with the validity it was granted with. Released on every node on drop or by
/// [`unlock`](RedLockGuard::unlock).
#[must_use = "if unused the lock is released at once"]
#[clippy::has_significant_drop]
pub struct RedLockGuard {
    guard: LockGuard,
    validity: Duration,
}

impl RedLockGuard {
    /// The validity it was granted with: the lease less the time the attempt took and the
    /// drift allowance, counted from before the first request. Act well within it.
    pub fn validity(&self) -> Duration {
        self.validity
    }

    /// Releases on every node now and says how it went (see [`LockGuard::unlock`]).
    ///
    /// # Errors
    ///
    /// As [`LockGuard::unlock`].
    pub fn unlock(self) -> Result<()> {
        self.guard.unlock()
    }

    /// The plain guard, for code that takes any lock's.
    pub fn into_inner(self) -> LockGuard {
        self.guard
    }
}

impl std::ops::Deref for RedLockGuard {
    type Target = LockGuard;

    fn deref(&self) -> &LockGuard {
        &self.guard
    }
}

impl fmt::Debug for RedLockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedLockGuard").field("validity", &self.validity).field("guard", &self.guard).finish()
    }
}
