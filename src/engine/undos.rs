//! Undos in flight. An acquire whose reply does not come in time is undone from a thread
//! of its own, on its connection, behind the late command; the caller has returned by then.
//! Until that undo is done, a new acquire of the same lock by the same owner waits for it:
//! otherwise the late undo could take away the hold the new acquire was granted.
//!
//! | state of an owner's lock | acquire by that owner             | `stop()`      |
//! |--------------------------|-----------------------------------|---------------|
//! | no undo in flight        | goes ahead (one atomic load)      | goes ahead    |
//! | undo in flight           | waits for it, at most its bound   | waits for all |
//!
//! A Redlock attempt does not wait: a node with an undo in flight is one that answered
//! late, and the attempt counts it as failed.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crate::transport::Conn;
use parking_lot::{Condvar, Mutex};

#[derive(Default)]
pub(crate) struct Undos {
    /// How many undos are in flight: the fast path of an acquire reads only this.
    in_flight: AtomicUsize,
    /// In-flight undos per (lock name, owner).
    pending: Mutex<HashMap<(String, String), usize>>,
    done: Condvar,
}

/// One undo in flight; dropping it (when the undo is done, or was never needed) ends it.
pub(crate) struct PendingUndo {
    undos: Arc<Undos>,
    key: (String, String),
}

impl Undos {
    /// Records an undo of `owner`'s acquire of `name` as in flight.
    pub(crate) fn begin(self: &Arc<Self>, name: &str, owner: &str) -> PendingUndo {
        let key = (name.to_owned(), owner.to_owned());
        *self.pending.lock().entry(key.clone()).or_insert(0) += 1;
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        PendingUndo { undos: Arc::clone(self), key }
    }

    /// Waits until no undo of `owner`'s acquires of `name` is in flight, or `deadline`;
    /// whether none is.
    pub(crate) fn wait_for(&self, name: &str, owner: &str, deadline: Instant) -> bool {
        if self.in_flight.load(Ordering::Acquire) == 0 {
            return true;
        }
        let key = (name.to_owned(), owner.to_owned());
        let mut pending = self.pending.lock();
        while pending.contains_key(&key) {
            if self.done.wait_until(&mut pending, deadline).timed_out() {
                return !pending.contains_key(&key);
            }
        }
        true
    }

    /// Whether any undo is in flight (one atomic load: an acquire asks before it computes
    /// how long it would wait).
    pub(crate) fn any_in_flight(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    /// Whether an undo of `owner`'s acquires of `name` is in flight.
    pub(crate) fn in_flight_for(&self, name: &str, owner: &str) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
            && self.pending.lock().contains_key(&(name.to_owned(), owner.to_owned()))
    }

    /// Waits until no undo at all is in flight, or `deadline`; whether none is.
    pub(crate) fn wait_for_all(&self, deadline: Instant) -> bool {
        let mut pending = self.pending.lock();
        while !pending.is_empty() {
            if self.done.wait_until(&mut pending, deadline).timed_out() {
                return pending.is_empty();
            }
        }
        true
    }
}

impl Drop for PendingUndo {
    fn drop(&mut self) {
        let mut pending = self.undos.pending.lock();
        if let Some(count) = pending.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                pending.remove(&self.key);
            }
        }
        self.undos.in_flight.fetch_sub(1, Ordering::AcqRel);
        drop(pending);
        self.undos.done.notify_all();
    }
}

/// Hands `conn` to `undo` on a thread of its own (runs it here when no thread can start),
/// recorded as in flight for `owner`'s acquires of `name` until it is done.
pub(crate) fn hand_off(
    undos: &Arc<Undos>,
    name: &str,
    owner: &str,
    conn: Conn,
    undo: impl FnOnce(Conn) + Send + 'static,
) {
    let pending = undos.begin(name, owner);
    let slot = Arc::new(Mutex::new(Some((conn, undo, pending))));
    let theirs = Arc::clone(&slot);
    let started = std::thread::Builder::new().name("redlease-undo".into()).spawn(move || {
        if let Some((conn, undo, pending)) = theirs.lock().take() {
            undo(conn);
            drop(pending);
        }
    });
    if started.is_err()
        && let Some((conn, undo, pending)) = slot.lock().take()
    {
        undo(conn);
        drop(pending);
    }
}
