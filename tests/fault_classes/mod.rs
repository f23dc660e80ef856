//! Fault classes: one module per class of fault the library is being fixed for.
//!
//! 1. `acl_refusals`: a partial effect reported as a failure, and a server refusal
//!    swallowed (ACL).
//! 2. `loss_on_every_path`: a loss learned on one path and not reported on the others.
//! 3. `connection_liveness`: liveness of a long-lived connection (a half-open pub/sub
//!    connection).
//! 4. `unchecked_arithmetic`: unchecked arithmetic on user values.
//! 5. `mixed_leases`: reentrant holds with different leases.
//! 6. `user_code`: user code on a library thread, and unbounded waits.
//! 7. `edge_validation`: validation at the edge.
//! 8. `work_left_behind`: work left behind by a call that returned: a late undo, a command
//!    sent twice.
//! 9. `transient_states`: a transient server state taken for a fatal one.
//! 10. `connection_kinds`: a connection failure wrapped into another kind.
//!
//! This module holds what more than one of them uses. Each test asserts the intended
//! behaviour and says in a comment what would make it fail. Timing bounds are sanity checks
//! with generous slack, not measurements. Threads that could block report through a channel
//! read with `recv_timeout`, so a hang fails the test instead of hanging it.

mod acl_refusals;
mod connection_kinds;
mod connection_liveness;
mod edge_validation;
mod loss_on_every_path;
mod mixed_leases;
mod transient_states;
mod unchecked_arithmetic;
mod user_code;
mod work_left_behind;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use redlease::{AnyLock, Client, ClientBuilder, ErrorKind, LockEvents};

/// Slack on top of timing bounds: the machine has 2 cores and is noisy.
const SLACK: Duration = Duration::from_millis(400);

/// A client of `url` with a 2 s command timeout, built by `configure`.
fn client_at(url: &str, configure: impl FnOnce(ClientBuilder) -> ClientBuilder) -> Client {
    configure(Client::builder(url).command_timeout(Duration::from_secs(2))).build().expect("client builds")
}

fn hgetall(conn: &mut redis::Connection, key: &str) -> HashMap<String, String> {
    redis::cmd("HGETALL").arg(key).query(conn).expect("HGETALL")
}

/// The fields of `key` that belong to `client` (owner fields start with its id).
fn fields_of(conn: &mut redis::Connection, key: &str, client: &Client) -> HashMap<String, String> {
    hgetall(conn, key).into_iter().filter(|(field, _)| field.starts_with(client.id())).collect()
}

/// Records every event it receives, in order, as text.
#[derive(Default)]
struct Recorder {
    log: Mutex<Vec<String>>,
}

impl Recorder {
    fn push(&self, event: String) {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).push(event);
    }

    fn events(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Events whose text starts with `prefix`.
    fn count(&self, prefix: &str) -> usize {
        self.events().iter().filter(|e| e.starts_with(prefix)).count()
    }
}

impl LockEvents for Recorder {
    fn lease_lost(&self, lock: &str) {
        self.push(format!("lease_lost {lock}"));
    }

    fn renewal_failed(&self, error: &redlease::Error) {
        self.push(format!("renewal_failed {error}"));
    }

    fn release_failed(&self, lock: &str, error: &redlease::Error) {
        self.push(format!("release_failed {lock}: {error}"));
    }

    fn subscriber_disconnected(&self, error: &redlease::Error) {
        self.push(format!("subscriber_disconnected {error}"));
    }

    fn subscriber_reconnected(&self) {
        self.push("subscriber_reconnected".into());
    }
}

/// A builder step that installs `recorder` as the events receiver.
fn recording(recorder: &Arc<Recorder>) -> impl FnOnce(ClientBuilder) -> ClientBuilder {
    let events: Arc<dyn LockEvents> = Arc::clone(recorder) as _;
    move |b| b.events(events)
}

/// `result` is an `InvalidInput` error, or the test fails naming `what`.
fn assert_invalid<T>(result: redlease::Result<T>, what: &str) {
    match result {
        Ok(_) => panic!("{what}: accepted, expected InvalidInput"),
        Err(e) => assert_eq!(e.kind(), ErrorKind::InvalidInput, "{what}: {e}"),
    }
}

// -----------------------------------------------------------------------------------------
// Every reentrant lock kind, for the cases run on each (classes 2 and 5)
// -----------------------------------------------------------------------------------------

/// Every reentrant lock kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Lock,
    Fair,
    Fenced,
    Read,
    Write,
}

const KINDS: [Kind; 5] = [Kind::Lock, Kind::Fair, Kind::Fenced, Kind::Read, Kind::Write];

fn handle(client: &Client, kind: Kind, name: &str) -> AnyLock {
    match kind {
        Kind::Lock => client.lock(name).into(),
        Kind::Fair => client.fair_lock(name).into(),
        Kind::Fenced => client.fenced_lock(name).into(),
        Kind::Read => client.read_write_lock(name).read().into(),
        Kind::Write => client.read_write_lock(name).write().into(),
    }
}

/// What another client tries, to show that `kind` is held: the same kind, but the write side
/// for a read lock (readers share).
fn rival(client: &Client, kind: Kind, name: &str) -> AnyLock {
    handle(client, if kind == Kind::Read { Kind::Write } else { kind }, name)
}

/// The text of a panic payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(non-string panic)".into())
}

/// Runs `case` for every kind, each on its own thread (ownership is per thread, and the
/// kinds use different lock names), and fails naming every kind whose case failed.
fn for_every_kind(case: impl Fn(Kind) + Sync) {
    let case = &case;
    let failures: Vec<String> = thread::scope(|scope| {
        let running: Vec<_> = KINDS.iter().map(|&kind| (kind, scope.spawn(move || case(kind)))).collect();
        running
            .into_iter()
            .filter_map(|(kind, thread)| thread.join().err().map(|p| format!("{kind:?}: {}", panic_text(&*p))))
            .collect()
    });
    assert!(failures.is_empty(), "failed for {} of {} kinds:\n{}", failures.len(), KINDS.len(), failures.join("\n"));
}
