//! `ClusterGroup`: a Redis Cluster of three masters, each with one replica (or of any number
//! of masters without replicas, [`ClusterGroup::start_masters`]), on loopback ports of
//! their own, built by hand (`CLUSTER MEET`, `ADDSLOTSRANGE`, `REPLICATE`) so that
//! no `redis-cli` is needed; with the faults a cluster test needs: moving a slot from one
//! master to another (keys and all), and failing a master over to its replica. Every
//! server is killed on drop.

use std::thread;
use std::time::{Duration, Instant};

use crate::server::RedisServer;

/// The slots of a cluster.
const SLOTS: usize = 16384;

pub struct ClusterGroup {
    /// Masters first, then their replicas in the same order, in creation order; roles
    /// change with failovers.
    servers: Vec<RedisServer>,
    /// Masters at the start (the servers after them are their replicas).
    masters: usize,
}

/// The slots of master `i` of `n`: a run of them, the runs of equal length but for the
/// remainder, spread over the first masters.
fn slot_range(i: usize, n: usize) -> (usize, usize) {
    let (each, extra) = (SLOTS / n, SLOTS % n);
    let from = i * each + i.min(extra);
    (from, from + each + usize::from(i < extra) - 1)
}

fn cmd_on(server: &RedisServer) -> redis::Connection {
    server.conn()
}

fn node_id(server: &RedisServer) -> String {
    redis::cmd("CLUSTER").arg("MYID").query(&mut cmd_on(server)).expect("CLUSTER MYID")
}

fn info_field(conn: &mut redis::Connection, field: &str) -> Option<String> {
    let info: String = redis::cmd("CLUSTER").arg("INFO").query(conn).ok()?;
    info.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_owned()))
}

impl ClusterGroup {
    /// Starts six servers, makes them one cluster of three masters with a replica each, and
    /// waits until every node says it is healthy and every replica follows its master.
    pub fn start() -> ClusterGroup {
        ClusterGroup::start_shaped(3, true)
    }

    /// A cluster of `masters` masters (at least one) and no replica, the slots split
    /// evenly between them; every node healthy when it returns.
    pub fn start_masters(masters: usize) -> ClusterGroup {
        assert!(masters >= 1, "a cluster has a master");
        ClusterGroup::start_shaped(masters, false)
    }

    fn start_shaped(masters: usize, replicated: bool) -> ClusterGroup {
        let nodes = if replicated { 2 * masters } else { masters };
        let servers: Vec<RedisServer> = (0..nodes)
            .map(|_| {
                RedisServer::start_with(&[
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
                ])
            })
            .collect();
        let group = ClusterGroup { servers, masters };
        let mut first = cmd_on(&group.servers[0]);
        for server in &group.servers[1..] {
            redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(server.port())
                .query::<()>(&mut first)
                .expect("MEET");
        }
        for (i, server) in group.servers.iter().take(masters).enumerate() {
            let (from, to) = slot_range(i, masters);
            redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(from)
                .arg(to)
                .query::<()>(&mut cmd_on(server))
                .expect("ADDSLOTSRANGE");
        }
        group.wait_until("every node knows the others", Duration::from_secs(20), |g| {
            g.servers.iter().all(|s| {
                redis::cmd("CLUSTER")
                    .arg("NODES")
                    .query::<String>(&mut cmd_on(s))
                    .is_ok_and(|listed| listed.lines().count() == nodes)
            })
        });
        for i in (0..masters).filter(|_| replicated) {
            let master = node_id(&group.servers[i]);
            redis::cmd("CLUSTER")
                .arg("REPLICATE")
                .arg(master)
                .query::<()>(&mut cmd_on(&group.servers[i + masters]))
                .expect("REPLICATE");
        }
        group.wait_healthy(Duration::from_secs(30));
        group
    }

    /// Waits until every node reports `cluster_state:ok`, there are as many masters (and
    /// replicas) as at the start, and every replica's link is up.
    pub fn wait_healthy(&self, timeout: Duration) {
        let replicas = self.servers.len() - self.masters;
        self.wait_until("a healthy cluster of its masters and replicas", timeout, |g| {
            g.servers.iter().all(|s| {
                let mut conn = cmd_on(s);
                info_field(&mut conn, "cluster_state").as_deref() == Some("ok")
                    && redis::cmd("CLUSTER").arg("NODES").query::<String>(&mut conn).is_ok_and(|nodes| {
                        let up = |role: &str| nodes.lines().filter(|l| l.contains(role) && !l.contains("fail")).count();
                        (up("master"), up("slave")) == (g.masters, replicas)
                    })
            }) && g.replicas().iter().all(|r| {
                let info: String = redis::cmd("INFO").arg("replication").query(&mut cmd_on(r)).unwrap_or_default();
                info.contains("master_link_status:up")
            })
        });
    }

