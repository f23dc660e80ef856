//! The servers one measurement runs against, read together: one `redis-server`, or the
//! masters of a cluster. Their CPU time (`/proc`) and their command counters (`INFO
//! commandstats`), each server's and summed.

use redlease_testkit::cluster::ClusterGroup;
use redlease_testkit::server::RedisServer;

use crate::meter::cpu_ns;
use crate::stats::{reset_server_stats, server_all_command_stats, server_command_stats};

pub(crate) struct Servers {
    /// What the clients connect to.
    pub(crate) url: String,
    pids: Vec<String>,
    conns: Vec<redis::Connection>,
}

impl Servers {
    pub(crate) fn single(server: &RedisServer) -> Servers {
        Servers {
            url: server.url(),
            pids: vec![server.pid().expect("the server is running").to_string()],
            conns: vec![server.conn()],
        }
    }

    /// The cluster's masters (a cluster without replicas: its every server).
    pub(crate) fn masters_of(group: &ClusterGroup) -> Servers {
        let masters = group.masters();
        Servers {
            url: group.url(),
            pids: masters.iter().map(|m| m.pid().expect("a master runs").to_string()).collect(),
            conns: masters.iter().map(|m| m.conn()).collect(),
        }
    }

    /// Each server's CPU time so far, in nanoseconds.
    pub(crate) fn cpu_each(&self) -> Vec<u64> {
        self.pids.iter().map(|pid| cpu_ns(pid)).collect()
    }

    /// Their CPU time so far, summed, in nanoseconds.
    pub(crate) fn cpu(&self) -> u64 {
        self.cpu_each().iter().sum()
    }

    /// `CONFIG RESETSTAT` on each.
    pub(crate) fn reset_stats(&mut self) {
        self.conns.iter_mut().for_each(reset_server_stats);
    }

    /// Calls of `command` since the reset, on each server.
    pub(crate) fn calls_each(&mut self, command: &str) -> Vec<u64> {
        self.conns.iter_mut().map(|conn| server_command_stats(conn, command).0).collect()
    }

    /// Every command's calls and microseconds since the reset, summed over the servers, by
    /// name.
    pub(crate) fn all_command_stats(&mut self) -> Vec<(String, u64, u64)> {
        let mut summed: Vec<(String, u64, u64)> = Vec::new();
        for conn in &mut self.conns {
            for (name, calls, usec) in server_all_command_stats(conn) {
                match summed.iter_mut().find(|(n, ..)| *n == name) {
                    Some(entry) => {
                        entry.1 += calls;
                        entry.2 += usec;
                    }
                    None => summed.push((name, calls, usec)),
                }
            }
        }
        summed
    }

    /// `total_net_input_bytes` of `INFO stats`, summed, less `ours` per server (the bytes of
    /// the reading's own requests).
    pub(crate) fn bytes_in(&mut self, ours: u64) -> u64 {
        self.conns
            .iter_mut()
            .map(|conn| {
                let info: String = redis::cmd("INFO").arg("stats").query(conn).expect("INFO stats");
                let bytes: u64 = info
                    .lines()
                    .find_map(|l| l.strip_prefix("total_net_input_bytes:"))
                    .and_then(|v| v.trim().parse().ok())
                    .expect("INFO stats has total_net_input_bytes");
                bytes.saturating_sub(ours)
            })
            .sum()
    }
}
