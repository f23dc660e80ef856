//! A lost lease: the command is told (SIGTERM, then SIGKILL after the grace period, or as
//! `--on-lost` says) within one renewal interval of the loss being known plus the grace
//! period, and `redlease` exits with 79. A lease that is only at risk (Redis unreachable)
//! stops the command before its deadline instead, and `redlease` exits with 80.

use std::time::{Duration, Instant};

use crate::support::*;

/// With `--watchdog 1s` the lease is renewed every 333 ms.
const RENEWAL: Duration = Duration::from_millis(334);
/// For a loaded two-core machine.
const SLACK: Duration = Duration::from_millis(1500);

/// A command that records its pid, then waits; on SIGTERM it records that and exits 0.
fn polite(dir: &TempDir) -> String {
    format!(
        "trap 'echo term >> {t}; exit 0' TERM; echo $$ > {p}; while :; do sleep 0.05; done",
        t = dir.file("term"),
        p = dir.file("pid")
    )
}

/// Starts `redlease run --watchdog 1s … NAME -- sh -c SCRIPT` and waits for its command's
/// pid.
fn hold(server: &RedisServer, dir: &TempDir, extra: &[&str], name: &str, script: &str) -> (Running, u32) {
    let url = server.url();
    let mut args = vec!["run", "--url", &url, "--watchdog", "1s"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[name, "--", "sh", "-c", script]);
    let running = start(command(&args));
    let pid = read_when_written(&dir.path("pid"), Duration::from_secs(10)).parse().expect("a pid");
    assert!(key_exists(&mut server.conn(), name));
    (running, pid)
}

#[test]
fn a_deleted_key_sends_sigterm_within_a_renewal_and_exits_79() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let (running, pid) = hold(&server, &dir, &[], "deleted", &polite(&dir));
    let lost_at = Instant::now();
    let _: i64 = redis::cmd("DEL").arg("deleted").query(&mut server.conn()).expect("DEL");
    let out = running.finish(LIMIT);
    out.expect_code(LEASE_LOST);
    assert!(lost_at.elapsed() < RENEWAL + SLACK, "told late: {:?}", lost_at.elapsed());
    assert_eq!(std::fs::read_to_string(dir.path("term")).unwrap_or_default(), "term\n", "{out:#?}");
    assert!(out.stderr.contains("no longer ours") && out.stderr.contains("SIGTERM"), "{out:#?}");
    assert!(out.stderr.contains("exited with code 0"), "{out:#?}");
    assert!(!exists(pid), "the command is gone");
    assert!(!key_exists(&mut server.conn(), "deleted"), "nothing was written back");
}

#[test]
fn a_force_unlock_kills_a_plain_sleep_and_exits_79() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let script = format!("echo $$ > {}; exec sleep 60", dir.file("pid"));
    let (running, pid) = hold(&server, &dir, &[], "forced", &script);
    let lost_at = Instant::now();
    run(["unlock", "--force", "--url", &server.url(), "forced"]).expect_code(0);
    let out = running.finish(LIMIT);
    out.expect_code(LEASE_LOST);
    assert!(lost_at.elapsed() < RENEWAL + SLACK, "told late: {:?}", lost_at.elapsed());
    assert!(out.stderr.contains("killed by SIGTERM"), "{out:#?}");
    assert!(!exists(pid));
}

/// Redis goes away: renewals fail, the lease is at risk, and the command is stopped before
/// the lease's deadline (at most one lease, 1 s, after the last renewal), which is not a
/// loss: exit 80, not 79.
#[test]
fn a_stopped_redis_stops_the_command_before_the_lease_can_run_out_and_exits_80() {
    let mut server = RedisServer::start();
    let dir = TempDir::new();
    let (running, pid) = hold(&server, &dir, &["--timeout", "300ms"], "stopped", &polite(&dir));
    let killed_at = Instant::now();
    server.kill();
    let out = running.finish(LIMIT);
    let lease = Duration::from_secs(1);
    out.expect_code(STOPPED_AT_RISK);
    assert!(killed_at.elapsed() < lease + SLACK, "told late: {:?}", killed_at.elapsed());
    assert_eq!(std::fs::read_to_string(dir.path("term")).unwrap_or_default(), "term\n", "{out:#?}");
    assert!(out.stderr.contains("renewals failing") && out.stderr.contains("before the lease's deadline"), "{out:#?}");
    assert!(!exists(pid));
}

