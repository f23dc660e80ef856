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
fn bad_names_leases_and_waits_are_rejected_before_any_command() {
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
    assert_invalid(client.lock("waits").try_lock_for(Duration::MAX), "a wait that overflows Instant");
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
    assert!(err.is_connection_error(), "{err}");
    assert_eq!(err.kind(), ErrorKind::Redis);

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
