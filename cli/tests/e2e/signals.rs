//! Signals sent to `redlease`: passed on to the command, the lock released only after it
//! has exited, no orphan and no zombie; while still waiting, the wait ends with 128 + n
//! and nothing is acquired.

use std::fs;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::support::*;

/// A command that records its pid and each `signal` it gets; on the signal it waits
/// `linger`, records that it is leaving, and exits with `code`.
fn trapping(dir: &TempDir, signal: &str, linger: &str, code: i32) -> String {
    format!(
        "trap 'echo {signal} >> {got}; sleep {linger}; echo leaving >> {got}; exit {code}' {signal}; \
         echo $$ > {pid}; while :; do sleep 0.05; done",
        got = dir.file("got"),
        pid = dir.file("pid"),
    )
}

fn forwarded(signal: Signal, name: &str) {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let trap = signal.as_str().trim_start_matches("SIG");
    let script = trapping(&dir, trap, "0.5", 7);
    let running = start(command(["run", "--url", &server.url(), name, "--", "sh", "-c", &script]));
    let pid: u32 = read_when_written(&dir.path("pid"), Duration::from_secs(10)).parse().expect("pid");
    running.signal(signal);
    // The command got it, and while it lingers the lock is still held.
    wait_for("the command got the signal", Duration::from_secs(5), || {
        fs::read_to_string(dir.path("got")).unwrap_or_default().starts_with(trap)
    });
    assert!(exists(pid), "the command is still running");
    assert!(key_exists(&mut server.conn(), name), "the lock is held until the command has exited");
    let out = running.finish(LIMIT);
    out.expect_code(7);
    assert_eq!(fs::read_to_string(dir.path("got")).expect("got"), format!("{trap}\nleaving\n"), "once, and only once");
    assert!(!exists(pid), "no orphan, no zombie: the command is gone");
    assert!(!key_exists(&mut server.conn(), name), "released after the command exited");
}

#[test]
fn sigterm_is_passed_on_and_the_lock_released_after_the_command_exits() {
    forwarded(Signal::SIGTERM, "term");
}

#[test]
fn sigint_is_passed_on_and_the_lock_released_after_the_command_exits() {
    forwarded(Signal::SIGINT, "int");
}

#[test]
fn sighup_is_passed_on() {
    forwarded(Signal::SIGHUP, "hup");
}

#[test]
fn a_command_that_dies_of_the_signal_gives_128_plus_n() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let script = format!("echo $$ > {}; exec sleep 60", dir.file("pid"));
    let running = start(command(["run", "--url", &server.url(), "dies", "--", "sh", "-c", &script]));
    let pid: u32 = read_when_written(&dir.path("pid"), Duration::from_secs(10)).parse().expect("pid");
    running.signal(Signal::SIGTERM);
    running.finish(LIMIT).expect_code(128 + 15);
    assert!(!exists(pid));
    assert!(!key_exists(&mut server.conn(), "dies"));
}

#[test]
fn the_command_is_reaped_before_the_lock_is_released() {
    // While the lock is still there the command's pid may exist only as long as it runs:
    // once the key is gone, the command must be gone too, not left a zombie.
    let server = RedisServer::start();
    let dir = TempDir::new();
    let script = format!("echo $$ > {}; exec sleep 0.3", dir.file("pid"));
    let running = start(command(["run", "--url", &server.url(), "reaped", "--", "sh", "-c", &script]));
    let pid: u32 = read_when_written(&dir.path("pid"), Duration::from_secs(10)).parse().expect("pid");
    let mut conn = server.conn();
    wait_for("the lock is released", Duration::from_secs(10), || !key_exists(&mut conn, "reaped"));
    assert!(!is_zombie(pid) && !exists(pid), "the command was not reaped before the release");
    running.finish(LIMIT).expect_code(0);
}

#[test]
fn a_killed_redlease_takes_its_command_with_it() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let script = format!("echo $$ > {}; exec sleep 60", dir.file("pid"));
    let running = start(command(["run", "--url", &server.url(), "orphan", "--", "sh", "-c", &script]));
    let pid: u32 = read_when_written(&dir.path("pid"), Duration::from_secs(10)).parse().expect("pid");
    running.signal(Signal::SIGKILL);
    let out = running.finish(LIMIT);
    assert_eq!(out.status.code(), None, "killed");
    wait_for("the orphan is gone", Duration::from_secs(5), || !exists(pid));
}

#[test]
fn a_signal_while_waiting_ends_the_wait_with_128_plus_n_and_acquires_nothing() {
    let server = RedisServer::start();
    let url = server.url();
    let mut conn = server.conn();
    for (kind, signal) in [("lock", Signal::SIGTERM), ("fair", Signal::SIGINT), ("write", Signal::SIGHUP)] {
        let name = format!("waited-{kind}");
        let holder = start(command(["run", "--url", &url, "--kind", kind, &name, "--", "sleep", "2"]));
        wait_for("the holder holds", Duration::from_secs(10), || key_exists(&mut conn, &name));
        let dir = TempDir::new();
        let marker = dir.file("ran");
        let script = format!("touch {marker}");
        let waiter = start(command(["run", "--url", &url, "--kind", kind, &name, "--", "sh", "-c", &script]));
        // Queued (fair) or subscribed to the release channel: waiting.
        wait_for("the waiter waits", Duration::from_secs(10), || {
            let queued: i64 =
                redis::cmd("LLEN").arg(format!("redisson_lock_queue:{{{name}}}")).query(&mut conn).unwrap_or(0);
            let channels: Vec<String> = redis::cmd("PUBSUB").arg("CHANNELS").query(&mut conn).unwrap_or_default();
            queued > 0 || channels.iter().any(|c| c.contains(&name))
        });
        let signalled = Instant::now();
        waiter.signal(signal);
        let out = waiter.finish(LIMIT);
        out.expect_code(128 + signal as i32).expect_one_line_error();
        assert!(signalled.elapsed() < Duration::from_secs(3), "{kind}: {:?}", signalled.elapsed());
        assert!(out.stderr.contains("interrupted"), "{out:#?}");
        let queue: Vec<String> = redis::cmd("LRANGE")
            .arg(format!("redisson_lock_queue:{{{name}}}"))
            .arg(0)
            .arg(-1)
            .query(&mut conn)
            .expect("LRANGE");
        assert!(queue.is_empty(), "{kind}: the waiter left the queue: {queue:?}");
        holder.finish(LIMIT).expect_code(0);
        assert!(!key_exists(&mut conn, &name), "{kind}: the waiter acquired nothing");
        assert!(!dir.path("ran").exists(), "{kind}: the command did not run");
    }
}
