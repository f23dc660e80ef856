//! One grant attempt, as every acquire makes it: a lock's, a group lock's values, a
//! semaphore's permits, a permit-expirable semaphore's. The script that may grant goes out
//! with the grant's confirmation behind it in the same write (replica-synced grants, the
//! disk's `WAITAOF`); a grant is read with its confirmation; a grant that cannot be trusted
//! is taken back where it was made, and, when it was superseded by a failover, on the
//! master the client follows now too; an error met after the grant says the command had
//! its effect. Each kind brings only its script, its take-back and its undos.
//!
//! | the attempt | its outcome |
//! |---|---|
//! | not granted (the reply says so) | the reply: the caller waits or gives up |
//! | granted, confirmed (or nothing to confirm) | the reply, and the run of the server that granted it |
//! | granted, not confirmed in time | taken back on its connection; `superseded` called when a failover superseded it; the confirmation's error |
//! | granted, the confirmation failed | taken back on its connection unless `undone_elsewhere` leaves it to another undo (the hand-off, `uncertain`) or to its lease; the error, marked as met after the effect |
//! | failed before a grant | the error; `uncertain` called when the connection broke (the outcome is unknown, and that connection is gone) |

use std::cell::Cell;

use crate::base::error::Result;
use crate::engine::core::Engine;
use crate::engine::replicas::{Replication, Unconfirmed, Write};
use crate::transport::{Conn, RunId};

/// How an attempt is sent.
pub(crate) enum Sending<'a> {
    /// Sent again when a stale pooled connection fails before Redis reads it; a reply that
    /// does not come in time leaves the connection to `hand_off` (the undo behind the
    /// attempt, on its connection), when there is one.
    HandingOff(Option<&'a mut dyn FnMut(Conn)>),
    /// Never sent twice (it is not idempotent): see `Pool::run_once`.
    Once,
}

/// What one kind's grant attempt sends, and how its grant is undone.
pub(crate) struct GrantAttempt<'a, R> {
    /// What the call does, for errors ("acquiring", "taking permits").
    pub(crate) what: &'static str,
    /// The key whose pool (a cluster's slot) takes the attempt.
    pub(crate) key: &'a str,
    pub(crate) sending: Sending<'a>,
    /// The script call that may grant.
    pub(crate) send: &'a dyn Fn(&mut Conn) -> redis::RedisResult<R>,
    /// Whether a reply is a grant.
    pub(crate) is_granted: fn(&R) -> bool,
    /// Takes a grant that cannot be trusted back, on the connection it was made on.
    pub(crate) take_back: &'a dyn Fn(&mut Conn),
    /// A confirmation that failed with this error leaves the take-back to another undo
    /// (the hand-off behind the attempt, or `uncertain`) or to the grant's lease.
    pub(crate) undone_elsewhere: &'a dyn Fn(&redis::RedisError) -> bool,
    /// Called when a failover superseded the grant: the master the client follows now may
    /// have it from replication.
    pub(crate) superseded: &'a dyn Fn(),
    /// Called when the connection broke before the outcome was known.
    pub(crate) uncertain: &'a dyn Fn(),
}

impl Engine {
    /// Makes one grant attempt: the reply, granted or not, and the run of the server that
    /// answered. See the module's table.
    pub(crate) fn attempt_grant<R>(&self, attempt: GrantAttempt<'_, R>) -> Result<(R, Option<RunId>)> {
        let GrantAttempt { what, key, sending, send, is_granted, take_back, undone_elsewhere, superseded, uncertain } =
            attempt;
        // Whether the attempt was granted: an error after that came from confirming the
        // grant, which had its effect.
        let granted = Cell::new(false);
        let run = Cell::new(None);
        let op = |conn: &mut Conn| {
            granted.set(false);
            run.set(conn.run());
            let (reply, behind) = self.attempt_with_confirmation(conn, send, is_granted)?;
            if !is_granted(&reply) {
                return Ok((reply, None));
            }
            granted.set(true);
            let synced = self.confirm_grant(conn, behind, |err| !undone_elsewhere(err), take_back);
            synced.map(|synced| (reply, Some(synced)))
        };
        let pool = self.pool_for(key);
        let outcome = match sending {
            Sending::HandingOff(hand_off) => pool.run_handing_off(what, None, op, hand_off),
            Sending::Once => pool.run_once(what, op),
        };
        match outcome {
            Ok((reply, Some(Replication::Confirmed) | None)) => Ok((reply, run.get())),
            Ok((_, Some(Replication::Unconfirmed(why)))) => {
                if why == Unconfirmed::Superseded {
                    superseded();
                }
                Err(why.error(Write::Grant, self.config().replica_sync_timeout))
            }
            Err(err) => {
                let err = if granted.get() { err.after_effect() } else { err };
                // A dropped connection leaves the outcome unknown too; that connection is
                // gone, so the undo takes another.
                if err.is_connection_error() && !err.is_timeout() {
                    uncertain();
                }
                Err(err)
            }
        }
    }
}
