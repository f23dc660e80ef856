//! `redlease elect`, `redlease leader` and `run --at-least`: one command running while its
//! process leads, leadership followed from scripts, once-per-window runs.

use std::fs;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

/// A `redlease elect` whose command waits for a file, with the command's environment written
/// to `env` in `dir`.
fn elect(server: &RedisServer, dir: &TempDir, who: &str, extra: &[&str]) -> Running {
    let script = format!(
        "env | grep '^REDLEASE_' > {env}.tmp; mv {env}.tmp {env}; while [ ! -e {go} ]; do sleep 0.02; done",
        env = dir.file(&format!("{who}.env")),
        go = dir.file(&format!("{who}.go"))
    );
    let url = server.url();
    let mut args = vec!["elect", "--url", url.as_str(), "--value", who];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["scheduler", "--", "sh", "-c", &script]);
    start(command(args))
}

fn leader_json(server: &RedisServer, extra: &[&str]) -> Value {
    let url = server.url();
    let mut args = vec!["leader", "--json", "--url", url.as_str()];
    args.extend_from_slice(extra);
    args.push("scheduler");
    let out = run(args);
    out.expect_code(0);
    serde_json::from_str(&out.stdout).expect("JSON")
}

/// The subscribers of `channel`.
fn listeners(server: &RedisServer, channel: &str) -> i64 {
    let (_, count): (String, i64) =
        redis::cmd("PUBSUB").arg("NUMSUB").arg(channel).query(&mut server.conn()).expect("PUBSUB NUMSUB");
    count
}

/// Until a candidate waits (parked on the election's channels, the mark beside them).
fn wait_for_a_candidate(server: &RedisServer) {
    let mark = "redlease_mark:redlease_election:{scheduler}";
    wait_for("a candidate waits", Duration::from_secs(10), || listeners(server, mark) == 1);
}

fn variables(text: &str) -> Vec<(String, String)> {
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

fn var(vars: &[(String, String)], name: &str) -> String {
    vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap_or_else(|| panic!("no {name}: {vars:?}"))
}

/// Two `redlease elect` processes: the first leads and runs its command with its term; the
/// second waits; `leader` names the first; `leader --wait-change` returns when the first's
/// command ends (its leadership resigned) and names the second, with a greater term;
/// `--no-wait` while someone leads exits 75.
///
/// Breaks if both commands run at once, the term does not grow, or leadership changes go
/// unseen.
#[test]
fn elect_runs_one_leaders_command_at_a_time_and_leader_follows_it() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let first = elect(&server, &dir, "alpha", &[]);
    wait_for("alpha leads", Duration::from_secs(10), || dir.path("alpha.env").exists());
    let second = elect(&server, &dir, "beta", &["--quiet"]);
    let alpha = variables(&fs::read_to_string(dir.path("alpha.env")).expect("env"));
    let alpha_term: u64 = var(&alpha, "REDLEASE_TERM").parse().expect("a term");
    assert_eq!(var(&alpha, "REDLEASE_LOCK"), "scheduler");
    let now = leader_json(&server, &[]);
    assert_eq!(now["name"], "scheduler");
    assert_eq!(now["leader"]["value"], "alpha");
    assert_eq!(now["leader"]["term"], alpha_term);
    assert!(now["leader"]["lease_ms"].as_u64().is_some_and(|ms| ms > 0));
    let text = run(["leader", "--url", &server.url(), "scheduler"]);
    text.expect_code(0);
    assert!(text.stdout.starts_with(&format!("scheduler: led by alpha (term {alpha_term}, lease ")), "{}", text.stdout);
    let busy = run(["elect", "--no-wait", "--url", &server.url(), "--value", "gamma", "scheduler", "--", "true"]);
    busy.expect_code(75).expect_one_line_error();
    assert!(busy.stderr.contains("led by someone else"), "{}", busy.stderr);

    let follower = start(command(["leader", "--json", "--wait-change", "--url", &server.url(), "scheduler"]));
    wait_for_a_candidate(&server);
    let observers = "redlease_leader:redlease_election:{scheduler}";
    wait_for("the follower listens", Duration::from_secs(10), || listeners(&server, observers) == 1);
    assert!(!dir.path("beta.env").exists(), "beta waits while alpha leads");
    fs::write(dir.path("alpha.go"), "").expect("go");
    first.finish(LIMIT).expect_code(0);
    let changed = follower.finish(LIMIT);
    changed.expect_code(0);
    let changed: Value = serde_json::from_str(&changed.stdout).expect("JSON");
    wait_for("beta leads", Duration::from_secs(10), || dir.path("beta.env").exists());
    let beta = variables(&fs::read_to_string(dir.path("beta.env")).expect("env"));
    let beta_term: u64 = var(&beta, "REDLEASE_TERM").parse().expect("a term");
    assert!(beta_term > alpha_term);
    // The change seen: nobody (alpha resigned) or beta already.
    assert!(changed["leader"].is_null() || changed["leader"]["term"] == beta_term, "{changed}");
    fs::write(dir.path("beta.go"), "").expect("go");
    second.finish(LIMIT).expect_code(0);
    assert_eq!(leader_json(&server, &[])["leader"], Value::Null);
}

