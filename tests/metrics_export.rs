//! The `metrics` feature: what the library records through the `metrics` facade, read back
//! from a recorder that keeps it (`metrics-util`'s `DebuggingRecorder`), installed once per
//! process as the global recorder. Reading the recorder drains it, so one test walks every
//! metric in turn, summing what each reading gives ([`Recorded`]).
//!
//! Compiled only with the feature, and run alone by its filter (the recorder is the
//! process's, so other tests' clients would record into it too): `cargo test -p redlease
//! --features metrics --test integration -- metrics_export::`.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use metrics_util::MetricKind;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redlease::Client;

use crate::helpers::wait_until;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

/// A metric's identity: its kind, its name, and its labels sorted.
type Series = (MetricKind, String, Vec<(String, String)>);

/// Everything recorded since the recorder was installed: counters and gauges summed over
/// the readings (a reading swaps them to zero), histograms' values gathered.
#[derive(Default)]
struct Recorded {
    totals: HashMap<Series, f64>,
    values: HashMap<Series, Vec<f64>>,
}

fn snapshotter() -> &'static Mutex<(Snapshotter, Recorded)> {
    static RECORDER: OnceLock<Mutex<(Snapshotter, Recorded)>> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("the only global recorder of this process");
        Mutex::new((snapshotter, Recorded::default()))
    })
}

/// Reads the recorder into the running sums, and calls `look` with them.
fn recorded<T>(look: impl FnOnce(&Recorded) -> T) -> T {
    let mut guard = snapshotter().lock().unwrap_or_else(|e| e.into_inner());
    let (snapshotter, recorded) = &mut *guard;
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let mut labels: Vec<(String, String)> =
            key.key().labels().map(|l| (l.key().to_owned(), l.value().to_owned())).collect();
        labels.sort();
        let series = (key.kind(), key.key().name().to_owned(), labels);
        match value {
            DebugValue::Counter(n) => *recorded.totals.entry(series).or_default() += n as f64,
            DebugValue::Gauge(x) => *recorded.totals.entry(series).or_default() += x.into_inner(),
            DebugValue::Histogram(xs) => {
                recorded.values.entry(series).or_default().extend(xs.into_iter().map(|x| x.into_inner()))
            }
        }
    }
    look(recorded)
}

fn series(kind: MetricKind, name: &str, labels: &[(&str, &str)]) -> Series {
    let mut labels: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    labels.sort();
    (kind, name.to_owned(), labels)
}

fn total(kind: MetricKind, name: &str, labels: &[(&str, &str)]) -> f64 {
    recorded(|r| r.totals.get(&series(kind, name, labels)).copied().unwrap_or(0.0))
}

fn values(name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    recorded(|r| r.values.get(&series(MetricKind::Histogram, name, labels)).cloned().unwrap_or_default())
}

/// The test's lock names map to the label after their prefix; any other name to none.
fn label(name: &str) -> Option<String> {
    name.strip_prefix("metered:").map(str::to_owned)
}

