//! `run --permits N`: at most N commands at once under a semaphore of N permits (and N
//! reached), 75 with `--no-wait` when every permit is taken, a lost permit handled as a lost
//! lock, a semaphore set to another number, bad numbers refused before anything is sent,
//! and `status` of a semaphore.

use std::fs;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::*;

const PERMITS: usize = 2;
/// More loops than permits, so that a semaphore that let everyone in would show it.
const LOOPS: usize = 4;
const RUNS_PER_LOOP: usize = 30;

/// The sorted set of a permit-expirable semaphore's taken permits.
fn timeouts(name: &str) -> String {
    format!("{{{name}}}:timeout")
}

fn taken(conn: &mut redis::Connection, name: &str) -> usize {
    redis::cmd("ZCARD").arg(timeouts(name)).query(conn).expect("ZCARD")
}

#[test]
fn at_most_n_commands_run_at_once_and_n_do() {
    let server = RedisServer::start();
    let url = server.url();
    let dir = TempDir::new();
    let (inside, seen, guard) = (dir.file("inside"), dir.file("seen"), dir.file("guard"));
    fs::write(&inside, "0\n").expect("inside");
    // The count of commands inside is read, changed and written back (not atomic); a
    // mkdir guard, not a counter, keeps two of these read-modify-writes from interleaving,
    // so that the count is exact. Each command notes the count it saw on entering.
    let script = format!(
        "until mkdir {guard} 2>/dev/null; do :; done; \
         n=$(cat {inside}); n=$((n + 1)); echo $n > {inside}; echo $n >> {seen}; rmdir {guard}; \
         sleep 0.03; \
         until mkdir {guard} 2>/dev/null; do :; done; \
         n=$(cat {inside}); echo $((n - 1)) > {inside}; rmdir {guard}"
    );
    let permits = PERMITS.to_string();
    let loops: Vec<_> = (0..LOOPS)
        .map(|_| {
            let (url, script, permits) = (url.clone(), script.clone(), permits.clone());
            thread::spawn(move || {
                for _ in 0..RUNS_PER_LOOP {
                    let args =
                        ["run", "--url", &url, "--quiet", "--permits", &permits, "pool", "--", "sh", "-c", &script];
                    start(command(args)).finish(LIMIT).expect_code(0);
                }
            })
        })
        .collect();
    for handle in loops {
        handle.join().expect("a loop failed");
    }
    let seen: Vec<usize> =
        fs::read_to_string(&seen).expect("seen").lines().map(|l| l.parse().expect("a count")).collect();
    assert_eq!(seen.len(), LOOPS * RUNS_PER_LOOP, "every command ran once");
    let most = seen.iter().copied().max().unwrap_or(0);
    assert!(most <= PERMITS, "{most} commands were inside at once with --permits {PERMITS}");
    assert_eq!(most, PERMITS, "never {PERMITS} inside together: the semaphore let fewer in than it has permits");
    assert_eq!(fs::read_to_string(&inside).expect("inside").trim(), "0");
    let mut conn = server.conn();
    assert_eq!(taken(&mut conn, "pool"), 0, "every permit was given back");
    let available: i64 = redis::cmd("GET").arg("pool").query(&mut conn).expect("GET");
    assert_eq!(available, PERMITS as i64);
}

#[test]
fn no_wait_gives_75_when_every_permit_is_taken() {
    let server = RedisServer::start();
    let url = server.url();
    let mut conn = server.conn();
    let holders: Vec<Running> =
        (0..2).map(|_| start(command(["run", "--url", &url, "--permits", "2", "full", "--", "sleep", "30"]))).collect();
    wait_for("both permits taken", Duration::from_secs(10), || taken(&mut conn, "full") == 2);
    let dir = TempDir::new();
    let script = format!("touch {}", dir.file("ran"));
    let out = run(["run", "--url", &url, "--permits", "2", "--no-wait", "full", "--", "sh", "-c", &script]);
    out.expect_code(NOT_ACQUIRED).expect_one_line_error();
    assert!(out.stderr.contains("no permit of semaphore \"full\" is free"), "{out:#?}");
    assert!(out.elapsed < Duration::from_secs(5), "{out:?}");
    assert!(!dir.path("ran").exists(), "the command must not run");
    // A wait that expires says so too, after the wait.
    let out = run(["run", "--url", &url, "--permits", "2", "--wait", "500ms", "full", "--", "true"]);
    out.expect_code(NOT_ACQUIRED).expect_one_line_error();
    assert!(out.elapsed >= Duration::from_millis(500), "gave up early: {:?}", out.elapsed);
    drop(holders);
}

