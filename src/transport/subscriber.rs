//! The subscriber thread and the waiter registry: how a thread waiting for a lock learns,
//! within about one network round trip, that the lock was released.
//!
//! One pub/sub connection per client. Subscriptions are counted per channel: the first
//! local waiter of a lock subscribes, later ones join, and when the last one leaves the
//! subscription is kept for a second (a thread that takes the lock again soon, as a loop
//! does, finds it ready), then ended.
//! A waiter writes `SUBSCRIBE` itself (to a clone of the socket) and waits until the
//! subscriber thread has read Redis's confirmation; only then does it try the lock again,
//! so a release between its failed attempt and its subscription cannot be missed. A waiter
//! that finds the subscription confirmed before its first attempt, with no message read
//! since (a count every message and confirmation adds to, read before the attempt), parks
//! at once: every release after its attempt will reach it.
//!
//! A release message wakes one local waiter (payload `1`, a read-write lock's write
//! release, wakes them all). A plain or fenced lock's subscription covers two channels of
//! this client's beside the lock's, all three in one command (the kind's [`Meaning::beside`]): a release
//! names one waiting client on its own channel, so the other waiting processes read
//! nothing. A waiter that was woken but leaves without the lock passes its
//! wake-up on. After a reconnect every channel is subscribed again and, once Redis confirms
//! it, every waiter of that channel is woken to check its lock, because messages may have
//! been lost meanwhile. Waiters never depend on a message alone: each park is bounded by
//! the holder's TTL and the caller's deadline. A fair lock's waiter that became the head of
//! the queue is told, not woken, when the holder's lease ends (a negative payload): its
//! park ends then at the latest.
//!
//! **Refusals.** Every command written is remembered in order, so an error reply (an ACL
//! rule refusing a channel) is matched to the `SUBSCRIBE` that caused it and reaches that
//! channel's waiters at once, naming the channel; the channel is then dropped when they
//! leave.
//!
//! **Liveness.** While the connection carries subscriptions, a read that finds nothing for
//! the ping interval sends `PING`; no answer within the command timeout means the connection
//! is dead though its socket is open (a silent firewall drop, a frozen proxy), and it is
//! closed and opened again. A `SUBSCRIBE` unconfirmed within the command timeout is the same
//! evidence: the waiter that sent it closes the connection. With no subscription the
//! thread blocks with no timeout: an idle client sends nothing and wakes nobody.
//!
//! Which channels are subscribed, which commands are in flight and whom a message wakes
//! is decided by a pure state machine ([`Subscriptions`], with its state table), and what
//! a message means by the kind that owns the channel ([`Meaning`]); this module is the
//! thread and the socket around them.
//!
//! Lock order: the registry state, then the writer. Socket writes happen with only the
//! writer held, and in the order the registry decided them.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::base::clock;
use crate::base::error::{Error, ErrorKind, Result};
use crate::observe::events::Events;
use crate::observe::telemetry;
use crate::support::background::Background;
use crate::support::interrupt;
use crate::transport::conn::PubSub;
use crate::transport::net::{Connection, Stream, Target};
use crate::transport::subscriptions::{
    Command, LINGER, Meaning, Readiness, Refusal, Reply, Subscriptions, WaiterId, Wakeable,
};

/// The timeouts the subscriber works with.
#[derive(Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) connect: Duration,
    pub(crate) command: Duration,
    pub(crate) ping_interval: Duration,
}

pub(crate) struct Subscriber {
    shared: Arc<Shared>,
    thread: Background,
}

struct Shared {
    target: Target,
    /// Classic `SUBSCRIBE` (one server, or a cluster node in classic mode), or sharded
    /// `SSUBSCRIBE` (a cluster node's slots).
    pubsub: PubSub,
    timing: Timing,
    events: Events,
    state: Mutex<State>,
    /// Signalled on confirmations, refusals, connection changes and new demand.
    changed: Condvar,
    /// The writing half of the current connection.
    writer: Mutex<Option<Writer>>,
}