/// A leader whose `redlease elect` is SIGKILLed: the waiting candidate leads within one
/// lease (1 s) of the kill.
///
/// Breaks if the successor waits for more than the dead leader's lease.
#[test]
fn a_killed_leaders_successor_leads_within_one_lease() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let doomed = elect(&server, &dir, "doomed", &["--watchdog", "1s"]);
    wait_for("doomed leads", Duration::from_secs(10), || dir.path("doomed.env").exists());
    let next = elect(&server, &dir, "next", &["--quiet"]);
    wait_for_a_candidate(&server);
    doomed.signal(nix::sys::signal::Signal::SIGKILL);
    let killed = Instant::now();
    wait_for("next leads", Duration::from_secs(10), || dir.path("next.env").exists());
    let took = killed.elapsed();
    assert!(took < Duration::from_millis(2000), "within one lease and a poll: {took:?}");
    fs::write(dir.path("next.go"), "").expect("go");
    next.finish(LIMIT).expect_code(0);
}

/// Three runs of a job started a second apart under `--at-least 3s --at-most 10s
/// --no-wait`: the first runs (and ends at once), the next two are inside its window and
/// exit 75 at once; a run after the window runs.
///
/// Breaks if a run inside the window runs, or the window outlasts its 3 s.
#[test]
fn runs_inside_the_window_exit_75_and_the_next_window_runs() {
    let server = RedisServer::start();
    let url = server.url();
    let window = ["run", "--url", url.as_str(), "--at-least", "3s", "--at-most", "10s", "--no-wait", "cron:job"];
    let job = |marker: &str| {
        let mut args: Vec<&str> = window.to_vec();
        args.extend_from_slice(&["--", "sh", "-c", marker]);
        run(args)
    };
    let first_started = Instant::now();
    job("true").expect_code(0);
    for _ in 0..2 {
        std::thread::sleep(Duration::from_secs(1));
        let inside = job("echo ran");
        inside.expect_code(75).expect_one_line_error();
        assert_eq!(inside.stdout, "", "the job did not run");
    }
    let ttl: i64 = redis::cmd("PTTL").arg("cron:job").query(&mut server.conn()).expect("PTTL");
    assert!(ttl > 0 && ttl <= 1100, "the window's last second: {ttl} ms");
    wait_for("the window ends", Duration::from_secs(5), || !key_exists(&mut server.conn(), "cron:job"));
    assert!(first_started.elapsed() >= Duration::from_secs(3));
    let after = job("echo ran");
    after.expect_code(0);
    assert_eq!(after.stdout, "ran\n");
}

