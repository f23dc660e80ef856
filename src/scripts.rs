//! The Lua scripts, one file each under `lua/`, compiled in and run with `EVALSHA`.
//!
//! `redis::Script` sends `EVALSHA` and, on `NOSCRIPT` (a restart, a failover or a
//! `SCRIPT FLUSH` emptied the server's cache), loads the script and retries once; so does
//! `Conn::script`, which writes the calls of the hot path (a plain lock's acquire and
//! release) without the crate's per-argument allocations.

use std::sync::LazyLock;

/// One script from `lua/`, in two builds: messages sent with `PUBLISH` (classic pub/sub) or
/// with `SPUBLISH` (a Redis 7 cluster's sharded pub/sub: see [`PubSub`]). Each is
/// compiled when first used.
pub(crate) struct Lua {
    /// The source, as in `lua/` (with the prelude when it needs one).
    code: &'static str,
    /// What goes before the sharded build's source: a script that touches the keys of
    /// several locks (a renewal batch) declares that it may, which a cluster requires of
    /// a script whose keys span slots (they must still be on one node). Such a script
    /// takes those keys as arguments there: a command's declared keys must share a slot.
    sharded_header: &'static str,
    classic: LazyLock<redis::Script>,
    sharded: LazyLock<redis::Script>,
}

/// How lock messages travel. Redis Cluster 7 has sharded pub/sub (`SPUBLISH` to the
/// channel's slot, `SSUBSCRIBE` on its owner), and Redisson uses it there: so does redlease,
/// on the same channels, or neither would wake the other's waiters. Everywhere else,
/// classic `PUBLISH` / `SUBSCRIBE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PubSub {
    Classic,
    Sharded,
}

impl Lua {
    /// The build for connections whose messages travel as `pubsub` says.
    pub(crate) fn on(&self, pubsub: PubSub) -> &redis::Script {
        match pubsub {
            PubSub::Classic => &self.classic,
            PubSub::Sharded => &self.sharded,
        }
    }
}

impl Lua {
    /// The source of the build for `pubsub`, for `SCRIPT LOAD`.
    pub(crate) fn code(&self, pubsub: PubSub) -> std::borrow::Cow<'static, str> {
        match pubsub {
            PubSub::Classic => self.code.into(),
            PubSub::Sharded => sharded_code(self.sharded_header, self.code).into(),
        }
    }
}

/// The sharded build of a script's source: every `'publish'` (the scripts name the command
/// only that way, to run it or to check it) becomes `'spublish'`, and `PUBSUB`'s `'numsub'`
/// (counting a channel's subscribers) becomes `'shardnumsub'`.
fn sharded_code(header: &str, source: &str) -> String {
    format!("{header}{}", source.replace("'publish'", "'spublish'").replace("'numsub'", "'shardnumsub'"))
}

fn sharded(header: &str, source: &str) -> redis::Script {
    redis::Script::new(&sharded_code(header, source))
}

/// The header of a script whose keys may span slots (Redis 7 script flags).
const CROSS_SLOT: &str = "#!lua flags=allow-cross-slot-keys\n";

/// A script from `lua/`.
macro_rules! script {
    ($file:literal) => {
        script!(source = include_str!(concat!("../lua/", $file)), header = "")
    };
    // A script that calls `may` or reads the server's clock: `lua/prelude.lua` goes first.
    ($file:literal, with_prelude) => {
        script!(
            source = concat!(include_str!("../lua/prelude.lua"), include_str!(concat!("../lua/", $file))),
            header = ""
        )
    };
    // A script that renews the leases of several locks at once: the prelude and
    // `lua/batch.lua` go first, and in a cluster it may touch keys of several slots of its
    // node.
    ($file:literal, batch) => {
        script!(
            source = concat!(
                include_str!("../lua/prelude.lua"),
                include_str!("../lua/batch.lua"),
                include_str!(concat!("../lua/", $file))
            ),
            header = CROSS_SLOT
        )
    };
    // A group lock's script: the prelude and the layout's helpers, `lua/group.lua`.
    ($file:literal, group) => {
        script!(
            source = concat!(
                include_str!("../lua/prelude.lua"),
                include_str!("../lua/group.lua"),
                include_str!(concat!("../lua/", $file))
            ),
            header = ""
        )
    };
    // A group lock's renewal batch: as `batch`, with `lua/group.lua`.
    ($file:literal, group_batch) => {
        script!(
            source = concat!(
                include_str!("../lua/prelude.lua"),
                include_str!("../lua/batch.lua"),
                include_str!("../lua/group.lua"),
                include_str!(concat!("../lua/", $file))
            ),
            header = CROSS_SLOT
        )
    };
    (source = $source:expr, header = $header:expr) => {
        Lua {
            code: $source,
            sharded_header: $header,
            classic: LazyLock::new(|| redis::Script::new($source)),
            sharded: LazyLock::new(|| sharded($header, $source)),
        }
    };
}

