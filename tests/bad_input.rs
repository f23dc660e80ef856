//! Bad input gets `InvalidInput` before anything is sent; nothing that fails leaks secrets.

use std::time::{Duration, Instant};

use redlease::{Client, ErrorKind};

use crate::helpers::*;
use crate::support::proxy::Proxy;
use crate::support::server::RedisServer;

fn assert_invalid<T: std::fmt::Debug>(result: redlease::Result<T>, what: &str) {
    let err = result.expect_err(what);
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {err}");
    assert!(err.is_invalid_input());
}

#[test]
fn bad_names_and_leases_are_rejected_before_any_command() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    let long = "n".repeat(8 * 1024 + 1);
    for name in ["", long.as_str()] {
        let lock = client.lock(name);
        assert_invalid(lock.lock(), "lock with a bad name");
        assert_invalid(lock.try_lock(), "try_lock with a bad name");
        assert_invalid(lock.try_lock_for(Duration::from_millis(10)), "try_lock_for with a bad name");
        assert_invalid(lock.is_locked(), "is_locked with a bad name");
        assert_invalid(lock.hold_count(), "hold_count with a bad name");
        assert_invalid(lock.remaining_ttl(), "remaining_ttl with a bad name");
        assert_invalid(lock.force_unlock(), "force_unlock with a bad name");
        assert_invalid(lock.is_held_by_current_thread(), "is_held_by_current_thread with a bad name");
    }
    for lease in [Duration::ZERO, Duration::from_micros(999), Duration::from_millis(1 << 53), Duration::MAX] {
        let lock = client.lock("leased").with_lease(lease);
        assert_invalid(lock.try_lock(), &format!("lease {lease:?}"));
        assert_invalid(lock.lock(), &format!("lease {lease:?}"));
    }
    assert_eq!(commands_served(&mut conn) - before, 0, "nothing was sent");
    // The limits themselves are accepted.
    assert!(client.lock("n".repeat(8 * 1024)).try_lock().unwrap().is_some());
    assert!(client.lock("shortest").with_lease(Duration::from_millis(1)).try_lock().unwrap().is_some());
    let longest = Duration::from_millis((1 << 53) - 1);
    let guard = client.lock("longest").with_lease(longest).try_lock().unwrap().unwrap();
    assert!(pttl(&mut conn, "longest") > 1 << 52);
    guard.unlock().unwrap();
}

#[test]
fn bad_settings_are_rejected_before_connecting() {
    // Nothing listens on port 1: a setting error must come before any connect attempt.
    let url = "redis://127.0.0.1:1/";
    let bad = [
        Client::builder(url).watchdog_timeout(Duration::from_millis(29)),
        Client::builder(url).watchdog_timeout(Duration::MAX),
        Client::builder(url).pool_size(0),
        Client::builder(url).connect_timeout(Duration::ZERO),
        Client::builder(url).command_timeout(Duration::ZERO),
        Client::builder(url).fair_wait_timeout(Duration::ZERO),
        Client::builder(url).renew_batch_size(0),
        Client::builder("not a url"),
        Client::builder("http://127.0.0.1:6379/"),
    ];
    for builder in bad {
        let described = format!("{builder:?}");
        assert_invalid(builder.build(), &described);
    }
    let server = RedisServer::start();
    assert!(Client::builder(server.url()).watchdog_timeout(Duration::from_millis(30)).build().is_ok());
}

#[test]
fn build_fails_fast_with_a_connection_error_when_nothing_answers() {
    // Refused: nothing listens.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let err = Client::open(&format!("redis://127.0.0.1:{port}/")).unwrap_err();
    assert!(err.is_connection_error() && err.is_transient(), "{err}");
    assert_eq!(err.kind(), ErrorKind::Connection, "a refused connection is a connection failure: {err}");

    // Silent: a proxy that accepts and never answers.
    let server = RedisServer::start();
    let proxy = Proxy::start(server.addr());
    proxy.set_blackhole(true);
    let started = Instant::now();
    let err = Client::builder(proxy.url()).connect_timeout(Duration::from_millis(500)).build().unwrap_err();
    let took = started.elapsed();
    assert!(err.is_connection_error() && err.is_timeout(), "{err}");
    assert!(err.to_string().contains("connect timeout"), "{err}");
    assert!(took >= Duration::from_millis(450) && took < Duration::from_secs(2), "took {took:?}");
}

