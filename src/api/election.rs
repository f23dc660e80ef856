//! Leader election: [`Election`], its [`Leadership`] guard, and [`LeaderObserver`] for
//! following who leads without campaigning.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api::guard::{LockGuard, Sendable};
use crate::api::handle::Handle;
use crate::api::watch::LeaseWatch;
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::keys;
use crate::engine::{self, Attempt, Engine, Wait, ready, wait_loop, with_retries};
use crate::kind::Kind;
use crate::kind::election::{self as layout};
use crate::kind::wake;

/// One leader at a time among the processes that campaign under one name, each leader with
/// a term that only grows and a value it advertises (an address, a host name) that anyone
/// may read without campaigning.
///
/// Built on the library's own lock: a campaign waits for the election as for a plain lock
/// (pub/sub wake-ups, the verb ladder, interruptible), and a leader's lease is kept by the
/// watchdog, released on resignation and lost as any lease is. Each campaign holds under
/// an owner of its own, so a [`Leadership`] is `Send` and a process that campaigns twice
/// waits for itself. The layout is redlease's own (Redisson has no election), in one
/// cluster slot: the hash `redlease_election:{NAME}` (the leader's owner field, `value`,
/// `term`; its time to live is the leader's lease), the counter
/// `redlease_term:redlease_election:{NAME}` (never expires), and the observers' channel
/// `redlease_leader:redlease_election:{NAME}` ([`guide::design`](crate::guide::design#elections), "Elections").
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let election = client.election("billing-scheduler");
/// let leadership = election.campaign("10.0.0.7:8080")?;
/// // Lead while the lease holds; the term fences what the leader writes.
/// while leadership.is_leader() {
///     let _term = leadership.term();
///     # break;
/// }
/// leadership.resign()?;
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct Election {
    handle: Handle,
    name: Arc<str>,
}

/// Longest value a candidate may advertise, in bytes.
pub const MAX_ADVERTISED_LEN: usize = 8 * 1024;

/// The current leader, as anyone may read it ([`Election::leader`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// What it advertises.
    pub value: String,
    /// Its term: every leader's is greater than the one before.
    pub term: u64,
    /// Its lease left when read; `None` when it does not expire (never with this library).
    pub lease_left: Option<Duration>,
}

impl Election {
    pub(crate) fn new(engine: Arc<Engine>, name: String) -> Election {
        let key = layout::election_key(&name);
        let handle = Handle { per_thread: false, ..Handle::new(engine, key, Kind::Election) };
        Election { handle, name: name.into() }
    }

    /// The election's name, as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Campaigns until this process leads (or the client shuts down), advertising `value`:
    /// the leadership, with its term. Interruptible ([`Interrupter`](crate::Interrupter)).
    ///
    /// # Errors
    ///
    /// `InvalidInput` for an empty value or one over [`MAX_ADVERTISED_LEN`] bytes, or a
    /// name the locks refuse, before anything is sent; otherwise as
    /// [`Lock::lock`](crate::Lock::lock).
    pub fn campaign(&self, value: &str) -> Result<Leadership> {
        self.run(value, Wait::Forever)?.ok_or_else(|| Error::shutdown().on_lock(&self.name))
    }

    /// One attempt: the leadership if nobody leads, `None` if someone does.
    ///
    /// # Errors
    ///
    /// As [`campaign`](Election::campaign).
    pub fn try_campaign(&self, value: &str) -> Result<Option<Leadership>> {
        self.run(value, Wait::No)
    }

    /// Campaigns for at most `timeout` (a timeout that overflows the clock,
    /// `Duration::MAX`: without deadline, as `campaign`).
    ///
    /// # Errors
    ///
    /// As [`campaign`](Election::campaign).
    pub fn campaign_for(&self, value: &str, timeout: Duration) -> Result<Option<Leadership>> {
        self.run(value, engine::wait_within(timeout))
    }

