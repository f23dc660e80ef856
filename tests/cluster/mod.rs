//! Redis Cluster: a real cluster of three masters with a replica each, started by the test
//! kit on loopback ports. Every lock kind on every master, wake-ups across nodes through
//! sharded pub/sub, a held lock's slot migrated and failed over under it, exclusion across
//! two processes while the cluster changes, bad input, and the locks of the healthy masters
//! while another is killed (its bystander threads and their checks are in `bystanders`).

mod bystanders;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{Client, ErrorKind, MultiLock, RedLock, ShardedSubscriptionMode};

use self::bystanders::{RIDE_OUT, by_message, kill_among_bystanders};
use crate::helpers::*;
use crate::support::child::{self, Child};
use crate::support::cluster::ClusterGroup;
use crate::support::foreign::wait::lock_wake;
use crate::support::foreign::{self, Acquire, Publish, Release, keys};
use crate::support::server::RedisServer;

pub const ROLES: &[crate::support::child::Role] = &[("cluster_worker", cluster_worker)];

fn client(group: &ClusterGroup, watchdog: Duration) -> Client {
    client_in(group, watchdog, ShardedSubscriptionMode::Auto)
}

/// A client whose lock messages use the pub/sub `mode` says.
fn client_in(group: &ClusterGroup, watchdog: Duration, mode: ShardedSubscriptionMode) -> Client {
    Client::builder(group.url())
        .watchdog_timeout(watchdog)
        .command_timeout(Duration::from_secs(2))
        .sharded_subscription_mode(mode)
        .build()
        .expect("a cluster client")
}

/// Starts a thread in `scope` that waits up to `bound` for `name` on `client`, sends the
/// moment it got the lock, and releases it; returns once the waiter is parked (counted by
/// the client), with the receiver of that moment.
fn parked_waiter<'scope>(
    scope: &'scope thread::Scope<'scope, '_>,
    client: &'scope Client,
    name: &'scope str,
    bound: Duration,
) -> mpsc::Receiver<Instant> {
    let (tx, rx) = mpsc::channel();
    scope.spawn(move || {
        let got = client.lock(name).try_lock_for(bound).expect("waits");
        tx.send(Instant::now()).unwrap();
        drop(got.expect("granted"));
    });
    assert!(wait_until(Duration::from_secs(5), || client.stats().waiters == 1), "{:?}", client.stats());
    rx
}

/// Names whose slots are served by each of the three masters, one per master.
fn names_on_every_master(group: &ClusterGroup, prefix: &str) -> Vec<String> {
    let mut found: Vec<(u16, String)> = Vec::new();
    for i in 0.. {
        let name = format!("{prefix}-{i}");
        let port = group.master_of(group.slot_of(&name)).port();
        if !found.iter().any(|(p, _)| *p == port) {
            found.push((port, name));
        }
        if found.len() == 3 {
            break;
        }
    }
    found.into_iter().map(|(_, name)| name).collect()
}

/// Every lock kind, the semaphores and the latch, on a name served by each master: each
/// lock is written on the master of its slot, and every call succeeds.
/// A waiter parked on one client is woken by the release another client makes, through
/// the channel's shard (a watchdog lease of 30 s: without the message it would wait that
/// long). Names with a hash tag work; a name with braces but no hash tag is refused, since
/// its keys would land in different slots. A multi-lock over locks on all three masters
/// works.
///
/// Breaks if a script goes to the wrong node (a MOVED not followed, or CROSSSLOT), if the
/// release message does not reach a waiter on another node's shard, or if a name whose
/// keys span slots is accepted.
#[test]
fn every_kind_works_on_every_master_and_waiters_wake_across_nodes() {
    let group = ClusterGroup::start();
    let a = client(&group, Duration::from_secs(30));
    let b = client(&group, Duration::from_secs(30));
    every_kind_on_every_master(&group, &a, &b, "kind");
    // Hash tags keep a name's keys together; braces without a tag are refused.
    a.fair_lock("{orders}:42").lock().expect("a tagged name").unlock().expect("unlock");
    for bad in ["x{}y", "a}{b", "open{only"] {
        let err = a.fair_lock(bad).try_lock().expect_err(bad);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}: {err}");
    }
    let spread = names_on_every_master(&group, "multi");
    let multi = MultiLock::new(spread.iter().map(|n| a.lock(n)));
    multi.lock().expect("a multi-lock over three masters").unlock().expect("unlock");
}

