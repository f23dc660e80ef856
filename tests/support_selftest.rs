//! Tests of the test support code itself: `RedisServer`, `Proxy` and `Child`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::process::ExitStatusExt;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::child::{self, Child};
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

/// Child roles defined here (listed in `ROLES` of tests/integration.rs).
pub const ROLES: &[(&str, fn())] = &[("selftest_sleeper", sleeper), ("selftest_echo_env", echo_env)];

/// Says "ready <pid>", then prints "tick" every 100 ms for up to 60 s.
fn sleeper() {
    child::say(&format!("ready {}", std::process::id()));
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        thread::sleep(Duration::from_millis(100));
        child::say("tick");
    }
}

/// Says "value <SELFTEST_VALUE>" and returns (the child then exits 0).
fn echo_env() {
    child::say("noise");
    child::say(&format!("value {}", child::env("SELFTEST_VALUE")));
}

const WAIT: Duration = Duration::from_secs(5);

fn ping(conn: &mut redis::Connection) -> redis::RedisResult<String> {
    redis::cmd("PING").query(conn)
}

fn get(conn: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(conn).expect("GET")
}

fn set(conn: &mut redis::Connection, key: &str, value: &str) {
    let () = redis::cmd("SET").arg(key).arg(value).query(conn).expect("SET");
}

/// A connection to `url` with the given read timeout (write timeout 5 s).
fn connect(url: &str, read_timeout: Duration) -> redis::Connection {
    let conn = redis::Client::open(url).expect("client").get_connection_with_timeout(WAIT).expect("connect");
    conn.set_read_timeout(Some(read_timeout)).expect("read timeout");
    conn.set_write_timeout(Some(WAIT)).expect("write timeout");
    conn
}

/// Polls `cond` every 5 ms until it holds; panics with `what` after `timeout`.
fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting until {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn server_starts_answers_and_comes_back_on_the_same_port() {
    let mut server = RedisServer::start();
    let port = server.port();
    assert_eq!(server.addr().to_string(), format!("127.0.0.1:{port}"));
    assert_eq!(server.url(), format!("redis://127.0.0.1:{port}/"));
    let first_pid = server.pid().expect("running server has a pid");

    let mut conn = server.conn();
    assert_eq!(ping(&mut conn).unwrap(), "PONG");
    set(&mut conn, "k", "v");
    assert_eq!(get(&mut conn, "k").as_deref(), Some("v"));
    let debug: String = redis::cmd("DEBUG").arg("SLEEP").arg(0).query(&mut conn).unwrap();
    assert_eq!(debug, "OK", "DEBUG is enabled");
    assert!(server.log().contains("Ready to accept connections"), "log: {}", server.log());

    server.kill();
    assert_eq!(server.pid(), None);
    server.kill(); // no-op when not running
    assert!(ping(&mut conn).is_err(), "a connection to a killed server fails");
    assert!(
        redis::Client::open(server.url()).unwrap().get_connection_with_timeout(Duration::from_secs(1)).is_err(),
        "connecting to a killed server fails"
    );

    server.start_again();
    assert_eq!(server.port(), port);
    let second_pid = server.pid().expect("running again");
    assert_ne!(second_pid, first_pid);
    let mut conn = server.conn();
    assert_eq!(ping(&mut conn).unwrap(), "PONG");
    assert_eq!(get(&mut conn, "k"), None, "no persistence with the default args");

    set(&mut conn, "k2", "v2");
    server.restart();
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), Some(second_pid));
    assert_eq!(get(&mut server.conn(), "k2"), None);
}

#[test]
fn appendonly_data_survives_restart() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let port = server.port();
    set(&mut server.conn(), "durable", "yes");
    server.restart();
    assert_eq!(server.port(), port);
    assert_eq!(get(&mut server.conn(), "durable").as_deref(), Some("yes"));
}

#[test]
fn servers_get_different_ports_and_dirs_are_removed() {
    let a = RedisServer::start();
    let b = RedisServer::start();
    assert_ne!(a.port(), b.port());
    assert_ne!(a.dir(), b.dir());
    set(&mut a.conn(), "only-a", "1");
    assert_eq!(get(&mut b.conn(), "only-a"), None);
    let dir = a.dir().to_path_buf();
    let pid = a.pid().unwrap();
    assert!(dir.is_dir());
    drop(a);
    assert!(!dir.exists(), "dir removed on drop");
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "process reaped on drop");
}

#[test]
fn server_with_requirepass_starts() {
    let server = RedisServer::start_with(&["--requirepass", "secret"]);
    let url = format!("redis://:secret@127.0.0.1:{}/", server.port());
    assert_eq!(ping(&mut connect(&url, WAIT)).unwrap(), "PONG");
}

