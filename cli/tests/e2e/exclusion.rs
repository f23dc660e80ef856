//! Two loops of `redlease run` on one name never overlap: each command does a non-atomic
//! read-modify-write of a counter file (read, sleep, write + 1), and also claims a
//! directory with `mkdir` (atomic: it fails while another section has it).

use std::fs;
use std::thread;
use std::time::Duration;

use crate::support::*;

const LOOPS: usize = 2;
const RUNS_PER_LOOP: usize = 150;

#[test]
fn two_loops_of_runs_on_one_name_never_overlap() {
    loops_never_overlap(&[], RUNS_PER_LOOP);
}

/// The same with `--kind spin`: a waiting run polls (no pub/sub), and no command of the
/// server's pub/sub is ever used.
#[test]
fn two_loops_of_spin_runs_never_overlap_and_never_touch_pubsub() {
    let server = loops_never_overlap(&["--kind", "spin"], 40);
    for command in ["subscribe", "publish"] {
        let info: String = redis::cmd("INFO").arg("commandstats").query(&mut server.conn()).expect("INFO");
        assert!(!info.contains(&format!("cmdstat_{command}:")), "a spin run used {command}: {info}");
    }
}

/// `LOOPS` loops of `runs` runs each on one name, with `kind_args`: the counter is exact
/// and no section overlapped. Returns the server, for more checks.
fn loops_never_overlap(kind_args: &[&str], runs: usize) -> RedisServer {
    let server = RedisServer::start();
    let url = server.url();
    let dir = TempDir::new();
    let counter = dir.file("counter");
    let inside = dir.file("inside");
    let overlaps = dir.file("overlaps");
    fs::write(&counter, "0\n").expect("counter");
    // Not atomic: a second holder between the read and the write loses an increment.
    let script = format!(
        "mkdir {inside} 2>/dev/null || echo overlap >> {overlaps}; \
         n=$(cat {counter}); sleep 0.003; echo $((n + 1)) > {counter}; \
         rmdir {inside} 2>/dev/null; exit 0"
    );
    let kind_args: Vec<String> = kind_args.iter().map(|a| (*a).to_owned()).collect();
    let loops: Vec<_> = (0..LOOPS)
        .map(|_| {
            let (url, script, kind_args) = (url.clone(), script.clone(), kind_args.clone());
            thread::spawn(move || {
                for _ in 0..runs {
                    let mut args = vec!["run", "--url", &url, "--quiet"];
                    args.extend(kind_args.iter().map(String::as_str));
                    args.extend(["counter", "--", "sh", "-c", &script]);
                    start(command(&args)).finish(LIMIT).expect_code(0);
                }
            })
        })
        .collect();
    for handle in loops {
        handle.join().expect("a loop failed");
    }
    let count: usize = fs::read_to_string(&counter).expect("counter").trim().parse().expect("a number");
    let overlapped = fs::read_to_string(&overlaps).unwrap_or_default();
    assert!(
        overlapped.is_empty() && count == LOOPS * runs,
        "two commands held the lock at once: the count is {count} of {} runs, sections overlapped {} times",
        LOOPS * runs,
        overlapped.lines().count()
    );
    wait_for("the lock is gone", Duration::from_secs(2), || !key_exists(&mut server.conn(), "counter"));
    server
}
