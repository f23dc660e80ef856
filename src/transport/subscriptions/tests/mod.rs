//! The subscriptions' tests: the state table of the module's documentation held row by
//! row, and the flows around it.

use std::cell::Cell;
use std::collections::HashSet;
use std::rc::Rc;

use proptest::prelude::*;

use super::*;

mod model;
mod scenarios;
mod table;

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
