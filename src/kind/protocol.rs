//! What every kind's scripts take and answer: the release request, the acquire reply, and
//! the role a hold plays.

use std::time::Duration;

/// Which kind of hold a lease stands for: a thread's read and write holds on one
/// read-write lock are different hash fields, so they are different leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    Exclusive,
    Read,
    Write,
}

/// What one acquire script call answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Acquired, with the fencing token of a fenced lock.
    Granted { token: Option<u64> },
    /// Held by someone else; how long the caller may sleep before trying again (`None`:
    /// no expiry known).
    Busy { ttl: Option<Duration> },
}

impl Reply {
    /// Reads the reply of a script that returns nil when acquired and a PTTL otherwise.
    pub(crate) fn from_pttl(reply: Option<i64>) -> Reply {
        match reply {
            None => Reply::Granted { token: None },
            Some(ms) => Reply::Busy { ttl: u64::try_from(ms).ok().map(Duration::from_millis) },
        }
    }
}

/// One release request, as the release scripts take it.
pub(crate) struct Release<'a> {
    pub(crate) name: &'a str,
    pub(crate) owner: &'a str,
    /// Lease the owner's remaining holds need, when holds remain.
    pub(crate) keep_millis: u64,
    pub(crate) request_id: &'a str,
    pub(crate) latch_millis: u64,
    /// The client's fair wait timeout (fair locks hand the head a new deadline).
    pub(crate) wait_millis: u64,
    /// This request was sent before: the script looks for the outcome its latch stored.
    /// A first send skips that look, since no latch can exist yet.
    pub(crate) retry: bool,
    /// A release that frees a plain or fenced lock publishes on its channel whoever
    /// listens there (see `ClientBuilder::always_publish_releases`).
    pub(crate) always_publish: bool,
}

impl Release<'_> {
    /// The script argument of [`retry`](Release::retry).
    pub(crate) fn retry_arg(&self) -> &'static str {
        if self.retry { "1" } else { "0" }
    }
}
