//! Distributed locks on Redis for ordinary threaded Rust programs, the way Java programmers
//! know them from Redisson.
//!
//! - **Reentrant, per-thread ownership**: the owner of a hold is `<client uuid>:<thread
//!   number>`; the same thread acquiring again gets another guard, each guard releases one
//!   hold.
//! - **Leases kept alive by a watchdog**: a lock taken without a fixed lease is renewed
//!   every third of the watchdog timeout while its guard lives, and frees itself after the
//!   timeout if the process dies.
//! - **Pub/sub wake-ups**: a waiting thread parks until the holder's release message
//!   arrives, about one round trip after the release, instead of polling.
//! - **Redisson's data layout**: a Rust service and a Java service using Redisson can guard
//!   the same resource with the same lock.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//!
//! let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
//! let lock = client.lock("orders:42");
//!
//! // Block until held; released when the guard drops.
//! let guard = lock.lock()?;
//! assert!(guard.is_held());
//! drop(guard);
//!
//! // Contention is not an error: `Ok(None)` means someone else holds it.
//! match lock.try_lock_for(Duration::from_millis(200))? {
//!     Some(guard) => guard.unlock()?,
//!     None => { /* someone else holds it: do something else */ }
//! }
//! # Ok::<(), redlease::Error>(())
//! ```
//!
//! # Acquisition
//!
//! Every lock offers the same ladder, after `parking_lot`: [`Lock::lock`] blocks until
//! held, [`Lock::try_lock`] makes one attempt, [`Lock::try_lock_for`] and
//! [`Lock::try_lock_until`] wait at most so long. `Err` means the operation could not be
//! carried out (Redis unreachable, a timeout, bad input, shutdown); see [`ErrorKind`].
//!
//! # Seeing into it
//!
//! [`Client::inspect`] reads a lock's holders (with each one's host, pid and program, as
//! its client announced itself while it held or waited), lease, queue, token and permits,
//! writing nothing; [`Client::locks`] lists them by name pattern; [`Client::stats`]
//! counts acquisitions by outcome, waits and holds, losses and wake-ups. The `redlease`
//! command line's `status` and `ls` print the same. [`guide::operating`] says what to
//! watch and how to handle a stuck holder.
//!
//! # Guarantees
//!
//! While Redis is a single master that does not lose writes and the holder's process keeps
//! running, at most one owner holds a lock. A process that is paused or cut off longer than
//! its lease can lose the lock while still inside its critical section; its guard then
//! reports [`LockGuard::is_held`] `== false` and [`LockEvents::lease_lost`] is called. No
//! lease-based lock can promise more: [`guide::guarantees`] says what holds under which
//! faults, measured; [`guide`] has the rest of the documents of record (design, deployment,
//! performance, the command line).

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms, unreachable_pub)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::print_stdout, clippy::print_stderr)
)]

// Floors, top to bottom (see docs/design.md, "Layers"), one folder or two each: each
// imports only from its own floor or below.
// Front door: the public handles, guards, the client and its builder.
mod api;
pub mod guide;
// Engine: the lease registry and the acquire, release and renewal flows.
mod engine;
// Kinds: each lock kind's scripts, keys and replies.
mod kind;
// Transport: connections, the subscriber, and which connection serves a key.
mod transport;
// Foundation: seeing into a client (events, counts, tracing, metrics, identity,
// inspection), and what it runs on (settings, threads, interrupts).
mod observe;
mod support;
// Pure, no I/O: what the servers' replication and disks make of a grant, and the small
// helpers (errors, deadlines, the lease arithmetic, key names, scripts, the timing wheel).
mod base;
mod durability;

pub use api::client::{Client, ClientBuilder, ClientStats, redact_url};
pub use api::election::{Election, Leader, LeaderObserver, Leadership, MAX_ADVERTISED_LEN};
pub use api::fair_lock::FairLock;
pub use api::fenced_lock::{FencedGuard, FencedLock};
pub use api::group_lock::{GroupGuard, GroupLock};
pub use api::guard::{GuardMode, LockGuard, Sendable, ThreadBound};
pub use api::latch::CountDownLatch;
pub use api::lock::Lock;
pub use api::multi_lock::{AnyLock, MultiLock};
pub use api::non_reentrant_lock::{NonReentrantFairLock, NonReentrantLock};
pub use api::permit_semaphore::{PermitExpirableSemaphore, PermitGuard};
pub use api::read_write_lock::{ReadLock, ReadWriteLock, WriteLock};
pub use api::red_lock::{RedLock, RedLockGuard};
pub use api::semaphore::{Semaphore, SemaphoreGuard};
pub use api::sendable_lock::SendableLock;
pub use api::spin_lock::SpinLock;
pub use api::watch::LeaseWatch;
pub use base::backoff::BackOff;
pub use base::error::{Error, ErrorKind, Result};
pub use base::keys::MAX_NAME_LEN;
pub use durability::disk_view::SyncMode;
pub use durability::replica_view::ReplicaAcks;
pub use engine::{LeaseState, MAX_GROUP_VALUES};
pub use observe::events::LockEvents;
pub use observe::histogram::DurationHistogram;
pub use observe::identity::ClientIdentity;
pub use observe::inspection::{Holder, HolderRole, LISTED_PERMITS, LockInfo, LockKind, Permit, Waiter};
pub use support::config::{
    DEFAULT_CLOCK_DRIFT_MARGIN, DEFAULT_CLOCK_DRIFT_RATE, DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_FAIR_WAIT_TIMEOUT, DEFAULT_PING_INTERVAL, DEFAULT_POOL_SIZE, DEFAULT_RENEW_BATCH_SIZE,
    DEFAULT_REPLICA_SYNC_TIMEOUT, DEFAULT_RETRY_BUDGET, DEFAULT_WATCHDOG_TIMEOUT, ReplicaPolicy,
    ShardedSubscriptionMode,
};
pub use support::interrupt::Interrupter;

/// The `redis` crate (1.x) that redlease is built on, whose types its API lends and gives:
/// [`Client::with_connection`] lends a `redis::Connection`, [`Error::redis_error`] gives a
/// `redis::RedisError`. Named through `redlease::redis`, it is the very version redlease
/// was built with, with no dependency to add; a program that adds `redis = "1.8"` itself
/// gets the same crate (Cargo takes one 1.x for both).
pub use redis;

/// The README's example, compiled as a doctest so that it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
