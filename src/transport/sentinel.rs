//! Finding the master through Redis Sentinel: the `redis-sentinel://` URL, the question
//! "who is the master of `name` now?" asked of every sentinel at once (the newest
//! configuration wins), every step bounded by the connect timeout, and one thread per
//! sentinel that listens for its `+switch-master`, so that the client leaves a demoted
//! master as soon as any sentinel announces the switch.
//!
//! Hand-written rather than the `redis` crate's sync `Sentinel`, which opens its sentinel
//! connections without a timeout: with a sentinel that does not answer, `build()` and every
//! reconnect would hang.
//!
//! Why listen: after a failover the old master may stay up, still a writable master for a
//! few seconds until the sentinels turn it into a replica. A client that kept writing there
//! (renewals, say) would write into a history that is about to be thrown away, while the
//! new master let the lock expire. `+switch-master` comes right after the promotion, but
//! not from every sentinel at once: the one that led the failover may announce it seconds
//! after the others, and a sentinel that has not heard of it yet still names the old
//! master. Hence every sentinel listened to, and the answer of the newest configuration
//! (`config-epoch`) believed.

use std::io::Write;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::base::clock;
use crate::base::error::{Error, ErrorKind, Result};
use crate::observe::trace;
use crate::support::background::Background;
use crate::transport::url::{NodeList, redact};

/// The scheme of a Sentinel URL (Lettuce's form, which Java users know):
/// `redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master-name`.
pub(crate) const SCHEME: &str = "redis-sentinel://";

/// The port a sentinel listens on when the URL names none.
const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// A server's address: host and port.
type Addr = (String, u16);

/// The sentinels of one master, and the master they last named.
pub(crate) struct Sentinels {
    /// The sentinels, the master's name (the fragment), and the data nodes' login and
    /// database (the sentinels are asked without one).
    url: NodeList,
    master_name: String,
    known: Mutex<Known>,
}

