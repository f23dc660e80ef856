//! The error type's tests: kinds, predicates, messages and what is transient.

use super::*;

#[test]
fn display_is_lowercase_names_the_lock_and_has_no_period() {
    let e = Error::new(ErrorKind::NotHeld, "this thread holds nothing to release").on_lock("orders:42");
    let text = e.to_string();
    assert_eq!(text, "not held: this thread holds nothing to release (lock \"orders:42\")");
    assert!(!text.ends_with('.'));
    assert!(e.is_not_held() && !e.is_timeout() && !e.is_connection_error());
}

/// A long name shows its first 64 characters, cut on a character boundary, and its
/// length in bytes; `lock_name()` keeps it whole.
#[test]
fn long_names_are_cut_on_a_character_boundary_with_their_length() {
    assert_eq!(shown_name("orders:42"), "\"orders:42\"");
    assert_eq!(shown_name(&"x".repeat(64)), format!("\"{}\"", "x".repeat(64)));
    assert_eq!(shown_name(&"x".repeat(65)), format!("\"{}\"…, 65 bytes long", "x".repeat(64)));
    let wide = "é".repeat(50_000);
    assert_eq!(shown_name(&wide), format!("\"{}\"…, 100000 bytes long", "é".repeat(64)));
    let e = Error::invalid("the name is too long").on_lock(&wide);
    assert!(e.to_string().len() < 250 && format!("{e:?}").len() < 400, "{e} {e:?}");
    assert_eq!(e.lock_name(), Some(wide.as_str()));
}

/// A semaphore's or a latch's error names it as such, also over the "lock" the shared
/// checks gave the same name; another name given first stays.
#[test]
fn semaphores_and_latches_are_named_as_such() {
    let e = Error::invalid("0 permits").on_semaphore("user:sem");
    assert_eq!(e.to_string(), "invalid input: 0 permits (semaphore \"user:sem\")");
    assert_eq!(e.lock_name(), Some("user:sem"));
    let e = Error::invalid("the name is empty").on_lock("").on_latch("");
    assert_eq!(e.to_string(), "invalid input: the name is empty (latch \"\")");
    let e = Error::shutdown().on_lock("user:sem").on_semaphore("user:sem").on_lock("user:sem");
    assert!(e.to_string().ends_with("(semaphore \"user:sem\")"), "{e}");
    let e = Error::invalid("0 permits").on_semaphore("go").on_latch("go");
    assert!(e.to_string().ends_with("(latch \"go\")"), "{e}");
    let e = Error::shutdown().on_lock("a").on_semaphore("b");
    assert!(e.to_string().ends_with("(lock \"a\")") && e.lock_name() == Some("a"), "{e}");
}

#[test]
fn shutdown_says_it_once() {
    assert_eq!(Error::shutdown().to_string(), "client shut down: no more calls are taken");
}

#[test]
fn a_hint_comes_last() {
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
    let e = Error::from_redis(redis::RedisError::from(io), "connecting", Duration::from_secs(1))
        .hint("the server may want TLS")
        .hint("another");
    assert_eq!(format!("{e:#}"), "connection failed: connecting failed: reset (the server may want TLS)");
    assert_eq!(e.to_string(), "connection failed: connecting failed (the server may want TLS)");
}

/// A reset or an end of stream is a close by the peer; a refused connection and a
/// timeout are not.
#[test]
fn closed_by_peer_is_a_reset_or_an_end_of_stream() {
    let from = |kind| Error::from_redis(std::io::Error::from(kind).into(), "connecting", Duration::from_secs(1));
    assert!(from(std::io::ErrorKind::ConnectionReset).is_closed_by_peer());
    assert!(from(std::io::ErrorKind::UnexpectedEof).is_closed_by_peer());
    assert!(!from(std::io::ErrorKind::ConnectionRefused).is_closed_by_peer());
    assert!(!from(std::io::ErrorKind::TimedOut).is_closed_by_peer());
    assert!(!Error::invalid("x").is_closed_by_peer());
}

#[test]
fn redis_io_timeout_becomes_timeout_kind() {
    let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out");
    let e = Error::from_redis(redis::RedisError::from(io), "acquiring", Duration::from_secs(3));
    assert_eq!(e.kind(), ErrorKind::Timeout);
    assert!(e.is_timeout() && e.is_connection_error());
    assert!(e.to_string().contains("command timeout (3s)"), "{e}");
    assert!(std::error::Error::source(&e).is_some());
}

/// The texts of `e` and of every cause below it, as a reporter that walks
/// `source()` (anyhow's `{:#}`) shows them.
fn chain(e: &Error) -> Vec<String> {
    let mut texts = vec![e.to_string()];
    let mut next = std::error::Error::source(e);
    while let Some(cause) = next {
        texts.push(cause.to_string());
        next = cause.source();
    }
    texts
}

