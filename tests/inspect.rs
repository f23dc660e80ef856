//! Who holds what: clients announce themselves while they hold or wait, and the read-only
//! inspection API (`Client::inspect`, `Client::locks`) names each holder's host, pid and
//! program, for every kind, on one server and across a cluster's masters.

use std::thread;
use std::time::{Duration, Instant, SystemTime};

use redlease::{Client, ErrorKind, HolderRole, LockKind};

use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::cluster::ClusterGroup;
use crate::support::foreign::{self, Acquire};
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] = &[("inspect_holder", holder)];

/// A child process that holds `LOCK` with a 1 s watchdog until it is killed.
fn holder() {
    let client =
        redlease::Client::builder(child::env("REDIS_URL")).watchdog_timeout(Duration::from_secs(1)).build().unwrap();
    let guard = client.lock(child::env("LOCK")).lock().unwrap();
    child::say(&format!("holding {}", client.id()));
    thread::sleep(Duration::from_secs(120));
    drop(guard);
}

/// A holder in another process is named by its host, pid, program and version; its
/// announcement is refreshed while it holds (it outlives its first lease) and is gone
/// within one lease (1 s) after the process is SIGKILLed.
///
/// Breaks if the announcement is not written, names the wrong process, is not kept alive
/// by the renewal thread, or never expires.
#[test]
fn a_holder_in_another_process_is_named_and_its_announcement_dies_with_it() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let mut child = Child::spawn("inspect_holder", &[("REDIS_URL", server.url()), ("LOCK", "who".into())]);
    let line = child.wait_line("holding ", Duration::from_secs(10));
    let id = line.trim_start_matches("holding ").trim().to_owned();
    let key = announcement_key(&id);
    assert!(wait_until(Duration::from_secs(2), || exists(&mut conn, &key)), "announced");
    let ttl = pttl(&mut conn, &key);
    assert!(ttl > 0 && ttl <= 1000, "expires within a lease: {ttl} ms");

    let info = client.inspect("who").unwrap();
    assert_eq!(info.kind, Some(LockKind::Lock));
    assert!(info.is_held());
    assert_eq!(info.holders.len(), 1);
    let holder = &info.holders[0];
    assert!(holder.owner.starts_with(&format!("{id}:")), "{}", holder.owner);
    assert_eq!((holder.role, holder.holds), (HolderRole::Lock, 1));
    let who = holder.client.as_ref().expect("the holder's client announced itself");
    assert_eq!(who.pid, child.pid());
    assert_eq!(who.id, id);
    assert_eq!(who.host, client.identity().host, "same machine");
    assert_eq!(who.program, client.identity().program, "the test binary runs the child");
    assert_eq!(who.version, env!("CARGO_PKG_VERSION"));
    let age = SystemTime::now().duration_since(who.started).unwrap_or_default();
    assert!(age < Duration::from_secs(60), "started moments ago: {age:?}");
    assert!(info.lease_left.is_some_and(|l| l <= Duration::from_secs(1)), "{:?}", info.lease_left);

    // Still there two leases later: refreshed while it holds.
    thread::sleep(Duration::from_millis(2100));
    assert!(exists(&mut conn, &key), "refreshed while holding");
    assert!(client.inspect("who").unwrap().holders[0].client.is_some());

    child.kill();
    let killed = Instant::now();
    assert!(wait_until(Duration::from_secs(3), || !exists(&mut conn, &key)), "gone after the process");
    assert!(killed.elapsed() <= Duration::from_millis(1500), "within one lease: {:?}", killed.elapsed());
    // The lock's own lease ran out too: nobody holds it, and nothing names a dead client.
    assert!(wait_until(Duration::from_secs(3), || !client.inspect("who").unwrap().is_held()));
}

