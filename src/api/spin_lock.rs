//! The spin lock: Redisson's `RSpinLock`, for deployments without pub/sub.

use crate::api::handle::{Handle, keep_at_least, lock_handle};
use crate::base::backoff::BackOff;

/// A reentrant distributed lock that needs no pub/sub (Redisson's `RSpinLock`): its
/// waiters poll, sleeping between attempts as its [`BackOff`] says, and its releases send
/// no message. For deployments that do not carry pub/sub (twemproxy, Envoy's Redis proxy,
/// some managed offerings) or that do not grant a client channels.
///
/// The same key, layout, watchdog, guard and queries as a [`Lock`](crate::Lock): a spin
/// lock and a lock of the same name (redlease's or Redisson's) exclude each other. A
/// waiter of a [`Lock`](crate::Lock) on that name is not woken by a spin lock's release (no
/// message): it finds the lock free at its next look (at most 5 s, or the holder's TTL).
/// Hand-off costs what the sleeps cost: with the default back-off, a waiter looks again
/// after 1, 2, 4, … ms, then every 128 ms (about 1 to 2 jittered milliseconds more per
/// attempt, as Redisson's).
///
/// ```no_run
/// use std::time::Duration;
/// use redlease::BackOff;
///
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let lock = client.spin_lock("nightly").with_backoff(BackOff::constant(Duration::from_millis(50)));
/// let guard = lock.lock()?; // no SUBSCRIBE, ever
/// drop(guard);
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct SpinLock(pub(crate) Handle);

lock_handle!(SpinLock);
keep_at_least!(SpinLock);

impl SpinLock {
    /// How a waiter sleeps between attempts. Settings out of range are `InvalidInput` when
    /// the lock is used, before anything is sent.
    ///
    /// Defaults to [`BackOff::DEFAULT`]: Redisson's exponential back-off, from 1 ms to 128 ms,
    /// doubling.
    #[must_use = "with_backoff returns a new handle and leaves this one unchanged"]
    pub fn with_backoff(mut self, backoff: BackOff) -> SpinLock {
        self.0.backoff = Some(backoff);
        self
    }
}