struct State {
    subscriptions: Subscriptions<Arc<Waiter>>,
    /// Counts connections, so that a waiter closes only the one it found silent.
    generation: u64,
    /// Why a waiter closed the current connection, for the disconnect event.
    closed_because: Option<String>,
    shutdown: bool,
}

/// The writing half of connection `generation`.
struct Writer {
    stream: Stream,
    generation: u64,
}

/// One waiting thread's parking spot.
struct Waiter {
    parked: Mutex<Parked>,
    cv: Condvar,
    /// The permits it waits for (1 for a lock).
    weight: u64,
}

#[derive(Default)]
struct Parked {
    /// A message woke it (consumed by [`Ticket::park`]).
    woken: bool,
    /// It must look at its lock by then at the latest ([`Delivery::LookWithin`]); cleared
    /// when a park ends, since the look that follows learns the lock's state afresh.
    ///
    /// [`Delivery::LookWithin`]: crate::transport::Delivery::LookWithin
    look_by: Option<Instant>,
}

impl Waiter {
    fn new(weight: u64) -> Waiter {
        Waiter { parked: Mutex::new(Parked::default()), cv: Condvar::new(), weight }
    }
}

impl Wakeable for Arc<Waiter> {
    fn weight(&self) -> u64 {
        self.weight
    }

    fn wake(&self) -> bool {
        let mut parked = self.parked.lock();
        if parked.woken {
            return false;
        }
        parked.woken = true;
        self.cv.notify_one();
        true
    }

    fn look_by(&self, at: Instant) {
        let mut parked = self.parked.lock();
        parked.look_by = clock::earliest(parked.look_by, Some(at));
        self.cv.notify_one();
    }
}

/// A thread's place among the waiters of one channel. Dropping it leaves.
pub(crate) struct Ticket {
    shared: Arc<Shared>,
    channel: String,
    id: WaiterId,
    waiter: Arc<Waiter>,
    acquired: bool,
    /// The subscription was confirmed, and silent, since before the caller's first attempt.
    fresh: bool,
}

/// Counts for [`crate::ClientStats`].
pub(crate) struct SubscriberStats {
    pub(crate) channels: usize,
    pub(crate) waiters: usize,
    pub(crate) connected: bool,
}

impl Subscriber {
    /// `token` is the client's wake token, as a release names it; `seq` counts the
    /// messages and confirmations every subscriber of the client reads.
    pub(crate) fn start(
        target: Target,
        pubsub: PubSub,
        token: u64,
        seq: Arc<AtomicU64>,
        timing: Timing,
        events: Events,
    ) -> Result<Subscriber> {
        let subscriptions = Subscriptions::new(token.to_string(), pubsub.sharded(), seq);
        let shared = Arc::new(Shared {
            target,
            pubsub,
            timing,
            events,
            state: Mutex::new(State { subscriptions, generation: 0, closed_because: None, shutdown: false }),
            changed: Condvar::new(),
            writer: Mutex::new(None),
        });
        let worker = Arc::clone(&shared);
        let thread = Background::spawn("redlease-subscriber", move || worker.run())?;
        Ok(Subscriber { shared, thread })
    }

