//! `status` of every lock kind, field by field, against state the library itself made;
//! and `unlock --force`.

use std::thread;
use std::time::{Duration, Instant};

use redlease::Client;
use serde_json::Value;

use crate::support::*;

fn client(server: &RedisServer) -> Client {
    Client::open(&server.url()).expect("client")
}

/// `redlease status --json names…`, parsed.
fn status(server: &RedisServer, names: &[&str]) -> Vec<Value> {
    let mut args = vec!["status", "--json", "--url"];
    let url = server.url();
    args.push(&url);
    args.extend_from_slice(names);
    let out = run(&args);
    out.expect_code(0);
    assert!(out.stderr.is_empty(), "{out:#?}");
    let value: Value = serde_json::from_str(&out.stdout).expect("JSON");
    value.as_array().expect("an array").clone()
}

/// `redlease status NAME` as text.
fn as_text(server: &RedisServer, name: &str) -> String {
    let out = run(["status", "--url", &server.url(), name]);
    out.expect_code(0);
    out.stdout
}

/// The owner field of client `client` among `fields`.
fn owner(client: &Client, fields: &[String]) -> String {
    let prefix = format!("{}:", client.id());
    let field =
        fields.iter().find(|f| f.starts_with(&prefix)).unwrap_or_else(|| panic!("no field of {prefix} in {fields:?}"));
    field.trim_end_matches(":write").to_owned()
}

/// The library's version, as clients announce it.
fn redlease_version() -> String {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml")).expect("Cargo.toml");
    let line = manifest.lines().find(|l| l.starts_with("version = ")).expect("a version");
    line.trim_start_matches("version = ").trim_matches('"').to_owned()
}

fn ms(value: &Value) -> i64 {
    value.as_i64().unwrap_or_else(|| panic!("not a number: {value}"))
}

#[test]
fn a_plain_lock_held_twice_by_one_owner() {
    let server = RedisServer::start();
    let a = client(&server);
    let _held = Holding::start(&a, |c| {
        let lock = c.lock("plain");
        vec![lock.lock().expect("lock"), lock.lock().expect("reentrant")]
    });
    let owner = owner(&a, &fields(&mut server.conn(), "plain"));
    let announcement = format!("redlease_client:{{{}}}", a.id());
    wait_for("the holder announced itself", Duration::from_secs(5), || key_exists(&mut server.conn(), &announcement));
    let s = &status(&server, &["plain"])[0];
    assert_eq!(s["name"], "plain");
    assert_eq!(s["held"], true);
    assert_eq!(s["kind"], "lock");
    assert_eq!(s["type"], "hash");
    assert_eq!(s["mode"], Value::Null);
    assert_eq!(s["token"], Value::Null);
    assert_eq!(s["queue"], Value::Array(vec![]));
    let ttl = ms(&s["ttl_ms"]);
    assert!((20_000..=30_000).contains(&ttl), "{ttl}");
    let holders = s["holders"].as_array().expect("holders");
    assert_eq!(holders.len(), 1, "{holders:?}");
    assert_eq!(holders[0]["owner"], Value::String(owner.clone()));
    assert_eq!(holders[0]["role"], "lock");
    assert_eq!(holders[0]["holds"], 2);
    assert_eq!(holders[0]["ttl_ms"], Value::Null);
    assert!(ms(&s["server_time_ms"]) > 1_600_000_000_000);
    // The holder's client: this test process, which announced itself.
    assert_eq!(holders[0]["client"]["pid"], std::process::id());
    assert_eq!(holders[0]["client"]["id"], Value::String(a.id().to_owned()));
    assert_eq!(holders[0]["client"]["version"], Value::String(redlease_version()));
    let text = as_text(&server, "plain");
    assert!(text.starts_with("plain: held (plain lock)\n"), "{text}");
    assert!(text.contains(&format!("  holder   {owner}  2 holds  pid {} on ", std::process::id())), "{text}");
    assert!(text.contains("  lease    2") && text.contains(" left\n"), "{text}");
}

