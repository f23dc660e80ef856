//! The non-reentrant locks: Redisson's `RNonReentrantLock` and `RNonReentrantFairLock`.

use crate::api::handle::{Handle, keep_at_least, lock_handle};

/// A distributed lock that an owner holds at most once (Redisson's `RNonReentrantLock`):
/// the reentrant [`Lock`](crate::Lock)'s layout, watchdog, wake-ups and guard, but a
/// thread that holds it and asks again gets
/// [`WouldDeadlock`](crate::ErrorKind::WouldDeadlock) at once, before anything is sent,
/// where Redisson throws `IllegalMonitorStateException` (its script answers
/// `NON_REENTRANT_REACQUIRE`, which redlease reads the same way). Use it where a second
/// acquire by the holder is a bug to be caught, not a hold to be counted.
///
/// It shares its key with a [`Lock`](crate::Lock) of the same name (and with Redisson's
/// `RLock` and `RNonReentrantLock`): they exclude each other, and their releases wake each
/// other's waiters.
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let lock = client.non_reentrant_lock("ledger");
/// let guard = lock.lock()?;
/// let again = lock.try_lock().expect_err("held by this thread already");
/// assert!(again.kind() == redlease::ErrorKind::WouldDeadlock);
/// drop(guard);
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct NonReentrantLock(pub(crate) Handle);

lock_handle!(NonReentrantLock);
keep_at_least!(NonReentrantLock);

/// A fair lock that an owner holds at most once (Redisson's `RNonReentrantFairLock`): the
/// [`FairLock`](crate::FairLock)'s queue, deadlines and wake-ups, and the
/// [`NonReentrantLock`]'s refusal of a second hold (`WouldDeadlock`, before anything is
/// sent).
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let guard = client.non_reentrant_fair_lock("payouts").lock()?; // served in arrival order
/// drop(guard);
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct NonReentrantFairLock(pub(crate) Handle);

lock_handle!(NonReentrantFairLock);
