//! Clients' announcements of themselves (see `crate::observe::identity`): one string per client,
//! `redlease_client:{<id>}`, written with its expiry in one `SET … PX` and read back by the
//! inspection API.

use crate::observe::identity::ClientIdentity;
use crate::transport::Conn;

/// Writes the announcement `text` to `key`, to expire `lease_millis` from now. One command,
/// so the value and its expiry go together: nothing can be left that never expires (a
/// `MULTI` would do too, but the `redis` crate panics on a transaction whose command Redis
/// refuses at queueing, as an ACL rule does).
pub(crate) fn announce(conn: &mut Conn, key: &str, text: &str, lease_millis: u64) -> redis::RedisResult<()> {
    redis::cmd("SET").arg(key).arg(text).arg("PX").arg(lease_millis).query(conn)
}

/// The announcement of client `id` kept at `key`, if there is one.
pub(crate) fn read(conn: &mut Conn, key: &str, id: &str) -> redis::RedisResult<Option<ClientIdentity>> {
    let text: Option<String> = redis::cmd("GET").arg(key).query(conn)?;
    Ok(text.and_then(|text| ClientIdentity::from_text(id, &text)))
}
