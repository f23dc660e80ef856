//! How a resource uses fencing tokens to shut out a holder whose lease ran out.
//!
//! A worker takes the fenced lock with a short lease, then stalls (a GC pause, a swapped-out
//! process...) past its lease. Another worker takes the lock meanwhile and writes. When the
//! first one wakes up and writes, the store sees its older token and refuses the write.
//!
//! The store is a compare-and-set in Lua on keys of its own: it keeps the highest token it
//! has accepted and rejects any write that carries a lower one.
//!
//! Uses `REDIS_URL` when set; else a Redis on 127.0.0.1:6379 if one answers; else it starts
//! a throwaway `redis-server` (from `REDLEASE_REDIS_SERVER` or `PATH`) and stops it at the end.
//!
//! Run: `cargo run --example fenced_store`

use std::thread;
use std::time::Duration;

use redlease::Client;

#[path = "support/redis_url.rs"]
mod redis_url;

/// Accept the write only if its token is at least the highest seen so far.
const FENCED_WRITE: &str = r"
local highest = tonumber(redis.call('get', KEYS[1]) or '0')
if tonumber(ARGV[1]) < highest then return 0 end
redis.call('set', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], ARGV[2])
return 1";

fn write(store: &mut redis::Connection, token: u64, value: &str) -> redis::RedisResult<bool> {
    let accepted: i64 = redis::Script::new(FENCED_WRITE)
        .key("example:report:highest-token")
        .key("example:report")
        .arg(token)
        .arg(value)
        .invoke(store)?;
    Ok(accepted == 1)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _throwaway) = redis_url::redis_url()?;
    let client = Client::open(&url)?;
    let mut store = redis::Client::open(url.as_str())?.get_connection()?;

    let slow = client.fenced_lock("example:report-lock").with_lease(Duration::from_millis(500));
    let slow_guard = slow.lock()?;
    let slow_token = slow_guard.token();
    println!("slow worker holds the lock with token {slow_token}, then stalls for 1 s");

    let fast = client.fenced_lock("example:report-lock");
    let fast_worker = thread::spawn(move || -> Result<u64, redlease::Error> {
        let guard = fast.lock()?; // granted once the slow worker's lease has run out
        Ok(guard.token())
    });
    thread::sleep(Duration::from_secs(1));
    let fast_token = fast_worker.join().expect("worker thread")?;
    println!(
        "fast worker got the lock with token {fast_token} and writes: accepted = {}",
        write(&mut store, fast_token, "fresh")?
    );

    println!("slow worker wakes; its guard says held = {}", slow_guard.is_held());
    println!("slow worker writes anyway: accepted = {}", write(&mut store, slow_token, "stale")?);
    let value: String = redis::cmd("GET").arg("example:report").query(&mut store)?;
    let verdict = if value == "fresh" {
        "the fast worker's write; the stale one was refused"
    } else {
        "the stale write got through"
    };
    println!("the store holds \"{value}\": {verdict}");
    Ok(())
}
