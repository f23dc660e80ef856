//! `SentinelGroup`: a master, a replica (or more) and three sentinels on loopback ports of
//! their own, ready for a failover (the sentinels know the replicas and each other), all
//! stopped on drop.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::server::{RedisServer, free_port};

/// The master's name in the sentinels' configuration.
pub const MASTER_NAME: &str = "redlease-master";

static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// One `redis-server --sentinel` process, killed and its directory removed on drop.
pub(crate) struct SentinelProcess {
    pub(crate) port: u16,
    dir: PathBuf,
    child: Child,
}

/// A master, its replicas (one unless started with more) and three sentinels (quorum 2, down
/// after 1.5 s: long enough that a master slowed by a loaded machine does not look down to
/// them, which would fail it over to a replica that may still be syncing).
pub struct SentinelGroup {
    servers: Vec<RedisServer>,
    sentinels: Vec<SentinelProcess>,
    /// Arguments every data node is started with, after the test kit's own.
    server_args: Vec<String>,
}

impl SentinelProcess {
    /// A sentinel monitoring the master at `127.0.0.1:master_port` (quorum 2, down after
    /// 1.5 s).
    pub(crate) fn start(master_port: u16) -> SentinelProcess {
        let binary = std::env::var(crate::server::REDIS_SERVER_ENV).unwrap_or_else(|_| "redis-server".into());
        let dir = std::env::temp_dir().join(format!(
            "redlease-test-sentinel-{}-{}",
            std::process::id(),
            DIR_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        for _ in 0..5 {
            let port = free_port();
            let conf = dir.join("sentinel.conf");
            fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {dir}\nlogfile {log}\n\
                     sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n\
                     sentinel down-after-milliseconds {MASTER_NAME} 1500\n\
                     sentinel failover-timeout {MASTER_NAME} 2000\n\
                     sentinel parallel-syncs {MASTER_NAME} 1\n",
                    dir = dir.display(),
                    log = dir.join("sentinel.log").display(),
                ),
            )
            .expect("write sentinel.conf");
            let mut child = Command::new(&binary)
                .arg(&conf)
                .arg("--sentinel")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run {binary} --sentinel: {e}"));
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken: try another
                }
                if ping(port) {
                    return SentinelProcess { port, dir, child };
                }
                thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("no sentinel started; see {}", dir.join("sentinel.log").display());
    }
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn conn_to(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let conn = client.get_connection_with_timeout(Duration::from_secs(2))?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    Ok(conn)
}

fn ping(port: u16) -> bool {
    conn_to(port).and_then(|mut c| redis::cmd("PING").query::<String>(&mut c)).is_ok()
}

/// `INFO section` of the server on `port`; `None` when it does not answer.
pub(crate) fn info(port: u16, section: &str) -> Option<String> {
    conn_to(port).and_then(|mut c| redis::cmd("INFO").arg(section).query::<String>(&mut c)).ok()
}

/// Whether the server on `port` says its link to the master on `master` is up.
fn follows(port: u16, master: u16) -> bool {
    info(port, "replication")
        .is_some_and(|own| own.contains("master_link_status:up") && own.contains(&format!("master_port:{master}\r")))
}

/// Whether the sentinel on `port` knows `replicas` online replicas of the master (flagged
/// `slave` and nothing else, their link to the master up as they last said) and the other
/// two sentinels: a failover can happen.
pub(crate) fn knows_replicas(port: u16, replicas: usize) -> bool {
    let Ok(mut c) = conn_to(port) else { return false };
    let known: Vec<Vec<String>> =
        redis::cmd("SENTINEL").arg("REPLICAS").arg(MASTER_NAME).query(&mut c).unwrap_or_default();
    let others: Vec<Vec<String>> =
        redis::cmd("SENTINEL").arg("SENTINELS").arg(MASTER_NAME).query(&mut c).unwrap_or_default();
    let up = known
        .iter()
        .filter(|fields| {
            fields.windows(2).any(|kv| kv[0] == "flags" && kv[1] == "slave")
                && fields.windows(2).any(|kv| kv[0] == "master-link-status" && kv[1] == "ok")
        })
        .count();
    up >= replicas && others.len() >= 2
}

/// The master the sentinel on `port` names, when it answers.
pub(crate) fn named_master(port: u16) -> Option<u16> {
    let mut c = conn_to(port).ok()?;
    let named: Option<(String, u16)> =
        redis::cmd("SENTINEL").arg("get-master-addr-by-name").arg(MASTER_NAME).query(&mut c).ok()?;
    named.map(|(_, port)| port)
}

/// Whether the server on `port` answers `ROLE` as a master.
pub(crate) fn is_master(port: u16) -> bool {
    conn_to(port)
        .and_then(|mut c| redis::cmd("ROLE").query::<Vec<redis::Value>>(&mut c))
        .is_ok_and(|role| matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master"))
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// A `SENTINEL FAILOVER` refusal that a moment cures: no replica the sentinel would
/// promote yet, or the last failover not finished.
fn is_not_yet(err: &redis::RedisError) -> bool {
    let text = err.to_string();
    text.contains("NOGOODSLAVE") || text.contains("INPROG")
}

impl SentinelGroup {
    /// Starts everything and waits (up to 30 s) until every sentinel knows the replica and
    /// the other sentinels, so that a failover can happen.
    pub fn start() -> SentinelGroup {
        SentinelGroup::start_with_replicas(1)
    }

    /// [`SentinelGroup::start`] with `replicas` replicas (at least one), and waits until
    /// every sentinel knows all of them online.
    pub fn start_with_replicas(replicas: usize) -> SentinelGroup {
        SentinelGroup::start_with(replicas, &[])
    }

    /// [`SentinelGroup::start_with_replicas`], every data node started with `server_args`
    /// after the test kit's own (e.g. `["--repl-diskless-sync-delay", "0"]`), also when it
    /// is started again.
    pub fn start_with(replicas: usize, server_args: &[&str]) -> SentinelGroup {
        assert!(replicas >= 1, "a sentinel group needs a replica to fail over to");
        let server_args: Vec<String> = server_args.iter().map(|s| s.to_string()).collect();
        let master = RedisServer::start_with(&as_strs(&server_args));
        let master_port = master.port();
        let mut group = SentinelGroup { servers: vec![master], sentinels: Vec::new(), server_args };
        for _ in 0..replicas {
            let replica = RedisServer::start_with(&as_strs(&group.replica_args(master_port)));
            group.servers.push(replica);
        }
        group.sentinels = (0..3).map(|_| SentinelProcess::start(master_port)).collect();
        group.wait_ready_replicas(replicas, Duration::from_secs(30));
        group
    }

    /// The arguments of a replica of the master on `master_port`: the group's own, then
    /// `--replicaof`.
    fn replica_args(&self, master_port: u16) -> Vec<String> {
        let mut args = self.server_args.clone();
        args.extend(["--replicaof".to_owned(), "127.0.0.1".to_owned(), master_port.to_string()]);
        args
    }

    /// Waits until every sentinel knows an online replica of the master and the other two
    /// sentinels: a failover can happen.
    pub fn wait_ready(&self, timeout: Duration) {
        self.wait_ready_replicas(1, timeout);
    }

    /// Waits until every sentinel knows `replicas` online replicas of the master (flagged
    /// `slave` and nothing else, their link to the master up as they last said) and the
    /// other two sentinels. The sentinels ask a replica for its state every 10 s (every
    /// second during a failover), so this can take that long after a replica came back.
    pub fn wait_ready_replicas(&self, replicas: usize, timeout: Duration) {
        let what = format!("every sentinel knows {replicas} replica(s) and two other sentinels");
        self.wait_until(&what, timeout, |g| g.sentinels.iter().all(|s| knows_replicas(s.port, replicas)));
    }

    /// SIGKILLs the master, waits for the sentinels to promote the replica, then starts the
    /// killed server again (empty) as a replica of the new master, as an operator would.
    /// Returns the new master's port.
    pub fn kill_master_and_rejoin(&mut self) -> u16 {
        let old = self.master_port();
        self.server(old).kill();
        let new = self.wait_for_new_master(old, Duration::from_secs(30));
        let old_server = self.server(old);
        old_server.start_again();
        redis::cmd("REPLICAOF").arg("127.0.0.1").arg(new).query::<()>(&mut old_server.conn()).expect("REPLICAOF");
        new
    }

    /// The data nodes (the master and its replicas) that run, in the order they were started.
    pub fn data_nodes(&self) -> Vec<&RedisServer> {
        self.servers.iter().filter(|s| s.pid().is_some()).collect()
    }

    /// The process ids of the three sentinels (to place them on a CPU, say).
    pub fn sentinel_pids(&self) -> Vec<u32> {
        self.sentinels.iter().map(|s| s.child.id()).collect()
    }

    /// The ports of the data nodes that run and are not the master: its replicas, or
    /// servers on their way to being ones.
    pub fn replica_ports(&self) -> Vec<u16> {
        let master = self.master_port();
        self.servers.iter().filter(|s| s.pid().is_some() && s.port() != master).map(RedisServer::port).collect()
    }

    /// Starts the stopped data node on `port` again as a replica of the master the
    /// sentinels name now (`--replicaof` from its first moment, as the configuration file
    /// Sentinel rewrites would have it). It loads what it kept of its last sync, and syncs
    /// from there when the master still has the rest in its backlog.
    pub fn start_replica_again(&mut self, port: u16) {
        let args = self.replica_args(self.master_port());
        self.server(port).start_again_with(&as_strs(&args));
    }

    /// Waits until the master lists `replicas` replicas `state=online` (`INFO replication`)
    /// and each says its link to this master is up.
    pub fn wait_replicas_online(&self, replicas: usize, timeout: Duration) {
        let what = format!("{replicas} replica(s) online at the master");
        self.wait_until(&what, timeout, |g| {
            let master = g.master_port();
            let Some(listed) = info(master, "replication") else { return false };
            let online = listed
                .lines()
                .filter(|l| l.starts_with("slave") && l.contains("state=online"))
                .filter_map(|l| l.split(',').find_map(|f| f.strip_prefix("port="))?.parse::<u16>().ok())
                .filter(|&port| follows(port, master))
                .count();
            online >= replicas
        });
    }

    /// Cuts the master's replication links (`CLIENT KILL TYPE replica`); the replicas
    /// connect again and resume.
    pub fn cut_replica_links(&self) {
        let _: redis::RedisResult<u64> =
            redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica").query(&mut self.master_conn());
    }

    /// `redis-sentinel://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/#redlease-master`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.sentinels.iter().map(|s| format!("127.0.0.1:{}", s.port)).collect();
        format!("redis-sentinel://{}/#{MASTER_NAME}", hosts.join(","))
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.port).collect()
    }

    /// The port of the master as the first sentinel that answers names it.
    pub fn master_port(&self) -> u16 {
        self.sentinels.iter().find_map(|s| named_master(s.port)).expect("no sentinel names the master")
    }

    /// The data node (master or replica) on `port`.
    pub fn server(&mut self, port: u16) -> &mut RedisServer {
        self.servers.iter_mut().find(|s| s.port() == port).expect("a server of this group")
    }

    /// A connection to the current master, for assertions.
    pub fn master_conn(&self) -> redis::Connection {
        conn_to(self.master_port()).expect("connect to the master")
    }

    /// `SENTINEL FAILOVER` (a replica is promoted, the master demoted), then waits until
    /// the sentinels name the new master and it says it is one. Returns its port.
    pub fn failover(&self) -> u16 {
        let old = self.master_port();
        let mut c = conn_to(self.sentinels[0].port).expect("sentinel");
        redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME).query::<()>(&mut c).expect("SENTINEL FAILOVER");
        self.wait_for_new_master(old, Duration::from_secs(30))
    }

