//! A renewal batch's confirmation. A renewal counts
//! only once it is confirmed as a grant is: the master's replication state, `WAIT n` for
//! the replicas [`crate::ReplicaAcks`] asks for and, under `SyncMode::Auto` or `WaitAof`,
//! `WAITAOF`, ride behind the batch's calls in the same write, on the same connection
//! (`engine::replicas` says what they make of it). A batch that is not confirmed renews
//! nothing as far as its leases' deadlines go: a master cut off from its replicas keeps
//! answering "renewed" while a replica that can be promoted has the expiry of the last
//! confirmed renewal.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::replicas::{Behind, ReplicaSync, Replication};
use crate::kind::{RenewCall, RenewOutcome};
use crate::transport::{Conn, Pool};

/// The replies one batch's write got: one per call, then the confirmation's.
pub(super) struct Raw {
    pub(super) calls: Vec<redis::Value>,
    pub(super) behind: Vec<redis::Value>,
}

/// How a batch is confirmed on one master.
pub(super) struct Confirming {
    pub(super) sync: Arc<ReplicaSync>,
    /// The master's pool, which reaches the replicas that went.
    pub(super) pool: Option<Arc<Pool>>,
    /// How long `WAIT` and `WAITAOF` block in Redis.
    pub(super) wait: Duration,
    /// The read timeout of the batch's connection (the renewal's round-trip limit).
    pub(super) limit: Duration,
}

/// What a batch's replies say: each call's outcomes, and whether they count.
pub(super) type Judged = (Vec<redis::RedisResult<Vec<RenewOutcome>>>, redis::RedisResult<Replication>);

impl Confirming {
    /// `calls` and `behind`'s commands in one write.
    pub(super) fn packed<'c>(&self, calls: impl Iterator<Item = &'c RenewCall>, behind: &Behind) -> Vec<u8> {
        let mut packed: Vec<u8> = calls.flat_map(|call| call.packed().iter().copied()).collect();
        if !behind.is_empty() {
            packed.extend(behind.pipeline(self.wait).get_packed_pipeline());
        }
        packed
    }

    /// What rides behind a batch on `conn` now.
    pub(super) fn behind(&self, conn: &Conn) -> Behind {
        self.sync.behind(conn)
    }

    /// Before the first batch on a connection: reads the replicas when the view needs it.
    pub(super) fn ready(&self, conn: &mut Conn) -> redis::RedisResult<()> {
        self.sync.ready_for_renewal(conn)
    }

    /// Reads the replies of `calls` calls and of `behind` off `conn`: the confirmation's
    /// within the limit plus its wait when it blocks in Redis.
    pub(super) fn read(&self, conn: &mut Conn, calls: usize, behind: &Behind) -> redis::RedisResult<Raw> {
        let calls = (0..calls).map(|_| conn.receive()).collect::<redis::RedisResult<Vec<_>>>()?;
        if behind.blocks() {
            conn.set_read_timeout(Some(self.limit.saturating_add(self.wait)))?;
        }
        let replies = (0..behind.replies()).map(|_| conn.receive()).collect::<redis::RedisResult<Vec<_>>>();
        if behind.blocks() {
            conn.set_read_timeout(Some(self.limit))?;
        }
        Ok(Raw { calls, behind: replies? })
    }

    /// Sends `calls` with their confirmation behind them on `conn` (nothing else in flight
    /// there) and reads every reply; when a call found its script unloaded (a flush, a
    /// failover), loads it and sends the whole again, once. A cluster's redirection of a
    /// call is its error, for the pool to follow (the call did nothing).
    pub(super) fn exchange(&self, conn: &mut Conn, calls: &[&RenewCall]) -> redis::RedisResult<(Behind, Raw)> {
        self.ready(conn)?;
        let mut loaded = false;
        loop {
            let behind = self.behind(conn);
            conn.send_only(&self.packed(calls.iter().copied(), &behind))?;
            let raw = self.read(conn, calls.len(), &behind)?;
            if let Some(err) = redirection(&raw) {
                return Err(err);
            }
            let unloaded = unloaded(calls, &raw);
            if unloaded.is_empty() || loaded {
                return Ok((behind, raw));
            }
            for call in unloaded {
                call.load(conn)?;
            }
            loaded = true;
        }
    }

    /// Each call's outcomes from `raw`, and whether the batch counts: what rode `behind`
    /// it, judged on `conn` (nothing more is sent there).
    pub(super) fn judge(&self, conn: &Conn, calls: &[&RenewCall], behind: Behind, raw: Raw) -> Judged {
        let outcomes = calls.iter().zip(raw.calls).map(|(call, reply)| call.outcomes_of(reply)).collect();
        let confirmed = self.sync.confirm_renewal(conn, behind, raw.behind, self.pool.as_deref(), self.wait);
        (outcomes, confirmed)
    }
}

/// The calls whose reply says their script was not loaded.
pub(super) fn unloaded<'c>(calls: &[&'c RenewCall], raw: &Raw) -> Vec<&'c RenewCall> {
    calls.iter().zip(&raw.calls).filter(|(_, reply)| RenewCall::unloaded(reply)).map(|(call, _)| *call).collect()
}

/// A cluster's redirection of a call (`MOVED`, `ASK`, `TRYAGAIN`), as an error.
fn redirection(raw: &Raw) -> Option<redis::RedisError> {
    raw.calls.iter().find_map(|reply| match reply {
        redis::Value::ServerError(err) => {
            let err = redis::RedisError::from(err.clone());
            let redirected = matches!(
                err.kind(),
                redis::ErrorKind::Server(
                    redis::ServerErrorKind::Moved | redis::ServerErrorKind::Ask | redis::ServerErrorKind::TryAgain
                )
            );
            redirected.then_some(err)
        }
        _ => None,
    })
}