#[test]
fn proxy_forwards_commands() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    assert_eq!(proxy.url(), format!("redis://127.0.0.1:{}/", proxy.addr().port()));
    assert_eq!(proxy.connection_count(), 0);
    let mut conn = connect(&proxy.url(), WAIT);
    set(&mut conn, "via-proxy", "1");
    assert_eq!(get(&mut server.conn(), "via-proxy").as_deref(), Some("1"));
    assert_eq!(get(&mut conn, "via-proxy").as_deref(), Some("1"));
    assert_eq!(proxy.connection_count(), 1);
    let mut second = connect(&proxy.url(), WAIT);
    assert_eq!(ping(&mut second).unwrap(), "PONG");
    assert_eq!(proxy.connection_count(), 2);
    drop(conn);
    drop(second);
    wait_until("closed connections leave the proxy", WAIT, || proxy.connection_count() == 0);
}

#[test]
fn proxy_latency_delays_round_trips_without_serialising_chunks() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let mut conn = connect(&proxy.url(), WAIT);
    let start = Instant::now();
    ping(&mut conn).unwrap();
    let fast = start.elapsed();

    let latency = Duration::from_millis(100);
    proxy.set_latency(latency); // applies to the existing connection too
    let start = Instant::now();
    assert_eq!(ping(&mut conn).unwrap(), "PONG");
    let slow = start.elapsed();
    assert!(slow >= 2 * latency, "round trip {slow:?} < 2 × {latency:?}");
    assert!(slow < 2 * latency + Duration::from_millis(400), "round trip {slow:?} far too slow");

    // Five commands written 20 ms apart, as separate chunks: each is delayed by the
    // latency from its own arrival, not queued behind the others' full delay, and the
    // replies come back in order.
    let mut raw = TcpStream::connect(proxy.addr()).unwrap();
    raw.set_nodelay(true).unwrap();
    raw.set_read_timeout(Some(WAIT)).unwrap();
    let start = Instant::now();
    for i in 0..5 {
        write!(raw, "*2\r\n$4\r\nECHO\r\n$1\r\n{i}\r\n").unwrap();
        thread::sleep(Duration::from_millis(20));
    }
    let mut reader = BufReader::new(raw.try_clone().unwrap());
    let mut replies = Vec::new();
    for _ in 0..5 {
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        assert_eq!(header, "$1\r\n");
        let mut value = String::new();
        reader.read_line(&mut value).unwrap();
        replies.push(value.trim_end().to_string());
    }
    let elapsed = start.elapsed();
    assert_eq!(replies, ["0", "1", "2", "3", "4"], "order preserved");
    assert!(elapsed >= 2 * latency + Duration::from_millis(80), "took {elapsed:?}");
    assert!(elapsed < Duration::from_millis(700), "took {elapsed:?}: chunks were serialised behind each other's delay");

    proxy.set_latency(Duration::ZERO);
    let start = Instant::now();
    ping(&mut conn).unwrap();
    let restored = start.elapsed();
    assert!(
        restored < Duration::from_millis(150),
        "latency removed, yet round trip {restored:?} (was {fast:?} at first)"
    );
}

#[test]
fn proxy_blackhole_times_out_and_recovers() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let mut conn = connect(&proxy.url(), Duration::from_millis(300));
    assert_eq!(ping(&mut conn).unwrap(), "PONG");

    proxy.set_blackhole(true);
    let start = Instant::now();
    let err = ping(&mut conn).expect_err("PING through a black hole");
    let waited = start.elapsed();
    assert!(err.is_timeout(), "expected a timeout, got {err:?}");
    assert!(waited >= Duration::from_millis(250), "timed out after only {waited:?}");
    // New connections are accepted and stay open while the hole swallows everything.
    let raw = TcpStream::connect(proxy.addr()).unwrap();
    wait_until("the black-holed connection is counted", WAIT, || proxy.connection_count() == 2);
    drop(raw);

    proxy.set_blackhole(false);
    let mut fresh = connect(&proxy.url(), Duration::from_millis(300));
    assert_eq!(ping(&mut fresh).unwrap(), "PONG");
}

#[test]
fn proxy_cut_all_breaks_existing_connections() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let mut conn = connect(&proxy.url(), WAIT);
    assert_eq!(ping(&mut conn).unwrap(), "PONG");
    assert_eq!(proxy.connection_count(), 1);

    proxy.cut_all();
    wait_until("cut connections leave the proxy", WAIT, || proxy.connection_count() == 0);
    let start = Instant::now();
    let err = ping(&mut conn).expect_err("PING on a cut connection");
    assert!(!err.is_timeout(), "a cut connection fails at once, got {err:?}");
    assert!(start.elapsed() < Duration::from_secs(1));

    let mut fresh = connect(&proxy.url(), WAIT);
    assert_eq!(ping(&mut fresh).unwrap(), "PONG");
    assert_eq!(proxy.connection_count(), 1);
}