    /// Joins the waiters of `channel`, whose messages mean what `meaning` says, subscribing
    /// it if this is the first, and waits until Redis has confirmed the subscription, or
    /// until `deadline`, or at most the command timeout (plus the connect timeout when the
    /// connection is not open yet). A subscription still unanswered then means a silent
    /// connection: it is closed, to be opened again. The caller's park is bounded by the
    /// lock's TTL, so a waiter whose subscription is late still gets its turn. A refusal by
    /// Redis is returned at once.
    ///
    /// `since` is the count of messages and confirmations read before the caller's first
    /// attempt: when the subscription was confirmed before it and no message came since,
    /// every release after that attempt will reach this waiter, and the ticket says so
    /// ([`Ticket::fresh`]): the caller parks without trying again.
    pub(crate) fn join(
        &self,
        channel: &str,
        deadline: Option<Instant>,
        meaning: &'static dyn Meaning,
        weight: u64,
        since: u64,
    ) -> Result<Ticket> {
        let shared = &self.shared;
        let timing = shared.timing;
        let waiter = Arc::new(Waiter::new(weight));
        let mut state = shared.state.lock();
        if state.shutdown {
            return Err(Error::shutdown());
        }
        let (connected, generation) = (state.subscriptions.is_connected(), state.generation);
        let (id, fresh, commands) = state.subscriptions.join(channel, meaning, Arc::clone(&waiter), since);
        let ticket =
            Ticket { shared: Arc::clone(shared), channel: channel.to_owned(), id, waiter, acquired: false, fresh };
        // Counted down when the ticket is dropped, on every path out of the wait.
        telemetry::waiter(true);
        if fresh {
            return Ok(ticket);
        }
        if connected {
            state = shared.send(state, &commands);
        } else {
            // The thread subscribes every wanted channel as soon as it is connected.
            shared.changed.notify_all();
        }
        let patience = if connected { timing.command } else { timing.connect.saturating_add(timing.command) };
        let until = clock::earliest(deadline, clock::deadline_in(patience));
        // An interrupt wakes this wait for the subscription's confirmation too.
        let interrupted = {
            let shared = Arc::clone(shared);
            move || {
                let _state = shared.state.lock();
                shared.changed.notify_all();
            }
        };
        drop(state);
        interrupt::parked(interrupted, || self.confirmed(ticket, until, deadline, generation))
    }

    /// Waits until the subscription of the ticket's channel is confirmed (or refused, or
    /// moved), at most until `until`; a silence past the command timeout closes the
    /// connection (`generation`).
    fn confirmed(
        &self,
        ticket: Ticket,
        until: Option<Instant>,
        deadline: Option<Instant>,
        generation: u64,
    ) -> Result<Ticket> {
        let shared = &self.shared;
        let timing = shared.timing;
        let channel = ticket.channel.as_str();
        let mut state = shared.state.lock();
        loop {
            if state.shutdown {
                // Let the registry go before the ticket leaves it (its drop takes the lock).
                drop(state);
                return Err(Error::shutdown());
            }
            if interrupt::pending() {
                drop(state);
                return Ok(ticket);
            }
            match state.subscriptions.readiness(channel) {
                Readiness::Pending => {}
                Readiness::Refused(refusal) => {
                    drop(state);
                    return Err(refusal_error(channel, &refusal));
                }
                Readiness::Ready | Readiness::Moved | Readiness::Gone => {
                    drop(state);
                    return Ok(ticket);
                }
            }
            let timed_out = match until {
                Some(until) => shared.changed.wait_until(&mut state, until).timed_out(),
                None => {
                    shared.changed.wait(&mut state);
                    false
                }
            };
            if timed_out {
                let silent = state.subscriptions.is_connected()
                    && state.generation == generation
                    && state.subscriptions.awaits_answer(channel);
                if silent && deadline.is_none_or(|d| Instant::now() < d) {
                    let why = format!("SUBSCRIBE got no answer within the command timeout ({:?})", timing.command);
                    shared.close_silent(state, generation, why);
                } else {
                    drop(state);
                }
                return Ok(ticket);
            }
        }
    }

    /// Closes the current pub/sub connection, for `why` (the master moved): the thread
    /// connects again, resubscribes and wakes every waiter to look at its lock.
    pub(crate) fn reconnect(&self, why: &str) {
        let state = self.shared.state.lock();
        if state.subscriptions.is_connected() {
            let generation = state.generation;
            self.shared.close_silent(state, generation, why.to_owned());
        }
    }

    pub(crate) fn stats(&self) -> SubscriberStats {
        let state = self.shared.state.lock();
        SubscriberStats {
            channels: state.subscriptions.channel_count(),
            waiters: state.subscriptions.waiter_count(),
            connected: state.subscriptions.is_connected(),
        }
    }