    /// `SENTINEL FAILOVER`, asked again every 20 ms while the sentinels answer
    /// `NOGOODSLAVE` or `INPROG`, for up to `timeout`. Returns the moment the request they
    /// took was sent, without waiting for the promotion.
    pub fn request_failover(&self, timeout: Duration) -> Instant {
        let deadline = Instant::now() + timeout;
        let mut c = conn_to(self.sentinels[0].port).expect("sentinel");
        loop {
            let sent = Instant::now();
            match redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME).query::<()>(&mut c) {
                Ok(()) => return sent,
                Err(e) if is_not_yet(&e) && Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("SENTINEL FAILOVER refused: {e}"),
            }
        }
    }

    /// `SENTINEL FAILOVER` as soon as the sentinels take one: asked again every 20 ms while
    /// they answer `NOGOODSLAVE` (no replica they would promote yet) or `INPROG` (a
    /// failover is still being finished), and asked again when one they took has named no
    /// new master within 10 s (they gave it up: no promotion within their failover timeout),
    /// for up to `timeout`. Returns once the new master says it is one, with its port. No
    /// settling beyond what the sentinels themselves require.
    pub fn failover_when_allowed(&self, timeout: Duration) -> u16 {
        let deadline = Instant::now() + timeout;
        let old = self.master_port();
        let mut c = conn_to(self.sentinels[0].port).expect("sentinel");
        let mut taken = 0;
        loop {
            match redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME).query::<()>(&mut c) {
                Ok(()) => {
                    taken += 1;
                    let given_up = (Instant::now() + Duration::from_secs(10)).min(deadline);
                    while Instant::now() < given_up {
                        if let Some(new) = self.new_master_since(old) {
                            return new;
                        }
                        thread::sleep(Duration::from_millis(50));
                    }
                }
                Err(e) if is_not_yet(&e) => thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("SENTINEL FAILOVER refused: {e}"),
            }
            assert!(
                Instant::now() < deadline,
                "no new master (still {old}) within {timeout:?}; the sentinels took {taken} failovers"
            );
        }
    }

    /// The master the sentinels name, when it is not `old` and says it is a master.
    fn new_master_since(&self, old: u16) -> Option<u16> {
        let new = self.master_port();
        (new != old && is_master(new)).then_some(new)
    }

    /// Waits until the master lists a replica `state=online` (`INFO replication`) and that
    /// replica says its link to this master is up: the replica is back, as both ends see
    /// it. Returns the replica's port.
    pub fn wait_replica_online(&self, timeout: Duration) -> u16 {
        let mut online = 0;
        self.wait_until("a replica online at the master", timeout, |g| {
            let master = g.master_port();
            let Some(replicas) = info(master, "replication") else { return false };
            let found =
                replicas.lines().filter(|l| l.starts_with("slave") && l.contains("state=online")).find_map(|l| {
                    let port: u16 = l.split(',').find_map(|f| f.strip_prefix("port="))?.parse().ok()?;
                    let own = info(port, "replication")?;
                    (own.contains("master_link_status:up") && own.contains(&format!("master_port:{master}\r")))
                        .then_some(port)
                });
            online = found.unwrap_or(0);
            found.is_some()
        });
        online
    }

    /// Waits until a replica has acknowledged everything the master had written when this
    /// was called (its `offset=` in the master's `INFO replication` reaches the master's
    /// `master_repl_offset`). Replicas acknowledge once a second.
    pub fn wait_replicated(&self, timeout: Duration) {
        let master = self.master_port();
        let offset_of = |text: &str| -> Option<u64> {
            text.lines().find_map(|l| l.strip_prefix("master_repl_offset:"))?.trim().parse().ok()
        };
        let target = info(master, "replication").and_then(|t| offset_of(&t)).expect("the master's offset");
        self.wait_until("a replica to acknowledge the master's writes", timeout, |_| {
            info(master, "replication").is_some_and(|t| {
                t.lines().filter(|l| l.starts_with("slave")).any(|l| {
                    l.split(',').find_map(|f| f.strip_prefix("offset=")).and_then(|o| o.parse::<u64>().ok())
                        >= Some(target)
                })
            })
        });
    }

    /// Waits until the sentinels name a master other than `old` that says it is one.
    pub fn wait_for_new_master(&self, old: u16, timeout: Duration) -> u16 {
        let mut new = old;
        self.wait_until("a new master", timeout, |g| {
            new = g.master_port();
            new != old && is_master(new)
        });
        new
    }

    fn wait_until(&self, what: &str, timeout: Duration, mut done: impl FnMut(&SentinelGroup) -> bool) {
        let deadline = Instant::now() + timeout;
        while !done(self) {
            assert!(Instant::now() < deadline, "sentinel group: {what} did not happen within {timeout:?}");
            thread::sleep(Duration::from_millis(100));
        }
    }
}
