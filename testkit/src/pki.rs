//! `Pki`: certificates made for one test (a CA, a server certificate for 127.0.0.1, a
//! client certificate, the same client as an X.509 v1 certificate, an expired server
//! certificate and a second, unrelated CA), written as PEM files into a directory of their
//! own that is removed on drop; and the arguments that start a `redis-server` with TLS on a
//! port of its own beside its plaintext one.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SigningKey, date_time_ymd,
};

use crate::server::{RedisServer, free_port};

static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// The certificates of one test, as PEM files and as bytes.
pub struct Pki {
    dir: PathBuf,
    /// The CA that signed the server and client certificates.
    pub ca: String,
    /// A CA that signed nothing here: trusting it alone must fail.
    pub other_ca: String,
    pub server_cert: String,
    pub server_key: String,
    /// A server certificate whose validity ended in 2021.
    pub expired_cert: String,
    pub expired_key: String,
    pub client_cert: String,
    pub client_key: String,
    /// A client certificate signed by the CA as `openssl x509 -req` makes one without
    /// `-extfile`: X.509 version 1, no extensions (rustls cannot use it).
    pub v1_client_cert: String,
    pub v1_client_key: String,
}

/// How a TLS server should present itself.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ServerCert {
    Valid,
    Expired,
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("CA certificate")
}

/// A certificate signed by `issuer`: (certificate PEM, key PEM).
fn leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    name: &str,
    usage: ExtendedKeyUsagePurpose,
    expired: bool,
) -> (String, String) {
    let names = if usage == ExtendedKeyUsagePurpose::ServerAuth {
        vec!["127.0.0.1".to_owned(), "localhost".to_owned()]
    } else {
        vec![]
    };
    let mut params = CertificateParams::new(names).expect("leaf params");
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![usage];
    if expired {
        params.not_before = date_time_ymd(2020, 1, 1);
        params.not_after = date_time_ymd(2021, 1, 1);
    }
    let key = KeyPair::generate().expect("leaf key");
    let cert = params.signed_by(&key, issuer).expect("leaf certificate");
    (cert.pem(), key.serialize_pem())
}

/// A client certificate signed by `issuer` as X.509 version 1 (what `openssl x509 -req`
/// makes without `-extfile`): (certificate PEM, key PEM). rcgen writes version 3 only, so
/// this takes its certificate apart, drops the version field and the extensions, and signs
/// what is left again with the issuer's key.
fn v1_leaf(issuer: &CertifiedIssuer<'static, KeyPair>, name: &str) -> (String, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf params");
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().expect("leaf key");
    let v3 = params.signed_by(&key, issuer).expect("leaf certificate");
    // Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }
    let (_, certificate, _) = der::element(v3.der());
    let (_, tbs, rest) = der::element(der::contents(certificate));
    let (_, algorithm, _) = der::element(rest);
    // TBSCertificate ::= SEQUENCE { [0] version, serialNumber, signature, issuer,
    // validity, subject, subjectPublicKeyInfo, [3] extensions } (v1: no [0], no [3]).
    let mut fields = der::contents(tbs);
    let mut kept = Vec::new();
    while !fields.is_empty() {
        let (tag, field, rest) = der::element(fields);
        if tag != der::VERSION && tag != der::EXTENSIONS {
            kept.extend_from_slice(field);
        }
        fields = rest;
    }
    let tbs = der::encode(der::SEQUENCE, &kept);
    let mut signature = vec![0]; // a BIT STRING's count of unused bits
    signature.extend(issuer.key().sign(&tbs).expect("the CA signs"));
    let body = [tbs, algorithm.to_vec(), der::encode(der::BIT_STRING, &signature)].concat();
    (der::pem("CERTIFICATE", &der::encode(der::SEQUENCE, &body)), key.serialize_pem())
}

/// Just enough DER to take a certificate apart and put it together again.
mod der {
    pub const SEQUENCE: u8 = 0x30;
    pub const BIT_STRING: u8 = 0x03;
    /// `[0] EXPLICIT Version` of a TBSCertificate.
    pub const VERSION: u8 = 0xa0;
    /// `[3] EXPLICIT Extensions` of a TBSCertificate.
    pub const EXTENSIONS: u8 = 0xa3;

    /// The first element of `der`: its tag, the whole element, and what follows it.
    pub fn element(der: &[u8]) -> (u8, &[u8], &[u8]) {
        let (header, len) = match der[1] {
            short @ 0..=0x7f => (2, usize::from(short)),
            long => {
                let count = usize::from(long & 0x7f);
                let len = der[2..2 + count].iter().fold(0, |len, &byte| (len << 8) | usize::from(byte));
                (2 + count, len)
            }
        };
        let (element, rest) = der.split_at(header + len);
        (der[0], element, rest)
    }

