//! The ways a renewal batch is sent with its confirmation behind it (see `confirm`):
//! written on a node's line without waiting for its reply (a pipelined pass), as any call
//! on a pooled connection, or one lease alone where its slot is now.

use std::time::Duration;

use super::Worker;
use super::confirm::{Confirming, Judged};
use super::line::{Answered, Line};
use super::plan::{Part, Plan, Replies};
use crate::base::error::{Error, Result};
use crate::engine::replicas::{Behind, Replication, Write};
use crate::kind::{RenewCall, RenewOutcome};
use crate::transport::{Conn, Pool, RunId};

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
    /// view needs it (see [`ReplicaSync::ready_for_renewal`](crate::engine::replicas::ReplicaSync::ready_for_renewal)).
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
                        outcomes
                            .map(|outcomes| (outcomes, run))
                            .map_err(|err| Error::from_redis(err, part.what(), limit))
                    })
                    .collect();
                (replies, confirmed.map_err(|err| Error::from_redis(err, "confirming renewals", limit)))
            }
            Err(err) => {
                // The other calls failed as the first did: a refused connection is one for
                // every call of the batch.
                let failed = || err.alike(format!("{what} failed: its round trip failed"));
                let mut replies: Replies = plan.parts.iter().skip(1).map(|_| Err(failed())).collect();
                let confirmed = Err(failed());
                replies.insert(0, Err(err));
                (replies, confirmed)
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
        let outcomes =
            outcomes.pop().unwrap_or_else(|| Ok(Vec::new())).map_err(|err| Error::from_redis(err, what, limit))?;
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
