//! `SlowFsync`: a running server whose disk syncs (`fsync`, `fdatasync`) each take longer
//! by a set delay, as on a disk slow to sync, for the durability tests. `strace` attaches
//! to every thread of the server and delays each such call on its way in (`inject=…:
//! delay_enter`); nothing else of the server is touched. Dropping it detaches.
//!
//! Needs `strace` (Debian's package) and the right to trace the server (root, or
//! `kernel.yama.ptrace_scope` 0).

use std::fs;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How long `attach` waits for strace to hold every thread of the server.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(10);

/// `strace` holding a server's disk syncs back; detached (killed and reaped) on drop.
pub struct SlowFsync {
    strace: Child,
}

impl SlowFsync {
    /// Attaches to every thread of process `pid`, delaying each of its `fsync` and
    /// `fdatasync` calls by `delay`, and returns once every thread is traced. Panics when
    /// `strace` is missing or cannot attach.
    pub fn attach(pid: u32, delay: Duration) -> SlowFsync {
        let micros = delay.as_micros().to_string();
        let strace = Command::new("strace")
            .args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=fsync,fdatasync"])
            .args(["-e", &format!("inject=fsync,fdatasync:delay_enter={micros}")])
            .args(["-p", &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run strace: {e} (Debian's package strace; scripts/ensure-servers installs it)")
            });
        let mut slow = SlowFsync { strace };
        let deadline = Instant::now() + ATTACH_TIMEOUT;
        while !every_thread_traced(pid) {
            if let Ok(Some(status)) = slow.strace.try_wait() {
                panic!("strace could not attach to process {pid} ({status}): may this user trace it?");
            }
            assert!(
                Instant::now() < deadline,
                "strace did not attach to every thread of process {pid} within {ATTACH_TIMEOUT:?}"
            );
            thread::sleep(Duration::from_millis(10));
        }
        slow
    }
}

impl Drop for SlowFsync {
    fn drop(&mut self) {
        let _ = self.strace.kill();
        let _ = self.strace.wait();
    }
}

/// Whether every thread of `pid` has a tracer (`TracerPid` in its status is not 0).
fn every_thread_traced(pid: u32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    let mut any = false;
    for task in tasks.flatten() {
        let status = fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let tracer = status.lines().find_map(|line| line.strip_prefix("TracerPid:")).map(str::trim);
        if tracer.is_none_or(|tracer| tracer == "0") {
            return false;
        }
        any = true;
    }
    any
}
