//! `PartitionedCluster`: a Redis Cluster of three masters with a replica each (and a second
//! replica for the first master, which follows the one promoted over it), where every
//! node announces the ports of two proxies of its own (one in front of its client port, one
//! in front of its cluster bus) instead of its own. Every link between nodes, every
//! replication link and every client that learns the nodes from the cluster goes through
//! them, so that a test can cut one master off from every other node (its proxies go
//! silent, and so do its own links into the others' proxies) while a client that reaches it
//! directly goes on talking to it. Each node's outgoing connections leave from a loopback
//! address of its own (`bind-source-addr 127.0.0.N`), by which the others' proxies tell its
//! links from everyone else's. Everything is stopped on drop.

use std::net::{IpAddr, Ipv4Addr};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::partition::replication_summary;
use crate::proxy::Proxy;
use crate::server::RedisServer;

/// Slots of the three masters.
const RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// The loopback address node `i`'s outgoing connections leave from is 127.0.0.(this + i).
const FIRST_SOURCE: u8 = 20;

/// One node: its server, the two proxies it announces, and the address its own links
/// leave from.
struct Node {
    // Dropped first: nothing is forwarded to a server being killed.
    client: Proxy,
    bus: Proxy,
    server: RedisServer,
    source: IpAddr,
}

/// See the module's documentation.
pub struct PartitionedCluster {
    /// The masters first (0..3), then their replicas (3..6), then the first master's second
    /// replica (6), in creation order.
    nodes: Vec<Node>,
}

fn conn_to(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let conn = client.get_connection_with_timeout(Duration::from_secs(1))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    Ok(conn)
}

fn query<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> T {
    let mut conn = conn_to(port).unwrap_or_else(|e| panic!("the node on {port}: {e}"));
    cmd.query(&mut conn).unwrap_or_else(|e| panic!("the node on {port}: {e}"))
}

