//! What [`Client::inspect`](crate::Client::inspect) and
//! [`Client::locks`](crate::Client::locks) report: a lock's, a semaphore's or a group's
//! state in Redis at one instant, read without writing anything, with each holder's and
//! waiter's client where that client announced itself.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::observe::identity::ClientIdentity;

/// What the data under a name shows it to be. Redis keeps no kind: it is read off the
/// layout, so a plain lock, a spin lock and a non-reentrant lock all read as
/// [`Lock`](LockKind::Lock), a fair lock with nobody waiting reads as one too, and a
/// count-down latch reads as a [`Semaphore`](LockKind::Semaphore) (a number under the name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// A lock hash of owner fields and hold counts.
    Lock,
    /// A lock hash with a queue (or the deadlines of one) beside it.
    Fair,
    /// A lock hash with a `mode` field.
    ReadWrite,
    /// A fencing-token counter beside it (held or not).
    Fenced,
    /// A group lock's hash: per value, its holder, lease end and hold count.
    Group,
    /// A number of permits available, or permits taken with deadlines.
    Semaphore,
    /// An election's hash (`redlease_election:{NAME}`): its leader's owner field, the value
    /// it advertises and its term.
    Election,
}

impl LockKind {
    /// Its name in `redlease status --json` and `redlease ls --json`: `lock`, `fair`,
    /// `read-write`, `fenced`, `group`, `semaphore` or `election`.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Lock => "lock",
            LockKind::Fair => "fair",
            LockKind::ReadWrite => "read-write",
            LockKind::Fenced => "fenced",
            LockKind::Group => "group",
            LockKind::Semaphore => "semaphore",
            LockKind::Election => "election",
        }
    }
}

/// What a holder holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum HolderRole {
    /// The holder of a plain, fair or fenced lock.
    #[default]
    Lock,
    /// A reader of a read-write lock.
    Read,
    /// The writer of a read-write lock.
    Write,
    /// Values of a group lock ([`Holder::holds`] counts them).
    Values,
}

impl HolderRole {
    /// `lock`, `read`, `write` or `values`.
    pub fn name(self) -> &'static str {
        match self {
            HolderRole::Lock => "lock",
            HolderRole::Read => "read",
            HolderRole::Write => "write",
            HolderRole::Values => "values",
        }
    }
}

/// One holder of a lock. (`Default` is an empty record, to fill in for tests.)
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Holder {
    /// Its owner field, `<client id>:<number>` (Redisson's layout).
    pub owner: String,
    /// What it holds.
    pub role: HolderRole,
    /// Its reentrant holds (for a group lock: the values it holds).
    pub holds: u64,
    /// For a reader, the longest lease left among its read holds; for a group's holder,
    /// until its lease ends. `None` for others (the lock's lease is
    /// [`LockInfo::lease_left`]) and for a hold without expiry.
    pub lease_left: Option<Duration>,
    /// Who its client is, if it announced itself (a Redisson client does not).
    pub client: Option<ClientIdentity>,
}

impl Holder {
    /// Whether this is the keeper a once-per-window hold leaves
    /// ([`keep_at_least`](crate::Lock::keep_at_least)): the owner field `<client id>:0`,
    /// which no thread and no acquisition has, written by a release before the window
    /// ended. Nobody holds the lock then: the window keeps it taken until its lease
    /// ([`LockInfo::lease_left`]) runs out, and the client that released it may have exited.
    pub fn is_window_keeper(&self) -> bool {
        self.owner.rsplit_once(':').is_some_and(|(id, number)| !id.is_empty() && number == "0")
    }
}

/// One place in a fair lock's queue. (`Default` is an empty record, to fill in for tests.)
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Waiter {
    /// Its place, from 1 (next in line).
    pub position: usize,
    /// Its owner field, `<client id>:<number>`.
    pub owner: String,
    /// When it loses its place unless it asks again (the server's clock).
    pub deadline: Option<SystemTime>,
    /// Who its client is, if it announced itself.
    pub client: Option<ClientIdentity>,
}

