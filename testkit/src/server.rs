//! `RedisServer`: a real `redis-server` process on a free loopback port, in its own
//! temporary directory, killed and cleaned up on drop.
//!
//! Self-contained (std + `redis` only); the integration tests and the benchmark both use it
//! from this crate.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

pub use crate::ports::free_port;
use std::time::{Duration, Instant};

/// Environment variable naming the `redis-server` binary to use instead of the one on `PATH`.
pub const REDIS_SERVER_ENV: &str = "REDLEASE_REDIS_SERVER";

/// How many fresh ports `start`/`start_with` try before giving up.
const START_ATTEMPTS: usize = 5;
/// How long one start waits for the server to answer PING.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `start_again` keeps retrying on the same port.
const SAME_PORT_RETRY: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(10);

static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A `redis-server` child process. Killed (SIGKILL), reaped and its directory removed on drop.
pub struct RedisServer {
    binary: PathBuf,
    port: u16,
    dir: PathBuf,
    extra_args: Vec<String>,
    child: Option<Child>,
}

/// Why one attempt to start the server failed.
enum StartError {
    /// The process exited before it answered (typically: the port was taken).
    Exited(String),
    /// Another process answered on the port (it was taken by someone else).
    PortTaken(String),
    /// The process kept running but never became ready.
    NotReady(String),
}

impl RedisServer {
    /// Starts a server with the default arguments on a free port.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts a server with the default arguments followed by `extra_args`
    /// (later arguments win in `redis-server`), e.g.
    /// `["--appendonly", "yes", "--appendfsync", "always"]`.
    pub fn start_with(extra_args: &[&str]) -> RedisServer {
        RedisServer::start_binary_with(find_binary(), extra_args)
    }

