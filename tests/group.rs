//! The group lock (Redisson's `RedissonFasterMultiLock`, `getMultiLock(group, values)`):
//! values taken all or none in one script call; exclusion on shared values only; every
//! waiter woken by a release; leases renewed and lost; bad input; and a foreign client
//! (`support::foreign`) and redlease on the same hash, both ways.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{ErrorKind, GroupGuard, MultiLock};

use crate::helpers::*;
use crate::support::foreign::wait::lock_wake;
use crate::support::foreign::{self, Acquire, Publish, Release, keys};
use crate::support::server::RedisServer;

/// Fields Redisson computes for these values (`StringCodec`), as its `Hash.hash128toBase64`.
const JACK: (&str, &str) = ("Jack_001", "7pNoDdizVy2xY792MaFv+w");
const MARY: (&str, &str) = ("Mary_002", "kIX2DFOX4IWct7G7K6tV9A");

fn holder(conn: &mut redis::Connection, group: &str, field: &str) -> Option<String> {
    redis::cmd("HGET").arg(group).arg(field).query(conn).unwrap()
}

/// Two group locks exclude each other on the values they share and on nothing else; a
/// refused attempt writes nothing; the fields are Redisson's, under the guard's own owner;
/// the values go with the release (and the hash with the last of them).
///
/// Breaks if an attempt takes some values when another is busy (not all or none), if
/// disjoint sets exclude each other, or if the layout is not Redisson's.
#[test]
fn values_are_taken_all_or_none_and_only_shared_ones_exclude() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let first = client.group_lock("class", [JACK.0, "Anna_003"]).try_lock().unwrap().expect("free");
    assert_eq!(
        holder(&mut conn, "class", JACK.1).as_deref(),
        Some(first.owner()),
        "Redisson's field, the guard's owner"
    );
    assert!(first.owner().starts_with(&format!("{}:", client.id())));
    let busy = client.group_lock("class", [MARY.0, JACK.0]);
    assert!(busy.try_lock().unwrap().is_none(), "Jack is held");
    assert_eq!(holder(&mut conn, "class", MARY.1), None, "all or none: Mary was not taken");
    assert!(busy.is_locked().unwrap(), "one of its values is held");
    let other = client.group_lock("class", [MARY.0]).try_lock().unwrap().expect("disjoint values do not exclude");
    assert_eq!(first.values(), 2);
    let expires: String = redis::cmd("HGET")
        .arg("class")
        .arg(format!("{}:{}:expire_time", JACK.1, first.owner()))
        .query(&mut conn)
        .unwrap();
    let left = expires.parse::<u64>().unwrap().saturating_sub(now_ms());
    assert!(left > 20_000 && left <= 31_000, "the watchdog's lease, in epoch ms: {left} ms left");
    first.unlock().expect("released");
    drop(other);
    assert!(!exists(&mut conn, "class"), "nothing left behind");
    assert!(!busy.is_locked().unwrap());
}

/// Threads of two clients take overlapping pairs of four values and increment a counter
/// per value non-atomically: no value ever has two holders, and every waiter gets through.
///
/// Breaks if the script lets two owners hold a shared value, or if a release fails to
/// wake a waiter whose values it freed.
#[test]
fn overlapping_groups_never_share_a_value() {
    let server = RedisServer::start();
    let clients = [client(&server), client(&server)];
    const SECTIONS: usize = 40;
    let pairs: [[&str; 2]; 4] = [["a", "b"], ["b", "c"], ["c", "d"], ["d", "a"]];
    thread::scope(|scope| {
        for (n, pair) in pairs.iter().enumerate() {
            let lock = clients[n % 2].group_lock("ring", pair);
            let url = server.url();
            scope.spawn(move || {
                let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
                for _ in 0..SECTIONS {
                    let guard = lock.try_lock_for(Duration::from_secs(60)).expect("no error").expect("acquired");
                    for value in pair {
                        increment_non_atomically(&mut conn, &format!("count:{value}"));
                    }
                    drop(guard);
                }
            });
        }
    });
    let mut conn = server.conn();
    for value in ["a", "b", "c", "d"] {
        let count: u64 = redis::cmd("GET").arg(format!("count:{value}")).query(&mut conn).unwrap();
        assert_eq!(count, 2 * SECTIONS as u64, "value {value}: an increment was lost, two holders at once");
    }
    assert!(!exists(&mut conn, "ring"));
}

