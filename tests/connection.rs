//! What the library lends a caller that needs Redis beside its locks: the client's own
//! connection (`Client::with_connection`), whatever the deployment, with the client's
//! timeouts and retry rules; the owner a guard's holds are written under
//! (`LockGuard::owner`); the longest name (`MAX_NAME_LEN`).

use std::time::{Duration, Instant};

use redlease::{AnyLock, Client, ErrorKind, MAX_NAME_LEN};

use crate::helpers::*;
use crate::support::cluster::ClusterGroup;
use crate::support::proxy::Proxy;
use crate::support::sentinel::SentinelGroup;
use crate::support::server::RedisServer;

/// The fields of the lock hash `name`, read through the client's own connection.
fn fields(client: &Client, name: &str) -> Vec<String> {
    client.with_connection(name, |conn| redis::cmd("HKEYS").arg(name).query(conn)).expect("HKEYS")
}

/// The guard of every lock kind names the field its hold is counted under, and
/// `with_connection` reads it from the server the client talks to. Breaks if `owner()`
/// named another owner than the scripts wrote (a writer's field is `<owner>:write`), or if
/// the connection went elsewhere.
#[test]
fn a_guard_names_its_owner_field_and_the_clients_connection_reads_it() {
    let server = RedisServer::start();
    let client = client(&server);
    let rw = client.read_write_lock("doc");
    let kinds: Vec<(&str, &str, AnyLock)> = vec![
        ("plain", "plain", client.lock("plain").into()),
        ("fair", "fair", client.fair_lock("fair").into()),
        ("fenced", "fenced", client.fenced_lock("fenced").into()),
        ("read", "doc", rw.read().into()),
        ("write", "doc", rw.write().into()),
    ];
    for (kind, name, lock) in kinds {
        let guard = lock.lock().unwrap_or_else(|e| panic!("{kind}: {e}"));
        let owner = guard.owner().to_owned();
        let number = owner.strip_prefix(&format!("{}:", client.id())).unwrap_or_else(|| panic!("{kind}: {owner}"));
        assert!(number.parse::<u64>().is_ok(), "{kind}: {owner}");
        let field = if kind == "write" { format!("{owner}:write") } else { owner.clone() };
        let found = fields(&client, name);
        assert!(found.contains(&field), "{kind}: {field} not among {found:?}");
        assert_eq!(found, redis::cmd("HKEYS").arg(name).query::<Vec<String>>(&mut server.conn()).unwrap());
        guard.unlock().unwrap();
    }
    // Written through it too, and the pool goes on serving the locks after.
    client.with_connection("mine", |conn| redis::cmd("SET").arg("mine").arg("v").query::<()>(conn)).unwrap();
    assert_eq!(redis::cmd("GET").arg("mine").query::<String>(&mut server.conn()).unwrap(), "v");
    client.lock("after").lock().unwrap().unlock().unwrap();
}

/// An error reply is `Redis` with the `redis` crate's error as its source, and is not
/// sent again; after `shutdown()` nothing is sent at all.
#[test]
fn an_error_reply_is_not_sent_again_and_a_shut_down_client_sends_nothing() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    redis::cmd("SET").arg("text").arg("x").query::<()>(&mut conn).unwrap();
    let mut calls = 0;
    let err = client
        .with_connection("text", |conn| {
            calls += 1;
            redis::cmd("HGET").arg("text").arg("f").query::<Option<String>>(conn)
        })
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Redis, "{err}");
    assert_eq!(calls, 1, "an answered command is not sent twice");
    assert_eq!(err.redis_error().and_then(redis::RedisError::code), Some("WRONGTYPE"), "{err:?}");
    assert!(err.to_string().contains("WRONGTYPE"), "Redis's answer is quoted: {err}");
    assert!(std::error::Error::source(&err).is_none(), "and not told again as a source");
    client.shutdown();
    let mut called = false;
    let err = client.with_connection("text", |_| {
        called = true;
        Ok(())
    });
    assert!(err.unwrap_err().is_shutdown());
    assert!(!called);
}

