//! TLS for every connection: the settings checked when the client is built, the `redis`
//! crate's TLS for the command pool, and a rustls connection for the pub/sub socket (same
//! library, same trust), split so that one thread reads while others write.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use parking_lot::Mutex;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::base::error::{Error, Result};
use crate::support::config::TlsSettings;

/// The TLS a client speaks: its settings for the `redis` crate, and the rustls
/// configuration of its pub/sub connection.
#[derive(Clone)]
pub(crate) struct Tls {
    settings: TlsSettings,
    config: Arc<ClientConfig>,
}

impl Tls {
    /// Checks `settings` (every PEM parses; the system's roots load when no root is given)
    /// and builds the rustls configuration: `InvalidInput` before anything is sent.
    pub(crate) fn new(settings: &TlsSettings) -> Result<Tls> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::invalid(format!("TLS: {e}")))?;
        let builder = if settings.accept_invalid_certificates {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
        } else {
            builder.with_root_certificates(roots(settings.root_certificates.as_deref())?)
        };
        let config = match &settings.client_certificate {
            Some((chain, key)) => {
                let chain = certificates(chain, "client certificate")?;
                let key = PrivateKeyDer::from_pem_slice(key)
                    .map_err(|e| Error::invalid(format!("TLS: the client's private key does not parse as PEM: {e}")))?;
                // rustls reads the certificate before it compares the keys: a version it
                // cannot read is no sign of a wrong key.
                let version = chain.first().and_then(|cert| x509_version(cert));
                builder.with_client_auth_cert(chain, key).map_err(|e| match version {
                    Some(version) if version != 3 => Error::invalid(format!(
                        "TLS: the client certificate is an X.509 v{version} certificate, which rustls cannot use \
                         (it reads v3 only: {e}); reissue it as v3, e.g. `openssl x509 -req -in client.csr \
                         -CA ca.crt -CAkey ca.key -out client.crt -days 365 -extfile client.ext` with client.ext \
                         holding `extendedKeyUsage = clientAuth` (with any extension, openssl makes v3)"
                    )),
                    _ => Error::invalid(format!("TLS: the client certificate and key do not go together: {e}")),
                })?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(Tls { settings: settings.clone(), config: Arc::new(config) })
    }

    /// The `redis` crate's command client for `info` (a `rediss://` URL) with these
    /// settings.
    pub(crate) fn redis_client(&self, info: redis::ConnectionInfo) -> Result<redis::Client> {
        let info = if self.settings.accept_invalid_certificates {
            match info.addr().clone() {
                redis::ConnectionAddr::TcpTls { host, port, .. } => {
                    info.set_addr(redis::ConnectionAddr::TcpTls { host, port, insecure: true, tls_params: None })
                }
                _ => info,
            }
        } else {
            info
        };
        let certificates = redis::TlsCertificates {
            client_tls: self
                .settings
                .client_certificate
                .as_ref()
                .map(|(chain, key)| redis::ClientTlsConfig { client_cert: chain.clone(), client_key: key.clone() }),
            root_cert: self.settings.root_certificates.clone(),
        };
        redis::Client::build_with_tls(info, certificates).map_err(|e| Error::invalid(format!("TLS: {e}")))
    }

    /// Opens TLS over `tcp` to `host`, the handshake bounded by the socket's timeouts, and
    /// splits it in a reading and a writing half.
    pub(crate) fn connect(&self, host: &str, mut tcp: TcpStream) -> io::Result<(TlsReader, TlsWriter)> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("not a TLS server name: {host}: {e}")))?;
        let mut conn = ClientConnection::new(Arc::clone(&self.config), name).map_err(io::Error::other)?;
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp)?;
        }
        let shared = Arc::new(Mutex::new(conn));
        let writer_tcp = tcp.try_clone()?;
        Ok((
            TlsReader { conn: Arc::clone(&shared), tcp, buf: vec![0; 16 * 1024] },
            TlsWriter { conn: shared, tcp: writer_tcp },
        ))
    }
}

/// Whether this build can serve `url` with `settings`: it can, TLS being compiled in (see
/// `transport::no_tls` for the build without it).
pub(crate) fn check_available(_url: &str, _settings: &TlsSettings) -> Result<()> {
    Ok(())
}

/// The system's roots, or the given PEM certificates instead.
fn roots(pem: Option<&[u8]>) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match pem {
        Some(pem) => {
            for cert in certificates(pem, "root certificate")? {
                store.add(cert).map_err(|e| {
                    Error::invalid(format!("TLS: a root certificate is not a usable trust anchor: {e}"))
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _unusable) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(Error::invalid(format!(
                    "TLS: no root certificate given and none found on this system ({} errors); give the server's CA with tls_root_certificates",
                    found.errors.len()
                )));
            }
        }
    }
    Ok(store)
}

