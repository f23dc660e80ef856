//! The library's lock handle for a `--kind`.

use std::time::Duration;

use redlease::{AnyLock, Client};

use crate::args::Kind;

/// The handle of lock `name` of `kind`, with a fixed `lease` when one is given, kept taken
/// at least `keep` after each grant when one is given (only the kinds that can be: see
/// [`keeps`]).
pub fn handle(client: &Client, kind: Kind, name: &str, lease: Option<Duration>, keep: Option<Duration>) -> AnyLock {
    let lock: AnyLock = match (kind, keep) {
        (Kind::Lock, Some(keep)) => client.lock(name).keep_at_least(keep).into(),
        (Kind::Fenced, Some(keep)) => client.fenced_lock(name).keep_at_least(keep).into(),
        (Kind::Spin, Some(keep)) => client.spin_lock(name).keep_at_least(keep).into(),
        (Kind::Lock, _) => client.lock(name).into(),
        (Kind::Fair, _) => client.fair_lock(name).into(),
        (Kind::Read, _) => client.read_write_lock(name).read().into(),
        (Kind::Write, _) => client.read_write_lock(name).write().into(),
        (Kind::Fenced, _) => client.fenced_lock(name).into(),
        (Kind::Spin, _) => client.spin_lock(name).into(),
    };
    match lease {
        Some(lease) => lock.with_lease(lease),
        None => lock,
    }
}

/// Whether a lock of `kind` can be kept taken after its release (`--at-least`).
pub fn keeps(kind: Kind) -> bool {
    matches!(kind, Kind::Lock | Kind::Fenced | Kind::Spin)
}
