//! The Lua scripts, one file each under `lua/`, compiled in and run with `EVALSHA`.
//!
//! `redis::Script` sends `EVALSHA` and, on `NOSCRIPT` (a restart, a failover or a
//! `SCRIPT FLUSH` emptied the server's cache), loads the script and retries once.

use std::sync::LazyLock;

/// Acquire a reentrant lock: see `lua/acquire.lua`.
pub(crate) static ACQUIRE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../lua/acquire.lua")));
/// Release one hold, idempotent per request: see `lua/release.lua`.
pub(crate) static RELEASE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../lua/release.lua")));
/// Renew a batch of leases: see `lua/renew.lua`.
pub(crate) static RENEW: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../lua/renew.lua")));
/// Delete a lock whoever holds it: see `lua/force_unlock.lua`.
pub(crate) static FORCE_UNLOCK: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../lua/force_unlock.lua")));

/// Every script, for loading them all when a client is built.
pub(crate) fn all() -> [&'static redis::Script; 4] {
    [&ACQUIRE, &RELEASE, &RENEW, &FORCE_UNLOCK]
}
