//! The exit code of `run` in each case: the command's own, 128 + a signal, the lock not
//! had (`--no-wait`, `--wait`), Redis unreachable, a command not found or not executable.

use std::time::Duration;

use crate::support::*;

#[test]
fn run_exits_with_the_commands_code_and_releases() {
    let server = RedisServer::start();
    let url = server.url();
    for code in [0, 1, 3, 42, 255] {
        let script = format!("exit {code}");
        run(["run", "--url", &url, "codes", "--", "sh", "-c", &script]).expect_code(code);
    }
    assert!(!key_exists(&mut server.conn(), "codes"), "the lock is released after the command");
}

#[test]
fn a_command_killed_by_a_signal_gives_128_plus_its_number() {
    let server = RedisServer::start();
    let url = server.url();
    run(["run", "--url", &url, "sig", "--", "sh", "-c", "kill -KILL $$"]).expect_code(128 + 9);
    run(["run", "--url", &url, "sig", "--", "sh", "-c", "kill -TERM $$"]).expect_code(128 + 15);
    run(["run", "--url", &url, "sig", "--", "sh", "-c", "kill -USR1 $$"]).expect_code(128 + 10);
    assert!(!key_exists(&mut server.conn(), "sig"));
}

#[test]
fn a_held_lock_with_no_wait_gives_75_at_once_and_runs_nothing() {
    let server = RedisServer::start();
    let url = server.url();
    let dir = TempDir::new();
    let holder = start(command(["run", "--url", &url, "busy", "--", "sleep", "30"]));
    wait_for("the holder holds", Duration::from_secs(10), || key_exists(&mut server.conn(), "busy"));
    let marker = dir.file("ran");
    let script = format!("touch {marker}");
    let out = run(["run", "--url", &url, "--no-wait", "busy", "--", "sh", "-c", &script]);
    out.expect_code(NOT_ACQUIRED).expect_one_line_error();
    assert!(out.elapsed < Duration::from_secs(5), "{out:?}");
    assert!(out.stderr.contains("held by someone else"), "{out:?}");
    assert!(!dir.path("ran").exists(), "the command must not run");
    drop(holder);
}

#[test]
fn a_wait_that_expires_gives_75_after_the_wait_and_not_long_before() {
    let server = RedisServer::start();
    let url = server.url();
    let _holder = start(command(["run", "--url", &url, "busy", "--", "sleep", "30"]));
    wait_for("the holder holds", Duration::from_secs(10), || key_exists(&mut server.conn(), "busy"));
    let out = run(["run", "--url", &url, "--wait", "700ms", "busy", "--", "true"]);
    out.expect_code(NOT_ACQUIRED).expect_one_line_error();
    assert!(out.stderr.contains("not free within 700ms"), "{out:?}");
    assert!(out.elapsed >= Duration::from_millis(700), "gave up early: {:?}", out.elapsed);
    assert!(out.elapsed < Duration::from_secs(5), "gave up late: {:?}", out.elapsed);
}

#[test]
fn a_wait_is_served_as_soon_as_the_holder_releases() {
    let server = RedisServer::start();
    let url = server.url();
    let holder = start(command(["run", "--url", &url, "turn", "--", "sleep", "1"]));
    wait_for("the holder holds", Duration::from_secs(10), || key_exists(&mut server.conn(), "turn"));
    let out = run(["run", "--url", &url, "--wait", "15s", "turn", "--", "true"]);
    out.expect_code(0);
    assert!(out.elapsed < Duration::from_secs(10), "{out:?}");
    holder.finish(LIMIT).expect_code(0);
}

#[test]
fn an_unreachable_redis_gives_69_quickly_for_every_command() {
    // A port nothing listens on: the connection is refused.
    let port = redlease_testkit::server::free_port();
    let url = format!("redis://127.0.0.1:{port}/");
    for args in every_command(&url) {
        let out = run(&args);
        out.expect_code(UNAVAILABLE).expect_one_line_error();
        assert!(out.elapsed < Duration::from_secs(10), "{args:?}: {out:?}");
    }
}

/// A login the server refuses (a wrong password, a user that does not exist, no password
/// where one is wanted) exits 67 at once for every command, saying "login" and naming the
/// user, never the password.
///
/// Breaks if a refused login reads as an outage (69 "Redis unreachable", or 76 for a
/// missing password), sending operators to check the network instead of the URL.
#[test]
fn a_refused_login_gives_67_at_once_and_names_the_user_for_every_command() {
    let server = RedisServer::start_with(&["--requirepass", "right-secret"]);
    let port = server.port();
    for (url, user) in [
        (format!("redis://:wrong-secret@127.0.0.1:{port}/"), "\"default\""),
        (format!("redis://nobody:wrong-secret@127.0.0.1:{port}/"), "\"nobody\""),
        (format!("redis://127.0.0.1:{port}/"), "\"default\""),
    ] {
        for args in every_command(&url) {
            let out = run(&args);
            out.expect_code(AUTHENTICATION).expect_one_line_error();
            assert!(out.stderr.contains("login") && out.stderr.contains(user), "{args:?}: {out:?}");
            assert!(!out.stderr.contains("wrong-secret"), "{args:?}: {out:?}");
            assert!(out.elapsed < Duration::from_secs(5), "{args:?}: not retried: {out:?}");
        }
    }
}

