//! The `metrics` feature with a Prometheus endpoint: `metrics-exporter-prometheus` serves
//! whatever the library records as Prometheus text, while four threads share two locks
//! (a plain and a fair one) for a while. The service writes no metrics code of its own
//! beyond installing the exporter; the lock names are mapped to a bounded `lock` label.
//!
//! Serves on `METRICS_ADDR` (default `127.0.0.1:9898`) for `RUN_FOR` seconds (default 30).
//! Uses `REDIS_URL` when set; else a Redis on 127.0.0.1:6379 if one answers; else it starts
//! a throwaway `redis-server` (from `REDLEASE_REDIS_SERVER` or `PATH`) and stops it at the end.
//!
//! Run: `cargo run --features metrics --example prometheus`, then
//! `curl -s http://127.0.0.1:9898/metrics | grep redlease`.

use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::PrometheusBuilder;
use redlease::Client;

#[path = "support/redis_url.rs"]
mod redis_url;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr: SocketAddr = std::env::var("METRICS_ADDR").unwrap_or_else(|_| "127.0.0.1:9898".into()).parse()?;
    let run_for = Duration::from_secs(std::env::var("RUN_FOR").map_or(Ok(30), |s| s.parse())?);
    let (url, _server) = redis_url::redis_url()?;

    // The exporter: a recorder the `metrics` facade hands every metric to, and its HTTP
    // endpoint on a thread of its own.
    PrometheusBuilder::new().with_http_listener(addr).install()?;
    println!("serving the metrics on http://{addr}/metrics for {} s", run_for.as_secs());

    // "orders:42" → lock="orders": one series per service, not per order.
    let client = Client::builder(url)
        .metrics_lock_label(|name| name.split_once(':').map(|(kind, _)| kind.to_owned()))
        .build()?;
    let until = Instant::now() + run_for;
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let client = client.clone();
            thread::spawn(move || -> redlease::Result<()> {
                let plain = client.lock("orders:42");
                let fair = client.fair_lock("invoices:7");
                while Instant::now() < until {
                    if i % 2 == 0 {
                        let _guard = plain.lock()?;
                        thread::sleep(Duration::from_millis(5));
                    } else if let Some(_guard) = fair.try_lock_for(Duration::from_millis(50))? {
                        thread::sleep(Duration::from_millis(5));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("a worker thread")?;
    }
    println!("done");
    Ok(())
}
