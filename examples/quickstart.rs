//! Two workers, each with its own client (as two services would have), take turns on one
//! lock and say who holds it when. One critical section outlasts the lease, and the
//! watchdog keeps the lock held through it.
//!
//! Uses `REDIS_URL` when set; else a Redis on 127.0.0.1:6379 if one answers; else it starts
//! a throwaway `redis-server` (from `REDLEASE_REDIS_SERVER` or `PATH`) and stops it at the end.
//!
//! Run: `cargo run --example quickstart`

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redlease::Client;

const LOCK: &str = "quickstart:nightly-report";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _throwaway) = redis_url()?;
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

/// The URL to use, and the throwaway server started for it, if any (stopped on drop).
fn redis_url() -> Result<(String, Option<Throwaway>), Box<dyn std::error::Error>> {
    if let Ok(url) = std::env::var("REDIS_URL") {
        println!("using REDIS_URL={url}");
        return Ok((url, None));
    }
    let default = SocketAddr::from((Ipv4Addr::LOCALHOST, 6379));
    if answers_ping(default) {
        println!("using the Redis at 127.0.0.1:6379");
        return Ok(("redis://127.0.0.1:6379/".into(), None));
    }
    let server = Throwaway::start()?;
    println!("nothing answers on 127.0.0.1:6379: started a throwaway redis-server on port {}", server.port);
    Ok((format!("redis://127.0.0.1:{}/", server.port), Some(server)))
}

fn answers_ping(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok() && stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

/// A redis-server this demo started; killed when dropped.
struct Throwaway {
    child: Child,
    port: u16,
}

impl Throwaway {
    fn start() -> Result<Throwaway, Box<dyn std::error::Error>> {
        let binary = std::env::var("REDLEASE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port();
        let child = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {binary} ({e}); install it with `apt-get install redis-server`"))?;
        let server = Throwaway { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !answers_ping(SocketAddr::from((Ipv4Addr::LOCALHOST, port))) {
            if Instant::now() > deadline {
                return Err("the throwaway redis-server did not answer within 10 s".into());
            }
            thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
