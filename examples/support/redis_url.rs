//! The Redis an example talks to: `REDIS_URL` when set; else a Redis on 127.0.0.1:6379 if
//! one answers; else a throwaway `redis-server` (from `REDLEASE_REDIS_SERVER` or `PATH`)
//! started on a free port and stopped when the example ends. Shared by the examples with
//! `#[path = "support/redis_url.rs"] mod redis_url;` (not an example of its own).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The URL to use, and the throwaway server started for it, if any (stopped on drop).
pub fn redis_url() -> Result<(String, Option<Throwaway>), Box<dyn std::error::Error>> {
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

/// A redis-server the example started; killed when dropped.
pub struct Throwaway {
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
