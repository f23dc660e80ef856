//! The library's lock handle for a `--kind`.

use std::time::Duration;

use redlease::{AnyLock, Client};

use crate::args::Kind;

/// The handle of lock `name` of `kind`, with a fixed `lease` when one is given.
pub fn handle(client: &Client, kind: Kind, name: &str, lease: Option<Duration>) -> AnyLock {
    let lock: AnyLock = match kind {
        Kind::Lock => client.lock(name).into(),
        Kind::Fair => client.fair_lock(name).into(),
        Kind::Read => client.read_write_lock(name).read().into(),
        Kind::Write => client.read_write_lock(name).write().into(),
        Kind::Fenced => client.fenced_lock(name).into(),
        Kind::Spin => client.spin_lock(name).into(),
    };
    match lease {
        Some(lease) => lock.with_lease(lease),
        None => lock,
    }
}
