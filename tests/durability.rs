//! Grants a crash cannot take back (`ClientBuilder::sync_mode`). A server with
//! `appendonly yes` and `appendfsync everysec` whose disk is slow to sync holds its AOF's
//! writes back while a sync runs; SIGKILLed then, it starts again from an AOF without the
//! last grants, and their locks are free while their holders work on. Under
//! `SyncMode::WaitAof` a grant is given only once the master's AOF has it on disk.
//!
//! The tests of `needs_waitaof` need a server with `WAITAOF` (Redis 7.2 or later, Valkey):
//! on another, they fail saying so, and `scripts/test` skips them and counts them apart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, mpsc};
use std::thread;
use std::time::Duration;

use redlease::{Client, ErrorKind, SyncMode};

use crate::helpers::client_with;
use crate::support::server::RedisServer;

/// Whether the server knows `WAITAOF`.
fn has_waitaof(server: &RedisServer) -> bool {
    let info: redis::Value =
        redis::cmd("COMMAND").arg("INFO").arg("WAITAOF").query(&mut server.conn()).expect("COMMAND INFO");
    matches!(info, redis::Value::Array(ref entries) if entries.first().is_some_and(|e| *e != redis::Value::Nil))
}

/// Error replies the server has sent (`total_error_replies`), read on `conn`: here, its
/// refusals of `WAITAOF` (an unknown command before Redis 7.2; no AOF to wait for after).
fn error_replies(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(conn).expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix("total_error_replies:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_error_replies in INFO stats")
}

/// Under `Auto`, a server without an AOF grants as under `Wait`, and is asked about its
/// disk once a second at most; under `WaitAof` it grants nothing, and says why.
#[test]
fn a_master_without_aof_grants_under_auto_and_refuses_under_wait_aof() {
    let server = RedisServer::start();
    let auto = client_with(&server, |b| b.sync_mode(SyncMode::Auto));
    // The first grant asks, and opens the connection the next ones take (a new one would
    // add refusals of its own `CLIENT SETINFO` on a server without it).
    drop(auto.lock("auto").try_lock().expect("granted under Auto").expect("free"));
    let mut conn = server.conn();
    let (before, started) = (error_replies(&mut conn), std::time::Instant::now());
    for i in 0..20 {
        let guard = auto.lock(format!("auto-{i}")).try_lock().expect("granted under Auto").expect("free");
        drop(guard);
    }
    let (asked, seconds) = (error_replies(&mut conn) - before, started.elapsed().as_secs());
    assert!(asked <= seconds + 1, "twenty grants in {seconds} s asked about the disk {asked} times");

    let strict = client_with(&server, |b| b.sync_mode(SyncMode::WaitAof).retry_budget(Duration::ZERO));
    let err = strict.lock("strict").try_lock().expect_err("no AOF, no grant under WaitAof");
    assert_eq!(err.kind(), ErrorKind::NotPersisted, "{err}");
    assert!(!err.is_transient(), "no retry mends a master without AOF: {err}");
    let said = err.to_string();
    assert!(said.contains("appendonly no") || said.contains("WAITAOF"), "{said}");
    let exists: bool = redis::cmd("EXISTS").arg("strict").query(&mut server.conn()).expect("EXISTS");
    assert!(!exists, "the grant was undone");
}

mod needs_waitaof {
    use super::*;
    use crate::support::slow_disk::SlowFsync;

    /// How long each of the server's disk syncs is held back.
    const SLOW_SYNC: Duration = Duration::from_millis(1000);
    /// How long the clients take locks before the crash.
    const GRANTING: Duration = Duration::from_secs(3);
    const THREADS: usize = 6;