/// A pooled connection the server closed meanwhile fails the call with a connection
/// error, once (the library cannot tell it from one that broke after Redis carried the
/// command out), and is replaced: the next call works. A server that does not answer
/// gives a timeout within the command timeout, not a retry.
#[test]
fn a_dead_pooled_connection_is_replaced_and_a_silent_server_times_out() {
    let server = RedisServer::start();
    let client = client(&server);
    let ping = |client: &Client| client.with_connection("k", |conn| redis::cmd("PING").query::<String>(conn));
    assert_eq!(ping(&client).unwrap(), "PONG");
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query(&mut server.conn())
        .unwrap();
    assert!(killed >= 1, "the pooled connections were killed");
    let mut calls = 0;
    let err = client
        .with_connection("k", |conn| {
            calls += 1;
            redis::cmd("PING").query::<String>(conn)
        })
        .unwrap_err();
    assert!(err.is_connection_error(), "{err}");
    assert_eq!(calls, 1, "not sent again: it might have been carried out");
    assert_eq!(ping(&client).unwrap(), "PONG", "on a new connection");

    let proxy = Proxy::start(server.addr());
    let timeout = Duration::from_millis(300);
    let quiet = Client::builder(proxy.url()).command_timeout(timeout).build().unwrap();
    assert_eq!(ping(&quiet).unwrap(), "PONG");
    proxy.set_blackhole(true);
    let started = Instant::now();
    let err = ping(&quiet).unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(started.elapsed() < timeout + Duration::from_secs(2), "{:?}", started.elapsed());
}

/// Behind sentinels, the connection goes to the master the sentinels name.
#[test]
fn behind_sentinels_the_connection_is_the_masters() {
    let group = SentinelGroup::start();
    let client = Client::builder(group.url()).connect_timeout(Duration::from_secs(2)).build().unwrap();
    let guard = client.lock("sentinel-held").lock().unwrap();
    let port: String = client
        .with_connection("sentinel-held", |conn| {
            let info: String = redis::cmd("INFO").arg("server").query(conn)?;
            Ok(info.lines().find_map(|l| l.strip_prefix("tcp_port:")).unwrap_or("").trim().to_owned())
        })
        .unwrap();
    assert_eq!(port, group.master_port().to_string());
    assert!(fields(&client, "sentinel-held").contains(&guard.owner().to_owned()));
}

/// In a cluster, each key's commands go to the master of its slot.
#[test]
fn in_a_cluster_the_connection_is_the_master_of_the_keys_slot() {
    let group = ClusterGroup::start();
    let client = Client::builder(group.url()).command_timeout(Duration::from_secs(2)).build().unwrap();
    let mut ports = Vec::new();
    for i in 0..40 {
        let key = format!("slot-{i}");
        let port: String = client
            .with_connection(&key, |conn| {
                redis::cmd("SET").arg(&key).arg(i).query::<()>(conn)?;
                let info: String = redis::cmd("INFO").arg("server").query(conn)?;
                Ok(info.lines().find_map(|l| l.strip_prefix("tcp_port:")).unwrap_or("").trim().to_owned())
            })
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(port, group.master_of(group.slot_of(&key)).port().to_string(), "{key}");
        ports.push(port);
    }
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), 3, "the keys were spread over every master");
}

/// Names of `MAX_NAME_LEN` bytes are taken, longer ones refused before anything is sent.
#[test]
fn the_longest_name_is_public_and_enforced() {
    let server = RedisServer::start();
    let client = client(&server);
    client.lock("n".repeat(MAX_NAME_LEN)).lock().unwrap().unlock().unwrap();
    let err = client.lock("n".repeat(MAX_NAME_LEN + 1)).try_lock().unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut server.conn()).unwrap();
    // The client's announcement of itself, from the first lock, is all there may be.
    let announcement = announcement_key(client.id());
    assert!(keys.iter().all(|k| *k == announcement), "nothing written for a name too long: {keys:?}");
}
