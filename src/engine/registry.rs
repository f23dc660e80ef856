//! The leases that threads of one client hold: one per (lock, thread, role), shared by that
//! thread's guards of the lock.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::base::fast_hash::FastMap;
use crate::base::owner;
use crate::base::span::Span;
use crate::engine::lease::{Lease, Renews};
use crate::kind::{Kind, Role};

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
    let hold_keys = kind.hold_keys(name, &owner);
    let owner: Arc<str> = Arc::from(owner);
    // A lease lives as long as its hold: its owner and field are shared where they are the
    // same text (a plain or a read hold's field is its owner).
    let field = match kind.role() {
        Role::Write => Arc::from(kind.field(&owner)),
        Role::Read | Role::Exclusive => Arc::clone(&owner),
    };
    let renews = Renews::Hash { owner, kind, field, hold_keys };
    Arc::new(Lease::new(Arc::clone(name), renews, span))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Every kind's lease renews the field the kind says its holds are under, and keeps
    /// one text for the owner and the field where they are the same.
    #[test]
    fn a_lease_renews_its_kinds_field_and_shares_it_with_the_owner_where_they_are_one() {
        let span = Span { lease: Duration::from_secs(30), drift: Duration::from_millis(30) };
        let name: Arc<str> = Arc::from("a-lock");
        for kind in Kind::ALL {
            let owner = "5f0c2c1e-client:7".to_owned();
            let lease = new_lease(kind, &name, owner.clone(), span);
            let Renews::Hash { owner: kept, field, .. } = lease.renews() else { panic!("{kind:?}: a lock's lease") };
            assert_eq!(**kept, *owner, "{kind:?}");
            assert_eq!(**field, *kind.field(&owner), "{kind:?}");
            assert_eq!(Arc::ptr_eq(kept, field), **field == *owner, "{kind:?}: one allocation when they are one text");
        }
    }
}
