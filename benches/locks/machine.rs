//! The machine the run ran on: CPUs, memory, kernel, load, and the versions of
//! `redis-server` and rustc.

use std::process::Command;
use std::thread;

use redlease_testkit::server;

pub(crate) struct Machine {
    pub(crate) cpus: usize,
    pub(crate) model: String,
    pub(crate) virtualized: bool,
    /// The 1-minute load average when the run started (other work on the machine).
    pub(crate) load: String,
    pub(crate) memory_gib: f64,
    pub(crate) kernel: String,
    pub(crate) redis: String,
    pub(crate) rustc: String,
}

impl Machine {
    pub(crate) fn read() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let virtualized =
            cpuinfo.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"));
        let model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim()))
            .unwrap_or("unknown")
            .to_string();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .unwrap_or(f64::NAN);
        let redis_binary = std::env::var(server::REDIS_SERVER_ENV).unwrap_or_else(|_| "redis-server".into());
        let redis = command_output(&redis_binary, "--version")
            .split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .map_or_else(|| "unknown".to_string(), |v| format!("redis-server {v}"));
        Machine {
            // The machine's, not this process's: the benchmark pins itself to one.
            cpus: match cpuinfo.lines().filter(|l| l.starts_with("processor")).count() {
                0 => thread::available_parallelism().map_or(0, |n| n.get()),
                n => n,
            },
            model,
            virtualized,
            load: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|l| l.split_whitespace().next().map(str::to_string))
                .unwrap_or_else(|| "unknown".to_string()),
            memory_gib: memory_kib / (1024.0 * 1024.0),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string(),
            redis,
            rustc: command_output("rustc", "--version").trim().to_string(),
        }
    }
}

fn command_output(program: &str, arg: &str) -> String {
    Command::new(program)
        .arg(arg)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_else(|_| "unknown".to_string())
}
