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
//! this client's beside the lock's, all three in one command ([`Wake::Named`]): a release
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
//! Per channel:
//!
//! | state                         | event                         | next |
//! |-------------------------------|-------------------------------|------|
//! | absent                        | first waiter joins            | wanted, `SUBSCRIBE` sent (or sent on connect) |
//! | wanted, confirmation pending  | `subscribe` reply read        | ready: waiters may retry |
//! | wanted, confirmation pending  | error reply to its `SUBSCRIBE`| refused: every waiter gets the error |
//! | wanted, confirmation pending  | no reply within the command timeout | connection closed; reconnect |
//! | ready                         | message                       | ready, one (or every) waiter woken |
//! | ready                         | a message on this client's own channel beside a lock's | ready, one waiter woken |
//! | ready                         | a fair lock's `-(n + 1)`      | ready, its waiter's park ends within n ms |
//! | ready                         | last waiter leaves            | kept (lingering) for one second |
//! | kept                          | a waiter joins                | ready; if confirmed, and silent, since before its first attempt, it parks without trying again |
//! | kept                          | its second is up              | unwanted, `UNSUBSCRIBE` sent |
//! | wanted, not ready             | last waiter leaves            | unwanted, `UNSUBSCRIBE` sent if something was subscribed |
//! | unwanted, replies pending     | a waiter joins                | wanted, `SUBSCRIBE` sent again |
//! | unwanted, nothing pending     | -                             | removed |
//! | any                           | connection lost               | nothing pending; wanted ones resubscribed on reconnect |
//!
//! Lock order: the registry state, then the writer. Socket writes happen with only the
//! writer held, and in the order the registry decided them.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::background::Background;
use crate::clock;
use crate::error::{Error, ErrorKind, Result};
use crate::events::Events;
use crate::interrupt;
use crate::keys::{self, Beside};
use crate::transport::conn::PubSub;
use crate::transport::net::{Connection, Stream, Target};

/// How long a subscription is kept after its last waiter left, for the next one: a thread
/// that takes the same lock again soon (a loop) then needs no `SUBSCRIBE`, no confirmation
/// and no second attempt.
const LINGER: Duration = Duration::from_secs(1);

/// How a channel's messages wake its waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A lock's release: one waiter, or every waiter for `1` (a read-write lock's write
    /// release, after which every reader may enter).
    Lock,
    /// A reentrant or fenced lock's release, which names the one redlease client to wake
    /// (see `wake_waiters` in `lua/prelude.lua`). The subscription covers two more
    /// channels beside the lock's (`keys::beside_lock_channel`): this client's own,
    /// `redlease_wake:{name}:<token>`, where a message names this client (it wakes one
    /// waiter), and `redlease_mark:{name}`, which tells releases that the lock's channel
    /// has a redlease subscriber here. The lock's channel carries messages only when
    /// someone else listens there too: a name then `0`, which every redlease client takes
    /// as handled, or a `0` alone (a Redisson client's release, or nobody named), which
    /// wakes one waiter, as for `Lock`.
    Named,
    /// A fair lock waiter's own channel: `0` wakes it (its turn); a negative number
    /// `-(n + 1)` (it became the head while the lock is held) wakes nobody but says the
    /// holder's lease ends in n ms, so the waiter polls by then at the latest.
    Turn,
    /// A semaphore's count of available permits: waiters in order whose permits fit in the
    /// count, until it is used up.
    Permits,
    /// A count-down latch: `0` (open) wakes every waiter; `1` (a new count) wakes none.
    Latch,
    /// Any message wakes every waiter: a group lock's release (`0`, on the lock channel of
    /// the group's name: each waiter waits for values of its own and only it can tell
    /// whether they are free now; Redisson wakes one per process, maybe the wrong one), and
    /// an election's change (its observers each re-read who leads).
    All,
}

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
    /// Classic `SUBSCRIBE`, or sharded `SSUBSCRIBE` (a cluster node's slots).
    pubsub: PubSub,
    /// The client's wake token, as a release names it (see [`Wake::Named`]).
    token: String,
    /// Counts the messages and confirmations read (shared by every subscriber of a client):
    /// a waiter reads it before its first attempt, and a subscription confirmed, and
    /// silent, since before then needs no second attempt.
    seq: Arc<AtomicU64>,
    timing: Timing,
    events: Events,
    state: Mutex<State>,
    /// Signalled on confirmations, refusals, connection changes and new demand.
    changed: Condvar,
    /// The writing half of the current connection.
    writer: Mutex<Option<Writer>>,
}