/// A client announces itself only while it holds or waits for something: nothing before
/// its first acquire, kept while a thread of it waits longer than a lease, gone within a
/// lease once it holds and waits for nothing, though it keeps running.
///
/// Breaks if the announcement is written on connect, lapses while a thread waits, or is
/// refreshed forever by an idle client.
#[test]
fn a_client_announces_itself_only_while_it_holds_or_waits() {
    let server = RedisServer::start();
    let holder = client(&server);
    let waiter = client_with(&server, |b| b.watchdog_timeout(Duration::from_secs(1)));
    let mut conn = server.conn();
    let key = announcement_key(waiter.id());
    thread::sleep(Duration::from_millis(300));
    assert!(!exists(&mut conn, &key), "nothing announced before the first acquire");

    let guard = holder.lock("announce").lock().unwrap();
    let waiting = {
        let lock = waiter.lock("announce");
        thread::spawn(move || lock.try_lock_for(Duration::from_secs(20)).unwrap().map(drop).is_some())
    };
    assert!(wait_until(Duration::from_secs(2), || exists(&mut conn, &key)), "announced while waiting");
    // Three leases of waiting: refreshed all along.
    for _ in 0..6 {
        thread::sleep(Duration::from_millis(500));
        assert!(exists(&mut conn, &key), "kept while a thread waits");
    }
    drop(guard);
    assert!(waiting.join().unwrap(), "the waiter got the lock");
    // Idle now: gone within one lease of its last refresh, the client still running.
    assert!(wait_until(Duration::from_secs(3), || !exists(&mut conn, &key)), "left to expire when idle");
    assert!(!waiter.is_shutdown());
    // And back with the next acquire.
    let again = waiter.lock("announce").lock().unwrap();
    assert!(wait_until(Duration::from_secs(2), || exists(&mut conn, &key)), "announced again");
    drop(again);
}

/// Every kind reads as its layout shows it, with its holders (hold counts, roles, clients),
/// a fair lock's queue in order with deadlines, a fenced lock's token, a semaphore's
/// permits, a group's holder; an owner written by a foreign client shows with no
/// client (unknown), not as an error; a key that is not a lock is foreign; a free name is
/// empty.
///
/// Breaks if a kind is misread, a holder or waiter is missed or misnamed, or a Redisson
/// owner makes the inspection fail.
#[test]
fn every_kind_reads_as_its_layout_shows_it() {
    let server = RedisServer::start();
    let client = client(&server);
    let other = client_with(&server, |b| b.fair_wait_timeout(Duration::from_secs(30)));
    let mut conn = server.conn();
    inspect_plain_held_twice(&client);
    inspect_fair_with_one_waiter_in_line(&client, &other, &mut conn);
    inspect_read_write_with_two_readers(&client, &other);
    inspect_fenced_with_its_token(&client);
    inspect_semaphores_with_their_permits(&client);
    inspect_group_with_its_holder(&client);
    inspect_foreign_owners(&client, &mut conn);
    inspect_foreign_keys(&client, &mut conn);
}

/// A plain lock held twice by this thread, then free.
fn inspect_plain_held_twice(client: &Client) {
    let me = client.identity().clone();
    let outer = client.lock("k:plain").lock().unwrap();
    let inner = client.lock("k:plain").lock().unwrap();
    let info = client.inspect("k:plain").unwrap();
    assert_eq!((info.kind, info.holders.len(), info.holders[0].holds), (Some(LockKind::Lock), 1, 2));
    assert!(info.holders[0].owner.starts_with(client.id()));
    assert!(wait_until(Duration::from_secs(2), || client.inspect("k:plain").unwrap().holders[0].client.is_some()));
    assert_eq!(client.inspect("k:plain").unwrap().holders[0].client.as_ref(), Some(&me));
    assert_eq!(info.waiting_clients, Some(0), "{info:?}");
    drop((inner, outer));
    let free = client.inspect("k:plain").unwrap();
    assert!(!free.is_held() && free.kind.is_none() && !free.is_foreign() && free.lease_left.is_none());
}

