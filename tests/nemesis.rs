//! Nemesis runs: worker processes loop on a lock while a nemesis breaks connections,
//! restarts Redis (with `appendfsync always`), pauses it and slows the network. Every
//! critical section goes into a history, which the checkers of `support::history` read.
//!
//! Quick mode (the default) runs each lock kind for a few seconds; set
//! `REDLEASE_SOAK_SECS` to run each kind that long instead.

use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, FencedGuard, LockGuard, MultiLock, RedLock, RedLockGuard};

use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::history::{self, Section};
use crate::support::proxy::Proxy;
use crate::support::sentinel::SentinelGroup;
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] = &[("nemesis_worker", worker)];

/// Watchdog lease of the workers: the nemesis pauses Redis for less than half of it.
const LEASE: Duration = Duration::from_secs(2);
/// Longest wait of one acquisition call.
const WAIT: Duration = Duration::from_secs(2);
/// A call that takes longer than this has hung.
const HANG: Duration = Duration::from_secs(6);
const THREADS: u32 = 4;
const PROCESSES: u32 = 3;
const LOCK: &str = "nemesis";

/// One acquisition: the guard, whether it excludes, and the locks it covers.
type Acquired = (LockGuard, bool, Vec<&'static str>);

fn acquire(kind: &str, clients: &[Client], thread: u32, round: u32) -> redlease::Result<Option<Acquired>> {
    let one = |g: Option<LockGuard>, exclusive: bool| g.map(|g| (g, exclusive, vec![LOCK]));
    let first = &clients[0];
    Ok(match kind {
        "plain" => one(first.lock(LOCK).try_lock_for(WAIT)?, true),
        "fair" => one(first.fair_lock(LOCK).try_lock_for(WAIT)?, true),
        "fenced" => one(first.fenced_lock(LOCK).try_lock_for(WAIT)?.map(FencedGuard::into_inner), true),
        "rw" => {
            let rw = first.read_write_lock(LOCK);
            if (thread + round).is_multiple_of(3) {
                one(rw.write().try_lock_for(WAIT)?, true)
            } else {
                one(rw.read().try_lock_for(WAIT)?, false)
            }
        }
        "multi" => MultiLock::new([first.lock(LOCK), first.lock("nemesis:b")])
            .try_lock_for(WAIT)?
            .map(|g| (g, true, vec![LOCK, "nemesis:b"])),
        "redlock" => one(
            RedLock::new(clients.iter().map(|c| c.lock(LOCK)))
                .retry_delay(Duration::from_millis(10))
                .try_lock_for(WAIT)?
                .map(RedLockGuard::into_inner),
            true,
        ),
        other => panic!("unknown kind {other}"),
    })
}

fn connect(url: &str) -> Client {
    build_patiently(Duration::from_secs(10), || {
        Client::builder(url)
            .watchdog_timeout(LEASE)
            .command_timeout(Duration::from_millis(500))
            .connect_timeout(Duration::from_millis(500))
    })
}

/// THREADS threads loop on the lock kind KIND for MILLIS ms, over LOCK_URLS; sections go
/// to the history on RECORD_URL, exclusive ones also bump the non-atomic counter there.
fn worker() {
    // `|` between URLs: a sentinel URL has commas of its own.
    let lock_urls: Vec<String> = child::env("LOCK_URLS").split('|').map(str::to_owned).collect();
    let record_url = child::env("RECORD_URL");
    let kind = child::env("KIND");
    let process: u32 = child::env("PROCESS").parse().unwrap();
    let end = Instant::now() + Duration::from_millis(child::env("MILLIS").parse().unwrap());
    let clients: Vec<Client> = lock_urls.iter().map(|u| connect(u)).collect();
    let totals: Vec<(u32, u32, u32, u32)> = thread::scope(|scope| {
        let runs: Vec<_> = (0..THREADS)
            .map(|thread| {
                let (kind, clients, record_url) = (&kind, &clients, &record_url);
                scope.spawn(move || {
                    let mut record = redis::Client::open(record_url.as_str()).unwrap().get_connection().unwrap();
                    let (mut sections, mut errors, mut hangs, mut round) = (0, 0, 0, 0);
                    while Instant::now() < end {
                        round += 1;
                        let started = Instant::now();
                        let result = acquire(kind, clients, thread, round);
                        if started.elapsed() > HANG {
                            hangs += 1;
                        }
                        match result {
                            Ok(Some((guard, exclusive, locks))) => {
                                let enter = history::now();
                                if exclusive {
                                    increment_non_atomically(&mut record, "nemesis:count");
                                }
                                let exit = history::now();
                                let token = guard.token();
                                drop(guard);
                                for lock in locks {
                                    let section =
                                        Section { process, thread, lock: lock.into(), exclusive, enter, exit, token };
                                    history::record(&mut record, "nemesis:history", &section);
                                }
                                sections += 1;
                            }
                            Ok(None) => {}
                            // Every failure is a typed redlease::Error (the signature says so).
                            Err(_) => {
                                errors += 1;
                                thread::sleep(Duration::from_millis(20));
                            }
                        }
                    }
                    (sections, errors, hangs, round)
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    // The client's own bookkeeping must be empty once every guard is gone.
    let clean = wait_until(Duration::from_secs(5), || {
        clients.iter().all(|c| {
            let s = c.stats();
            (s.leases, s.renewals_scheduled, s.waiters, s.channels) == (0, 0, 0, 0)
        })
    });
    let sum = |f: fn(&(u32, u32, u32, u32)) -> u32| totals.iter().map(f).sum::<u32>();
    child::say(&format!(
        "done sections={} errors={} hangs={} calls={} clean={clean}",
        sum(|t| t.0),
        sum(|t| t.1),
        sum(|t| t.2),
        sum(|t| t.3)
    ));
}

/// One nemesis step on the lock servers.
fn strike(step: usize, servers: &mut [RedisServer], proxies: &[Proxy]) -> &'static str {
    let target = step / 5 % servers.len();
    let mut conn = servers[target].conn();
    match step % 5 {
        0 => {
            let _: redis::RedisResult<u64> =
                redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("normal").query(&mut conn);
            "client kill normal"
        }
        1 => {
            let _: redis::RedisResult<u64> =
                redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query(&mut conn);
            "client kill pubsub"
        }
        2 => {
            drop(conn);
            servers[target].restart();
            "restart (aof, fsync always)"
        }
        3 => {
            // Shorter than half a lease: renewals are late, not lost.
            redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(LEASE.as_millis() as u64 / 2 - 300)
                .arg("ALL")
                .query::<()>(&mut conn)
                .unwrap();
            "client pause"
        }
        _ => {
            proxies[target].set_latency(Duration::from_millis(30));
            thread::sleep(Duration::from_millis(800));
            proxies[target].set_latency(Duration::ZERO);
            "proxy latency 30 ms"
        }
    }
}

struct Outcome {
    sections: usize,
    exclusive: usize,
    errors: u64,
    calls: u64,
    strikes: usize,
}

/// How long each kind runs: a few seconds, or `REDLEASE_SOAK_SECS`.
fn run_millis(quick: u64) -> u64 {
    std::env::var("REDLEASE_SOAK_SECS").ok().and_then(|s| s.parse::<u64>().ok()).map_or(quick, |s| s * 1000)
}

/// Starts the worker processes of `kind` on `lock_urls`, recording into `record`.
fn spawn_workers(kind: &str, lock_urls: &str, record: &RedisServer, millis: u64) -> Vec<Child> {
    (0..PROCESSES)
        .map(|process| {
            let env = [
                ("LOCK_URLS", lock_urls.to_owned()),
                ("RECORD_URL", record.url()),
                ("KIND", kind.to_string()),
                ("PROCESS", process.to_string()),
                ("MILLIS", millis.to_string()),
            ];
            Child::spawn("nemesis_worker", &env)
        })
        .collect()
}

fn run(kind: &str, nodes: usize) -> Outcome {
    let millis = run_millis(5_000);
    let mut servers: Vec<RedisServer> =
        (0..nodes).map(|_| RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"])).collect();
    let proxies: Vec<Proxy> = servers.iter().map(|s| Proxy::start(s.addr())).collect();
    let record = RedisServer::start();
    let lock_urls = proxies.iter().map(Proxy::url).collect::<Vec<_>>().join("|");
    let workers = spawn_workers(kind, &lock_urls, &record, millis);
    let end = Instant::now() + Duration::from_millis(millis);
    let mut strikes = 0;
    while Instant::now() + Duration::from_millis(1200) < end {
        thread::sleep(Duration::from_millis(700));
        strike(strikes, &mut servers, &proxies);
        strikes += 1;
    }
    let (sections, exclusive, errors, calls) = collect(kind, workers, &record, millis);
    for server in &servers {
        assert_clean(kind, &mut server.conn());
    }
    Outcome { sections, exclusive, errors, calls, strikes }
}

/// Waits for the workers' reports and checks them and the history: no hang, clean clients,
/// no overlapping exclusive sections, tokens in order, no lost increment, some progress.
/// Returns (sections, exclusive sections, errors, calls).
fn collect(kind: &str, mut workers: Vec<Child>, record: &RedisServer, millis: u64) -> (usize, usize, u64, u64) {
    let (mut errors, mut calls) = (0u64, 0u64);
    for w in &mut workers {
        let line = w.wait_line("done", Duration::from_millis(millis) + Duration::from_secs(60));
        let field = |name: &str| -> String {
            line.split(' ').find_map(|f| f.strip_prefix(&format!("{name}="))).unwrap_or_default().to_string()
        };
        assert_eq!(field("hangs"), "0", "{kind}: a call hung past its bound: {line}");
        assert_eq!(field("clean"), "true", "{kind}: the client's maps were not empty at the end: {line}");
        errors += field("errors").parse::<u64>().unwrap();
        calls += field("calls").parse::<u64>().unwrap();
        assert!(w.wait(Duration::from_secs(20)).success(), "{kind}: a worker failed");
    }
    let mut conn = record.conn();
    let log = history::load(&mut conn, "nemesis:history");
    history::check_exclusion(&log).unwrap_or_else(|e| panic!("{kind}: {e}"));
    history::check_tokens(&log).unwrap_or_else(|e| panic!("{kind}: {e}"));
    let primary: Vec<&Section> = log.iter().filter(|s| s.lock == LOCK).collect();
    let exclusive = primary.iter().filter(|s| s.exclusive).count();
    let count: Option<u64> = redis::cmd("GET").arg("nemesis:count").query(&mut conn).unwrap();
    assert_eq!(count.unwrap_or(0), exclusive as u64, "{kind}: the non-atomic counter lost increments");
    assert!(primary.len() >= 10, "{kind}: too little progress: {} sections", primary.len());
    (primary.len(), exclusive, errors, calls)
}

/// Hygiene on a lock server: nothing left beyond a lease (token counters and release
/// latches are meant to stay a while), no channel subscribed.
fn assert_clean(kind: &str, conn: &mut redis::Connection) {
    let clean = wait_until(LEASE + Duration::from_secs(2), || {
        let keys: Vec<String> = redis::cmd("KEYS").arg("*nemesis*").query(conn).unwrap();
        keys.iter().all(|k| k.starts_with("redisson_unlock_latch:") || k.starts_with("redisson_lock_token:"))
    });
    let keys: Vec<String> = redis::cmd("KEYS").arg("*nemesis*").query(conn).unwrap();
    assert!(clean, "{kind}: keys left behind: {keys:?}");
    // (Sentinels keep their own `__sentinel__:hello` subscription on a master they watch.)
    let channels: Vec<String> = redis::cmd("PUBSUB").arg("CHANNELS").arg("*nemesis*").query(conn).unwrap();
    assert!(channels.is_empty(), "{kind}: subscriptions left: {channels:?}");
}

#[test]
fn every_lock_kind_keeps_its_promises_under_a_nemesis() {
    let _one_at_a_time = one_failover_test_at_a_time();
    let mut report = Vec::new();
    for (kind, nodes) in [("plain", 1), ("fair", 1), ("rw", 1), ("fenced", 1), ("multi", 1), ("redlock", 3)] {
        let o = run(kind, nodes);
        report.push(format!(
            "{kind}: {} sections ({} exclusive), {} typed errors in {} calls, {} strikes",
            o.sections, o.exclusive, o.errors, o.calls, o.strikes
        ));
    }
    println!("nemesis report:\n{}", report.join("\n"));
}

/// The failover nemesis: every lock kind that lives on one master (Redlock's nodes are
/// independent masters, struck by the nemesis above) runs behind Sentinel while the
/// nemesis fails the master over (`SENTINEL FAILOVER`), SIGKILLs it (the killed server
/// comes back as a replica), and cuts the replication links, in turn. The same checks as
/// above: no overlapping exclusive sections, tokens in order, no lost increment of the
/// non-atomic counter, no hang, clean clients.
#[test]
fn every_lock_kind_keeps_its_promises_through_failovers() {
    let _one_at_a_time = one_failover_test_at_a_time();
    let mut group = SentinelGroup::start();
    let millis = run_millis(6_000);
    let mut report = Vec::new();
    let mut strikes = 0usize;
    for kind in ["plain", "fair", "rw", "fenced", "multi"] {
        let record = RedisServer::start();
        let workers = spawn_workers(kind, &group.url(), &record, millis);
        let end = Instant::now() + Duration::from_millis(millis);
        let mut struck = Vec::new();
        thread::sleep(Duration::from_millis(1500));
        while Instant::now() + Duration::from_millis(1500) < end {
            struck.push(match strikes % 3 {
                0 => {
                    group.failover();
                    "sentinel failover"
                }
                1 => {
                    group.kill_master_and_rejoin();
                    "master SIGKILL"
                }
                _ => {
                    group.cut_replica_links();
                    "replica link cut"
                }
            });
            strikes += 1;
            // The next failover needs a replica the sentinels know.
            group.wait_ready(Duration::from_secs(30));
        }
        let (sections, exclusive, errors, calls) = collect(kind, workers, &record, millis);
        assert_clean(kind, &mut group.master_conn());
        report.push(format!(
            "{kind}: {sections} sections ({exclusive} exclusive), {errors} typed errors in {calls} calls, strikes {struck:?}"
        ));
    }
    println!("failover nemesis report:\n{}", report.join("\n"));
}

#[test]
fn the_checkers_catch_what_they_check() {
    let s = |lock: &str, exclusive: bool, enter: u64, exit: u64, token: Option<u64>| Section {
        process: 1,
        thread: 1,
        lock: lock.to_string(),
        exclusive,
        enter,
        exit,
        token,
    };
    assert!(history::check_exclusion(&[s("a", true, 0, 10, None), s("a", true, 10, 20, None)]).is_ok());
    assert!(history::check_exclusion(&[s("a", true, 0, 10, None), s("a", true, 9, 20, None)]).is_err());
    assert!(history::check_exclusion(&[s("a", true, 0, 100, None), s("a", true, 1, 2, None)]).is_err());
    assert!(history::check_exclusion(&[s("a", true, 0, 10, None), s("b", true, 5, 20, None)]).is_ok());
    assert!(history::check_exclusion(&[s("a", false, 0, 10, None), s("a", false, 5, 20, None)]).is_ok());
    assert!(history::check_exclusion(&[s("a", false, 0, 10, None), s("a", true, 5, 20, None)]).is_err());
    assert!(history::check_exclusion(&[s("a", true, 0, 10, None), s("a", false, 5, 20, None)]).is_err());
    assert!(
        history::check_exclusion(&[s("a", false, 0, 50, None), s("a", false, 1, 2, None), s("a", true, 10, 20, None)])
            .is_err()
    );
    assert!(history::check_tokens(&[s("a", true, 0, 1, Some(1)), s("a", true, 2, 3, Some(2))]).is_ok());
    assert!(history::check_tokens(&[s("a", true, 0, 1, Some(2)), s("a", true, 2, 3, Some(2))]).is_err());
    assert!(history::check_tokens(&[s("a", true, 2, 3, Some(1)), s("a", true, 0, 1, Some(5))]).is_err());
}