    /// The contents of an element, without its tag and length.
    pub fn contents(element: &[u8]) -> &[u8] {
        let header = if element[1] < 0x80 { 2 } else { 2 + usize::from(element[1] & 0x7f) };
        &element[header..]
    }

    pub fn encode(tag: u8, contents: &[u8]) -> Vec<u8> {
        let len = contents.len();
        let mut out = vec![tag];
        if len < 0x80 {
            out.push(len as u8);
        } else {
            let bytes: Vec<u8> = len.to_be_bytes().into_iter().skip_while(|&b| b == 0).collect();
            out.push(0x80 | bytes.len() as u8);
            out.extend(bytes);
        }
        out.extend_from_slice(contents);
        out
    }

    /// `der` as a PEM block labelled `label`.
    pub fn pem(label: &str, der: &[u8]) -> String {
        const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut base64 = String::new();
        for chunk in der.chunks(3) {
            let bits = chunk.iter().enumerate().fold(0u32, |bits, (i, &b)| bits | u32::from(b) << (16 - 8 * i));
            for i in 0..4 {
                base64.push(if i <= chunk.len() {
                    char::from(ALPHABET[(bits >> (18 - 6 * i) & 0x3f) as usize])
                } else {
                    '='
                });
            }
        }
        let mut out = format!("-----BEGIN {label}-----\n");
        for line in base64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            out.push('\n');
        }
        out.push_str(&format!("-----END {label}-----\n"));
        out
    }
}

impl Pki {
    /// Makes every certificate and writes them to a new directory.
    pub fn new() -> Pki {
        let dir = std::env::temp_dir().join(format!(
            "redlease-test-pki-{}-{}",
            std::process::id(),
            DIR_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let root = ca("redlease test CA");
        let other = ca("redlease unrelated CA");
        let (server_cert, server_key) = leaf(&root, "redis server", ExtendedKeyUsagePurpose::ServerAuth, false);
        let (expired_cert, expired_key) = leaf(&root, "expired server", ExtendedKeyUsagePurpose::ServerAuth, true);
        let (client_cert, client_key) = leaf(&root, "redlease client", ExtendedKeyUsagePurpose::ClientAuth, false);
        let (v1_client_cert, v1_client_key) = v1_leaf(&root, "redlease v1 client");
        let pki = Pki {
            dir,
            ca: root.pem(),
            other_ca: other.pem(),
            server_cert,
            server_key,
            expired_cert,
            expired_key,
            client_cert,
            client_key,
            v1_client_cert,
            v1_client_key,
        };
        for (file, pem) in [
            ("ca.crt", &pki.ca),
            ("server.crt", &pki.server_cert),
            ("server.key", &pki.server_key),
            ("expired.crt", &pki.expired_cert),
            ("expired.key", &pki.expired_key),
            ("client.crt", &pki.client_cert),
            ("client.key", &pki.client_key),
            ("v1-client.crt", &pki.v1_client_cert),
            ("v1-client.key", &pki.v1_client_key),
        ] {
            fs::write(pki.dir.join(file), pem).unwrap_or_else(|e| panic!("cannot write {file}: {e}"));
        }
        pki
    }

    /// The directory holding the PEM files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts a `redis-server` that also listens with TLS on a port of its own, presenting
    /// `cert`, and that requires a client certificate signed by the CA when
    /// `require_client_certificate`. Returns the server and its TLS port.
    pub fn start_server(&self, cert: ServerCert, require_client_certificate: bool) -> (RedisServer, u16) {
        let tls_port = free_port().to_string();
        let (cert_file, key_file) = match cert {
            ServerCert::Valid => ("server.crt", "server.key"),
            ServerCert::Expired => ("expired.crt", "expired.key"),
        };
        let path = |file: &str| self.dir.join(file).to_string_lossy().into_owned();
        let (cert_file, key_file, ca_file) = (path(cert_file), path(key_file), path("ca.crt"));
        let server = RedisServer::start_with(&[
            "--tls-port",
            &tls_port,
            "--tls-cert-file",
            &cert_file,
            "--tls-key-file",
            &key_file,
            "--tls-ca-cert-file",
            &ca_file,
            "--tls-auth-clients",
            if require_client_certificate { "yes" } else { "no" },
        ]);
        (server, tls_port.parse().expect("port"))
    }
}

impl Default for Pki {
    fn default() -> Pki {
        Pki::new()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}
