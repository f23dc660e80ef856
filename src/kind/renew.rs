//! The watchdog's batched renew script: one call renews many leases of one client.

use crate::scripts;
use crate::transport::Conn;

/// How the renew script may set one lease's expiry (see `lua/renew.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewal<'a> {
    /// The hold is the hash field alone: reset the expiry to the lease.
    Reset,
    /// The same, but only ever lengthen it: the owner also has fixed-lease holds.
    LengthenOnly,
    /// Read holds, with the prefix of their per-hold keys.
    ReadHolds(&'a str),
}

/// One lease in a batch: the lock, the field that holds it, how to renew it.
pub(crate) struct Entry<'a> {
    pub(crate) name: &'a str,
    pub(crate) field: &'a str,
    pub(crate) how: Renewal<'a>,
}

/// What Redis answered for one lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Renewed,
    /// The owner's field is gone: the lease is lost.
    Gone,
    /// Redis refused to renew it (an ACL rule); its text.
    Refused(String),
}

/// Renews `entries` for `lease_millis`, in one script call. The reply has one outcome per
/// entry, in order.
pub(crate) fn renew(conn: &mut Conn, lease_millis: u64, entries: &[Entry<'_>]) -> redis::RedisResult<Vec<Outcome>> {
    let mut call = scripts::RENEW.on(conn.pubsub()).prepare_invoke();
    for entry in entries {
        call.key(entry.name);
    }
    call.arg(lease_millis);
    for entry in entries {
        let how = match entry.how {
            Renewal::Reset => "",
            Renewal::LengthenOnly => "+",
            Renewal::ReadHolds(prefix) => prefix,
        };
        call.arg(entry.field).arg(how);
    }
    let replies: Vec<redis::Value> = call.invoke(conn)?;
    if replies.len() != entries.len() {
        return Err(redis::RedisError::from((
            redis::ErrorKind::Parse,
            "the renew script answered for the wrong number of leases",
        )));
    }
    Ok(replies
        .into_iter()
        .map(|reply| match reply {
            redis::Value::Int(1) => Outcome::Renewed,
            redis::Value::Int(_) => Outcome::Gone,
            redis::Value::BulkString(text) => Outcome::Refused(String::from_utf8_lossy(&text).into_owned()),
            other => Outcome::Refused(format!("{other:?}")),
        })
        .collect())
}