/// A release wakes every waiter of the group, each of which takes its own values: two
/// waiters for different values behind one holder of both are both served at once.
///
/// Breaks if a release wakes one waiter only (Redisson wakes one per process, and the
/// other waits until the holder's lease would have ended).
#[test]
fn a_release_wakes_every_waiter_for_its_own_values() {
    let server = RedisServer::start();
    let client = client(&server);
    let holder = client.group_lock("seats", ["1A", "1B"]).lock().unwrap();
    let (served_tx, served) = mpsc::channel::<(Instant, GroupGuard)>();
    let waiters: Vec<_> = ["1A", "1B"]
        .into_iter()
        .map(|seat| {
            let (lock, served_tx) = (client.group_lock("seats", [seat]), served_tx.clone());
            thread::spawn(move || {
                let guard = lock.try_lock_for(Duration::from_secs(20)).unwrap().expect("served");
                served_tx.send((Instant::now(), guard)).unwrap();
            })
        })
        .collect();
    // Both parked: a waiter still on its first attempt would get its seat without a wake-up.
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 2), "both waiters parked");
    let released = Instant::now();
    holder.unlock().unwrap();
    // Both guards are kept until both are served: a first waiter's release must not be
    // what wakes the second.
    let mut guards = Vec::new();
    for _ in 0..2 {
        let (at, guard) = served.recv_timeout(Duration::from_secs(10)).expect("both waiters served");
        let after = at.saturating_duration_since(released);
        assert!(after < Duration::from_secs(2), "woken by the release, not its lease: {after:?}");
        guards.push(guard);
    }
    for waiter in waiters {
        waiter.join().unwrap();
    }
}

/// The watchdog renews a group's values for several of its timeouts; a fixed lease runs
/// out, another owner takes a value, and the first guard's release reports the loss
/// (`NotHeld`, once) and leaves the new holder alone.
///
/// Breaks if renewals do not reach the values' `expire_time`, or if a lapsed holder's
/// release frees values another owner holds.
#[test]
fn leases_are_renewed_and_a_lapsed_holder_releases_nothing_of_the_next() {
    let server = RedisServer::start();
    let client = client_with(&server, |b| b.watchdog_timeout(Duration::from_secs(1)));
    let renewed = client.group_lock("renewed", ["x", "y"]).lock().unwrap();
    thread::sleep(Duration::from_millis(3_500));
    assert!(renewed.is_held());
    assert!(client.group_lock("renewed", ["y"]).try_lock().unwrap().is_none(), "still held after 3.5 timeouts");
    renewed.unlock().expect("released");

    let lapsing = client.group_lock("lapsing", ["x", "y"]).with_lease(Duration::from_millis(300)).lock().unwrap();
    let next = client
        .group_lock("lapsing", ["y"])
        .try_lock_for(Duration::from_secs(5))
        .unwrap()
        .expect("free after the lease");
    let err = lapsing.unlock().expect_err("the lease ran out while held");
    assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}");
    assert!(next.is_held());
    assert!(client.group_lock("lapsing", ["y"]).is_locked().unwrap(), "the next holder's value stays held");
    next.unlock().expect("released");
}

/// One acquisition of ten values is one script call; a `MultiLock` over ten locks needs
/// ten. Force unlock frees values whoever holds them and wakes the waiters; the holder
/// learns of it at its release.
///
/// Breaks if the group lock takes its values one call at a time.
#[test]
fn ten_values_are_one_round_trip_and_force_unlock_frees_them() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let values: Vec<String> = (0..10).map(|n| format!("v{n}")).collect();
    let group = client.group_lock("ten", &values);
    let _warm = group.try_lock().unwrap().expect("free");
    drop(_warm);
    let before = calls_of(&mut conn, "evalsha");
    let guard = group.try_lock().unwrap().expect("free");
    assert_eq!(calls_of(&mut conn, "evalsha") - before, 1, "one script call for ten values");
    let multi = MultiLock::new(values.iter().map(|v| client.lock(format!("multi:{v}"))));
    drop(multi.try_lock().unwrap().expect("free"));
    let before = calls_of(&mut conn, "evalsha");
    let held = multi.try_lock().unwrap().expect("free");
    assert_eq!(calls_of(&mut conn, "evalsha") - before, 10, "a multi-lock asks each lock");
    drop(held);
    assert!(group.force_unlock().unwrap(), "values were held");
    assert!(!group.force_unlock().unwrap(), "nothing left to free");
    assert!(!exists(&mut conn, "ten"));
    assert_eq!(guard.unlock().expect_err("force-unlocked").kind(), ErrorKind::NotHeld);
}

