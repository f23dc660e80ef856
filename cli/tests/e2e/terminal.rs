//! On a terminal (a pseudo-terminal made by util-linux `script`): the status line while
//! waiting, `--quiet`, and a Ctrl-C that reaches the command once, not twice. Off a
//! terminal: no status line at all.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::*;

/// Runs `shell` (a command line) under `script` on a new pseudo-terminal, typing `input`
/// once `ready` exists (at once without one); returns everything the terminal showed.
///
/// `script` runs the line with `$SHELL -c`. The line is `exec`ed so that no shell stays
/// between the terminal and redlease: a non-interactive dash that waits for a command
/// dies of the terminal's SIGINT itself, which would make the exit code the shell's.
fn on_a_terminal(shell: &str, ready: Option<PathBuf>, input: &[u8]) -> (Option<i32>, String) {
    let mut child = Command::new("script")
        .args(["-qec", &format!("exec {shell}"), "/dev/null"])
        .env("SHELL", "/bin/sh")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("util-linux script (package bsdutils) is needed for the terminal tests");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let feeder = thread::spawn(move || {
        if let Some(ready) = ready {
            let end = Instant::now() + Duration::from_secs(10);
            while !ready.exists() && Instant::now() < end {
                thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = stdin.write_all(&input);
        // Keep the terminal open until the command is done.
        thread::sleep(Duration::from_secs(8));
    });
    let out = child.wait_with_output().expect("script");
    drop(feeder);
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A lock held by another `redlease run` for `seconds`.
fn held(server: &RedisServer, name: &str, seconds: &str) -> Running {
    let holder = start(command(["run", "--url", &server.url(), name, "--", "sleep", seconds]));
    wait_for("the holder holds", Duration::from_secs(10), || key_exists(&mut server.conn(), name));
    holder
}

#[test]
fn off_a_terminal_a_wait_prints_nothing() {
    let server = RedisServer::start();
    let _holder = held(&server, "quiet-off", "1.5");
    let out = run(["run", "--url", &server.url(), "quiet-off", "--", "true"]);
    out.expect_code(0);
    assert!(out.elapsed >= Duration::from_millis(500), "it did wait: {:?}", out.elapsed);
    assert_eq!(out.stderr, "", "nothing on a stderr that is not a terminal");
}

#[test]
fn on_a_terminal_one_line_says_who_holds_it_and_for_how_long_we_waited() {
    let server = RedisServer::start();
    let holder = held(&server, "shown", "2");
    let holder_owner = fields(&mut server.conn(), "shown").pop().expect("a holder");
    let (client, _) = holder_owner.rsplit_once(':').expect("owner");
    let announcement = format!("redlease_client:{{{client}}}");
    wait_for("the holder announced itself", Duration::from_secs(5), || key_exists(&mut server.conn(), &announcement));
    let line = format!("{BIN} run --url {} shown -- echo got-it", server.url());
    let (code, screen) = on_a_terminal(&line, None, b"");
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("\r\x1b[Kredlease: waiting for shown for 1s: held by "), "{screen:?}");
    // The holder named by its process: the other `redlease run`.
    assert!(screen.contains(&format!("held by pid {} on ", holder.pid())), "{screen:?}");
    // Cleared before the command runs: the command's output starts a clean line.
    assert!(screen.contains("\r\x1b[Kgot-it"), "{screen:?}");
    holder.finish(LIMIT).expect_code(0);

    let holder = held(&server, "shown", "1");
    let line = format!("{BIN} run --quiet --url {} shown -- echo got-it", server.url());
    let (code, screen) = on_a_terminal(&line, None, b"");
    assert_eq!(code, Some(0), "{screen}");
    assert_eq!(screen.trim(), "got-it", "--quiet draws no line: {screen:?}");
    holder.finish(LIMIT).expect_code(0);
}

#[test]
fn a_ctrl_c_on_the_terminal_reaches_the_command_once() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    // The command counts its SIGINTs and leaves by itself after about 1.5 s.
    let script = format!(
        "trap \"echo INT >> {got}\" INT; echo $$ > {pid}; i=0; while [ $i -lt 30 ]; do sleep 0.05; i=$((i+1)); done; exit 9",
        got = dir.file("got"),
        pid = dir.file("pid")
    );
    let line = format!("{BIN} run --url {} ctrl-c -- sh -c '{script}'", server.url());
    let (code, screen) = on_a_terminal(&line, Some(dir.path("pid")), b"\x03");
    assert_eq!(code, Some(9), "{screen}");
    let got = std::fs::read_to_string(dir.path("got")).unwrap_or_default();
    assert_eq!(got, "INT\n", "the terminal's SIGINT reached the command {} times", got.lines().count());
}
