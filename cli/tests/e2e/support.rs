//! Running the built `redlease` binary as a process: with a deadline, its output captured,
//! killed (and reaped) on drop; and small helpers on files, pids and Redis.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redlease::{Client, LockGuard};
pub use redlease_testkit::proxy::Proxy;
pub use redlease_testkit::server::{RedisServer, commands_served};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_redlease");

/// Exit codes, as docs/cli.md lists them.
pub const USAGE: i32 = 64;
pub const AUTHENTICATION: i32 = 67;
pub const UNAVAILABLE: i32 = 69;
pub const NOT_ACQUIRED: i32 = 75;
pub const LEASE_LOST: i32 = 79;
pub const STOPPED_AT_RISK: i32 = 80;
pub const NOT_FOUND: i32 = 127;
pub const CANNOT_EXECUTE: i32 = 126;

/// The longest any single `redlease` is allowed to run in these tests.
pub const LIMIT: Duration = Duration::from_secs(20);

static DIRS: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "redlease-cli-test-{}-{}",
            std::process::id(),
            DIRS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }

    /// The path as a string, for shell scripts.
    pub fn file(&self, file: &str) -> String {
        self.path(file).to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A `redlease` command with a clean environment for its variables.
pub fn command<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(BIN);
    cmd.args(args).env_remove("REDIS_URL").stdin(Stdio::null());
    for variable in ["REDLEASE_LOCK", "REDLEASE_OWNER", "REDLEASE_CLIENT_ID", "REDLEASE_TOKEN"] {
        cmd.env_remove(variable);
    }
    cmd
}

/// A finished `redlease`.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Finished {
    /// Asserts the exit code, showing the output when it differs.
    pub fn expect_code(&self, code: i32) -> &Finished {
        assert_eq!(self.status.code(), Some(code), "unexpected exit: {self:#?}");
        self
    }

    /// Asserts that stderr is one line starting with `redlease: `, and no panic.
    pub fn expect_one_line_error(&self) -> &Finished {
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "stderr is not one line: {self:#?}");
        assert!(lines[0].starts_with("redlease: "), "{self:#?}");
        assert!(!self.stderr.contains("panicked"), "{self:#?}");
        self
    }
}

/// A running `redlease`, killed and reaped on drop. Its stdout and stderr go to files.
pub struct Running {
    child: Option<Child>,
    started: Instant,
    out: PathBuf,
    err: PathBuf,
    _dir: TempDir,
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        nix::sys::signal::kill(pid, signal).expect("signal redlease");
    }

    /// What it has written to stderr so far.
    pub fn stderr_so_far(&self) -> String {
        fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Waits for it to exit, at most `limit` (then kills it and fails).
    pub fn finish(mut self, limit: Duration) -> Finished {
        let mut child = self.child.take().expect("running");
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return Finished {
                    status,
                    stdout: fs::read_to_string(&self.out).unwrap_or_default(),
                    stderr: fs::read_to_string(&self.err).unwrap_or_default(),
                    elapsed: self.started.elapsed(),
                };
            }
            if self.started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "redlease did not exit within {limit:?}; stderr: {}",
                    fs::read_to_string(&self.err).unwrap_or_default()
                );
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `cmd` with its output going to files.
pub fn start(mut cmd: Command) -> Running {
    let dir = TempDir::new();
    let (out, err) = (dir.path("stdout"), dir.path("stderr"));
    cmd.stdout(fs::File::create(&out).expect("stdout file")).stderr(fs::File::create(&err).expect("stderr file"));
    let started = Instant::now();
    let child = cmd.spawn().expect("spawn redlease");
    Running { child: Some(child), started, out, err, _dir: dir }
}

/// Runs `redlease args…` to the end (at most [`LIMIT`]).
pub fn run<I, S>(args: I) -> Finished
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    start(command(args)).finish(LIMIT)
}

/// Polls `cond` every 5 ms until it holds; fails naming `what` after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < end, "{what}: not within {timeout:?}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// The contents of `path` once it exists and is not empty (a child writes it).
pub fn read_when_written(path: &Path, timeout: Duration) -> String {
    let mut text = String::new();
    wait_for(&format!("{} written", path.display()), timeout, || {
        text = fs::read_to_string(path).unwrap_or_default();
        text.ends_with('\n')
    });
    text.trim().to_owned()
}

/// Whether a process `pid` exists (a zombie counts as existing).
pub fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether the process `pid` exists and is a zombie (exited, not reaped).
pub fn is_zombie(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

/// Whether key `key` exists.
pub fn key_exists(conn: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query(conn).expect("EXISTS")
}

/// The lock hash's fields.
pub fn fields(conn: &mut redis::Connection, key: &str) -> Vec<String> {
    redis::cmd("HKEYS").arg(key).query(conn).expect("HKEYS")
}

/// How a [`NotRedis`] listener treats each connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRedisReply {
    /// Reads what the client sends, answers an HTTP status line (not RESP) and closes,
    /// as a web server on the wrong port does.
    Http,
    /// Closes the connection at once, without a byte.
    Close,
}

/// A real TCP listener on a free loopback port that is not Redis: it answers every
/// connection as its [`NotRedisReply`] says. Stopped (and its thread joined) on drop.
pub struct NotRedis {
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl NotRedis {
    pub fn start(reply: NotRedisReply) -> NotRedis {
        use std::io::{Read, Write};
        use std::net::{Shutdown, TcpListener};
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("local addr");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = std::sync::Arc::clone(&stop);
        let thread = thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut stream) = stream else { continue };
                if reply == NotRedisReply::Close {
                    drop(stream);
                    continue;
                }
                thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut request = [0u8; 4096];
                    let _ = stream.read(&mut request);
                    let _ =
                        stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    let _ = stream.shutdown(Shutdown::Write);
                    // Read what else comes until the client closes, so that the close is
                    // an orderly one (unread data would make it a reset).
                    while matches!(stream.read(&mut request), Ok(n) if n > 0) {}
                });
            }
        });
        NotRedis { addr, stop, thread: Some(thread) }
    }

    /// `redis://127.0.0.1:PORT/`, or with a login: `redis://:PASSWORD@127.0.0.1:PORT/`.
    pub fn url(&self, password: Option<&str>) -> String {
        match password {
            Some(password) => format!("redis://:{password}@{}/", self.addr),
            None => format!("redis://{}/", self.addr),
        }
    }
}

impl Drop for NotRedis {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept.
        let _ = std::net::TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Guards taken on a thread of their own, held until dropped.
pub struct Holding {
    release: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Holding {
    /// Runs `take` on a new thread and keeps what it returns until dropped.
    pub fn start(client: &Client, take: impl FnOnce(&Client) -> Vec<LockGuard> + Send + 'static) -> Holding {
        let client = client.clone();
        let (ready_tx, ready_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let thread = thread::spawn(move || {
            let guards = take(&client);
            ready_tx.send(()).expect("ready");
            let _ = release_rx.recv();
            drop(guards);
        });
        ready_rx.recv_timeout(Duration::from_secs(10)).expect("the holder took its locks");
        Holding { release: Some(release_tx), thread: Some(thread) }
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
