//! TLS: `rediss://` for the command pool and the pub/sub connection alike, against
//! `redis-server`s with TLS ports and certificates made by the test itself
//! (`support::pki`). A wrong CA, an expired certificate, a missing client certificate and a
//! plaintext client on a TLS port each fail with a clear error within the connect timeout.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{AnyLock, Client, ClientBuilder};

use crate::helpers::*;
use crate::support::pki::{Pki, ServerCert};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Slack on top of timing bounds: the machine is noisy.
const SLACK: Duration = Duration::from_millis(1500);

fn tls_url(port: u16) -> String {
    format!("rediss://127.0.0.1:{port}/")
}

fn builder(url: &str) -> ClientBuilder {
    Client::builder(url).connect_timeout(CONNECT_TIMEOUT).command_timeout(Duration::from_secs(2))
}

/// Builds, and says how long that took.
fn timed_build(builder: ClientBuilder) -> (redlease::Result<Client>, Duration) {
    let started = Instant::now();
    let built = builder.build();
    (built, started.elapsed())
}

/// Holds `lock` elsewhere for 300 ms with a 20 s lease, while this thread waits for it:
/// the wait can only end quickly through the release message, over the pub/sub connection.
fn wake_through_pubsub(what: &str, lock: AnyLock) {
    let holder = lock.clone().with_lease(Duration::from_secs(20));
    let (held_tx, held_rx) = mpsc::channel();
    let releaser = thread::spawn(move || {
        let guard = holder.lock().expect("the holder acquires");
        held_tx.send(()).expect("tell");
        thread::sleep(Duration::from_millis(300));
        guard.unlock().expect("the holder releases");
    });
    held_rx.recv_timeout(Duration::from_secs(5)).expect("held");
    let started = Instant::now();
    let guard = lock.try_lock_for(Duration::from_secs(15)).unwrap_or_else(|e| panic!("{what}: {e}"));
    let waited = started.elapsed();
    assert!(guard.is_some(), "{what}: the waiter gets the lock");
    assert!(
        waited < Duration::from_millis(300) + SLACK,
        "{what}: woken by the message, not the 20 s lease: {waited:?}"
    );
    releaser.join().expect("releaser");
}

/// Every lock kind over TLS, contended so that waiters are woken through the pub/sub
/// connection, which is TLS too.
///
/// Breaks if either connection does not speak TLS (the server's TLS port accepts nothing
/// else), or if the TLS pub/sub connection does not deliver release messages (the waiter
/// would wait for the holder's 20 s lease).
#[test]
fn the_whole_lock_family_works_over_tls_with_pubsub_wake_ups() {
    let pki = Pki::new();
    let (_server, tls_port) = pki.start_server(ServerCert::Valid, false);
    let client = builder(&tls_url(tls_port)).tls_root_certificates(pki.ca.clone()).build().expect("TLS client");
    let rw = client.read_write_lock("tls-rw");
    let kinds: Vec<(&str, AnyLock)> = vec![
        ("plain", client.lock("tls-plain").into()),
        ("fair", client.fair_lock("tls-fair").into()),
        ("write", rw.write().into()),
        ("fenced", client.fenced_lock("tls-fenced").into()),
    ];
    for (what, lock) in kinds {
        wake_through_pubsub(what, lock);
    }
    let reader = rw.read().lock().expect("read over TLS");
    assert!(reader.is_held());
    reader.unlock().expect("read release over TLS");
    assert!(client.stats().subscriber_connected, "the pub/sub connection is open, over TLS");
}

/// Mutual TLS (`tls-auth-clients yes`): without a client certificate the server refuses
/// the client within the connect timeout; with one signed by its CA, everything works.
///
/// Breaks if a client without certificate gets in or hangs, or if the certificate is not
/// presented on the pub/sub connection too (the waiter would never be woken).
#[test]
fn mutual_tls_needs_the_client_certificate_on_every_connection() {
    let pki = Pki::new();
    let (_server, tls_port) = pki.start_server(ServerCert::Valid, true);
    let url = tls_url(tls_port);
    let (refused, took) = timed_build(builder(&url).tls_root_certificates(pki.ca.clone()));
    let err = refused.expect_err("no client certificate");
    assert!(err.is_connection_error(), "{err}");
    assert!(took < CONNECT_TIMEOUT + SLACK, "refused within the connect timeout: {took:?}");
    let client = builder(&url)
        .tls_root_certificates(pki.ca.clone())
        .tls_client_certificate(pki.client_cert.clone(), pki.client_key.clone())
        .build()
        .expect("with a client certificate");
    wake_through_pubsub("plain", client.lock("mtls").into());
}

