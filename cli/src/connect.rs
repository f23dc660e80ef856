//! Reaching Redis: the library's `Client` for taking and releasing locks, and a raw
//! connection of this tool's own for reading a lock's state (`status`, the waiting line,
//! the owner field), both from the same `--url`, `--timeout` and `--tls-*` options.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use redis::IntoConnectionInfo;
use redlease::{Client, LockEvents};

use crate::args::Connection;
use crate::exit::{Failure, UNAVAILABLE};

/// The scheme of a Sentinel URL, as the library reads it.
const SENTINEL_SCHEME: &str = "redis-sentinel://";
/// The port a sentinel listens on when the URL names none.
const DEFAULT_SENTINEL_PORT: u16 = 26379;

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
        let settings = Settings {
            url: args.url.clone(),
            connect_timeout: args.timeout.unwrap_or(redlease::DEFAULT_CONNECT_TIMEOUT),
            command_timeout: args.timeout.unwrap_or(redlease::DEFAULT_COMMAND_TIMEOUT),
            tls_ca: args.tls_ca.as_deref().map(|p| read_file("--tls-ca", p)).transpose()?,
            tls_client,
            tls_insecure: args.tls_insecure,
        };
        settings.check_url()?;
        Ok(settings)
    }

    /// The URL with its password hidden.
    pub fn shown_url(&self) -> String {
        redact(&self.url)
    }

    /// Rejects a URL that does not parse before anything is sent (the library would too,
    /// with the same words; this way `status` and `run` say it alike).
    fn check_url(&self) -> Result<(), Failure> {
        if self.url.starts_with(SENTINEL_SCHEME) {
            Sentinels::parse(&self.url).map(drop)
        } else {
            self.url.as_str().into_connection_info().map(drop).map_err(|e| {
                let text = e.to_string();
                let reason = text.split(" - ").next().unwrap_or(&text).to_owned();
                Failure::usage(format!(
                    "invalid redis URL {}: {reason} (expected redis://[[user]:password@]host[:port][/db], rediss://..., unix:///path or redis-sentinel://host[:port][,host[:port]...][/db]#master-name)",
                    self.shown_url()
                ))
            })
        }
    }

    /// The library's client with these settings.
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
        builder.build().map_err(|e| Failure::from_lock_error(&format!("cannot use Redis at {}", self.shown_url()), &e))
    }

    /// A raw connection of this tool's own, every read and write bounded by the command
    /// timeout.
    pub fn raw(&self) -> Result<redis::Connection, Failure> {
        let what = || format!("cannot connect to Redis at {}", self.shown_url());
        let info = if self.url.starts_with(SENTINEL_SCHEME) {
            Sentinels::parse(&self.url)?.master_info(self.connect_timeout, self.command_timeout)?
        } else {
            self.url.as_str().into_connection_info().map_err(|e| Failure::from_redis(&what(), &e))?
        };
        // No CLIENT SETINFO handshake, as the library does: each handshake reply could take
        // a whole connect timeout.
        let info = info.clone().set_redis_settings(info.redis_settings().clone().set_skip_set_lib_name());
        let client = match info.addr().clone() {
            redis::ConnectionAddr::TcpTls { host, port, .. } => {
                let info = if self.tls_insecure {
                    info.set_addr(redis::ConnectionAddr::TcpTls { host, port, insecure: true, tls_params: None })
                } else {
                    info
                };
                let certificates = redis::TlsCertificates {
                    client_tls: self.tls_client.as_ref().map(|(chain, key)| redis::ClientTlsConfig {
                        client_cert: chain.clone(),
                        client_key: key.clone(),
                    }),
                    root_cert: self.tls_ca.clone(),
                };
                redis::Client::build_with_tls(info, certificates)
            }
            _ => redis::Client::open(info),
        }
        .map_err(|e| Failure::from_redis(&what(), &e))?;
        let conn =
            client.get_connection_with_timeout(self.connect_timeout).map_err(|e| Failure::from_redis(&what(), &e))?;
        conn.set_read_timeout(Some(self.command_timeout)).map_err(|e| Failure::from_redis(&what(), &e))?;
        conn.set_write_timeout(Some(self.command_timeout)).map_err(|e| Failure::from_redis(&what(), &e))?;
        Ok(conn)
    }
}

fn read_file(option: &str, path: &Path) -> Result<Vec<u8>, Failure> {
    fs::read(path).map_err(|e| Failure::usage(format!("cannot read {option} {}: {e}", path.display())))
}

/// The URL with its password replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else { return url.to_owned() };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else { return url.to_owned() };
    let Some((user, _password)) = rest[..at].split_once(':') else { return url.to_owned() };
    format!("{}://{user}:***@{}", &url[..scheme_end], &rest[at + 1..])
}

