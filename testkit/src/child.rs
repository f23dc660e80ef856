//! Child worker processes: the test binary re-invokes itself to play a named role in
//! another process (to test crashes, pauses and real cross-process contention).
//!
//! The parent calls [`Child::spawn`]; the child runs the test `child_process_entry`,
//! which calls [`dispatch`] with the role table. A role talks back by printing lines
//! with [`say`]; the parent reads them with [`Child::wait_line`].

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

/// Names the role a child process plays; set only in child processes.
pub const ROLE_ENV: &str = "REDLEASE_TEST_ROLE";
/// The pid of the parent test process, so an orphaned child can end itself.
const PARENT_ENV: &str = "REDLEASE_TEST_PARENT_PID";
/// Marks the lines of a child's stdout that are meant for the parent.
const MARKER: &str = "@@ ";

/// One entry of a role table: the role's name and the function the child runs.
pub type Role = (&'static str, fn());

/// In a child process (`ROLE_ENV` set): runs that role, then `std::process::exit(0)`
/// (a panic in the role fails the test, so the child exits with code 101). Panics on
/// an unknown role. Not a child: returns at once.
pub fn dispatch(roles: &[&[Role]]) {
    let Ok(role) = std::env::var(ROLE_ENV) else {
        // Not a child: the test run's own call, which holds the table to one role per name
        // (a child sent to a name given twice would play whichever came first).
        let twice = named_twice(roles);
        assert!(twice.is_empty(), "child roles named more than once: {twice:?}");
        return;
    };
    let run = roles
        .iter()
        .flat_map(|table| table.iter())
        .find(|(name, _)| *name == role)
        .map(|(_, run)| *run)
        .unwrap_or_else(|| {
            let known: Vec<&str> = roles.iter().flat_map(|table| table.iter().map(|(name, _)| *name)).collect();
            panic!("unknown child role {role:?}; known roles: {known:?}")
        });
    watch_parent();
    run();
    let _ = std::io::stdout().flush();
    std::process::exit(0);
}

/// The role names that stand more than once in `roles`.
fn named_twice(roles: &[&[Role]]) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = roles.iter().flat_map(|table| table.iter().map(|(name, _)| *name)).collect();
    names.sort_unstable();
    let mut twice: Vec<&'static str> = names.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
    twice.dedup();
    twice
}

/// Whether this process is a child worker (`ROLE_ENV` is set).
pub fn is_child() -> bool {
    std::env::var_os(ROLE_ENV).is_some()
}

/// Reads a required environment variable in a child; panics clearly if it is missing.
pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|e| {
        panic!(
            "child role {:?} needs the environment variable {name} ({e}); pass it in Child::spawn",
            std::env::var(ROLE_ENV).unwrap_or_default()
        )
    })
}

/// In a child: prints `"@@ " + line` to stdout and flushes, for the parent to read.
pub fn say(line: &str) {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // If the parent is gone there is nobody to tell; ignore errors.
    let _ = writeln!(out, "{MARKER}{line}");
    let _ = out.flush();
}

/// Ends this child process if its parent test process goes away (the child would be
/// re-parented), so killed test runs leave no workers behind.
fn watch_parent() {
    let Some(parent) = std::env::var(PARENT_ENV).ok().and_then(|p| p.parse::<u32>().ok()) else {
        return;
    };
    let _ = thread::Builder::new().name("child-parent-watch".into()).spawn(move || {
        loop {
            if std::os::unix::process::parent_id() != parent {
                std::process::exit(102);
            }
            thread::sleep(Duration::from_millis(100));
        }
    });
}

#[derive(Default)]
struct Lines {
    lines: Vec<String>,
    /// Index of the first line `wait_line` has not looked at yet.
    cursor: usize,
    /// The child's stdout is closed.
    eof: bool,
}

type SharedLines = Arc<(Mutex<Lines>, Condvar)>;

fn lock(lines: &Mutex<Lines>) -> MutexGuard<'_, Lines> {
    lines.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A child process playing a role. SIGKILLed and reaped on drop if still running.
pub struct Child {
    role: String,
    process: std::process::Child,
    lines: SharedLines,
    status: Option<ExitStatus>,
}