/// Every lock kind, the semaphores, the latch and an election on a name (starting with
/// `prefix`) served by each master, with clients `a` and `b` (30 s watchdog leases): every
/// call succeeds, each lock is written on the master of its slot, and a waiter parked on
/// `b` (a lock's, a campaign's) is woken by `a`'s release well before the lease would end.
fn every_kind_on_every_master(group: &ClusterGroup, a: &Client, b: &Client, prefix: &str) {
    for name in names_on_every_master(group, prefix) {
        let owner = group.master_of(group.slot_of(&name));
        let guard = a.lock(&name).lock().expect("plain");
        assert!(exists(&mut owner.conn(), &name), "{name} is on the master of its slot");
        guard.unlock().expect("plain unlock");
        a.fair_lock(&name).lock().expect("fair").unlock().expect("fair unlock");
        let rw = a.read_write_lock(&name);
        let read = rw.read().lock().expect("read");
        let read_too = b.read_write_lock(&name).read().lock().expect("a second reader");
        drop((read, read_too));
        rw.write().lock().expect("write").unlock().expect("write unlock");
        let fenced = a.fenced_lock(&name).lock().expect("fenced");
        assert!(fenced.token() > 0, "a fenced grant has a token");
        fenced.unlock().expect("fenced unlock");
        let semaphore = a.semaphore(format!("{name}-sem"));
        assert!(semaphore.try_set_permits(2).expect("set permits"));
        semaphore.acquire(2).expect("two permits").release().expect("release");
        let expirable = a.permit_expirable_semaphore(format!("{name}-exp"));
        assert!(expirable.try_set_permits(1).expect("set permits"));
        expirable.acquire(1).expect("a permit").release().expect("release");
        let group_lock = a.group_lock(format!("{name}-group"), ["x", "y"]);
        let values = group_lock.lock().expect("a group's values");
        assert!(b.group_lock(format!("{name}-group"), ["y"]).try_lock().expect("no error").is_none(), "y is held");
        values.unlock().expect("group unlock");
        let latch = a.count_down_latch(format!("{name}-latch"));
        assert!(latch.try_set_count(1).expect("set count"));
        assert_eq!(latch.count_down().expect("count down"), 0);
        assert!(latch.await_for(Duration::from_secs(1)).expect("open"));

        // A waiter on client b, woken by client a's release.
        let held = a.lock(&name).lock().expect("held");
        thread::scope(|scope| {
            let rx = parked_waiter(scope, b, &name, Duration::from_secs(20));
            thread::sleep(Duration::from_millis(200));
            let released = Instant::now();
            held.unlock().expect("release");
            let woken = rx.recv_timeout(Duration::from_secs(10)).expect("the waiter got the lock");
            assert!(woken - released < Duration::from_secs(3), "woken by the message: {:?}", woken - released);
        });

        // A campaign on client b, woken by the resignation of client a's leader.
        let election = format!("{name}-election");
        let leading = a.election(&election).campaign("one").expect("leads");
        let mut observer = b.election(&election).observe().expect("observes");
        thread::scope(|scope| {
            let next = scope.spawn(|| b.election(&election).campaign_for("two", Duration::from_secs(20)));
            thread::sleep(Duration::from_millis(300));
            let resigned = Instant::now();
            leading.resign().expect("resign");
            let leads = next.join().unwrap().expect("campaigns").expect("leads after the resignation");
            assert!(resigned.elapsed() < Duration::from_secs(3), "woken by the message: {:?}", resigned.elapsed());
            // The new term is published to observers: seen long before a lease.
            let deadline = resigned + Duration::from_secs(3);
            while observer.current().map(|l| l.value.as_str()) != Some("two") {
                assert!(observer.wait_change_until(deadline).expect("observes"), "the observer saw the new leader");
            }
            leads.resign().expect("resign");
        });
    }
}

