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

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::HashSet;
    use std::rc::Rc;

    use proptest::prelude::*;

    use super::*;

    /// A waiter that records what it was told.
    #[derive(Default)]
    struct Spy {
        weight: u64,
        woken: Cell<bool>,
        look_by: Cell<Option<Instant>>,
    }

    impl Wakeable for Rc<Spy> {
        fn weight(&self) -> u64 {
            self.weight
        }
        fn wake(&self) -> bool {
            !self.woken.replace(true)
        }
        fn look_by(&self, at: Instant) {
            self.look_by.set(Some(at));
        }
    }

    /// Every message wakes one waiter.
    struct One;
    impl Meaning for One {
        fn deliver(&self, _: &[u8], _: &mut bool) -> Delivery {
            Delivery::One
        }
    }

    /// Covers a channel of the client's beside its own, where a message wakes one; on the
    /// channel itself a message `n` names a client and the `0` after it is handled.
    struct Covering;
    impl Meaning for Covering {
        fn beside(&self, channel: &str, token: &str) -> Vec<(String, Delivery)> {
            vec![(format!("own:{channel}:{token}"), Delivery::One)]
        }
        fn deliver(&self, payload: &[u8], named: &mut bool) -> Delivery {
            match payload {
                b"0" if std::mem::take(named) => Delivery::Nobody,
                b"0" => Delivery::One,
                _ => {
                    *named = true;
                    Delivery::Nobody
                }
            }
        }
    }

    /// Wakes waiters whose weight fits in the number sent.
    struct Counting;
    impl Meaning for Counting {
        fn deliver(&self, payload: &[u8], _: &mut bool) -> Delivery {
            Delivery::Fitting(std::str::from_utf8(payload).unwrap().parse().unwrap())
        }
    }

    /// A Redis server as far as one pub/sub connection sees it: answers in order.
    #[derive(Default)]
    struct Redis {
        subscribed: HashSet<String>,
        /// What the client has still to read.
        inbox: VecDeque<Reply>,
        /// Channels an ACL rule refuses.
        refused: HashSet<String>,
        /// Channels whose slot another node serves (sharded): a `SUBSCRIBE` gets `MOVED`.
        elsewhere: HashSet<String>,
    }

    impl Redis {
        fn write(&mut self, commands: Vec<Command>) {
            for command in commands {
                match command {
                    Command::Subscribe(names) if names.iter().any(|n| self.refused.contains(n)) => {
                        let refusal = Refusal { code: "NOPERM".into(), detail: "no".into() };
                        self.inbox.push_back(Reply::Error(refusal));
                    }
                    Command::Subscribe(names) if names.iter().any(|n| self.elsewhere.contains(n)) => {
                        let moved = Refusal { code: "MOVED".into(), detail: "3999 127.0.0.1:7001".into() };
                        self.inbox.push_back(Reply::Error(moved));
                    }
                    Command::Subscribe(names) => {
                        for name in names {
                            self.subscribed.insert(name.clone());
                            self.inbox.push_back(Reply::Subscribed(name));
                        }
                    }
                    Command::Unsubscribe(names) => {
                        for name in names {
                            self.subscribed.remove(&name);
                            self.inbox.push_back(Reply::Unsubscribed(name));
                        }
                    }
                    Command::Ping => self.inbox.push_back(Reply::Pong),
                }
            }
        }

        /// The slot of `channel` (and what it covers) leaves this node: Redis ends their
        /// subscriptions unasked, and refers new ones elsewhere.
        fn slot_leaves(&mut self, channel: &str, covered: &[String]) {
            for name in covered.iter().map(String::as_str).chain([channel]) {
                if self.subscribed.remove(name) {
                    self.inbox.push_back(Reply::Unsubscribed(name.to_owned()));
                }
            }
            self.elsewhere.insert(channel.to_owned());
        }

        fn publish(&mut self, channel: &str, payload: &str) {
            if self.subscribed.contains(channel) {
                let message = Reply::Message { channel: channel.into(), payload: payload.into() };
                self.inbox.push_back(message);
            }
        }
    }

    /// The machine, a server, the clock and the waiters, stepped together.
    struct World {
        subs: Subscriptions<Rc<Spy>>,
        redis: Redis,
        now: Instant,
        waiters: Vec<(String, WaiterId, Rc<Spy>)>,
    }

    impl World {
        fn new(sharded: bool) -> World {
            let subs = Subscriptions::new("7".into(), sharded, Arc::new(AtomicU64::new(0)));
            World { subs, redis: Redis::default(), now: Instant::now(), waiters: Vec::new() }
        }

        fn connected() -> World {
            let mut world = World::new(false);
            world.connect();
            world
        }

        fn connect(&mut self) {
            let commands = self.subs.connected();
            self.redis.write(commands);
        }

        fn disconnect(&mut self) {
            self.subs.disconnected();
            let refused = std::mem::take(&mut self.redis.refused);
            let elsewhere = std::mem::take(&mut self.redis.elsewhere);
            self.redis = Redis { refused, elsewhere, ..Redis::default() };
        }

        fn join(&mut self, channel: &str, meaning: &'static dyn Meaning, weight: u64) -> (Rc<Spy>, bool) {
            let spy = Rc::new(Spy { weight, ..Spy::default() });
            let since = self.subs.seq.load(Ordering::Acquire);
            let (id, fresh, commands) = self.subs.join(channel, meaning, Rc::clone(&spy), since);
            self.redis.write(commands);
            self.waiters.push((channel.to_owned(), id, Rc::clone(&spy)));
            (spy, fresh)
        }

        fn leave(&mut self, index: usize, pass_on: bool) {
            let (channel, id, spy) = self.waiters.remove(index);
            self.subs.leave(&channel, id, pass_on && spy.woken.get(), self.now);
        }

        /// Reads one reply; false when none is left.
        fn read_one(&mut self) -> bool {
            let Some(reply) = self.redis.inbox.pop_front() else { return false };
            let commands = self.subs.read(reply, self.now);
            self.redis.write(commands);
            true
        }

        fn read_all(&mut self) {
            while self.read_one() {}
        }

        fn advance(&mut self, by: Duration) {
            self.now += by;
            let commands = self.subs.expire(self.now);
            self.redis.write(commands);
        }

        fn link(&self, channel: &str) -> Option<Link> {
            self.subs.channels.get(channel).map(|ch| ch.link.clone())
        }

        /// The invariants of the module's docs, and the books agreeing with each other.
        fn check(&self) -> std::result::Result<(), TestCaseError> {
            let subs = &self.subs;
            for (name, ch) in &subs.channels {
                let in_flight = subs
                    .expected
                    .iter()
                    .filter(|e| matches!(e, Expected::Subscribe { channel, .. } | Expected::Unsubscribe { channel, .. } if channel == name))
                    .count();
                prop_assert!(in_flight <= 1, "{name}: {in_flight} commands in flight");
                prop_assert_eq!(in_flight == 1, ch.in_flight(), "{}: {:?}", name, ch.link);
                prop_assert!(ch.wanted() || ch.in_flight(), "{name} is kept for nothing: {:?}", ch.link);
                if ch.kept_until.is_some() {
                    prop_assert!(ch.link == Link::On && ch.waiters.is_empty(), "{name} kept while {:?}", ch.link);
                }
                if !subs.connected {
                    prop_assert!(!ch.linked() && ch.kept_until.is_none(), "{name} {:?} while disconnected", ch.link);
                }
                for (beside, _) in &ch.beside {
                    prop_assert_eq!(subs.covered.get(beside), Some(name));
                }
                if ch.link == Link::Moved {
                    // Each is to join again where the cluster says: it must wake to do so.
                    let asleep = ch.waiters.iter().filter(|(_, w)| !w.woken.get()).count();
                    prop_assert_eq!(asleep, 0, "{} moved with waiters not woken", name);
                }
            }
            prop_assert_eq!(subs.covered.len(), subs.channels.values().map(|ch| ch.beside.len()).sum::<usize>());
            prop_assert_eq!(subs.waiter_count(), self.waiters.len());
            Ok(())
        }
    }

    fn subscribe_of(channel: &str) -> Command {
        Command::Subscribe(vec![channel.to_owned()])
    }

    /// Channel `c` (messages mean [`One`]) in the state `link` names, with `waiters`
    /// waiters, reached by the machine's own transitions.
    fn given(link: &str, waiters: usize) -> World {
        let mut world = if link == "Moved" { World::new(true) } else { World::new(false) };
        if link != "Off" {
            world.connect();
        }
        if link == "Refused" {
            world.redis.refused.insert("c".into());
        }
        for _ in 0..waiters.max(1) {
            world.join("c", &One, 1);
        }
        if link != "Subscribing" {
            world.read_all();
        }
        if link == "Moved" {
            world.redis.inbox.push_back(Reply::Unsubscribed("c".into()));
            world.read_all();
        }
        if matches!(link, "kept" | "Unsubscribing") || waiters == 0 {
            while !world.waiters.is_empty() {
                world.leave(0, false);
            }
        }
        if link == "Unsubscribing" {
            world.advance(LINGER);
        }
        world.check().unwrap();
        world
    }

    type Walk = fn();

    /// The state table's rows, in its order (link, event), each with the walk that checks
    /// it.
    const ROWS: &[(&str, &str, Walk)] = &[
        ("(absent)", "a waiter joins, connected", || {
            let mut world = World::connected();
            world.join("c", &One, 1);
            assert_eq!(world.link("c"), Some(Link::Subscribing));
            assert_eq!(world.redis.inbox, [Reply::Subscribed("c".into())]);
        }),
        ("(absent)", "a waiter joins, not connected", || {
            let world = given("Off", 1);
            assert_eq!(world.link("c"), Some(Link::Off));
            assert!(world.redis.inbox.is_empty() && world.subs.has_demand());
        }),
        ("`Off`", "connected, wanted", || {
            let mut world = given("Off", 1);
            assert_eq!(world.subs.connected(), [subscribe_of("c")]);
            assert_eq!(world.link("c"), Some(Link::Subscribing));
        }),
        ("`Subscribing`", "confirmed, waiters present", || {
            let mut world = given("Subscribing", 1);
            world.read_all();
            assert_eq!(world.subs.readiness("c"), Readiness::Ready);
            assert!(!world.waiters[0].2.woken.get(), "a first subscription wakes nobody");
            world.disconnect();
            world.connect();
            world.read_all();
            assert!(world.waiters[0].2.woken.get(), "after a reconnect, every waiter");
        }),
        ("`Subscribing`", "confirmed, no waiter left", || {
            let mut world = given("Subscribing", 1);
            world.leave(0, false);
            assert_eq!(world.link("c"), Some(Link::Subscribing));
            world.read_all();
            assert_eq!(world.link("c"), Some(Link::On));
            assert_eq!(world.subs.next_expiry(), Some(world.now + LINGER));
        }),
        ("`Subscribing`", "error reply `MOVED`/`ASK`", || {
            let mut world = given("Subscribing", 2);
            let moved = Refusal { code: "MOVED".into(), detail: "3999 127.0.0.1:7001".into() };
            world.redis.inbox = [Reply::Error(moved)].into();
            world.read_all();
            assert_eq!(world.subs.readiness("c"), Readiness::Moved);
            assert!(world.waiters.iter().all(|(_, _, spy)| spy.woken.get()));
        }),
        ("`Subscribing`", "any other error reply", || {
            let world = given("Refused", 2);
            assert!(matches!(world.subs.readiness("c"), Readiness::Refused(r) if r.code == "NOPERM"));
            assert!(world.waiters.iter().all(|(_, _, spy)| spy.woken.get()));
        }),
        ("`On`", "a message", || {
            let mut world = given("On", 2);
            world.redis.publish("c", "0");
            world.read_all();
            let woken: Vec<bool> = world.waiters.iter().map(|(_, _, spy)| spy.woken.get()).collect();
            assert_eq!(woken, [true, false], "`One`: the first");
        }),
        ("`On`", "the last waiter leaves", || {
            let mut world = given("On", 1);
            world.leave(0, false);
            assert_eq!(world.link("c"), Some(Link::On));
            assert_eq!(world.subs.next_expiry(), Some(world.now + LINGER));
        }),
        ("`On`, kept", "a waiter joins", || {
            let mut world = given("kept", 0);
            let (_, fresh) = world.join("c", &One, 1);
            assert!(fresh && world.redis.inbox.is_empty());
            assert_eq!(world.subs.next_expiry(), None, "kept no more");
        }),
        ("`On`, kept", "its time is up", || {
            let mut world = given("kept", 0);
            world.advance(LINGER);
            assert_eq!(world.link("c"), Some(Link::Unsubscribing));
            assert_eq!(world.redis.inbox, [Reply::Unsubscribed("c".into())]);
        }),
        ("`On`", "`unsubscribe` nobody asked for (sharded: the slot left)", || {
            let world = given("Moved", 1);
            assert_eq!(world.subs.readiness("c"), Readiness::Moved);
            assert!(world.waiters[0].2.woken.get());
        }),
        ("`Unsubscribing`", "confirmed, no waiter", || {
            let mut world = given("Unsubscribing", 0);
            world.read_all();
            assert_eq!(world.link("c"), None);
        }),
        ("`Unsubscribing`", "confirmed, a waiter joined meanwhile", || {
            let mut world = given("Unsubscribing", 0);
            world.join("c", &One, 1);
            assert_eq!(world.link("c"), Some(Link::Unsubscribing), "nothing more written yet");
            world.read_one();
            assert_eq!(world.link("c"), Some(Link::Subscribing));
            assert_eq!(world.redis.inbox, [Reply::Subscribed("c".into())]);
        }),
        ("`Moved`", "a waiter joins, connected", || {
            let mut world = given("Moved", 1);
            world.join("c", &One, 1);
            assert_eq!(world.link("c"), Some(Link::Subscribing));
        }),
        ("`Moved`", "a waiter joins, not connected", || {
            let mut world = given("Moved", 1);
            world.disconnect();
            world.join("c", &One, 1);
            assert_eq!(world.link("c"), Some(Link::Off));
            world.connect();
            assert_eq!(world.link("c"), Some(Link::Subscribing), "subscribed on connect");
        }),
        ("`Refused`", "a waiter joins", || {
            let mut world = given("Refused", 1);
            world.join("c", &One, 1);
            assert!(world.redis.inbox.is_empty());
            assert!(matches!(world.subs.readiness("c"), Readiness::Refused(_)));
        }),
        ("`Off`, `Refused`, `Moved`", "the last waiter leaves", || {
            for link in ["Off", "Refused", "Moved"] {
                let mut world = given(link, 1);
                world.leave(0, false);
                assert_eq!(world.link("c"), None, "{link}");
            }
        }),
        ("any", "connection lost", || {
            for (link, after) in [
                ("Subscribing", Some(Link::Off)),
                ("On", Some(Link::Off)),
                ("kept", None),
                ("Unsubscribing", None),
                ("Moved", Some(Link::Moved)),
            ] {
                let mut world = given(link, 1);
                world.disconnect();
                assert_eq!(world.link("c"), after, "{link}");
                assert!(world.subs.expected.is_empty() && world.subs.next_expiry().is_none(), "{link}");
            }
            let mut world = given("Refused", 1);
            world.disconnect();
            assert!(matches!(world.link("c"), Some(Link::Refused(_))), "kept for its waiters");
        }),
    ];

    /// The (link, event) cells of the state table in the module's docs.
    fn documented_rows() -> Vec<(String, String)> {
        include_str!("subscriptions.rs")
            .lines()
            .filter_map(|line| line.strip_prefix("//! | "))
            .skip(1)
            .filter(|row| !row.starts_with("---"))
            .map(|row| {
                let cells: Vec<&str> = row.split(" | ").collect();
                (cells[0].to_owned(), cells[1].to_owned())
            })
            .collect()
    }

    /// Every row of the state table, in its order, walked: the table has no row without
    /// its walk, and no walk without its row.
    #[test]
    fn the_state_table_holds() {
        let documented = documented_rows();
        let listed: Vec<(String, String)> = ROWS.iter().map(|(l, e, _)| ((*l).to_owned(), (*e).to_owned())).collect();
        assert_eq!(documented, listed);
        for (link, event, walk) in ROWS {
            let walked = std::panic::catch_unwind(walk);
            assert!(walked.is_ok(), "the row `{link} | {event}` does not hold");
        }
    }

    // Scenarios across several rows (each row alone: `ROWS`).

    #[test]
    fn a_first_waiter_subscribes_at_once_when_connected_and_on_connect_otherwise() {
        let mut world = World::connected();
        let (_, fresh) = world.join("c", &One, 1);
        assert!(!fresh);
        assert_eq!(world.link("c"), Some(Link::Subscribing));
        assert!(world.subs.awaits_answer("c"));
        assert_eq!(world.redis.inbox, [Reply::Subscribed("c".into())]);

        let mut world = World::new(false);
        world.join("c", &One, 1);
        assert_eq!(world.link("c"), Some(Link::Off));
        assert!(world.subs.has_demand() && world.redis.inbox.is_empty());
        assert_eq!(world.subs.connected(), [subscribe_of("c")]);
        assert_eq!(world.link("c"), Some(Link::Subscribing));
    }

    #[test]
    fn a_confirmation_makes_the_subscription_ready_and_one_with_nobody_left_is_kept() {
        let mut world = World::connected();
        world.join("c", &One, 1);
        assert_eq!(world.subs.readiness("c"), Readiness::Pending);
        world.read_all();
        assert_eq!(world.subs.readiness("c"), Readiness::Ready);

        world.join("d", &One, 1);
        world.leave(1, false);
        assert_eq!(world.link("d"), Some(Link::Subscribing), "the answer on its way decides");
        world.read_all();
        assert_eq!(world.link("d"), Some(Link::On));
        assert_eq!(world.subs.next_expiry(), Some(world.now + LINGER));
        world.check().unwrap();
    }

    #[test]
    fn refusals_reach_every_waiter_and_a_moved_slot_sends_them_elsewhere() {
        let mut world = World::connected();
        world.redis.refused.insert("c".into());
        let (first, _) = world.join("c", &One, 1);
        let (second, _) = world.join("c", &One, 1);
        world.read_all();
        assert!(matches!(world.subs.readiness("c"), Readiness::Refused(r) if r.code == "NOPERM"));
        assert!(first.woken.get() && second.woken.get());
        // A joiner meanwhile gets the error too: nothing is sent.
        world.join("c", &One, 1);
        assert!(world.redis.inbox.is_empty() && matches!(world.link("c"), Some(Link::Refused(_))));
        world.check().unwrap();

        let mut world = World::connected();
        let (waiter, _) = world.join("c", &One, 1);
        let moved = Refusal { code: "MOVED".into(), detail: "3999 127.0.0.1:7001".into() };
        world.redis.inbox = [Reply::Error(moved)].into();
        world.read_all();
        assert_eq!(world.subs.readiness("c"), Readiness::Moved);
        assert!(waiter.woken.get());
    }

    #[test]
    fn messages_wake_whom_the_meaning_names() {
        let mut world = World::connected();
        let (a, _) = world.join("c", &One, 1);
        let (b, _) = world.join("c", &One, 1);
        world.read_all();
        world.redis.publish("c", "0");
        world.read_all();
        assert!(a.woken.get() && !b.woken.get(), "one waiter, the first");
        world.redis.publish("c", "0");
        world.read_all();
        assert!(b.woken.get(), "the next message wakes the next one");

        // Beside channels: the client's own wakes one; a name then `0` is handled.
        let (x, _) = world.join("k", &Covering, 1);
        world.read_all();
        assert_eq!(world.link("k"), Some(Link::On));
        world.redis.publish("k", "7");
        world.redis.publish("k", "0");
        world.read_all();
        assert!(!x.woken.get(), "a name then 0 is handled by the named client");
        world.redis.publish("own:k:7", "1");
        world.read_all();
        assert!(x.woken.get());

        // Permits: in order, those that fit; a big one is passed over.
        let (big, _) = world.join("s", &Counting, 3);
        let (small, _) = world.join("s", &Counting, 1);
        world.read_all();
        world.redis.publish("s", "2");
        world.read_all();
        assert!(!big.woken.get() && small.woken.get());
        world.check().unwrap();
    }

    #[test]
    fn a_kept_subscription_serves_the_next_waiter_fresh_until_its_time_is_up() {
        let mut world = World::connected();
        world.join("c", &One, 1);
        world.read_all();
        world.leave(0, false);
        assert_eq!(world.link("c"), Some(Link::On));
        let (_, fresh) = world.join("c", &One, 1);
        assert!(fresh, "confirmed and silent since before the attempt");
        assert!(world.redis.inbox.is_empty(), "nothing sent");
        world.leave(0, false);

        // A message after the waiter's count was read: not fresh.
        let since = world.subs.seq.load(Ordering::Acquire);
        world.redis.publish("c", "0");
        world.read_all();
        let (_, fresh, commands) = world.subs.join("c", &One, Rc::new(Spy::default()), since);
        assert!(!fresh && commands.is_empty());
        world.subs.channels.get_mut("c").unwrap().waiters.clear();
        world.subs.leave("c", WaiterId(u64::MAX), false, world.now);

        world.advance(LINGER - Duration::from_millis(1));
        assert_eq!(world.link("c"), Some(Link::On));
        world.advance(Duration::from_millis(1));
        assert_eq!(world.link("c"), Some(Link::Unsubscribing));
        assert_eq!(world.redis.inbox, [Reply::Unsubscribed("c".into())]);
        world.read_all();
        assert_eq!(world.link("c"), None, "removed once confirmed");
        assert!(!world.subs.is_active());
        world.check().unwrap();
    }

    #[test]
    fn an_unsubscription_nobody_asked_for_means_the_slot_moved() {
        let mut world = World::new(true);
        world.connect();
        let (waiter, _) = world.join("c", &One, 1);
        world.read_all();
        world.redis.inbox.push_back(Reply::Unsubscribed("c".into()));
        world.read_all();
        assert_eq!(world.subs.readiness("c"), Readiness::Moved);
        assert!(waiter.woken.get());
        // A waiter joining again here (the slot map not read yet) subscribes again.
        world.join("c", &One, 1);
        assert_eq!(world.link("c"), Some(Link::Subscribing));
        world.check().unwrap();
    }

    #[test]
    fn a_waiter_joining_during_an_unsubscription_subscribes_after_it() {
        let mut world = World::connected();
        world.join("c", &One, 1);
        world.read_all();
        world.leave(0, false);
        world.advance(LINGER);
        assert_eq!(world.link("c"), Some(Link::Unsubscribing));
        world.join("c", &One, 1);
        assert_eq!(world.link("c"), Some(Link::Unsubscribing), "one command in flight at a time");
        world.check().unwrap();
        world.read_one();
        assert_eq!(world.link("c"), Some(Link::Subscribing));
        world.read_all();
        assert_eq!(world.subs.readiness("c"), Readiness::Ready);
        assert!(world.redis.subscribed.contains("c"));
        world.check().unwrap();
    }

    #[test]
    fn channels_without_waiters_go_and_a_reconnect_wakes_every_waiter_once_confirmed() {
        let mut world = World::connected();
        world.redis.refused.insert("r".into());
        world.join("r", &One, 1);
        world.read_all();
        world.leave(0, false);
        assert_eq!(world.link("r"), None, "a refused channel goes with its last waiter");

        let (a, _) = world.join("c", &One, 1);
        world.join("d", &One, 1);
        world.read_all();
        world.leave(1, false);
        world.disconnect();
        assert_eq!(world.link("c"), Some(Link::Off));
        assert_eq!(world.link("d"), None, "nothing kept across a reconnect");
        world.check().unwrap();
        world.connect();
        assert_eq!(world.link("c"), Some(Link::Subscribing));
        assert!(!a.woken.get());
        world.read_all();
        assert!(a.woken.get(), "messages may have been lost meanwhile");
        world.check().unwrap();
    }

    #[test]
    fn a_woken_waiter_that_leaves_without_the_lock_passes_its_wake_up_on() {
        let mut world = World::connected();
        world.join("c", &One, 1);
        let (b, _) = world.join("c", &One, 1);
        world.read_all();
        world.redis.publish("c", "0");
        world.read_all();
        world.leave(0, true);
        assert!(b.woken.get());
    }

    #[test]
    fn a_ping_is_answered_in_turn() {
        let mut world = World::connected();
        world.join("c", &One, 1);
        let ping = world.subs.ping();
        assert_eq!(ping, Some(Command::Ping));
        world.redis.write(ping.into_iter().collect());
        world.read_one();
        assert_eq!(world.redis.inbox, [Reply::Pong]);
        assert!(world.subs.pong());
        assert!(World::new(false).subs.ping().is_none(), "no ping without a connection");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Join {
            channel: usize,
            covering: bool,
            weight: u64,
        },
        Leave {
            pick: usize,
            pass_on: bool,
        },
        Read,
        Publish {
            channel: usize,
            beside: bool,
        },
        Disconnect,
        Connect,
        Advance(u64),
        Refuse(usize),
        /// The channel's slot leaves this node (or comes back).
        Migrate(usize),
    }

    const CHANNELS: [&str; 3] = ["a", "b", "c"];

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..3usize, any::<bool>(), 1..3u64).prop_map(|(channel, covering, weight)| Op::Join { channel, covering, weight }),
            3 => (any::<usize>(), any::<bool>()).prop_map(|(pick, pass_on)| Op::Leave { pick, pass_on }),
            6 => Just(Op::Read),
            2 => (0..3usize, any::<bool>()).prop_map(|(channel, beside)| Op::Publish { channel, beside }),
            1 => Just(Op::Disconnect),
            2 => Just(Op::Connect),
            2 => (0..1500u64).prop_map(Op::Advance),
            1 => (0..3usize).prop_map(Op::Refuse),
            1 => (0..3usize).prop_map(Op::Migrate),
        ]
    }

    fn run(sharded: bool, ops: Vec<Op>) -> std::result::Result<(), TestCaseError> {
        let mut world = World::new(sharded);
        // Each channel keeps one meaning (a channel's name says what it is).
        let mut meanings: HashMap<&str, &'static dyn Meaning> = HashMap::new();
        for op in ops {
            match op {
                Op::Join { channel, covering, weight } => {
                    let name = CHANNELS[channel];
                    let meaning = *meanings.entry(name).or_insert(if covering { &Covering } else { &One });
                    world.join(name, meaning, weight);
                }
                Op::Leave { pick, pass_on } if !world.waiters.is_empty() => {
                    let index = pick % world.waiters.len();
                    world.leave(index, pass_on);
                }
                Op::Leave { .. } => {}
                Op::Read => {
                    // A release on a ready channel wakes a waiter not woken yet, if any.
                    let release = match world.redis.inbox.front() {
                        Some(Reply::Message { channel, payload }) if payload == b"0" => Some(channel.clone()),
                        _ => None,
                    };
                    let unwoken = |world: &World, name: &str| {
                        world.waiters.iter().filter(|(c, _, s)| c == name && !s.woken.get()).count()
                    };
                    let before = release.as_deref().map(|name| unwoken(&world, name));
                    let plain = release
                        .as_deref()
                        .is_some_and(|name| meanings.get(name).is_some_and(|m| m.beside(name, "7").is_empty()));
                    world.read_one();
                    if let (Some(name), Some(before), true) = (release.as_deref(), before, plain)
                        && before > 0
                    {
                        prop_assert_eq!(unwoken(&world, name), before - 1, "a release on {} woke nobody", name);
                    }
                }
                Op::Publish { channel, beside } => {
                    let name = CHANNELS[channel];
                    let target = if beside { format!("own:{name}:7") } else { name.to_owned() };
                    world.redis.publish(&target, "0");
                }
                Op::Disconnect => world.disconnect(),
                Op::Connect if !world.subs.connected => world.connect(),
                Op::Connect => {}
                Op::Advance(ms) => world.advance(Duration::from_millis(ms)),
                Op::Migrate(channel) if sharded => {
                    let name = CHANNELS[channel];
                    if !world.redis.elsewhere.remove(name) {
                        let covered = world.subs.channels.get(name).map(|ch| ch.names(name)).unwrap_or_default();
                        world.redis.slot_leaves(name, &covered);
                    }
                }
                Op::Migrate(_) => {}
                Op::Refuse(channel) => {
                    let name = CHANNELS[channel].to_owned();
                    if !world.redis.refused.remove(&name) {
                        world.redis.refused.insert(name);
                    }
                }
            }
            world.check()?;
        }
        // Quiet: connected, every reply read. Redis holds exactly the ready subscriptions
        // (and what they cover), and every waiter's channel is ready or refused.
        if !world.subs.connected {
            world.connect();
        }
        world.read_all();
        world.check()?;
        let mut on = HashSet::new();
        for (name, ch) in &world.subs.channels {
            match &ch.link {
                Link::On => on.extend(ch.names(name)),
                Link::Refused(_) | Link::Moved => prop_assert!(!ch.waiters.is_empty()),
                other => prop_assert!(false, "{} is {:?} when all is quiet", name, other),
            }
        }
        prop_assert_eq!(&on, &world.redis.subscribed);
        // Everyone leaves and the kept subscriptions run out: nothing is left anywhere.
        while !world.waiters.is_empty() {
            world.leave(0, true);
        }
        world.read_all();
        world.advance(LINGER);
        world.read_all();
        world.check()?;
        prop_assert_eq!(world.subs.channel_count(), 0);
        prop_assert!(world.redis.subscribed.is_empty(), "left subscribed: {:?}", world.redis.subscribed);
        prop_assert!(world.subs.expected.is_empty() && world.subs.covered.is_empty());
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn holds_its_invariants_and_leaves_nothing_behind(
            sharded in any::<bool>(),
            ops in prop::collection::vec(op(), 1..120),
        ) {
            run(sharded, ops)?;
        }
    }
}
