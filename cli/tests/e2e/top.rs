//! `redlease top`: one frame printed for scripts (`--once`), and the live view used as a
//! person uses it, in a `tmux` window read with `capture-pane` and typed into with
//! `send-keys`, while the locks it shows are taken, queued for and released.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redlease::Client;

use crate::support::*;

static SOCKETS: AtomicUsize = AtomicUsize::new(0);

/// A `tmux` server of its own (`-L`, a socket no other test or user shares), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// A detached session `columns` × `rows` running `shell` (a command line for `sh -c`).
    fn start(shell: &str, columns: u16, rows: u16) -> Tmux {
        let socket = format!("redlease-top-{}-{}", std::process::id(), SOCKETS.fetch_add(1, Ordering::Relaxed));
        let tmux = Tmux { socket };
        let out = tmux.command(&[
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            &columns.to_string(),
            "-y",
            &rows.to_string(),
            shell,
        ]);
        assert!(out.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&out.stderr));
        tmux
    }

    fn command(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            // tmux needs a terminal type to start its server, CI or not.
            .env("TERM", "xterm-256color")
            .output()
            .expect("tmux is needed for this test (scripts/test installs it)")
    }

    /// What the window shows now.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.command(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    /// Waits until the window shows what `cond` looks for; fails with the last screen.
    fn wait_until(&self, what: &str, mut cond: impl FnMut(&str) -> bool) -> String {
        let end = Instant::now() + Duration::from_secs(15);
        loop {
            let screen = self.screen();
            if cond(&screen) {
                return screen;
            }
            assert!(Instant::now() < end, "{what}: not shown within 15 s; the window shows:\n{screen}");
            thread::sleep(Duration::from_millis(100));
        }
    }

    fn keys(&self, keys: &str) {
        assert!(self.command(&["send-keys", "-t", "top", keys]).status.success(), "send-keys {keys}");
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command(&["kill-server"]);
    }
}

/// The line of the table whose name is `name`.
fn row<'a>(screen: &'a str, name: &str) -> Option<&'a str> {
    screen.lines().find(|l| l.split_whitespace().next() == Some(name))
}

/// The names of the table's rows, top to bottom.
fn names(screen: &str) -> Vec<&str> {
    screen.lines().skip(3).filter_map(|l| l.split_whitespace().next()).filter(|n| n.starts_with("live:")).collect()
}

/// Whole seconds of lease left shown in a row (`████░░░░░░ 12s`).
fn seconds_left(row: &str) -> u64 {
    let after_bar = row.rsplit(['█', '░']).next().expect("a bar").trim_start();
    let word = after_bar.split_whitespace().next().expect("seconds after the bar");
    word.trim_end_matches('s').parse().unwrap_or_else(|_| panic!("seconds in {row:?}"))
}

#[test]
fn the_live_view_follows_locks_taken_queued_for_and_released_and_quits_on_q() {
    let server = RedisServer::start();
    let client = Client::open(&server.url()).expect("client");
    let dir = TempDir::new();
    let exit = dir.file("exit");
    let line = format!("{BIN} top --interval 200ms --url {} 'live:*'; echo $? > {exit}", server.url());
    let tmux = Tmux::start(&line, 160, 30);
    tmux.wait_until("the heading", |s| s.contains("redlease top") && s.contains("read at") && s.contains("q quits"));

    // A lock taken shows as held by this process, with its lease as a bar.
    let plain = Holding::start(&client, |c| vec![c.lock("live:plain").lock().expect("lock")]);
    let pid = format!("pid {} thread", std::process::id());
    let screen = tmux.wait_until("live:plain held by this process", |s| {
        row(s, "live:plain").is_some_and(|r| r.contains("plain") && r.contains("held") && r.contains(&pid))
    });
    assert!(row(&screen, "live:plain").unwrap().contains('█'), "a lease bar:\n{screen}");

    // A fair lock with three threads queued goes to the top, its waiters counted.
    let fair = Holding::start(&client, |c| vec![c.fair_lock("live:fair").lock().expect("lock")]);
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let lock = client.fair_lock("live:fair");
            thread::spawn(move || drop(lock.try_lock_for(Duration::from_secs(30)).expect("wait")))
        })
        .collect();
    let screen = tmux.wait_until("live:fair first, with 3 queued", |s| {
        names(s).first() == Some(&"live:fair") && row(s, "live:fair").is_some_and(|r| r.contains("3 queued"))
    });
    assert_eq!(names(&screen), ["live:fair", "live:plain"], "most waiters first:\n{screen}");
    assert!(screen.lines().next().unwrap().contains("2 locks, 2 held, 3 waiting"), "{screen}");

    // A short fixed lease drains second by second.
    let _short = Holding::start(&client, |c| {
        vec![c.lock("live:short").with_lease(Duration::from_secs(8)).lock().expect("lock")]
    });
    let first = tmux.wait_until("live:short", |s| row(s, "live:short").is_some());
    let before = seconds_left(row(&first, "live:short").unwrap());
    tmux.wait_until("live:short's lease going down", |s| {
        row(s, "live:short").is_some_and(|r| seconds_left(r) < before)
    });

    // Released: the plain lock leaves the view; the fair lock passes down its queue.
    drop(plain);
    tmux.wait_until("live:plain gone", |s| row(s, "live:plain").is_none());
    drop(fair);
    for waiter in waiters {
        waiter.join().expect("a waiter had the lock");
    }
    tmux.wait_until("live:fair gone", |s| row(s, "live:fair").is_none());

    tmux.keys("q");
    assert_eq!(read_when_written(&dir.path("exit"), Duration::from_secs(10)), "0", "q quits with 0");
}