/// No value, a value twice, more than `MAX_GROUP_VALUES` (1,000) values, a bad lease, a bad name: every call is
/// `InvalidInput` before anything is sent.
///
/// Breaks if a bad group reaches Redis (a duplicate would count one value twice).
#[test]
fn bad_groups_are_refused_before_anything_is_sent() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let too_many: Vec<String> = (0..=redlease::MAX_GROUP_VALUES).map(|n| n.to_string()).collect();
    let bad = [
        ("no value", client.group_lock("g", Vec::<&str>::new())),
        ("a value twice", client.group_lock("g", ["a", "b", "a"])),
        ("too many", client.group_lock("g", &too_many)),
        ("a zero lease", client.group_lock("g", ["a"]).with_lease(Duration::ZERO)),
        ("an empty name", client.group_lock("", ["a"])),
    ];
    let before = commands_served(&mut conn);
    for (what, lock) in &bad {
        let err = lock.try_lock().expect_err(what);
        assert!(err.is_invalid_input(), "{what}: {err}");
        if *what != "a zero lease" {
            assert!(lock.is_locked().expect_err(what).is_invalid_input(), "{what}");
            assert!(lock.force_unlock().expect_err(what).is_invalid_input(), "{what}");
        }
    }
    assert_eq!(commands_served(&mut conn), before, "nothing was sent");
    let err = client.group_lock("g", ["a", "b", "a"]).try_lock().unwrap_err();
    assert!(err.to_string().contains("value 3 is value 1 again"), "{err}");
}

/// Each foreign client's group lock (Redisson's `RedissonFasterMultiLock`) and redlease's on
/// the same hash, both ways: a foreign holder excludes redlease on shared values and not on
/// others, and its release wakes a redlease waiter; redlease's hold makes the foreign
/// acquire wait for its lease, the foreign `isLocked` sees it, and redlease's release wakes
/// a parked foreign waiter, after which redlease waits for it.
///
/// Breaks if the fields, owners' `expire_time` or the channel differ from Redisson's.
#[test]
fn foreign_group_locks_and_redlease_share_a_group() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    for (i, peer) in foreign::peers().iter().enumerate() {
        let (who, course) = (peer.who(), format!("course-{i}"));
        let acquire = |conn: &mut redis::Connection, fields: &[&str]| {
            peer.group_acquire(conn, &course, JAVA_OWNER, now_ms(), fields).unwrap()
        };
        assert_eq!(acquire(&mut conn, &[JACK.1]), Acquire::Granted, "{who} takes Jack");
        let both = client.group_lock(&course, [JACK.0, MARY.0]);
        assert!(both.try_lock().unwrap().is_none(), "{who}: Jack is the peer's");
        let mary = client.group_lock(&course, [MARY.0]).try_lock().unwrap().expect("Mary is free");
        drop(mary);
        let waiting = both.clone();
        let waiter = thread::spawn(move || {
            let guard = waiting.try_lock_for(Duration::from_secs(20)).unwrap();
            (Instant::now(), guard)
        });
        assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "{who}: the waiter parked");
        let released = Instant::now();
        let freed = peer.group_release(&mut conn, &course, JAVA_OWNER, now_ms(), &[JACK.1], Publish::Classic).unwrap();
        assert_eq!(freed, Release::Freed, "{who} frees Jack");
        let (at, guard) = waiter.join().unwrap();
        let guard = guard.expect("served");
        assert!(at.saturating_duration_since(released) < Duration::from_secs(2), "{who}: woken by its message");

        // The other way round.
        let busy = acquire(&mut conn, &[MARY.1]);
        assert!(
            matches!(busy, Acquire::Busy(ms) if ms > 20_000 && ms <= 30_000),
            "{who} waits for the lease: {busy:?}"
        );
        let locked = peer.group_is_locked(&mut conn, &course, now_ms(), &[JACK.1]).unwrap();
        assert!(locked, "{who}: isLocked sees redlease's hold");
        let attempt =
            |conn: &mut redis::Connection| peer.group_acquire(conn, &course, JAVA_OWNER, now_ms(), &[JACK.1, MARY.1]);
        let channel = keys::lock_channel(&course);
        let release = || guard.unlock().unwrap();
        assert_foreign_woken(&who, &|| server.conn(), (&channel, Publish::Classic, lock_wake), &attempt, release);
        assert!(both.try_lock().unwrap().is_none(), "{who}: and redlease waits for the peer");
    }
}