#[test]
fn passwords_never_show_in_errors_or_debug_output() {
    let server = RedisServer::start_with(&["--requirepass", "hunter2-secret"]);
    let good = format!("redis://:hunter2-secret@127.0.0.1:{}/", server.port());
    let client = Client::open(&good).expect("authenticates");
    assert!(!format!("{client:?}").contains("hunter2"), "{client:?}");
    let guard = client.lock("authed").lock().unwrap();
    drop(guard);
    let builder = Client::builder(good.as_str());
    assert!(!format!("{builder:?}").contains("hunter2"), "{builder:?}");
    let wrong = format!("redis://:wrong-secret@127.0.0.1:{}/", server.port());
    let err = Client::open(&wrong).unwrap_err();
    assert!(!err.to_string().contains("wrong-secret") && !format!("{err:?}").contains("wrong-secret"), "{err}");
    let unparsable = "redis://:hunter2-secret@[::1/";
    let err = Client::open(unparsable).unwrap_err();
    assert!(!err.to_string().contains("hunter2") && !format!("{err:?}").contains("hunter2"), "{err}");
}

/// A name far over the limit is refused, and its errors show only its first 64 characters
/// (cut on a character boundary) and its length, in `Display` and in `Debug` alike;
/// `lock_name()` still gives the whole name.
///
/// Breaks if a message echoes the whole name (before the fix: a 100,000-byte name made a
/// message of more than 100,000 bytes).
#[test]
fn a_rejected_long_name_is_shown_cut_with_its_length() {
    let server = RedisServer::start();
    let client = client(&server);
    let ascii = "n".repeat(100_000);
    let wide = "é".repeat(50_000); // 100,000 bytes, two per character
    for name in [ascii.as_str(), wide.as_str()] {
        let errors = [
            ("lock", client.lock(name).try_lock().map(drop).expect_err("lock")),
            ("semaphore", client.semaphore(name).try_acquire(1).map(drop).expect_err("semaphore")),
            ("latch", client.count_down_latch(name).count().map(drop).expect_err("latch")),
        ];
        for (what, err) in errors {
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {err}");
            let (text, debug) = (err.to_string(), format!("{err:?}"));
            assert!(text.len() < 400 && debug.len() < 600, "{what}: {} / {} bytes: {text}", text.len(), debug.len());
            assert!(text.contains("100000 bytes"), "{what}: says how long the name was: {text}");
            let first = name.chars().next().expect("a name").to_string();
            assert!(text.contains(&format!("\"{}\"…", first.repeat(64))), "{what}: its first 64 characters: {text}");
            assert_eq!(err.lock_name(), Some(name), "{what}: the whole name is still there");
        }
    }
    // A name of 64 characters shows whole, without an ellipsis.
    let err = client.lock("x".repeat(64)).with_lease(Duration::ZERO).try_lock().expect_err("zero lease");
    assert!(err.to_string().contains(&format!("\"{}\")", "x".repeat(64))), "{err}");
}

/// Every message that lists the URL schemes a client accepts lists all five.
///
/// Breaks if one leaves out `redis-sentinel://` or `redis-cluster://` (before the fix:
/// "expected redis://[[user]:password@]host[:port][/db], rediss://... or unix:///path").
#[test]
fn url_errors_list_every_accepted_scheme() {
    for url in ["not a url", "http://127.0.0.1:6379/", "redis://127.0.0.1:notaport/", "redis://127.0.0.1/abc"] {
        let err = Client::open(url).expect_err(url);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{url}: {err}");
        for scheme in ["redis://", "rediss://", "unix://", "redis-sentinel://", "redis-cluster://"] {
            assert!(err.to_string().contains(scheme), "{url}: lists {scheme}: {err}");
        }
    }
}