#[derive(Default)]
struct State {
    channels: HashMap<String, Channel>,
    connected: bool,
    ever_connected: bool,
    /// Counts connections, so that a waiter closes only the one it found silent.
    generation: u64,
    /// Why a waiter closed the current connection, for the disconnect event.
    closed_because: Option<String>,
    shutdown: bool,
}

/// The writing half, and the commands written on it whose replies are still to come, in
/// order: replies come in the same order, which is how an error reply finds its command.
struct Writer {
    stream: Stream,
    generation: u64,
    expected: VecDeque<Expected>,
}

enum Expected {
    /// A `SUBSCRIBE` of a channel and the ones its subscription covers (see [`Wake::Named`]),
    /// `replies` confirmations still to come (one error reply stands for them all).
    Subscribe {
        channel: String,
        replies: usize,
    },
    Unsubscribe {
        replies: usize,
    },
    Ping,
}

/// Which part of a subscription a channel read from Redis is (see [`Wake::Named`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    /// The channel itself.
    Main,
    /// A channel beside a lock's: this client's own wake-up channel, or the mark.
    Beside(Beside),
}

struct Channel {
    /// How messages wake the waiters (the same for every waiter of a channel: a channel's
    /// name says what it is).
    wake: Wake,
    waiters: VecDeque<Arc<Waiter>>,
    /// The last command decided for this channel is `SUBSCRIBE`.
    wanted: bool,
    /// `SUBSCRIBE`s sent on the current connection and not yet answered.
    pending_subs: u32,
    /// `UNSUBSCRIBE`s sent on the current connection and not yet answered.
    pending_unsubs: u32,
    /// Redis confirmed a subscription on the current connection (and no unsubscribe since).
    confirmed: bool,
    /// Wake every waiter when the subscription is confirmed (after a reconnect).
    wake_all_on_confirm: bool,
    /// Redis refused the last `SUBSCRIBE`: its error reply.
    refused: Option<redis::RedisError>,
    /// `Named`: a release just named a client; the `0` that follows is handled.
    named: bool,
    /// The count (`Shared::seq`) when Redis last confirmed the subscription.
    confirmed_seq: u64,
    /// The count when the last message for this channel was read.
    message_seq: u64,
    /// No waiter is left, and the subscription is kept until then for the next one (a
    /// thread that takes the same lock again soon, as loops do).
    linger_until: Option<Instant>,
    /// The channel's slot is served by another node now (a sharded subscription answered
    /// `MOVED`, or Redis ended it as the slot left): its waiters join again where the
    /// cluster says.
    moved: bool,
}

impl Channel {
    fn new(wake: Wake) -> Channel {
        Channel {
            wake,
            waiters: VecDeque::new(),
            wanted: false,
            pending_subs: 0,
            pending_unsubs: 0,
            confirmed: false,
            wake_all_on_confirm: false,
            refused: None,
            named: false,
            confirmed_seq: 0,
            message_seq: 0,
            linger_until: None,
            moved: false,
        }
    }