/// What the client knows of the master.
#[derive(Default)]
struct Known {
    /// The master's address as last learned, until a connection to it fails or a switch is
    /// heard.
    master: Option<Addr>,
    /// The configuration epoch of the answer last taken (`None`: its sentinel would not
    /// say).
    epoch: Option<u64>,
    /// A switch was heard since that answer: an answer names the new master only when its
    /// epoch is newer.
    switched: bool,
    /// Switches heard, to tell whether one came while the sentinels were being asked.
    switches: u64,
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
        Ok(Sentinels { url: parsed, master_name, known: Mutex::new(Known::default()) })
    }

    /// The master's address: the one last learned, or the newest answer of the sentinels,
    /// all asked at once, each step within `timeout`, the whole within `timeout` too.
    pub(crate) fn master(&self, timeout: Duration) -> Result<Addr> {
        let deadline = clock::deadline_in(timeout);
        let mut left = timeout;
        loop {
            let (newer_than, switches) = {
                let known = self.known.lock();
                if let Some(master) = &known.master {
                    return Ok(master.clone());
                }
                (if known.switched { known.epoch } else { None }, known.switches)
            };
            let answers = ask_all(&self.url.nodes, &self.master_name, left, newer_than);
            let Some((master, epoch)) = newest(&answers) else {
                return Err(self.no_master(&answers, left));
            };
            let master = master.clone();
            let mut known = self.known.lock();
            if known.switches == switches {
                *known = Known { master: Some(master.clone()), epoch, switched: false, switches };
                return Ok(master);
            }
            // A switch was heard while they were asked: the answers may be older than it.
            left = deadline.map_or(timeout, |d| d.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                return Ok(master);
            }
        }
    }

    /// The error when no sentinel named the master: what each one said.
    fn no_master(&self, answers: &[Option<Answer>], timeout: Duration) -> Error {
        let mut unknown = true;
        let said: Vec<String> = self
            .url
            .nodes
            .iter()
            .zip(answers)
            .map(|((host, port), answer)| match answer {
                Some(Answer::Unknown) => format!("{host}:{port} does not know master {:?}", self.master_name),
                Some(Answer::Failed(why)) => {
                    unknown = false;
                    format!("{host}:{port}: {why}")
                }
                Some(Answer::Named { .. }) | None => {
                    unknown = false;
                    format!("{host}:{port}: no answer within {timeout:?}")
                }
            })
            .collect();
        let error = Error::new(
            ErrorKind::Redis,
            format!("no sentinel named the master {:?}: {}", self.master_name, said.join("; ")),
        );
        if unknown { error } else { error.connection() }
    }

    /// The master, for messages: its address as last learned, else its name.
    pub(crate) fn describe(&self) -> String {
        match &self.known.lock().master {
            Some((host, port)) => format!("master {:?} at {host}:{port}", self.master_name),
            None => format!("master {:?}", self.master_name),
        }
    }

    /// Forgets the master's address (a connection to it failed, or it answered as a
    /// replica): the next connection asks the sentinels again.
    pub(crate) fn forget_master(&self) {
        self.known.lock().master = None;
    }

    /// A sentinel announced a switch: the next connection asks the sentinels again, and
    /// takes an answer at once only when it is newer than the one that named the old master.
    fn switch_heard(&self) {
        let mut known = self.known.lock();
        known.master = None;
        known.switched = true;
        known.switches += 1;
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

/// What one sentinel said of the master.
#[derive(Debug, PartialEq)]
enum Answer {
    /// Its address, and the epoch of the configuration that names it (`None`: the
    /// sentinel would not say, e.g. its ACL refuses `SENTINEL MASTER`).
    Named { master: Addr, epoch: Option<u64> },
    /// The sentinel does not know a master of that name.
    Unknown,
    /// No answer: why.
    Failed(String),
}

/// The newest of the answers: the highest epoch (one that says none counts as the oldest),
/// the first of the URL among equals.
fn newest(answers: &[Option<Answer>]) -> Option<(&Addr, Option<u64>)> {
    let mut best: Option<(&Addr, Option<u64>)> = None;
    for answer in answers.iter().flatten() {
        if let Answer::Named { master, epoch } = answer
            && best.is_none_or(|(_, best_epoch)| *epoch > best_epoch)
        {
            best = Some((master, *epoch));
        }
    }
    best
}

/// Whether the answers so far settle the question: every sentinel answered, or a majority
/// did and one of them named the master, with an epoch above `newer_than` when it is
/// given (a switch was heard since the answer of that epoch). A late sentinel is then not
/// waited for: waiting would cost the whole timeout at every question while it lags, and
/// leave the connection to the master none of it. After a switch the sentinel that
/// announced it names the new configuration, so the question still waits for that.
fn settled(answers: &[Option<Answer>], newer_than: Option<u64>) -> bool {
    let answered = answers.iter().flatten().count();
    if answered == answers.len() {
        return true;
    }
    if answered * 2 <= answers.len() {
        return false;
    }
    newest(answers).is_some_and(|(_, epoch)| newer_than.is_none_or(|floor| epoch.is_some_and(|e| e > floor)))
}

/// One question to the sentinels: set once it is settled, and the sockets of those still
/// asked, closed then.
#[derive(Default)]
struct Question {
    over: AtomicBool,
    sockets: Mutex<Vec<TcpStream>>,
}

impl Question {
    /// Ends the question: the threads still waiting for a sentinel stop at once.
    fn close(&self) {
        let sockets = {
            let mut sockets = self.sockets.lock();
            self.over.store(true, Ordering::Release);
            std::mem::take(&mut *sockets)
        };
        for socket in sockets {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

/// Asks every sentinel at once, each on a thread of its own (here when none can start),
/// and waits until the answers settle the question (see [`settled`]) or `timeout` passes.
/// The answers in the URL's order; `None` for a sentinel that did not answer in time.
fn ask_all(nodes: &[Addr], master_name: &str, timeout: Duration, newer_than: Option<u64>) -> Vec<Option<Answer>> {
    // A zero timeout is refused by the socket calls.
    let timeout = timeout.max(Duration::from_millis(1));
    let deadline = clock::deadline_in(timeout);
    let question = Arc::new(Question::default());
    let (tx, rx) = mpsc::channel();
    let mut answers: Vec<Option<Answer>> = nodes.iter().map(|_| None).collect();
    for (index, (host, port)) in nodes.iter().enumerate() {
        let (host, port, name, theirs, tx) =
            (host.clone(), *port, master_name.to_owned(), Arc::clone(&question), tx.clone());
        let started = std::thread::Builder::new().name("redlease-sentinel-ask".into()).spawn(move || {
            let _ = tx.send((index, ask(&host, port, &name, timeout, &theirs)));
        });
        if started.is_err() {
            answers[index] = Some(ask(&nodes[index].0, nodes[index].1, master_name, timeout, &question));
        }
    }
    drop(tx);
    while !settled(&answers, newer_than) {
        let received = match deadline {
            Some(deadline) => rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok(),
            None => rx.recv().ok(),
        };
        match received {
            Some((index, answer)) => answers[index] = Some(answer),
            None => break,
        }
    }
    question.close();
    answers
}

/// Asks one sentinel, in one round trip, for the master's configuration epoch (`SENTINEL
/// MASTER`) and then its address (`get-master-addr-by-name`). The address is read second
/// and from the command that names the promoted replica as soon as the sentinel counts
/// the new epoch: `SENTINEL MASTER` names the old address, with the new epoch, from the
/// promotion until the sentinel that leads the failover announces the switch.
fn ask(host: &str, port: u16, master_name: &str, timeout: Duration, question: &Question) -> Answer {
    let exchange = || -> std::io::Result<Answer> {
        let mut socket = connect(host, port, timeout)?;
        {
            let mut sockets = question.sockets.lock();
            if question.over.load(Ordering::Acquire) {
                return Err(std::io::Error::other("the question was settled"));
            }
            sockets.push(socket.try_clone()?);
        }
        socket.set_read_timeout(Some(timeout))?;
        socket.set_write_timeout(Some(timeout))?;
        let mut pipeline = redis::cmd("SENTINEL").arg("MASTER").arg(master_name).get_packed_command();
        pipeline.extend(redis::cmd("SENTINEL").arg("get-master-addr-by-name").arg(master_name).get_packed_command());
        socket.write_all(&pipeline)?;
        let mut parser = redis::Parser::new();
        let mut read = || {
            parser.parse_value(&mut socket).map_err(|err| {
                let kind = if err.is_timeout() { std::io::ErrorKind::TimedOut } else { std::io::ErrorKind::Other };
                std::io::Error::new(kind, err)
            })
        };
        let config = read()?;
        let addr = read()?;
        Ok(read_answer(config, addr))
    };
    exchange().unwrap_or_else(|err| match err.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
            Answer::Failed(format!("no answer within {timeout:?}"))
        }
        _ => Answer::Failed(err.to_string()),
    })
}

/// What a sentinel's replies to `SENTINEL MASTER` and `get-master-addr-by-name` say.
fn read_answer(config: redis::Value, addr: redis::Value) -> Answer {
    let epoch = redis::from_redis_value::<redis::RedisResult<Vec<String>>>(config)
        .ok()
        .and_then(|fields| fields.ok())
        .and_then(|fields| epoch_of(&fields));
    match redis::from_redis_value::<redis::RedisResult<Option<Addr>>>(addr) {
        Ok(Ok(Some(master))) => Answer::Named { master, epoch },
        Ok(Ok(None)) => Answer::Unknown,
        Ok(Err(refused)) => Answer::Failed(refused.to_string()),
        Err(unreadable) => Answer::Failed(format!("an unreadable reply: {unreadable}")),
    }
}

/// The `config-epoch` of a `SENTINEL MASTER` reply (a flat list of fields and values).
fn epoch_of(fields: &[String]) -> Option<u64> {
    fields.chunks_exact(2).find(|pair| pair[0] == "config-epoch").and_then(|pair| pair[1].parse().ok())
}

/// A TCP connection to `host:port` within `timeout` (its first address).
fn connect(host: &str, port: u16, timeout: Duration) -> std::io::Result<TcpStream> {
    let addr = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, format!("{host} resolves to no address")))?;
    TcpStream::connect_timeout(&addr, timeout)
}

