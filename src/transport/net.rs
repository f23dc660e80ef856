//! The raw socket of the pub/sub connection: where to connect, how to authenticate, and the
//! two halves the subscriber uses (one thread reads, waiter threads write).
//!
//! Commands are encoded and replies parsed by the `redis` crate (`Cmd`, `Parser`); only the
//! socket is our own, so that one thread can block reading it while others write to it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

use crate::base::error::{Error, ErrorKind, Result};
use crate::transport::sentinel::Sentinels;
use crate::transport::tls::{Tls, TlsReader, TlsWriter};
use crate::transport::url;

/// Where the pub/sub connection goes, taken from the client's parsed URL.
#[derive(Clone)]
pub(crate) struct Target {
    addr: Addr,
    username: Option<String>,
    password: Option<String>,
}

#[derive(Clone)]
enum Addr {
    Tcp(String, u16),
    TcpTls(String, u16, Tls),
    #[cfg(unix)]
    Unix(PathBuf),
    /// The master the sentinels name, asked anew at every connect.
    Sentinel(Arc<Sentinels>),
}

/// A TCP or Unix stream, or one half of a TLS stream.
pub(crate) enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
    TlsReader(TlsReader),
    TlsWriter(TlsWriter),
}

/// An open, authenticated pub/sub connection.
pub(crate) struct Connection {
    /// The reading half, with the parser that has read from it (and may hold bytes of the
    /// next reply).
    pub(crate) reader: Stream,
    pub(crate) parser: redis::Parser,
    /// The writing half (a clone of the same socket); writes are bounded by the connect
    /// timeout.
    pub(crate) writer: Stream,
}

impl Target {
    /// The pub/sub connection's target for `info`; `tls` for a `rediss://` URL.
    // Without the `tls` feature a `Tls` cannot exist, and its arm cannot be reached.
    #[cfg_attr(not(feature = "tls"), allow(unreachable_code))]
    pub(crate) fn from_info(info: &redis::ConnectionInfo, tls: Option<&Tls>) -> Result<Target> {
        let addr = match (info.addr(), tls) {
            (redis::ConnectionAddr::Tcp(host, port), _) => Addr::Tcp(host.clone(), *port),
            (redis::ConnectionAddr::TcpTls { host, port, .. }, Some(tls)) => {
                Addr::TcpTls(host.clone(), *port, tls.clone())
            }
            #[cfg(unix)]
            (redis::ConnectionAddr::Unix(path), _) => Addr::Unix(path.clone()),
            (other, _) => {
                return Err(Error::invalid(format!(
                    "unsupported connection address {other}: use {}",
                    url::ACCEPTED_FORMS
                )));
            }
        };
        let settings = info.redis_settings();
        Ok(Target {
            addr,
            username: settings.username().map(str::to_owned),
            password: settings.password().map(str::to_owned),
        })
    }

    /// Whether the target is a TCP server spoken to without TLS (a `redis://` URL).
    pub(crate) fn is_plaintext_tcp(&self) -> bool {
        matches!(self.addr, Addr::Tcp(..))
    }

