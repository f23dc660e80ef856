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
use crate::trace;
use crate::transport::url::{NodeList, redact};

/// The scheme of a Sentinel URL (Lettuce's form, which Java users know):
/// `redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master-name`.
pub(crate) const SCHEME: &str = "redis-sentinel://";

/// The port a sentinel listens on when the URL names none.
const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// The sentinels of one master, and the master they last named.
pub(crate) struct Sentinels {
    /// The sentinels, the master's name (the fragment), and the data nodes' login and
    /// database (the sentinels are asked without one).
    url: NodeList,
    master_name: String,
    /// The master's address as last learned, until a connection to it fails.
    known_master: Mutex<Option<(String, u16)>>,
}

impl Sentinels {
    /// Parses a `redis-sentinel://` URL.
    pub(crate) fn parse(url: &str) -> Result<Sentinels> {
        const FORM: &str = "redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master-name";
        let parsed = NodeList::parse(url, SCHEME, DEFAULT_SENTINEL_PORT, FORM)?;
        let master_name = match &parsed.fragment {
            Some(name) if !name.is_empty() => name.clone(),
            Some(_) => {
                return Err(Error::invalid(format!(
                    "invalid URL {}: the master name after # is empty (expected {FORM})",
                    redact(url)
                )));
            }
            None => {
                return Err(Error::invalid(format!("invalid URL {}: no #master-name (expected {FORM})", redact(url))));
            }
        };
        Ok(Sentinels { url: parsed, master_name, known_master: Mutex::new(None) })
    }

    /// The master's address: the one last learned, or the answer of the first sentinel
    /// that knows the master (each asked within `timeout`).
    pub(crate) fn master(&self, timeout: Duration) -> Result<(String, u16)> {
        if let Some(known) = self.known_master.lock().clone() {
            return Ok(known);
        }
        let mut failures = Vec::new();
        for (host, port) in &self.url.nodes {
            match ask(host, *port, &self.master_name, timeout) {
                Ok(Some(master)) => {
                    *self.known_master.lock() = Some(master.clone());
                    return Ok(master);
                }
                Ok(None) => failures.push(format!("{host}:{port} does not know master {:?}", self.master_name)),
                Err(err) => failures.push(format!("{host}:{port}: {err:#}")),
            }
        }
        let unknown = failures.iter().all(|f| f.contains("does not know"));
        let error = Error::new(
            ErrorKind::Redis,
            format!("no sentinel named the master {:?}: {}", self.master_name, failures.join("; ")),
        );
        Err(if unknown { error } else { error.connection() })
    }

    /// The master, for messages: its address as last learned, else its name.
    pub(crate) fn describe(&self) -> String {
        match &*self.known_master.lock() {
            Some((host, port)) => format!("master {:?} at {host}:{port}", self.master_name),
            None => format!("master {:?}", self.master_name),
        }
    }

    /// Forgets the master's address (a connection to it failed, or it answered as a
    /// replica): the next connection asks the sentinels again.
    pub(crate) fn forget_master(&self) {
        *self.known_master.lock() = None;
    }

    /// The connection settings of a data node at `host:port`: this URL's login and database.
    pub(crate) fn node_info(&self, host: String, port: u16) -> redis::RedisResult<redis::ConnectionInfo> {
        self.url.node_info(host, port)
    }

    /// The login for the pub/sub connection.
    pub(crate) fn login(&self) -> (Option<String>, Option<String>) {
        (self.url.username.clone(), self.url.password.clone())
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
        let (host, port) = &sentinels.url.nodes[attempts % sentinels.url.nodes.len()];
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
            // The payload: "<name> <old ip> <old port> <new ip> <new port>".
            trace::event!(INFO, "failover followed", by = "+switch-master"; switch = String::from_utf8_lossy(payload));
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
        let s = Sentinels::parse("redis-sentinel://:pw@a:26380,b,c:1/2#mymaster").unwrap();
        assert_eq!(s.url.nodes, [("a".to_owned(), 26380), ("b".to_owned(), 26379), ("c".to_owned(), 1)]);
        assert_eq!((s.master_name.as_str(), s.url.db), ("mymaster", 2));
        assert_eq!(s.login(), (None, Some("pw".to_owned())));
        let s = Sentinels::parse("redis-sentinel://me:pw@a#m").unwrap();
        assert_eq!(s.login(), (Some("me".to_owned()), Some("pw".to_owned())));
        for bad in [
            "redis-sentinel://a:1",
            "redis-sentinel://a:x#m",
            "redis-sentinel://a/b#m",
            "redis-sentinel://,a#m",
            "redis-sentinel://a#",
        ] {
            let err = Sentinels::parse(bad).err().unwrap_or_else(|| panic!("{bad} parsed"));
            assert!(err.is_invalid_input(), "{bad}: {err}");
        }
    }
}
