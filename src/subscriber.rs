//! The subscriber thread and the waiter registry: how a thread waiting for a lock learns,
//! within about one network round trip, that the lock was released.
//!
//! One pub/sub connection per client. Subscriptions are counted per channel: the first
//! local waiter of a lock subscribes, later ones join, the last one leaving unsubscribes.
//! A waiter writes `SUBSCRIBE` itself (to a clone of the socket) and waits until the
//! subscriber thread has read Redis's confirmation; only then does it try the lock again,
//! so a release between its failed attempt and its subscription cannot be missed.
//!
//! A release message wakes one local waiter (payload `1`, a read-write lock's write
//! release, wakes them all). A waiter that was woken but leaves without the lock passes its
//! wake-up on. After a reconnect every channel is subscribed again and, once Redis confirms
//! it, every waiter of that channel is woken to check its lock, because messages may have
//! been lost meanwhile. Waiters never depend on a message alone: each park is bounded by
//! the holder's TTL and the caller's deadline.
//!
//! Per channel:
//!
//! | state                         | event                         | next |
//! |-------------------------------|-------------------------------|------|
//! | absent                        | first waiter joins            | wanted, `SUBSCRIBE` sent (or sent on connect) |
//! | wanted, confirmation pending  | `subscribe` reply read        | ready: waiters may retry |
//! | ready                         | message                       | ready, one (or every) waiter woken |
//! | wanted, any                   | last waiter leaves            | unwanted, `UNSUBSCRIBE` sent |
//! | unwanted, replies pending     | a waiter joins                | wanted, `SUBSCRIBE` sent again |
//! | unwanted, nothing pending     | -                             | removed |
//! | any                           | connection lost               | nothing pending; wanted ones resubscribed on reconnect |
//!
//! Lock order: the registry state, then the writer. Socket writes happen with only the
//! writer held, and in the order the registry decided them. The thread blocks on a read
//! with no timeout, and waits for demand with no timeout: an idle client wakes nobody.

use std::collections::{HashMap, VecDeque};
use std::io::BufReader;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::background::Background;
use crate::clock;
use crate::error::{Error, ErrorKind, Result};
use crate::events::Events;
use crate::net::{Stream, Target};
use crate::resp::{self, Value};

/// Payload of a release message that wakes every waiter (a write release of a read-write lock).
const WAKE_ALL: &[u8] = b"1";
/// Most channels named in one `SUBSCRIBE` when resubscribing after a reconnect.
const SUBSCRIBE_CHUNK: usize = 512;

pub(crate) struct Subscriber {
    shared: Arc<Shared>,
    thread: Background,
}

struct Shared {
    target: Target,
    connect_timeout: Duration,
    command_timeout: Duration,
    events: Events,
    state: Mutex<State>,
    /// Signalled on confirmations, on connection changes and on new demand.
    changed: Condvar,
    /// The writing half of the current connection.
    writer: Mutex<Option<Stream>>,
}

#[derive(Default)]
struct State {
    channels: HashMap<String, Channel>,
    connected: bool,
    ever_connected: bool,
    shutdown: bool,
}

#[derive(Default)]
struct Channel {
    waiters: VecDeque<Arc<Waiter>>,
    /// The last command decided for this channel is `SUBSCRIBE`.
    wanted: bool,
    /// `SUBSCRIBE`s sent on the current connection and not yet confirmed.
    pending_subs: u32,
    /// `UNSUBSCRIBE`s sent on the current connection and not yet confirmed.
    pending_unsubs: u32,
    /// Redis confirmed a subscription on the current connection (and no unsubscribe since).
    confirmed: bool,
    /// Wake every waiter when the subscription is confirmed (after a reconnect).
    wake_all_on_confirm: bool,
}

impl Channel {
    fn is_ready(&self) -> bool {
        self.wanted && self.pending_subs == 0 && self.confirmed
    }