    /// Whether the target is a TCP server spoken to over TLS (a `rediss://` URL).
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self.addr, Addr::TcpTls(..))
    }

    /// The pub/sub connection's target behind `sentinels`.
    pub(crate) fn sentinel(sentinels: Arc<Sentinels>) -> Target {
        let (username, password) = sentinels.login();
        Target { addr: Addr::Sentinel(sentinels), username, password }
    }

    /// Connects and authenticates, each step bounded by `timeout`.
    pub(crate) fn connect(&self, timeout: Duration) -> Result<Connection> {
        let stream = self.open(timeout).map_err(|e| io_error(e, "connecting the pub/sub connection", timeout))?;
        let io = |e| io_error(e, "authenticating the pub/sub connection", timeout);
        let (mut reader, mut writer) = self
            .split(stream, timeout)
            .map_err(|e| io_error(e, "setting up the pub/sub connection (timeouts, TLS handshake)", timeout))?;
        let mut parser = redis::Parser::new();
        if let Some(password) = &self.password {
            let mut auth = redis::cmd("AUTH");
            if let Some(user) = &self.username {
                auth.arg(user);
            }
            auth.arg(password);
            writer.write_all(&auth.get_packed_command()).map_err(io)?;
            match parser.parse_value(&mut reader) {
                Ok(redis::Value::ServerError(refusal)) => {
                    let refusal = redis::RedisError::from(refusal);
                    return Err(Error::new(
                        ErrorKind::Redis,
                        format!("the pub/sub connection was refused: {}", refusal.detail().unwrap_or("")),
                    )
                    .connection());
                }
                Ok(_) => {}
                Err(err) if err.is_timeout() => return Err(io(io::ErrorKind::TimedOut.into())),
                Err(err) => {
                    return Err(Error::from_redis(err, "authenticating the pub/sub connection", timeout).connection());
                }
            }
        }
        Ok(Connection { reader, parser, writer })
    }

    /// Sets the timeouts on `stream`, makes the TLS handshake over it when the target
    /// speaks TLS, and splits it in a reading and a writing half.
    fn split(&self, stream: Stream, timeout: Duration) -> io::Result<(Stream, Stream)> {
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        match (&self.addr, stream) {
            (Addr::TcpTls(host, _, tls), Stream::Tcp(tcp)) => {
                let (reader, writer) = tls.connect(host, tcp)?;
                Ok((Stream::TlsReader(reader), Stream::TlsWriter(writer)))
            }
            (_, stream) => {
                let writer = stream.try_clone()?;
                Ok((stream, writer))
            }
        }
    }

    fn open(&self, timeout: Duration) -> io::Result<Stream> {
        match &self.addr {
            Addr::Tcp(host, port) | Addr::TcpTls(host, port, _) => {
                let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host} resolves to no address"));
                for addr in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&addr, timeout) {
                        Ok(stream) => {
                            stream.set_nodelay(true)?;
                            return Ok(Stream::Tcp(stream));
                        }
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
            #[cfg(unix)]
            Addr::Unix(path) => UnixStream::connect(path).map(Stream::Unix),
            Addr::Sentinel(sentinels) => {
                // A reconnect may follow a failover: ask the sentinels anew.
                sentinels.forget_master();
                let (host, port) = sentinels
                    .master(timeout)
                    .map_err(|e| io::Error::new(io::ErrorKind::NotConnected, e.to_string()))?;
                let stream = TcpStream::connect_timeout(
                    &(host.as_str(), port).to_socket_addrs()?.next().ok_or_else(|| {
                        io::Error::new(io::ErrorKind::NotFound, format!("{host} resolves to no address"))
                    })?,
                    timeout,
                );
                if stream.is_err() {
                    sentinels.forget_master();
                }
                let stream = stream?;
                stream.set_nodelay(true)?;
                Ok(Stream::Tcp(stream))
            }
        }
    }
}

fn io_error(err: io::Error, what: &str, timeout: Duration) -> Error {
    let timed_out = matches!(err.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock);
    let error = if timed_out {
        Error::new(ErrorKind::Timeout, format!("no answer within the connect timeout ({timeout:?}) while {what}"))
    } else {
        Error::new(ErrorKind::Redis, format!("{what}: {err}"))
    };
    error.connection()
}

impl Stream {
    fn try_clone(&self) -> io::Result<Stream> {
        match self {
            Stream::Tcp(s) => s.try_clone().map(Stream::Tcp),
            #[cfg(unix)]
            Stream::Unix(s) => s.try_clone().map(Stream::Unix),
            Stream::TlsReader(_) | Stream::TlsWriter(_) => {
                Err(io::Error::new(io::ErrorKind::Unsupported, "a TLS half cannot be cloned"))
            }
        }
    }

    /// How long a read may block; `None` blocks until data comes, however long.
    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(timeout),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(timeout),
            Stream::TlsReader(s) => s.socket().set_read_timeout(timeout),
            Stream::TlsWriter(s) => s.socket().set_read_timeout(timeout),
        }
    }

    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(timeout),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_write_timeout(timeout),
            Stream::TlsReader(s) => s.socket().set_write_timeout(timeout),
            Stream::TlsWriter(s) => s.socket().set_write_timeout(timeout),
        }
    }

    /// Closes both directions, which also ends a blocked read on the other half.
    pub(crate) fn close(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            #[cfg(unix)]
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::TlsReader(s) => s.socket().shutdown(Shutdown::Both),
            Stream::TlsWriter(s) => s.socket().shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
            Stream::TlsReader(s) => s.read(buf),
            Stream::TlsWriter(_) => Err(io::Error::new(io::ErrorKind::Unsupported, "the writing half of TLS")),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.write(buf),
            Stream::TlsWriter(s) => s.write(buf),
            Stream::TlsReader(_) => Err(io::Error::new(io::ErrorKind::Unsupported, "the reading half of TLS")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            #[cfg(unix)]
            Stream::Unix(s) => s.flush(),
            Stream::TlsWriter(s) => s.flush(),
            Stream::TlsReader(_) => Ok(()),
        }
    }
}
