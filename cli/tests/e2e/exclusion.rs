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
    let loops: Vec<_> = (0..LOOPS)
        .map(|_| {
            let (url, script) = (url.clone(), script.clone());
            thread::spawn(move || {
                for _ in 0..RUNS_PER_LOOP {
                    let out = start(command(["run", "--url", &url, "--quiet", "counter", "--", "sh", "-c", &script]))
                        .finish(LIMIT);
                    out.expect_code(0);
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
        overlapped.is_empty() && count == LOOPS * RUNS_PER_LOOP,
        "two commands held the lock at once: the count is {count} of {} runs, sections overlapped {} times",
        LOOPS * RUNS_PER_LOOP,
        overlapped.lines().count()
    );
    wait_for("the lock is gone", Duration::from_secs(2), || !key_exists(&mut server.conn(), "counter"));
}
