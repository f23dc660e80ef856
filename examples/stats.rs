//! What `Client::stats()` tells: four threads share one lock for two seconds, then the
//! counters a service would export are printed (acquisitions by outcome, the time waited and
//! held as quantiles, wake-ups, losses).
//!
//! What to look for: the plain lock is not fair. A thread that releases and asks again at
//! once usually gets the lock back before the waiter its release woke can try, so most
//! acquisitions are "at once", most wake-ups are wasted, and some waits time out. With
//! `client.fair_lock(..)` the lock goes round in turn.
//!
//! Uses `REDIS_URL` when set; else a Redis on 127.0.0.1:6379 if one answers; else it starts
//! a throwaway `redis-server` (from `REDLEASE_REDIS_SERVER` or `PATH`) and stops it at the end.
//!
//! Run: `cargo run --example stats`

use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, DurationHistogram};

#[path = "support/redis_url.rs"]
mod redis_url;

/// A duration in the unit that suits it: `850 µs`, `12.3 ms`, `1.20 s`.
fn human(d: Duration) -> String {
    let micros = d.as_secs_f64() * 1e6;
    if micros < 1000.0 {
        format!("{micros:.0} µs")
    } else if micros < 1e6 {
        format!("{:.1} ms", micros / 1000.0)
    } else {
        format!("{:.2} s", micros / 1e6)
    }
}

/// How many, their mean, and the bucket bounds under which half and 99 % of them fall.
fn quantiles(h: &DurationHistogram) -> String {
    if h.count() == 0 {
        return "none".to_owned();
    }
    let q = |q: f64| h.quantile(q).map_or("-".to_owned(), human);
    let mean = human(h.mean());
    format!("{} of them, mean {mean}, half under {}, 99 % under {}", h.count(), q(0.5), q(0.99))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _throwaway) = redis_url::redis_url()?;
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