    /// Campaigns until `deadline`.
    ///
    /// # Errors
    ///
    /// As [`campaign`](Election::campaign).
    pub fn campaign_until(&self, value: &str, deadline: Instant) -> Result<Option<Leadership>> {
        self.run(value, Wait::Until(deadline))
    }

    fn run(&self, value: &str, wait: Wait) -> Result<Option<Leadership>> {
        self.check_name()?;
        check_value(value).map_err(|e| self.renamed(e))?;
        let handle = Handle { advertise: Some(value.into()), ..self.handle.clone() };
        let Some(guard) = handle.acquire::<Sendable>(wait).map_err(|e| self.renamed(e))? else {
            return Ok(None);
        };
        let term =
            guard.token().ok_or_else(|| Error::new(ErrorKind::Redis, "a leadership granted without its term"))?;
        Ok(Some(Leadership { guard, term, value: value.into(), name: Arc::clone(&self.name) }))
    }

    /// Who leads now: the value it advertises and its term; `None` when nobody does.
    ///
    /// # Errors
    ///
    /// As [`Lock::is_locked`](crate::Lock::is_locked).
    pub fn leader(&self) -> Result<Option<Leader>> {
        self.ready()?;
        with_retries(&self.handle.engine, None, |_| self.read_leader()).map_err(|e| self.renamed(e))
    }

    /// The checks before anything is sent: the client runs, the name is valid.
    fn ready(&self) -> Result<()> {
        self.check_name()?;
        ready(&self.handle.engine, &self.handle.name).map_err(|e| self.renamed(e))
    }

    /// One read of who leads, not retried (the callers' loops retry).
    fn read_leader(&self) -> Result<Option<Leader>> {
        let key = &*self.handle.name;
        let read = self.handle.engine.pool_for(key).run("reading the leader", |c| layout::leader(c, key))?;
        Ok(read.map(|(value, term, lease_left)| Leader { value, term, lease_left }))
    }

    /// An observer of who leads, starting from who leads now: its waits end when the
    /// leadership changes (a new term, or nobody), woken by the election's messages and
    /// bounded by the leader's lease (a leader that dies publishes nothing).
    ///
    /// # Errors
    ///
    /// As [`leader`](Election::leader).
    pub fn observe(&self) -> Result<LeaderObserver> {
        Ok(LeaderObserver { election: self.clone(), seen: self.leader()? })
    }

    /// The election's own name, checked as a lock's (its key is longer).
    fn check_name(&self) -> Result<()> {
        keys::check_name(&self.name).map_err(|e| self.renamed(e))
    }

    /// An error of the election's key, named by the election's name (the lock paths under
    /// it name the key).
    fn renamed(&self, err: Error) -> Error {
        err.on_election(&self.handle.name, &self.name)
    }
}

fn check_value(value: &str) -> Result<()> {
    let why = " (a leader advertises what others need of it)";
    keys::check_length("the advertised value", value, MAX_ADVERTISED_LEN, why)
}

impl fmt::Debug for Election {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Election").field("name", &self.name).finish_non_exhaustive()
    }
}

/// This process leads an election: proof of it for as long as the lease holds, resigned
/// on drop or by [`resign`](Leadership::resign).
///
/// Its [`term`](Leadership::term) is greater than every earlier leader's: pass it with
/// what the leader writes, and let the resource refuse a smaller one (a leader paused past
/// its lease may still act, as any lease holder may; see [`guide::guarantees`](crate::guide::guarantees#elections)). The lease
/// is the watchdog's: [`is_leader`](Leadership::is_leader) turns false at the validity
/// deadline when renewals fail, and [`watch`](Leadership::watch) tells other threads.
#[must_use = "if unused the leadership is resigned at once"]
pub struct Leadership {
    guard: LockGuard<Sendable>,
    term: u64,
    value: Arc<str>,
    name: Arc<str>,
}