    /// Wakes every waiter (they see the shutdown and return), closes the connection and
    /// waits for the thread to end.
    pub(crate) fn shutdown(&self) {
        let shared = &self.shared;
        let mut state = shared.state.lock();
        state.shutdown = true;
        state.subscriptions.wake_everyone();
        shared.changed.notify_all();
        let writer = shared.writer.lock();
        drop(state);
        if let Some(writer) = writer.as_ref() {
            writer.stream.close();
        }
        drop(writer);
        self.thread.join();
    }
}

/// The error a waiter gets when Redis refused its channel's subscription.
fn refusal_error(channel: &str, refusal: &Refusal) -> Error {
    let kind = if refusal.code == "NOPERM" { ErrorKind::PermissionDenied } else { ErrorKind::Redis };
    Error::new(kind, format!("Redis refused to subscribe to channel {channel:?}: {} {}", refusal.code, refusal.detail))
}

impl Ticket {
    /// Parks until a release message (or a reconnect, a refusal, or shutdown) wakes this
    /// waiter, or until `until`. Returns whether it was woken; the wake-up is consumed.
    /// An interrupt of the calling thread ends the park too (the caller takes it).
    pub(crate) fn park(&self, until: Option<Instant>) -> bool {
        let waiter = Arc::clone(&self.waiter);
        let interrupted = move || {
            let _parked = waiter.parked.lock();
            waiter.cv.notify_all();
        };
        interrupt::parked(interrupted, || {
            let mut parked = self.waiter.parked.lock();
            while !parked.woken && !interrupt::pending() {
                match clock::earliest(until, parked.look_by) {
                    Some(end) => {
                        if self.waiter.cv.wait_until(&mut parked, end).timed_out() {
                            break;
                        }
                    }
                    None => self.waiter.cv.wait(&mut parked),
                }
            }
            parked.look_by = None;
            std::mem::replace(&mut parked.woken, false)
        })
    }

    /// `Err` when Redis refused this channel's subscription (after a reconnect, say, under
    /// a changed ACL rule): waiting on would wait for messages that never come.
    pub(crate) fn check(&self) -> Result<()> {
        match self.shared.state.lock().subscriptions.readiness(&self.channel) {
            Readiness::Refused(refusal) => Err(refusal_error(&self.channel, &refusal)),
            _ => Ok(()),
        }
    }

    /// Whether the subscription was confirmed, and silent, since before the caller's first
    /// attempt: nothing can have been missed, and the caller need not try again before it
    /// parks.
    pub(crate) fn fresh(&self) -> bool {
        self.fresh
    }

    /// Whether the channel moved to another node (a cluster's sharded pub/sub): waiting here
    /// would wait for messages that go elsewhere; join again through the topology.
    pub(crate) fn moved(&self) -> bool {
        self.shared.state.lock().subscriptions.readiness(&self.channel) == Readiness::Moved
    }

    /// Leaves having acquired the lock: a pending wake-up is not passed on.
    pub(crate) fn acquired(mut self) {
        self.acquired = true;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        // A wake-up meant for someone who would take the lock is passed on.
        let pass_on = !self.acquired && self.waiter.parked.lock().woken;
        state.subscriptions.leave(&self.channel, self.id, pass_on, Instant::now());
        telemetry::waiter(false);
    }
}

impl Shared {
    /// Writes `commands` in the order decided under `state`: takes the writer before
    /// letting the state go. A failed write closes the socket; the thread then reconnects
    /// and resubscribes whatever is wanted.
    fn send<'a>(&'a self, state: MutexGuard<'a, State>, commands: &[Command]) -> MutexGuard<'a, State> {
        if commands.is_empty() {
            return state;
        }
        let generation = state.generation;
        let mut writer = self.writer.lock();
        drop(state);
        if let Some(writer) = writer.as_mut().filter(|w| w.generation == generation) {
            let bytes = self.packed(commands);
            if writer.stream.write_all(&bytes).is_err() {
                writer.stream.close();
            }
        }
        drop(writer);
        self.state.lock()
    }

