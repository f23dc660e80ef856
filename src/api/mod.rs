//! The front door: what a user of the crate holds. The [`Client`](crate::Client) and its
//! builder, the lock handles and the ladder they share, the guards and their
//! [`LeaseWatch`](crate::LeaseWatch), the composites (`MultiLock`, `RedLock`), elections,
//! the semaphores and the count-down latch. Everything here rests on the floors below
//! ([`guide::design`](crate::guide::design#layers), "Layers"); `lib.rs` re-exports the
//! public names.

pub(crate) mod client;
pub(crate) mod election;
pub(crate) mod fair_lock;
pub(crate) mod fenced_lock;
pub(crate) mod group_lock;
pub(crate) mod guard;
pub(crate) mod handle;
pub(crate) mod latch;
pub(crate) mod lock;
pub(crate) mod multi_lock;
pub(crate) mod non_reentrant_lock;
pub(crate) mod permit_semaphore;
pub(crate) mod read_write_lock;
pub(crate) mod red_lock;
pub(crate) mod semaphore;
pub(crate) mod sendable_lock;
pub(crate) mod spin_lock;
pub(crate) mod watch;