/// A lock held under the watchdog (2 s) while its slot moves to another master (keys
/// migrated with `MIGRATE`) and then fails over to that master's replica: the hold
/// survives both, the watchdog's renewals follow it (MOVED), the guard still holds it
/// after more than a lease each time, the release works, and a waiter parked on another
/// client through both moves is woken by it (its sharded subscription moved twice).
///
/// Breaks if renewal or release does not follow the slot (the lock expires under the
/// guard, or the release fails), or if the waiter stays subscribed where the messages no
/// longer come (it would wait for its 20 s bound).
#[test]
fn a_held_lock_survives_its_slot_moving_and_its_master_failing_over() {
    let group = ClusterGroup::start();
    let a = client(&group, Duration::from_secs(2));
    let b = client(&group, Duration::from_secs(30));
    let name = "moving";
    let slot = group.slot_of(name);
    let guard = a.lock(name).lock().expect("held");
    thread::scope(|scope| {
        let rx = parked_waiter(scope, &b, name, Duration::from_secs(30));
        let to = group.migrate_slot(slot);
        thread::sleep(Duration::from_millis(2500));
        assert!(guard.is_held(), "the hold survived the migration");
        assert_eq!(group.master_of(slot).port(), to);
        let left = pttl(&mut group.master_of(slot).conn(), name);
        assert!(left > 0, "renewed on the new master: PTTL {left}");
        let promoted = group.failover(slot);
        thread::sleep(Duration::from_millis(2500));
        assert!(guard.is_held(), "the hold survived the failover");
        assert_eq!(group.master_of(slot).port(), promoted);
        let left = pttl(&mut group.master_of(slot).conn(), name);
        assert!(left > 0, "renewed on the promoted replica: PTTL {left}");
        assert!(rx.try_recv().is_err(), "the waiter did not get the lock while it was held");
        let released = Instant::now();
        guard.unlock().expect("released where the slot is now");
        let woken = rx.recv_timeout(Duration::from_secs(20)).expect("the waiter got the lock");
        assert!(woken - released < Duration::from_secs(5), "woken by the message: {:?}", woken - released);
    });
}

/// Leases of every kind in many slots of every master, held under a short watchdog
/// (1.5 s): 24 locks, read and write holds, permits of three semaphores. A batch holds one
/// master's leases, whose slots differ, so it cannot declare their keys (a cluster refuses
/// a command whose keys span slots): every lease is still held after three leases, with a
/// TTL on the master that serves it, and the watchdog made about one script per master per
/// kind of lease per pass. One held lock's slot is migrating meanwhile (its keys already
/// on the new master, the old one answering `ASK`), then moved: that lease, met by a batch
/// on its old master, is renewed alone where its slot is.
///
/// Breaks if a batch declares keys of several slots (CROSSSLOT: every lease lost), if a
/// lease whose slot moved is not followed (it expires under its guard), or if renewal
/// falls back to a round trip per lease.
#[test]
fn leases_in_many_slots_are_renewed_one_batch_per_master_and_follow_a_moving_slot() {
    let group = ClusterGroup::start();
    let watchdog = Duration::from_millis(1500);
    let c = client(&group, watchdog);
    let names: Vec<String> = (0..24).map(|i| format!("many-{i}")).collect();
    let locks: Vec<_> = names.iter().map(|n| c.lock(n).lock().expect("a lock")).collect();
    let rws: Vec<_> = (0..3).map(|i| c.read_write_lock(format!("many-rw-{i}"))).collect();
    let reads: Vec<_> = rws.iter().map(|rw| rw.read().lock().expect("a read hold")).collect();
    let write = c.read_write_lock("many-rw-w").write().lock().expect("a write hold");
    let permits: Vec<_> = (0..3)
        .map(|i| {
            let semaphore = c.permit_expirable_semaphore(format!("many-permits-{i}"));
            assert!(semaphore.try_set_permits(2).expect("set permits"));
            semaphore.acquire(1).expect("a permit")
        })
        .collect();
    let groups: Vec<_> =
        (0..6).map(|i| c.group_lock(format!("many-group-{i}"), ["x", "y"]).lock().expect("a group's values")).collect();
    let masters: std::collections::HashSet<u16> =
        names.iter().map(|n| group.master_of(group.slot_of(n)).port()).collect();
    assert_eq!(masters.len(), 3, "the locks are on every master");
    let before = c.stats();

    let moving = &names[0];
    let slot = group.slot_of(moving);
    let to = group.begin_migration(slot);
    thread::sleep(watchdog * 3 / 2);
    assert!(locks[0].is_held(), "renewed through ASK while its slot migrates");
    group.end_migration(slot, to);
    thread::sleep(watchdog * 3 / 2);

    for (name, guard) in names.iter().zip(&locks) {
        assert!(guard.is_held(), "{name} is still held");
        let left = pttl(&mut group.master_of(group.slot_of(name)).conn(), name);
        assert!(left > 0, "{name} is renewed where its slot is: PTTL {left}");
    }
    assert_eq!(group.master_of(slot).port(), to);
    assert!(reads.iter().all(|g| g.is_held()) && write.is_held(), "read and write holds renewed");
    assert!(permits.iter().all(|p| p.is_held()), "permits renewed");
    assert!(groups.iter().all(|g| g.is_held()), "group values renewed");
    for i in 0..6 {
        let name = format!("many-group-{i}");
        assert!(c.group_lock(&name, ["y"]).try_lock().expect("no error").is_none(), "{name} is still held");
    }
    let after = c.stats();
    let passes = after.renewal_passes - before.renewal_passes;
    let round_trips = after.renewal_round_trips - before.renewal_round_trips;
    let renewed = after.leases_renewed - before.leases_renewed;
    assert!(passes >= 2, "renewed in the window: {passes} passes");
    // At most one script for locks, one for permits and one for groups on each master per
    // pass, and a lease renewed alone now and then while its slot moves.
    assert!(round_trips <= passes * 9 + 6, "{round_trips} round trips in {passes} passes");
    // Each of the 37 leases renewed at least twice in three leases; in batches: on a loaded
    // machine the leases, taken over more than one tick, fall due in more than one pass
    // (seen: 20 passes), so the leases per round trip, not per pass, are what is counted
    // (about 4 when all fall due together, 1 were each renewed alone).
    assert!(renewed >= 37 * 2, "every lease renewed: {renewed} renewals, {after:?}");
    assert!(renewed >= round_trips * 2, "{renewed} renewals in {round_trips} round trips: in batches");
    drop((locks, reads, write, permits, groups));
}

