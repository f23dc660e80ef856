//! The reentrant lock: Redisson's `RLock`.

use crate::api::handle::{Handle, keep_at_least, lock_handle};

/// A reentrant, non-fair distributed lock (Redisson's `RLock`).
///
/// A handle is cheap to create and to clone, and does no I/O until used. Ownership is per
/// thread: the same thread acquiring again is reentrant and gets another guard; each guard
/// releases one hold. Another thread, in this process or another, waits.
///
/// Not fair: when the lock is released, whichever attempt reaches Redis first gets it.
/// Use [`FairLock`](crate::FairLock) when waiters must be served in order.
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let lock = client.lock("orders:42");
/// {
///     let _guard = lock.lock()?; // held, and renewed by the watchdog, until dropped
///     // ... critical section ...
/// }
/// if let Some(guard) = lock.try_lock_for(Duration::from_millis(500))? {
///     // ... critical section ...
///     guard.unlock()?;
/// }
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct Lock(pub(crate) Handle);

lock_handle!(Lock);
keep_at_least!(Lock);