#[test]
fn a_fair_lock_with_a_queued_waiter_and_its_deadline() {
    let server = RedisServer::start();
    let a = client(&server);
    let b = Client::builder(server.url()).fair_wait_timeout(Duration::from_secs(20)).build().expect("client");
    let _held = Holding::start(&a, |c| vec![c.fair_lock("fair").lock().expect("lock")]);
    let waiter = {
        let b = b.clone();
        thread::spawn(move || {
            let guard = b.fair_lock("fair").try_lock_for(Duration::from_secs(20)).expect("wait");
            assert!(guard.is_some(), "the waiter got the lock in the end");
        })
    };
    let mut conn = server.conn();
    wait_for("the waiter is queued", Duration::from_secs(10), || {
        redis::cmd("LLEN").arg("redisson_lock_queue:{fair}").query::<i64>(&mut conn).unwrap_or(0) == 1
    });
    let holder = owner(&a, &fields(&mut conn, "fair"));
    let queued: Vec<String> =
        redis::cmd("LRANGE").arg("redisson_lock_queue:{fair}").arg(0).arg(-1).query(&mut conn).expect("LRANGE");
    let waiting = owner(&b, &queued);
    let s = &status(&server, &["fair"])[0];
    assert_eq!(s["held"], true);
    assert_eq!(s["kind"], "fair");
    assert_eq!(s["holders"][0]["owner"], Value::String(holder.clone()));
    assert_eq!(s["holders"][0]["holds"], 1);
    let queue = s["queue"].as_array().expect("queue");
    assert_eq!(queue.len(), 1, "{queue:?}");
    assert_eq!(queue[0]["position"], 1);
    assert_eq!(queue[0]["owner"], Value::String(waiting.clone()));
    // The head's deadline: the holder's lease left (up to 30 s) plus its wait timeout (20 s).
    let deadline_in = ms(&queue[0]["deadline_in_ms"]);
    assert!((40_000..=50_100).contains(&deadline_in), "{deadline_in}");
    assert_eq!(ms(&queue[0]["deadline_ms"]) - ms(&s["server_time_ms"]), deadline_in);
    let score: f64 =
        redis::cmd("ZSCORE").arg("redisson_lock_timeout:{fair}").arg(&waiting).query(&mut conn).expect("ZSCORE");
    assert_eq!(ms(&queue[0]["deadline_ms"]), score as i64);
    let text = as_text(&server, "fair");
    assert!(text.starts_with("fair: held (fair lock)\n"), "{text}");
    assert!(text.contains("  queue    1 waiting\n"), "{text}");
    assert!(text.contains(&format!("    1. {waiting}  deadline in 4")), "{text}");
    drop(_held);
    waiter.join().expect("waiter");
}

#[test]
fn a_read_write_lock_with_readers_then_a_writer_that_downgraded() {
    let server = RedisServer::start();
    let (a, b, c) = (client(&server), client(&server), client(&server));
    let reader_a = Holding::start(&a, |c| vec![c.read_write_lock("doc").read().lock().expect("read")]);
    let reader_b = Holding::start(&b, |c| {
        let read = c.read_write_lock("doc").read();
        vec![read.lock().expect("read"), read.lock().expect("read again")]
    });
    let fields_now = fields(&mut server.conn(), "doc");
    let (owner_a, owner_b) = (owner(&a, &fields_now), owner(&b, &fields_now));
    let s = &status(&server, &["doc"])[0];
    assert_eq!(s["held"], true);
    assert_eq!(s["kind"], "read-write");
    assert_eq!(s["mode"], "read");
    let holders = s["holders"].as_array().expect("holders");
    assert_eq!(holders.len(), 2, "{holders:?}");
    for h in holders {
        assert_eq!(h["role"], "read");
        let ttl = ms(&h["ttl_ms"]);
        assert!((20_000..=30_000).contains(&ttl), "{ttl}");
        let expected = if h["owner"] == Value::String(owner_a.clone()) {
            1
        } else {
            assert_eq!(h["owner"], Value::String(owner_b.clone()));
            2
        };
        assert_eq!(h["holds"], expected);
    }
    let text = as_text(&server, "doc");
    assert!(text.starts_with("doc: held (read-write lock, mode read)\n"), "{text}");
    assert!(text.contains(&format!("  reader   {owner_b}  2 holds, 2")), "{text}");
    drop((reader_a, reader_b));

    let _writer = Holding::start(&c, |c| {
        let doc = c.read_write_lock("doc");
        vec![doc.write().lock().expect("write"), doc.read().lock().expect("downgrade")]
    });
    let owner_c = owner(&c, &fields(&mut server.conn(), "doc"));
    let s = &status(&server, &["doc"])[0];
    assert_eq!(s["mode"], "write");
    let holders = s["holders"].as_array().expect("holders");
    assert_eq!(holders.len(), 2, "{holders:?}");
    assert_eq!(
        (&holders[0]["owner"], &holders[0]["role"], &holders[0]["holds"]),
        (&Value::String(owner_c.clone()), &Value::from("write"), &Value::from(1))
    );
    assert_eq!(
        (&holders[1]["owner"], &holders[1]["role"], &holders[1]["holds"]),
        (&Value::String(owner_c.clone()), &Value::from("read"), &Value::from(1))
    );
    let text = as_text(&server, "doc");
    assert!(text.contains(&format!("  writer   {owner_c}  1 hold  ")), "{text}");
}

