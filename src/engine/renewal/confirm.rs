//! A renewal batch's confirmation, and the ways a batch is sent with it. A renewal counts
//! only once it is confirmed as a grant is: the master's replication state, `WAIT n` for
//! the replicas [`crate::ReplicaAcks`] asks for and, under `SyncMode::Auto` or `WaitAof`,
//! `WAITAOF`, ride behind the batch's calls in the same write, on the same connection
//! (`engine::replicas` says what they make of it). A batch that is not confirmed renews
//! nothing as far as its leases' deadlines go: a master cut off from its replicas keeps
//! answering "renewed" while a replica that can be promoted has the expiry of the last
//! confirmed renewal.

use std::sync::Arc;
use std::time::Duration;

use super::Worker;
use super::line::{Answered, Line};
use super::plan::{Part, Plan, Replies};
use crate::engine::replicas::{Behind, ReplicaSync, Replication, Write};
use crate::error::{Error, ErrorKind, Result};
use crate::kind::{RenewCall, RenewOutcome};
use crate::transport::{Conn, Pool, RunId};

/// The replies one batch's write got: one per call, then the confirmation's.
pub(super) struct Raw {
    pub(super) calls: Vec<redis::Value>,
    pub(super) behind: Vec<redis::Value>,
}

/// How a batch is confirmed on one master.
pub(super) struct Confirming {
    sync: Arc<ReplicaSync>,
    /// The master's pool, which reaches the replicas that went.
    pool: Option<Arc<Pool>>,
    /// How long `WAIT` and `WAITAOF` block in Redis.
    wait: Duration,
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

impl Worker {
    /// How a batch is confirmed on the master of the pool `pool_id`: `WAIT` answers within
    /// half the round trip's bound, so that a renewal its replicas do not confirm has
    /// failed before the lease turns at risk.
    pub(super) fn confirming_on(&self, pool_id: u64) -> Confirming {
        let limit = self.config.command_timeout.min(self.span.round_trip_limit());
        let wait = self.config.replica_sync_timeout.min(limit / 2).max(Duration::from_millis(1));
        Confirming { sync: self.syncs.of(pool_id), pool: self.topology.pool_with_id(pool_id), wait, limit }
    }

    /// [`confirming_on`](Worker::confirming_on) `pool`.
    pub(super) fn confirming(&self, pool: &Pool) -> Confirming {
        self.confirming_on(pool.id())
    }

    /// Writes every call of `plan` on `line`, with its confirmation behind it, in one
    /// write, without reading: the epoch of the connection it went on, for [`Line::read`],
    /// and what rode behind; `None` when that failed (the batch is then sent as any call
    /// is). The first batch on a freshly lent connection reads the replicas first when the
    /// view needs it (see [`ReplicaSync::ready_for_renewal`]).
    pub(super) fn write(&self, line: &mut Line<'_>, plan: &Plan) -> Option<(u64, Behind)> {
        if plan.parts.is_empty() {
            return None;
        }
        let fresh = line.lent.is_none();
        if fresh {
            line.lent = Some(line.pool.lend(self.round_trip_limit()).ok()?);
            line.epoch += 1;
        }
        let confirming = self.confirming(line.pool);
        let conn = line.lent.as_mut()?.conn()?;
        let ready = if fresh { confirming.ready(conn) } else { Ok(()) };
        let written = ready.and_then(|()| {
            let behind = confirming.behind(conn);
            conn.send_only(&confirming.packed(plan.parts.iter().map(|part| &part.call), &behind)).map(|()| behind)
        });
        match written {
            Ok(behind) => {
                line.unread += 1;
                Some((line.epoch, behind))
            }
            Err(err) => {
                // Closed: what was written on it before is lost with it.
                line.close(err, "renewing leases");
                None
            }
        }
    }

    /// Sends every call of `plan` with its confirmation behind it as any call is, on one
    /// connection of `pool` within a round trip's bound (a redirection followed, and
    /// judged on the node it led to).
    pub(super) fn on_batch(&self, pool: &Pool, plan: &Plan) -> Answered {
        let calls: Vec<&RenewCall> = plan.parts.iter().map(|part| &part.call).collect();
        let what = plan.parts.first().map_or("renewing leases", Part::what);
        let limit = self.confirming(pool).limit;
        let exchanged = pool.run_within(what, self.round_trip_limit(), |conn| self.exchange_on(conn, &calls));
        match exchanged {
            Ok(((outcomes, confirmed), run)) => {
                let replies = outcomes
                    .into_iter()
                    .zip(&plan.parts)
                    .map(|(outcomes, part)| {
                        outcomes.map(|outcomes| (outcomes, run)).map_err(|err| Error::from_redis(err, part.what(), limit))
                    })
                    .collect();
                (replies, confirmed.map_err(|err| Error::from_redis(err, "confirming renewals", limit)))
            }
            Err(err) => {
                let failed = || Error::new(ErrorKind::Redis, format!("{what} failed: its round trip failed"));
                let mut replies: Replies = vec![Err(err)];
                replies.extend(plan.parts.iter().skip(1).map(|_| Err(failed())));
                (replies, Err(failed()))
            }
        }
    }

    /// [`Confirming::exchange`] and [`Confirming::judge`] on `conn`, confirmed by the
    /// master `conn` is of: what the calls said, whether they count, and the server's run.
    fn exchange_on(&self, conn: &mut Conn, calls: &[&RenewCall]) -> redis::RedisResult<(Judged, Option<RunId>)> {
        let confirming = self.confirming_on(conn.pool_id());
        let (behind, raw) = confirming.exchange(conn, calls)?;
        Ok((confirming.judge(conn, calls, behind, raw), conn.run()))
    }

    /// Renews one lease alone on `pool` with `call`, confirmed as a batch is: its outcome
    /// (`Elsewhere`, tried again soon, when the confirmation failed: that is reported), or
    /// the error of its round trip.
    pub(super) fn renew_alone(
        &self,
        pool: &Pool,
        what: &'static str,
        call: RenewCall,
    ) -> Result<(Vec<RenewOutcome>, Option<RunId>)> {
        let limit = self.confirming(pool).limit;
        let ((mut outcomes, confirmed), run) =
            pool.run_within(what, self.round_trip_limit(), |conn| self.exchange_on(conn, &[&call]))?;
        let counts = self.counts(confirmed.map_err(|err| Error::from_redis(err, what, limit)));
        let outcomes = outcomes
            .pop()
            .unwrap_or_else(|| Ok(Vec::new()))
            .map_err(|err| Error::from_redis(err, what, limit))?;
        let outcomes = if counts {
            outcomes
        } else {
            outcomes.into_iter().map(|o| if o == RenewOutcome::Renewed { RenewOutcome::Elsewhere } else { o }).collect()
        };
        Ok((outcomes, run))
    }

    /// Whether a batch's renewals count, by its confirmation; a confirmation that failed,
    /// or did not confirm, is reported as a failed renewal.
    pub(super) fn counts(&self, confirmed: Result<Replication>) -> bool {
        match confirmed {
            Ok(Replication::Confirmed) => true,
            Ok(Replication::Unconfirmed(why)) => {
                let wait = self.config.replica_sync_timeout;
                self.config.events.renewal_failed(&why.error(Write::Renewal, wait));
                false
            }
            Err(err) => {
                self.config.events.renewal_failed(&err);
                false
            }
        }
    }
}
