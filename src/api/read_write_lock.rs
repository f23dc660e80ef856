//! The read-write lock: Redisson's `RReadWriteLock`. Readers share, a writer excludes
//! everyone.

use std::fmt;
use std::sync::Arc;

use crate::api::handle::{Handle, lock_handle};
use crate::engine::Engine;
use crate::kind::Kind;

/// A distributed read-write lock (Redisson's `RReadWriteLock`): any number of threads may
/// hold [`read`](ReadWriteLock::read) at once; [`write`](ReadWriteLock::write) excludes
/// every other holder, readers included.
///
/// - Both sides are reentrant per thread and use the same [`LockGuard`](crate::LockGuard),
///   watchdog and ladder as [`Lock`](crate::Lock).
/// - **Downgrade**: a thread holding the write lock may take the read lock; releasing the
///   write lock then leaves the lock in read mode, held by that thread's read holds.
/// - **No upgrade**: a thread that holds only read locks and asks for the write lock gets
///   [`ErrorKind::WouldDeadlock`](crate::ErrorKind::WouldDeadlock) at once (it would wait for
///   itself forever).
/// - **Readers are not held back for a waiting writer** (Redisson's policy): while readers
///   keep overlapping, a writer waits. See
///   [`guide::guarantees`](crate::guide::guarantees#read-write-lock).
///
/// Redis layout: one hash `name` with `mode` (`read` or `write`), `<owner>` (read holds) and
/// `<owner>:write` (write holds); one key per read hold, `{name}:<owner>:rwlock_timeout:<k>`,
/// whose lease is that hold's, so a dead reader's holds end on their own; channel
/// `redisson_rwlock:{name}`.
///
/// ```no_run
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let doc = client.read_write_lock("doc:7");
/// {
///     let _r1 = doc.read().lock()?;
///     // ... other readers may hold it too ...
/// }
/// let _w = doc.write().lock()?; // alone
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct ReadWriteLock {
    engine: Arc<Engine>,
    name: Arc<str>,
}

/// The read side of a [`ReadWriteLock`]: shared with other readers.
#[derive(Clone)]
pub struct ReadLock(pub(crate) Handle);

/// The write side of a [`ReadWriteLock`]: exclusive.
#[derive(Clone)]
pub struct WriteLock(pub(crate) Handle);

impl ReadWriteLock {
    pub(crate) fn new(engine: Arc<Engine>, name: String) -> ReadWriteLock {
        ReadWriteLock { engine, name: name.into() }
    }

    /// The lock's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The read side. No I/O.
    #[must_use]
    pub fn read(&self) -> ReadLock {
        ReadLock(self.handle(Kind::Read))
    }

    /// The write side. No I/O.
    #[must_use]
    pub fn write(&self) -> WriteLock {
        WriteLock(self.handle(Kind::Write))
    }

    fn handle(&self, kind: Kind) -> Handle {
        Handle::new(Arc::clone(&self.engine), Arc::clone(&self.name), kind)
    }
}

lock_handle!(ReadLock);

lock_handle!(WriteLock);

impl fmt::Debug for ReadWriteLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadWriteLock").field("name", &self.name).finish()
    }
}
