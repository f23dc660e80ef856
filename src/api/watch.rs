//! [`LeaseWatch`]: a guard's lease, for the threads that do the work the lock protects.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::clock;
use crate::engine::{Lease, LeaseState};

/// How often a watch over several leases (a [`MultiLock`](crate::MultiLock)'s or a
/// [`RedLock`](crate::RedLock)'s) looks at them again while it waits.
const COMPOSITE_POLL: Duration = Duration::from_millis(5);

/// A cheap handle on a guard's lease that any thread can hold: `Send`, `Sync` and `Clone`,
/// unlike the guard, so that the threads doing the work a lock protects can ask "may I
/// still act?" ([`is_valid`](LeaseWatch::is_valid), no I/O) and block until they must stop
/// ([`wait_for`](LeaseWatch::wait_for)), and so stop *before* the lease's deadline rather
/// than after its loss.
///
/// Get one from [`LockGuard::watch`](crate::LockGuard::watch) or
/// [`PermitGuard::watch`](crate::PermitGuard::watch). It does not keep the lock: when the
/// guard is released the watch reads [`LeaseState::Released`].
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let guard = client.lock("ledger").lock()?;
/// let watch = guard.watch();
/// let worker = std::thread::spawn(move || {
///     let mut written = 0;
///     // Check before each write: never writes once the lease may be someone else's.
///     while watch.is_valid() && written < 1_000 {
///         written += 1; // ... one short write to the resource ...
///     }
///     written
/// });
/// // The guard's thread can watch too: a lease at risk (renewals failing) means stop soon.
/// let written = worker.join().expect("the worker");
/// guard.unlock()?;
/// # let _ = (written, Duration::ZERO);
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct LeaseWatch {
    leases: Arc<[Arc<Lease>]>,
    /// How many leases must stay valid: all of them, or a Redlock's majority.
    quorum: usize,
}

impl LeaseWatch {
    pub(crate) fn new(leases: Vec<Arc<Lease>>, quorum: usize) -> LeaseWatch {
        LeaseWatch { leases: leases.into(), quorum }
    }

    /// The lease's state now (no I/O): `Held`, `AtRisk` (renewals failing: stop before
    /// [`valid_until`](LeaseWatch::valid_until)), `Lost` or `Released`.
    pub fn state(&self) -> LeaseState {
        combined_state(self.leases.iter().map(|lease| lease.state()), self.quorum)
    }

    /// Until when no other owner can hold the lock, as far as this process can tell: the
    /// instant the last successful acquire or renewal was sent, plus the lease, less the
    /// clock-drift allowance ([`ClientBuilder::clock_drift_rate`](crate::ClientBuilder::clock_drift_rate)).
    /// While the lease is held it moves forward with every renewal. `None` once it is lost
    /// or released (and for a fixed lease too long for the clock to hold its end).
    pub fn valid_until(&self) -> Option<Instant> {
        combined_valid_until(self.leases.iter().map(|lease| lease.valid_until()), self.quorum)
    }

    /// Whether the lock's work may still be done now: the lease is held or at risk, and
    /// its validity has not run out. Check it before each step that must not happen under
    /// another holder; a step that takes longer than the time left is not covered.
    pub fn is_valid(&self) -> bool {
        matches!(self.state(), LeaseState::Held | LeaseState::AtRisk)
            && self.valid_until().is_none_or(|until| Instant::now() < until)
    }

    /// Blocks until the lease is no longer plainly held (at risk, lost or released), or
    /// `timeout` passes; returns its state then (`Held` after a timeout).
    pub fn wait_for(&self, timeout: Duration) -> LeaseState {
        self.wait_until_deadline(clock::deadline_in(timeout))
    }

    /// As [`wait_for`](LeaseWatch::wait_for), until `deadline`.
    pub fn wait_until(&self, deadline: Instant) -> LeaseState {
        self.wait_until_deadline(Some(deadline))
    }

    /// Blocks until the lease is no longer plainly held (at risk, lost or released), however
    /// long that takes; returns its state then.
    pub fn wait(&self) -> LeaseState {
        self.wait_until_deadline(None)
    }