    fn is_idle(&self) -> bool {
        self.waiters.is_empty() && !self.wanted && self.pending_subs == 0 && self.pending_unsubs == 0
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

/// One waiting thread's parking spot.
#[derive(Default)]
struct Waiter {
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Waiter {
    /// Sets the wake-up flag; false when it was already set.
    fn wake(&self) -> bool {
        let mut woken = self.woken.lock();
        if *woken {
            return false;
        }
        *woken = true;
        self.cv.notify_one();
        true
    }
}

/// A thread's place among the waiters of one channel. Dropping it leaves.
pub(crate) struct Ticket {
    shared: Arc<Shared>,
    channel: String,
    waiter: Arc<Waiter>,
    acquired: bool,
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
        connect_timeout: Duration,
        command_timeout: Duration,
        events: Events,
    ) -> Result<Subscriber> {
        let shared = Arc::new(Shared {
            target,
            connect_timeout,
            command_timeout,
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
    /// Redis has confirmed the subscription, or until `deadline`, or at most a connect plus
    /// a command timeout (the caller's park is bounded by the lock's TTL, so a waiter whose
    /// subscription is late still gets its turn).
    pub(crate) fn join(&self, channel: &str, deadline: Option<Instant>) -> Result<Ticket> {
        let shared = &self.shared;
        // Computed before the registry is locked: nothing that can unwind runs under it.
        let bound = clock::deadline_in(shared.connect_timeout.saturating_add(shared.command_timeout));
        let until = clock::earliest(deadline, bound);
        let waiter = Arc::new(Waiter::default());
        let mut state = shared.state.lock();
        if state.shutdown {
            return Err(Error::shutdown());
        }
        let connected = state.connected;
        let ch = state.channels.entry(channel.to_owned()).or_default();
        ch.waiters.push_back(Arc::clone(&waiter));
        let ticket = Ticket { shared: Arc::clone(shared), channel: channel.to_owned(), waiter, acquired: false };
        if !ch.wanted {
            ch.wanted = true;
            if connected {
                ch.pending_subs += 1;
                state = shared.send(state, &[b"SUBSCRIBE", channel.as_bytes()]);
            } else {
                // The thread subscribes every wanted channel as soon as it is connected.
                shared.changed.notify_all();
            }
        }
        loop {
            if state.shutdown {
                // Let the registry go before the ticket leaves it (its drop takes the lock).
                drop(state);
                return Err(Error::shutdown());
            }
            if state.channels.get(channel).is_some_and(Channel::is_ready) {
                return Ok(ticket);
            }
            match until {
                Some(until) => {
                    if shared.changed.wait_until(&mut state, until).timed_out() {
                        return Ok(ticket);
                    }
                }
                None => shared.changed.wait(&mut state),
            }
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
        if let Some(stream) = writer.as_ref() {
            stream.close();
        }
        drop(writer);
        self.thread.join();
    }
}

impl Ticket {
    /// Parks until a release message (or a reconnect, or shutdown) wakes this waiter, or
    /// until `until`. Returns whether it was woken; the wake-up is consumed.
    pub(crate) fn park(&self, until: Option<Instant>) -> bool {
        let mut woken = self.waiter.woken.lock();
        while !*woken {
            match until {
                Some(until) => {
                    if self.waiter.cv.wait_until(&mut woken, until).timed_out() {
                        break;
                    }
                }
                None => self.waiter.cv.wait(&mut woken),
            }
        }
        std::mem::replace(&mut *woken, false)
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
        if !self.acquired && *self.waiter.woken.lock() {
            // This wake-up was meant for someone who would take the lock; pass it on.
            ch.wake_one();
        }
        if ch.waiters.is_empty() && ch.wanted {
            ch.wanted = false;
            ch.wake_all_on_confirm = false;
            if connected {
                ch.pending_unsubs += 1;
                drop(shared.send(state, &[b"UNSUBSCRIBE", self.channel.as_bytes()]));
                return;
            }
        }
        if ch.is_idle() {
            state.channels.remove(&self.channel);
        }
    }
}

impl Shared {
    /// Writes a command in the order decided under `state`: takes the writer before letting
    /// the state go. A failed write closes the socket; the thread then reconnects and
    /// resubscribes whatever is wanted.
    fn send<'a>(&'a self, state: MutexGuard<'a, State>, args: &[&[u8]]) -> MutexGuard<'a, State> {
        let mut writer = self.writer.lock();
        drop(state);
        if let Some(stream) = writer.as_mut()
            && resp::write_command(stream, args).is_err()
        {
            stream.close();
        }
        drop(writer);
        self.state.lock()
    }

    fn run(self: Arc<Self>) {
        let mut backoff = Duration::from_millis(50);
        loop {
            if !self.wait_for_demand() {
                return;
            }
            let (reader, writer) = match self.target.connect(self.connect_timeout) {
                Ok(halves) => halves,
                Err(err) => {
                    self.events.subscriber_disconnected(&err);
                    let mut state = self.state.lock();
                    if !state.shutdown {
                        self.changed.wait_for(&mut state, backoff);
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
            };
            backoff = Duration::from_millis(50);
            let reconnected = self.install(writer);
            if reconnected {
                self.events.subscriber_reconnected();
            }
            let err = self.read_until_closed(reader);
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

    /// Makes a new connection current and subscribes every wanted channel on it. Returns
    /// whether this was a reconnect.
    fn install(&self, writer: Stream) -> bool {
        let mut state = self.state.lock();
        if state.shutdown {
            // Shutdown already looked for a socket to close; close this one here.
            writer.close();
            return false;
        }
        let reconnected = std::mem::replace(&mut state.ever_connected, true);
        state.connected = true;
        let mut wanted = Vec::new();
        for (name, ch) in state.channels.iter_mut() {
            ch.pending_unsubs = 0;
            ch.confirmed = false;
            ch.pending_subs = u32::from(ch.wanted);
            if ch.wanted {
                ch.wake_all_on_confirm = reconnected;
                wanted.push(name.clone());
            }
        }
        state.channels.retain(|_, ch| !ch.is_idle());
        let mut slot = self.writer.lock();
        drop(state);
        let stream = slot.insert(writer);
        for names in wanted.chunks(SUBSCRIBE_CHUNK) {
            let mut args: Vec<&[u8]> = Vec::with_capacity(names.len() + 1);
            args.push(b"SUBSCRIBE");
            args.extend(names.iter().map(|n| n.as_bytes()));
            if resp::write_command(stream, &args).is_err() {
                stream.close();
                break;
            }
        }
        reconnected
    }

    /// Reads pushes until the connection fails or is closed.
    fn read_until_closed(&self, mut reader: BufReader<Stream>) -> Error {
        loop {
            match resp::read_value(&mut reader) {
                Ok(value) => self.handle(value),
                Err(err) => {
                    return Error::new(ErrorKind::Redis, format!("the pub/sub connection was lost: {err}"))
                        .connection();
                }
            }
        }
    }

    /// Forgets the lost connection. False at shutdown.
    fn uninstall(&self) -> bool {
        let mut state = self.state.lock();
        state.connected = false;
        if let Some(stream) = self.writer.lock().take() {
            stream.close();
        }
        for ch in state.channels.values_mut() {
            ch.pending_subs = 0;
            ch.pending_unsubs = 0;
            ch.confirmed = false;
        }
        state.channels.retain(|_, ch| !ch.is_idle());
        self.changed.notify_all();
        !state.shutdown
    }

    fn handle(&self, value: Value) {
        let Value::Array(Some(items)) = value else { return };
        let mut items = items.into_iter();
        let (Some(Value::Bulk(Some(kind))), Some(Value::Bulk(Some(channel)))) = (items.next(), items.next()) else {
            return;
        };
        let Ok(channel) = String::from_utf8(channel) else { return };
        let mut state = self.state.lock();
        let Some(ch) = state.channels.get_mut(&channel) else { return };
        match kind.as_slice() {
            b"message" => {
                if let Some(Value::Bulk(Some(payload))) = items.next() {
                    if payload == WAKE_ALL {
                        ch.wake_all();
                    } else {
                        ch.wake_one();
                    }
                }
            }
            b"subscribe" => {
                ch.pending_subs = ch.pending_subs.saturating_sub(1);
                ch.confirmed = true;
                if ch.is_ready() && std::mem::take(&mut ch.wake_all_on_confirm) {
                    ch.wake_all();
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
    }
}