    /// `start_with` on the server binary at `binary` rather than the one
    /// `REDLEASE_REDIS_SERVER` or `PATH` names: for a measurement on a server of its own.
    pub fn start_binary_with(binary: PathBuf, extra_args: &[&str]) -> RedisServer {
        let dir = std::env::temp_dir().join(format!(
            "redlease-test-redis-{}-{}",
            std::process::id(),
            DIR_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        if dir.exists() {
            // Left over by an earlier process that had the same pid.
            let _ = fs::remove_dir_all(&dir);
        }
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create redis test dir {}: {e}", dir.display()));
        let mut server = RedisServer {
            binary,
            port: 0,
            dir,
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            server.port = free_port();
            match server.try_start() {
                Ok(()) => return server,
                Err(StartError::Exited(why)) | Err(StartError::PortTaken(why)) => {
                    failures.push(format!("port {}: {why}", server.port));
                }
                Err(StartError::NotReady(why)) => {
                    panic!("{}", server.failure_message(&why));
                }
            }
        }
        panic!(
            "{}",
            server.failure_message(&format!(
                "redis-server did not start in {START_ATTEMPTS} attempts:\n  {}",
                failures.join("\n  ")
            ))
        );
    }

    /// The TCP port the server listens on (stays the same across `start_again`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port))
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The server's process id, `None` while it is not running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The server's own directory (`--dir`), holding its log and any data files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A fresh raw connection for assertions (read/write timeouts 10 s). Panics if the
    /// server cannot be reached.
    pub fn conn(&self) -> redis::Connection {
        let timeout = Duration::from_secs(10);
        let client = redis::Client::open(self.url()).unwrap_or_else(|e| panic!("bad redis url {}: {e}", self.url()));
        let conn = client
            .get_connection_with_timeout(timeout)
            .unwrap_or_else(|e| panic!("cannot connect to redis-server at {}: {e}", self.url()));
        conn.set_read_timeout(Some(timeout)).expect("set_read_timeout");
        conn.set_write_timeout(Some(timeout)).expect("set_write_timeout");
        conn
    }

    /// SIGKILLs the server and reaps it. No-op when it is not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill(); // SIGKILL on unix
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port with the same arguments and directory
    /// (so `--appendonly yes` data survives) and waits until it answers PING. Retries
    /// for up to 5 s while the port is not yet free. Panics if it is already running.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "RedisServer::start_again: the server on port {} is still running", self.port);
        let deadline = Instant::now() + SAME_PORT_RETRY;
        loop {
            match self.try_start() {
                Ok(()) => return,
                Err(StartError::NotReady(why)) => panic!("{}", self.failure_message(&why)),
                Err(StartError::Exited(why)) | Err(StartError::PortTaken(why)) => {
                    if Instant::now() >= deadline {
                        panic!(
                            "{}",
                            self.failure_message(&format!(
                                "redis-server could not start again on port {} within {:?}: {why}",
                                self.port, SAME_PORT_RETRY
                            ))
                        );
                    }
                    thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }

    /// `start_again` with `extra_args` in place of the ones the server was started with,
    /// kept for its later starts: a replica started again as the replica of whichever
    /// server is its master now, as the configuration file Sentinel rewrites would have it.
    pub fn start_again_with(&mut self, extra_args: &[&str]) {
        self.extra_args = extra_args.iter().map(|s| s.to_string()).collect();
        self.start_again();
    }

    /// `kill` followed by `start_again`.
    pub fn restart(&mut self) {
        self.kill();
        self.start_again();
    }

    /// Contents of the server's log file (empty if there is none yet).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    fn args(&self) -> Vec<String> {
        let dir = self.dir.to_string_lossy().into_owned();
        let logfile = self.dir.join("redis.log").to_string_lossy().into_owned();
        let mut args: Vec<String> = [
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &dir,
            "--logfile",
            &logfile,
            "--daemonize",
            "no",
            "--protected-mode",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // `DEBUG` is refused from Redis 7 on unless enabled; Redis 6 has it, and refuses
        // the option.
        if major_version(&self.binary).is_none_or(|major| major >= 7) {
            args.extend(["--enable-debug-command".to_owned(), "yes".to_owned()]);
        }
        args.extend(self.extra_args.iter().cloned());
        args
    }

    /// One attempt: spawn on `self.port`, wait until it answers PING.
    fn try_start(&mut self) -> Result<(), StartError> {
        let stdio_path = self.dir.join("stdio.log");
        let stdio = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stdio_path)
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", stdio_path.display()));
        let stderr = stdio.try_clone().expect("clone stdio log handle");
        let mut child = Command::new(&self.binary)
            .args(self.args())
            .stdin(Stdio::null())
            .stdout(stdio)
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}\n{}", self.binary.display(), install_hint()));
        let pid = child.id();
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(StartError::Exited(format!("redis-server exited early ({status})")));
            }
            match probe(self.port, pid) {
                Probe::Ready => {
                    self.child = Some(child);
                    return Ok(());
                }
                Probe::Other(other) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(StartError::PortTaken(format!("another process (pid {other}) answers on the port")));
                }
                Probe::NeedsAuth => {
                    // Give a process that lost the race for the port time to exit.
                    thread::sleep(Duration::from_millis(100));
                    if let Ok(None) = child.try_wait() {
                        self.child = Some(child);
                        return Ok(());
                    }
                }
                Probe::NotYet => {}
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(StartError::NotReady(format!(
                    "redis-server (pid {pid}) on port {} did not answer PING within {:?}",
                    self.port, READY_TIMEOUT
                )));
            }
            thread::sleep(POLL);
        }
    }

    fn failure_message(&self, why: &str) -> String {
        let stdio = fs::read_to_string(self.dir.join("stdio.log")).unwrap_or_default();
        format!(
            "{why}\ncommand: {} {:?}\n--- redis.log ---\n{}\n--- stdout/stderr ---\n{}",
            self.binary.display(),
            self.args(),
            self.log(),
            stdio
        )
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn install_hint() -> String {
    format!(
        "redis-server is needed for these tests: install it (e.g. `apt-get install -y redis-server`) \
         or set {REDIS_SERVER_ENV} to the path of a redis-server binary"
    )
}

/// The major version `binary --version` prints (`v=7.0.15`: 7), read once per binary.
fn major_version(binary: &Path) -> Option<u32> {
    static SEEN: std::sync::Mutex<Vec<(PathBuf, Option<u32>)>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, major)) = seen.iter().find(|(seen, _)| seen == binary) {
        return *major;
    }
    let output = Command::new(binary).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let major = text.split_whitespace().find_map(|word| word.strip_prefix("v="))?.split('.').next()?.parse().ok();
    seen.push((binary.to_owned(), major));
    major
}