/// Acquire a reentrant lock: see `lua/acquire.lua`.
pub(crate) static ACQUIRE: Lua = script!("acquire.lua", with_prelude);
/// Release one hold, idempotent per request: see `lua/release.lua`.
pub(crate) static RELEASE: Lua = script!("release.lua", with_prelude);
/// Renew a batch of leases: see `lua/renew.lua`.
pub(crate) static RENEW: Lua = script!("renew.lua", batch);
/// A waiting client stops waiting for a reentrant or fenced lock: see
/// `lua/waiter_leave.lua`.
pub(crate) static WAITER_LEAVE: Lua = script!("waiter_leave.lua", with_prelude);
/// Delete a lock whoever holds it: see `lua/force_unlock.lua`.
pub(crate) static FORCE_UNLOCK: Lua = script!("force_unlock.lua", with_prelude);

/// Acquire a fair lock or keep a place in its queue: see `lua/fair_acquire.lua`.
pub(crate) static FAIR_ACQUIRE: Lua = script!("fair_acquire.lua", with_prelude);
/// Leave a fair lock's queue: see `lua/fair_give_up.lua`.
pub(crate) static FAIR_GIVE_UP: Lua = script!("fair_give_up.lua", with_prelude);
/// Release one hold of a fair lock and wake the next waiter: see `lua/fair_release.lua`.
pub(crate) static FAIR_RELEASE: Lua = script!("fair_release.lua", with_prelude);
/// Delete a fair lock whoever holds it: see `lua/fair_force_unlock.lua`.
pub(crate) static FAIR_FORCE_UNLOCK: Lua = script!("fair_force_unlock.lua", with_prelude);

/// Take a read hold: see `lua/rw_read_acquire.lua`.
pub(crate) static RW_READ_ACQUIRE: Lua = script!("rw_read_acquire.lua", with_prelude);
/// Release a read hold: see `lua/rw_read_release.lua`.
pub(crate) static RW_READ_RELEASE: Lua = script!("rw_read_release.lua", with_prelude);
/// Take the write hold: see `lua/rw_write_acquire.lua`.
pub(crate) static RW_WRITE_ACQUIRE: Lua = script!("rw_write_acquire.lua");
/// Release a write hold: see `lua/rw_write_release.lua`.
pub(crate) static RW_WRITE_RELEASE: Lua = script!("rw_write_release.lua", with_prelude);
/// Delete a read-write lock in a given mode: see `lua/rw_force_unlock.lua`.
pub(crate) static RW_FORCE_UNLOCK: Lua = script!("rw_force_unlock.lua", with_prelude);

/// Acquire a fenced lock and take a token: see `lua/fenced_acquire.lua`.
pub(crate) static FENCED_ACQUIRE: Lua = script!("fenced_acquire.lua", with_prelude);

