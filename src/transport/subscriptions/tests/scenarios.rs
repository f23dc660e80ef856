//! Scenarios across several rows of the state table (each row alone: `table`).

use super::*;

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