fn find_binary() -> PathBuf {
    let (name, from_env) = match std::env::var_os(REDIS_SERVER_ENV).filter(|p| !p.is_empty()) {
        Some(value) => (PathBuf::from(value), true),
        None => (PathBuf::from("redis-server"), false),
    };
    let found = if name.components().count() > 1 {
        Some(name.clone()).filter(|p| p.is_file())
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths).map(|dir| dir.join(&name)).find(|candidate| candidate.is_file())
        })
    };
    found.unwrap_or_else(|| {
        if from_env {
            panic!("{REDIS_SERVER_ENV}={} is not a file (nor a program on PATH).\n{}", name.display(), install_hint())
        } else {
            panic!("redis-server was not found on PATH.\n{}", install_hint())
        }
    })
}

enum Probe {
    /// Our process answers PING with PONG.
    Ready,
    /// A different redis process answers on the port.
    Other(u32),
    /// The server wants a password (`--requirepass` among the extra args), so it
    /// cannot be asked for its pid: ready if our process is still running.
    NeedsAuth,
    /// Not listening yet, still loading, or no clear answer.
    NotYet,
}

/// Sends `PING` and `INFO server` on a raw socket; ready when PING gives `+PONG` and
/// INFO names `pid` as `process_id` (so a server that some other test started on the
/// same port is not mistaken for ours).
fn probe(port: u16, pid: u32) -> Probe {
    let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return Probe::NotYet;
    };
    let timeout = Some(Duration::from_secs(1));
    if stream.set_read_timeout(timeout).is_err() || stream.set_write_timeout(timeout).is_err() {
        return Probe::NotYet;
    }
    if stream.write_all(b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n").is_err() {
        return Probe::NotYet;
    }
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return Probe::NotYet;
    }
    let pong = line == "+PONG\r\n";
    if line.starts_with("-NOAUTH") {
        return Probe::NeedsAuth;
    }
    line.clear();
    if reader.read_line(&mut line).is_err() {
        return Probe::NotYet;
    }
    let Some(len) = line.strip_prefix('$').and_then(|n| n.trim_end().parse::<usize>().ok()) else {
        return Probe::NotYet;
    };
    let mut body = vec![0u8; len];
    if reader.read_exact(&mut body).is_err() {
        return Probe::NotYet;
    }
    let body = String::from_utf8_lossy(&body);
    let Some(process_id) =
        body.lines().find_map(|l| l.strip_prefix("process_id:")).and_then(|v| v.trim().parse::<u32>().ok())
    else {
        return Probe::NotYet;
    };
    if process_id != pid {
        Probe::Other(process_id)
    } else if pong {
        Probe::Ready
    } else {
        Probe::NotYet
    }
}

/// Calls of every command the server has served so far (INFO commandstats), less the
/// INFO calls themselves and `SET`s: a test reads it before and after to see that the call
/// under test sent nothing. `SET` is what a client announces itself with (its renewal
/// thread writes the announcement on a schedule of its own, soon after the client's first
/// acquire and a third of a lease apart): the library sends it for nothing else (a
/// script's own `SET`s come with the script's call, which is counted), and a window that
/// caught one would count what the call did not send.
pub fn commands_served(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).expect("INFO");
    info.lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:") && !l.starts_with("cmdstat_set:"))
        .filter_map(|l| l.split("calls=").nth(1)?.split(',').next()?.parse::<u64>().ok())
        .sum()
}
