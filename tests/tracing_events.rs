//! The `tracing` feature: the spans and events the library emits, captured by a small
//! subscriber of the test's own (`Recorder`), set once per process as the global default
//! (the library's threads, renewal and subscriber, emit too). Each test arms the recorder
//! while it runs and looks only at the records of its own locks (the `lock` field), or at
//! kinds of event no other test of this module causes, so the tests may run in parallel.
//!
//! Compiled only with the feature: `cargo test -p redlease --features tracing --test
//! integration -- tracing_events::`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use redlease::Client;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

use crate::helpers::*;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

/// A field's value as the library gave it: strings as they are, numbers and `Display`
/// values written out.
type Fields = BTreeMap<&'static str, String>;

#[derive(Clone, Debug)]
struct SpanRecord {
    id: u64,
    name: &'static str,
    level: Level,
    target: String,
    fields: Fields,
}

#[derive(Clone, Debug)]
struct EventRecord {
    level: Level,
    target: String,
    /// The `message` field, and the others.
    fields: Fields,
    /// The spans the emitting thread was in, innermost last.
    within: Vec<u64>,
    at: Instant,
}

impl EventRecord {
    fn message(&self) -> &str {
        self.fields.get("message").map_or("", String::as_str)
    }

    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

impl SpanRecord {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    fn number(&self, name: &str) -> f64 {
        let text = self.field(name).unwrap_or_else(|| panic!("span {} has no {name}: {self:?}", self.name));
        text.parse().unwrap_or_else(|_| panic!("span {}'s {name} is a number: {text:?}", self.name))
    }
}

/// What was recorded while some test was armed.
#[derive(Default)]
struct Recorder {
    spans: Mutex<Vec<SpanRecord>>,
    events: Mutex<Vec<EventRecord>>,
    next_id: AtomicU64,
}

/// Tests running now: the recorder records only while some is.
static ARMED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The spans this thread has entered, innermost last.
    static ENTERED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `%value` fields and the message come here, written with `Display`.
        self.0.insert(field.name(), format!("{value:?}"));
    }
}

struct Shared(Arc<Recorder>);

impl Subscriber for Shared {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        // Asked each time (`enabled`), since the tests arm and disarm the recorder.
        if metadata.target().starts_with("redlease") { Interest::sometimes() } else { Interest::never() }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("redlease") && ARMED.load(Ordering::SeqCst) > 0
    }

    fn new_span(&self, attributes: &Attributes<'_>) -> Id {
        let id = self.0.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fields = Fields::new();
        attributes.record(&mut Visitor(&mut fields));
        let metadata = attributes.metadata();
        self.0.spans.lock().unwrap().push(SpanRecord {
            id,
            name: metadata.name(),
            level: *metadata.level(),
            target: metadata.target().to_owned(),
            fields,
        });
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.0.spans.lock().unwrap();
        if let Some(record) = spans.iter_mut().find(|s| s.id == span.into_u64()) {
            values.record(&mut Visitor(&mut record.fields));
        }
    }

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::new();
        event.record(&mut Visitor(&mut fields));
        let within = ENTERED.with(|entered| entered.borrow().clone());
        let metadata = event.metadata();
        self.0.events.lock().unwrap().push(EventRecord {
            level: *metadata.level(),
            target: metadata.target().to_owned(),
            fields,
            within,
            at: Instant::now(),
        });
    }

    fn enter(&self, span: &Id) {
        ENTERED.with(|entered| entered.borrow_mut().push(span.into_u64()));
    }

    fn exit(&self, span: &Id) {
        ENTERED.with(|entered| {
            let mut entered = entered.borrow_mut();
            if let Some(at) = entered.iter().rposition(|id| *id == span.into_u64()) {
                entered.remove(at);
            }
        });
    }
}

/// One test's view of the recorder, armed while it lives.
struct Capture {
    recorder: Arc<Recorder>,
}

impl Capture {
    fn start() -> Capture {
        static RECORDER: OnceLock<Arc<Recorder>> = OnceLock::new();
        let recorder = RECORDER.get_or_init(|| {
            let recorder = Arc::new(Recorder::default());
            tracing::subscriber::set_global_default(Shared(Arc::clone(&recorder)))
                .expect("no other global subscriber in the test process");
            recorder
        });
        ARMED.fetch_add(1, Ordering::SeqCst);
        Capture { recorder: Arc::clone(recorder) }
    }