/// Every metric of docs/design.md's "Metrics" table, recorded when its event happens, with
/// its attributes and, where the user mapped the lock's name, its `lock` label:
/// acquisitions by kind and outcome with their wait, holds, the waiters' gauge, renewal
/// passes, and a holder cut off from Redis whose lease turns at risk, fails to renew and
/// is lost.
///
/// Breaks if a metric is not recorded, is recorded under another name, kind or labels, or
/// with a value out of its range.
#[test]
fn every_metric_is_recorded_with_its_attributes() {
    // Installed before anything records: what comes before a recorder is dropped.
    snapshotter();
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let client = Client::builder(proxy.url())
        .watchdog_timeout(Duration::from_millis(1500))
        .command_timeout(Duration::from_secs(1))
        .metrics_lock_label(label)
        .build()
        .unwrap();
    use MetricKind::{Counter, Gauge};
    let at_once = [("kind", "reentrant"), ("outcome", "at_once"), ("lock", "a")];

    // An acquisition at once, held ~50 ms: its count and wait by kind and outcome, its hold.
    let guard = client.lock("metered:a").lock().unwrap();
    thread::sleep(Duration::from_millis(50));
    guard.unlock().unwrap();
    assert_eq!(total(Counter, "redlease.lock.acquisitions", &at_once), 1.0);
    let waits = values("redlease.lock.wait.duration", &at_once);
    assert!(waits.len() == 1 && waits[0] > 0.0 && waits[0] < 5.0, "{waits:?}");
    let holds = values("redlease.lock.hold.duration", &[("kind", "reentrant"), ("lock", "a")]);
    assert!(holds.len() == 1 && holds[0] >= 0.05 && holds[0] < 5.0, "held ~50 ms: {holds:?}");

    // A name the mapping leaves out carries no `lock` label; a busy fair lock is `busy`.
    let fair = client.fair_lock("unlabelled");
    let held = fair.lock().unwrap();
    let other = fair.clone();
    assert!(thread::spawn(move || other.try_lock().unwrap().is_none()).join().unwrap());
    assert_eq!(total(Counter, "redlease.lock.acquisitions", &[("kind", "fair"), ("outcome", "busy")]), 1.0);

    // A waiter: the gauge is up while it waits and down once it has the lock, which it
    // got after waiting.
    let before = total(Gauge, "redlease.waiters", &[]);
    let other = fair.clone();
    let waiter = thread::spawn(move || other.lock().map(drop).is_ok());
    assert!(wait_until(Duration::from_secs(5), || total(Gauge, "redlease.waiters", &[]) == before + 1.0), "one waiter");
    drop(held);
    assert!(waiter.join().unwrap());
    assert_eq!(total(Gauge, "redlease.waiters", &[]), before, "the waiter left");
    let after_waiting = [("kind", "fair"), ("outcome", "after_waiting")];
    assert_eq!(total(Counter, "redlease.lock.acquisitions", &after_waiting), 1.0);
    assert_eq!(values("redlease.lock.wait.duration", &after_waiting).len(), 1);

    holds_by_kind(&client);
    lost_and_failed(&client, &proxy);
    // A wait that meets a server refusing connections: once Redis answers again, how long
    // the outage kept the wait from a grant.
    proxy.set_refusing(true);
    proxy.cut_all();
    let outage = client.lock("metered:outage");
    let waiter = thread::spawn(move || outage.lock().map(drop).is_ok());
    thread::sleep(Duration::from_millis(400));
    proxy.set_refusing(false);
    assert!(waiter.join().unwrap(), "the wait rode the outage out");
    let windows = values("redlease.failover.no_grant.duration", &[("lock", "outage")]);
    assert!(windows.len() == 1 && windows[0] >= 0.3 && windows[0] < 10.0, "one window of ~400 ms: {windows:?}");

    // A guard dropped while Redis does not answer: its release fails, and is counted.
    let guard = client.lock("metered:unreleased").with_lease(Duration::from_secs(30)).lock().unwrap();
    proxy.set_blackhole(true);
    drop(guard);
    proxy.set_blackhole(false);
    assert_eq!(total(Counter, "redlease.lock.release.failures", &[("lock", "unreleased")]), 1.0);
}

/// A hold's time is labelled with what was held: a read lock's side, a semaphore's permits
/// (of a permit-expirable one: a plain semaphore's permits are nobody's, and not timed).
fn holds_by_kind(client: &Client) {
    client.read_write_lock("metered:doc").read().lock().unwrap().unlock().unwrap();
    assert_eq!(values("redlease.lock.hold.duration", &[("kind", "read"), ("lock", "doc")]).len(), 1);
    let semaphore = client.permit_expirable_semaphore("metered:slots");
    assert!(semaphore.try_set_permits(2).unwrap());
    semaphore.acquire(1).unwrap().release().unwrap();
    assert_eq!(values("redlease.lock.hold.duration", &[("kind", "semaphore"), ("lock", "slots")]).len(), 1);
}

