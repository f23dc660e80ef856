//! Finding the master through Redis Sentinel: the `redis-sentinel://` URL, the question
//! "who is the master of `name` now?" asked of each sentinel in turn, every step bounded by
//! the connect timeout, and a thread that listens for the sentinels' `+switch-master` so
//! that the client leaves a demoted master at once.
//!
//! Hand-written rather than the `redis` crate's sync `Sentinel`, which opens its sentinel
//! connections without a timeout: with a sentinel that does not answer, `build()` and every
//! reconnect would hang.
//!
//! Why listen: after a failover the old master may stay up, still a writable master for a
//! few seconds until the sentinels turn it into a replica. A client that kept writing there
//! (renewals, say) would write into a history that is about to be thrown away, while the
//! new master let the lock expire. `+switch-master` comes right after the promotion.

use std::io::Write;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::background::Background;
use crate::error::{Error, ErrorKind, Result};

/// The scheme of a Sentinel URL (Lettuce's form, which Java users know):
/// `redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master-name`.
pub(crate) const SCHEME: &str = "redis-sentinel://";

/// The port a sentinel listens on when the URL names none.
const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// The sentinels of one master, and the master they last named.
pub(crate) struct Sentinels {
    sentinels: Vec<(String, u16)>,
    master_name: String,
    /// The data nodes' login and database (the sentinels are asked without one).
    username: Option<String>,
    password: Option<String>,
    db: i64,
    /// The master's address as last learned, until a connection to it fails.
    known_master: Mutex<Option<(String, u16)>>,
}

impl Sentinels {
    /// Parses a `redis-sentinel://` URL.
    pub(crate) fn parse(url: &str, redacted: &str) -> Result<Sentinels> {
        let bad = |why: &str| {
            Error::invalid(format!(
                "invalid Sentinel URL {redacted}: {why} (expected redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master-name)"
            ))
        };
        let rest = url.strip_prefix(SCHEME).ok_or_else(|| bad("not a redis-sentinel:// URL"))?;
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
        let sentinels = hosts
            .split(',')
            .map(|host| match host.rsplit_once(':') {
                Some((name, port)) => {
                    port.parse().map(|port| (name.to_owned(), port)).map_err(|_| bad("a port is not a number"))
                }
                None => Ok((host.to_owned(), DEFAULT_SENTINEL_PORT)),
            })
            .collect::<Result<Vec<_>>>()?;
        if sentinels.iter().any(|(host, _)| host.is_empty()) {
            return Err(bad("a sentinel address is empty"));
        }
        let db = match path.trim_end_matches('/') {
            "" => 0,
            db => db.parse().map_err(|_| bad("the database is not a number"))?,
        };
        Ok(Sentinels {
            sentinels,
            master_name: master_name.to_owned(),
            username,
            password,
            db,
            known_master: Mutex::new(None),
        })
    }

    /// The master's address: the one last learned, or the answer of the first sentinel
    /// that knows the master (each asked within `timeout`).
    pub(crate) fn master(&self, timeout: Duration) -> Result<(String, u16)> {
        if let Some(known) = self.known_master.lock().clone() {
            return Ok(known);
        }
        let mut failures = Vec::new();
        for (host, port) in &self.sentinels {
            match ask(host, *port, &self.master_name, timeout) {
                Ok(Some(master)) => {
                    *self.known_master.lock() = Some(master.clone());
                    return Ok(master);
                }
                Ok(None) => failures.push(format!("{host}:{port} does not know master {:?}", self.master_name)),
                Err(err) => failures.push(format!("{host}:{port}: {err}")),
            }
        }
        let unknown = failures.iter().all(|f| f.contains("does not know"));
        let error = Error::new(
            ErrorKind::Redis,
            format!("no sentinel named the master {:?}: {}", self.master_name, failures.join("; ")),
        );
        Err(if unknown { error } else { error.connection() })
    }

    /// Forgets the master's address (a connection to it failed, or it answered as a
    /// replica): the next connection asks the sentinels again.
    pub(crate) fn forget_master(&self) {
        *self.known_master.lock() = None;
    }

    /// The connection settings of a data node at `host:port`: this URL's login and database.
    pub(crate) fn node_info(&self, host: String, port: u16) -> redis::RedisResult<redis::ConnectionInfo> {
        let mut settings = redis::RedisConnectionInfo::default().set_db(self.db);
        if let Some(user) = &self.username {
            settings = settings.set_username(user);
        }
        if let Some(password) = &self.password {
            settings = settings.set_password(password);
        }
        // No CLIENT SETINFO handshake, as for a direct URL.
        let settings = settings.set_skip_set_lib_name();
        let info = redis::IntoConnectionInfo::into_connection_info(redis::ConnectionAddr::Tcp(host, port))?;
        Ok(info.set_redis_settings(settings))
    }

    /// The login for the pub/sub connection.
    pub(crate) fn login(&self) -> (Option<String>, Option<String>) {
        (self.username.clone(), self.password.clone())
    }
}

/// Asks one sentinel for the master's address.
fn ask(host: &str, port: u16, master_name: &str, timeout: Duration) -> redis::RedisResult<Option<(String, u16)>> {
    let info = redis::IntoConnectionInfo::into_connection_info(redis::ConnectionAddr::Tcp(host.to_owned(), port))?;
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    let client = redis::Client::open(info.set_redis_settings(settings))?;
    let mut conn = client.get_connection_with_timeout(timeout)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    let reply: Option<(String, u16)> =
        redis::cmd("SENTINEL").arg("get-master-addr-by-name").arg(master_name).query(&mut conn)?;
    Ok(reply)
}