    /// The commands in Redis's protocol, one write: `SUBSCRIBE` as `SSUBSCRIBE` (and so on)
    /// for sharded pub/sub.
    fn packed(&self, commands: &[Command]) -> Vec<u8> {
        let sharded = self.pubsub.sharded();
        let mut bytes = Vec::new();
        for command in commands {
            let cmd = match command {
                Command::Subscribe(channels) => {
                    let mut cmd = redis::cmd(if sharded { "SSUBSCRIBE" } else { "SUBSCRIBE" });
                    cmd.arg(channels);
                    cmd
                }
                Command::Unsubscribe(channels) => {
                    let mut cmd = redis::cmd(if sharded { "SUNSUBSCRIBE" } else { "UNSUBSCRIBE" });
                    cmd.arg(channels);
                    cmd
                }
                Command::Ping => redis::cmd("PING"),
            };
            bytes.extend(cmd.get_packed_command());
        }
        bytes
    }

    /// Closes connection `generation`, which a waiter found silent; the thread reconnects.
    fn close_silent(&self, mut state: MutexGuard<'_, State>, generation: u64, why: String) {
        state.closed_because = Some(why);
        let writer = self.writer.lock();
        drop(state);
        if let Some(writer) = writer.as_ref().filter(|w| w.generation == generation) {
            writer.stream.close();
        }
    }

    fn run(self: Arc<Self>) {
        let mut backoff = Duration::from_millis(50);
        loop {
            if !self.wait_for_demand() {
                return;
            }
            let conn = match self.target.connect(self.timing.connect) {
                Ok(conn) => conn,
                Err(err) => {
                    self.events.subscriber_disconnected(&err);
                    let mut state = self.state.lock();
                    if !state.shutdown {
                        self.changed.wait_for(&mut state, backoff);
                    }
                    backoff = backoff.saturating_mul(2).min(Duration::from_secs(1));
                    continue;
                }
            };
            backoff = Duration::from_millis(50);
            let Connection { reader, parser, writer } = conn;
            let Some(reconnected) = self.install(writer) else { return };
            if reconnected {
                self.events.subscriber_reconnected();
            }
            let err = self.read_until_closed(reader, parser);
            if !self.uninstall() {
                return;
            }
            self.events.subscriber_disconnected(&err);
        }
    }

    /// Waits until some channel has waiters. False at shutdown.
    fn wait_for_demand(&self) -> bool {
        let mut state = self.state.lock();
        loop {
            if state.shutdown {
                return false;
            }
            if state.subscriptions.has_demand() {
                return true;
            }
            self.changed.wait(&mut state);
        }
    }

    /// Makes a new connection current and subscribes every wanted channel on it, all in
    /// one write. Returns whether this was a reconnect; `None` at shutdown.
    fn install(&self, stream: Stream) -> Option<bool> {
        let mut state = self.state.lock();
        if state.shutdown {
            // Shutdown already looked for a socket to close; close this one here.
            stream.close();
            return None;
        }
        state.generation += 1;
        state.closed_because = None;
        let reconnected = state.generation > 1;
        let commands = state.subscriptions.connected();
        let generation = state.generation;
        *self.writer.lock() = Some(Writer { stream, generation });
        drop(self.send(state, &commands));
        self.changed.notify_all();
        Some(reconnected)
    }