/// While refusing, a new connection through the proxy fails at its connect, an open one
/// keeps working, and once the refusal ends new connections work again.
#[test]
fn proxy_refusing_fails_new_connections_and_spares_open_ones() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let mut open = connect(&proxy.url(), WAIT);
    assert_eq!(ping(&mut open).unwrap(), "PONG");

    proxy.set_refusing(true);
    let refused = redis::Client::open(proxy.url()).unwrap().get_connection_with_timeout(WAIT);
    assert!(refused.is_err(), "a new connection is refused");
    assert_eq!(ping(&mut open).unwrap(), "PONG", "the open one is left alone");

    proxy.set_refusing(false);
    let mut fresh = connect(&proxy.url(), WAIT);
    assert_eq!(ping(&mut fresh).unwrap(), "PONG");
}

#[test]
fn proxy_drop_replies_runs_commands_but_loses_replies() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let mut conn = connect(&proxy.url(), Duration::from_millis(300));
    assert_eq!(ping(&mut conn).unwrap(), "PONG");
    assert_eq!(proxy.replies_dropped(), 0, "nothing dropped while replies flow");

    proxy.set_drop_replies(true);
    let err =
        redis::cmd("SET").arg("lost-reply").arg("applied").query::<()>(&mut conn).expect_err("the reply is dropped");
    assert!(err.is_timeout(), "expected a timeout, got {err:?}");
    assert_eq!(proxy.replies_dropped(), 1, "the one reply was counted as dropped");
    let mut direct = server.conn();
    wait_until("the SET reached the server", WAIT, || get(&mut direct, "lost-reply").as_deref() == Some("applied"));

    proxy.set_drop_replies(false);
    let mut fresh = connect(&proxy.url(), WAIT);
    assert_eq!(get(&mut fresh, "lost-reply").as_deref(), Some("applied"));
}

#[test]
fn proxy_drop_reply_to_loses_exactly_the_reply_to_the_request_named() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let mut bystander = connect(&proxy.url(), Duration::from_millis(300));
    let mut conn = connect(&proxy.url(), Duration::from_millis(300));

    proxy.drop_reply_to(b"lost-once");
    assert_eq!(ping(&mut bystander).unwrap(), "PONG", "a request not named keeps its reply");
    let err =
        redis::cmd("SET").arg("lost-once").arg("applied").query::<()>(&mut conn).expect_err("its reply is dropped");
    assert!(err.is_timeout(), "expected a timeout, got {err:?}");
    assert_eq!(proxy.replies_dropped(), 1);
    let mut retry = connect(&proxy.url(), Duration::from_millis(300));
    redis::cmd("SET")
        .arg("lost-once")
        .arg("again")
        .query::<()>(&mut retry)
        .expect("the same request again is answered");
    assert_eq!(get(&mut bystander, "lost-once").as_deref(), Some("again"));
    assert_eq!(proxy.replies_dropped(), 1, "one reply lost, no more");
}

#[test]
fn proxy_drop_ends_its_connections() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    let mut conn = connect(&proxy.url(), WAIT);
    assert_eq!(ping(&mut conn).unwrap(), "PONG");
    let addr = proxy.addr();
    drop(proxy); // joins all its threads
    assert!(ping(&mut conn).is_err());
    assert!(TcpStream::connect(addr).is_err(), "no longer listening");
}

#[test]
fn child_stop_cont_kill() {
    let mut child = Child::spawn("selftest_sleeper", &[]);
    let ready = child.wait_line("ready", WAIT);
    assert_eq!(ready, format!("ready {}", child.pid()));
    child.wait_line("tick", WAIT);

    child.stop(); // returns once the child is stopped
    // Let ticks already in the pipe reach the reader thread, then expect silence.
    thread::sleep(Duration::from_millis(50));
    let stopped_at = child.lines().len();
    thread::sleep(Duration::from_millis(500));
    assert_eq!(child.lines().len(), stopped_at, "a stopped child printed");

    child.cont();
    wait_until("the child ticks again", WAIT, || child.lines().len() > stopped_at);

    child.kill();
    let status = child.wait(WAIT);
    assert_eq!(status.signal(), Some(9), "killed by SIGKILL: {status:?}");
    assert_eq!(child.lines()[0], ready);
}

#[test]
fn child_reads_env_and_exits_cleanly() {
    let mut child = Child::spawn("selftest_echo_env", &[("SELFTEST_VALUE", "42".to_string())]);
    assert_eq!(child.wait_line("value", WAIT), "value 42");
    assert!(child.wait(WAIT).success());
    assert_eq!(child.lines(), ["noise", "value 42"]);
    assert!(!child::is_child());

    // Waiting for a line the child never printed fails at once once it has exited.
    let start = Instant::now();
    let missing = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| child.wait_line("never", WAIT)));
    assert!(missing.is_err());
    assert!(start.elapsed() < Duration::from_secs(1));
}
