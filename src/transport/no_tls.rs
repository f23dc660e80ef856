//! TLS left out (the crate built without its `tls` feature): the same names as
//! `transport::tls`, so that the rest of the transport reads the same either way, and a
//! [`Tls`] that can never be made, so that nothing after it can run. A `rediss://` URL or
//! TLS settings are refused at `build()` with `InvalidInput` saying how to get TLS.

use std::io::{self, Read, Write};
use std::net::TcpStream;

use crate::base::error::{Error, Result};
use crate::support::config::TlsSettings;

/// Never made: without the `tls` feature there is no TLS to speak.
#[derive(Clone)]
pub(crate) enum Tls {}

/// The reading half of a TLS connection: never made.
pub(crate) enum TlsReader {}

/// The writing half of a TLS connection: never made.
pub(crate) enum TlsWriter {}

impl Tls {
    /// Refuses: TLS was left out of this build.
    pub(crate) fn new(_settings: &TlsSettings) -> Result<Tls> {
        Err(not_compiled_in())
    }

    pub(crate) fn redis_client(&self, _info: redis::ConnectionInfo) -> Result<redis::Client> {
        match *self {}
    }

    pub(crate) fn connect(&self, _host: &str, _tcp: TcpStream) -> io::Result<(TlsReader, TlsWriter)> {
        match *self {}
    }
}

impl TlsReader {
    pub(crate) fn socket(&self) -> &TcpStream {
        match *self {}
    }
}

impl TlsWriter {
    pub(crate) fn socket(&self) -> &TcpStream {
        match *self {}
    }
}

impl Read for TlsReader {
    fn read(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        match *self {}
    }
}

impl Write for TlsWriter {
    fn write(&mut self, _buf: &[u8]) -> io::Result<usize> {
        match *self {}
    }

    fn flush(&mut self) -> io::Result<()> {
        match *self {}
    }
}

/// Whether this build can serve `url` with `settings`: not when either asks for TLS.
pub(crate) fn check_available(url: &str, settings: &TlsSettings) -> Result<()> {
    if url.starts_with("rediss://") || settings.is_set() {
        return Err(not_compiled_in());
    }
    Ok(())
}

/// What a TLS URL or TLS settings get from a build without TLS.
fn not_compiled_in() -> Error {
    Error::invalid(
        "TLS is not compiled in: this build of redlease leaves out its `tls` feature (enable it, as the default features do, for rediss:// and the TLS settings)",
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// A build without TLS refuses `rediss://` and TLS settings before anything is sent,
    /// saying how to get TLS.
    #[test]
    fn tls_is_refused_saying_the_feature_is_left_out() {
        for builder in [
            crate::Client::builder("rediss://127.0.0.1:1/"),
            crate::Client::builder("redis://127.0.0.1:1/").danger_accept_invalid_certificates(true),
        ] {
            let err = builder.connect_timeout(Duration::from_millis(100)).build().expect_err("no TLS in this build");
            assert!(err.is_invalid_input() && err.to_string().contains("`tls` feature"), "{err}");
        }
    }
}
