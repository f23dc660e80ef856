//! What `Client::stats()` tells: four threads share one lock for two seconds, then the
//! counters a service would export are printed (acquisitions by outcome, the time waited and
//! held as quantiles, wake-ups, losses).
//!
//! What to look for: the plain lock is not fair. A thread that releases and asks again at
//! once usually gets the lock back before the waiter its release woke can try, so most
//! acquisitions are "at once", most wake-ups are wasted, and some waits time out. With
//! `client.fair_lock(..)` the lock goes round in turn.
//!
//! Uses `REDIS_URL` (default `redis://127.0.0.1:6379/`).
//! Run: `cargo run --example stats`

use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, DurationHistogram};

fn quantiles(h: &DurationHistogram) -> String {
    let q = |q: f64| h.quantile(q).map_or("-".to_owned(), |d| format!("{d:?}"));
    format!("{} counted, mean {:?}, p50 < {}, p99 < {}", h.count(), h.mean(), q(0.5), q(0.99))
}

fn main() -> redlease::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned());
    let client = Client::open(&url)?;
    let lock = client.lock("example:stats");
    let until = Instant::now() + Duration::from_secs(2);
    thread::scope(|s| {
        for _ in 0..4 {
            let lock = lock.clone();
            s.spawn(move || -> redlease::Result<()> {
                while Instant::now() < until {
                    if let Some(guard) = lock.try_lock_for(Duration::from_millis(50))? {
                        thread::sleep(Duration::from_millis(5)); // the work the lock guards
                        drop(guard);
                    }
                }
                Ok(())
            });
        }
    });
    let stats = client.stats();
    println!("acquired at once:       {}", stats.acquired_at_once);
    println!("acquired after waiting: {}", stats.acquired_after_waiting);
    println!("timed out:              {}", stats.timed_out);
    println!("failed:                 {}", stats.failed);
    println!("waited:                 {}", quantiles(&stats.wait_time));
    println!("held:                   {}", quantiles(&stats.hold_time));
    println!("wake-ups (wasted):      {} ({})", stats.wake_ups, stats.wasted_wake_ups);
    println!("leases lost:            {}", stats.leases_lost);
    client.shutdown();
    Ok(())
}
