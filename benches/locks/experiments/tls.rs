//! Step 7, TLS: on one `redis-server` listening both plain and with TLS, the limit (two
//! trivial `EVALSHA`s) over each, and the uncontended pair over TLS, interleaved.

use std::fmt::Write as _;
use std::time::Duration;

use redlease::Client;
use redlease_testkit::pki::{Pki, ServerCert};
use redlease_testkit::server::RedisServer;

use crate::experiments::limit::{trivial_call, trivial_pair};
use crate::experiments::uncontended::library_pair;
use crate::placement::Placement;
use crate::plan::Plan;
use crate::stats::{PairOp, PairStats, measure_pairs};

pub(crate) struct TlsRun {
    /// Two trivial `EVALSHA`s on a plain connection to the TLS server's plain port.
    pub(crate) plain_limit: PairStats,
    /// The same over TLS.
    pub(crate) tls_limit: PairStats,
    /// `try_lock()` + `unlock()` of a client on the `rediss://` URL.
    pub(crate) tls_pair: PairStats,
}

pub(crate) fn measure_tls(placement: &Placement, plan: &Plan) -> TlsRun {
    let pki = Pki::new();
    let (server, tls_port): (RedisServer, u16) = pki.start_server(ServerCert::Valid, false);
    placement.pin_server(&server);
    let url = format!("rediss://127.0.0.1:{tls_port}/");
    let certificates = redis::TlsCertificates { client_tls: None, root_cert: Some(pki.ca.clone().into_bytes()) };
    let mut tls_conn = redis::Client::build_with_tls(url.as_str(), certificates)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
        .expect("a TLS connection");
    let mut plain_conn = server.conn();
    let (plain_call, tls_call) = (trivial_call(&mut plain_conn), trivial_call(&mut tls_conn));
    let client = Client::builder(url.as_str()).tls_root_certificates(pki.ca.clone()).build().expect("TLS client");
    let lock = client.lock("bench:tls").into();
    let mut ops: Vec<PairOp> = vec![
        trivial_pair(&plain_call, &mut plain_conn),
        trivial_pair(&tls_call, &mut tls_conn),
        Box::new(|| library_pair(&lock)),
    ];
    let stats = measure_pairs(&mut ops, plan.warmup, plan.pairs / 2, None);
    drop(ops);
    let mut each = stats.into_iter();
    let mut next = || each.next().expect("one result per op");
    TlsRun { plain_limit: next(), tls_limit: next(), tls_pair: next() }
}

/// Step 7's section.
pub(crate) fn tls_section(out: &mut String, t: &TlsRun) {
    let _ = writeln!(
        out,
        "### 7. TLS: one `redis-server` with a plain and a TLS port (rustls client, ECDSA P-256 certificate), interleaved blocks\n"
    );
    let _ = writeln!(out, "| pair | n | mean µs | p50 µs | p99 µs | mean / plain limit pair | mean / TLS limit pair |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    let plain = t.plain_limit.pair.mean;
    let tls = t.tls_limit.pair.mean;
    for (what, stats) in [
        ("two trivial `EVALSHA`s, plain (the plain limit pair)", &t.plain_limit),
        ("two trivial `EVALSHA`s over TLS (the TLS limit pair)", &t.tls_limit),
        ("**`try_lock()` + `unlock()` over TLS**", &t.tls_pair),
    ] {
        let s = &stats.pair;
        let _ = writeln!(
            out,
            "| {what} | {} | {:.1} | {:.1} | {:.1} | {:.3} | {:.3} |",
            s.n,
            s.mean,
            s.p50,
            s.p99,
            s.mean / plain,
            s.mean / tls
        );
    }
    let _ = writeln!(out);
}