/// A fair lock, with one waiter of another client in line.
fn inspect_fair_with_one_waiter_in_line(client: &Client, other: &Client, conn: &mut redis::Connection) {
    let fair = client.fair_lock("k:fair").lock().unwrap();
    let queued = {
        let lock = other.fair_lock("k:fair");
        thread::spawn(move || lock.try_lock_for(Duration::from_secs(20)).unwrap().map(drop).is_some())
    };
    assert!(wait_until(Duration::from_secs(5), || llen(conn, "redisson_lock_queue:{k:fair}") == 1));
    let info = client.inspect("k:fair").unwrap();
    assert_eq!(info.kind, Some(LockKind::Fair));
    assert_eq!(info.queue.len(), 1);
    assert_eq!(info.queue[0].position, 1);
    assert!(info.queue[0].owner.starts_with(other.id()));
    let deadline = info.queue[0].deadline.expect("a place has a deadline");
    assert!(deadline > info.server_time, "in the future");
    assert_eq!(info.queue[0].client.as_ref().map(|c| c.id.as_str()), Some(other.id()));
    drop(fair);
    assert!(queued.join().unwrap());
}

/// A read-write lock: two readers of two clients, then a writer.
fn inspect_read_write_with_two_readers(client: &Client, other: &Client) {
    let r1 = client.read_write_lock("k:rw").read().lock().unwrap();
    let r2 = other.read_write_lock("k:rw").read().lock().unwrap();
    let info = client.inspect("k:rw").unwrap();
    assert_eq!(info.kind, Some(LockKind::ReadWrite));
    assert_eq!(info.holders.iter().filter(|h| h.role == HolderRole::Read).count(), 2, "{:?}", info.holders);
    assert!(info.holders.iter().all(|h| h.lease_left.is_some()), "each reader's lease: {:?}", info.holders);
    drop((r1, r2));
    let w = client.read_write_lock("k:rw").write().lock().unwrap();
    let info = client.inspect("k:rw").unwrap();
    assert_eq!((info.holders.len(), info.holders[0].role), (1, HolderRole::Write));
    drop(w);
}

/// A fenced lock: its token, held and after.
fn inspect_fenced_with_its_token(client: &Client) {
    let g = client.fenced_lock("k:fenced").lock().unwrap();
    let token = g.token();
    let info = client.inspect("k:fenced").unwrap();
    assert_eq!((info.kind, info.token), (Some(LockKind::Fenced), Some(token)));
    drop(g);
    let info = client.inspect("k:fenced").unwrap();
    assert_eq!((info.kind, info.token, info.is_held()), (Some(LockKind::Fenced), Some(token), false));
}

/// The semaphores: their permits.
fn inspect_semaphores_with_their_permits(client: &Client) {
    let sem = client.semaphore("k:sem");
    assert!(sem.try_set_permits(3).unwrap());
    let p = sem.try_acquire(1).unwrap().expect("a permit");
    let info = client.inspect("k:sem").unwrap();
    assert_eq!(
        (info.kind, info.permits_available, info.permits_total()),
        (Some(LockKind::Semaphore), Some(2), Some(2))
    );
    drop(p);
    let pes = client.permit_expirable_semaphore("k:pes");
    assert!(pes.try_set_permits(2).unwrap());
    let permit = pes.try_acquire(1).unwrap().expect("a permit");
    let info = client.inspect("k:pes").unwrap();
    assert_eq!((info.permits_available, info.permits_taken, info.permits_total()), (Some(1), 1, Some(2)));
    assert_eq!(info.permits.len(), 1);
    assert!(info.permits[0].deadline.is_some_and(|d| d > info.server_time));
    assert!(info.is_held());
    drop(permit);
}

/// A group lock's holder and the values it holds.
fn inspect_group_with_its_holder(client: &Client) {
    let group = client.group_lock("k:group", ["a", "b", "c"]);
    let held = group.lock().unwrap();
    let info = client.inspect("k:group").unwrap();
    assert_eq!(info.kind, Some(LockKind::Group));
    assert_eq!((info.holders.len(), info.holders[0].role, info.holders[0].holds), (1, HolderRole::Values, 3));
    assert!(info.holders[0].owner.starts_with(client.id()));
    drop(held);
}

/// An owner written by a foreign client (the layout peer, Redisson's own script): unknown
/// client, no error.
fn inspect_foreign_owners(client: &Client, conn: &mut redis::Connection) {
    let java_owner = "2c3c9a4e-0d5e-4c5e-9d6a-7f1b2a3c4d5e:1";
    for (i, peer) in foreign::peers().iter().enumerate() {
        let (who, name) = (peer.who(), format!("k:java-{i}"));
        assert_eq!(peer.lock_acquire(conn, &name, java_owner).unwrap(), Acquire::Granted, "{who}");
        let info = client.inspect(&name).unwrap();
        assert_eq!((info.kind, info.holders[0].owner.as_str()), (Some(LockKind::Lock), java_owner), "{who}");
        assert_eq!((info.holders[0].holds, info.holders[0].client.as_ref()), (1, None), "{who}: announces nothing");
    }
}