    /// Reads replies and messages until the connection fails, is closed, or stays silent
    /// through a `PING`.
    fn read_until_closed(&self, mut reader: Stream, mut parser: redis::Parser) -> Error {
        let timing = self.timing;
        let mut heard = Instant::now();
        // When an unanswered PING must have been answered by.
        let mut ping_due: Option<Instant> = None;
        loop {
            // Subscriptions kept for a next waiter end when their time is up; only a
            // connection that carries subscriptions is watched, an idle one blocks.
            let (active, kept_until) = {
                let mut state = self.state.lock();
                let commands = state.subscriptions.expire(Instant::now());
                let state = self.send(state, &commands);
                (state.subscriptions.is_active(), state.subscriptions.next_expiry())
            };
            let ping_at = match (active, ping_due) {
                (false, _) => None,
                (true, Some(due)) => Some(due),
                (true, None) => heard.checked_add(timing.ping_interval),
            };
            // While subscriptions exist, look again at least every `LINGER`: a waiter that
            // leaves may start keeping one while this thread is reading.
            let wake_at = if active {
                clock::earliest(clock::earliest(ping_at, kept_until), clock::deadline_in(LINGER))
            } else {
                ping_at
            };
            let timeout = wake_at.map(|at| at.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)));
            if let Err(err) = reader.set_read_timeout(timeout) {
                return Error::new(ErrorKind::Redis, format!("the pub/sub connection failed: {err}")).connection();
            }
            match parser.parse_value(&mut reader) {
                Ok(value) => {
                    heard = Instant::now();
                    if self.handle(value) {
                        ping_due = None;
                    }
                }
                Err(err) if err.is_timeout() => {
                    let now = Instant::now();
                    if ping_due.is_some_and(|due| now >= due) {
                        return Error::new(
                            ErrorKind::Timeout,
                            format!("the pub/sub connection did not answer PING within {:?}", timing.command),
                        )
                        .connection();
                    }
                    if ping_due.is_none() && active && ping_at.is_some_and(|at| now >= at) {
                        ping_due = clock::deadline_in(timing.command);
                        let mut state = self.state.lock();
                        let ping: Vec<Command> = state.subscriptions.ping().into_iter().collect();
                        drop(self.send(state, &ping));
                    }
                }
                Err(err) => {
                    let why = self.state.lock().closed_because.take();
                    let message = match why {
                        Some(why) => format!("the pub/sub connection was closed: {why}"),
                        None => format!("the pub/sub connection was lost: {err}"),
                    };
                    return Error::new(ErrorKind::Redis, message).connection();
                }
            }
        }
    }

    /// Forgets the lost connection. False at shutdown.
    fn uninstall(&self) -> bool {
        let mut state = self.state.lock();
        state.subscriptions.disconnected();
        if let Some(writer) = self.writer.lock().take() {
            writer.stream.close();
        }
        self.changed.notify_all();
        !state.shutdown
    }

    /// Acts on one value read from the connection. Returns whether it answered a `PING`.
    fn handle(&self, value: redis::Value) -> bool {
        let Some(reply) = reply_of(value) else { return false };
        let mut state = self.state.lock();
        if reply == Reply::Pong {
            return state.subscriptions.pong();
        }
        let commands = state.subscriptions.read(reply, Instant::now());
        let state = self.send(state, &commands);
        self.changed.notify_all();
        drop(state);
        false
    }
}

/// What a value read from a pub/sub connection is; `None` for anything else.
fn reply_of(value: redis::Value) -> Option<Reply> {
    let items = match value {
        redis::Value::ServerError(refusal) => {
            let refusal = redis::RedisError::from(refusal);
            let code = refusal.code().unwrap_or("ERR").to_owned();
            let detail = refusal.detail().unwrap_or("").to_owned();
            return Some(Reply::Error(Refusal { code, detail }));
        }
        // Outside subscribed mode (every channel was just left) a `PING` gets a plain
        // `+PONG`.
        redis::Value::SimpleString(reply) if reply.eq_ignore_ascii_case("pong") => return Some(Reply::Pong),
        redis::Value::Array(items) => items,
        _ => return None,
    };
    let mut items = items.into_iter();
    let Some(redis::Value::BulkString(kind)) = items.next() else { return None };
    if kind == b"pong" {
        return Some(Reply::Pong);
    }
    let Some(redis::Value::BulkString(channel)) = items.next() else { return None };
    let channel = String::from_utf8_lossy(&channel).into_owned();
    // Sharded pub/sub names its replies and messages with an `s` in front.
    let kind: &[u8] = match kind.as_slice() {
        b"smessage" => b"message",
        b"ssubscribe" => b"subscribe",
        b"sunsubscribe" => b"unsubscribe",
        other => other,
    };
    match kind {
        b"message" => match items.next() {
            Some(redis::Value::BulkString(payload)) => Some(Reply::Message { channel, payload }),
            _ => None,
        },
        b"subscribe" => Some(Reply::Subscribed(channel)),
        b"unsubscribe" => Some(Reply::Unsubscribed(channel)),
        _ => None,
    }
}
