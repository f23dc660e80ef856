//! The subscriptions of one pub/sub connection and the threads waiting on them, as a pure
//! state machine: replies read from Redis and the waiters' comings and goings go in,
//! commands to write and wake-ups come out. No socket, no thread and no clock of its own
//! (the caller passes the time), so it is tested apart from the I/O
//! ([`Subscriber`](super::subscriber) is the thin socket thread around it).
//!
//! What a message means for a channel's waiters is not decided here but by the kind the
//! channel belongs to, through [`Meaning`]: which channels a subscription covers beside its
//! own, and whom a message wakes ([`Delivery`]).
//!
//! At most one command per channel is on its way at any time: a waiter that joins while
//! the channel is being unsubscribed waits for that confirmation and then for its own
//! `SUBSCRIBE`; a channel whose last waiter left while it was being subscribed is kept
//! (lingering) when the confirmation comes. So a confirmation always answers the one
//! command in flight, and replies never pile up for a channel that flaps.
//!
//! Per channel ([`Link`] is what Redis has on the current connection; "wanted" is a waiter
//! present or the subscription kept for one):
//!
//! | link | event | next |
//! |---|---|---|
//! | (absent) | a waiter joins, connected | `Subscribing`: `SUBSCRIBE` written |
//! | (absent) | a waiter joins, not connected | `Off`, subscribed on connect |
//! | `Off` | connected, wanted | `Subscribing`: `SUBSCRIBE` written |
//! | `Subscribing` | confirmed, waiters present | `On`: waiters may try again; every one woken after a reconnect |
//! | `Subscribing` | confirmed, no waiter left | `On`, kept for [`LINGER`] |
//! | `Subscribing` | error reply `MOVED`/`ASK` | `Moved`: every waiter woken, to join where the cluster says |
//! | `Subscribing` | any other error reply | `Refused`: every waiter woken, and told the error |
//! | `On` | a message | `On`: the waiters its [`Delivery`] names woken |
//! | `On` | the last waiter leaves | `On`, kept for [`LINGER`] |
//! | `On`, kept | a waiter joins | `On`: if confirmed, and silent, since before its first attempt, it parks at once (fresh) |
//! | `On`, kept | its time is up | `Unsubscribing`: `UNSUBSCRIBE` written |
//! | `On` | `unsubscribe` nobody asked for (sharded: the slot left) | `Moved`: every waiter woken |
//! | `Unsubscribing` | confirmed, no waiter | removed |
//! | `Unsubscribing` | confirmed, a waiter joined meanwhile | `Subscribing`: `SUBSCRIBE` written |
//! | `Moved` | a waiter joins, connected | `Subscribing`: `SUBSCRIBE` written |
//! | `Moved` | a waiter joins, not connected | `Off`, subscribed on connect |
//! | `Refused` | a waiter joins | `Refused`: it gets the error too (the channel goes with its last waiter; the next one subscribes afresh) |
//! | `Off`, `Refused`, `Moved` | the last waiter leaves | removed |
//! | any | connection lost | `Off` (`Refused` and `Moved` kept for their waiters); nothing kept; nothing in flight |
//!
//! Invariants (checked by the tests after every step): a channel is present only while
//! wanted or while Redis may hold or be answering something for it; a command is in flight
//! for a channel exactly when its link is `Subscribing` or `Unsubscribing`, and then only
//! one; a channel is kept only when `On` with no waiter.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[cfg(test)]
mod tests;

/// How long a subscription is kept after its last waiter left, for the next one: a thread
/// that takes the same lock again soon (a loop) then needs no `SUBSCRIBE`, no confirmation
/// and no second attempt.
pub(crate) const LINGER: Duration = Duration::from_secs(1);

/// What a channel's messages mean for its waiters: the kind the channel belongs to says.
pub(crate) trait Meaning: Send + Sync {
    /// The channels a subscription to `channel` covers beside it, and what a message on
    /// each does, for the client whose wake token is `token`. One command subscribes them
    /// all with the channel itself, so a publisher never sees some without the others.
    fn beside(&self, channel: &str, token: &str) -> Vec<(String, Delivery)> {
        let _ = (channel, token);
        Vec::new()
    }

