//! Placement on the CPUs: `redis-server` on one, the benchmark and its child processes on
//! the others (`sched_setaffinity`).

use std::thread;

use redlease_testkit::server::RedisServer;

use crate::plan::PIN_ENV;

/// Where the processes run. [`Placement::apply`] pins `redis-server` to the last CPU and
/// this process (and so every child and thread it starts later) to the others, so that
/// every round trip crosses CPUs, as it would cross a network. Left to the scheduler,
/// client and server sometimes share a CPU, and a round trip then costs a fraction of a
/// cross-CPU one (on a VM, waking an idle vCPU is what costs): ratios taken minutes apart
/// would compare different limits. The Redlock nodes, the TLS server and the cluster's
/// servers started later go to the server's CPU too ([`Placement::pin_server`]).
pub(crate) struct Placement {
    pub(crate) description: String,
    /// The CPU the servers are pinned to, when pinning worked.
    server_cpu: Option<usize>,
}

impl Placement {
    pub(crate) fn apply(server: &RedisServer) -> Placement {
        let cpus = thread::available_parallelism().map_or(1, |n| n.get());
        let unpinned = |why: &str| Placement { description: format!("not pinned ({why})"), server_cpu: None };
        if std::env::var(PIN_ENV).is_ok_and(|v| v == "0") {
            return unpinned("REDLEASE_BENCH_PIN=0");
        }
        if cpus < 2 {
            return unpinned("one CPU");
        }
        let server_cpu = cpus - 1;
        let client_cpus: Vec<usize> = (0..server_cpu).collect();
        if pin_process(server.pid().expect("the server is running"), server_cpu) && pin(0, &client_cpus) {
            let clients = if server_cpu == 1 { "CPU 0".to_string() } else { format!("CPUs 0–{}", server_cpu - 1) };
            Placement {
                description: format!(
                    "redis-server pinned to CPU {server_cpu}, the benchmark and its child processes to {clients}"
                ),
                server_cpu: Some(server_cpu),
            }
        } else {
            unpinned("sched_setaffinity failed")
        }
    }

    /// Puts another server where the first one is (nothing when unpinned).
    pub(crate) fn pin_server(&self, server: &RedisServer) {
        self.pin_pid(server.pid().expect("the server is running"));
    }

    /// Puts another process where the first server is (nothing when unpinned).
    pub(crate) fn pin_pid(&self, pid: u32) {
        if let Some(cpu) = self.server_cpu {
            assert!(pin_process(pid, cpu), "pin process {pid} to CPU {cpu}");
        }
    }
}

/// Pins every thread of process `pid` to `cpu`.
fn pin_process(pid: u32, cpu: usize) -> bool {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("list the server's threads");
    tasks
        .flatten()
        .filter_map(|task| task.file_name().to_str().and_then(|tid| tid.parse::<i32>().ok()))
        .all(|tid| pin(tid, &[cpu]))
}

/// Restricts thread `tid` (0: the calling thread, and threads it starts later) to `cpus`.
fn pin(tid: i32, cpus: &[usize]) -> bool {
    use nix::libc;
    // SAFETY: `cpu_set_t` is plain data and all zeroes is the empty set; `CPU_SET` writes
    // inside it for any cpu below `CPU_SETSIZE` (checked); `sched_setaffinity` reads
    // exactly `size_of::<cpu_set_t>()` bytes from a valid reference.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            assert!(cpu < libc::CPU_SETSIZE as usize, "CPU {cpu} beyond CPU_SETSIZE");
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}