#[test]
fn a_deleted_semaphore_sends_sigterm_and_exits_79() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let script = format!(
        "trap 'echo term >> {t}; exit 0' TERM; echo $$ > {p}; while :; do sleep 0.05; done",
        t = dir.file("term"),
        p = dir.file("pid")
    );
    let url = server.url();
    let running =
        start(command(["run", "--url", &url, "--watchdog", "1s", "--permits", "3", "gone", "--", "sh", "-c", &script]));
    let pid: u32 = read_when_written(&dir.path("pid"), Duration::from_secs(10)).parse().expect("a pid");
    let mut conn = server.conn();
    assert_eq!(taken(&mut conn, "gone"), 1);
    let deleted_at = Instant::now();
    let _: i64 = redis::cmd("DEL").arg("gone").arg(timeouts("gone")).query(&mut conn).expect("DEL");
    let out = running.finish(LIMIT);
    out.expect_code(LEASE_LOST);
    // Renewed every third of the 1 s watchdog, plus slack for a loaded machine.
    assert!(deleted_at.elapsed() < Duration::from_millis(334 + 1500), "told late: {:?}", deleted_at.elapsed());
    assert_eq!(fs::read_to_string(dir.path("term")).unwrap_or_default(), "term\n", "{out:#?}");
    assert!(out.stderr.contains("lost the permit of semaphore \"gone\""), "{out:#?}");
    assert!(out.stderr.contains("SIGTERM") && out.stderr.contains("exited with code 0"), "{out:#?}");
    assert!(!exists(pid), "the command is gone");
    assert!(!key_exists(&mut conn, "gone") && !key_exists(&mut conn, &timeouts("gone")), "nothing written back");
}

#[test]
fn a_semaphore_of_more_permits_refuses_and_one_of_fewer_warns() {
    let server = RedisServer::start();
    let url = server.url();
    run(["run", "--url", &url, "--permits", "2", "set", "--", "true"]).expect_code(0);
    let out = run(["run", "--url", &url, "--permits", "1", "set", "--", "true"]);
    out.expect_code(78).expect_one_line_error();
    assert!(out.stderr.contains("has 2 permits, more than --permits 1"), "{out:#?}");
    let out = run(["run", "--url", &url, "--permits", "3", "set", "--", "sh", "-c", "exit 6"]);
    out.expect_code(6);
    assert!(out.stderr.contains("has 2 permits, not 3"), "{out:#?}");
    let available: i64 = redis::cmd("GET").arg("set").query(&mut server.conn()).expect("GET");
    assert_eq!(available, 2, "the first run's number stands");
}

#[test]
fn bad_numbers_of_permits_give_64_before_anything_is_sent() {
    let server = RedisServer::start();
    let url = server.url();
    for (value, says) in [
        ("0", "--permits"),
        ("281474976710657", "--permits"),
        ("99999999999999999999999", "--permits"),
        ("two", "--permits"),
        ("", "--permits"),
    ] {
        let out = run(["run", "--url", &url, "--permits", value, "n", "--", "true"]);
        out.expect_code(USAGE).expect_one_line_error();
        assert!(out.stderr.contains(says), "{value}: {out:#?}");
        assert!(out.elapsed < Duration::from_secs(5), "{value}: {out:?}");
    }
    let out = run(["run", "--url", &url, "--permits", "2", "--kind", "fair", "n", "--", "true"]);
    out.expect_code(USAGE).expect_one_line_error();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut server.conn()).expect("KEYS");
    assert!(keys.is_empty(), "nothing is written for a bad number: {keys:?}");
}

#[test]
fn status_shows_the_permits_available_and_each_holder_with_its_deadline() {
    let server = RedisServer::start();
    let url = server.url();
    let mut conn = server.conn();
    let holder = start(command(["run", "--url", &url, "--permits", "3", "slots", "--", "sleep", "30"]));
    wait_for("a permit taken", Duration::from_secs(10), || taken(&mut conn, "slots") == 1);
    let out = run(["status", "--json", "--url", &url, "slots"]);
    out.expect_code(0);
    let all: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    let s = &all[0];
    assert_eq!(
        (s["kind"].as_str(), s["held"].as_bool(), s["type"].as_str()),
        (Some("semaphore"), Some(true), Some("string"))
    );
    assert_eq!((s["available_permits"].as_i64(), s["permits_taken"].as_i64()), (Some(2), Some(1)));
    let permit = &s["permits"][0];
    let members: Vec<(Vec<u8>, f64)> =
        redis::cmd("ZRANGE").arg(timeouts("slots")).arg(0).arg(-1).arg("WITHSCORES").query(&mut conn).expect("ZRANGE");
    let hex: String = members[0].0.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(permit["id"].as_str(), Some(hex.as_str()));
    assert_eq!(permit["deadline_ms"].as_i64(), Some(members[0].1 as i64), "the deadline is ZSCORE's");
    let left = permit["deadline_in_ms"].as_i64().expect("deadline_in_ms");
    assert!((20_000..=30_000).contains(&left), "a watchdog lease of 30 s: {left} ms left");
    let out = run(["status", "--url", &url, "slots"]);
    out.expect_code(0);
    assert!(out.stdout.starts_with("slots: held (semaphore, 2 of 3 permits available)\n"), "{}", out.stdout);
    assert!(out.stdout.contains(&format!("  permit   {hex}  deadline in ")), "{}", out.stdout);
    drop(holder);
}
