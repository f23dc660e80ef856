//! What one batch of renewals sends: per node, one renew call for each kind of lease it
//! holds (locks, permits, group values), and a lease's call alone when its batch failed.

use std::sync::Arc;

use crate::base::error::Result;
use crate::base::keys;
use crate::base::scripts::PubSub;
use crate::engine::lease::{Lease, Renews};
use crate::kind::{self, GroupEntry, PermitEntry, RenewCall, RenewEntry, RenewOutcome, Renewal};
use crate::transport::{Pool, RunId, Topology};

/// The leases of one batch that are still held with a watchdog, each with whether it also
/// has fixed-lease holds.
pub(super) type Chunk = Vec<(Arc<Lease>, bool)>;

/// Per call of a batch: its replies and the run of the server that gave them.
pub(super) type Replies = Vec<Result<(Vec<RenewOutcome>, Option<RunId>)>>;

/// The renew calls of one node's batch: one per kind of lease it has. It keeps no
/// borrow of the batch, so that a batch can be in flight while the next is written.
pub(super) struct Plan {
    pub(super) parts: Vec<Part>,
}

/// One renew call of a batch: the kind of lease it renews, the places of its leases in
/// the batch, the call.
pub(super) struct Part {
    pub(super) kind: PartKind,
    pub(super) indexes: Vec<usize>,
    pub(super) call: RenewCall,
}

/// The kind of lease a call renews.
#[derive(Clone, Copy)]
pub(super) enum PartKind {
    Locks,
    Permits,
    Groups,
}

/// One lease's entry in a renew call, by its kind.
pub(super) enum Entry<'a> {
    Lock(RenewEntry<'a>),
    Permits(PermitEntry<'a>),
    Group(GroupEntry<'a>),
}

impl<'a> Entry<'a> {
    /// The entry of `lease` (`fixed_too`: it also has fixed-lease holds, which the renewal
    /// must never cut short).
    pub(super) fn of(lease: &'a Lease, fixed_too: bool) -> Entry<'a> {
        let name = lease.name();
        match lease.renews() {
            Renews::Hash { field, hold_keys, .. } => {
                let how = match (hold_keys, fixed_too) {
                    (Some(prefix), _) => Renewal::ReadHolds(prefix),
                    (None, true) => Renewal::LengthenOnly,
                    (None, false) => Renewal::Reset,
                };
                Entry::Lock(RenewEntry { name, field, how })
            }
            Renews::Permits(ids) => Entry::Permits(PermitEntry { name, ids }),
            Renews::Group { owner, fields } => Entry::Group(GroupEntry { name, owner, fields }),
        }
    }
}

impl Plan {
    /// One call for the locks of `chunk`, one for its permits and one for its groups (for
    /// those it has), for a node of `pubsub`'s kind.
    pub(super) fn of(pubsub: PubSub, lease_millis: u64, chunk: &[(Arc<Lease>, bool)]) -> Plan {
        let (mut locks, mut permits, mut groups) = (Vec::new(), Vec::new(), Vec::new());
        for (i, (lease, fixed_too)) in chunk.iter().enumerate() {
            match Entry::of(lease, *fixed_too) {
                Entry::Lock(entry) => locks.push((i, entry)),
                Entry::Permits(entry) => permits.push((i, entry)),
                Entry::Group(entry) => groups.push((i, entry)),
            }
        }
        let mut parts = Vec::new();
        if !locks.is_empty() {
            let (indexes, entries): (Vec<usize>, Vec<RenewEntry<'_>>) = locks.into_iter().unzip();
            let call = kind::renew_call(pubsub, lease_millis, &entries);
            parts.push(Part { kind: PartKind::Locks, indexes, call });
        }
        if !permits.is_empty() {
            let (indexes, entries): (Vec<usize>, Vec<PermitEntry<'_>>) = permits.into_iter().unzip();
            let call = kind::renew_permits_call(pubsub, lease_millis, &entries);
            parts.push(Part { kind: PartKind::Permits, indexes, call });
        }
        if !groups.is_empty() {
            let (indexes, entries): (Vec<usize>, Vec<GroupEntry<'_>>) = groups.into_iter().unzip();
            let call = kind::renew_groups_call(pubsub, lease_millis, &entries);
            parts.push(Part { kind: PartKind::Groups, indexes, call });
        }
        Plan { parts }
    }
}

impl Part {
    /// What its call does, for an error's words.
    pub(super) fn what(&self) -> &'static str {
        match self.kind {
            PartKind::Locks => "renewing leases",
            PartKind::Permits => "renewing permits",
            PartKind::Groups => "renewing group leases",
        }
    }

    /// Renews its `j`th lease of `chunk` alone, for `lease_millis`, on the pool `topology`
    /// has for it now (its key declared, so that `MOVED` and `ASK` take it where its slot
    /// is), with `run` given the pool, what the call does, and the call.
    pub(super) fn alone(
        &self,
        j: usize,
        chunk: &[(Arc<Lease>, bool)],
        lease_millis: u64,
        topology: &Topology,
        run: impl FnOnce(&Pool, &'static str, RenewCall) -> Result<(Vec<RenewOutcome>, Option<RunId>)>,
    ) -> Result<(Vec<RenewOutcome>, Option<RunId>)> {
        let (lease, fixed_too) = &chunk[self.indexes[j]];
        match Entry::of(lease, *fixed_too) {
            Entry::Lock(entry) => {
                let pool = topology.pool_for(entry.name);
                run(&pool, "renewing a lease", kind::renew_call(pool.pubsub(), lease_millis, &[entry]))
            }
            Entry::Permits(entry) => {
                let pool = topology.pool_for(&keys::permit_timeouts(entry.name));
                run(&pool, "renewing permits", kind::renew_permits_call(pool.pubsub(), lease_millis, &[entry]))
            }
            Entry::Group(entry) => {
                let pool = topology.pool_for(entry.name);
                run(&pool, "renewing a group lease", kind::renew_groups_call(pool.pubsub(), lease_millis, &[entry]))
            }
        }
    }
}