/// A `+switch-master` message: `"<name> <old ip> <old port> <new ip> <new port>"`.
#[derive(Debug, Clone, PartialEq)]
struct Switch {
    name: String,
    old: Addr,
    new: Addr,
}

impl Switch {
    /// Parses the message, read from its end (the addresses have no spaces).
    fn parse(payload: &str) -> Option<Switch> {
        let mut words = payload.rsplitn(5, ' ');
        let (new_port, new_ip, old_port, old_ip) = (words.next()?, words.next()?, words.next()?, words.next()?);
        let name = words.next()?;
        Some(Switch {
            name: name.to_owned(),
            old: (old_ip.to_owned(), old_port.parse().ok()?),
            new: (new_ip.to_owned(), new_port.parse().ok()?),
        })
    }
}

/// The switch last acted on: every sentinel announces the same switch, and only the first
/// announcement is acted on.
#[derive(Default)]
struct SwitchMemory {
    last: Option<Switch>,
}

impl SwitchMemory {
    /// Whether `switch` is news (then remembered): not the one last acted on.
    fn is_news(&mut self, switch: &Switch) -> bool {
        if self.last.as_ref() == Some(switch) {
            return false;
        }
        self.last = Some(switch.clone());
        true
    }

    /// A listener came back and may have missed switches: the next announcement is news,
    /// even one that repeats the last (the master may have moved away and back meanwhile).
    fn forget(&mut self) {
        self.last = None;
    }
}