    /// Wakes the waiters a message `payload` on the channel itself is for.
    fn deliver(&mut self, payload: &[u8]) {
        match self.wake {
            Wake::Lock if payload == b"1" => self.wake_all(),
            Wake::Lock => {
                self.wake_one();
            }
            Wake::Named if payload == b"0" => {
                if !std::mem::take(&mut self.named) {
                    self.wake_one();
                }
            }
            Wake::Named => {
                // A name: the named client was woken on its own channel.
                self.named = true;
            }
            Wake::Turn => match parse_i64(payload) {
                Some(held) if held < 0 => {
                    let poll_by = clock::deadline_in(Duration::from_millis(held.unsigned_abs() - 1));
                    for waiter in &self.waiters {
                        waiter.poll_by(poll_by);
                    }
                }
                _ => {
                    self.wake_one();
                }
            },
            Wake::Latch if payload == b"0" => self.wake_all(),
            Wake::All => self.wake_all(),
            Wake::Latch => {}
            Wake::Permits => {
                // In order, every waiter whose permits fit in what is left; one that wants
                // more is passed over, not a wall for smaller ones behind it. A waiter
                // woken before counts too: it tries again after this message.
                let available = parse_i64(payload).unwrap_or(1);
                let mut left = u64::try_from(available).unwrap_or(0);
                for waiter in &self.waiters {
                    if left == 0 {
                        break;
                    }
                    if waiter.weight <= left {
                        waiter.wake();
                        left -= waiter.weight;
                    }
                }
            }
        }
    }

    /// Another node serves the channel now: nothing is wanted here any more, and every
    /// waiter is woken to join again where the cluster says.
    fn moved(&mut self) {
        self.moved = true;
        self.wanted = false;
        self.wake_all_on_confirm = false;
        self.wake_all();
    }

    /// A lingering subscription (no waiter left) is wanted no more.
    fn stop_lingering(&mut self) {
        if self.waiters.is_empty() && self.linger_until.take().is_some() {
            self.wanted = false;
        }
    }

    fn is_ready(&self) -> bool {
        self.wanted && self.pending_subs == 0 && self.confirmed
    }

    fn is_idle(&self) -> bool {
        self.waiters.is_empty() && !self.wanted && self.pending_subs == 0 && self.pending_unsubs == 0
    }

    /// Whether this channel keeps the connection busy: subscribed, or about to change.
    fn is_active(&self) -> bool {
        self.wanted || self.confirmed || self.pending_subs > 0 || self.pending_unsubs > 0
    }

    /// Wakes the first waiter not already woken; false when there is none.
    fn wake_one(&self) -> bool {
        self.waiters.iter().any(|w| w.wake())
    }

    fn wake_all(&self) {
        for waiter in &self.waiters {
            waiter.wake();
        }
    }
}

/// A message's number, if it is one.
fn parse_i64(payload: &[u8]) -> Option<i64> {
    std::str::from_utf8(payload).ok()?.parse().ok()
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
    /// It must look at its lock by then at the latest ([`Wake::Turn`]); cleared when a park
    /// ends, since the look that follows learns the lock's state afresh.
    poll_by: Option<Instant>,
}

impl Waiter {
    fn new(weight: u64) -> Waiter {
        Waiter { parked: Mutex::new(Parked::default()), cv: Condvar::new(), weight }
    }

    /// Sets the wake-up flag; false when it was already set.
    fn wake(&self) -> bool {
        let mut parked = self.parked.lock();
        if parked.woken {
            return false;
        }
        parked.woken = true;
        self.cv.notify_one();
        true
    }

    /// Brings the end of its park forward to `at` (never later than it was).
    fn poll_by(&self, at: Option<Instant>) {
        let mut parked = self.parked.lock();
        parked.poll_by = clock::earliest(parked.poll_by, at);
        self.cv.notify_one();
    }
}

