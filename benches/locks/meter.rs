//! The other work on the machine, metered step by step from `/proc/stat` and
//! `/proc/<pid>/stat`.

use std::time::Instant;

use redlease_testkit::server::RedisServer;

/// How much CPU processes other than this benchmark (itself, its children, its
/// `redis-server`) use, step by step: the figures are only as good as the machine was quiet.
pub(crate) struct CpuMeter {
    server_pids: Vec<u32>,
    current: Option<(String, CpuSample)>,
    pub(crate) steps: Vec<OtherWork>,
}

/// What the machine did besides the benchmark during one step, in shares of one CPU.
pub(crate) struct OtherWork {
    pub(crate) step: String,
    /// Processes other than the benchmark's.
    pub(crate) others: f64,
    /// Time the hypervisor ran something else on our vCPUs (steal).
    pub(crate) steal: f64,
}

#[derive(Clone, Copy)]
struct CpuSample {
    at: Instant,
    /// Busy ticks of the whole machine.
    busy: u64,
    /// Ticks of this process, its reaped children and the server.
    ours: u64,
    /// Steal ticks of the whole machine.
    steal: u64,
}

impl CpuMeter {
    pub(crate) fn new(server: &RedisServer) -> CpuMeter {
        CpuMeter { server_pids: vec![server.pid().expect("the server is running")], current: None, steps: Vec::new() }
    }

    /// Counts `server` as the benchmark's own from now on.
    pub(crate) fn add_server(&mut self, server: &RedisServer) {
        self.add_pid(server.pid().expect("the server is running"));
    }

    /// Counts process `pid` (a server of another kind: a sentinel) as the benchmark's own.
    pub(crate) fn add_pid(&mut self, pid: u32) {
        self.server_pids.push(pid);
    }

    /// Ends the current step (if any) and starts `name` (none when empty).
    pub(crate) fn step(&mut self, name: &str) {
        if !name.is_empty() {
            eprintln!("{name} ...");
        }
        let now = self.sample();
        if let Some((previous, start)) = self.current.take() {
            let ticks_per_sec = 100.0; // USER_HZ on Linux
            let elapsed = now.at.duration_since(start.at).as_secs_f64() * ticks_per_sec;
            let other = now.busy.saturating_sub(start.busy).saturating_sub(now.ours.saturating_sub(start.ours));
            let steal = now.steal.saturating_sub(start.steal);
            self.steps.push(OtherWork {
                step: previous,
                others: other as f64 / elapsed.max(1.0),
                steal: steal as f64 / elapsed.max(1.0),
            });
        }
        if !name.is_empty() {
            self.current = Some((name.to_string(), now));
        }
    }

    fn sample(&self) -> CpuSample {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        // cpu  user nice system idle iowait irq softirq steal ...
        let fields: Vec<u64> =
            stat.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
        let busy = [0, 1, 2, 5, 6].iter().filter_map(|&i| fields.get(i)).sum();
        let ours = process_ticks("self", true)
            + self.server_pids.iter().map(|pid| process_ticks(&pid.to_string(), false)).sum::<u64>();
        CpuSample { at: Instant::now(), busy, ours, steal: fields.get(7).copied().unwrap_or(0) }
    }
}

/// utime + stime of a process (and of its reaped children when `children`), in ticks.
pub(crate) fn process_ticks(pid: &str, children: bool) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after "pid (comm) ": state is field 3; utime, stime, cutime, cstime are 14–17.
    let Some((_, rest)) = stat.rsplit_once(") ") else { return 0 };
    let fields: Vec<u64> = rest.split_whitespace().skip(11).take(4).filter_map(|f| f.parse().ok()).collect();
    let count = if children { 4 } else { 2 };
    fields.iter().take(count).sum()
}

/// The CPU time of process `pid` in nanoseconds: its threads' time on a CPU, summed
/// (`/proc/<pid>/task/*/schedstat`, whose first field is nanoseconds).
pub(crate) fn cpu_ns(pid: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}