    /// The spans named `name` of the lock `lock`, in the order they began.
    fn spans(&self, name: &str, lock: &str) -> Vec<SpanRecord> {
        let spans = self.recorder.spans.lock().unwrap();
        spans.iter().filter(|s| s.name == name && s.field("lock") == Some(lock)).cloned().collect()
    }

    fn span(&self, id: u64) -> Option<SpanRecord> {
        self.recorder.spans.lock().unwrap().iter().find(|s| s.id == id).cloned()
    }

    /// Every event, in the order emitted.
    fn events(&self) -> Vec<EventRecord> {
        self.recorder.events.lock().unwrap().clone()
    }

    /// The events with this message about the lock `lock`, in the order emitted.
    fn events_of(&self, message: &str, lock: &str) -> Vec<EventRecord> {
        self.events().into_iter().filter(|e| e.message() == message && e.field("lock") == Some(lock)).collect()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        ARMED.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An uncontended acquire and its release: an `acquire` span (DEBUG, the module's target)
/// with the lock's name and kind, outcome "at once" after one attempt, and a `release`
/// span with outcome "released"; a `try_lock` from another thread while it is held is
/// "busy".
///
/// Breaks if the spans are missing, misnamed, or record the wrong outcome or count.
#[test]
fn an_uncontended_acquire_and_its_release_are_spans() {
    let capture = Capture::start();
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("traced-at-once");
    let guard = lock.lock().unwrap();
    let other = lock.clone();
    assert!(thread::spawn(move || other.try_lock().unwrap().is_none()).join().unwrap(), "busy for another thread");
    guard.unlock().unwrap();

    let acquires = capture.spans("acquire", "traced-at-once");
    assert_eq!(acquires.len(), 2, "one span per acquire: {acquires:?}");
    let first = &acquires[0];
    assert_eq!((first.level, first.target.as_str()), (Level::DEBUG, "redlease::engine::acquire"));
    assert_eq!(first.field("kind"), Some("reentrant"));
    assert_eq!(first.field("client"), Some(client.id()), "two clients in one process told apart");
    assert_eq!(first.field("outcome"), Some("at once"), "{first:?}");
    assert_eq!(first.number("attempts"), 1.0, "one script call");
    let waited = first.number("waited_ms");
    assert!((0.0..2000.0).contains(&waited), "a round trip, not a wait: {waited} ms");
    assert_eq!(acquires[1].field("outcome"), Some("busy"), "{:?}", acquires[1]);

    let releases = capture.spans("release", "traced-at-once");
    assert_eq!(releases.len(), 1, "{releases:?}");
    assert_eq!(releases[0].level, Level::DEBUG);
    assert_eq!((releases[0].field("kind"), releases[0].field("outcome")), (Some("reentrant"), Some("released")));
    assert_eq!(releases[0].field("client"), Some(client.id()));
    assert!(releases[0].id > first.id, "the release began after the acquire");

    // Other kinds name themselves.
    let semaphore = client.semaphore("traced-permits");
    assert!(semaphore.try_set_permits(1).unwrap());
    drop(semaphore.acquire(1).unwrap());
    let taken = capture.spans("acquire", "traced-permits");
    assert_eq!(taken.len(), 1, "{taken:?}");
    assert_eq!((taken[0].field("kind"), taken[0].field("outcome")), (Some("semaphore"), Some("at once")));
}

/// A contended acquire that waits for the release: outcome "after waiting", with about the
/// time it waited and more than one attempt; one that runs out: "timed out", with at
/// least its timeout.
///
/// Breaks if a wait is recorded as "at once", or its time or attempts are not recorded.
#[test]
fn a_contended_acquire_records_how_long_it_waited() {
    let capture = Capture::start();
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("traced-contended");
    let guard = lock.lock().unwrap();
    let other = lock.clone();
    let timed_out = thread::spawn(move || other.try_lock_for(Duration::from_millis(150)).unwrap().is_none());
    assert!(timed_out.join().unwrap(), "held all along");
    let other = lock.clone();
    let waiter = thread::spawn(move || other.try_lock_for(Duration::from_secs(10)).unwrap().map(drop).is_some());
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "the waiter parks");
    thread::sleep(Duration::from_millis(400));
    drop(guard);
    assert!(waiter.join().unwrap(), "the waiter got the lock");

    let acquires = capture.spans("acquire", "traced-contended");
    assert_eq!(acquires.len(), 3, "{acquires:?}");
    let timed_out = &acquires[1];
    assert_eq!(timed_out.field("outcome"), Some("timed out"), "{timed_out:?}");
    assert!(timed_out.number("waited_ms") >= 150.0, "{timed_out:?}");
    let waited = &acquires[2];
    assert_eq!(waited.field("outcome"), Some("after waiting"), "{waited:?}");
    let ms = waited.number("waited_ms");
    assert!((350.0..5000.0).contains(&ms), "waited about 400 ms: {ms}");
    assert!(waited.number("attempts") >= 2.0, "tried, waited, tried again: {waited:?}");
}

/// The holder's client behind a proxy the test can silence, with a short watchdog lease
/// (renewed every 500 ms, at risk at 750 ms, lost at about 1.5 s).
fn holder_behind_a_proxy(server: &RedisServer) -> (Proxy, Client) {
    let proxy = Proxy::start(server.addr());
    let client = Client::builder(proxy.url())
        .watchdog_timeout(Duration::from_millis(1500))
        .command_timeout(Duration::from_secs(1))
        .build()
        .expect("the holder's client");
    (proxy, client)
}

/// A holder cut off from Redis: its renewals fail (WARN), its lease turns at risk (WARN,
/// with the time it is still valid for), then is lost (WARN), in that order, emitted by the
/// renewal thread inside a `renew` span (TRACE) that renewed nothing.
///
/// Breaks if an event is missing, at the wrong level, out of order, or outside its batch.
#[test]
fn a_lease_cut_off_is_at_risk_then_lost() {
    let capture = Capture::start();
    let server = RedisServer::start();
    let (proxy, holder) = holder_behind_a_proxy(&server);
    let guard = holder.lock("traced-lost").lock().unwrap();
    proxy.set_blackhole(true);
    assert!(
        wait_until(Duration::from_secs(10), || !capture.events_of("lease lost", "traced-lost").is_empty()),
        "the loss is traced"
    );
    assert!(!guard.is_held());
    let events = capture.events();
    let index = |message: &str| {
        events
            .iter()
            .position(|e| e.message() == message && e.field("lock") == Some("traced-lost"))
            .unwrap_or_else(|| panic!("no {message:?} event: {events:?}"))
    };
    let (at_risk, lost) = (index("lease at risk"), index("lease lost"));
    assert!(at_risk < lost, "at risk before lost");
    let (at_risk, lost) = (&events[at_risk], &events[lost]);
    assert_eq!((at_risk.level, lost.level), (Level::WARN, Level::WARN));
    assert_eq!(at_risk.target, "redlease::observe::events");
    let valid_for: f64 = at_risk.field("valid_for_ms").expect("valid_for_ms").parse().unwrap();
    assert!(valid_for > 0.0 && valid_for <= 1500.0, "valid for part of the lease still: {valid_for} ms");
    assert!(lost.at > at_risk.at);
    // Found by the renewal thread, in its batches: the risk in one that renewed nothing,
    // after a failed renewal in it.
    let lost_in = lost.within.last().and_then(|id| capture.span(*id));
    assert_eq!(lost_in.map(|s| s.name), Some("renew"), "the loss is found by a renewal batch");
    let batch = *at_risk.within.last().expect("inside a span");
    let span = capture.span(batch).expect("the batch's span");
    assert_eq!((span.name, span.level), ("renew", Level::TRACE), "{span:?}");
    assert_eq!(span.field("renewed"), Some("0"), "{span:?}");
    assert_eq!(span.field("client"), Some(holder.id()), "whose batch it is");
    assert!(span.number("leases") >= 1.0);
    let failed = events.iter().find(|e| e.message() == "renewal failed" && e.within.last() == Some(&batch));
    let failed = failed.unwrap_or_else(|| panic!("a failed renewal in the batch that found the risk: {events:?}"));
    assert_eq!(failed.level, Level::WARN);
    assert!(failed.at <= at_risk.at);
    assert!(failed.field("error").is_some_and(|e| !e.is_empty()), "{failed:?}");
    drop(guard);
}

/// A renewal that gets through after the lease turned at risk: "lease recovered" (INFO).
///
/// Breaks if the recovery is not traced, or traced at another level.
#[test]
fn a_lease_at_risk_that_recovers_is_traced() {
    let capture = Capture::start();
    let server = RedisServer::start();
    let (proxy, holder) = holder_behind_a_proxy(&server);
    let guard = holder.lock("traced-recovered").lock().unwrap();
    proxy.set_blackhole(true);
    assert!(
        wait_until(Duration::from_secs(5), || !capture.events_of("lease at risk", "traced-recovered").is_empty()),
        "at risk"
    );
    proxy.set_blackhole(false);
    assert!(
        wait_until(Duration::from_secs(5), || !capture.events_of("lease recovered", "traced-recovered").is_empty()),
        "the recovery is traced"
    );
    let recovered = capture.events_of("lease recovered", "traced-recovered");
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_eq!(recovered[0].level, Level::INFO);
    assert!(capture.events_of("lease lost", "traced-recovered").is_empty(), "never lost");
    assert!(guard.is_held());
    guard.unlock().unwrap();
}

/// The pub/sub connection killed under a parked waiter: "subscriber disconnected" and then
/// "subscriber reconnected" (INFO), from the subscriber thread. (No other test of this
/// module breaks a pub/sub connection.)
///
/// Breaks if the reconnect is not traced.
#[test]
fn a_subscriber_reconnect_is_traced() {
    let capture = Capture::start();
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("traced-reconnect");
    let guard = lock.lock().unwrap();
    let other = lock.clone();
    let waiter = thread::spawn(move || other.try_lock_for(Duration::from_secs(15)).unwrap().map(drop).is_some());
    let mut conn = server.conn();
    assert!(
        wait_until(Duration::from_secs(5), || subscribers(&mut conn, "redisson_lock__channel:{traced-reconnect}") == 1)
    );
    let killed_at = Instant::now();
    let killed: u64 = redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query(&mut conn).unwrap();
    assert_eq!(killed, 1);
    let since_kill = |message: &str| -> Vec<EventRecord> {
        capture.events().into_iter().filter(|e| e.message() == message && e.at >= killed_at).collect()
    };
    assert!(
        wait_until(Duration::from_secs(5), || !since_kill("subscriber reconnected").is_empty()),
        "the reconnect is traced: {:?}",
        capture.events()
    );
    let reconnected = &since_kill("subscriber reconnected")[0];
    assert_eq!((reconnected.level, reconnected.target.as_str()), (Level::INFO, "redlease::observe::events"));
    let disconnected = since_kill("subscriber disconnected");
    assert!(!disconnected.is_empty(), "the break is traced too");
    assert_eq!(disconnected[0].level, Level::INFO);
    assert!(disconnected[0].at <= reconnected.at, "the break before the reconnect");
    drop(guard);
    assert!(waiter.join().unwrap(), "the waiter got the lock after the reconnect");
}

/// Redis restarted under an acquire: the acquire is retried within the budget, each retry
/// traced (DEBUG, with the lock and the pause), and the acquire's span counts every
/// attempt.
///
/// Breaks if a retry is not traced, or the attempts count only the first.
#[test]
fn a_retry_is_traced_and_counted_as_an_attempt() {
    let capture = Capture::start();
    let mut server = RedisServer::start();
    let client = client_with(&server, |b| b.retry_budget(Duration::from_secs(10)));
    let lock = client.lock("traced-retried");
    drop(lock.lock().unwrap());
    server.kill();
    let acquirer = thread::spawn(move || lock.try_lock().unwrap().map(drop).is_some());
    thread::sleep(Duration::from_millis(400));
    server.start_again();
    assert!(acquirer.join().unwrap(), "acquired once the server was back");

    let retried = capture.events_of("transient error retried", "traced-retried");
    assert!(!retried.is_empty(), "{:?}", capture.events());
    assert_eq!((retried[0].level, retried[0].target.as_str()), (Level::DEBUG, "redlease::engine::retry"));
    assert!(retried[0].field("pause_ms").is_some_and(|p| p.parse::<f64>().unwrap() > 0.0), "{:?}", retried[0]);
    assert!(retried[0].field("error").is_some_and(|e| !e.is_empty()));
    let acquires = capture.spans("acquire", "traced-retried");
    assert_eq!(acquires.len(), 2, "{acquires:?}");
    let after_restart = &acquires[1];
    assert_eq!(after_restart.field("outcome"), Some("at once"), "one try_lock, retried: {after_restart:?}");
    assert_eq!(
        after_restart.number("attempts"),
        (retried.len() + 1) as f64,
        "every retry is an attempt: {after_restart:?}, {} retries",
        retried.len()
    );
    // The retries happened inside the acquire's span.
    assert!(retried.iter().all(|e| e.within.contains(&after_restart.id)), "{retried:?}");
}

/// A wait whose failures outlast the retry budget (Redis down 800 ms, a 200 ms budget) goes
/// on, and says so once: a WARN event with the lock and how long it has been failing,
/// inside the acquire's span.
///
/// Breaks if the wait gives up at the budget, or rides the outage out without a word.
#[test]
fn a_wait_through_an_outage_is_traced_once() {
    let capture = Capture::start();
    let mut server = RedisServer::start();
    let client = client_with(&server, |b| b.retry_budget(Duration::from_millis(200)));
    let lock = client.lock("traced-outage");
    drop(lock.lock().unwrap());
    server.kill();
    let acquirer = thread::spawn(move || lock.lock().map(drop).is_ok());
    thread::sleep(Duration::from_millis(800));
    server.start_again();
    assert!(acquirer.join().unwrap(), "lock() got the lock once the server was back");

    let outage = capture.events_of("waiting through an outage", "traced-outage");
    assert_eq!(outage.len(), 1, "once: {:?}", capture.events());
    assert_eq!((outage[0].level, outage[0].target.as_str()), (Level::WARN, "redlease::observe::events"));
    let failing = outage[0].field("failing_ms").and_then(|f| f.parse::<f64>().ok());
    assert!(failing.is_some_and(|f| f >= 200.0), "{:?}", outage[0]);
    assert!(outage[0].field("error").is_some_and(|e| !e.is_empty()));
    let acquires = capture.spans("acquire", "traced-outage");
    assert_eq!(acquires.len(), 2, "{acquires:?}");
    assert!(outage[0].within.contains(&acquires[1].id), "inside the wait's span: {:?}", outage[0]);
}

/// The server turned replica (a failover, as the old master sees it): the write it refuses
/// with READONLY is traced as a failover followed (INFO), and the tries again as retries.
/// (No other test of this module makes a replica.)
///
/// Breaks if READONLY is not traced as a failover followed.
#[test]
fn a_readonly_refusal_is_traced_as_a_failover_followed() {
    let capture = Capture::start();
    let demoted = RedisServer::start();
    // The sync starts at once, not after diskless replication's default 5 s delay.
    let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let client = client_with(&demoted, |b| b.retry_budget(Duration::from_millis(500)));
    let lock = client.lock("traced-readonly");
    drop(lock.lock().unwrap());
    let mut conn = demoted.conn();
    redis::cmd("REPLICAOF").arg("127.0.0.1").arg(master.port()).query::<()>(&mut conn).expect("REPLICAOF");
    assert!(wait_until(Duration::from_secs(10), || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut conn).unwrap();
        info.contains("master_link_status:up")
    }));
    let started = Instant::now();
    assert!(lock.try_lock().is_err(), "a replica grants nothing");
    let followed: Vec<EventRecord> =
        capture.events().into_iter().filter(|e| e.message() == "failover followed" && e.at >= started).collect();
    assert!(!followed.is_empty(), "{:?}", capture.events());
    assert_eq!((followed[0].level, followed[0].field("by")), (Level::INFO, Some("READONLY")));
    assert_eq!(followed[0].target, "redlease::transport::pool");
    assert!(followed[0].field("error").is_some_and(|e| e.contains("read only replica")), "{:?}", followed[0]);
    assert!(!capture.events_of("transient error retried", "traced-readonly").is_empty(), "tried again in the budget");
}
