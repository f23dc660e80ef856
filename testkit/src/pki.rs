//! `Pki`: certificates made for one test (a CA, a server certificate for 127.0.0.1, a
//! client certificate, an expired server certificate and a second, unrelated CA), written
//! as PEM files into a directory of their own that is removed on drop; and the arguments
//! that start a `redis-server` with TLS on a port of its own beside its plaintext one.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, date_time_ymd,
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
        };
        for (file, pem) in [
            ("ca.crt", &pki.ca),
            ("server.crt", &pki.server_cert),
            ("server.key", &pki.server_key),
            ("expired.crt", &pki.expired_cert),
            ("expired.key", &pki.expired_key),
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