/// Every certificate of a PEM bundle: at least one.
fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::invalid(format!("TLS: the {what} does not parse as PEM: {e}")))?;
    if certs.is_empty() {
        return Err(Error::invalid(format!("TLS: the {what} PEM holds no certificate")));
    }
    Ok(certs)
}

/// The X.509 version of a DER certificate (1, 2 or 3: a v1 certificate has no version
/// field), or `None` when it does not read as one.
fn x509_version(der: &[u8]) -> Option<u8> {
    const SEQUENCE: u8 = 0x30;
    const VERSION: u8 = 0xa0; // [0] EXPLICIT Version DEFAULT v1
    const INTEGER: u8 = 0x02;
    let (certificate, _) = der_element(der, SEQUENCE)?;
    let (tbs, _) = der_element(certificate, SEQUENCE)?;
    if tbs.first() != Some(&VERSION) {
        return Some(1);
    }
    let (version, _) = der_element(tbs, VERSION)?;
    match der_element(version, INTEGER)? {
        (&[v @ 0..=2], _) => Some(v + 1),
        _ => None,
    }
}

/// The contents of the DER element with tag `tag` at the start of `der`, and what follows
/// it; `None` when it is not there or runs past the end.
fn der_element(der: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&first, rest) = der.split_first()?;
    if first != tag {
        return None;
    }
    let (&len, rest) = rest.split_first()?;
    let (len, rest) = if len < 0x80 {
        (usize::from(len), rest)
    } else {
        let (bytes, rest) = rest.split_at_checked(usize::from(len & 0x7f))?;
        if bytes.is_empty() || bytes.len() > size_of::<usize>() {
            return None;
        }
        (bytes.iter().fold(0, |len, &byte| (len << 8) | usize::from(byte)), rest)
    };
    rest.split_at_checked(len)
}

/// The reading half: reads raw bytes from its socket without any lock, then decrypts them
/// under the connection's mutex (a writer may write meanwhile).
pub(crate) struct TlsReader {
    conn: Arc<Mutex<ClientConnection>>,
    tcp: TcpStream,
    buf: Vec<u8>,
}

/// The writing half: encrypts and sends under the connection's mutex.
pub(crate) struct TlsWriter {
    conn: Arc<Mutex<ClientConnection>>,
    tcp: TcpStream,
}

impl TlsReader {
    pub(crate) fn socket(&self) -> &TcpStream {
        &self.tcp
    }
}

impl TlsWriter {
    pub(crate) fn socket(&self) -> &TcpStream {
        &self.tcp
    }
}

impl Read for TlsReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            {
                let mut conn = self.conn.lock();
                match conn.reader().read(out) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            // No plaintext yet: wait for the next record, with no lock held.
            let n = self.tcp.read(&mut self.buf)?;
            let mut conn = self.conn.lock();
            if n == 0 {
                // The peer closed the socket without a TLS close_notify.
                return Ok(0);
            }
            let mut bytes = &self.buf[..n];
            while !bytes.is_empty() {
                conn.read_tls(&mut bytes)?;
                conn.process_new_packets().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            }
            // Answer what the peer may have asked of the session (a key update).
            while conn.wants_write() {
                conn.write_tls(&mut &self.tcp)?;
            }
        }
    }
}

impl Write for TlsWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut conn = self.conn.lock();
        let n = conn.writer().write(bytes)?;
        while conn.wants_write() {
            conn.write_tls(&mut self.tcp)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut conn = self.conn.lock();
        while conn.wants_write() {
            conn.write_tls(&mut self.tcp)?;
        }
        Ok(())
    }
}

/// Accepts any server certificate (for `danger_accept_invalid_certificates`), while still
/// checking that the server holds the key of the certificate it shows.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The version of a certificate is read from its DER, a v1's from the field's absence;
    /// what does not read as a certificate has none, and nothing panics.
    #[test]
    fn x509_versions_are_read_from_the_der() {
        // SEQUENCE { SEQUENCE { [0] { INTEGER 2 }, INTEGER 1 } }: a v3 skeleton.
        assert_eq!(x509_version(&[0x30, 0x0a, 0x30, 0x08, 0xa0, 0x03, 0x02, 0x01, 0x02, 0x02, 0x01, 0x01]), Some(3));
        // SEQUENCE { SEQUENCE { INTEGER 1 } }: no version field, v1.
        assert_eq!(x509_version(&[0x30, 0x05, 0x30, 0x03, 0x02, 0x01, 0x01]), Some(1));
        // Long-form lengths.
        assert_eq!(x509_version(&[0x30, 0x81, 0x05, 0x30, 0x03, 0x02, 0x01, 0x01]), Some(1));
        for bad in [&[][..], &[0x30], &[0x30, 0x05, 0x30], &[0x30, 0x89, 1, 2, 3], &[0x02, 0x01, 0x01]] {
            assert_eq!(x509_version(bad), None, "{bad:?}");
        }
    }
}