#[test]
fn a_fenced_lock_shows_its_last_token_held_or_free() {
    let server = RedisServer::start();
    let a = client(&server);
    let fenced = a.fenced_lock("ledger");
    for _ in 0..2 {
        fenced.lock().expect("lock").unlock().expect("unlock");
    }
    let s = &status(&server, &["ledger"])[0];
    assert_eq!(
        (&s["held"], &s["kind"], &s["token"], &s["type"]),
        (&Value::from(false), &Value::from("fenced"), &Value::from(2), &Value::from("none"))
    );
    assert_eq!(s["holders"], Value::Array(vec![]));
    assert_eq!(s["ttl_ms"], Value::Null);
    let _held = Holding::start(&a, |c| vec![c.fenced_lock("ledger").lock().expect("lock").into_inner()]);
    let s = &status(&server, &["ledger"])[0];
    assert_eq!((&s["held"], &s["token"]), (&Value::from(true), &Value::from(3)));
    assert_eq!(s["holders"][0]["owner"], Value::String(owner(&a, &fields(&mut server.conn(), "ledger"))));
    assert!(as_text(&server, "ledger").starts_with("ledger: held (fenced lock, last token 3)\n"));
}

#[test]
fn free_names_foreign_keys_and_several_names_at_once() {
    let server = RedisServer::start();
    let _: () = redis::cmd("SET").arg("a-string").arg("x").query(&mut server.conn()).expect("SET");
    let all = status(&server, &["never-used", "a-string", "{tagged}x"]);
    assert_eq!(all.len(), 3);
    assert_eq!(
        (&all[0]["name"], &all[0]["held"], &all[0]["kind"], &all[0]["type"]),
        (&Value::from("never-used"), &Value::from(false), &Value::Null, &Value::from("none"))
    );
    assert_eq!((&all[1]["type"], &all[1]["held"]), (&Value::from("string"), &Value::from(false)));
    assert_eq!(all[2]["name"], "{tagged}x");
    assert_eq!(as_text(&server, "never-used"), "never-used: free\n");
    assert_eq!(as_text(&server, "a-string"), "a-string: not a lock (a Redis string key)\n");
}

#[test]
fn a_tagged_fair_name_keeps_its_own_hash_tag() {
    let server = RedisServer::start();
    let a = client(&server);
    let b = client(&server);
    let _held = Holding::start(&a, |c| vec![c.fair_lock("{jobs}:7").lock().expect("lock")]);
    let waiter = {
        let b = b.clone();
        thread::spawn(move || drop(b.fair_lock("{jobs}:7").try_lock_for(Duration::from_secs(20)).expect("wait")))
    };
    let mut conn = server.conn();
    wait_for("queued", Duration::from_secs(10), || {
        redis::cmd("LLEN").arg("redisson_lock_queue:{jobs}:7").query::<i64>(&mut conn).unwrap_or(0) == 1
    });
    let s = &status(&server, &["{jobs}:7"])[0];
    assert_eq!(s["kind"], "fair");
    assert_eq!(s["queue"].as_array().map(Vec::len), Some(1));
    drop(_held);
    waiter.join().expect("waiter");
}

