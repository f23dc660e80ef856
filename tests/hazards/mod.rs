//! Hazards: faults on the wire and in the keyspace that a lease-based lock must survive, or
//! at least report. Acquires and releases whose replies are lost (`lost_replies`), lock keys
//! evicted, made persistent, deleted or expired behind the library's back, release messages
//! from another database (`keyspace`), a holder frozen past its lease (`lost_lease`), and a
//! Redis that stops answering for a while (`paused_redis`). This module holds what more than
//! one of them uses.
//!
//! Every test says in a comment what would make it fail.

mod keyspace;
mod lost_lease;
mod lost_replies;
mod paused_redis;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redlease::{Client, LockEvents};

use crate::helpers::*;
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] = &[("hazard_paused_holder", lost_lease::paused_holder)];

/// Slack on top of every timing bound: the machine may be busy running benchmarks, so the
/// bounds are sanity checks, not measurements.
const SLACK: Duration = Duration::from_millis(400);

/// Command timeout of the clients that meet lost replies or a paused Redis.
const COMMAND_TIMEOUT: Duration = Duration::from_millis(300);

fn hkeys(conn: &mut redis::Connection, key: &str) -> Vec<String> {
    redis::cmd("HKEYS").arg(key).query(conn).expect("HKEYS")
}

fn hvals(conn: &mut redis::Connection, key: &str) -> Vec<u64> {
    redis::cmd("HVALS").arg(key).query(conn).expect("HVALS")
}

/// Counts lost leases.
#[derive(Default)]
struct Losses(AtomicUsize);

impl Losses {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl LockEvents for Losses {
    fn lease_lost(&self, _lock: &str) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A client whose lost leases are counted in the returned `Losses`.
fn counting_client(server: &RedisServer, watchdog: Duration) -> (Client, Arc<Losses>) {
    let losses = Arc::new(Losses::default());
    let events: Arc<dyn LockEvents> = Arc::clone(&losses) as _;
    (client_with(server, |b| b.watchdog_timeout(watchdog).events(events)), losses)
}
