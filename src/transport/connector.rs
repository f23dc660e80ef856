//! Where a pool's new connections go: one server, or the master the sentinels name; and
//! the other servers of the same deployment (a master's replicas), logged in alike.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::transport::sentinel::Sentinels;

/// Where new connections go.
pub(crate) enum Connector {
    /// One server.
    Direct(Box<redis::Client>),
    /// The master the sentinels name.
    Sentinel(Arc<Sentinels>),
}

impl Connector {
    /// Opens a connection within `timeout`. Behind sentinels, also says which master it
    /// went to.
    pub(super) fn connect(&self, timeout: Duration) -> redis::RedisResult<(redis::Connection, Option<(String, u16)>)> {
        match self {
            Connector::Direct(client) => client.get_connection_with_timeout(timeout).map(|conn| (conn, None)),
            Connector::Sentinel(sentinels) => {
                let started = Instant::now();
                let (host, port) = sentinels.master(timeout).map_err(|e| {
                    redis::RedisError::from(std::io::Error::new(std::io::ErrorKind::NotConnected, format!("{e:#}")))
                })?;
                let remaining = timeout.saturating_sub(started.elapsed()).max(Duration::from_millis(1));
                let connected = sentinels
                    .node_info(host.clone(), port)
                    .and_then(redis::Client::open)
                    .and_then(|client| client.get_connection_with_timeout(remaining));
                if connected.is_err() {
                    // The master may have moved: ask the sentinels again next time.
                    sentinels.forget_master();
                }
                connected.map(|conn| (conn, Some((host, port))))
            }
        }
    }

    /// Opens a connection, within `timeout`, to another server of the same deployment at
    /// `host:port` (a replica its master lists), logging in as this connector does. A
    /// server reached over a Unix socket has no such siblings: an error.
    pub(super) fn connect_to_node(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> redis::RedisResult<redis::Connection> {
        let info = match self {
            Connector::Direct(client) => {
                let info = client.get_connection_info().clone();
                let addr = match info.addr().clone() {
                    redis::ConnectionAddr::Tcp(..) => redis::ConnectionAddr::Tcp(host.to_owned(), port),
                    redis::ConnectionAddr::TcpTls { insecure, tls_params, .. } => {
                        redis::ConnectionAddr::TcpTls { host: host.to_owned(), port, insecure, tls_params }
                    }
                    _ => {
                        return Err(redis::RedisError::from((
                            redis::ErrorKind::InvalidClientConfig,
                            "a server reached over a Unix socket names no other server to connect to",
                        )));
                    }
                };
                info.set_addr(addr)
            }
            Connector::Sentinel(sentinels) => sentinels.node_info(host.to_owned(), port)?,
        };
        redis::Client::open(info)?.get_connection_with_timeout(timeout)
    }

    /// Where it connects, for messages: `host:port` (or a socket's path), or the
    /// sentinels' master's name.
    pub(super) fn describe(&self) -> String {
        match self {
            Connector::Direct(client) => client.get_connection_info().addr().to_string(),
            Connector::Sentinel(sentinels) => sentinels.describe(),
        }
    }

    /// The ACL user the connections log in as (`default` when the URL names none).
    pub(super) fn user(&self) -> String {
        let named = match self {
            Connector::Direct(client) => client.get_connection_info().redis_settings().username().map(str::to_owned),
            Connector::Sentinel(sentinels) => sentinels.login().0,
        };
        named.unwrap_or_else(|| "default".to_owned())
    }

    /// A server answered as a replica: the master has moved.
    pub(super) fn master_moved(&self) {
        if let Connector::Sentinel(sentinels) = self {
            sentinels.forget_master();
        }
    }
}