#[test]
fn unlock_force_deletes_the_lock_and_wakes_a_waiting_run() {
    let server = RedisServer::start();
    let url = server.url();
    let a = client(&server);
    let held = Holding::start(&a, |c| vec![c.lock("stuck").lock().expect("lock")]);
    let waiter = start(command(["run", "--url", &url, "--wait", "15s", "stuck", "--", "true"]));
    let mut conn = server.conn();
    wait_for("the run waits", Duration::from_secs(10), || {
        let channels: Vec<String> = redis::cmd("PUBSUB").arg("CHANNELS").query(&mut conn).unwrap_or_default();
        channels.iter().any(|c| c.contains("stuck"))
    });
    let out = run(["unlock", "--force", "--url", &url, "stuck"]);
    out.expect_code(0);
    assert_eq!(out.stdout, "unlocked stuck\n");
    // Woken by the message, not by the 30 s lease running out.
    let finished = waiter.finish(Duration::from_secs(10));
    finished.expect_code(0);
    let out = run(["unlock", "--force", "--url", &url, "stuck"]);
    out.expect_code(1).expect_one_line_error();
    assert!(out.stderr.contains("was not locked"), "{out:#?}");
    drop(held);
    for kind in ["fair", "read", "write", "fenced"] {
        let name = format!("stuck-{kind}");
        let take = {
            let name = name.clone();
            move |c: &Client| match kind {
                "fair" => vec![c.fair_lock(name).lock().expect("lock")],
                "read" => vec![c.read_write_lock(name).read().lock().expect("lock")],
                "write" => vec![c.read_write_lock(name).write().lock().expect("lock")],
                _ => vec![c.fenced_lock(name).lock().expect("lock").into_inner()],
            }
        };
        let _held = Holding::start(&a, take);
        run(["unlock", "--force", "--kind", kind, "--url", &url, &name]).expect_code(0);
        assert!(!key_exists(&mut conn, &name), "{kind}");
    }
}

/// `unlock --force` on a fair lock and on a read lock, without `--kind`: the kind is read
/// from Redis, so the fair lock's queued run is woken at once (its turn, on its own
/// channel) and the read-write lock is deleted in its mode. A `--kind` that is not the kind
/// found is refused (64), naming it, and deletes nothing; a name that is not a lock (a
/// semaphore) too.
///
/// Breaks if `unlock --force` trusts its default kind: on a fair lock it said "unlocked",
/// exited 0 and left the queued waiter asleep until its own timeout (about 28 s); on a read
/// lock it deleted nothing and said "was not locked".
#[test]
fn unlock_force_finds_the_kind_and_refuses_a_wrong_one() {
    let server = RedisServer::start();
    let url = server.url();
    let a = client(&server);
    let mut conn = server.conn();
    let held = Holding::start(&a, |c| vec![c.fair_lock("fair-stuck").lock().expect("lock")]);
    let waiter = start(command(["run", "--url", &url, "--kind", "fair", "--wait", "40s", "fair-stuck", "--", "true"]));
    wait_for("the run queues", Duration::from_secs(10), || {
        redis::cmd("LLEN").arg("redisson_lock_queue:{fair-stuck}").query::<u64>(&mut conn).unwrap_or(0) == 1
    });
    let out = run(["unlock", "--force", "--kind", "lock", "--url", &url, "fair-stuck"]);
    out.expect_code(USAGE).expect_one_line_error();
    assert!(out.stderr.contains("is a fair lock, not --kind lock"), "{out:#?}");
    assert!(key_exists(&mut conn, "fair-stuck"), "nothing was deleted");
    let forced = Instant::now();
    run(["unlock", "--force", "--url", &url, "fair-stuck"]).expect_code(0);
    waiter.finish(Duration::from_secs(10)).expect_code(0);
    assert!(forced.elapsed() < Duration::from_secs(5), "the queued run was woken: {:?}", forced.elapsed());
    drop(held);

    let _read = Holding::start(&a, |c| vec![c.read_write_lock("read-stuck").read().lock().expect("lock")]);
    let out = run(["unlock", "--force", "--url", &url, "read-stuck"]);
    out.expect_code(0);
    assert!(!key_exists(&mut conn, "read-stuck"), "deleted in its mode");

    a.semaphore("not-a-lock").try_set_permits(1).unwrap();
    let out = run(["unlock", "--force", "--url", &url, "not-a-lock"]);
    out.expect_code(USAGE).expect_one_line_error();
    assert!(out.stderr.contains("is a semaphore, not a lock"), "{out:#?}");
    assert!(key_exists(&mut conn, "not-a-lock"), "nothing was deleted");
}

