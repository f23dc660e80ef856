//! The Lua scripts, one file each under `lua/`, compiled in and run with `EVALSHA`.
//!
//! `redis::Script` sends `EVALSHA` and, on `NOSCRIPT` (a restart, a failover or a
//! `SCRIPT FLUSH` emptied the server's cache), loads the script and retries once; so does
//! `Conn::script`, which writes the calls of the hot path (a plain lock's acquire and
//! release) without the crate's per-argument allocations.

use std::sync::LazyLock;

/// One script from `lua/`, in three builds, one per [`PubSub`]: messages sent with
/// `PUBLISH` on one server, with `SPUBLISH` on a cluster's sharded pub/sub, or with `PUBLISH`
/// on a cluster (the cluster builds carry the cluster header). Each is compiled when first
/// used.
pub(crate) struct Lua {
    /// The source, as in `lua/` (with the prelude when it needs one).
    code: &'static str,
    /// What goes before a cluster build's source: a script that touches the keys of
    /// several locks (a renewal batch) declares that it may, which a cluster requires of
    /// a script whose keys span slots (they must still be on one node). Such a script
    /// takes those keys as arguments there: a command's declared keys must share a slot.
    cluster_header: &'static str,
    classic: LazyLock<redis::Script>,
    sharded: LazyLock<redis::Script>,
    cluster_classic: LazyLock<redis::Script>,
}

/// How lock messages travel, and whether the server is a cluster node. Redis Cluster 7 has
/// sharded pub/sub (`SPUBLISH` to the channel's slot, `SSUBSCRIBE` on its owner), and
/// Redisson uses it there unless its `shardedSubscriptionMode` says otherwise (see
/// [`ShardedSubscriptionMode`](crate::ShardedSubscriptionMode)): redlease does as the
/// deployment's Redisson clients do, on the same channels, or neither would wake the
/// other's waiters. Outside a cluster, classic `PUBLISH` / `SUBSCRIBE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PubSub {
    /// One server (or the master the sentinels name): `PUBLISH` / `SUBSCRIBE`.
    Classic,
    /// A cluster node, sharded pub/sub: `SPUBLISH` / `SSUBSCRIBE` on the slot's master.
    Sharded,
    /// A cluster node, classic pub/sub (`ShardedSubscriptionMode::Off`): `PUBLISH`, which the
    /// cluster carries to every node, and `SUBSCRIBE` on the slot's master.
    ClusterClassic,
}

impl PubSub {
    /// Whether the server is a cluster node (a batch's keys go as arguments, and the
    /// scripts carry the cluster header).
    pub(crate) fn in_cluster(self) -> bool {
        match self {
            PubSub::Classic => false,
            PubSub::Sharded | PubSub::ClusterClassic => true,
        }
    }

    /// Whether messages go by sharded pub/sub (`SPUBLISH`, `SSUBSCRIBE`).
    pub(crate) fn sharded(self) -> bool {
        match self {
            PubSub::Sharded => true,
            PubSub::Classic | PubSub::ClusterClassic => false,
        }
    }
}

impl Lua {
    /// The build for connections whose messages travel as `pubsub` says.
    pub(crate) fn on(&self, pubsub: PubSub) -> &redis::Script {
        match pubsub {
            PubSub::Classic => &self.classic,
            PubSub::Sharded => &self.sharded,
            PubSub::ClusterClassic => &self.cluster_classic,
        }
    }
}

impl Lua {
    /// The source of the build for `pubsub`, for `SCRIPT LOAD`.
    pub(crate) fn code(&self, pubsub: PubSub) -> std::borrow::Cow<'static, str> {
        build_code(self.cluster_header, self.code, pubsub)
    }
}

/// The source of a script's build for `pubsub`. A cluster build starts with `header`; the
/// sharded build has every `'publish'` (the scripts name the command only that way, to run
/// it or to check it) as `'spublish'`, and `PUBSUB`'s `'numsub'` (counting a channel's
/// subscribers) as `'shardnumsub'`.
fn build_code(header: &str, source: &'static str, pubsub: PubSub) -> std::borrow::Cow<'static, str> {
    match pubsub {
        PubSub::Classic => source.into(),
        PubSub::Sharded => {
            format!("{header}{}", source.replace("'publish'", "'spublish'").replace("'numsub'", "'shardnumsub'")).into()
        }
        PubSub::ClusterClassic => format!("{header}{source}").into(),
    }
}

fn build(header: &str, source: &'static str, pubsub: PubSub) -> redis::Script {
    redis::Script::new(&build_code(header, source, pubsub))
}

/// The header of a script whose keys may span slots (Redis 7 script flags).
const CROSS_SLOT: &str = "#!lua flags=allow-cross-slot-keys\n";

/// A script from `lua/`.
macro_rules! script {
    ($file:literal) => {
        script!(source = include_str!(concat!("../../lua/", $file)), header = "")
    };
    // A script that calls `may` or reads the server's clock: `lua/prelude.lua` goes first.
    ($file:literal, with_prelude) => {
        script!(
            source = concat!(include_str!("../../lua/prelude.lua"), include_str!(concat!("../../lua/", $file))),
            header = ""
        )
    };
    // A script that renews the leases of several locks at once: the prelude and
    // `lua/batch.lua` go first, and in a cluster it may touch keys of several slots of its
    // node.
    ($file:literal, batch) => {
        script!(
            source = concat!(
                include_str!("../../lua/prelude.lua"),
                include_str!("../../lua/batch.lua"),
                include_str!(concat!("../../lua/", $file))
            ),
            header = CROSS_SLOT
        )
    };
    // A group lock's script: the prelude and the layout's helpers, `lua/group.lua`.
    ($file:literal, group) => {
        script!(
            source = concat!(
                include_str!("../../lua/prelude.lua"),
                include_str!("../../lua/group.lua"),
                include_str!(concat!("../../lua/", $file))
            ),
            header = ""
        )
    };
    // A group lock's renewal batch: as `batch`, with `lua/group.lua`.
    ($file:literal, group_batch) => {
        script!(
            source = concat!(
                include_str!("../../lua/prelude.lua"),
                include_str!("../../lua/batch.lua"),
                include_str!("../../lua/group.lua"),
                include_str!(concat!("../../lua/", $file))
            ),
            header = CROSS_SLOT
        )
    };
    (source = $source:expr, header = $header:expr) => {
        Lua {
            code: $source,
            cluster_header: $header,
            classic: LazyLock::new(|| build($header, $source, PubSub::Classic)),
            sharded: LazyLock::new(|| build($header, $source, PubSub::Sharded)),
            cluster_classic: LazyLock::new(|| build($header, $source, PubSub::ClusterClassic)),
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