/// A lease renewed, then cut off behind `proxy`: passes timed, failures counted, at risk
/// once, then lost; the hold it was is timed when its guard goes.
fn lost_and_failed(client: &Client, proxy: &Proxy) {
    use MetricKind::Counter;
    const CUT: [(&str, &str); 2] = [("kind", "reentrant"), ("lock", "cut")];
    let guard = client.lock("metered:cut").lock().unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || !values("redlease.renewal.duration", &[]).is_empty()),
        "a renewal pass is timed"
    );
    proxy.set_blackhole(true);
    assert!(
        wait_until(Duration::from_secs(10), || total(Counter, "redlease.lease.lost", &CUT) == 1.0),
        "the lease is lost"
    );
    assert_eq!(total(Counter, "redlease.lease.at_risk", &CUT), 1.0, "at risk once, before the loss");
    assert!(total(Counter, "redlease.renewal.failures", &[]) >= 1.0);
    assert!(!guard.is_held());
    proxy.set_blackhole(false);
    drop(guard);
    assert_eq!(values("redlease.lock.hold.duration", &CUT).len(), 1, "a hold lost is a hold let go, timed too");
}

/// The `prometheus` example, run as a user runs it: a service that installs
/// `metrics-exporter-prometheus` and maps its lock names to a bounded label gets its locks'
/// metrics on its Prometheus endpoint, read here over HTTP as a scraper reads them.
///
/// Breaks if the example does not serve, or its page lacks the locks' acquisitions by kind,
/// outcome and label, their waits and holds, or the waiters' gauge. Needs the example built
/// with the feature (`scripts/test` builds it): `cargo build --features metrics --example
/// prometheus`.
#[test]
fn the_prometheus_example_serves_the_locks_metrics_over_http() {
    let exe = std::env::current_exe().unwrap();
    let example = exe.parent().and_then(|deps| deps.parent()).unwrap().join("examples").join("prometheus");
    assert!(
        example.exists(),
        "{} is not built: cargo build --features metrics --example prometheus",
        example.display()
    );
    let server = RedisServer::start();
    let addr = format!("127.0.0.1:{}", crate::support::server::free_port());
    let child = std::process::Command::new(&example)
        .env("REDIS_URL", server.url())
        .env("METRICS_ADDR", &addr)
        .env("RUN_FOR", "60")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _child = KilledOnDrop(child);
    let mut page = String::new();
    let served = wait_until(Duration::from_secs(30), || {
        page = scrape(&addr).unwrap_or_default();
        counter(&page, "redlease_lock_acquisitions", &["kind=\"reentrant\"", "lock=\"orders\""]) >= 10.0
            && counter(&page, "redlease_lock_acquisitions", &["kind=\"fair\"", "lock=\"invoices\""]) >= 10.0
            && counter(&page, "redlease_lock_hold_duration_count", &["lock=\"orders\""]) >= 10.0
    });
    assert!(served, "the locks' acquisitions and holds on the page:\n{page}");
    assert!(counter(&page, "redlease_lock_wait_duration_count", &["outcome=\"at_once\""]) >= 1.0, "{page}");
    assert!(page.lines().any(|l| l.starts_with("redlease_waiters ")), "the waiters' gauge: {page}");
    assert!(!page.contains("lock=\"orders:"), "names are mapped to the label, never exported whole: {page}");
}

/// The example's process, killed when the test ends.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET /metrics` on `addr`: the page's body.
fn scrape(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// The sum of the samples of `name` on `page` whose labels include each of `labels`.
fn counter(page: &str, name: &str, labels: &[&str]) -> f64 {
    page.lines()
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let rest = series.strip_prefix(name)?;
            (rest.starts_with('{') && labels.iter().all(|l| rest.contains(l))).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}