    /// Takes locks from `THREADS` threads of `client` while each disk sync of `server`
    /// takes `SLOW_SYNC` longer, SIGKILLs the server meanwhile, starts it again from its
    /// AOF, and counts the grants given before the crash and the ones it took back.
    fn grants_lost_in_a_crash(server: &mut RedisServer, client: &Client, prefix: &str) -> (usize, usize) {
        let slow = SlowFsync::attach(server.pid().expect("running"), SLOW_SYNC);
        let stop = AtomicBool::new(false);
        let counted = Barrier::new(THREADS + 1);
        let (granted_tx, granted_rx) = mpsc::channel::<Vec<String>>();
        thread::scope(|s| {
            for t in 0..THREADS {
                let (stop, counted, granted_tx) = (&stop, &counted, granted_tx.clone());
                s.spawn(move || {
                    let (mut names, mut guards) = (Vec::new(), Vec::new());
                    for i in 0.. {
                        if stop.load(Ordering::Acquire) {
                            break;
                        }
                        let name = format!("{prefix}-{t}-{i}");
                        if let Ok(Some(guard)) = client.lock(name.as_str()).try_lock() {
                            names.push(name);
                            guards.push(guard);
                        }
                    }
                    granted_tx.send(names).expect("counted");
                    // The guards stand until the locks are counted.
                    counted.wait();
                    drop(guards);
                });
            }
            thread::sleep(GRANTING);
            server.kill();
            stop.store(true, Ordering::Release);
            let granted: Vec<String> = granted_rx.iter().take(THREADS).flatten().collect();
            drop(slow);
            server.start_again();
            let mut conn = server.conn();
            let lost = granted
                .iter()
                .filter(|name| !redis::cmd("EXISTS").arg(name.as_str()).query::<bool>(&mut conn).expect("EXISTS"))
                .count();
            counted.wait();
            (granted.len(), lost)
        })
    }

    /// The hazard first (a client under `Wait` loses grants to the crash: the test can
    /// see a loss), then the same crash under `WaitAof`: nothing granted is lost.
    #[test]
    fn a_crash_during_a_slow_disk_sync_takes_back_no_grant_made_under_wait_aof() {
        let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "everysec"]);
        assert!(
            has_waitaof(&server),
            "this server has no WAITAOF (Redis 7.2 or later, or Valkey): run with {} naming one, or skip needs_waitaof",
            crate::support::server::REDIS_SERVER_ENV
        );
        let quick = |b: redlease::ClientBuilder| b.retry_budget(Duration::ZERO);
        let waiting = client_with(&server, quick);
        let (granted, lost) = grants_lost_in_a_crash(&mut server, &waiting, "wait");
        eprintln!("SyncMode::Wait: {lost} of {granted} grants lost in the crash");
        assert!(granted > 0 && lost > 0, "under Wait the crash took back {lost} of {granted} grants");
        drop(waiting);

        let durable = client_with(&server, |b| {
            quick(b).sync_mode(SyncMode::WaitAof).replica_sync_timeout(Duration::from_secs(10))
        });
        let (granted, lost) = grants_lost_in_a_crash(&mut server, &durable, "aof");
        eprintln!("SyncMode::WaitAof: {lost} of {granted} grants lost in the crash");
        assert!(granted > 0, "grants were given under WaitAof");
        assert_eq!(lost, 0, "under WaitAof the crash took back {lost} of {granted} grants");
    }

    /// `Auto` on a master with an AOF waits for its disk as `WaitAof` does: a grant the
    /// slow disk did not confirm in time is undone, and the error says a retry may mend it.
    /// (A grant whose write an earlier sync happened to cover is confirmed at once: the
    /// attempts go on until one is refused.)
    #[test]
    fn auto_waits_for_the_disk_of_a_master_with_aof() {
        let server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "everysec"]);
        assert!(has_waitaof(&server), "this server has no WAITAOF: skip needs_waitaof");
        let _slow = SlowFsync::attach(server.pid().expect("running"), Duration::from_millis(600));
        let auto = client_with(&server, |b| {
            b.sync_mode(SyncMode::Auto).replica_sync_timeout(Duration::from_millis(100)).retry_budget(Duration::ZERO)
        });
        let refused = (0..50).find_map(|i| {
            let name = format!("slow-{i}");
            auto.lock(name.as_str()).try_lock().err().map(|err| (name, err))
        });
        let (name, err) = refused.expect("a grant the slow disk did not confirm within 100 ms is refused");
        assert_eq!(err.kind(), ErrorKind::NotPersisted, "{err}");
        assert!(err.is_transient(), "a slow disk is worth another try: {err}");
        let exists: bool = redis::cmd("EXISTS").arg(&name).query(&mut server.conn()).expect("EXISTS");
        assert!(!exists, "the grant was undone");
    }
}
