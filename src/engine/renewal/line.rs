//! A node's connection through a renewal pass, and the rounds of batches written on it:
//! several batches in flight on one connection, their replies (and their confirmations')
//! read in order.

use std::time::Instant;

use super::confirm::{Confirming, unloaded};
use super::plan::{Chunk, Part, Plan, Replies};
use crate::base::error::{Error, ErrorKind, Result};
use crate::engine::replicas::{Behind, Replication};
use crate::kind::RenewCall;
use crate::observe::trace;
use crate::transport::{Lent, Pool};

/// One node's connection through a pass: lent at its first batch, written to round
/// after round, and given back at the end of the pass (closed when a reply failed on it).
/// Its epoch tells the batches written on it from those written on one before it.
pub(super) struct Line<'p> {
    pub(super) pool: &'p Pool,
    pub(super) lent: Option<Lent<'p>>,
    pub(super) epoch: u64,
    /// Batches written on the connection whose replies are not read yet.
    pub(super) unread: usize,
}

/// The batches of one round, from the instant their leases were marked in flight.
pub(super) struct Round {
    pub(super) sent: Instant,
    pub(super) batches: Vec<Batch>,
}

/// One node's batch of a round: its leases, its calls, its span, and the epoch of the
/// line it was written on with the confirmation behind it (`None`: to be sent as any call).
pub(super) struct Batch {
    pub(super) node: usize,
    pub(super) chunk: Chunk,
    pub(super) plan: Plan,
    pub(super) span: trace::Span,
    pub(super) written: Option<(u64, Behind)>,
}

/// What one batch came back with: each call's replies, and whether they count.
pub(super) type Answered = (Replies, Result<Replication>);

impl Line<'_> {
    /// Gives the connection back to its pool (none of its batches is unanswered).
    pub(super) fn give_back(&mut self) {
        if let Some(lent) = self.lent.take() {
            let _ = lent.finish(Ok(()), "renewing leases");
        }
        self.unread = 0;
    }

    /// Closes the connection after `err`: what was written on it is lost with it.
    pub(super) fn close(&mut self, err: redis::RedisError, what: &str) -> Option<Error> {
        self.unread = 0;
        self.lent.take().and_then(|lent| lent.finish::<()>(Err(err), what).err())
    }

    /// Reads the replies of every call of `plan`, and of the confirmation `behind` it,
    /// written on the connection of `epoch`: per call, its replies and the run of the
    /// server that gave them, and whether they count. A call that found its script unloaded
    /// is sent again with the whole batch when nothing else is in flight on the connection
    /// (else it fails, and its script is loaded on another connection for the next pass).
    /// After a failed read the connection is closed (it may be out of step) and the batch
    /// fails, as does a batch whose connection was closed since it was written.
    pub(super) fn read(&mut self, epoch: u64, plan: &Plan, behind: Behind, confirming: &Confirming) -> Answered {
        self.unread = self.unread.saturating_sub(1);
        let calls: Vec<&RenewCall> = plan.parts.iter().map(|part| &part.call).collect();
        let unread = self.unread;
        let Some(conn) = self.lent.as_mut().filter(|_| self.epoch == epoch).and_then(Lent::conn) else {
            let closed = || {
                Error::new(ErrorKind::Connection, "renewing leases failed: the connection it was written on was closed")
                    .connection()
            };
            return (plan.parts.iter().map(|_| Err(closed())).collect(), Err(closed()));
        };
        let run = conn.run();
        let read = confirming.read(conn, calls.len(), &behind).and_then(|raw| {
            let unloaded = unloaded(&calls, &raw);
            if unloaded.is_empty() {
                return Ok((behind, raw));
            }
            if unread > 0 {
                for call in unloaded {
                    let _ = self.pool.run("loading a script", |conn| call.load(conn));
                }
                return Ok((behind, raw));
            }
            for call in unloaded {
                call.load(conn)?;
            }
            confirming.exchange(conn, &calls)
        });
        match read {
            Ok((behind, raw)) => {
                let (outcomes, confirmed) = confirming.judge(conn, &calls, behind, raw);
                let limit = confirming.limit;
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
                let what = plan.parts.first().map_or("renewing leases", Part::what);
                let first = self.close(err, what);
                // The calls after the first failed as it did (a broken connection breaks
                // every reply on it).
                let like = |message: String| match &first {
                    Some(first) => first.alike(message),
                    None => Error::new(ErrorKind::Connection, message).connection(),
                };
                let mut rest: Vec<Error> = plan
                    .parts
                    .iter()
                    .skip(1)
                    .map(|part| like(format!("{} failed: an earlier reply on its connection failed", part.what())))
                    .collect();
                let confirmed = Err(like("confirming renewals failed: a reply on its connection failed".to_owned()));
                if !plan.parts.is_empty() {
                    let lead = match first {
                        Some(first) => first,
                        None => like(format!("{what} failed: its reply failed")),
                    };
                    rest.insert(0, lead);
                }
                (rest.into_iter().map(Err).collect(), confirmed)
            }
        }
    }
}