/// A permit taken from a permit-expirable semaphore. (`Default` is an empty record.)
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Permit {
    /// Its id: as stored when printable ASCII, else in hexadecimal (redlease's ids are 16
    /// random bytes).
    pub id: String,
    /// When it lapses unless renewed (the server's clock); `None` when it never does.
    pub deadline: Option<SystemTime>,
}

/// Most permits an inspection lists (the count, [`LockInfo::permits_taken`], is whole).
pub const LISTED_PERMITS: usize = 100;

/// One name's state in Redis at one instant, read in one script call that writes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The name it was read under.
    pub name: String,
    /// What the data shows it to be; `None` when nothing is there, or when the key is
    /// something else ([`is_foreign`](LockInfo::is_foreign)).
    pub kind: Option<LockKind>,
    /// Redis's type of the key `name`: `hash`, `string`, `none` when absent, ...
    pub key_type: String,
    /// The writer first, then everyone else by owner.
    pub holders: Vec<Holder>,
    /// The key's time to live: `None` when there is no key or it does not expire.
    pub lease_left: Option<Duration>,
    /// A fair lock's queue, first in line first (at most 1,000).
    pub queue: Vec<Waiter>,
    /// A fenced lock's last token given; an election's current term.
    pub token: Option<u64>,
    /// A semaphore's permits available (the number under the name).
    pub permits_available: Option<i64>,
    /// How many permits of a permit-expirable semaphore are taken, past their deadline or
    /// not (one past it goes back at the next acquire).
    pub permits_taken: usize,
    /// The first [`LISTED_PERMITS`] of them by deadline.
    pub permits: Vec<Permit>,
    /// Connections subscribed to the lock's or the semaphore's channel: clients with a
    /// thread waiting there (a redlease client subscribes once however many of its
    /// threads wait; a fair lock's waiters are in [`queue`](LockInfo::queue)). `None`
    /// when the user may not count subscribers.
    pub waiting_clients: Option<u64>,
    /// The server's clock when it was read.
    pub server_time: SystemTime,
}

/// An empty record: nothing under an empty name, read at the epoch (to fill in for tests).
impl Default for LockInfo {
    fn default() -> LockInfo {
        LockInfo {
            name: String::new(),
            kind: None,
            key_type: "none".to_owned(),
            holders: Vec::new(),
            lease_left: None,
            queue: Vec::new(),
            token: None,
            permits_available: None,
            permits_taken: 0,
            permits: Vec::new(),
            waiting_clients: None,
            server_time: UNIX_EPOCH,
        }
    }
}

impl LockInfo {
    /// Whether someone holds it: a holder with holds, or a permit within its deadline.
    pub fn is_held(&self) -> bool {
        if self.kind == Some(LockKind::Semaphore) {
            return self.live_permits() > 0;
        }
        self.holders.iter().any(|h| h.holds > 0)
    }

    /// Permits taken whose deadline has not passed; all of them when more are taken than
    /// listed.
    pub fn live_permits(&self) -> usize {
        if self.permits_taken > self.permits.len() {
            return self.permits_taken;
        }
        self.permits.iter().filter(|p| p.deadline.is_none_or(|d| d >= self.server_time)).count()
    }

    /// A semaphore's permits in all: available plus taken; `None` for anything else.
    pub fn permits_total(&self) -> Option<i64> {
        (self.kind == Some(LockKind::Semaphore)).then(|| {
            self.permits_available.unwrap_or(0).saturating_add(i64::try_from(self.permits_taken).unwrap_or(i64::MAX))
        })
    }

    /// Whether the key exists but is not one of the library's (nor Redisson's).
    pub fn is_foreign(&self) -> bool {
        self.kind.is_none() && self.key_type != "none"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_keeper_is_number_zero_of_a_client() {
        let holder = |owner: &str| Holder { owner: owner.to_owned(), ..Holder::default() };
        assert!(holder("6d1f-aa:0").is_window_keeper());
        assert!(!holder("6d1f-aa:1").is_window_keeper());
        assert!(!holder("6d1f-aa:10").is_window_keeper());
        assert!(!holder(":0").is_window_keeper());
        assert!(!holder("0").is_window_keeper());
    }
}
