//! The acquisition loop every lock kind shares: try, subscribe, try again, park.
//!
//! | step | outcome | next |
//! |------|---------|------|
//! | first attempt | acquired | done |
//! | first attempt | held, no wait asked (or deadline passed) | `Ok(None)` |
//! | first attempt | held | join the channel's waiters; wait for Redis to confirm the subscription |
//! | retry | acquired | leave the waiters, done |
//! | retry | held, deadline passed | leave, `Ok(None)` |
//! | retry | held (TTL `t`) | park until a release message, `t`, or the deadline; retry |
//! | any | error, or shutdown | leave, `Err` |

use std::time::{Duration, Instant};

use crate::client::Inner;
use crate::clock;
use crate::error::Result;

/// How long a caller is prepared to wait.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    /// One attempt only.
    No,
    Until(Instant),
    Forever,
}

/// What one attempt found.
pub(crate) enum Attempt<T> {
    Acquired(T),
    /// Someone else holds it; `ttl` is its remaining lease, when it has one.
    Held {
        ttl: Option<Duration>,
    },
}

/// `channel` names the channel to wait on; it is asked for only when the first attempt
/// finds the lock held and the caller waits (an uncontended acquire never needs it).
pub(crate) fn acquire<T>(
    client: &Inner,
    channel: impl FnOnce() -> String,
    wait: Wait,
    mut attempt: impl FnMut() -> Result<Attempt<T>>,
) -> Result<Option<T>> {
    if let Attempt::Acquired(value) = attempt()? {
        return Ok(Some(value));
    }
    let deadline = match wait {
        Wait::No => return Ok(None),
        Wait::Until(deadline) => Some(deadline),
        Wait::Forever => None,
    };
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Ok(None);
    }
    let ticket = client.subscriber.join(&channel(), deadline)?;
    loop {
        client.check_running()?;
        let ttl = match attempt()? {
            Attempt::Acquired(value) => {
                ticket.acquired();
                return Ok(Some(value));
            }
            Attempt::Held { ttl } => ttl,
        };
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(None);
        }
        // A lost message costs at most the holder's TTL; a key with no TTL is looked at
        // again after one watchdog timeout.
        let until = clock::earliest(now.checked_add(ttl.unwrap_or(client.config.watchdog_timeout)), deadline);
        ticket.park(until);
        // Redis may have refused the subscription meanwhile (after a reconnect).
        ticket.check()?;
    }
}