#[test]
fn a_command_that_ignores_sigterm_gets_sigkill_after_the_grace_period() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let script = format!("trap '' TERM; echo $$ > {}; while :; do sleep 0.05; done", dir.file("pid"));
    // It fits in the warning a 1 s watchdog lease gives (half of it, less the drift, the
    // SIGKILL lead and a look at the lease: 368 ms).
    let grace = Duration::from_millis(300);
    let (running, pid) = hold(&server, &dir, &["--grace", "300ms"], "stubborn", &script);
    let lost_at = Instant::now();
    let _: i64 = redis::cmd("DEL").arg("stubborn").query(&mut server.conn()).expect("DEL");
    let out = running.finish(LIMIT);
    out.expect_code(LEASE_LOST);
    let took = lost_at.elapsed();
    assert!(took >= grace, "SIGKILL came before the grace period: {took:?}");
    assert!(took < RENEWAL + grace + SLACK, "SIGKILL came late: {took:?}");
    assert!(out.stderr.contains("sending SIGKILL") && out.stderr.contains("killed by SIGKILL"), "{out:#?}");
    assert!(!exists(pid));
}

#[test]
fn on_lost_kill_kills_at_once_and_on_lost_ignore_lets_the_command_finish() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let (running, pid) = hold(&server, &dir, &["--on-lost", "kill", "--grace", "30s"], "kill", &polite(&dir));
    let lost_at = Instant::now();
    let _: i64 = redis::cmd("DEL").arg("kill").query(&mut server.conn()).expect("DEL");
    let out = running.finish(LIMIT);
    out.expect_code(LEASE_LOST);
    assert!(lost_at.elapsed() < RENEWAL + SLACK, "{:?}", lost_at.elapsed());
    assert!(out.stderr.contains("killed by SIGKILL"), "{out:#?}");
    assert!(!dir.path("term").exists(), "no SIGTERM with --on-lost kill");
    assert!(!exists(pid));

    let dir = TempDir::new();
    let script = format!("echo $$ > {}; sleep 1.5; echo done > {}", dir.file("pid"), dir.file("done"));
    let (running, _) = hold(&server, &dir, &["--on-lost", "ignore"], "ignore", &script);
    let _: i64 = redis::cmd("DEL").arg("ignore").query(&mut server.conn()).expect("DEL");
    let out = running.finish(LIMIT);
    out.expect_code(LEASE_LOST);
    assert!(dir.path("done").exists(), "the command ran to its end");
    assert!(out.stderr.contains("runs on") && out.stderr.contains("exited with code 0"), "{out:#?}");
}

/// With `--on-lost ignore` nothing stops the command before its fixed lease ends (see
/// `stop_in_time` for the other modes): it outlives it, and that is a loss.
#[test]
fn a_fixed_lease_that_runs_out_under_an_ignoring_run_counts_as_lost() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let script = format!("echo $$ > {}; sleep 1.5", dir.file("pid"));
    let started = Instant::now();
    let (running, pid) = hold(&server, &dir, &["--lease", "1s", "--on-lost", "ignore"], "fixed", &script);
    let out = running.finish(LIMIT);
    out.expect_code(LEASE_LOST);
    assert!(started.elapsed() >= Duration::from_millis(1400), "{:?}", started.elapsed());
    assert!(out.stderr.contains("fixed lease of 1s ran out"), "{out:#?}");
    assert!(!exists(pid));
    // A command that ends within its fixed lease is not a loss.
    run(["run", "--url", &server.url(), "--lease", "5s", "fixed", "--", "true"]).expect_code(0);
}

#[test]
fn a_loss_found_at_release_still_says_so() {
    // The command deletes the key itself (a raw DEL through bash's /dev/tcp) and exits
    // before any renewal (30 s watchdog): the release finds the lease gone.
    let server = RedisServer::start();
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{}; printf '*2\\r\\n$3\\r\\nDEL\\r\\n$5\\r\\nfound\\r\\n' >&3; read -r reply <&3; exit 0",
        server.port()
    );
    let out = run(["run", "--url", &server.url(), "found", "--", "bash", "-c", &script]);
    out.expect_code(LEASE_LOST);
    assert!(out.stderr.contains("found lost at release") && out.stderr.contains("exited with code 0"), "{out:#?}");
}
