//! Fault class 7: validation at the edge.

use std::time::Duration;

use redlease::{Client, ErrorKind, MultiLock, RedLock};

use super::assert_invalid;
use crate::helpers::*;
use crate::support::server::RedisServer;

/// A multi-lock whose last member is invalid (an empty name; a zero lease) must be refused
/// as a whole before its first member is taken: `InvalidInput`, and no command at all
/// reaches Redis.
///
/// Breaks if the members before the bad one are acquired (and released) before the bad one
/// is checked: commands then reach Redis.
#[test]
fn a_multi_lock_with_one_invalid_member_sends_nothing() {
    let server = RedisServer::start();
    let client = client(&server);
    let mut conn = server.conn();
    let before = commands_served(&mut conn);
    let cases = [
        ("an empty name", MultiLock::new([client.lock("m1"), client.lock("m2"), client.lock("")])),
        (
            "a zero lease",
            MultiLock::new([client.lock("m1"), client.lock("m2"), client.lock("m3").with_lease(Duration::ZERO)]),
        ),
    ];
    for (what, multi) in cases {
        assert_invalid(multi.try_lock(), &format!("{what}: try_lock"));
        assert_invalid(multi.try_lock_for(Duration::from_millis(100)), &format!("{what}: try_lock_for"));
        assert_invalid(multi.lock(), &format!("{what}: lock"));
    }
    assert_eq!(commands_served(&mut conn) - before, 0, "nothing was sent");
}

/// A Redlock with one node's lock name empty is refused before any node is asked.
///
/// Breaks if the valid nodes are asked (and then released) before the bad one is checked.
#[test]
fn a_redlock_with_one_empty_node_name_sends_nothing_to_any_node() {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let clients: Vec<Client> = nodes.iter().map(client).collect();
    let mut conns: Vec<redis::Connection> = nodes.iter().map(RedisServer::conn).collect();
    let before: Vec<u64> = conns.iter_mut().map(commands_served).collect();
    let red = RedLock::new([clients[0].lock("r"), clients[1].lock("r"), clients[2].lock("")]);
    assert_invalid(red.try_lock(), "try_lock");
    assert_invalid(red.try_lock_for(Duration::from_millis(100)), "try_lock_for");
    assert_invalid(red.lock(), "lock");
    let after: Vec<u64> = conns.iter_mut().map(commands_served).collect();
    assert_eq!(after, before, "nothing was sent to any node");
}

/// A malformed URL is `InvalidInput` that says what is wrong with it, and never shows its
/// password.
///
/// Breaks if the error is the bare "invalid client config" of the redis crate, another kind,
/// or shows the password, or does not say which part is wrong (before the fix: a port out
/// of range, one that is not a number and a foreign scheme all said "did not parse").
#[test]
fn a_malformed_url_says_what_is_wrong_and_hides_its_password() {
    for (url, says) in [
        ("redis://:s3cret@127.0.0.1:notaport/", "the port notaport is not a number"),
        ("redis://:s3cret@127.0.0.1:99999/", "the port 99999 is out of range: at most 65535"),
        ("redis://:s3cret@127.0.0.1/abc", "Invalid database number"),
        ("http://:s3cret@127.0.0.1/", "the scheme http:// is not one of redis://, rediss://"),
        ("redis-cluster://:s3cret@127.0.0.1:99999", "the port 99999 is out of range: at most 65535"),
    ] {
        let err = Client::open(url).expect_err(url);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        let text = err.to_string();
        assert!(text.contains(says), "{url}: {text}");
        assert!(!text.contains("s3cret"), "{url}: {text}");
    }
}
