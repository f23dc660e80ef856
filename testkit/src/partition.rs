//! `PartitionGroup`: a master, its replicas and three sentinels, where the replicas and the
//! sentinels reach the master only through one proxy (its link), so that a test can cut the
//! master off from them, or freeze one replica's replication alone, while a client that
//! reaches the master directly (a client on the master's side of the split) goes on talking
//! to it. The partition is silent: the proxy stops forwarding while its sockets stay open,
//! as a cloud network fails. Everything is stopped on drop.
//!
//! The replicas replicate from the link's address, which is the address the sentinels
//! monitor: a sentinel re-points a replica whose master is not the one it knows.

use std::time::{Duration, Instant};

use crate::proxy::Proxy;
use crate::sentinel::{MASTER_NAME, SentinelProcess, conn_to, is_master, knows_replicas, named_master};
use crate::server::RedisServer;

/// See the module's documentation.
pub struct PartitionGroup {
    // Dropped in this order: the sentinels first, so that none acts on what follows.
    sentinels: Vec<SentinelProcess>,
    link: Proxy,
    replicas: Vec<RedisServer>,
    master: RedisServer,
}

impl PartitionGroup {
    /// A master, a replica for each entry of `priorities` (its `replica-priority`: 0 is never
    /// promoted, a lower number is promoted first), every data node started with
    /// `server_args` after the test kit's own, and three sentinels; waits (up to 30 s)
    /// until every sentinel knows every replica online.
    pub fn start(priorities: &[u32], server_args: &[&str]) -> PartitionGroup {
        assert!(!priorities.is_empty(), "a partition group needs a replica to fail over to");
        let master = RedisServer::start_with(server_args);
        let link = Proxy::start(master.addr());
        let link_port = link.addr().port().to_string();
        let replicas = priorities
            .iter()
            .map(|priority| {
                let priority = priority.to_string();
                let mut args = server_args.to_vec();
                args.extend(["--replica-priority", &priority, "--replicaof", "127.0.0.1", &link_port]);
                RedisServer::start_with(&args)
            })
            .collect::<Vec<_>>();
        let sentinels = (0..3).map(|_| SentinelProcess::start(link.addr().port())).collect();
        let group = PartitionGroup { sentinels, link, replicas, master };
        let count = group.replicas.len();
        group.wait_until("every sentinel knows every replica online", Duration::from_secs(30), |g| {
            g.sentinels.iter().all(|s| knows_replicas(s.port, count))
        });
        group
    }

    /// The master, straight (not through the link).
    pub fn master(&self) -> &RedisServer {
        &self.master
    }

    /// The replicas, in the order of `priorities`.
    pub fn replicas(&self) -> &[RedisServer] {
        &self.replicas
    }

    /// `redis-sentinel://…/#redlease-master`: a client that follows the sentinels (and
    /// reaches the master through the link until they name another).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.sentinels.iter().map(|s| format!("127.0.0.1:{}", s.port)).collect();
        format!("redis-sentinel://{}/#{MASTER_NAME}", hosts.join(","))
    }

    /// Cuts the master off from its replicas and the sentinels: the link forwards nothing
    /// from now on, its sockets open (new connections are accepted and go silent too).
    pub fn isolate_master(&self) {
        self.link.set_blackhole(true);
    }

    /// Freezes the replication link of `replica` (an index into [`replicas`](Self::replicas))
    /// alone: the master still lists it (until its `repl-timeout`), the replica still thinks
    /// its link up, and nothing more reaches it.
    pub fn freeze_replication(&self, replica: usize) {
        let port = self.replicas[replica].port();
        let mut conn = conn_to(port).expect("the replica answers");
        let listed: String =
            redis::cmd("CLIENT").arg("LIST").arg("TYPE").arg("master").query(&mut conn).expect("CLIENT LIST");
        let local = listed
            .split_whitespace()
            .find_map(|field| field.strip_prefix("laddr="))
            .and_then(|addr| addr.rsplit(':').next()?.parse::<u16>().ok())
            .unwrap_or_else(|| panic!("the replica on {port} lists no link to its master: {listed}"));
        assert!(self.link.freeze_downstream_port(local), "the link carries the replica's connection from {local}");
    }

    /// SIGKILLs the master.
    pub fn kill_master(&mut self) {
        self.master.kill();
    }

    /// Waits until the sentinels name a master other than the one behind the link, and it
    /// says it is one; returns its port.
    pub fn wait_for_promotion(&self, timeout: Duration) -> u16 {
        let link = self.link.addr().port();
        let mut promoted = 0;
        self.wait_until("a replica promoted", timeout, |g| {
            promoted = g.sentinels.iter().find_map(|s| named_master(s.port).filter(|&p| p != link)).unwrap_or(0);
            promoted != 0 && is_master(promoted)
        });
        promoted
    }

    /// Watches, on a thread of its own, for the sentinels to name a master other than the
    /// one behind the link that says it is one (asked every 20 ms, for up to `timeout`):
    /// when that was first seen.
    pub fn watch_promotion(&self, timeout: Duration) -> std::thread::JoinHandle<Option<Instant>> {
        let link = self.link.addr().port();
        let sentinels: Vec<u16> = self.sentinels.iter().map(|s| s.port).collect();
        std::thread::spawn(move || {
            let deadline = Instant::now() + timeout;
            while Instant::now() < deadline {
                let named = sentinels.iter().find_map(|&s| named_master(s).filter(|&p| p != link));
                if named.is_some_and(is_master) {
                    return Some(Instant::now());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            None
        })
    }

    /// What each data node says of its role and replicas (`INFO replication`, trimmed), for
    /// a failed test's message.
    pub fn describe(&self) -> String {
        std::iter::once(&self.master)
            .chain(&self.replicas)
            .map(|server| format!("node {}: {}", server.port(), replication_summary(server.port())))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn wait_until(&self, what: &str, timeout: Duration, mut done: impl FnMut(&PartitionGroup) -> bool) {
        let deadline = Instant::now() + timeout;
        while !done(self) {
            assert!(Instant::now() < deadline, "partition group: {what} did not happen within {timeout:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// What the server on `port` says of its role and replicas: the lines of `INFO
/// replication` a failed partition test needs, on one line.
pub(crate) fn replication_summary(port: u16) -> String {
    let info = crate::sentinel::info(port, "replication").unwrap_or_else(|| "no answer".to_owned());
    let wanted = ["role:", "connected_slaves:", "slave", "master_port:", "master_link_status:", "no answer"];
    let lines: Vec<&str> = info.lines().filter(|l| wanted.iter().any(|p| l.starts_with(p))).collect();
    lines.join(" | ")
}
