//! The URLs the library accepts work for every command: `rediss://` with the tool's
//! `--tls-*` options, and `redis-sentinel://`.

use std::time::Duration;

use redlease_testkit::pki::{Pki, ServerCert};
use redlease_testkit::sentinel::SentinelGroup;

use crate::support::*;

#[test]
fn rediss_with_a_private_ca_runs_shows_and_unlocks() {
    let pki = Pki::new();
    let (server, tls_port) = pki.start_server(ServerCert::Valid, false);
    let url = format!("rediss://127.0.0.1:{tls_port}/");
    let ca = pki.dir().join("ca.crt").to_string_lossy().into_owned();
    let tls = ["--url", url.as_str(), "--tls-ca", ca.as_str()];
    fn with<'a>(tls: &[&'a str], args: &[&'a str]) -> Vec<&'a str> {
        let mut all = vec![args[0]];
        all.extend_from_slice(tls);
        all.extend_from_slice(&args[1..]);
        all
    }
    let dir = TempDir::new();
    let script = format!("echo $REDLEASE_OWNER > {}", dir.file("owner"));
    run(with(&tls, &["run", "tls", "--", "sh", "-c", &script])).expect_code(0);
    assert!(std::fs::read_to_string(dir.path("owner")).expect("owner").contains(':'), "REDLEASE_OWNER read over TLS");
    let holder = start(command(with(&tls, &["run", "tls", "--", "sleep", "5"])));
    wait_for("held", Duration::from_secs(10), || key_exists(&mut server.conn(), "tls"));
    let out = run(with(&tls, &["status", "--json", "tls"]));
    out.expect_code(0);
    assert!(out.stdout.contains("\"held\":true"), "{out:#?}");
    run(with(&tls, &["unlock", "--force", "tls"])).expect_code(0);
    holder.finish(LIMIT).expect_code(LEASE_LOST);
    // Without the CA the server's certificate is not trusted.
    let out = run(["status", "--timeout", "2s", "--url", &url, "tls"]);
    assert_ne!(out.status.code(), Some(0), "{out:#?}");
    out.expect_one_line_error();
    // The whole chain, each cause once: what failed, then why.
    assert_eq!(out.stderr.matches("UnknownIssuer").count(), 1, "{out:#?}");
    assert!(out.stderr.contains("failed: invalid peer certificate: UnknownIssuer"), "{out:#?}");
}

#[test]
fn redis_sentinel_urls_find_the_master() {
    let group = SentinelGroup::start();
    let url = group.url();
    run(["run", "--url", &url, "sentinel", "--", "sh", "-c", "exit 4"]).expect_code(4);
    let holder = start(command(["run", "--url", &url, "sentinel", "--", "sleep", "5"]));
    let mut conn = group.master_conn();
    wait_for("held", Duration::from_secs(10), || key_exists(&mut conn, "sentinel"));
    let out = run(["status", "--json", "--url", &url, "sentinel"]);
    out.expect_code(0);
    assert!(out.stdout.contains("\"held\":true"), "{out:#?}");
    run(["unlock", "--force", "--url", &url, "sentinel"]).expect_code(0);
    holder.finish(LIMIT).expect_code(LEASE_LOST);
}
