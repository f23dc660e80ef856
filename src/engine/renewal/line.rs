//! A node's connection through a renewal pass, and the rounds of batches written on it:
//! several batches in flight on one connection, their replies read in order.

use std::time::Instant;

use super::plan::{Chunk, Part, Plan, Replies};
use crate::error::{Error, ErrorKind};
use crate::kind::RenewOutcome;
use crate::trace;
use crate::transport::{Lent, Pool};

/// One node's connection through a pass: lent at its first batch, written to round
/// after round, and given back at the end of the pass (closed when a reply failed on it).
/// Its epoch tells the batches written on it from those written on one before it.
pub(super) struct Line<'p> {
    pub(super) pool: &'p Pool,
    pub(super) lent: Option<Lent<'p>>,
    pub(super) epoch: u64,
}

/// The batches of one round, from the instant their leases were marked in flight.
pub(super) struct Round {
    pub(super) sent: Instant,
    pub(super) batches: Vec<Batch>,
}

/// One node's batch of a round: its leases, its calls, its span, and the epoch of the
/// line it was written on (`None`: to be sent as any call).
pub(super) struct Batch {
    pub(super) node: usize,
    pub(super) chunk: Chunk,
    pub(super) plan: Plan,
    pub(super) span: trace::Span,
    pub(super) written: Option<u64>,
}

impl Line<'_> {
    /// Gives the connection back to its pool (none of its batches is unanswered).
    pub(super) fn give_back(&mut self) {
        if let Some(lent) = self.lent.take() {
            let _ = lent.finish(Ok(()), "renewing leases");
        }
    }

    /// Closes the connection after `err`: what was written on it is lost with it.
    pub(super) fn close(&mut self, err: redis::RedisError, what: &str) {
        if let Some(lent) = self.lent.take() {
            let _ = lent.finish::<()>(Err(err), what);
        }
    }

    /// Reads the replies of every call of `plan`, written on the connection of `epoch`;
    /// per call, its replies and the run of the server that gave them. After a failed
    /// reply the connection is closed (it may be out of step) and the rest fail too, as
    /// does a batch whose connection was closed since it was written.
    pub(super) fn read(&mut self, epoch: u64, plan: &Plan) -> Replies {
        let mut read: Vec<Vec<RenewOutcome>> = Vec::with_capacity(plan.parts.len());
        let mut failed: Option<redis::RedisError> = None;
        let mut run = None;
        let mut ended = None;
        match self.lent.as_mut().filter(|_| self.epoch == epoch).and_then(Lent::conn) {
            Some(conn) => {
                run = conn.run();
                for part in &plan.parts {
                    match conn.receive().and_then(|value| part.call.outcomes(conn, value)) {
                        Ok(outcomes) => read.push(outcomes),
                        Err(err) => {
                            failed = Some(err);
                            break;
                        }
                    }
                }
            }
            None => {
                ended = Some(Error::new(
                    ErrorKind::Redis,
                    "renewing leases failed: the connection it was written on was closed",
                ));
            }
        }
        if let Some(err) = failed {
            let what = plan.parts.get(read.len()).map_or("renewing leases", Part::what);
            ended = self.lent.take().and_then(|lent| lent.finish::<()>(Err(err), what).err());
        }
        let mut out: Replies = read.into_iter().map(|outcomes| Ok((outcomes, run))).collect();
        for part in plan.parts.iter().skip(out.len()) {
            out.push(Err(ended.take().unwrap_or_else(|| {
                Error::new(
                    ErrorKind::Redis,
                    format!("{} failed: an earlier reply on its connection failed", part.what()),
                )
            })));
        }
        out
    }
}