/// The thread that listens to the sentinels' `+switch-master` messages and calls its
/// callback when the master of this client's name moves. Stopped by [`SwitchWatch::stop`].
pub(crate) struct SwitchWatch {
    shared: Arc<WatchShared>,
    thread: Background,
}

struct WatchShared {
    stop: AtomicBool,
    /// The current sentinel connection, to close it at stop (the thread blocks reading it).
    socket: Mutex<Option<TcpStream>>,
    /// Wakes the thread from a pause between connection attempts at stop.
    wake: Condvar,
}

impl SwitchWatch {
    pub(crate) fn start(
        sentinels: Arc<Sentinels>,
        timeout: Duration,
        on_switch: impl Fn() + Send + 'static,
    ) -> Result<SwitchWatch> {
        let shared =
            Arc::new(WatchShared { stop: AtomicBool::new(false), socket: Mutex::new(None), wake: Condvar::new() });
        let worker = Arc::clone(&shared);
        let thread = Background::spawn("redlease-sentinel", move || watch(&sentinels, &worker, timeout, on_switch))?;
        Ok(SwitchWatch { shared, thread })
    }

    /// Stops the thread and waits for it.
    pub(crate) fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(socket) = self.shared.socket.lock().as_ref() {
            let _ = socket.shutdown(Shutdown::Both);
        }
        self.shared.wake.notify_all();
        self.thread.join();
    }
}

fn watch(sentinels: &Sentinels, shared: &WatchShared, timeout: Duration, on_switch: impl Fn()) {
    let mut backoff = Duration::from_millis(50);
    let mut attempts = 0usize;
    while !shared.stop.load(Ordering::Acquire) {
        let (host, port) = &sentinels.sentinels[attempts % sentinels.sentinels.len()];
        attempts += 1;
        if attempts > 1 {
            // A switch may have been missed while no sentinel was listened to.
            sentinels.forget_master();
        }
        match listen(host, *port, sentinels, shared, timeout, &on_switch) {
            // Heard from a sentinel: the next failure starts the backoff again.
            Ok(()) => backoff = Duration::from_millis(50),
            Err(_) => {
                let mut socket = shared.socket.lock();
                if !shared.stop.load(Ordering::Acquire) {
                    shared.wake.wait_for(&mut socket, backoff);
                }
                backoff = backoff.saturating_mul(2).min(Duration::from_secs(1));
            }
        }
    }
}

/// Subscribes to `+switch-master` on one sentinel and reads until the connection ends.
/// `Ok` when the subscription was confirmed before it ended.
fn listen(
    host: &str,
    port: u16,
    sentinels: &Sentinels,
    shared: &WatchShared,
    timeout: Duration,
    on_switch: &impl Fn(),
) -> std::io::Result<()> {
    let addr = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, format!("{host} resolves to no address")))?;
    let mut socket = TcpStream::connect_timeout(&addr, timeout)?;
    socket.set_read_timeout(Some(timeout))?;
    socket.set_write_timeout(Some(timeout))?;
    {
        let mut slot = shared.socket.lock();
        if shared.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        *slot = Some(socket.try_clone()?);
    }
    socket.write_all(&redis::cmd("SUBSCRIBE").arg("+switch-master").get_packed_command())?;
    let mut parser = redis::Parser::new();
    parser.parse_value(&mut socket).map_err(std::io::Error::other)?;
    // Subscribed: from now on wait for messages however long they take.
    socket.set_read_timeout(None)?;
    loop {
        let value = parser.parse_value(&mut socket).map_err(std::io::Error::other)?;
        // ["message", "+switch-master", "<name> <old ip> <old port> <new ip> <new port>"]
        if let redis::Value::Array(items) = value
            && let Some(redis::Value::BulkString(payload)) = items.get(2)
            && String::from_utf8_lossy(payload).split(' ').next() == Some(sentinels.master_name.as_str())
        {
            sentinels.forget_master();
            on_switch();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_urls_parse_the_way_lettuce_writes_them() {
        let s = Sentinels::parse("redis-sentinel://:pw@a:26380,b,c:1/2#mymaster", "x").unwrap();
        assert_eq!(s.sentinels, [("a".to_owned(), 26380), ("b".to_owned(), 26379), ("c".to_owned(), 1)]);
        assert_eq!((s.master_name.as_str(), s.db), ("mymaster", 2));
        assert_eq!(s.login(), (None, Some("pw".to_owned())));
        let s = Sentinels::parse("redis-sentinel://me:pw@a#m", "x").unwrap();
        assert_eq!(s.login(), (Some("me".to_owned()), Some("pw".to_owned())));
        for bad in [
            "redis-sentinel://a:1",
            "redis-sentinel://a:x#m",
            "redis-sentinel://a/b#m",
            "redis-sentinel://,a#m",
            "redis-sentinel://a#",
        ] {
            let err = Sentinels::parse(bad, "x").err().unwrap_or_else(|| panic!("{bad} parsed"));
            assert!(err.is_invalid_input(), "{bad}: {err}");
        }
    }
}
