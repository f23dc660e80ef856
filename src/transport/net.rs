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

use crate::error::{Error, ErrorKind, Result};

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
    #[cfg(unix)]
    Unix(PathBuf),
}

/// A TCP or Unix stream.
pub(crate) enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
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
    pub(crate) fn from_info(info: &redis::ConnectionInfo) -> Result<Target> {
        let addr = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => Addr::Tcp(host.clone(), *port),
            #[cfg(unix)]
            redis::ConnectionAddr::Unix(path) => Addr::Unix(path.clone()),
            other => {
                return Err(Error::invalid(format!("unsupported connection address {other}: use redis:// or unix://")));
            }
        };
        let settings = info.redis_settings();
        Ok(Target {
            addr,
            username: settings.username().map(str::to_owned),
            password: settings.password().map(str::to_owned),
        })
    }

    /// Connects and authenticates, each step bounded by `timeout`.
    pub(crate) fn connect(&self, timeout: Duration) -> Result<Connection> {
        let stream = self.open(timeout).map_err(|e| io_error(e, "connecting the pub/sub connection", timeout))?;
        let io = |e| io_error(e, "authenticating the pub/sub connection", timeout);
        stream.set_read_timeout(Some(timeout)).and_then(|()| stream.set_write_timeout(Some(timeout))).map_err(io)?;
        let mut writer = stream.try_clone().map_err(io)?;
        let mut reader = stream;
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

    fn open(&self, timeout: Duration) -> io::Result<Stream> {
        match &self.addr {
            Addr::Tcp(host, port) => {
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
        }
    }

    /// How long a read may block; `None` blocks until data comes, however long.
    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(timeout),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(timeout),
        }
    }

    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(timeout),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_write_timeout(timeout),
        }
    }

    /// Closes both directions, which also ends a blocked read on a clone of the socket.
    pub(crate) fn close(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            #[cfg(unix)]
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            #[cfg(unix)]
            Stream::Unix(s) => s.flush(),
        }
    }
}
