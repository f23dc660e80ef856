//! Bad input: one line on stderr, exit code 64, nothing sent, no panic, no hang.

use std::time::Duration;

use crate::support::*;

/// Runs `args` and checks the usage failure; returns the message.
fn usage_error(args: &[&str]) -> String {
    let out = run(args);
    out.expect_code(USAGE).expect_one_line_error();
    assert!(out.elapsed < Duration::from_secs(5), "{args:?}: {out:?}");
    assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
    out.stderr
}

#[test]
fn missing_or_unknown_commands_and_options() {
    let message = usage_error(&[]);
    assert!(message.contains("no command"), "{message}");
    usage_error(&["frobnicate"]);
    let message = usage_error(&["run", "name"]);
    assert!(message.contains("<COMMAND>"), "{message}");
    usage_error(&["run", "name", "true"]);
    usage_error(&["run", "--bogus", "name", "--", "true"]);
    usage_error(&["run", "--kind", "bogus", "name", "--", "true"]);
    usage_error(&["run", "--on-lost", "later", "name", "--", "true"]);
    usage_error(&["run", "--wait", "1s", "--no-wait", "name", "--", "true"]);
    usage_error(&["status"]);
    let message = usage_error(&["unlock", "name"]);
    assert!(message.contains("--force"), "{message}");
    usage_error(&["run", "--tls-cert", "/nonexistent", "name", "--", "true"]);
}

#[test]
fn empty_and_too_long_names() {
    let server = RedisServer::start();
    let url = server.url();
    for args in [
        vec!["run", "--url", &url, "", "--", "true"],
        vec!["status", "--url", &url, ""],
        vec!["unlock", "--force", "--url", &url, ""],
    ] {
        assert!(usage_error(&args).contains("empty"));
    }
    // Longer than the library's 8 KiB, and nearly the longest argument Linux passes to a
    // program (one argument is at most 128 KiB, so a 1 MB name cannot be given at all).
    for len in [8 * 1024 + 1, 127 * 1024] {
        let name = "n".repeat(len);
        for args in [
            vec!["run", "--url", &url, &name, "--", "true"],
            vec!["status", "--url", &url, &name],
            vec!["unlock", "--force", "--url", &url, &name],
        ] {
            let message = usage_error(&args);
            assert!(message.contains(&format!("{len} bytes")), "{message}");
            assert!(message.len() < 200, "the message repeats the name: {} bytes", message.len());
        }
    }
    let mut conn = server.conn();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).expect("KEYS");
    assert!(keys.is_empty(), "nothing is written for a bad name: {keys:?}");
}

#[test]
fn malformed_durations() {
    for (option, value) in [
        ("--wait", "10"),
        ("--wait", "soon"),
        ("--wait", "-1s"),
        ("--lease", "1 fortnight"),
        ("--watchdog", ""),
        ("--grace", "10 s s"),
        ("--timeout", "5"),
    ] {
        let message = usage_error(&["run", option, value, "name", "--", "true"]);
        assert!(message.contains(option), "{option} {value}: {message}");
    }
    // Well formed, but out of the library's range: the watchdog's lease is at least 30 ms.
    let server = RedisServer::start();
    let message = usage_error(&["run", "--url", &server.url(), "--watchdog", "1ms", "name", "--", "true"]);
    assert!(message.contains("invalid input"), "{message}");
    let message = usage_error(&["run", "--url", &server.url(), "--timeout", "0s", "name", "--", "true"]);
    assert!(message.contains("--timeout"), "{message}");
}

#[test]
fn malformed_urls_say_what_is_wrong_and_hide_the_password() {
    for url in [
        "http://127.0.0.1:6379/",
        "redis://:s3cret@127.0.0.1:notaport/",
        "redis://127.0.0.1/notadb",
        "not a url",
        "redis-sentinel://127.0.0.1:26379",
        "redis-sentinel://:s3cret@127.0.0.1:x/#m",
    ] {
        for args in [
            vec!["run", "--url", url, "name", "--", "true"],
            vec!["status", "--url", url, "name"],
            vec!["unlock", "--force", "--url", url, "name"],
            vec!["top", "--once", "--url", url],
        ] {
            let message = usage_error(&args);
            assert!(message.contains("URL"), "{url}: {message}");
            assert!(!message.contains("s3cret"), "{url}: {message}");
        }
    }
}

#[test]
fn help_for_every_command_has_examples_and_exits_0() {
    for args in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["status", "--help"],
        vec!["top", "--help"],
        vec!["unlock", "--help"],
    ] {
        let out = run(&args);
        out.expect_code(0);
        assert!(out.stdout.contains("Examples:"), "{args:?}: {}", out.stdout);
        assert!(out.stdout.contains("Exit codes"), "{args:?}: {}", out.stdout);
        assert!(out.stderr.is_empty());
    }
    run(["--version"]).expect_code(0);
}

#[test]
fn a_database_the_server_does_not_have_is_bad_input_and_named() {
    // 16 databases (Redis's default): 0 to 15.
    let server = RedisServer::start();
    let port = server.port();
    let dir = TempDir::new();
    let script = format!("touch {}", dir.file("ran"));
    for db in ["16", "99"] {
        let url = format!("redis://127.0.0.1:{port}/{db}");
        for args in [
            vec!["run", "--url", &url, "name", "--", "sh", "-c", &script],
            vec!["status", "--url", &url, "name"],
            vec!["unlock", "--force", "--url", &url, "name"],
            vec!["top", "--once", "--url", &url],
        ] {
            let out = run(&args);
            out.expect_code(USAGE).expect_one_line_error();
            assert!(out.stderr.contains(&format!("database {db}")), "{args:?}: {out:#?}");
            assert!(out.stderr.contains("refused"), "{args:?}: {out:#?}");
            assert!(out.stderr.contains("DB index is out of range"), "{args:?}: {out:#?}");
            assert!(out.elapsed < Duration::from_secs(5), "{args:?}: {out:#?}");
        }
    }
    assert!(!dir.path("ran").exists(), "the command must not run");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut server.conn()).expect("KEYS");
    assert!(keys.is_empty(), "nothing is written: {keys:?}");
    // The last database there is works.
    run(["run", "--url", &format!("redis://127.0.0.1:{port}/15"), "name", "--", "true"]).expect_code(0);
}

#[test]
fn unlock_without_force_says_that_force_is_required_and_why() {
    let message = usage_error(&["unlock", "name"]);
    assert!(message.contains("--force is required"), "{message}");
    assert!(message.contains("whoever holds it"), "{message}");
    let message = usage_error(&["unlock", "--kind", "fair", "--url", "redis://127.0.0.1:1/", "name"]);
    assert!(message.contains("--force is required"), "{message}");
}

#[test]
fn the_url_help_names_every_scheme() {
    for command in ["run", "status", "top", "unlock"] {
        let out = run([command, "--help"]);
        out.expect_code(0);
        for scheme in ["redis://", "rediss://", "unix://", "redis-sentinel://", "redis-cluster://"] {
            assert!(out.stdout.contains(scheme), "{command} --help lacks {scheme}: {}", out.stdout);
        }
    }
}