/// A call on a client that was shut down says so once.
///
/// Breaks if the message repeats itself (before the fix: "client shut down: the client was
/// shut down").
#[test]
fn a_shut_down_client_says_so_once() {
    let server = RedisServer::start();
    let client = client(&server);
    client.shutdown();
    let err = client.lock("after").try_lock().map(drop).expect_err("shut down");
    assert!(err.is_shutdown(), "{err}");
    let text = err.to_string();
    assert_eq!(text.matches("shut down").count(), 1, "{text}");
}
/// A semaphore's and a latch's errors name them as such (`(semaphore "user:sem")`,
/// `(latch "user:latch")`), whichever check refused the call, and `lock_name()` gives the
/// name; a lock's still says `(lock "...")`.
///
/// Breaks if one says `(lock "...")` (before the switch: every one of them did).
#[test]
fn semaphore_and_latch_errors_name_them_as_such() {
    let server = RedisServer::start();
    let client = client(&server);
    let semaphore = client.semaphore("user:sem");
    let expirable = client.permit_expirable_semaphore("user:pes");
    let latch = client.count_down_latch("user:latch");
    let mut cases = vec![
        ("semaphore", "user:sem", semaphore.try_acquire(0).map(drop).expect_err("0 permits")),
        ("semaphore", "user:sem", semaphore.add_permits(i64::MAX).map(drop).expect_err("too many")),
        ("semaphore", "user:pes", expirable.try_acquire(0).map(drop).expect_err("0 permits")),
        ("semaphore", "", client.semaphore("").available_permits().map(drop).expect_err("empty name")),
        ("latch", "user:latch", latch.try_set_count(0).map(drop).expect_err("count 0")),
        ("latch", "", client.count_down_latch("").count().map(drop).expect_err("empty name")),
        ("lock", "", client.lock("").try_lock().map(drop).expect_err("empty name")),
    ];
    client.shutdown();
    cases.push(("semaphore", "user:sem", semaphore.try_acquire(1).map(drop).expect_err("shut down")));
    cases.push(("semaphore", "user:pes", expirable.try_acquire(1).map(drop).expect_err("shut down")));
    cases.push(("latch", "user:latch", latch.count_down().map(drop).expect_err("shut down")));
    cases.push(("latch", "user:latch", latch.await_zero().expect_err("shut down")));
    for (what, name, err) in cases {
        assert!(err.to_string().ends_with(&format!("({what} {name:?})")), "{what} {name:?}: {err}");
        assert_eq!(err.lock_name(), Some(name), "{err}");
    }
}

/// A wrong password, a user that does not exist, and no password where the server wants
/// one: each is `Authentication`, says "authentication" or "login" and names the user, and
/// is neither transient nor a connection error (no retry mends it), at build and in the
/// error's kind alike.
///
/// Breaks if a refused login looks like an outage (`connecting … failed`,
/// `is_transient() == true`, `is_connection_error() == true`: callers and the retry budget
/// kept trying what could never work).
#[test]
fn a_refused_login_is_an_authentication_error_naming_the_user_and_never_transient() {
    let server = RedisServer::start_with(&["--requirepass", "right-secret"]);
    let mut admin = redis::Client::open(format!("redis://:right-secret@127.0.0.1:{}/", server.port()))
        .unwrap()
        .get_connection()
        .unwrap();
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg("on")
        .arg(">app-secret")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .query::<()>(&mut admin)
        .unwrap();
    let port = server.port();
    let cases = [
        (format!("redis://:wrong-secret@127.0.0.1:{port}/"), "\"default\""),
        (format!("redis://nobody:app-secret@127.0.0.1:{port}/"), "\"nobody\""),
        (format!("redis://app:wrong@127.0.0.1:{port}/"), "\"app\""),
        (format!("redis://127.0.0.1:{port}/"), "\"default\""),
    ];
    for (url, user) in cases {
        let started = Instant::now();
        let err = Client::builder(url.as_str()).retry_budget(Duration::from_secs(10)).build().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Authentication, "{url}: {err:#}");
        assert!(err.is_authentication(), "{url}");
        assert!(!err.is_transient() && !err.is_connection_error(), "{url}: {err:#}");
        let text = format!("{err:#}");
        assert!(text.contains("login") || text.contains("authentication"), "{url}: {text}");
        assert!(text.contains(user), "{url}: names the user {user}: {text}");
        assert!(!text.contains("wrong-secret") && !text.contains("app-secret"), "{url}: {text}");
        assert!(started.elapsed() < Duration::from_secs(2), "{url}: not retried: {:?}", started.elapsed());
    }
    let good = Client::open(&format!("redis://app:app-secret@127.0.0.1:{port}/")).expect("the right login works");
    good.lock("authed").lock().unwrap().unlock().unwrap();
}