    /// Whom a message `payload` on the channel itself wakes. `note` is one flag the
    /// meaning keeps per subscription between its messages, cleared at each connection.
    fn deliver(&self, payload: &[u8], note: &mut bool) -> Delivery;

    /// The longest a waiter may park before it looks at its lock again, however long the
    /// holder's lease (a registration that looking renews); `None`: no such bound.
    fn look_again_within(&self) -> Option<Duration> {
        None
    }
}

/// Whom a message wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Nobody.
    Nobody,
    /// The first waiter not already woken.
    One,
    /// Every waiter.
    All,
    /// In order, every waiter whose weight fits in what is left of this many; one that
    /// wants more is passed over, not a wall for smaller ones behind it. A waiter woken
    /// before counts too: it tries again after this message.
    Fitting(u64),
    /// Nobody, but every waiter looks at its lock again within this long.
    LookWithin(Duration),
}

/// A waiting thread, as the registry sees it.
pub(crate) trait Wakeable {
    /// What it waits for in a [`Delivery::Fitting`] (permits; 1 for a lock).
    fn weight(&self) -> u64;
    /// Sets its wake-up flag; false when it was already set.
    fn wake(&self) -> bool;
    /// Brings the end of its park forward to `at` (never later than it was).
    fn look_by(&self, at: Instant);
}

/// What Redis has of a channel's subscription on the current connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Link {
    /// Nothing, and nothing asked.
    Off,
    /// `SUBSCRIBE` written, its confirmation to come.
    Subscribing,
    /// Confirmed.
    On,
    /// `UNSUBSCRIBE` written, its confirmation to come.
    Unsubscribing,
    /// Redis refused the last `SUBSCRIBE` (an ACL rule).
    Refused(Refusal),
    /// Another node serves the channel's slot now (sharded pub/sub).
    Moved,
}

/// An error reply to a `SUBSCRIBE`: its code (`NOPERM`, `MOVED`, …) and the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) code: String,
    pub(crate) detail: String,
}

/// A reply or message read from the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    Subscribed(String),
    Unsubscribed(String),
    Message { channel: String, payload: Vec<u8> },
    Pong,
    Error(Refusal),
}

/// A command to write, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    Subscribe(Vec<String>),
    Unsubscribe(Vec<String>),
    Ping,
}

/// Where a waiter's subscription stands, for the waiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// Confirmed: every message from now on reaches the waiter.
    Ready,
    /// Not confirmed yet.
    Pending,
    Refused(Refusal),
    Moved,
    /// The channel is not registered (the waiter left).
    Gone,
}

/// A waiter's place in the registry, as [`Subscriptions::join`] gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaiterId(u64);

/// The commands written whose replies are still to come, in order: replies come in the
/// same order, which is how an error reply (it names no channel) finds its command.
#[derive(Debug)]
enum Expected {
    /// A (un)subscription of `channel` and those it covers: the names whose confirmations
    /// are still to come, in the order Redis sends them (one error reply stands for them
    /// all).
    Subscribe {
        channel: String,
        names: VecDeque<String>,
    },
    Unsubscribe {
        channel: String,
        names: VecDeque<String>,
    },
    Ping,
}

struct Channel<W> {
    meaning: &'static dyn Meaning,
    /// The channels covered beside it, and what a message on each does.
    beside: Vec<(String, Delivery)>,
    link: Link,
    waiters: VecDeque<(WaiterId, W)>,
    /// No waiter is left, and the subscription is kept until then for the next one.
    kept_until: Option<Instant>,
    /// Wake every waiter once confirmed: made again after a reconnect, it may have
    /// missed messages meanwhile.
    wake_all_on_confirm: bool,
    /// The meaning's flag ([`Meaning::deliver`]).
    note: bool,
    /// The count ([`Subscriptions::seq`]) when Redis last confirmed the subscription.
    confirmed_seq: u64,
    /// The count when the last message for this channel was read.
    message_seq: u64,
}