/// The threads (one per sentinel of the URL) that listen to the sentinels' `+switch-master`
/// messages and call their callback when the master of this client's name moves, once per
/// switch however many sentinels announce it. Stopped by [`SwitchWatch::stop`].
pub(crate) struct SwitchWatch {
    shared: Arc<WatchShared>,
    threads: Vec<Background>,
}

struct WatchShared {
    stop: AtomicBool,
    /// Each listener's sentinel connection, by the sentinel's place in the URL, to close it
    /// at stop (the listener blocks reading it).
    sockets: Mutex<Vec<Option<TcpStream>>>,
    /// Wakes the listeners from their pauses between connection attempts at stop.
    wake: Condvar,
    memory: Mutex<SwitchMemory>,
}

impl SwitchWatch {
    pub(crate) fn start(
        sentinels: Arc<Sentinels>,
        timeout: Duration,
        on_switch: impl Fn() + Send + Sync + 'static,
    ) -> Result<SwitchWatch> {
        let count = sentinels.url.nodes.len();
        let shared = Arc::new(WatchShared {
            stop: AtomicBool::new(false),
            sockets: Mutex::new((0..count).map(|_| None).collect()),
            wake: Condvar::new(),
            memory: Mutex::new(SwitchMemory::default()),
        });
        let on_switch: Arc<dyn Fn() + Send + Sync> = Arc::new(on_switch);
        let mut watch = SwitchWatch { shared, threads: Vec::with_capacity(count) };
        for index in 0..count {
            let (sentinels, shared, on_switch) =
                (Arc::clone(&sentinels), Arc::clone(&watch.shared), Arc::clone(&on_switch));
            let started = Background::spawn("redlease-sentinel", move || {
                watch_one(index, &sentinels, &shared, timeout, &*on_switch);
            });
            match started {
                Ok(thread) => watch.threads.push(thread),
                Err(err) => {
                    watch.stop();
                    return Err(err);
                }
            }
        }
        Ok(watch)
    }

    /// Stops the threads and waits for them.
    pub(crate) fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        {
            let sockets = self.shared.sockets.lock();
            for socket in sockets.iter().flatten() {
                let _ = socket.shutdown(Shutdown::Both);
            }
            self.shared.wake.notify_all();
        }
        for thread in &self.threads {
            thread.join();
        }
    }
}

/// How a listener's connection ended.
enum Ended {
    /// Before the subscription was confirmed.
    Unsubscribed,
    /// After it: the listener heard its sentinel until then.
    Lost,
}