/// A thread's place among the waiters of one channel. Dropping it leaves.
pub(crate) struct Ticket {
    shared: Arc<Shared>,
    channel: String,
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
    pub(crate) fn start(
        target: Target,
        pubsub: PubSub,
        token: u64,
        seq: Arc<AtomicU64>,
        timing: Timing,
        events: Events,
    ) -> Result<Subscriber> {
        let shared = Arc::new(Shared {
            target,
            pubsub,
            token: token.to_string(),
            seq,
            timing,
            events,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            writer: Mutex::new(None),
        });
        let worker = Arc::clone(&shared);
        let thread = Background::spawn("redlease-subscriber", move || worker.run())?;
        Ok(Subscriber { shared, thread })
    }

    /// Joins the waiters of `channel`, subscribing it if this is the first, and waits until
    /// Redis has confirmed the subscription, or until `deadline`, or at most the command
    /// timeout (plus the connect timeout when the connection is not open yet). A
    /// subscription still unanswered then means a silent connection: it is closed, to be
    /// opened again. The caller's park is bounded by the lock's TTL, so a waiter whose
    /// subscription is late still gets its turn. A refusal by Redis is returned at once.
    ///
    /// `since` is the count of [`Subscriber::seq`] read before the caller's first attempt:
    /// when the subscription was confirmed before it and no message came since, every
    /// release after that attempt will reach this waiter, and the ticket says so
    /// ([`Ticket::fresh`]): the caller parks without trying again.
    pub(crate) fn join(
        &self,
        channel: &str,
        deadline: Option<Instant>,
        wake: Wake,
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
        let (connected, generation) = (state.connected, state.generation);
        let ch = state.channels.entry(channel.to_owned()).or_insert_with(|| Channel::new(wake));
        let fresh = ch.is_ready() && !ch.moved && ch.confirmed_seq <= since && ch.message_seq <= since;
        ch.linger_until = None;
        ch.waiters.push_back(Arc::clone(&waiter));
        let ticket = Ticket { shared: Arc::clone(shared), channel: channel.to_owned(), waiter, acquired: false, fresh };
        if fresh {
            return Ok(ticket);
        }
        if !ch.wanted {
            ch.wanted = true;
            ch.refused = None;
            ch.moved = false;
            if connected {
                ch.pending_subs += 1;
                let (subscribe, expected) = shared.subscribe(channel, wake);
                state = shared.send(state, &subscribe, expected);
            } else {
                // The thread subscribes every wanted channel as soon as it is connected.
                shared.changed.notify_all();
            }
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
        interrupt::parked(interrupted, || self.confirmed(ticket, channel, until, deadline, generation))
    }

    /// Waits until the subscription of the ticket's channel is confirmed (or refused, or
    /// moved), at most until `until`; a silence past the command timeout closes the
    /// connection (`generation`).
    fn confirmed(
        &self,
        ticket: Ticket,
        channel: &str,
        until: Option<Instant>,
        deadline: Option<Instant>,
        generation: u64,
    ) -> Result<Ticket> {
        let shared = &self.shared;
        let timing = shared.timing;
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
            let Some(ch) = state.channels.get(channel) else { return Ok(ticket) };
            if let Some(refusal) = &ch.refused {
                let err = refusal_error(channel, refusal);
                drop(state);
                return Err(err);
            }
            if ch.is_ready() || ch.moved {
                return Ok(ticket);
            }
            let timed_out = match until {
                Some(until) => shared.changed.wait_until(&mut state, until).timed_out(),
                None => {
                    shared.changed.wait(&mut state);
                    false
                }
            };
            if timed_out {
                let silent = state.connected
                    && state.generation == generation
                    && state.channels.get(channel).is_some_and(|c| c.pending_subs > 0);
                if silent && deadline.is_none_or(|d| Instant::now() < d) {
                    let why = format!("SUBSCRIBE got no answer within the command timeout ({:?})", timing.command);
                    shared.close_silent(state, generation, why);
                }
                return Ok(ticket);
            }
        }
    }