/// The failures a TLS deployment meets, each a clear error within the connect timeout,
/// never a hang: a server certificate from an unknown CA, an expired one, a plaintext
/// client on the TLS port, a TLS client on the plaintext port.
///
/// Breaks if any of them connects, hangs past the connect timeout, or fails with an error
/// that does not say what is wrong (for the certificate cases).
#[test]
fn a_wrong_ca_an_expired_certificate_and_a_mismatched_protocol_fail_fast() {
    let pki = Pki::new();
    let (server, tls_port) = pki.start_server(ServerCert::Valid, false);
    let (expired_server, expired_port) = pki.start_server(ServerCert::Expired, false);
    let cases = [
        ("unknown CA", builder(&tls_url(tls_port)).tls_root_certificates(pki.other_ca.clone()), Some("UnknownIssuer")),
        ("expired", builder(&tls_url(expired_port)).tls_root_certificates(pki.ca.clone()), Some("expired")),
        ("plaintext on the TLS port", builder(&format!("redis://127.0.0.1:{tls_port}/")), None),
        ("TLS on the plaintext port", builder(&tls_url(server.port())).tls_root_certificates(pki.ca.clone()), None),
    ];
    for (what, builder, says) in cases {
        let (built, took) = timed_build(builder);
        let err = built.expect_err(what);
        assert!(err.is_connection_error() || err.is_timeout(), "{what}: {err}");
        assert!(took < CONNECT_TIMEOUT + SLACK, "{what}: failed within the connect timeout, took {took:?}");
        if let Some(says) = says {
            let text = format!("{err:#} {err:?}");
            assert!(text.contains(says), "{what}: the error says why: {text}");
            // A reporter that walks the chain (anyhow's `{:#}`) says each cause once.
            let mut walked = vec![err.to_string()];
            let mut next = std::error::Error::source(&err);
            while let Some(cause) = next {
                walked.push(cause.to_string());
                next = cause.source();
            }
            let walked = walked.join(": ");
            assert_eq!(walked.matches(says).count(), 1, "{what}: said once: {walked}");
            assert_eq!(format!("{err:#}").matches(says).count(), 1, "{what}: said once: {err:#}");
        }
    }
    drop(expired_server);
}

/// `danger_accept_invalid_certificates` connects (commands and pub/sub) to a server whose
/// certificate cannot be checked; without it the same client is refused.
///
/// Breaks if the setting is ignored on either connection.
#[test]
fn danger_accept_invalid_certificates_connects_where_checking_cannot() {
    let pki = Pki::new();
    let (_server, tls_port) = pki.start_server(ServerCert::Expired, false);
    let url = tls_url(tls_port);
    assert!(builder(&url).tls_root_certificates(pki.other_ca.clone()).build().is_err(), "checked: refused");
    let client = builder(&url).danger_accept_invalid_certificates(true).build().expect("unchecked: connects");
    wake_through_pubsub("plain", client.lock("insecure").into());
}