impl<W: Wakeable> Channel<W> {
    fn wanted(&self) -> bool {
        !self.waiters.is_empty() || self.kept_until.is_some()
    }

    /// Whether Redis may hold something of it or be answering for it.
    fn linked(&self) -> bool {
        matches!(self.link, Link::Subscribing | Link::On | Link::Unsubscribing)
    }

    fn in_flight(&self) -> bool {
        matches!(self.link, Link::Subscribing | Link::Unsubscribing)
    }

    /// Every channel one command on this subscription names, the channel itself last (so
    /// that its confirmation, which makes the subscription ready, comes last).
    fn names(&self, channel: &str) -> Vec<String> {
        self.beside.iter().map(|(name, _)| name.clone()).chain([channel.to_owned()]).collect()
    }

    fn deliver(&self, delivery: Delivery, now: Instant) {
        match delivery {
            Delivery::Nobody => {}
            Delivery::One => {
                self.waiters.iter().any(|(_, w)| w.wake());
            }
            Delivery::All => self.wake_all(),
            Delivery::Fitting(mut left) => {
                for (_, waiter) in &self.waiters {
                    if left == 0 {
                        break;
                    }
                    if waiter.weight() <= left {
                        waiter.wake();
                        left -= waiter.weight();
                    }
                }
            }
            Delivery::LookWithin(within) => {
                if let Some(at) = now.checked_add(within) {
                    for (_, waiter) in &self.waiters {
                        waiter.look_by(at);
                    }
                }
            }
        }
    }

    fn wake_all(&self) {
        for (_, waiter) in &self.waiters {
            waiter.wake();
        }
    }
}

/// The registry of one pub/sub connection's channels and waiters.
pub(crate) struct Subscriptions<W> {
    /// The client's wake token, given to [`Meaning::beside`].
    token: String,
    /// Sharded pub/sub: Redis may end a subscription by itself when the slot leaves.
    sharded: bool,
    /// Counts the messages and confirmations read (shared by every subscriber of a client):
    /// a waiter reads it before its first attempt, and a subscription confirmed, and
    /// silent, since before then needs no second attempt.
    seq: Arc<AtomicU64>,
    channels: HashMap<String, Channel<W>>,
    /// The channels covered beside another, to the one they are beside.
    covered: HashMap<String, String>,
    expected: VecDeque<Expected>,
    connected: bool,
    ever_connected: bool,
    next_id: u64,
}

impl<W: Wakeable> Subscriptions<W> {
    pub(crate) fn new(token: String, sharded: bool, seq: Arc<AtomicU64>) -> Subscriptions<W> {
        Subscriptions {
            token,
            sharded,
            seq,
            channels: HashMap::new(),
            covered: HashMap::new(),
            expected: VecDeque::new(),
            connected: false,
            ever_connected: false,
            next_id: 0,
        }
    }

    pub(crate) fn is_connected(&self) -> bool {
        self.connected
    }

    /// Adds `waiter` to `channel`'s waiters, whose messages mean what `meaning` says.
    /// `since` is the count of [`seq`](Subscriptions::new) read before the waiter's first
    /// attempt; the answer says whether the subscription was confirmed, and silent, since
    /// then (fresh: the waiter parks without trying again), and what to write.
    pub(crate) fn join(
        &mut self,
        channel: &str,
        meaning: &'static dyn Meaning,
        waiter: W,
        since: u64,
    ) -> (WaiterId, bool, Vec<Command>) {
        let id = WaiterId(self.next_id);
        self.next_id += 1;
        if !self.channels.contains_key(channel) {
            let beside = meaning.beside(channel, &self.token);
            for (name, _) in &beside {
                self.covered.insert(name.clone(), channel.to_owned());
            }
            let fresh = Channel {
                meaning,
                beside,
                link: Link::Off,
                waiters: VecDeque::new(),
                kept_until: None,
                wake_all_on_confirm: false,
                note: false,
                confirmed_seq: 0,
                message_seq: 0,
            };
            self.channels.insert(channel.to_owned(), fresh);
        }
        let connected = self.connected;
        let Some(ch) = self.channels.get_mut(channel) else { return (id, false, Vec::new()) };
        let fresh = ch.link == Link::On && ch.confirmed_seq <= since && ch.message_seq <= since;
        ch.kept_until = None;
        ch.waiters.push_back((id, waiter));
        if ch.link == Link::Moved && !connected {
            // Subscribed here on connect, as a channel that never moved: the cluster sent
            // this waiter here again.
            ch.link = Link::Off;
        }
        let subscribe = connected && matches!(ch.link, Link::Off | Link::Moved);
        if !subscribe {
            return (id, fresh, Vec::new());
        }
        (id, fresh, self.subscribe(channel).into_iter().collect())
    }

