//! The observability hook: a trait whose methods all do nothing by default, so the library
//! needs no logging dependency and its background threads never print.

use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::error::Error;
use crate::observe::activity::{Active, Activity, Outcome};
use crate::observe::{telemetry, trace};

/// Receives what happens inside a [`Client`](crate::Client) that no call returns.
///
/// Every method has a no-op default; implement the ones you care about and pass the value
/// to [`ClientBuilder::events`](crate::ClientBuilder::events). Methods are called from the
/// library's threads (the renewal thread, the subscriber thread, or a thread dropping a
/// guard): keep them short and do not block in them. Do not keep a [`Client`](crate::Client)
/// in the receiver: the client owns the receiver, and the cycle would keep both alive.
///
/// A hook that panics does not take the library down: the panic is caught (the panic hook
/// still prints it, as for any panic), the event is dropped, and the thread that called
/// the hook goes on renewing, waking waiters or releasing. With `panic = "abort"` a panic
/// aborts the process, as anywhere else.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use redlease::LockEvents;
///
/// #[derive(Default)]
/// struct CountLosses(AtomicUsize);
///
/// impl LockEvents for CountLosses {
///     fn lease_lost(&self, _lock: &str) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
/// ```
pub trait LockEvents: Send + Sync {
    /// A held lease is gone: Redis said this owner no longer holds `lock`, or renewals kept
    /// failing until the lease's local deadline passed. The guard now reports
    /// `is_held() == false`.
    fn lease_lost(&self, lock: &str) {
        let _ = lock;
    }

    /// One renewal round trip failed; the leases in it are retried until their local
    /// deadline passes.
    fn renewal_failed(&self, error: &Error) {
        let _ = error;
    }

    /// Renewals of `lock`'s lease are failing: it is valid only until `valid_until`, and
    /// lost then unless a renewal gets through first. Whatever the lock protects should
    /// stop before then. Called once per spell of failures (on the first failed round trip,
    /// which a renewal due a third of the way through the lease meets by half of it at
    /// the latest); [`lease_recovered`](LockEvents::lease_recovered) ends the spell.
    fn lease_at_risk(&self, lock: &str, valid_until: Instant) {
        let _ = (lock, valid_until);
    }

    /// A renewal of `lock`'s lease got through again after
    /// [`lease_at_risk`](LockEvents::lease_at_risk), or the same thread took the lock again
    /// with the watchdog's lease (which renews it too): it is held as before.
    fn lease_recovered(&self, lock: &str) {
        let _ = lock;
    }

    /// Dropping a guard could not release its hold; the lock expires after its lease.
    fn release_failed(&self, lock: &str, error: &Error) {
        let _ = (lock, error);
    }

    /// The pub/sub connection broke, or an attempt to open it again failed (attempts are
    /// spaced 50 ms to 1 s apart while some thread waits). Waiters keep waiting, each
    /// bounded by the holder's TTL.
    fn subscriber_disconnected(&self, error: &Error) {
        let _ = error;
    }

    /// The pub/sub connection is back and every channel is subscribed again; every waiter
    /// was woken to check its lock, since release messages may have been missed.
    fn subscriber_reconnected(&self) {}

    /// A wait for `lock` (a lock's, permits', a latch's, a campaign's: `lock` names it) has
    /// met failures that pass by themselves (Redis unreachable, a failover under way, a
    /// replica that has not confirmed a grant) for as long as the retry budget, where a
    /// call that does not wait gives up, and keeps trying until its own deadline (`lock()`:
    /// until held). `error` is the latest failure. Called once per wait.
    fn waiting_through_outage(&self, lock: &str, error: &Error) {
        let _ = (lock, error);
    }
}

/// The hook used when none is configured.
struct NoEvents;

impl LockEvents for NoEvents {}

/// The configured receiver, as the library calls it: a panic inside a hook is caught and
/// dropped, so user code cannot take down the renewal or subscriber thread, nor turn a
/// guard's drop during unwinding into an abort.
///
/// It also counts what it reports, and carries the client's [`Activity`]: every part of
/// the client that reports events can count there too.
#[derive(Clone)]
pub(crate) struct Events {
    receiver: Arc<dyn LockEvents>,
    activity: Arc<Activity>,
    /// The label a lock's metrics carry, when the user maps its name to one.
    lock_label: Option<LockLabel>,
}

/// Maps a lock's name to the `lock` label of its metrics, or to none.
pub(crate) type LockLabel = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

impl Events {
    pub(crate) fn none() -> Events {
        Events { receiver: Arc::new(NoEvents), activity: Arc::default(), lock_label: None }
    }