impl Leadership {
    /// This leadership's term.
    pub fn term(&self) -> u64 {
        self.term
    }

    /// What this leader advertises.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The owner field it leads under, `<client id>:<number>` (each campaign's own).
    pub fn owner(&self) -> &str {
        self.guard.owner()
    }

    /// Whether this process still leads, as far as it knows (no I/O): false once the lease
    /// is lost or past its validity deadline.
    pub fn is_leader(&self) -> bool {
        self.guard.is_held()
    }

    /// Until when this leadership is valid at the latest (see
    /// [`LockGuard::valid_until`]).
    pub fn valid_until(&self) -> Option<Instant> {
        self.guard.valid_until()
    }

    /// The lease's watch, for other threads: whether it may still act as leader, and a
    /// wait until it is at risk or lost.
    pub fn watch(&self) -> LeaseWatch {
        self.guard.watch()
    }

    /// Resigns: the next candidate leads about one round trip later, and observers hear it.
    ///
    /// # Errors
    ///
    /// As [`LockGuard::unlock`]: `NotHeld` when the leadership was lost before.
    pub fn resign(self) -> Result<()> {
        self.guard.unlock()
    }
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("election", &self.name)
            .field("term", &self.term)
            .field("value", &self.value)
            .field("is_leader", &self.is_leader())
            .finish()
    }
}

/// Follows who leads an election ([`Election::observe`]): the leader seen last, and waits
/// until it changes (a new term, or nobody leading), without polling.
#[derive(Debug)]
pub struct LeaderObserver {
    election: Election,
    seen: Option<Leader>,
}

impl LeaderObserver {
    /// The leader seen last; `None`: nobody led.
    pub fn current(&self) -> Option<&Leader> {
        self.seen.as_ref()
    }

    /// Waits until the leadership changes; the new leader (`None`: nobody leads now).
    /// Interruptible.
    ///
    /// # Errors
    ///
    /// As [`Election::leader`]; `Interrupted` when interrupted.
    pub fn wait_change(&mut self) -> Result<Option<&Leader>> {
        self.wait(Wait::Forever)?;
        Ok(self.seen.as_ref())
    }

    /// Waits at most `timeout` for the leadership to change: whether it did
    /// ([`current`](LeaderObserver::current) says to what). A timeout that overflows the
    /// clock (`Duration::MAX`) is a wait without deadline, as `wait_change`'s.
    ///
    /// # Errors
    ///
    /// As [`wait_change`](LeaderObserver::wait_change).
    pub fn wait_change_for(&mut self, timeout: Duration) -> Result<bool> {
        self.wait(engine::wait_within(timeout))
    }

    /// Waits until `deadline` for the leadership to change: whether it did.
    ///
    /// # Errors
    ///
    /// As [`wait_change`](LeaderObserver::wait_change).
    pub fn wait_change_until(&mut self, deadline: Instant) -> Result<bool> {
        self.wait(Wait::Until(deadline))
    }

    fn wait(&mut self, wait: Wait) -> Result<bool> {
        let election = &self.election;
        let seen_term = self.seen.as_ref().map(|l| l.term);
        election.ready()?;
        // One read per attempt: the wait loop rides out failures (interruptibly) itself.
        let attempt = || {
            let now = election.read_leader()?;
            if now.as_ref().map(|l| l.term) != seen_term {
                return Ok(Attempt::Acquired(now));
            }
            // Unchanged: a message wakes the wait, or the leader's lease running out.
            Ok(Attempt::Held { ttl: now.and_then(|l| l.lease_left) })
        };
        let engine = &election.handle.engine;
        let channel = layout::leader_channel(&election.handle.name);
        // Not an acquisition: not counted as one.
        let changed = wait_loop(engine, election.name(), || (channel, &wake::EVERYONE, 1), wait, attempt, None)
            .map_err(|e| election.renamed(e))?;
        match changed {
            Some(now) => {
                self.seen = now;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}