    /// Closes the current pub/sub connection, for `why` (the master moved): the thread
    /// connects again, resubscribes and wakes every waiter to look at its lock.
    pub(crate) fn reconnect(&self, why: &str) {
        let state = self.shared.state.lock();
        if state.connected {
            let generation = state.generation;
            self.shared.close_silent(state, generation, why.to_owned());
        }
    }

    pub(crate) fn stats(&self) -> SubscriberStats {
        let state = self.shared.state.lock();
        SubscriberStats {
            channels: state.channels.len(),
            waiters: state.channels.values().map(|c| c.waiters.len()).sum(),
            connected: state.connected,
        }
    }

    /// Wakes every waiter (they see the shutdown and return), closes the connection and
    /// waits for the thread to end.
    pub(crate) fn shutdown(&self) {
        let shared = &self.shared;
        let mut state = shared.state.lock();
        state.shutdown = true;
        for ch in state.channels.values() {
            ch.wake_all();
        }
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
fn refusal_error(channel: &str, refusal: &redis::RedisError) -> Error {
    let kind = if refusal.code() == Some("NOPERM") { ErrorKind::PermissionDenied } else { ErrorKind::Redis };
    let detail = refusal.detail().unwrap_or("");
    let code = refusal.code().unwrap_or("ERR");
    Error::new(kind, format!("Redis refused to subscribe to channel {channel:?}: {code} {detail}"))
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
                match clock::earliest(until, parked.poll_by) {
                    Some(end) => {
                        if self.waiter.cv.wait_until(&mut parked, end).timed_out() {
                            break;
                        }
                    }
                    None => self.waiter.cv.wait(&mut parked),
                }
            }
            parked.poll_by = None;
            std::mem::replace(&mut parked.woken, false)
        })
    }

    /// `Err` when Redis refused this channel's subscription (after a reconnect, say, under
    /// a changed ACL rule): waiting on would wait for messages that never come.
    pub(crate) fn check(&self) -> Result<()> {
        let state = self.shared.state.lock();
        match state.channels.get(&self.channel).and_then(|c| c.refused.as_ref()) {
            Some(refusal) => Err(refusal_error(&self.channel, refusal)),
            None => Ok(()),
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
        self.shared.state.lock().channels.get(&self.channel).is_some_and(|ch| ch.moved)
    }

    /// Leaves having acquired the lock: a pending wake-up is not passed on.
    pub(crate) fn acquired(mut self) {
        self.acquired = true;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let shared = &self.shared;
        let mut state = shared.state.lock();
        let connected = state.connected;
        let Some(ch) = state.channels.get_mut(&self.channel) else { return };
        ch.waiters.retain(|w| !Arc::ptr_eq(w, &self.waiter));
        if !self.acquired && self.waiter.parked.lock().woken {
            // This wake-up was meant for someone who would take the lock; pass it on.
            ch.wake_one();
        }
        if ch.waiters.is_empty() && ch.wanted && connected && ch.is_ready() && !ch.moved {
            // Kept a moment for the next waiter (the subscriber thread ends it).
            ch.linger_until = clock::deadline_in(LINGER);
            return;
        }
        if ch.waiters.is_empty() && ch.wanted {
            ch.wanted = false;
            ch.wake_all_on_confirm = false;
            // Nothing to undo when Redis holds no subscription and none is on its way.
            if connected && (ch.confirmed || ch.pending_subs > 0) {
                ch.pending_unsubs += 1;
                let (unsubscribe, expected) = shared.unsubscribe(&self.channel, ch.wake);
                drop(shared.send(state, &unsubscribe, expected));
                return;
            }
        }
        if ch.is_idle() {
            state.channels.remove(&self.channel);
        }
    }
}