/// TLS settings on a plaintext URL and PEM that does not parse are `InvalidInput` before
/// anything is sent; key material never shows in `Debug`.
///
/// Breaks if TLS settings are silently ignored on `redis://`, if bad PEM is only found when
/// connecting, or if the builder's `Debug` shows a key.
#[test]
fn tls_settings_are_checked_before_anything_is_sent_and_keys_never_show() {
    let pki = Pki::new();
    let server = crate::support::server::RedisServer::start();
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    let plain =
        builder(&server.url()).tls_root_certificates(pki.ca.clone()).build().expect_err("redis:// with TLS settings");
    assert!(plain.is_invalid_input() && plain.to_string().contains("rediss://"), "{plain}");
    let bad = builder("rediss://127.0.0.1:1/").tls_root_certificates("not a certificate").build().expect_err("bad PEM");
    assert!(bad.is_invalid_input(), "{bad}");
    let mismatched = builder("rediss://127.0.0.1:1/")
        .tls_client_certificate(
            pki.client_cert.clone(),
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .build()
        .expect_err("bad key");
    assert!(mismatched.is_invalid_input(), "{mismatched}");
    assert_eq!(commands_served(&mut conn), before, "nothing was sent");
    let shown = format!(
        "{:?}",
        builder("rediss://:pw@127.0.0.1:1/").tls_client_certificate(pki.client_cert.clone(), pki.client_key.clone())
    );
    assert!(!shown.contains("PRIVATE KEY") && !shown.contains("CERTIFICATE") && !shown.contains(":pw@"), "{shown}");
}

/// `rediss://...#insecure` is refused with `InvalidInput` before anything is sent, naming
/// the builder's switch: the `redis` crate reads the fragment for the command connections,
/// but the pub/sub connection would still check the certificate, never connect, and leave
/// every waiter to its periodic re-check, silently.
///
/// Breaks if such a URL builds (before the fix it did, against a server whose certificate
/// has expired: the commands went through, the pub/sub connection never opened).
#[test]
fn an_insecure_url_fragment_is_refused_naming_the_builder_switch() {
    let pki = Pki::new();
    let (server, tls_port) = pki.start_server(ServerCert::Expired, false);
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    let url = format!("rediss://127.0.0.1:{tls_port}/#insecure");
    for builder in [builder(&url), builder(&url).tls_root_certificates(pki.ca.clone())] {
        let err = builder.build().expect_err("#insecure is refused");
        assert!(err.is_invalid_input(), "{err}");
        let text = err.to_string();
        assert!(text.contains("#insecure") && text.contains("danger_accept_invalid_certificates(true)"), "{text}");
    }
    assert_eq!(commands_served(&mut conn), before, "nothing was sent");
    // What the message points to works, on every connection.
    let client = builder(&tls_url(tls_port)).danger_accept_invalid_certificates(true).build().expect("the switch");
    wake_through_pubsub("plain", client.lock("insecure-switch").into());
    assert!(client.stats().subscriber_connected, "the pub/sub connection is open");
}

/// An X.509 v1 client certificate (`openssl x509 -req` without `-extfile`), signed by the
/// server's CA and matching its key, is `InvalidInput` at `build()` with a message that
/// says it is a v1 certificate rustls cannot use and how to reissue it, not that the
/// certificate and key do not go together.
///
/// Breaks if the message blames the key (before the fix: "the client certificate and key do
/// not go together: ... UnsupportedCertVersion").
#[test]
fn a_v1_client_certificate_is_refused_saying_so_and_how_to_reissue_it() {
    let pki = Pki::new();
    let (server, tls_port) = pki.start_server(ServerCert::Valid, true);
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    let err = builder(&tls_url(tls_port))
        .tls_root_certificates(pki.ca.clone())
        .tls_client_certificate(pki.v1_client_cert.clone(), pki.v1_client_key.clone())
        .build()
        .expect_err("a v1 client certificate");
    assert!(err.is_invalid_input(), "{err}");
    let text = err.to_string();
    assert!(!text.contains("do not go together"), "the key is not to blame: {text}");
    assert!(text.contains("X.509 v1") && text.contains("-extfile") && text.contains("v3"), "{text}");
    assert_eq!(commands_served(&mut conn), before, "nothing was sent");
}

/// A `rediss://` client on a plaintext port fails within the connect timeout, and the
/// message says the port may be plaintext (`redis://`); a TLS port that answers with a bad
/// certificate gets no such hint.
///
/// Breaks if the hint is missing (before: "timed out: no connection within the connect
/// timeout" and nothing more, a transient error that reads as an outage).
#[test]
fn tls_on_a_plaintext_port_hints_at_redis() {
    let pki = Pki::new();
    let (server, tls_port) = pki.start_server(ServerCert::Valid, false);
    let (built, took) = timed_build(builder(&tls_url(server.port())).tls_root_certificates(pki.ca.clone()));
    let err = built.expect_err("TLS on the plaintext port");
    assert!(err.is_timeout(), "{err:#}");
    assert!(took < CONNECT_TIMEOUT + SLACK, "failed within the connect timeout, took {took:?}");
    assert!(err.to_string().contains("plaintext") && err.to_string().contains("redis://"), "hints at plaintext: {err}");
    let (built, _) = timed_build(builder(&tls_url(tls_port)).tls_root_certificates(pki.other_ca.clone()));
    let wrong_ca = built.expect_err("unknown CA");
    assert!(!wrong_ca.to_string().contains("plaintext"), "{wrong_ca}");
}

/// A plaintext `redis://` client on a TLS port fails within the connect timeout, and the
/// message says the server may want TLS (`rediss://`); a port where nothing listens gets
/// no such hint.
///
/// Breaks if the hint is missing (before the fix: "redis error while connecting: Connection
/// reset by peer (os error 104)" and nothing more), or given where it does not apply.
#[test]
fn plaintext_on_a_tls_port_hints_at_rediss() {
    let pki = Pki::new();
    let (_server, tls_port) = pki.start_server(ServerCert::Valid, false);
    let (built, took) = timed_build(builder(&format!("redis://127.0.0.1:{tls_port}/")));
    let err = built.expect_err("plaintext on the TLS port");
    assert!(err.is_connection_error(), "{err}");
    assert!(took < CONNECT_TIMEOUT + SLACK, "failed within the connect timeout, took {took:?}");
    assert!(err.to_string().contains("rediss://"), "hints at TLS: {err}");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed = listener.local_addr().expect("addr").port();
    drop(listener);
    let refused = builder(&format!("redis://127.0.0.1:{closed}/")).build().expect_err("nothing listens");
    assert!(refused.is_connection_error() && !refused.to_string().contains("rediss"), "{refused}");
}
