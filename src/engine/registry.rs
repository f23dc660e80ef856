//! The leases that threads of one client hold: one per (lock, thread, role), shared by that
//! thread's guards of the lock.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::engine::lease::{Lease, Renews};
use crate::fast_hash::FastMap;
use crate::kind::{Kind, Role};
use crate::owner;
use crate::span::Span;

/// A lease's place in the registry: (lock name, thread number, role).
type LeaseKey = (Arc<str>, u64, Role);

#[derive(Default)]
pub(crate) struct Registry {
    leases: Mutex<FastMap<LeaseKey, Arc<Lease>>>,
}

impl Registry {
    /// The current thread's live lease of `kind` on `name`, or a new one (replacing a lost
    /// one, renewed with the watchdog's `span`): a reentrant acquire joins the lease it
    /// already has.
    pub(crate) fn lease_for(&self, kind: Kind, name: &Arc<str>, owner: String, span: Span) -> Arc<Lease> {
        let key = (Arc::clone(name), owner::thread_number(), kind.role());
        let mut leases = self.leases.lock();
        match leases.get(&key) {
            Some(lease) if lease.is_live() => Arc::clone(lease),
            _ => {
                let lease = new_lease(kind, name, owner, span);
                leases.insert(key, Arc::clone(&lease));
                lease
            }
        }
    }

    /// The current thread's lease of `role` on `name`, live or not.
    pub(crate) fn current(&self, name: &Arc<str>, role: Role) -> Option<Arc<Lease>> {
        let key = (Arc::clone(name), owner::thread_number(), role);
        self.leases.lock().get(&key).cloned()
    }

    /// Whether the current thread holds a live lease of `role` on `name`.
    pub(crate) fn holds(&self, name: &Arc<str>, role: Role) -> bool {
        self.current(name, role).is_some_and(|l| l.is_live())
    }

    /// Removes a lease whose last guard is gone (unless a newer lease of the same thread
    /// has replaced it).
    pub(crate) fn forget(&self, lease: &Arc<Lease>) {
        // Only a lock's leases are kept here; the others have no role.
        let Some(role) = lease.role() else { return };
        let key = (Arc::clone(lease.name()), owner::thread_number(), role);
        let mut leases = self.leases.lock();
        if leases.get(&key).is_some_and(|l| Arc::ptr_eq(l, lease)) {
            leases.remove(&key);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.leases.lock().len()
    }
}

/// A lease of `owner` on `name`, renewed with the watchdog's `span`, in no registry (a
/// sendable guard's: no thread's).
pub(crate) fn new_lease(kind: Kind, name: &Arc<str>, owner: String, span: Span) -> Arc<Lease> {
    let field = kind.field(&owner);
    let hold_keys = kind.hold_keys(name, &owner);
    let renews = Renews::Hash { owner, role: kind.role(), field, hold_keys };
    Arc::new(Lease::new(Arc::clone(name), renews, span))
}