/// A cause wrapped in redis-rs's error (whose `Display` is its cause's, and whose
/// `source()` is that cause too) is said once by a walk of the chain, and once by the
/// alternate form; a cause of the cause is said too, once.
#[test]
fn walking_the_chain_says_each_cause_once() {
    let io = std::io::Error::new(std::io::ErrorKind::InvalidData, "invalid peer certificate: UnknownIssuer");
    let e = Error::from_redis(redis::RedisError::from(io), "connecting", Duration::from_secs(1));
    let texts = chain(&e);
    assert_eq!(texts.join(": "), "connection failed: connecting failed: invalid peer certificate: UnknownIssuer");
    assert_eq!(format!("{e:#}"), texts.join(": "));

    #[derive(Debug)]
    struct Handshake(std::io::Error);
    impl fmt::Display for Handshake {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the TLS handshake failed")
        }
    }
    impl std::error::Error for Handshake {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let deep = std::io::Error::other("the certificate expired");
    let io = std::io::Error::new(std::io::ErrorKind::InvalidData, Handshake(deep));
    let e = Error::from_redis(redis::RedisError::from(io), "connecting", Duration::from_secs(1));
    let texts = chain(&e);
    for (i, a) in texts.iter().enumerate() {
        for b in &texts[i + 1..] {
            assert!(!a.contains(b.as_str()) && !b.contains(a.as_str()), "a text repeats: {texts:?}");
        }
    }
    assert_eq!(
        format!("{e:#}"),
        "connection failed: connecting failed: the TLS handshake failed: the certificate expired"
    );
    assert_eq!(format!("{e:#}"), texts.join(": "));
}

/// `Display` says each cause once when a reporter walks the chain: the source's text
/// is not in it, and is in the alternate form.
/// Every kind as the design's table of kinds says (its section "Errors"): transient or not.
#[test]
fn each_kind_is_transient_as_the_design_says() {
    let design = include_str!("../../../docs/design.md");
    let kinds = [
        ErrorKind::Redis,
        ErrorKind::Connection,
        ErrorKind::Timeout,
        ErrorKind::NotHeld,
        ErrorKind::WouldDeadlock,
        ErrorKind::InvalidInput,
        ErrorKind::PermissionDenied,
        ErrorKind::Shutdown,
        ErrorKind::System,
        ErrorKind::Interrupted,
        ErrorKind::NotReplicated,
        ErrorKind::NotPersisted,
        ErrorKind::Authentication,
    ];
    let rows: Vec<(&str, &str)> = design
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.strip_prefix("| `")?.split(" | ").collect();
            let kind = cells.first()?.strip_suffix('`')?;
            Some((kind, *cells.get(1)?))
        })
        .filter(|(kind, _)| kinds.iter().any(|k| format!("{k:?}") == *kind))
        .collect();
    assert_eq!(rows.len(), kinds.len(), "one row per kind: {rows:?}");
    for kind in kinds {
        let name = format!("{kind:?}");
        let (_, said) = rows.iter().find(|(k, _)| *k == name).expect("a row");
        let transient = Error::new(kind, "x").is_transient();
        assert_eq!(said.starts_with("yes"), transient, "{name}: the design says {said:?}");
    }
    // The exceptions the `Redis` row names; a `Redis` error marked a connection failure
    // is one of kind `Connection`.
    assert!(Error::new(ErrorKind::Redis, "x").transient().is_transient());
    let marked = Error::new(ErrorKind::Redis, "x").connection();
    assert!(marked.kind() == ErrorKind::Connection && marked.is_transient() && marked.is_connection_error());
}

#[test]
fn the_source_is_told_once() {
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
    let e = Error::from_redis(redis::RedisError::from(io), "connecting to 127.0.0.1:1", Duration::from_secs(1));
    assert_eq!(e.to_string(), "connection failed: connecting to 127.0.0.1:1 failed");
    let source = std::error::Error::source(&e).map(ToString::to_string).unwrap();
    assert!(source.contains("refused"), "{source}");
    assert!(!e.to_string().contains(&source));
    assert_eq!(format!("{e:#}"), format!("{e}: {source}"));
}

/// A connection refused, reset or closed is of kind `Connection`, a connection error and
/// transient, however it reached the error: wrapped from redis-rs, marked on an error of
/// the client's own, or told by a call that shared a failed round trip.
#[test]
fn a_failed_connection_is_of_kind_connection_on_every_path() {
    for io in
        [std::io::ErrorKind::ConnectionRefused, std::io::ErrorKind::ConnectionReset, std::io::ErrorKind::UnexpectedEof]
    {
        let e = Error::from_redis(std::io::Error::from(io).into(), "renewing leases", Duration::from_secs(1));
        assert_eq!(e.kind(), ErrorKind::Connection, "{io:?}: {e}");
        assert!(e.is_connection_error() && e.is_transient(), "{io:?}: {e}");
        let shared = e.alike("renewing leases failed: its round trip failed");
        assert_eq!(shared.kind(), ErrorKind::Connection, "{shared}");
        assert!(shared.is_connection_error() && shared.is_transient() && shared.is_retryable() == e.is_retryable());
    }
    let own = Error::new(ErrorKind::Redis, "the pub/sub connection failed").connection();
    assert_eq!(own.kind(), ErrorKind::Connection);
    assert!(own.is_connection_error() && own.is_transient());
    // A timeout and a refused login keep their kinds.
    let timeout = Error::new(ErrorKind::Timeout, "no answer").connection();
    assert_eq!((timeout.kind(), timeout.is_connection_error()), (ErrorKind::Timeout, true));
    let login = Error::new(ErrorKind::Authentication, "WRONGPASS").connection();
    assert_eq!((login.kind(), login.is_connection_error()), (ErrorKind::Authentication, false));
    // An answer is not a connection failure.
    let answer = Error::from_redis(
        redis::RedisError::from((redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError), "WRONGTYPE")),
        "acquiring",
        Duration::from_secs(1),
    );
    assert_eq!((answer.kind(), answer.is_connection_error()), (ErrorKind::Redis, false));
}