impl PartitionedCluster {
    /// Starts seven nodes behind their proxies, makes them one cluster (node timeout 1 s,
    /// `repl-diskless-sync-delay 0`), and waits until every node says it is healthy and
    /// every replica follows its master.
    pub fn start() -> PartitionedCluster {
        let nodes: Vec<Node> = (0..7u8)
            .map(|i| {
                let source = IpAddr::V4(Ipv4Addr::new(127, 0, 0, FIRST_SOURCE + i));
                let source_arg = source.to_string();
                let server = RedisServer::start_with(&[
                    "--bind-source-addr",
                    &source_arg,
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "1000",
                    "--cluster-replica-validity-factor",
                    "0",
                    "--repl-diskless-sync-delay",
                    "0",
                ]);
                let client = Proxy::start(server.addr());
                let bus = Proxy::start(([127, 0, 0, 1], server.port() + 10000).into());
                let mut conn = server.conn();
                for (name, value) in [
                    ("cluster-announce-ip", "127.0.0.1".to_owned()),
                    ("cluster-announce-port", client.addr().port().to_string()),
                    ("cluster-announce-bus-port", bus.addr().port().to_string()),
                ] {
                    redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query::<()>(&mut conn).expect("announce");
                }
                Node { client, bus, server, source }
            })
            .collect();
        let cluster = PartitionedCluster { nodes };
        let first = cluster.nodes[0].server.port();
        for node in &cluster.nodes[1..] {
            let meet = redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(node.client.addr().port())
                .arg(node.bus.addr().port())
                .clone();
            query::<()>(first, &meet);
        }
        for (node, (from, to)) in cluster.nodes.iter().zip(RANGES) {
            query::<()>(node.server.port(), redis::cmd("CLUSTER").arg("ADDSLOTSRANGE").arg(from).arg(to));
        }
        cluster.wait_until("every node knows the six others", Duration::from_secs(30), |c| {
            c.nodes.iter().all(|n| {
                conn_to(n.server.port())
                    .and_then(|mut conn| redis::cmd("CLUSTER").arg("NODES").query::<String>(&mut conn))
                    .is_ok_and(|nodes| nodes.lines().count() == 7 && !nodes.contains("handshake"))
            })
        });
        for (master, replica) in [(0, 3), (1, 4), (2, 5), (0, 6)] {
            let id: String = query(cluster.nodes[master].server.port(), redis::cmd("CLUSTER").arg("MYID"));
            query::<()>(cluster.nodes[replica].server.port(), redis::cmd("CLUSTER").arg("REPLICATE").arg(id));
        }
        cluster.wait_until("a healthy cluster, every replica's link up", Duration::from_secs(30), |c| {
            c.nodes.iter().all(|n| {
                let Ok(mut conn) = conn_to(n.server.port()) else { return false };
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut conn).unwrap_or_default();
                let replication: String = redis::cmd("INFO").arg("replication").query(&mut conn).unwrap_or_default();
                info.contains("cluster_state:ok")
                    && (replication.contains("role:master") || replication.contains("master_link_status:up"))
            }) && c.nodes[3..].iter().all(|n| role(n.server.port()) == "slave")
        });
        cluster
    }

    /// `redis-cluster://…`: the masters' client proxies as seeds.
    pub fn url(&self) -> String {
        let seeds: Vec<String> =
            self.nodes[..3].iter().map(|n| format!("127.0.0.1:{}", n.client.addr().port())).collect();
        format!("redis-cluster://{}/", seeds.join(","))
    }

    /// The first master (it serves slots 0 to 5460), straight (not through its proxy).
    pub fn first_master(&self) -> &RedisServer {
        &self.nodes[0].server
    }

    /// A lock name made of `base` whose slot the first master serves.
    pub fn name_on_first_master(&self, base: &str) -> String {
        let port = self.nodes[0].server.port();
        (0..)
            .map(|i| format!("{base}-{i}"))
            .find(|name| query::<u16>(port, redis::cmd("CLUSTER").arg("KEYSLOT").arg(name)) <= RANGES[0].1)
            .expect("a name in the first master's slots")
    }

    /// Cuts the first master off from every other node: its proxies forward nothing from
    /// now on (the other nodes' links to it, its replica's, and clients that learned it from
    /// the cluster), nor do the other nodes' proxies carry its own links to them, now or
    /// later. A client that reaches it straight still does.
    pub fn isolate_first_master(&self) {
        let master = &self.nodes[0];
        master.client.set_blackhole(true);
        master.bus.set_blackhole(true);
        for node in &self.nodes[1..] {
            node.bus.freeze_from_address(master.source);
            node.client.freeze_from_address(master.source);
        }
    }

    /// Watches, on a thread of its own, for one of the first master's replicas to say it is
    /// a master (asked every 20 ms, for up to `timeout`): when that was first seen.
    pub fn watch_promotion(&self, timeout: Duration) -> JoinHandle<Option<Instant>> {
        let replicas = [self.nodes[3].server.port(), self.nodes[6].server.port()];
        thread::spawn(move || {
            let deadline = Instant::now() + timeout;
            while Instant::now() < deadline {
                if replicas.iter().any(|&replica| role(replica) == "master") {
                    return Some(Instant::now());
                }
                thread::sleep(Duration::from_millis(20));
            }
            None
        })
    }

    /// What each node says of its role and replicas (`INFO replication`, trimmed), for a
    /// failed test's message.
    pub fn describe(&self) -> String {
        self.nodes
            .iter()
            .map(|n| {
                let port = n.server.port();
                format!("node {port} (client proxy {}): {}", n.client.addr().port(), replication_summary(port))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn wait_until(&self, what: &str, timeout: Duration, mut done: impl FnMut(&PartitionedCluster) -> bool) {
        let deadline = Instant::now() + timeout;
        while !done(self) {
            assert!(Instant::now() < deadline, "partitioned cluster: {what} did not happen within {timeout:?}");
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `master` or `slave`, from `ROLE`; empty when the node does not answer.
fn role(port: u16) -> String {
    conn_to(port)
        .and_then(|mut conn| redis::cmd("ROLE").query::<Vec<redis::Value>>(&mut conn))
        .ok()
        .and_then(|r| match r.first() {
            Some(redis::Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        })
        .unwrap_or_default()
}