    /// Takes the waiter out. `pass_on`: it was woken and leaves without what it waited for,
    /// so the wake-up goes to another waiter. `now` starts a kept subscription's time.
    pub(crate) fn leave(&mut self, channel: &str, id: WaiterId, pass_on: bool, now: Instant) {
        let connected = self.connected;
        let Some(ch) = self.channels.get_mut(channel) else { return };
        ch.waiters.retain(|(other, _)| *other != id);
        if pass_on {
            ch.deliver(Delivery::One, now);
        }
        if !ch.waiters.is_empty() {
            return;
        }
        match ch.link {
            Link::On if connected => ch.kept_until = now.checked_add(LINGER),
            // The answer on its way decides.
            Link::Subscribing | Link::Unsubscribing => {}
            _ => self.remove(channel),
        }
    }

    /// A new connection is current: every channel with waiters is subscribed on it, one
    /// command each (so that a refusal names one channel), and after a reconnect each of
    /// their waiters is woken when it is confirmed. Kept subscriptions are forgotten.
    pub(crate) fn connected(&mut self) -> Vec<Command> {
        let reconnected = std::mem::replace(&mut self.ever_connected, true);
        self.connected = true;
        self.expected.clear();
        let mut names = Vec::new();
        for (name, ch) in &mut self.channels {
            ch.kept_until = None;
            ch.note = false;
            if ch.waiters.is_empty() {
                ch.link = Link::Off;
            } else if !matches!(ch.link, Link::Moved) {
                ch.link = Link::Off;
                ch.wake_all_on_confirm = reconnected;
                names.push(name.clone());
            }
        }
        self.remove_idle();
        names.iter().filter_map(|name| self.subscribe(name)).collect()
    }

    /// The connection is lost: Redis holds nothing of it any more and answers nothing.
    pub(crate) fn disconnected(&mut self) {
        self.connected = false;
        self.expected.clear();
        for ch in self.channels.values_mut() {
            ch.kept_until = None;
            if ch.linked() {
                ch.link = Link::Off;
            }
        }
        self.remove_idle();
    }

    /// Acts on one reply or message read at `now`; returns what to write next. A `PONG`
    /// is told apart by [`pong`](Subscriptions::pong).
    pub(crate) fn read(&mut self, reply: Reply, now: Instant) -> Vec<Command> {
        match reply {
            Reply::Pong => {
                self.pong();
                Vec::new()
            }
            Reply::Error(refusal) => self.refused(refusal),
            Reply::Message { channel, payload } => {
                self.message(&channel, &payload, now);
                Vec::new()
            }
            Reply::Subscribed(name) => self.subscribed(&name, now),
            Reply::Unsubscribed(name) => self.unsubscribed(&name),
        }
    }

    /// A `PONG` was read: whether it answers a `PING` of ours.
    pub(crate) fn pong(&mut self) -> bool {
        matches!(self.expected.pop_front(), Some(Expected::Ping))
    }

    /// A `PING` to write, its answer expected in turn.
    pub(crate) fn ping(&mut self) -> Option<Command> {
        self.connected.then(|| {
            self.expected.push_back(Expected::Ping);
            Command::Ping
        })
    }

