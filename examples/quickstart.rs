//! Two workers, each with its own client (as two services would have), take turns on one
//! lock and say who holds it when. One critical section outlasts the lease, and the
//! watchdog keeps the lock held through it.
//!
//! Uses `REDIS_URL` when set; else a Redis on 127.0.0.1:6379 if one answers; else it starts
//! a throwaway `redis-server` (from `REDLEASE_REDIS_SERVER` or `PATH`) and stops it at the end.
//!
//! Run: `cargo run --example quickstart`

use std::thread;
use std::time::{Duration, Instant};

use redlease::Client;

#[path = "support/redis_url.rs"]
mod redis_url;

const LOCK: &str = "quickstart:nightly-report";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _throwaway) = redis_url::redis_url()?;
    let started = Instant::now();
    let say = move |who: &str, what: String| println!("[{:>5} ms] {who:<8} {what}", started.elapsed().as_millis());

    let workers: Vec<_> = ["worker-a", "worker-b"]
        .into_iter()
        .map(|who| {
            // Each worker has its own client, as two processes would.
            let client = Client::builder(url.as_str()).watchdog_timeout(Duration::from_secs(1)).build()?;
            Ok(thread::spawn(move || -> redlease::Result<()> {
                let lock = client.lock(LOCK);
                for round in 1..=3 {
                    say(who, "waits for the lock".into());
                    let guard = lock.lock()?;
                    let work = if round == 2 { Duration::from_millis(2500) } else { Duration::from_millis(300) };
                    say(who, format!("holds it (round {round}), working {} ms", work.as_millis()));
                    thread::sleep(work);
                    let ttl = lock.remaining_ttl()?.unwrap_or_default();
                    say(who, format!("done; lease still held: {}, {} ms left of it", guard.is_held(), ttl.as_millis()));
                    guard.unlock()?;
                    // Work outside the lock. (Without it, this thread would often take the lock
                    // straight back: a non-fair lock lets the releasing thread barge.)
                    thread::sleep(Duration::from_millis(100));
                }
                Ok(())
            }))
        })
        .collect::<redlease::Result<_>>()?;

    // A third party that will not wait: contention is Ok(None), not an error.
    thread::sleep(Duration::from_millis(100));
    let observer = Client::open(&url)?;
    match observer.lock(LOCK).try_lock()? {
        Some(_guard) => say("observer", "got the lock at once".into()),
        None => say("observer", "try_lock: someone holds it (Ok(None)), not waiting".into()),
    }

    for worker in workers {
        worker.join().expect("worker thread")?;
    }
    say("main", format!("all rounds done; lock still exists: {}", observer.lock(LOCK).is_locked()?));
    Ok(())
}
