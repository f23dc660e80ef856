//! The state table of the module's documentation, walked row by row.

use super::*;

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
    include_str!("../mod.rs")
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
