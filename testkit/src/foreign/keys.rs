//! Redisson's key, field and channel names, as docs/design.md states them: the names both
//! foreign clients use, written from the layout.

/// `prefix:{name}`, or `prefix:name` when the name has a `{` of its own (Redisson trusts it
/// to be a hash tag).
pub fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') { format!("{prefix}:{name}") } else { format!("{prefix}:{{{name}}}") }
}

/// A plain lock's channel (and a group's): `redisson_lock__channel:{name}`.
pub fn lock_channel(name: &str) -> String {
    prefixed("redisson_lock__channel", name)
}

/// The channel on which a fair lock's waiter `owner` is woken.
pub fn fair_channel(name: &str, owner: &str) -> String {
    format!("{}:{owner}", lock_channel(name))
}

/// A fair lock's queue of owners, head first.
pub fn fair_queue(name: &str) -> String {
    prefixed("redisson_lock_queue", name)
}

/// A fair lock's waiters' deadlines (epoch ms), by owner.
pub fn fair_deadlines(name: &str) -> String {
    prefixed("redisson_lock_timeout", name)
}

/// Where a release keeps its outcome for a resend of the same request.
pub fn unlock_latch(name: &str, request: &str) -> String {
    format!("{}:{request}", prefixed("redisson_unlock_latch", name))
}

/// A semaphore's channel: the count after each give-back.
pub fn semaphore_channel(name: &str) -> String {
    prefixed("redisson_sc", name)
}

/// A count-down latch's channel: `0` when it opens (whatever braces the name holds).
pub fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// A group lock's field for `owner`'s lease end on the value whose field is `field`.
pub fn expire_field(field: &str, owner: &str) -> String {
    format!("{field}:{owner}:expire_time")
}

/// A group lock's field for `owner`'s holds of the value whose field is `field`.
pub fn count_field(field: &str, owner: &str) -> String {
    format!("{field}:{owner}:lock_count")
}

/// The unlock message on a lock's channel.
pub const UNLOCK: &str = "0";

/// The error a non-reentrant lock's acquire answers its own holder with.
pub const REENTRY_ERROR: &str = "NON_REENTRANT_REACQUIRE";
