//! The fenced lock: tokens only grow, and a store that checks them shuts out a stale holder.

use std::thread;
use std::time::{Duration, Instant};

use redlease::ErrorKind;

use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] =
    &[("fenced_tokens", token_worker), ("fenced_stale_writer", stale_writer)];

/// A store that accepts a write only with a token at least as high as any it has seen
/// (a compare-and-set in Lua, on keys of its own).
const FENCED_WRITE: &str = r"
local highest = tonumber(redis.call('get', KEYS[1]) or '0')
if tonumber(ARGV[1]) < highest then return 0 end
redis.call('set', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], ARGV[2])
return 1";

fn store_write(conn: &mut redis::Connection, token: u64, value: &str) -> bool {
    let accepted: i64 = redis::Script::new(FENCED_WRITE)
        .key("store:highest-token")
        .key("store:value")
        .arg(token)
        .arg(value)
        .invoke(conn)
        .unwrap();
    accepted == 1
}

/// 4 threads × 50 grants of LOCK, each appending its token to LOCK:tokens while held.
fn token_worker() {
    let url = child::env("REDIS_URL");
    let client = redlease::Client::open(&url).unwrap();
    run_threads(4, &url, |_, conn| {
        let lock = client.fenced_lock("fenced-order");
        for _ in 0..50 {
            let guard = lock.lock().unwrap();
            let token = guard.token();
            redis::cmd("RPUSH").arg("fenced-order:tokens").arg(token).query::<()>(conn).unwrap();
            drop(guard);
        }
    });
    child::say("done");
}

#[test]
fn tokens_strictly_increase_across_processes_and_reentrant_grants() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let env = [("REDIS_URL", server.url())];
    let mut workers = [Child::spawn("fenced_tokens", &env), Child::spawn("fenced_tokens", &env)];
    for w in &mut workers {
        w.wait_line("done", Duration::from_secs(60));
    }
    let tokens: Vec<u64> = redis::cmd("LRANGE").arg("fenced-order:tokens").arg(0).arg(-1).query(&mut conn).unwrap();
    assert_eq!(tokens.len(), 400);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens in grant order must increase: {tokens:?}");
    // Reentrant grants take tokens too; the counter has no expiry.
    let client = client(&server);
    let lock = client.fenced_lock("fenced-order");
    let a = lock.lock().unwrap();
    let b = lock.lock().unwrap();
    assert!(b.token() > a.token() && a.token() > *tokens.last().unwrap());
    assert_eq!(pttl(&mut conn, "redisson_lock_token:{fenced-order}"), -1);
    drop((b, a));
    assert!(!exists(&mut conn, "fenced-order"));
}

/// Takes LOCK (watchdog WATCHDOG_MS), says its token, then waits for LOCK:go; when it comes
/// (after the parent resumed it), writes to the store with its token and reports.
fn stale_writer() {
    let url = child::env("REDIS_URL");
    let watchdog = Duration::from_millis(child::env("WATCHDOG_MS").parse().unwrap());
    let client = redlease::Client::builder(url.as_str()).watchdog_timeout(watchdog).build().unwrap();
    let mut conn = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
    let guard = client.fenced_lock("fenced-stale").lock().unwrap();
    child::say(&format!("token {}", guard.token()));
    while redis::cmd("GET").arg("fenced-stale:go").query::<Option<String>>(&mut conn).unwrap().is_none() {
        thread::sleep(Duration::from_millis(5));
    }
    let accepted = store_write(&mut conn, guard.token(), "stale");
    child::say(&format!("write {}", if accepted { "accepted" } else { "rejected" }));
    let end = Instant::now() + Duration::from_secs(5);
    while guard.is_held() && Instant::now() < end {
        thread::sleep(Duration::from_millis(10));
    }
    child::say(&format!("held {}", guard.is_held()));
    let unlock = guard.unlock().map_err(|e| e.kind());
    child::say(&format!("unlock {unlock:?}"));
}

#[test]
fn a_paused_holder_whose_lease_ran_out_is_shut_out_by_the_fenced_store() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let env = [("REDIS_URL", server.url()), ("WATCHDOG_MS", "600".to_string())];
    let stale = Child::spawn("fenced_stale_writer", &env);
    let line = stale.wait_line("token", Duration::from_secs(10));
    let stale_token: u64 = line.trim_start_matches("token ").parse().unwrap();
    stale.stop(); // a long GC pause, say: no renewals
    let client = client(&server);
    let guard =
        client.fenced_lock("fenced-stale").try_lock_for(Duration::from_secs(5)).unwrap().expect("lease ran out");
    let token = guard.token();
    assert!(token > stale_token);
    assert!(store_write(&mut conn, token, "fresh"), "the new holder writes");
    redis::cmd("SET").arg("fenced-stale:go").arg(1).query::<()>(&mut conn).unwrap();
    stale.cont();
    assert_eq!(stale.wait_line("write", Duration::from_secs(10)), "write rejected", "the stale write is refused");
    assert_eq!(stale.wait_line("held", Duration::from_secs(10)), "held false", "the stale guard learns of its loss");
    assert_eq!(
        stale.wait_line("unlock", Duration::from_secs(10)),
        format!("unlock {:?}", Err::<(), _>(ErrorKind::NotHeld))
    );
    let value: String = redis::cmd("GET").arg("store:value").query(&mut conn).unwrap();
    assert_eq!(value, "fresh");
    assert!(guard.is_held(), "the stale holder's unlock left the new holder alone");
    drop(guard);
}
