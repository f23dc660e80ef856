//! Reaching Redis: the library's `Client`, built from the `--url`, `--timeout` and
//! `--tls-*` options, for taking and releasing locks and, through
//! `Client::with_connection`, for reading a lock's state (`status`, the waiting line,
//! the semaphore's number of permits). The URL is read by the library alone, whatever its
//! form, and shown without its password by `redlease::redact_url`.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use redlease::{Client, ErrorKind, LockEvents};

use crate::args::Connection;
use crate::exit::{self, Failure};

/// The connection options, checked and with the certificate files read.
#[derive(Clone)]
pub struct Settings {
    url: String,
    connect_timeout: Duration,
    command_timeout: Duration,
    tls_ca: Option<Vec<u8>>,
    tls_client: Option<(Vec<u8>, Vec<u8>)>,
    tls_insecure: bool,
}

impl Settings {
    pub fn from_args(args: &Connection) -> Result<Settings, Failure> {
        if args.timeout.is_some_and(|t| t.is_zero()) {
            return Err(Failure::usage("--timeout must be longer than 0"));
        }
        let tls_client = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some((read_file("--tls-cert", cert)?, read_file("--tls-key", key)?)),
            _ => None,
        };
        Ok(Settings {
            url: args.url.clone(),
            connect_timeout: args.timeout.unwrap_or(redlease::DEFAULT_CONNECT_TIMEOUT),
            command_timeout: args.timeout.unwrap_or(redlease::DEFAULT_COMMAND_TIMEOUT),
            tls_ca: args.tls_ca.as_deref().map(|p| read_file("--tls-ca", p)).transpose()?,
            tls_client,
            tls_insecure: args.tls_insecure,
        })
    }

    /// The library's client with these settings. A URL or a value the library refuses is
    /// bad input (64), refused before anything is sent; its message names the URL without
    /// the password already.
    pub fn client(&self, watchdog: Option<Duration>, events: Option<Arc<dyn LockEvents>>) -> Result<Client, Failure> {
        let mut builder = Client::builder(self.url.clone())
            .connect_timeout(self.connect_timeout)
            .command_timeout(self.command_timeout);
        if let Some(watchdog) = watchdog {
            builder = builder.watchdog_timeout(watchdog);
        }
        if let Some(ca) = &self.tls_ca {
            builder = builder.tls_root_certificates(ca.clone());
        }
        if let Some((chain, key)) = &self.tls_client {
            builder = builder.tls_client_certificate(chain.clone(), key.clone());
        }
        if self.tls_insecure {
            builder = builder.danger_accept_invalid_certificates(true);
        }
        if let Some(events) = events {
            builder = builder.events(events);
        }
        builder.build().map_err(|e| self.build_failure(&e))
    }

    /// Why the client could not be built, said for a person at a shell.
    fn build_failure(&self, e: &redlease::Error) -> Failure {
        if e.kind() == ErrorKind::InvalidInput {
            return Failure::new(exit::USAGE, exit::describe(e));
        }
        let at = format!("cannot use Redis at {}", redlease::redact_url(&self.url));
        if let Some(reason) = exit::refused_database(e) {
            // The URL's database is not one the server has: bad input, which no retry
            // mends (its SELECT failed in the handshake, before any command).
            let database =
                database_of(&self.url).map_or_else(|| "the URL's database".to_owned(), |db| format!("database {db}"));
            let hint = if reason.contains("out of range") {
                ": it has fewer databases (its `databases` setting: 16 by default, 0 to 15)"
            } else {
                ""
            };
            return Failure::usage(format!("{at}: the server refused {database} ({reason}){hint}"));
        }
        if exit::is_not_redis(e) {
            return Failure::new(
                exit::UNAVAILABLE,
                format!(
                    "{at}: the server at that address does not speak Redis (its answer is not RESP): \
                     not a Redis server, or not its port"
                ),
            );
        }
        if e.is_timeout() {
            // The library names the timeout that fired; both are --timeout's.
            return Failure::new(exit::UNAVAILABLE, format!("{at}: {} (--timeout sets it)", exit::describe(e)));
        }
        Failure::from_lock_error(&at, e)
    }
}

/// The database a URL names: `/N` after the address, or `?db=N` (`unix://`); `None`
/// when it names none (database 0) or cannot be read.
fn database_of(url: &str) -> Option<i64> {
    let (scheme, rest) = url.split_once("://")?;
    let rest = rest.split('#').next().unwrap_or(rest);
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    if let Some(db) = query.split('&').find_map(|pair| pair.strip_prefix("db=")) {
        return db.parse().ok();
    }
    if scheme.contains("unix") {
        return None;
    }
    let address_and_path = rest.rsplit_once('@').map_or(rest, |(_, after)| after);
    let (_, path) = address_and_path.split_once('/')?;
    path.trim_end_matches('/').parse().ok()
}

fn read_file(option: &str, path: &Path) -> Result<Vec<u8>, Failure> {
    fs::read(path).map_err(|e| Failure::usage(format!("cannot read {option} {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_of_a_url() {
        assert_eq!(database_of("redis://127.0.0.1:6379/99"), Some(99));
        assert_eq!(database_of("redis://u:p/w@host/3"), Some(3));
        assert_eq!(database_of("rediss://host:6380/7?protocol=resp2"), Some(7));
        assert_eq!(database_of("redis-sentinel://a:26379,b:26379/5#mymaster"), Some(5));
        assert_eq!(database_of("unix:///run/redis.sock?db=4"), Some(4));
        assert_eq!(database_of("unix:///run/redis/9"), None);
        assert_eq!(database_of("redis://host:6379/"), None);
        assert_eq!(database_of("redis://host"), None);
    }
}