/// Breaks if a reading that hangs holds up the keys (the view reads Redis on a thread of
/// its own), or if a failed reading ends the view instead of being shown.
#[test]
fn the_live_view_says_when_redis_stops_answering_and_still_quits_on_q() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let dir = TempDir::new();
    let exit = dir.file("exit");
    let line = format!("{BIN} top --interval 200ms --timeout 1s --url {} 'gone:*'; echo $? > {exit}", proxy.url());
    let tmux = Tmux::start(&line, 120, 10);
    tmux.wait_until("a first reading", |s| s.contains("read at"));
    proxy.set_blackhole(true);
    tmux.wait_until("the failed reading, said", |s| s.contains("cannot read") && s.contains("q quits"));
    let asked = Instant::now();
    tmux.keys("q");
    assert_eq!(read_when_written(&dir.path("exit"), Duration::from_secs(5)), "0", "q quits with 0");
    assert!(asked.elapsed() < Duration::from_secs(2), "q waited {:?} for a reading", asked.elapsed());
}

#[test]
fn once_prints_one_frame_of_every_matching_lock_most_waiters_first() {
    let server = RedisServer::start();
    let client = Client::open(&server.url()).expect("client");
    let _plain = Holding::start(&client, |c| vec![c.lock("once:plain").lock().expect("lock")]);
    let _fair = Holding::start(&client, |c| vec![c.fair_lock("once:fair").lock().expect("lock")]);
    let lock = client.fair_lock("once:fair");
    let waiter = thread::spawn(move || {
        lock.try_lock_for(Duration::from_secs(3)).map(|g| g.is_none()).map_err(|e| e.to_string())
    });
    wait_for("a waiter queued", Duration::from_secs(5), || {
        redis::cmd("LLEN").arg("redisson_lock_queue:{once:fair}").query::<u64>(&mut server.conn()).unwrap_or(0) == 1
    });
    let _other = Holding::start(&client, |c| vec![c.lock("elsewhere").lock().expect("lock")]);

    let out = run(["top", "--once", "--url", &server.url(), "once:*"]);
    out.expect_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "heading, reading, columns, two rows:\n{}", out.stdout);
    assert!(lines[0].contains("2 locks, 2 held, 1 waiting"), "{}", out.stdout);
    assert!(lines[1].starts_with("read at ") && !lines[1].contains("q quits"), "{}", out.stdout);
    assert!(
        lines[3].starts_with("once:fair") && lines[3].contains("fair") && lines[3].contains("1 queued"),
        "{}",
        out.stdout
    );
    assert!(
        lines[4].starts_with("once:plain") && lines[4].contains(&format!("pid {}", std::process::id())),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("elsewhere"), "only the pattern's names:\n{}", out.stdout);
    assert!(out.stderr.is_empty(), "{out:#?}");
    assert_eq!(waiter.join().expect("waiter"), Ok(true), "the waiter timed out behind the holder");
}

#[test]
fn the_live_view_needs_a_terminal_a_positive_interval_and_a_pattern() {
    let server = RedisServer::start();
    let off = run(["top", "--url", &server.url()]);
    off.expect_code(USAGE).expect_one_line_error();
    assert!(off.stderr.contains("needs a terminal") && off.stderr.contains("--once"), "{off:#?}");
    for pattern in [String::new(), "x".repeat(8 * 1024 + 1)] {
        let bad = run(["top", "--url", &server.url(), &pattern]);
        bad.expect_code(USAGE).expect_one_line_error();
        assert!(bad.stderr.contains("pattern"), "{bad:#?}");
    }
    let zero = run(["top", "--once", "--interval", "0s", "--url", &server.url()]);
    zero.expect_code(USAGE).expect_one_line_error();
    assert!(zero.stderr.contains("--interval"), "{zero:#?}");
}
