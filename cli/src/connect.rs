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
        builder.build().map_err(|e| {
            if e.kind() == ErrorKind::InvalidInput {
                Failure::new(exit::USAGE, exit::describe(&e))
            } else {
                Failure::from_lock_error(&format!("cannot use Redis at {}", redlease::redact_url(&self.url)), &e)
            }
        })
    }
}

fn read_file(option: &str, path: &Path) -> Result<Vec<u8>, Failure> {
    fs::read(path).map_err(|e| Failure::usage(format!("cannot read {option} {}: {e}", path.display())))
}