impl Shared {
    /// The channels a subscription to `channel` covers, the channel itself last (so that
    /// its confirmation, which makes the subscription ready, comes last). One command
    /// subscribes them all at once: a release never sees some of them without the others.
    fn covered(&self, channel: &str, wake: Wake) -> Vec<String> {
        match wake {
            Wake::Named => vec![
                keys::beside_lock_channel(channel, Beside::Mark, &self.token),
                keys::beside_lock_channel(channel, Beside::Wake, &self.token),
                channel.to_owned(),
            ],
            _ => vec![channel.to_owned()],
        }
    }

    /// `SUBSCRIBE` (`SSUBSCRIBE` for sharded pub/sub) of the channels a subscription to
    /// `channel` covers, and the replies it expects.
    fn subscribe(&self, channel: &str, wake: Wake) -> (redis::Cmd, Expected) {
        let (cmd, replies) = self.on_covered("SUBSCRIBE", channel, wake);
        (cmd, Expected::Subscribe { channel: channel.to_owned(), replies })
    }

    /// `UNSUBSCRIBE` (`SUNSUBSCRIBE` for sharded pub/sub) of the same channels.
    fn unsubscribe(&self, channel: &str, wake: Wake) -> (redis::Cmd, Expected) {
        let (cmd, replies) = self.on_covered("UNSUBSCRIBE", channel, wake);
        (cmd, Expected::Unsubscribe { replies })
    }

    /// `command` (its sharded form, with an `S` in front, for sharded pub/sub) on every
    /// channel a subscription to `channel` covers, and how many replies it gets.
    fn on_covered(&self, command: &str, channel: &str, wake: Wake) -> (redis::Cmd, usize) {
        let channels = self.covered(channel, wake);
        let mut cmd =
            if self.pubsub == PubSub::Sharded { redis::cmd(&format!("S{command}")) } else { redis::cmd(command) };
        cmd.arg(&channels);
        (cmd, channels.len())
    }

    /// The subscription a channel read from Redis belongs to, and which part of it the
    /// channel is.
    fn part_of(&self, channel: String) -> (String, Part) {
        match keys::lock_channel_of(&channel, &self.token) {
            Some((main, beside)) => (main, Part::Beside(beside)),
            None => (channel, Part::Main),
        }
    }