    /// The same, reporting to `receiver`.
    pub(crate) fn with_receiver(&self, receiver: Arc<dyn LockEvents>) -> Events {
        Events { receiver, ..self.clone() }
    }

    /// The same, labelling a lock's metrics as `label` says.
    pub(crate) fn with_lock_label(&self, label: LockLabel) -> Events {
        Events { lock_label: Some(label), ..self.clone() }
    }

    /// The same receiver and labels, counting afresh (each client counts its own).
    pub(crate) fn counting_afresh(&self) -> Events {
        Events { activity: Arc::default(), ..self.clone() }
    }

    /// The `lock` label of `lock`'s metrics, if the user asked for one.
    fn label(&self, lock: &str) -> Option<String> {
        // Without the feature nothing records a label: the mapping is not called.
        let label = self.lock_label.as_ref().filter(|_| cfg!(feature = "metrics"))?;
        // A mapping that panics labels nothing, as a hook that panics reports nothing.
        panic::catch_unwind(AssertUnwindSafe(|| label(lock))).ok().flatten()
    }

    /// An acquisition of `lock` (a lock of `kind`, permits, a group) ended with `outcome`,
    /// `took` after the call began.
    pub(crate) fn acquisition(&self, kind: &'static str, lock: &str, outcome: Outcome, took: Duration) {
        self.activity.acquisition(outcome);
        telemetry::acquisition(kind, self.label(lock), outcome, took);
    }

    /// A guard let go of its hold on `lock` (a lock of `kind`, permits, a group) after
    /// `held`.
    pub(crate) fn held(&self, lock: &str, kind: &'static str, held: Duration) {
        self.activity.held(held);
        telemetry::held(kind, self.label(lock), held);
    }

    /// Where the client counts what its calls and leases did.
    pub(crate) fn activity(&self) -> &Activity {
        &self.activity
    }

    /// A token that counts the client active while it lives (an acquisition, a hold).
    pub(crate) fn active(&self) -> Active {
        self.activity.enter()
    }

    pub(crate) fn lease_lost(&self, lock: &str, kind: &'static str) {
        trace::event!(WARN, "lease lost", lock = lock);
        self.activity.lease_lost();
        telemetry::lease_lost(kind, self.label(lock));
        self.call(|e| e.lease_lost(lock));
    }

    pub(crate) fn renewal_failed(&self, error: &Error) {
        trace::event!(WARN, "renewal failed", lock = error.lock_name(); error = error);
        self.activity.renewal_failed();
        telemetry::renewal_failed();
        self.call(|e| e.renewal_failed(error));
    }

    pub(crate) fn lease_at_risk(&self, lock: &str, kind: &'static str, valid_until: Instant) {
        trace::event!(
            WARN,
            "lease at risk",
            lock = lock,
            valid_for_ms = trace::millis(valid_until.saturating_duration_since(Instant::now()))
        );
        telemetry::lease_at_risk(kind, self.label(lock));
        self.call(|e| e.lease_at_risk(lock, valid_until));
    }

    pub(crate) fn lease_recovered(&self, lock: &str) {
        trace::event!(INFO, "lease recovered", lock = lock);
        self.call(|e| e.lease_recovered(lock));
    }

    pub(crate) fn release_failed(&self, lock: &str, error: &Error) {
        trace::event!(WARN, "release failed", lock = lock; error = error);
        self.activity.release_failed();
        telemetry::release_failed(self.label(lock));
        self.call(|e| e.release_failed(lock, error));
    }

    pub(crate) fn subscriber_disconnected(&self, error: &Error) {
        trace::event!(INFO, "subscriber disconnected"; error = error);
        self.call(|e| e.subscriber_disconnected(error));
    }

    pub(crate) fn subscriber_reconnected(&self) {
        trace::event!(INFO, "subscriber reconnected");
        self.call(|e| e.subscriber_reconnected());
    }

    pub(crate) fn waiting_through_outage(&self, lock: &str, failing: Duration, error: &Error) {
        trace::event!(WARN, "waiting through an outage", lock = lock, failing_ms = trace::millis(failing); error = error);
        self.activity.waiting_through_outage();
        self.call(|e| e.waiting_through_outage(lock, error));
    }

    /// A wait for `lock` that met failures that pass by themselves (a restart, a
    /// failover, a grant no replica confirmed) was answered again, `took` after the first.
    pub(crate) fn no_grant_ended(&self, lock: &str, took: Duration) {
        telemetry::no_grant(self.label(lock), took);
    }

    fn call(&self, hook: impl FnOnce(&dyn LockEvents)) {
        // The receiver is only read through `&self`; whatever it left half-done is its own.
        let _ = panic::catch_unwind(AssertUnwindSafe(|| hook(&*self.receiver)));
    }
}
