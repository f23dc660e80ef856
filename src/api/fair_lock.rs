//! The fair lock: Redisson's `RFairLock`, reentrant and first come, first served.

use crate::api::handle::{Handle, lock_handle};

/// A reentrant distributed lock that serves waiters in the order they arrived (Redisson's
/// `RFairLock`).
///
/// Same ladder, queries, guard and watchdog as [`Lock`](crate::Lock); the same Redis hash
/// too, plus a queue of waiting owners (`redisson_lock_queue:{name}`) and a sorted set of
/// their deadlines (`redisson_lock_timeout:{name}`). A waiter that arrives while the lock is
/// held or others wait queues up; a release wakes only the waiter whose turn it is (on its
/// own channel), not all of them.
///
/// - [`try_lock`](FairLock::try_lock) never queues, and does not jump a queue.
/// - A waiter keeps its place as long as it polls within the client's
///   [fair wait timeout](crate::ClientBuilder::fair_wait_timeout) (default 300 s), which it
///   does on its own while it waits. A waiter that died delays the queue by at most one
///   fair wait timeout.
/// - A wait that ends without the lock (deadline, error) leaves the queue at once.
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let guard = client.fair_lock("payouts").lock()?; // served in arrival order
/// drop(guard);
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct FairLock(pub(crate) Handle);

lock_handle!(FairLock);