/// `status NAME` and `ls 'NAME*'` find an election by the name it was given: its leader
/// shows, not "free", and it is listed.
///
/// Breaks if an election is found only under its hash's key (`redlease_election:{NAME}`):
/// `status` said "free" while a leader led, and `ls 'sched*'` listed nothing.
#[test]
fn status_and_ls_find_an_election_by_its_name() {
    let server = RedisServer::start();
    let url = server.url();
    let a = client(&server);
    let leadership = a.election("scheduler").campaign("127.0.0.7:8080").expect("leads");
    let out = run(["status", "--url", &url, "scheduler"]);
    out.expect_code(0);
    assert!(out.stdout.contains("election") && !out.stdout.contains("free"), "{out:#?}");
    let out = run(["ls", "--url", &url, "sched*"]);
    out.expect_code(0);
    assert!(out.stdout.starts_with("scheduler") && out.stdout.contains("election"), "{out:#?}");
    leadership.resign().expect("resigned");
}

/// `redlease ls` lists the matching locks with their kind and holder (a `redlease run` in
/// another process, named by its pid), one line each; `--json` gives `status`'s objects;
/// no match is an empty listing with 0; an empty pattern is bad input (64).
#[test]
fn ls_lists_locks_with_their_kind_and_holder() {
    let server = RedisServer::start();
    let url = server.url();
    let a = client(&server);
    let _held = Holding::start(&a, |c| vec![c.fenced_lock("ls:b").lock().expect("lock").into_inner()]);
    let running = start(command(["run", "--url", &url, "ls:a", "--", "sleep", "20"]));
    let mut conn = server.conn();
    wait_for("the run holds", Duration::from_secs(10), || key_exists(&mut conn, "ls:a"));
    let owner_a = fields(&mut conn, "ls:a").pop().expect("a holder");
    let announcement = format!("redlease_client:{{{}}}", owner_a.rsplit_once(':').expect("owner").0);
    wait_for("the run announced itself", Duration::from_secs(5), || key_exists(&mut conn, &announcement));
    redis::cmd("SET").arg("ls:text").arg("not a lock").query::<()>(&mut conn).expect("SET");

    let out = run(["ls", "--url", &url, "ls:*"]);
    out.expect_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    assert!(lines[0].starts_with("ls:a  lock       held by pid "), "{}", out.stdout);
    assert!(lines[0].contains(&format!("pid {} on ", running.pid())), "{}", out.stdout);
    assert!(lines[0].contains("(redlease, up "), "{}", out.stdout);
    assert!(lines[1].starts_with("ls:b  fenced     held by pid "), "{}", out.stdout);

    let out = run(["ls", "--json", "--url", &url, "ls:*"]);
    out.expect_code(0);
    let all: Value = serde_json::from_str(&out.stdout).expect("JSON");
    let names: Vec<&str> = all.as_array().expect("array").iter().filter_map(|l| l["name"].as_str()).collect();
    assert_eq!(names, ["ls:a", "ls:b"]);
    assert_eq!(all[0]["holders"][0]["client"]["program"], "redlease");
    assert_eq!(all[0]["holders"][0]["client"]["pid"], running.pid());
    assert!(all[1]["token"].as_i64().is_some_and(|t| t > 0));

    let out = run(["ls", "--url", &url, "nothing:*"]);
    out.expect_code(0);
    assert_eq!(out.stdout, "");
    run(["ls", "--url", &url, ""]).expect_code(64).expect_one_line_error();
    run(["unlock", "--force", "--url", &url, "ls:a"]).expect_code(0);
    drop(running);
}