/// One listener: subscribes to `+switch-master` on the sentinel at `index` of the URL, and
/// again whenever the connection ends, after a pause (50 ms, doubled at each failure to
/// subscribe, up to 1 s).
fn watch_one(index: usize, sentinels: &Sentinels, shared: &WatchShared, timeout: Duration, on_switch: &dyn Fn()) {
    let mut backoff = Duration::from_millis(50);
    let mut subscribed_before = false;
    while !shared.stop.load(Ordering::Acquire) {
        let ended = listen(index, sentinels, shared, timeout, on_switch, &mut subscribed_before);
        let mut sockets = shared.sockets.lock();
        sockets[index] = None;
        if let Ended::Lost = ended {
            // Heard from the sentinel: the backoff starts again.
            backoff = Duration::from_millis(50);
        }
        if !shared.stop.load(Ordering::Acquire) {
            shared.wake.wait_for(&mut sockets, backoff);
        }
        backoff = backoff.saturating_mul(2).min(Duration::from_secs(1));
    }
}

/// Subscribes to `+switch-master` on one sentinel and reads until the connection ends.
fn listen(
    index: usize,
    sentinels: &Sentinels,
    shared: &WatchShared,
    timeout: Duration,
    on_switch: &dyn Fn(),
    subscribed_before: &mut bool,
) -> Ended {
    let (host, port) = &sentinels.url.nodes[index];
    let subscribe = || -> std::io::Result<(TcpStream, redis::Parser)> {
        let mut socket = connect(host, *port, timeout)?;
        socket.set_read_timeout(Some(timeout))?;
        socket.set_write_timeout(Some(timeout))?;
        {
            let mut sockets = shared.sockets.lock();
            if shared.stop.load(Ordering::Acquire) {
                return Err(std::io::Error::other("stopped"));
            }
            sockets[index] = Some(socket.try_clone()?);
        }
        socket.write_all(&redis::cmd("SUBSCRIBE").arg("+switch-master").get_packed_command())?;
        let mut parser = redis::Parser::new();
        parser.parse_value(&mut socket).map_err(std::io::Error::other)?;
        // Subscribed: from now on wait for messages however long they take.
        socket.set_read_timeout(None)?;
        Ok((socket, parser))
    };
    let Ok((mut socket, mut parser)) = subscribe() else { return Ended::Unsubscribed };
    if std::mem::replace(subscribed_before, true) {
        // Back after a gap in which a switch may have been announced unheard.
        sentinels.forget_master();
        shared.memory.lock().forget();
    }
    // ["message", "+switch-master", "<name> <old ip> <old port> <new ip> <new port>"]
    while let Ok(value) = parser.parse_value(&mut socket) {
        let redis::Value::Array(items) = value else { continue };
        let Some(redis::Value::BulkString(payload)) = items.get(2) else { continue };
        let payload = String::from_utf8_lossy(payload);
        let Some(switch) = Switch::parse(&payload) else { continue };
        if switch.name == sentinels.master_name && shared.memory.lock().is_news(&switch) {
            trace::event!(INFO, "failover followed", by = "+switch-master"; switch = payload);
            sentinels.switch_heard();
            on_switch();
        }
    }
    Ended::Lost
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

    fn named(port: u16, epoch: Option<u64>) -> Option<Answer> {
        Some(Answer::Named { master: ("127.0.0.11".to_owned(), port), epoch })
    }

    #[test]
    fn the_newest_answer_wins_and_the_url_order_breaks_ties() {
        let failed = Some(Answer::Failed("refused".into()));
        let answers = [named(1, Some(3)), None, named(2, Some(4)), Some(Answer::Unknown), failed];
        assert_eq!(newest(&answers), Some((&("127.0.0.11".to_owned(), 2), Some(4))));
        // A laggard listed first names the old master with the old epoch.
        assert_eq!(newest(&[named(1, Some(3)), named(2, Some(4))]).map(|(m, _)| m.1), Some(2));
        // An epoch the sentinel would not say counts as the oldest.
        assert_eq!(newest(&[named(1, None), named(2, Some(0))]).map(|(m, _)| m.1), Some(2));
        assert_eq!(newest(&[named(1, Some(5)), named(2, Some(5))]).map(|(m, _)| m.1), Some(1));
        assert_eq!(newest(&[named(1, None), named(2, None)]).map(|(m, _)| m.1), Some(1));
        assert_eq!(newest(&[Some(Answer::Unknown), None]), None);
    }

    #[test]
    fn a_question_settles_on_every_answer_or_a_majority_that_names_a_new_enough_master() {
        let failed = || Some(Answer::Failed("refused".into()));
        // Every sentinel answered, whatever they said.
        assert!(settled(&[Some(Answer::Unknown), failed()], None));
        assert!(settled(&[named(1, Some(1)), named(1, Some(1))], Some(7)));
        // A majority, one of them naming the master: the late one is not waited for.
        assert!(settled(&[None, named(1, Some(1)), failed()], None));
        assert!(settled(&[None, named(2, Some(8)), named(1, Some(7))], Some(7)));
        // After a switch, not while the majority names only what was known before it.
        assert!(!settled(&[None, named(1, Some(7)), named(1, Some(7))], Some(7)));
        assert!(!settled(&[None, named(1, None), named(1, Some(7))], Some(7)));
        // Not a majority, or nobody named the master yet.
        assert!(!settled(&[None, None, named(1, Some(1))], None));
        assert!(!settled(&[None, failed(), Some(Answer::Unknown)], None));
        assert!(!settled(&[None, named(1, Some(1))], None));
    }

    fn value(wire: &str) -> redis::Value {
        redis::parse_redis_value(wire.as_bytes()).expect("a reply")
    }

    #[test]
    fn a_sentinels_replies_make_an_answer() {
        let config = "*6\r\n$4\r\nname\r\n$1\r\nm\r\n$5\r\nflags\r\n$6\r\nmaster\r\n\
                      $12\r\nconfig-epoch\r\n$2\r\n12\r\n";
        let addr = "*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n";
        let at = ("127.0.0.1".to_owned(), 6380);
        assert_eq!(read_answer(value(config), value(addr)), Answer::Named { master: at.clone(), epoch: Some(12) });
        // A sentinel user refused SENTINEL MASTER: the address, without an epoch.
        let refused = "-NOPERM this user has no permissions to run the 'sentinel|master' command\r\n";
        assert_eq!(read_answer(value(refused), value(addr)), Answer::Named { master: at, epoch: None });
        let unknown = "-ERR No such master with that name\r\n";
        assert_eq!(read_answer(value(unknown), value("*-1\r\n")), Answer::Unknown);
        assert_eq!(read_answer(value(unknown), value("$-1\r\n")), Answer::Unknown);
        let answer = read_answer(value(refused), value("-NOAUTH Authentication required.\r\n"));
        assert!(matches!(&answer, Answer::Failed(why) if why.contains("NOAUTH")), "{answer:?}");
        assert_eq!(epoch_of(&["config-epoch".into(), "x".into()]), None);
        assert_eq!(epoch_of(&["name".into(), "config-epoch".into()]), None);
    }

    #[test]
    fn a_switch_is_read_from_its_message_and_acted_on_once() {
        let switch = Switch::parse("my master 127.0.0.1 6379 ::1 6380").expect("parsed");
        assert_eq!(switch.name, "my master");
        assert_eq!((switch.old, switch.new), (("127.0.0.1".to_owned(), 6379), ("::1".to_owned(), 6380)));
        for bad in ["m 127.0.0.1 6379 127.0.0.1", "m 127.0.0.1 x 127.0.0.1 6380", ""] {
            assert_eq!(Switch::parse(bad), None, "{bad}");
        }
        let there = Switch::parse("m 127.0.0.11 1 127.0.0.12 2").expect("parsed");
        let back = Switch::parse("m 127.0.0.12 2 127.0.0.11 1").expect("parsed");
        let mut memory = SwitchMemory::default();
        assert!(memory.is_news(&there));
        // The same switch, announced by the other sentinels.
        assert!(!memory.is_news(&there));
        assert!(!memory.is_news(&there));
        assert!(memory.is_news(&back));
        assert!(memory.is_news(&there), "moved away and back: news again");
        // A listener came back: what it hears may repeat a switch it missed the undoing of.
        memory.forget();
        assert!(memory.is_news(&there));
    }
}