/// A window's keeper, once its run has ended, shows in `status` and `ls` as the window and
/// until when it keeps the lock (no process, no uptime: the run has exited), in JSON as
/// `"window": true`; a run inside it exits 75 saying a window keeps the lock, and until
/// when, with `--no-wait` and at `--wait` expiry alike.
///
/// Breaks if the keeper reads as a holder process ("pid N ... up 0s", as before the fix), or
/// the 75 message says only "held by someone else" / "not free".
#[test]
fn a_window_shows_as_the_window_and_until_when() {
    let server = RedisServer::start();
    let url = server.url();
    run(["run", "--url", url.as_str(), "--at-least", "30s", "--at-most", "60s", "cron:report", "--", "true"])
        .expect_code(0);
    let text = run(["status", "--url", url.as_str(), "cron:report"]);
    text.expect_code(0);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(lines[0], "cron:report: held (plain lock)", "{text:#?}");
    assert!(lines[1].starts_with("  window   ") && lines[1].contains(":0  kept taken until "), "{text:#?}");
    assert!(lines[1].contains("Z (") && lines[1].contains("s left)"), "{text:#?}");
    assert!(!text.stdout.contains("up ") && !text.stdout.contains("1 hold"), "{text:#?}");
    let listed = run(["ls", "--url", url.as_str(), "cron:*"]);
    listed.expect_code(0);
    assert!(listed.stdout.contains("kept by a window until ") && !listed.stdout.contains("up "), "{listed:#?}");
    let json = run(["status", "--json", "--url", url.as_str(), "cron:report"]);
    let v: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(v[0]["holders"][0]["window"], true, "{v}");

    let inside = run(["run", "--url", url.as_str(), "--no-wait", "cron:report", "--", "echo", "ran"]);
    inside.expect_code(75).expect_one_line_error();
    assert!(
        inside.stderr.contains("lock \"cron:report\" is kept taken by a window until ")
            && inside.stderr.contains(" left)"),
        "{inside:#?}"
    );
    let waited = run(["run", "--url", url.as_str(), "--wait", "200ms", "cron:report", "--", "echo", "ran"]);
    waited.expect_code(75).expect_one_line_error();
    assert!(waited.stderr.contains("was not free within 200ms: a window keeps it taken until "), "{waited:#?}");
    assert_eq!(format!("{}{}", inside.stdout, waited.stdout), "", "nothing ran");

    // A lock held by a running process still reads as that process.
    let holder = start(command(["run", "--url", url.as_str(), "cron:held", "--", "sleep", "5"]));
    wait_for("held", Duration::from_secs(10), || key_exists(&mut server.conn(), "cron:held"));
    let busy = run(["run", "--url", url.as_str(), "--no-wait", "cron:held", "--", "true"]);
    busy.expect_code(75);
    assert!(busy.stderr.contains("is held by someone else"), "{busy:#?}");
    let text = run(["status", "--url", url.as_str(), "cron:held"]);
    assert!(text.stdout.contains("  holder   ") && text.stdout.contains(" up "), "{text:#?}");
    drop(holder);
}

/// Bad windows and elections are 64 before anything is sent: `--at-least 0s`, an
/// `--at-least` longer than `--at-most`, `--at-least` for a kind that cannot keep a lock or
/// with `--permits`, an empty `--value`, an empty election name.
#[test]
fn bad_windows_and_elections_are_bad_input() {
    let server = RedisServer::start();
    let url = server.url();
    let cases: Vec<Vec<&str>> = vec![
        vec!["run", "--url", &url, "--at-least", "0s", "j", "--", "true"],
        vec!["run", "--url", &url, "--at-least", "2h", "--at-most", "1h", "j", "--", "true"],
        vec!["run", "--url", &url, "--at-least", "1m", "--kind", "fair", "j", "--", "true"],
        vec!["run", "--url", &url, "--at-least", "1m", "--permits", "2", "j", "--", "true"],
        vec!["elect", "--url", &url, "--value", "", "j", "--", "true"],
        vec!["elect", "--url", &url, "j", "--", "true"],
        vec!["leader", "--url", &url, ""],
    ];
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    for args in cases {
        let out = run(&args);
        out.expect_code(64).expect_one_line_error();
    }
    assert_eq!(commands_served(&mut conn) - before, 0, "nothing was sent");
}