/// THREADS threads of one process take the lock "contended" on the cluster URL in a loop
/// for MILLIS, incrementing a counter on RECORD_URL non-atomically inside; says
/// "done sections=N" (N: sections entered).
fn cluster_worker() {
    let url = child::env("URL");
    let record = child::env("RECORD_URL");
    let threads: usize = child::env("THREADS").parse().unwrap();
    let millis: u64 = child::env("MILLIS").parse().unwrap();
    let client = Client::builder(url).watchdog_timeout(Duration::from_secs(2)).build().unwrap();
    let end = Instant::now() + Duration::from_millis(millis);
    let sections = std::sync::atomic::AtomicUsize::new(0);
    run_threads(threads, &record, |_, conn| {
        let lock = client.lock("contended");
        while Instant::now() < end {
            let guard = match lock.lock() {
                Ok(guard) => guard,
                // A failover or a migration under way may refuse a grant for a moment.
                Err(err) if err.is_connection_error() || err.kind() == ErrorKind::NotReplicated => {
                    thread::sleep(Duration::from_millis(20));
                    continue;
                }
                Err(err) => panic!("lock: {err}"),
            };
            increment_non_atomically(conn, "contended:count");
            drop(guard);
            // Counted for the report only; the check is the non-atomic counter above.
            sections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    child::say(&format!("done sections={}", sections.into_inner()));
}

/// Two processes × 3 threads take one lock in a loop for 6 s while its slot migrates to
/// another master and that master then fails over to its replica: the non-atomic counter
/// (on a server outside the cluster) equals the number of sections entered, and sections
/// were entered after both moves.
///
/// Breaks if two holders are ever inside at once across the moves (an increment is lost).
#[test]
fn exclusion_across_processes_holds_while_the_cluster_moves_the_lock() {
    let group = ClusterGroup::start();
    let record = RedisServer::start();
    let env = [
        ("URL", group.url()),
        ("RECORD_URL", record.url()),
        ("THREADS", "3".to_string()),
        ("MILLIS", "6000".to_string()),
    ];
    let mut workers: Vec<Child> = (0..2).map(|_| Child::spawn("cluster_worker", &env)).collect();
    thread::sleep(Duration::from_millis(500));
    let slot = group.slot_of("contended");
    group.migrate_slot(slot);
    thread::sleep(Duration::from_millis(300));
    group.failover(slot);
    let count_then = |record: &RedisServer| -> u64 {
        redis::cmd("GET").arg("contended:count").query::<Option<u64>>(&mut record.conn()).unwrap().unwrap_or(0)
    };
    let after_moves = count_then(&record);
    let mut sections = 0u64;
    for w in &mut workers {
        let line = w.wait_line("done", Duration::from_secs(120));
        sections += line.trim_start_matches("done sections=").parse::<u64>().expect("a count");
        assert!(w.wait(Duration::from_secs(10)).success(), "a worker failed");
    }
    let count = count_then(&record);
    assert_eq!(count, sections, "no increment lost");
    assert!(count > after_moves, "sections were entered after the moves ({after_moves} then, {count} in all)");
}

/// What cannot work is said at once: no seed answers, a seed that is not in cluster mode,
/// a cluster whose slots are not all served, a database other than 0.
///
/// Breaks if any of them hangs, panics, or builds a client.
#[test]
fn bad_cluster_input_is_refused_clearly() {
    let plain = RedisServer::start();
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let started = Instant::now();
    let err = Client::builder(format!("redis-cluster://127.0.0.1:{closed}/"))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .expect_err("nothing listens");
    assert!(err.is_connection_error(), "{err}");
    assert!(err.to_string().contains(&closed.to_string()), "names the seed: {err}");
    assert!(started.elapsed() < Duration::from_secs(5), "within the connect timeout");

    let err = Client::open(&format!("redis-cluster://127.0.0.1:{}/", plain.port())).expect_err("not a cluster");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("not in cluster mode"), "{err}");

    let lonely = RedisServer::start_with(&["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]);
    let err = Client::open(&format!("redis-cluster://127.0.0.1:{}/", lonely.port())).expect_err("no slots served");
    assert!(err.to_string().contains("without a master"), "{err}");

    let err = Client::open(&format!("redis-cluster://127.0.0.1:{}/2", plain.port())).expect_err("a database");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
}

/// Each foreign client's plain lock on a Redis 7 cluster (publishing with `SPUBLISH`, since
/// the cluster has sharded pub/sub, and waiting with `SSUBSCRIBE` on the slot's master, as
/// Redisson does there) and redlease's, both ways: the foreign release wakes a parked
/// redlease waiter, and redlease's release wakes a parked foreign waiter. So it goes with
/// `ShardedSubscriptionMode::Auto` (the default, which finds sharded pub/sub here, as
/// Redisson's `AUTO` does) and with `On`.
///
/// Breaks if redlease publishes or subscribes classically on a cluster in these modes
/// (neither would hear the other), or on another channel or slot.
#[test]
fn foreign_locks_and_redlease_wake_each_other_through_sharded_pubsub() {
    let group = ClusterGroup::start();
    for mode in [ShardedSubscriptionMode::Auto, ShardedSubscriptionMode::On] {
        let client = client_in(&group, Duration::from_secs(30), mode);
        foreign_and_redlease_wake_each_other(&group, &client, Publish::Sharded, &format!("interop-{mode:?}"));
    }
}

/// Redisson's `shardedSubscriptionMode = OFF` on a cluster. With
/// `ShardedSubscriptionMode::Off`, each foreign client's plain lock, released with `PUBLISH`
/// (which the cluster carries to every node), wakes a redlease waiter parked with
/// `SUBSCRIBE` on the slot's master well before the holder's 30 s lease would end, and
/// redlease's release wakes a foreign waiter subscribed with `SUBSCRIBE`. Every lock kind,
/// the semaphores, the latch and an election work on every master in that mode, their
/// waiters woken across clients; and a client's leases on many slots are renewed in
/// batches (the scripts' cluster build, publishing classically).
///
/// Breaks if the setting is not followed: a sharded redlease waiter does not hear a
/// `PUBLISH` (it would get the lock at the holder's lease), nor a classic foreign waiter an
/// `SPUBLISH`; or if the classic build of the scripts lost the cluster's header or its
/// keys-as-arguments batches.
#[test]
fn with_subscription_mode_off_classic_foreign_clients_and_redlease_wake_each_other() {
    let group = ClusterGroup::start();
    let a = client_in(&group, Duration::from_secs(30), ShardedSubscriptionMode::Off);
    foreign_and_redlease_wake_each_other(&group, &a, Publish::Classic, "interop-off");
    let b = client_in(&group, Duration::from_secs(30), ShardedSubscriptionMode::Off);
    every_kind_on_every_master(&group, &a, &b, "off-kind");

    // Leases in many slots on every master, renewed in batches of several slots each.
    let renewing = client_in(&group, Duration::from_secs(1), ShardedSubscriptionMode::Off);
    let names: Vec<String> = (0..24).map(|i| format!("off-renewed-{i}")).collect();
    let guards: Vec<_> = names.iter().map(|n| renewing.lock(n).lock().expect("held")).collect();
    thread::sleep(Duration::from_millis(2500));
    for (name, guard) in names.iter().zip(&guards) {
        assert!(exists(&mut group.conn_for(name), name), "{name} is still held after 2.5 leases");
        assert!(guard.is_held(), "{name}: the guard still holds it");
    }
    assert!(renewing.stats().renewal_round_trips > 0, "{:?}", renewing.stats());
    assert_eq!(renewing.stats().renewals_failed, 0, "{:?}", renewing.stats());
    for guard in guards {
        guard.unlock().expect("released");
    }
}

/// Redisson's `AUTO` takes any failure of `PUBSUB SHARDNUMSUB` for "no sharded pub/sub", and
/// so does `ShardedSubscriptionMode::Auto` when the client's user may not run it: a client
/// whose user's rule leaves out `pubsub|shardnumsub` (on every node) publishes and
/// subscribes classically, as a Redisson client with that user does, and a foreign client
/// releasing with `PUBLISH` wakes its waiter, and the other way. `On` with that user stays
/// sharded.
///
/// Breaks if `Auto` refuses such a user, or stays sharded for it (neither side would hear
/// the other).
#[test]
fn auto_uses_classic_pubsub_for_a_user_that_may_not_ask_for_sharded_pubsub() {
    let group = ClusterGroup::start();
    for server in group.masters().into_iter().chain(group.replicas()) {
        let rule = ["classic", "on", ">classic-secret", "~*", "&*", "+@all", "-pubsub|shardnumsub"];
        let () = redis::cmd("ACL").arg("SETUSER").arg(&rule[..]).query(&mut server.conn()).expect("ACL SETUSER");
    }
    let url = group.url().replacen("redis-cluster://", "redis-cluster://classic:classic-secret@", 1);
    let client = Client::builder(&url)
        .watchdog_timeout(Duration::from_secs(30))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("a cluster client (Auto)");
    foreign_and_redlease_wake_each_other(&group, &client, Publish::Classic, "interop-noperm");

    let sharded = Client::builder(&url)
        .sharded_subscription_mode(ShardedSubscriptionMode::On)
        .watchdog_timeout(Duration::from_secs(30))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("a cluster client (On)");
    let name = "noperm-on";
    let guard = sharded.lock(name).lock().expect("free");
    let waiter = client_in(&group, Duration::from_secs(30), ShardedSubscriptionMode::On);
    thread::scope(|scope| {
        let rx = parked_waiter(scope, &waiter, name, Duration::from_secs(20));
        let mut master = group.conn_for(name);
        let subscribed = || listeners(&mut master, &keys::lock_channel(name), Publish::Sharded) == 1;
        assert!(wait_until(Duration::from_secs(5), subscribed), "the On waiter SSUBSCRIBEs");
        let released = Instant::now();
        guard.unlock().expect("released");
        let woken = rx.recv_timeout(Duration::from_secs(15)).expect("the waiter got the lock");
        assert!(woken - released < Duration::from_secs(2), "woken by SPUBLISH: {:?}", woken - released);
    });
}

/// Each foreign client's plain lock and redlease's `client`, both ways on a name starting
/// with `prefix`: a foreign release published with `publish` wakes a parked redlease waiter,
/// and redlease's release wakes a foreign waiter subscribed as `publish` reaches, each well
/// before the holder's 30 s lease would end. Without a message the redlease waiter would
/// look again 5 s after it parked (its client's registration) and the foreign one at its
/// 20 s bound; the release comes a few hundred ms after each parked, so a wake-up within
/// 2 s came by the message.
fn foreign_and_redlease_wake_each_other(group: &ClusterGroup, client: &Client, publish: Publish, prefix: &str) {
    for (i, peer) in foreign::peers().iter().enumerate() {
        let (who, name) = (peer.who(), format!("{prefix}-{i}"));
        let channel = keys::lock_channel(&name);
        let mut foreign = group.conn_for(&name);
        assert_eq!(peer.lock_acquire(&mut foreign, &name, JAVA_OWNER).unwrap(), Acquire::Granted, "{who}");
        thread::scope(|scope| {
            let rx = parked_waiter(scope, client, &name, Duration::from_secs(20));
            let mut master = group.conn_for(&name);
            let subscribed = || listeners(&mut master, &channel, publish) == 1;
            assert!(wait_until(Duration::from_secs(5), subscribed), "{who}: redlease subscribes as {publish:?}");
            thread::sleep(Duration::from_millis(200));
            let released = Instant::now();
            let freed = peer.lock_release(&mut foreign, &name, JAVA_OWNER, publish).unwrap();
            assert_eq!(freed, Release::Freed, "{who}: the foreign unlock freed it");
            let woken = rx.recv_timeout(Duration::from_secs(15)).expect("the redlease waiter got the lock");
            assert!(
                woken - released < Duration::from_secs(2),
                "{who}: woken by the foreign message: {:?}",
                woken - released
            );
        });
        // The other way: a foreign waiter on the channel is woken by redlease's release.
        let guard = client.lock(&name).lock().expect("free");
        let attempt = |conn: &mut redis::Connection| peer.lock_acquire(conn, &name, JAVA_OWNER);
        let release = || guard.unlock().expect("released");
        assert_foreign_woken(&who, &|| group.conn_for(&name), (&channel, publish, lock_wake), &attempt, release);
        assert_eq!(peer.lock_release(&mut foreign, &name, JAVA_OWNER, publish).unwrap(), Release::Freed);
    }
}

/// The master of a held lock's slot is SIGKILLed; the cluster fails it over to its replica
/// by itself (node timeout 1 s), and the killed server rejoins as a replica. The grant had
/// been confirmed by that replica (`WAIT`), so the lock is there on the new master; the
/// watchdog (6 s lease) renews it there through the failover: more than a lease after the
/// kill the thread still holds it (hold count 1, read from Redis). The release on the new
/// master wakes a waiter parked through it all.
///
/// Breaks if a grant is given before a replica has it, if renewal does not find the new
/// master, or if the waiter's subscription stays with the dead node.
#[test]
fn a_held_lock_survives_its_master_being_killed() {
    let mut group = ClusterGroup::start();
    let a = client(&group, Duration::from_secs(6));
    let b = client(&group, Duration::from_secs(30));
    let name = "killed";
    let slot = group.slot_of(name);
    let guard = a.lock(name).lock().expect("held");
    thread::scope(|scope| {
        let rx = parked_waiter(scope, &b, name, Duration::from_secs(40));
        let killed = Instant::now();
        let promoted = group.kill_master_of(slot);
        assert_eq!(group.master_of(slot).port(), promoted);
        if let Some(rest) = Duration::from_millis(7000).checked_sub(killed.elapsed()) {
            thread::sleep(rest);
        }
        assert!(guard.is_held(), "the hold survived the kill");
        assert_eq!(a.lock(name).hold_count().expect("hold count"), 1, "still this thread's, on the new master");
        let left = pttl(&mut group.master_of(slot).conn(), name);
        assert!(left > 0, "renewed on the promoted replica: PTTL {left}");
        assert!(rx.try_recv().is_err(), "the waiter did not get the lock while it was held");
        let released = Instant::now();
        guard.unlock().expect("released on the new master");
        let woken = rx.recv_timeout(Duration::from_secs(20)).expect("the waiter got the lock");
        assert!(woken - released < Duration::from_secs(5), "woken by the message: {:?}", woken - released);
    });
}

/// Redlock over independent deployments, one of them a cluster: a cluster client's lock and
/// two single servers' locks. A majority is granted and released; with a single server's
/// lock held by someone else the Redlock still gets its majority, and with both single
/// servers held it gets none and leaves nothing on the cluster.
///
/// Breaks if a cluster client cannot stand as a Redlock node (routing of its attempt, its
/// undo or its release).
#[test]
fn a_redlock_takes_a_cluster_as_one_of_its_nodes() {
    let group = ClusterGroup::start();
    let singles = [RedisServer::start(), RedisServer::start()];
    let on_cluster = client(&group, Duration::from_secs(30));
    let single_clients: Vec<Client> = singles.iter().map(|s| Client::open(&s.url()).expect("client")).collect();
    let others: Vec<Client> = singles.iter().map(|s| Client::open(&s.url()).expect("client")).collect();
    let red = || {
        RedLock::new([on_cluster.lock("red"), single_clients[0].lock("red"), single_clients[1].lock("red")])
            .retry_delay(Duration::from_millis(5))
    };
    let guard = red().try_lock().expect("no error").expect("a majority");
    assert!(exists(&mut group.conn_for("red"), "red"), "held on the cluster");
    guard.unlock().expect("released");
    assert!(!exists(&mut group.conn_for("red"), "red"), "released on the cluster");
    let one = others[0].lock("red").lock().expect("someone else holds one single server");
    let guard = red().try_lock().expect("no error").expect("still a majority: the cluster and one server");
    guard.unlock().expect("released");
    let two = others[1].lock("red").lock().expect("and the other");
    assert!(red().try_lock().expect("no error").is_none(), "no majority");
    assert!(!exists(&mut group.conn_for("red"), "red"), "the failed attempt left nothing on the cluster");
    drop((one, two));
}

/// Two threads on each of two masters take and give back a lock of that master, a
/// non-atomic counter incremented inside, while the third master is SIGKILLed; the cluster
/// promotes its replica by itself and the killed server rejoins. Meanwhile the two healthy
/// masters answer `CLUSTERDOWN` (the cluster does not cover every slot), though the locks
/// they serve are unaffected. The callers ride that out (`RIDE_OUT`): not one error, no
/// increment lost, sections before the kill and after the cluster is whole, and no pause
/// in them much longer than the cluster said it was down.
///
/// Breaks if `CLUSTERDOWN` from a healthy master reaches the caller (it is not retried
/// within the retry budget) or if the release of a lock is lost to it.
#[test]
fn a_killed_master_costs_the_locks_on_the_other_masters_nothing() {
    let mut group = ClusterGroup::start();
    let record = RedisServer::start();
    let names = names_on_every_master(&group, "bystander");
    let (bystanders, victim_slot) = (&names[..2], group.slot_of(&names[2]));
    let watched = group.master_of(group.slot_of(&names[0])).port();
    // A lease of 3 s, renewed each second, has 2 s left at least when the cluster goes
    // down (0.6–1.1 s measured): an unlock keeps trying until its lease ends.
    let client = Client::builder(group.url())
        .watchdog_timeout(Duration::from_secs(3))
        .command_timeout(Duration::from_secs(2))
        .retry_budget(RIDE_OUT)
        .build()
        .expect("a cluster client");
    let run = kill_among_bystanders(&mut group, victim_slot, watched, &client, bystanders, &record);

    let errors = run.errors();
    let mut report = vec![run.summary(watched, errors.len())];
    let mut problems = Vec::new();
    for name in bystanders {
        let count: u64 = redis::cmd("GET")
            .arg(format!("{name}:count"))
            .query::<Option<u64>>(&mut record.conn())
            .unwrap()
            .unwrap_or(0);
        let (line, found) = run.check(name, count);
        report.push(line);
        problems.extend(found);
    }
    println!("bystanders of a killed master:\n{}", report.join("\n"));
    let distinct = by_message(&errors);
    assert!(
        errors.is_empty(),
        "{} errors on locks of healthy masters, first {:?}, last {:?}; by message: {distinct:#?}",
        errors.len(),
        errors.first(),
        errors.last()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
