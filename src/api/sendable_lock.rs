//! Locks whose guards may change threads.

use crate::api::guard::{LockGuard, Sendable};
use crate::api::handle::{Handle, acquire_ladder, handle_basics, keep_at_least};
use crate::api::non_reentrant_lock::{NonReentrantFairLock, NonReentrantLock};

/// A non-reentrant lock whose guards are `Send`: each acquisition holds the lock under an
/// owner of its own (`<client id>:<number>`, a number no thread of the process has), so
/// its [`LockGuard<Sendable>`](crate::LockGuard) may be moved to another thread, a pool's
/// worker for instance, and released, renewed and dropped there.
///
/// Get one from [`NonReentrantLock::sendable`] or [`NonReentrantFairLock::sendable`]: the
/// same key, layout, wake-ups and queue as the lock it came from, so it excludes that
/// lock's thread-bound holders and Redisson's `RLock` alike.
///
/// What a thread gives up for it: with no thread as owner, nobody can tell that the thread
/// asking holds the lock already. A thread that asks again while its own sendable guard
/// lives waits on itself (with `lock`, forever, as a `std::sync::Mutex` locked twice may);
/// there is no `WouldDeadlock` and no hold count. That is why only the non-reentrant kinds
/// have it: a reentrant lock's meaning is "the same owner may ask again", which needs the
/// owner to be the thread.
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let lock = client.non_reentrant_lock("invoice-42").sendable();
/// let guard = lock.lock()?;
/// let worker = std::thread::spawn(move || {
///     // ... the work the lock guards, on another thread ...
///     guard.unlock()
/// });
/// worker.join().expect("worker")?;
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct SendableLock(pub(crate) Handle);

handle_basics!(SendableLock);
acquire_ladder!(SendableLock, LockGuard<Sendable>);
keep_at_least!(SendableLock);

impl NonReentrantLock {
    /// This lock with guards that may change threads: see [`SendableLock`].
    pub fn sendable(self) -> SendableLock {
        SendableLock(Handle { per_thread: false, ..self.0 })
    }
}

impl NonReentrantFairLock {
    /// This lock with guards that may change threads: see [`SendableLock`]. The queue is
    /// kept per acquisition: each waiting call has its place.
    pub fn sendable(self) -> SendableLock {
        SendableLock(Handle { per_thread: false, ..self.0 })
    }
}