    fn wait_until_deadline(&self, deadline: Option<Instant>) -> LeaseState {
        if let [lease] = &*self.leases {
            return lease.wait_while_held(deadline);
        }
        loop {
            let state = self.state();
            let now = Instant::now();
            if state != LeaseState::Held || deadline.is_some_and(|d| now >= d) {
                return state;
            }
            let slice = deadline.map_or(COMPOSITE_POLL, |d| d.saturating_duration_since(now).min(COMPOSITE_POLL));
            std::thread::sleep(slice);
        }
    }
}

impl fmt::Debug for LeaseWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseWatch").field("state", &self.state()).field("valid_until", &self.valid_until()).finish()
    }
}

/// The state of `quorum` of several leases: released when all are, held while `quorum`
/// of them are held, at risk while `quorum` are held or at risk, lost otherwise.
pub(crate) fn combined_state(states: impl Iterator<Item = LeaseState>, quorum: usize) -> LeaseState {
    let (mut held, mut live, mut released, mut all) = (0, 0, 0, 0);
    for state in states {
        all += 1;
        match state {
            LeaseState::Held => {
                held += 1;
                live += 1;
            }
            LeaseState::AtRisk => live += 1,
            LeaseState::Released => released += 1,
            LeaseState::Lost => {}
        }
    }
    if all == 0 || released == all {
        LeaseState::Released
    } else if held >= quorum {
        LeaseState::Held
    } else if live >= quorum {
        LeaseState::AtRisk
    } else {
        LeaseState::Lost
    }
}

/// Until when `quorum` of several leases are valid (each `None` when lost or released,
/// `Some(None)` when valid without end): the `quorum`-th latest end.
pub(crate) fn combined_valid_until(
    ends: impl Iterator<Item = Option<Option<Instant>>>,
    quorum: usize,
) -> Option<Instant> {
    // `None` (no end) sorts after every instant: latest first.
    let mut live: Vec<Option<Instant>> = ends.flatten().collect();
    live.sort_by(|a, b| match (a, b) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(a),
    });
    live.get(quorum.checked_sub(1)?).copied().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    use LeaseState::{AtRisk, Held, Lost, Released};

    #[test]
    fn composites_are_held_while_their_quorum_is() {
        let of = |states: &[LeaseState], quorum| combined_state(states.iter().copied(), quorum);
        assert_eq!(of(&[Held], 1), Held);
        assert_eq!(of(&[AtRisk], 1), AtRisk);
        assert_eq!(of(&[Lost], 1), Lost);
        assert_eq!(of(&[Released], 1), Released);
        assert_eq!(of(&[], 1), Released);
        // A multi-lock: every member.
        assert_eq!(of(&[Held, AtRisk], 2), AtRisk);
        assert_eq!(of(&[Held, Lost], 2), Lost);
        assert_eq!(of(&[Held, Released], 2), Lost, "a member released alone leaves the rest short");
        // A Redlock of 3: a majority.
        assert_eq!(of(&[Held, Held, Lost], 2), Held);
        assert_eq!(of(&[Held, AtRisk, Lost], 2), AtRisk);
        assert_eq!(of(&[AtRisk, Lost, Lost], 2), Lost);
    }

    #[test]
    fn a_composite_is_valid_until_its_quorum_th_latest_end() {
        let t = Instant::now();
        let at = |ms| Some(Some(t + Duration::from_millis(ms)));
        let until = |ends: &[Option<Option<Instant>>], quorum| combined_valid_until(ends.iter().copied(), quorum);
        assert_eq!(until(&[at(30), at(10), at(20)], 3), Some(t + Duration::from_millis(10)), "all: the earliest");
        assert_eq!(until(&[at(30), at(10), at(20)], 2), Some(t + Duration::from_millis(20)), "a majority");
        assert_eq!(until(&[at(30), None, at(20)], 2), Some(t + Duration::from_millis(20)), "a lost one counts not");
        assert_eq!(until(&[at(30), None, None], 2), None, "short of the quorum");
        assert_eq!(until(&[Some(None), at(20)], 1), None, "no end");
        assert_eq!(until(&[Some(None), at(20)], 2), Some(t + Duration::from_millis(20)));
    }
}
