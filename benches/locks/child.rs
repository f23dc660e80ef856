//! Child processes: this binary run again with `REDLEASE_BENCH_ROLE` set, taking orders as
//! lines on stdin and answering with lines on stdout ([`Worker`] in the parent).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use crate::clock::{mono_ns, nanos};

/// Names the role of a child process; unset in the parent.
pub(crate) const ROLE_ENV: &str = "REDLEASE_BENCH_ROLE";
const PARENT_ENV: &str = "REDLEASE_BENCH_PARENT";
pub(crate) const URL_ENV: &str = "REDLEASE_BENCH_URL";
pub(crate) const LOCK_ENV: &str = "REDLEASE_BENCH_LOCK";
/// The lock kind a child uses (see [`LockKind`](crate::experiments::LockKind)).
pub(crate) const KIND_ENV: &str = "REDLEASE_BENCH_KIND";
/// Whether the throughput threads share one lock ("true") or take one each.
pub(crate) const SHARED_ENV: &str = "REDLEASE_BENCH_SHARED";
pub(crate) const PROCESS_ENV: &str = "REDLEASE_BENCH_PROCESS";
/// How long the parent waits for any line from a child.
const CHILD_REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// A role a child process can play: its name and what it runs (the table is `main`'s, so
/// that this module needs none of the experiments that use it).
pub(crate) type Role = (&'static str, fn());

/// In a child: plays `role`, one of `roles`.
pub(crate) fn child_main(role: &str, roles: &[Role]) {
    watch_parent();
    match roles.iter().find(|(name, _)| *name == role) {
        Some((_, play)) => play(),
        None => panic!("unknown bench role {role:?}"),
    }
    let _ = std::io::stdout().flush();
}

pub(crate) fn child_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|e| panic!("bench child needs {name}: {e}"))
}

/// In a child: one line for the parent.
pub(crate) fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).expect("write to the parent");
}

/// Ends this child if the parent bench process goes away, looking once a second: what a
/// child measures of its own CPU holds this thread's wake-ups too (ten a second cost the
/// leases curve's one-lease child about a third of its CPU).
fn watch_parent() {
    let Some(parent) = std::env::var(PARENT_ENV).ok().and_then(|p| p.parse::<u32>().ok()) else { return };
    thread::spawn(move || {
        loop {
            if std::os::unix::process::parent_id() != parent {
                std::process::exit(102);
            }
            thread::sleep(Duration::from_secs(1));
        }
    });
}

/// A child process playing a role: orders go to its stdin, its stdout lines come back
/// through a reader thread. Killed and reaped on drop unless it finished.
pub(crate) struct Worker {
    role: String,
    process: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: Receiver<String>,
    reaped: bool,
}

impl Worker {
    pub(crate) fn spawn(role: &str, env: &[(&str, String)]) -> Worker {
        let exe = std::env::current_exe().expect("current_exe");
        let mut command = Command::new(&exe);
        command
            .args(std::env::args_os().skip(1))
            .env(ROLE_ENV, role)
            .env(PARENT_ENV, std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut process = command.spawn().unwrap_or_else(|e| panic!("cannot spawn bench child {role:?}: {e}"));
        let stdin = process.stdin.take();
        let stdout = process.stdout.take().expect("child stdout is piped");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Worker { role: role.to_string(), process, stdin, lines, reaped: false }
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.process.id()
    }

    pub(crate) fn send(&mut self, order: &str) {
        let stdin = self.stdin.as_mut().expect("the child's stdin is open");
        writeln!(stdin, "{order}").and_then(|()| stdin.flush()).expect("write an order to the child");
    }

    /// The next line, which must start with `prefix`; returns the rest of it.
    pub(crate) fn expect(&self, prefix: &str) -> String {
        let line = match self.lines.recv_timeout(CHILD_REPLY_TIMEOUT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                panic!("bench child {:?} said nothing for {CHILD_REPLY_TIMEOUT:?} (expected {prefix:?})", self.role)
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("bench child {:?} exited before saying {prefix:?}", self.role)
            }
        };
        match line.strip_prefix(prefix) {
            Some(rest) => rest.to_string(),
            None => panic!("bench child {:?} said {line:?}, expected {prefix:?}", self.role),
        }
    }

    /// Closes stdin and waits for a clean exit.
    pub(crate) fn finish(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.process.try_wait().expect("try_wait on a bench child") {
                self.reaped = true;
                assert!(status.success(), "bench child {:?} failed: {status}", self.role);
                return;
            }
            assert!(Instant::now() < deadline, "bench child {:?} did not exit within 30 s", self.role);
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.process.kill();
            let _ = self.process.wait();
        }
    }
}

/// Parent: tells every worker the window to run in, from 100 ms from now for `length`
/// (CLOCK_MONOTONIC nanoseconds, shared by the processes of one host); returns it, (start,
/// end).
pub(crate) fn send_window(workers: &mut [Worker], length: Duration) -> (u64, u64) {
    let start = mono_ns() + nanos(Duration::from_millis(100));
    let end = start + nanos(length);
    for worker in workers {
        worker.send(&format!("start {start} {end}"));
    }
    (start, end)
}

/// Child: reads the window the parent sends ([`send_window`]): (start, end).
pub(crate) fn read_window() -> (u64, u64) {
    let mut order = String::new();
    std::io::stdin().lock().read_line(&mut order).expect("read the start order");
    let times: Vec<u64> = order.split_whitespace().skip(1).map(|s| s.parse().expect("start and end times")).collect();
    (times[0], times[1])
}