    /// Writes a command in the order decided under `state`: takes the writer before letting
    /// the state go. A failed write closes the socket; the thread then reconnects and
    /// resubscribes whatever is wanted.
    fn send<'a>(&'a self, state: MutexGuard<'a, State>, cmd: &redis::Cmd, expected: Expected) -> MutexGuard<'a, State> {
        let mut writer = self.writer.lock();
        drop(state);
        if let Some(writer) = writer.as_mut() {
            writer.expected.push_back(expected);
            if writer.stream.write_all(&cmd.get_packed_command()).is_err() {
                writer.stream.close();
            }
        }
        drop(writer);
        self.state.lock()
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

    /// Waits until some channel is wanted. False at shutdown.
    fn wait_for_demand(&self) -> bool {
        let mut state = self.state.lock();
        loop {
            if state.shutdown {
                return false;
            }
            if state.channels.values().any(|c| c.wanted) {
                return true;
            }
            self.changed.wait(&mut state);
        }
    }

    /// Makes a new connection current and subscribes every wanted channel on it, one
    /// `SUBSCRIBE` each (so that a refusal names one channel), all in one write. Returns
    /// whether this was a reconnect; `None` at shutdown.
    fn install(&self, stream: Stream) -> Option<bool> {
        let mut state = self.state.lock();
        if state.shutdown {
            // Shutdown already looked for a socket to close; close this one here.
            stream.close();
            return None;
        }
        let reconnected = std::mem::replace(&mut state.ever_connected, true);
        state.connected = true;
        state.generation += 1;
        state.closed_because = None;
        let mut wanted = Vec::new();
        for (name, ch) in state.channels.iter_mut() {
            ch.pending_unsubs = 0;
            ch.confirmed = false;
            ch.named = false;
            ch.stop_lingering();
            ch.pending_subs = u32::from(ch.wanted);
            if ch.wanted {
                ch.refused = None;
                ch.wake_all_on_confirm = reconnected;
                wanted.push((name.clone(), ch.wake));
            }
        }
        state.channels.retain(|_, ch| !ch.is_idle());
        let mut slot = self.writer.lock();
        let generation = state.generation;
        drop(state);
        let mut bytes = Vec::new();
        let mut expected = VecDeque::with_capacity(wanted.len());
        for (name, wake) in wanted {
            let (subscribe, answer) = self.subscribe(&name, wake);
            bytes.extend(subscribe.get_packed_command());
            expected.push_back(answer);
        }
        let writer = slot.insert(Writer { stream, generation, expected });
        if !bytes.is_empty() && writer.stream.write_all(&bytes).is_err() {
            writer.stream.close();
        }
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
            // Subscriptions kept for a next waiter end when their time is up.
            self.end_lingering();
            // Only a connection that carries subscriptions is watched; an idle one blocks.
            let (active, lingering) = {
                let state = self.state.lock();
                let active = state.channels.values().any(Channel::is_active);
                (active, state.channels.values().filter_map(|c| c.linger_until).min())
            };
            let ping_at = match (active, ping_due) {
                (false, _) => None,
                (true, Some(due)) => Some(due),
                (true, None) => heard.checked_add(timing.ping_interval),
            };
            // While subscriptions exist, look again at least every `LINGER`: a waiter that
            // leaves may start keeping one while this thread is reading.
            let wake_at = if active {
                clock::earliest(clock::earliest(ping_at, lingering), clock::deadline_in(LINGER))
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
                        drop(self.send(self.state.lock(), &redis::cmd("PING"), Expected::Ping));
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

    /// Unsubscribes the channels kept for a next waiter whose time is up.
    fn end_lingering(&self) {
        let now = Instant::now();
        let mut state = self.state.lock();
        let connected = state.connected;
        let ended: Vec<String> = state
            .channels
            .iter_mut()
            .filter(|(_, ch)| ch.waiters.is_empty() && ch.linger_until.is_some_and(|until| until <= now))
            .map(|(name, ch)| {
                ch.linger_until = None;
                ch.wanted = false;
                name.clone()
            })
            .collect();
        for name in ended {
            let Some(ch) = state.channels.get_mut(&name) else { continue };
            if connected && (ch.confirmed || ch.pending_subs > 0) {
                ch.pending_unsubs += 1;
                let (unsubscribe, expected) = self.unsubscribe(&name, ch.wake);
                state = self.send(state, &unsubscribe, expected);
            } else if ch.is_idle() {
                state.channels.remove(&name);
            }
        }
    }

    /// Forgets the lost connection. False at shutdown.
    fn uninstall(&self) -> bool {
        let mut state = self.state.lock();
        state.connected = false;
        if let Some(writer) = self.writer.lock().take() {
            writer.stream.close();
        }
        for ch in state.channels.values_mut() {
            ch.pending_subs = 0;
            ch.pending_unsubs = 0;
            ch.confirmed = false;
            ch.stop_lingering();
        }
        state.channels.retain(|_, ch| !ch.is_idle());
        self.changed.notify_all();
        !state.shutdown
    }

    /// Acts on one value read from the connection. Returns whether it answered a `PING`.
    fn handle(&self, value: redis::Value) -> bool {
        let mut state = self.state.lock();
        let items = match value {
            redis::Value::ServerError(refusal) => {
                let Some(Expected::Subscribe { channel, .. }) = self.answered(&state, true) else { return false };
                if let Some(ch) = state.channels.get_mut(&channel) {
                    ch.pending_subs = ch.pending_subs.saturating_sub(1);
                    let refusal = redis::RedisError::from(refusal);
                    if matches!(refusal.code(), Some("MOVED" | "ASK")) {
                        // Sharded: another node serves the channel's slot.
                        ch.moved();
                    } else {
                        ch.refused = Some(refusal);
                        ch.wake_all();
                    }
                    self.changed.notify_all();
                }
                return false;
            }
            // Outside subscribed mode (every channel was just left) a `PING` gets a plain
            // `+PONG`.
            redis::Value::SimpleString(reply) if reply.eq_ignore_ascii_case("pong") => {
                return matches!(self.answered(&state, true), Some(Expected::Ping));
            }
            redis::Value::Array(items) => items,
            _ => return false,
        };
        let mut items = items.into_iter();
        let kind = match items.next() {
            Some(redis::Value::BulkString(kind)) => kind,
            _ => return false,
        };
        // Sharded pub/sub names its replies and messages with an `s` in front.
        let kind = match kind.as_slice() {
            b"smessage" => &b"message"[..],
            b"ssubscribe" => b"subscribe",
            b"sunsubscribe" => b"unsubscribe",
            other => other,
        };
        if kind == b"pong" {
            return matches!(self.answered(&state, true), Some(Expected::Ping));
        }
        let (channel, part) = match items.next() {
            Some(redis::Value::BulkString(channel)) => self.part_of(String::from_utf8_lossy(&channel).into_owned()),
            _ => return false,
        };
        // An `unsubscribe` that no `UNSUBSCRIBE` asked for: Redis ended a sharded
        // subscription because the channel's slot left this node.
        let unasked = kind == b"unsubscribe"
            && self.pubsub == PubSub::Sharded
            && state.channels.get(&channel).is_none_or(|ch| ch.pending_unsubs == 0);
        if kind != b"message" && !unasked {
            // A confirmation: it answers the oldest command, which is done once every
            // channel it named is confirmed; the subscription's own channel comes last.
            self.answered(&state, false);
            if part != Part::Main {
                return false;
            }
        }
        let Some(ch) = state.channels.get_mut(&channel) else { return false };
        match kind {
            b"message" => {
                ch.message_seq = self.seq.fetch_add(1, Ordering::AcqRel) + 1;
                if let Some(redis::Value::BulkString(payload)) = items.next() {
                    match part {
                        Part::Main => ch.deliver(&payload),
                        // When the waiter is gone, its leaving passes the wake-up on.
                        Part::Beside(Beside::Wake) => drop(ch.wake_one()),
                        Part::Beside(Beside::Mark) => {}
                    }
                }
            }
            b"subscribe" => {
                ch.pending_subs = ch.pending_subs.saturating_sub(1);
                ch.confirmed = true;
                ch.confirmed_seq = self.seq.fetch_add(1, Ordering::AcqRel) + 1;
                if ch.is_ready() && std::mem::take(&mut ch.wake_all_on_confirm) {
                    ch.wake_all();
                }
                self.changed.notify_all();
            }
            b"unsubscribe" if unasked => {
                ch.confirmed = false;
                ch.moved();
                if ch.is_idle() {
                    state.channels.remove(&channel);
                }
                self.changed.notify_all();
            }
            b"unsubscribe" => {
                ch.pending_unsubs = ch.pending_unsubs.saturating_sub(1);
                ch.confirmed = false;
                if ch.is_idle() {
                    state.channels.remove(&channel);
                }
            }
            _ => {}
        }
        false
    }

    /// The command that the reply just read answers (the oldest still unanswered), once it
    /// is answered in full: a confirmation answers one of the channels it named (`whole`
    /// false), an error reply or a `PONG` all of it.
    fn answered(&self, _state: &MutexGuard<'_, State>, whole: bool) -> Option<Expected> {
        let mut writer = self.writer.lock();
        let expected = &mut writer.as_mut()?.expected;
        if let Some(Expected::Subscribe { replies, .. } | Expected::Unsubscribe { replies }) = expected.front_mut()
            && !whole
            && *replies > 1
        {
            *replies -= 1;
            return None;
        }
        expected.pop_front()
    }
}