/// A `redis-sentinel://` URL, read as the library reads it (Lettuce's form).
struct Sentinels {
    sentinels: Vec<(String, u16)>,
    master_name: String,
    username: Option<String>,
    password: Option<String>,
    db: i64,
}

impl Sentinels {
    fn parse(url: &str) -> Result<Sentinels, Failure> {
        let bad = |why: &str| {
            Failure::usage(format!(
                "invalid Sentinel URL {}: {why} (expected redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master-name)",
                redact(url)
            ))
        };
        let rest = url.strip_prefix(SENTINEL_SCHEME).ok_or_else(|| bad("not a redis-sentinel:// URL"))?;
        let (rest, master_name) = rest.split_once('#').ok_or_else(|| bad("no #master-name"))?;
        if master_name.is_empty() {
            return Err(bad("the master name after # is empty"));
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (login, hosts) = match authority.rsplit_once('@') {
            Some((login, hosts)) => (Some(login), hosts),
            None => (None, authority),
        };
        let (username, password) = match login {
            Some(login) => match login.split_once(':') {
                Some((user, password)) => ((!user.is_empty()).then(|| user.to_owned()), Some(password.to_owned())),
                None => (Some(login.to_owned()), None),
            },
            None => (None, None),
        };
        let mut sentinels = Vec::new();
        for host in hosts.split(',') {
            let (name, port) = match host.rsplit_once(':') {
                Some((name, port)) => (name, port.parse().map_err(|_| bad("a port is not a number"))?),
                None => (host, DEFAULT_SENTINEL_PORT),
            };
            if name.is_empty() {
                return Err(bad("a sentinel address is empty"));
            }
            sentinels.push((name.to_owned(), port));
        }
        let db = match path.trim_end_matches('/') {
            "" => 0,
            db => db.parse().map_err(|_| bad("the database is not a number"))?,
        };
        Ok(Sentinels { sentinels, master_name: master_name.to_owned(), username, password, db })
    }

    /// The master's connection settings, from the first sentinel that names it.
    fn master_info(&self, connect: Duration, command: Duration) -> Result<redis::ConnectionInfo, Failure> {
        let mut failures = Vec::new();
        for (host, port) in &self.sentinels {
            match ask(host, *port, &self.master_name, connect, command) {
                Ok(Some((master, master_port))) => {
                    let mut settings = redis::RedisConnectionInfo::default().set_db(self.db);
                    if let Some(user) = &self.username {
                        settings = settings.set_username(user);
                    }
                    if let Some(password) = &self.password {
                        settings = settings.set_password(password);
                    }
                    let info = redis::ConnectionAddr::Tcp(master, master_port)
                        .into_connection_info()
                        .map_err(|e| Failure::from_redis("cannot use the master the sentinels named", &e))?;
                    return Ok(info.set_redis_settings(settings));
                }
                Ok(None) => failures.push(format!("{host}:{port} does not know master {:?}", self.master_name)),
                Err(err) => failures.push(format!("{host}:{port}: {err}")),
            }
        }
        Err(Failure::new(
            UNAVAILABLE,
            format!("no sentinel named the master {:?}: {}", self.master_name, failures.join("; ")),
        ))
    }
}

fn ask(
    host: &str,
    port: u16,
    master: &str,
    connect: Duration,
    command: Duration,
) -> redis::RedisResult<Option<(String, u16)>> {
    let info = redis::ConnectionAddr::Tcp(host.to_owned(), port).into_connection_info()?;
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    let client = redis::Client::open(info.set_redis_settings(settings))?;
    let mut conn = client.get_connection_with_timeout(connect)?;
    conn.set_read_timeout(Some(command))?;
    conn.set_write_timeout(Some(command))?;
    redis::cmd("SENTINEL").arg("get-master-addr-by-name").arg(master).query(&mut conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact("redis://:s3cret@host:6379/0"), "redis://:***@host:6379/0");
        assert_eq!(redact("redis://host:6379/"), "redis://host:6379/");
    }

    #[test]
    fn sentinel_urls_are_read_as_the_library_reads_them() {
        let s = Sentinels::parse("redis-sentinel://u:p@a:1,b/3#m").unwrap();
        assert_eq!(s.sentinels, vec![("a".to_owned(), 1), ("b".to_owned(), DEFAULT_SENTINEL_PORT)]);
        assert_eq!((s.master_name.as_str(), s.db), ("m", 3));
        assert_eq!((s.username.as_deref(), s.password.as_deref()), (Some("u"), Some("p")));
        assert!(Sentinels::parse("redis-sentinel://a:1").is_err());
        assert!(Sentinels::parse("redis-sentinel://a:x#m").is_err());
    }
}