/// Take permits of a semaphore: see `lua/semaphore_acquire.lua`.
pub(crate) static SEMAPHORE_ACQUIRE: Lua = script!("semaphore_acquire.lua");
/// Give permits back to a semaphore (or add some): see `lua/semaphore_release.lua`.
pub(crate) static SEMAPHORE_RELEASE: Lua = script!("semaphore_release.lua", with_prelude);
/// Set a semaphore's permits once: see `lua/semaphore_set.lua`.
pub(crate) static SEMAPHORE_SET: Lua = script!("semaphore_set.lua", with_prelude);
/// Take permits of a permit-expirable semaphore: see `lua/permit_acquire.lua`.
pub(crate) static PERMIT_ACQUIRE: Lua = script!("permit_acquire.lua", with_prelude);
/// Give permits back by their ids: see `lua/permit_release.lua`.
pub(crate) static PERMIT_RELEASE: Lua = script!("permit_release.lua", with_prelude);
/// Renew a batch of permit leases: see `lua/permit_renew.lua`.
pub(crate) static PERMIT_RENEW: Lua = script!("permit_renew.lua", batch);
/// Count a latch down: see `lua/latch_count_down.lua`.
pub(crate) static LATCH_COUNT_DOWN: Lua = script!("latch_count_down.lua", with_prelude);
/// Set a latch's count once: see `lua/latch_set.lua`.
pub(crate) static LATCH_SET: Lua = script!("latch_set.lua", with_prelude);

/// Take values of a group lock, all or none: see `lua/group_acquire.lua`.
pub(crate) static GROUP_ACQUIRE: Lua = script!("group_acquire.lua", group);
/// Release an acquisition's values of a group lock: see `lua/group_release.lua`.
pub(crate) static GROUP_RELEASE: Lua = script!("group_release.lua", group);
/// Release values of a group lock whoever holds them: see `lua/group_force_unlock.lua`.
pub(crate) static GROUP_FORCE_UNLOCK: Lua = script!("group_force_unlock.lua", group);
/// Count the held values of a group lock: see `lua/group_held.lua`.
pub(crate) static GROUP_HELD: Lua = script!("group_held.lua", group);
/// Renew a batch of group-lock leases: see `lua/group_renew.lua`.
pub(crate) static GROUP_RENEW: Lua = script!("group_renew.lua", group_batch);

/// Release a plain lock's last hold and keep it taken a while: see `lua/keep.lua`.
pub(crate) static KEEP: Lua = script!("keep.lua");
/// Campaign in an election: see `lua/election_campaign.lua`.
pub(crate) static ELECTION_CAMPAIGN: Lua = script!("election_campaign.lua", with_prelude);
/// Read everything Redis keeps for one name, writing nothing: see `lua/inspect.lua`.
pub(crate) static INSPECT: Lua = script!("inspect.lua");

/// Which commands the client's user may not run: see `lua/check_permissions.lua`. Run once,
/// when a client is built.
pub(crate) static CHECK_PERMISSIONS: Lua = script!("check_permissions.lua");

/// Every script, for loading them all when a client is built.
pub(crate) fn all() -> [&'static Lua; 31] {
    [
        &FENCED_ACQUIRE,
        &ACQUIRE,
        &RELEASE,
        &RENEW,
        &WAITER_LEAVE,
        &FORCE_UNLOCK,
        &FAIR_ACQUIRE,
        &FAIR_GIVE_UP,
        &FAIR_RELEASE,
        &FAIR_FORCE_UNLOCK,
        &RW_READ_ACQUIRE,
        &RW_READ_RELEASE,
        &RW_WRITE_ACQUIRE,
        &RW_WRITE_RELEASE,
        &RW_FORCE_UNLOCK,
        &SEMAPHORE_ACQUIRE,
        &SEMAPHORE_RELEASE,
        &SEMAPHORE_SET,
        &PERMIT_ACQUIRE,
        &PERMIT_RELEASE,
        &PERMIT_RENEW,
        &LATCH_COUNT_DOWN,
        &LATCH_SET,
        &GROUP_ACQUIRE,
        &GROUP_RELEASE,
        &GROUP_FORCE_UNLOCK,
        &GROUP_HELD,
        &GROUP_RENEW,
        &INSPECT,
        &ELECTION_CAMPAIGN,
        &KEEP,
    ]
}