impl Child {
    /// Spawns `current_exe()` with args `["child_process_entry", "--exact", "--nocapture",
    /// "--test-threads=1", "-q"]`, env `ROLE_ENV=role` plus `env`, stdin null, stdout
    /// piped (a reader thread collects the lines that start with `"@@ "`, stripped of the
    /// marker), stderr inherited.
    pub fn spawn(role: &str, env: &[(&str, String)]) -> Child {
        let exe = std::env::current_exe().expect("current_exe");
        let mut command = Command::new(&exe);
        command
            .args(["child_process_entry", "--exact", "--nocapture", "--test-threads=1", "-q"])
            .env(ROLE_ENV, role)
            .env(PARENT_ENV, std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut process =
            command.spawn().unwrap_or_else(|e| panic!("cannot spawn child {role:?} ({}): {e}", exe.display()));
        let stdout = process.stdout.take().expect("child stdout is piped");
        let lines: SharedLines = Arc::default();
        {
            let lines = lines.clone();
            thread::Builder::new()
                .name(format!("child-{role}-stdout"))
                .spawn(move || {
                    let mut reader = BufReader::new(stdout);
                    let mut raw = Vec::new();
                    loop {
                        raw.clear();
                        match reader.read_until(b'\n', &mut raw) {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {
                                let text = String::from_utf8_lossy(&raw);
                                let text = text.trim_end_matches(['\n', '\r']);
                                if let Some(line) = text.strip_prefix(MARKER) {
                                    lock(&lines.0).lines.push(line.to_string());
                                    lines.1.notify_all();
                                }
                            }
                        }
                    }
                    lock(&lines.0).eof = true;
                    lines.1.notify_all();
                })
                .expect("spawn child stdout reader");
        }
        Child { role: role.to_string(), process, lines, status: None }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// Waits for the next not-yet-consumed line that starts with `prefix` and returns
    /// the whole line (without the `"@@ "` marker). Earlier non-matching lines are
    /// skipped (still in [`lines`](Self::lines)). Panics on timeout or if the child
    /// closed its stdout (exited) without such a line, showing the lines seen.
    pub fn wait_line(&self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        let (mutex, condvar) = &*self.lines;
        let mut state = lock(mutex);
        loop {
            while state.cursor < state.lines.len() {
                let index = state.cursor;
                state.cursor += 1;
                if state.lines[index].starts_with(prefix) {
                    return state.lines[index].clone();
                }
            }
            let now = Instant::now();
            if state.eof || now >= deadline {
                let why = if state.eof {
                    "exited (closed its stdout) without printing".to_string()
                } else {
                    format!("did not print within {timeout:?}")
                };
                let seen = state.lines.clone();
                drop(state);
                panic!(
                    "child {:?} (pid {}) {why} a line starting with {prefix:?}; lines seen: {seen:#?}",
                    self.role,
                    self.pid()
                );
            }
            state = condvar.wait_timeout(state, deadline - now).unwrap_or_else(|poisoned| poisoned.into_inner()).0;
        }
    }

    /// Every `"@@"` line the child printed so far (without the marker).
    pub fn lines(&self) -> Vec<String> {
        lock(&self.lines.0).lines.clone()
    }

    /// SIGKILLs the child and reaps it. No-op if it was already reaped.
    pub fn kill(&mut self) {
        if self.status.is_none() {
            self.signal(Signal::SIGKILL);
            self.status = Some(self.process.wait().expect("wait for killed child"));
        }
    }

    /// SIGSTOP: freezes the child (as a long GC pause or a stopped VM would). Returns
    /// once every thread of the child is stopped (read from `/proc`), so nothing the
    /// child does happens after this returns.
    pub fn stop(&self) {
        self.signal(Signal::SIGSTOP);
        self.wait_until_stopped(true);
    }

    /// SIGCONT: resumes a stopped child. Returns once no thread of it is stopped.
    pub fn cont(&self) {
        self.signal(Signal::SIGCONT);
        self.wait_until_stopped(false);
    }

    /// Waits for the child to exit and returns its status. On timeout, kills it and
    /// panics.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.process.try_wait().expect("try_wait on child") {
                self.status = Some(status);
                return status;
            }
            if Instant::now() >= deadline {
                self.kill();
                panic!(
                    "child {:?} (pid {}) did not exit within {timeout:?}; lines seen: {:#?}",
                    self.role,
                    self.pid(),
                    self.lines()
                );
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Polls `/proc/<pid>/task/*/stat` until every thread is stopped (`stopped`) or none
    /// is. A child that has exited counts as stopped. Without `/proc`, returns at once.
    fn wait_until_stopped(&self, stopped: bool) {
        if self.status.is_some() {
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let Some(states) = thread_states(self.pid()) else {
                return;
            };
            let done = if stopped {
                states.iter().all(|s| matches!(s, 'T' | 't' | 'Z' | 'X'))
            } else {
                !states.contains(&'T')
            };
            if done {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "child {:?} (pid {}) did not {} within 5 s; thread states {states:?}",
                    self.role,
                    self.pid(),
                    if stopped { "stop" } else { "resume" }
                );
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// Sends `signal` unless the child has been reaped (a zombie still owns its pid, so
    /// this never hits an unrelated process).
    fn signal(&self, signal: Signal) {
        if self.status.is_some() {
            return;
        }
        let pid = Pid::from_raw(i32::try_from(self.pid()).expect("pid fits in i32"));
        if let Err(e) = signal::kill(pid, signal) {
            // ESRCH cannot happen before reaping; anything else is a real problem.
            panic!("cannot send {signal} to child {:?} (pid {pid}): {e}", self.role);
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_none() {
            if let Ok(pid) = i32::try_from(self.process.id()) {
                let _ = signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = self.process.wait();
        }
    }
}

/// The scheduler state letter of every thread of `pid`, from `/proc`; `None` if it
/// cannot be read (no `/proc`, or the process is gone).
fn thread_states(pid: u32) -> Option<Vec<char>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut states = Vec::new();
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue; // the thread just ended
        };
        // "tid (comm) S ...": comm may contain spaces and parentheses.
        let state = stat.rsplit_once(") ")?.1.chars().next()?;
        states.push(state);
    }
    if states.is_empty() { None } else { Some(states) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing() {}

    #[test]
    fn a_role_named_twice_is_found() {
        let first: &[Role] = &[("a", nothing), ("b", nothing)];
        let second: &[Role] = &[("b", nothing), ("c", nothing), ("b", nothing)];
        assert_eq!(named_twice(&[first, second]), ["b"]);
        assert!(named_twice(&[first, &[("c", nothing)]]).is_empty());
    }
}