    /// Ends the kept subscriptions whose time is up at `now`.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<Command> {
        let due: Vec<String> = self
            .channels
            .iter()
            .filter(|(_, ch)| ch.kept_until.is_some_and(|until| until <= now))
            .map(|(name, _)| name.clone())
            .collect();
        due.iter().filter_map(|name| self.unsubscribe(name)).collect()
    }

    /// When the next kept subscription's time is up.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        self.channels.values().filter_map(|ch| ch.kept_until).min()
    }

    /// Whether any channel has waiters (the connection is needed).
    pub(crate) fn has_demand(&self) -> bool {
        self.channels.values().any(|ch| !ch.waiters.is_empty())
    }

    /// Whether the connection carries subscriptions or is about to (so it is watched).
    pub(crate) fn is_active(&self) -> bool {
        self.channels.values().any(|ch| ch.wanted() || ch.linked())
    }

    pub(crate) fn readiness(&self, channel: &str) -> Readiness {
        match self.channels.get(channel).map(|ch| &ch.link) {
            None => Readiness::Gone,
            Some(Link::On) => Readiness::Ready,
            Some(Link::Refused(refusal)) => Readiness::Refused(refusal.clone()),
            Some(Link::Moved) => Readiness::Moved,
            Some(Link::Off | Link::Subscribing | Link::Unsubscribing) => Readiness::Pending,
        }
    }

    /// Whether a command for `channel` waits for its answer (a silence then means a dead
    /// connection).
    pub(crate) fn awaits_answer(&self, channel: &str) -> bool {
        self.channels.get(channel).is_some_and(Channel::in_flight)
    }

    /// Wakes every waiter of every channel (shutdown).
    pub(crate) fn wake_everyone(&self) {
        for ch in self.channels.values() {
            ch.wake_all();
        }
    }

    pub(crate) fn channel_count(&self) -> usize {
        self.channels.len()
    }

    pub(crate) fn waiter_count(&self) -> usize {
        self.channels.values().map(|ch| ch.waiters.len()).sum()
    }

    /// `SUBSCRIBE` of `channel` (and those it covers), expected in turn.
    fn subscribe(&mut self, channel: &str) -> Option<Command> {
        let ch = self.channels.get_mut(channel)?;
        let names = ch.names(channel);
        ch.link = Link::Subscribing;
        self.expected.push_back(Expected::Subscribe { channel: channel.to_owned(), names: names.clone().into() });
        Some(Command::Subscribe(names))
    }

    /// Ends a kept subscription: `UNSUBSCRIBE` of `channel` (and those it covers).
    fn unsubscribe(&mut self, channel: &str) -> Option<Command> {
        let connected = self.connected;
        let ch = self.channels.get_mut(channel)?;
        ch.kept_until = None;
        if !(connected && ch.link == Link::On) {
            self.remove(channel);
            return None;
        }
        let names = ch.names(channel);
        ch.link = Link::Unsubscribing;
        self.expected.push_back(Expected::Unsubscribe { channel: channel.to_owned(), names: names.clone().into() });
        Some(Command::Unsubscribe(names))
    }

    /// The channel a name read from Redis stands for, and whether the name is covered
    /// beside it.
    fn owner_of<'a>(&'a self, name: &'a str) -> (&'a str, bool) {
        match self.covered.get(name) {
            Some(main) => (main.as_str(), true),
            None => (name, false),
        }
    }

    /// Whether a confirmation of `name` (`unsubscribe`: of an `UNSUBSCRIBE`) answers the
    /// oldest command, as the next name it waits for; it is answered in full once every
    /// channel it named is. Anything else was not asked for (Redis ends a sharded
    /// subscription by itself when the slot leaves, even while an `UNSUBSCRIBE` of it is on
    /// its way).
    fn answers(&mut self, name: &str, unsubscribe: bool) -> bool {
        let names = match self.expected.front_mut() {
            Some(Expected::Subscribe { names, .. }) if !unsubscribe => names,
            Some(Expected::Unsubscribe { names, .. }) if unsubscribe => names,
            _ => return false,
        };
        if names.front().map(String::as_str) != Some(name) {
            return false;
        }
        names.pop_front();
        if names.is_empty() {
            self.expected.pop_front();
        }
        true
    }

    fn subscribed(&mut self, name: &str, now: Instant) -> Vec<Command> {
        if !self.answers(name, false) {
            return Vec::new();
        }
        let (channel, beside) = self.owner_of(name);
        if beside {
            return Vec::new();
        }
        let channel = channel.to_owned();
        let Some(ch) = self.channels.get_mut(&channel) else { return Vec::new() };
        if ch.link != Link::Subscribing {
            return Vec::new();
        }
        ch.link = Link::On;
        ch.confirmed_seq = self.seq.fetch_add(1, Ordering::AcqRel) + 1;
        let wake_all = std::mem::take(&mut ch.wake_all_on_confirm);
        if ch.waiters.is_empty() {
            ch.kept_until = now.checked_add(LINGER);
        } else if wake_all {
            ch.wake_all();
        }
        Vec::new()
    }

    fn unsubscribed(&mut self, name: &str) -> Vec<Command> {
        let (channel, _) = self.owner_of(name);
        let channel = channel.to_owned();
        if !self.answers(name, true) {
            // Nobody asked: Redis ended a sharded subscription because its slot left.
            if self.sharded
                && let Some(ch) = self.channels.get_mut(&channel)
                && ch.link == Link::On
            {
                ch.link = Link::Moved;
                ch.kept_until = None;
                ch.wake_all();
                if ch.waiters.is_empty() {
                    self.remove(&channel);
                }
            }
            return Vec::new();
        }
        if name != channel {
            return Vec::new();
        }
        let Some(ch) = self.channels.get_mut(&channel) else { return Vec::new() };
        ch.link = Link::Off;
        if ch.waiters.is_empty() {
            self.remove(&channel);
            return Vec::new();
        }
        self.subscribe(&channel).into_iter().collect()
    }

    fn refused(&mut self, refusal: Refusal) -> Vec<Command> {
        let channel = match self.expected.pop_front() {
            Some(Expected::Subscribe { channel, .. } | Expected::Unsubscribe { channel, .. }) => channel,
            Some(Expected::Ping) | None => return Vec::new(),
        };
        let connected = self.connected;
        let Some(ch) = self.channels.get_mut(&channel) else { return Vec::new() };
        if ch.link != Link::Subscribing {
            // An `UNSUBSCRIBE` refused: Redis keeps nothing it would confirm; a waiter that
            // joined meanwhile subscribes as after an unsubscription.
            ch.link = Link::Off;
            if ch.waiters.is_empty() {
                self.remove(&channel);
                return Vec::new();
            }
            if !connected {
                return Vec::new();
            }
            return self.subscribe(&channel).into_iter().collect();
        }
        let moved = matches!(refusal.code.as_str(), "MOVED" | "ASK");
        ch.link = if moved { Link::Moved } else { Link::Refused(refusal) };
        ch.wake_all();
        if ch.waiters.is_empty() {
            self.remove(&channel);
        }
        Vec::new()
    }

    fn message(&mut self, name: &str, payload: &[u8], now: Instant) {
        // Borrowed apart, so the channel is found without copying its name (once a message).
        let Subscriptions { covered, channels, seq, .. } = self;
        let (channel, beside) = match covered.get(name) {
            Some(main) => (main.as_str(), true),
            None => (name, false),
        };
        let Some(ch) = channels.get_mut(channel) else { return };
        ch.message_seq = seq.fetch_add(1, Ordering::AcqRel) + 1;
        let delivery = if beside {
            ch.beside.iter().find(|(other, _)| other == name).map_or(Delivery::Nobody, |(_, d)| *d)
        } else {
            ch.meaning.deliver(payload, &mut ch.note)
        };
        ch.deliver(delivery, now);
    }

    fn remove(&mut self, channel: &str) {
        if let Some(ch) = self.channels.remove(channel) {
            for (name, _) in &ch.beside {
                self.covered.remove(name);
            }
        }
    }

    fn remove_idle(&mut self) {
        let idle: Vec<String> = self
            .channels
            .iter()
            .filter(|(_, ch)| !ch.wanted() && !ch.in_flight())
            .map(|(name, _)| name.clone())
            .collect();
        for name in idle {
            self.remove(&name);
        }
    }
}