    /// `redis-cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/`: the masters as seeds.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self.masters().iter().map(|s| format!("127.0.0.1:{}", s.port())).collect();
        format!("redis-cluster://{}/", seeds.join(","))
    }

    /// The servers that are masters now.
    pub fn masters(&self) -> Vec<&RedisServer> {
        self.servers.iter().filter(|s| s.pid().is_some() && role(s) == "master").collect()
    }

    /// The servers that are replicas now.
    pub fn replicas(&self) -> Vec<&RedisServer> {
        self.servers.iter().filter(|s| s.pid().is_some() && role(s) == "slave").collect()
    }

    /// The slot of `key`.
    pub fn slot_of(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(&mut cmd_on(self.live())).expect("KEYSLOT")
    }

    /// A server that runs (not one killed and not started again).
    fn live(&self) -> &RedisServer {
        self.servers.iter().find(|s| s.pid().is_some()).expect("a live server")
    }

    /// The master that serves `slot` now.
    pub fn master_of(&self, slot: u16) -> &RedisServer {
        let port = self.slot_masters()[usize::from(slot)].unwrap_or_else(|| panic!("no master serves slot {slot}"));
        self.servers.iter().find(|s| s.port() == port).expect("a node of the group")
    }

    /// The port of the master that serves each of the 16384 slots now (`CLUSTER SLOTS`);
    /// `None` for a slot nobody serves.
    pub fn slot_masters(&self) -> Vec<Option<u16>> {
        let slots: Vec<redis::Value> =
            redis::cmd("CLUSTER").arg("SLOTS").query(&mut cmd_on(self.live())).expect("CLUSTER SLOTS");
        let mut masters = vec![None; 16384];
        for range in slots {
            if let redis::Value::Array(fields) = range
                && let (Some(redis::Value::Int(from)), Some(redis::Value::Int(to)), Some(redis::Value::Array(master))) =
                    (fields.first(), fields.get(1), fields.get(2))
                && let Some(redis::Value::Int(port)) = master.get(1)
            {
                let port = u16::try_from(*port).expect("a port");
                for slot in *from..=*to {
                    masters[usize::try_from(slot).expect("a slot")] = Some(port);
                }
            }
        }
        masters
    }

    /// The replica of the master at `port` (its `INFO replication` names that master).
    pub fn replica_of(&self, port: u16) -> &RedisServer {
        self.replicas()
            .into_iter()
            .find(|r| {
                let info: String = redis::cmd("INFO").arg("replication").query(&mut cmd_on(r)).unwrap_or_default();
                info.contains(&format!("master_port:{port}\r"))
            })
            .expect("the master's replica")
    }

    /// The node on `port`, to kill or to start again (it keeps its `nodes.conf` and
    /// rejoins with the role it had; [`ClusterGroup::wait_healthy`] waits for that).
    pub fn server(&mut self, port: u16) -> &mut RedisServer {
        self.servers.iter_mut().find(|s| s.port() == port).expect("a node of the group")
    }

    /// A connection to the master that serves `key` now.
    pub fn conn_for(&self, key: &str) -> redis::Connection {
        cmd_on(self.master_of(self.slot_of(key)))
    }

    /// Moves `slot` to another master with all its keys (`SETSLOT IMPORTING/MIGRATING`,
    /// `MIGRATE`, `SETSLOT NODE` on every master), the way `redis-cli --cluster reshard`
    /// does. Returns the new master's port.
    pub fn migrate_slot(&self, slot: u16) -> u16 {
        let to = self.begin_migration(slot);
        self.end_migration(slot, to);
        to
    }

    /// The first half of [`ClusterGroup::migrate_slot`]: `slot` is marked migrating from its
    /// master to another and its keys are moved there, but the old master still serves it
    /// (a command for a key it no longer has gets `ASK`). Returns the new master's port.
    pub fn begin_migration(&self, slot: u16) -> u16 {
        let from = self.master_of(slot);
        let to = *self.masters().iter().find(|m| m.port() != from.port()).expect("another master");
        let (from_id, to_id) = (node_id(from), node_id(to));
        let (mut src, mut dst) = (cmd_on(from), cmd_on(to));
        redis::cmd("CLUSTER").arg("SETSLOT").arg(slot).arg("IMPORTING").arg(&from_id).query::<()>(&mut dst).unwrap();
        redis::cmd("CLUSTER").arg("SETSLOT").arg(slot).arg("MIGRATING").arg(&to_id).query::<()>(&mut src).unwrap();
        loop {
            let keys: Vec<String> =
                redis::cmd("CLUSTER").arg("GETKEYSINSLOT").arg(slot).arg(100).query(&mut src).unwrap();
            if keys.is_empty() {
                break;
            }
            redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(to.port())
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys)
                .query::<()>(&mut src)
                .unwrap();
        }
        to.port()
    }

    /// The second half of [`ClusterGroup::migrate_slot`]: every master is told that the
    /// master at port `to` serves `slot` now.
    pub fn end_migration(&self, slot: u16, to: u16) {
        let to = *self.masters().iter().find(|m| m.port() == to).expect("the new master");
        let to_id = node_id(to);
        for server in self.masters() {
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("NODE")
                .arg(&to_id)
                .query::<()>(&mut cmd_on(server))
                .unwrap();
        }
    }

    /// Fails the master that serves `slot` over to its replica (`CLUSTER FAILOVER` on the
    /// replica: it catches up first, then takes over). Returns the new master's port.
    pub fn failover(&self, slot: u16) -> u16 {
        let replica = self.replica_of(self.master_of(slot).port());
        redis::cmd("CLUSTER").arg("FAILOVER").query::<()>(&mut cmd_on(replica)).expect("CLUSTER FAILOVER");
        let new_port = replica.port();
        self.wait_until("the replica to take over", Duration::from_secs(20), |g| {
            g.master_of(slot).port() == new_port && role(replica) == "master"
        });
        self.wait_healthy(Duration::from_secs(30));
        new_port
    }

    /// SIGKILLs the master that serves `slot`, waits until the cluster has failed it over to
    /// its replica by itself (after the node timeout, 1 s), then starts the killed server
    /// again, which rejoins as a replica of the new master, and waits until the cluster is
    /// healthy. Returns the new master's port.
    pub fn kill_master_of(&mut self, slot: u16) -> u16 {
        let old_port = self.master_of(slot).port();
        let replica_port = self.replica_of(old_port).port();
        let index = self.servers.iter().position(|s| s.port() == old_port).expect("the master");
        self.servers[index].kill();
        self.wait_until("the replica to take over from the killed master", Duration::from_secs(30), |g| {
            g.master_of(slot).port() == replica_port
        });
        self.servers[index].start_again();
        self.wait_healthy(Duration::from_secs(30));
        replica_port
    }

    fn wait_until(&self, what: &str, timeout: Duration, mut done: impl FnMut(&ClusterGroup) -> bool) {
        let deadline = Instant::now() + timeout;
        while !done(self) {
            assert!(Instant::now() < deadline, "cluster: {what} did not happen within {timeout:?}");
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `cluster_state` (`ok` or `fail`) of the node at `port`, from `CLUSTER INFO`; `None` when
/// it does not answer. Needs no group, so that a thread can watch a node while the test
/// has the group busy (a kill, a failover).
pub fn cluster_state(port: u16) -> Option<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let mut conn = client.get_connection_with_timeout(Duration::from_secs(1)).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    info_field(&mut conn, "cluster_state")
}

/// `master` or `slave`, from `ROLE`.
fn role(server: &RedisServer) -> String {
    redis::cmd("ROLE")
        .query::<Vec<redis::Value>>(&mut cmd_on(server))
        .ok()
        .and_then(|r| match r.first() {
            Some(redis::Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runs of slots cover every slot once, in order, their lengths apart by one at most.
    #[test]
    fn the_slot_runs_cover_every_slot_once_and_evenly() {
        for n in 1..=7 {
            let runs: Vec<(usize, usize)> = (0..n).map(|i| slot_range(i, n)).collect();
            assert_eq!(runs[0].0, 0, "{n} masters");
            assert_eq!(runs[n - 1].1, SLOTS - 1, "{n} masters");
            for pair in runs.windows(2) {
                assert_eq!(pair[1].0, pair[0].1 + 1, "{n} masters: {runs:?}");
            }
            let lengths: Vec<usize> = runs.iter().map(|(from, to)| to - from + 1).collect();
            assert!(lengths.iter().max().unwrap() - lengths.iter().min().unwrap() <= 1, "{n} masters: {lengths:?}");
        }
        assert_eq!(slot_range(0, 3), (0, 5461));
    }
}