#[test]
fn a_server_that_never_answers_gives_69_within_the_timeout() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    proxy.set_blackhole(true);
    let url = proxy.url();
    for args in [
        vec!["run", "--timeout", "500ms", "--url", &url, "x", "--", "true"],
        vec!["status", "--timeout", "500ms", "--url", &url, "x"],
        vec!["top", "--once", "--timeout", "500ms", "--url", &url, "x"],
        vec!["unlock", "--force", "--timeout", "500ms", "--url", &url, "x"],
    ] {
        let out = run(&args);
        out.expect_code(UNAVAILABLE).expect_one_line_error();
        assert!(out.elapsed >= Duration::from_millis(400), "{args:?} did not wait for an answer: {out:?}");
        assert!(out.elapsed < Duration::from_secs(8), "{args:?} hung: {out:?}");
    }
}

#[test]
fn a_command_not_found_gives_127_and_one_not_executable_126_and_the_lock_is_released() {
    let server = RedisServer::start();
    let url = server.url();
    let dir = TempDir::new();
    run(["run", "--url", &url, "exec", "--", "/nonexistent/command"]).expect_code(NOT_FOUND).expect_one_line_error();
    let plain = dir.path("not-executable");
    std::fs::write(&plain, "#!/bin/sh\n").expect("write");
    let plain = plain.to_string_lossy().into_owned();
    run(["run", "--url", &url, "exec", "--", &plain]).expect_code(CANNOT_EXECUTE).expect_one_line_error();
    assert!(!key_exists(&mut server.conn(), "exec"));
}

#[test]
fn redis_url_comes_from_the_environment_when_no_url_is_given() {
    let server = RedisServer::start();
    let mut cmd = command(["run", "from-env", "--", "sh", "-c", "exit 5"]);
    cmd.env("REDIS_URL", server.url());
    start(cmd).finish(LIMIT).expect_code(5);
    let mut cmd = command(["run", "--url", "redis://127.0.0.1:1/", "from-env", "--", "true"]);
    cmd.env("REDIS_URL", server.url());
    start(cmd).finish(LIMIT).expect_code(UNAVAILABLE);
}

#[test]
fn a_server_that_is_not_redis_gives_69_and_says_so_for_every_command() {
    // A web server on the port: its answer is not RESP. With a password in the URL the
    // first exchange is AUTH, without one PING: both are checked.
    let http = NotRedis::start(NotRedisReply::Http);
    for password in [None, Some("s3cret")] {
        let url = http.url(password);
        for args in every_command(&url) {
            let out = run(&args);
            out.expect_code(UNAVAILABLE).expect_one_line_error();
            assert!(out.stderr.contains("does not speak Redis"), "{args:?}: {out:#?}");
            assert!(out.stderr.contains("not a Redis server"), "{args:?}: {out:#?}");
            assert!(out.stderr.contains(&http.url(None)[8..]), "names the address: {args:?}: {out:#?}");
            assert!(!out.stderr.contains("s3cret"), "{args:?}: {out:#?}");
            assert!(out.elapsed < Duration::from_secs(5), "{args:?}: {out:#?}");
        }
    }
    // A listener that closes every connection at once, without a byte: unreachable too.
    let closing = NotRedis::start(NotRedisReply::Close);
    for password in [None, Some("s3cret")] {
        let url = closing.url(password);
        for args in every_command(&url) {
            let out = run(&args);
            out.expect_code(UNAVAILABLE).expect_one_line_error();
            assert!(!out.stderr.contains("s3cret"), "{args:?}: {out:#?}");
            assert!(out.elapsed < Duration::from_secs(10), "{args:?}: {out:#?}");
        }
    }
}

#[test]
fn a_silent_server_is_reported_with_the_timeout_that_fired() {
    // The library's defaults: connect timeout 5s, command timeout 3s. A server that
    // accepts and never answers: without a login the first exchange is PING, a command,
    // whose reply waits the command timeout; with one it is the handshake's AUTH, part of
    // connecting, which waits the connect timeout.
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    proxy.set_blackhole(true);
    let plain = proxy.url();
    let login = format!("redis://:s3cret@{}/", proxy.addr());
    let cases: Vec<(Vec<String>, &str, Duration, Duration)> = vec![
        (vec!["status".into(), "--url".into(), plain.clone(), "x".into()], "command timeout (3s)", ms(2900), ms(4900)),
        (vec!["status".into(), "--url".into(), login, "x".into()], "connect timeout (5s)", ms(4900), ms(8000)),
        (
            vec!["status".into(), "--timeout".into(), "1s".into(), "--url".into(), plain, "x".into()],
            "timeout (1s) while connecting (--timeout sets it)",
            ms(900),
            ms(3000),
        ),
    ];
    // At once, each timed on a thread of its own.
    let runs: Vec<_> = cases
        .into_iter()
        .map(|(args, said, min, max)| {
            let moved = args.clone();
            (std::thread::spawn(move || run(&moved)), args, said, min, max)
        })
        .collect();
    for (running, args, said, min, max) in runs {
        let out = running.join().expect("a run");
        out.expect_code(UNAVAILABLE).expect_one_line_error();
        assert!(out.stderr.contains(said), "{args:?} should say {said:?}: {out:#?}");
        assert!(!out.stderr.contains("s3cret"), "{args:?}: {out:#?}");
        assert!(out.elapsed >= min && out.elapsed < max, "{args:?}: {out:#?}");
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `run`, `status`, `top --once` and `unlock --force` of lock `x` at `url`: every command
/// that connects.
fn every_command(url: &str) -> [Vec<&str>; 4] {
    [
        vec!["run", "--url", url, "x", "--", "true"],
        vec!["status", "--url", url, "x"],
        vec!["top", "--once", "--url", url, "x"],
        vec!["unlock", "--force", "--url", url, "x"],
    ]
}