/// Someone else's keys are foreign.
fn inspect_foreign_keys(client: &Client, conn: &mut redis::Connection) {
    let _: () = redis::cmd("SET").arg("k:text").arg("hello").query(conn).unwrap();
    let _: () = redis::cmd("HSET").arg("k:user").arg("name").arg("Ada").query(conn).unwrap();
    for foreign in ["k:text", "k:user"] {
        let info = client.inspect(foreign).unwrap();
        assert!(info.is_foreign() && info.kind.is_none() && !info.is_held(), "{foreign}: {info:?}");
    }
}

/// `locks(pattern)` lists what matches and is a lock, leaving out the keys kept beside locks
/// (queues, tokens, announcements, read holds), someone else's keys and non-matches; bad
/// patterns are `InvalidInput` before anything is sent.
///
/// Breaks if a helper key or a foreign key is listed, a matching lock is missed, or a bad
/// pattern reaches Redis.
#[test]
fn a_listing_holds_locks_and_nothing_beside_them() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let a = client.lock("jobs:a").lock().unwrap();
    let b = client.fenced_lock("jobs:b").lock().unwrap();
    let c = client.read_write_lock("jobs:c").read().lock().unwrap();
    let sem = client.permit_expirable_semaphore("jobs:d");
    assert!(sem.try_set_permits(1).unwrap());
    let p = sem.try_acquire(1).unwrap().unwrap();
    let elsewhere = client.lock("other:x").lock().unwrap();
    let _: () = redis::cmd("SET").arg("jobs:text").arg("hello").query(&mut conn).unwrap();
    assert!(wait_until(Duration::from_secs(5), || exists(&mut conn, &announcement_key(client.id()))));

    let names = |pattern: &str| -> Vec<String> { client.locks(pattern).unwrap().into_iter().map(|i| i.name).collect() };
    assert_eq!(names("jobs:*"), ["jobs:a", "jobs:b", "jobs:c", "jobs:d"]);
    let all = names("*");
    assert!(all.contains(&"other:x".to_owned()) && all.len() == 5, "{all:?}");
    let listed = client.locks("jobs:a").unwrap();
    assert_eq!(listed[0].holders[0].client.as_ref().map(|c| c.pid), Some(std::process::id()));

    let before = commands_served(&mut conn);
    assert_eq!(client.locks("").unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(client.locks(&"x".repeat(redlease::MAX_NAME_LEN + 1)).unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(client.inspect("").unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(commands_served(&mut conn) - before, 0, "nothing was sent");
    drop((a, b, c, p, elsewhere));
}

/// An election is looked up by the name it was given: `inspect("NAME")` shows its leader,
/// term and value while it leads (not a free name), and a listing matches it by that name
/// (`jobs:*` finds the election `jobs:leader`, listed as `jobs:leader`, once, also with a
/// pattern that matches its hash's key).
///
/// Breaks if an election is only found under its hash's key (`redlease_election:{NAME}`):
/// `status NAME` said "free" while a leader led, and `ls 'NAME*'` did not list it.
#[test]
fn an_election_is_found_by_its_name() {
    let server = RedisServer::start();
    let client = client(&server);
    let leadership = client.election("jobs:leader").campaign("127.0.0.7:8080").unwrap();
    let lock = client.lock("jobs:a").lock().unwrap();
    // The renewal thread writes the client's announcement a moment after its first
    // acquire: a loaded machine (seen in CI) can be slower than the inspection.
    announced(&client, &mut server.conn());
    let info = client.inspect("jobs:leader").unwrap();
    assert_eq!((info.name.as_str(), info.kind), ("jobs:leader", Some(redlease::LockKind::Election)));
    assert_eq!(info.token, Some(leadership.term()));
    assert_eq!(info.holders.len(), 1, "{info:?}");
    assert_eq!(info.holders[0].client.as_ref().map(|c| c.pid), Some(std::process::id()));
    let names = |pattern: &str| -> Vec<String> { client.locks(pattern).unwrap().into_iter().map(|i| i.name).collect() };
    assert_eq!(names("jobs:*"), ["jobs:a", "jobs:leader"]);
    assert_eq!(names("*"), ["jobs:a", "jobs:leader"], "once, by its name");
    assert_eq!(client.inspect("jobs:free").unwrap().kind, None, "a free name is still free");
    leadership.resign().unwrap();
    assert_eq!(client.inspect("jobs:leader").unwrap().kind, None, "resigned: nobody leads");
    drop(lock);
}

/// In a cluster the listing scans every master: locks whose slots are on three masters
/// are all listed, each inspected on its own master with its holder named.
///
/// Breaks if only one master is scanned or an inspection goes to the wrong node.
#[test]
fn a_listing_scans_every_master_of_a_cluster() {
    let cluster = ClusterGroup::start();
    cluster.wait_healthy(Duration::from_secs(30));
    let client = build_patiently(Duration::from_secs(20), || redlease::Client::builder(cluster.url()));
    // Names until every master serves one.
    let mut names = Vec::new();
    let mut masters = Vec::new();
    for i in 0.. {
        let name = format!("spread:{i}");
        let port = cluster.master_of(cluster.slot_of(&name)).port();
        if !masters.contains(&port) {
            masters.push(port);
            names.push(name);
        }
        if masters.len() == cluster.masters().len() {
            break;
        }
    }
    let guards: Vec<_> = names.iter().map(|n| client.lock(n.as_str()).lock().unwrap()).collect();
    let listed = client.locks("spread:*").unwrap();
    let mut listed_names: Vec<String> = listed.iter().map(|i| i.name.clone()).collect();
    names.sort();
    listed_names.sort();
    assert_eq!(listed_names, names, "one lock on each of {} masters", masters.len());
    assert!(listed.iter().all(|i| i.is_held() && i.holders[0].owner.starts_with(client.id())));
    assert!(wait_until(Duration::from_secs(3), || {
        client.locks("spread:*").unwrap().iter().all(|i| i.holders[0].client.is_some())
    }));
    drop(guards);
}

/// What counts a client active is let go with what it held, whatever took it: a plain
/// semaphore's permits (no hold of their own) leave the client idle once given back, and
/// its announcement expires; a Redlock's release does not take away the count of a lock
/// the client still holds, whose announcement stays.
///
/// Breaks if an acquisition that makes no hold keeps the client counted active (its
/// announcement then refreshed forever), or a release takes away another's count.
#[test]
fn a_client_is_active_exactly_while_it_holds_whatever_it_took() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let fresh = || -> Vec<redlease::Client> {
        servers.iter().map(|s| client_with(s, |b| b.watchdog_timeout(Duration::from_secs(1)))).collect()
    };
    let mut conn = servers[0].conn();

    let clients = fresh();
    let key = announcement_key(clients[0].id());
    let sem = clients[0].semaphore("idle:sem");
    assert!(sem.try_set_permits(1).unwrap());
    // A lock held meanwhile has the client announced for sure (a grant alone is over
    // before the renewal thread may look); once it is let go, nothing should be left
    // counting the client active.
    let held = clients[0].lock("idle:before").lock().unwrap();
    sem.acquire(1).unwrap().release().unwrap();
    assert!(wait_until(Duration::from_secs(2), || exists(&mut conn, &key)), "announced");
    held.unlock().unwrap();
    assert!(wait_until(Duration::from_secs(4), || !exists(&mut conn, &key)), "left to expire once idle");

    let clients = fresh();
    let key = announcement_key(clients[0].id());
    let held = clients[0].lock("idle:held").lock().unwrap();
    let red = redlease::RedLock::new(clients.iter().map(|c| c.lock("idle:red")));
    red.lock().unwrap().unlock().unwrap();
    // Three leases on: still announced, the lock being held all along.
    for _ in 0..6 {
        thread::sleep(Duration::from_millis(500));
        assert!(exists(&mut conn, &key), "announced while it holds a lock");
    }
    drop(held);
}
