//! Step 18, the contention curve: 1 to 64 processes of one thread each loop `lock()` +
//! `unlock()` with no work between, on one lock all share or on one lock each, and the
//! library's two scripts sent raw on one lock each (the most those processes could get out
//! of Redis with any client): acquisitions per second against the CPU `redis-server` and
//! the processes use, up to the server's saturation, and where the curve's knee is.

use std::fmt::Write as _;
use std::time::Duration;

use redlease::Client;
use redlease_testkit::server::RedisServer;

use crate::child::{KIND_ENV, LOCK_ENV, URL_ENV, Worker, child_env, read_window, say, send_window};
use crate::clock::{mono_ns, sleep_until_mono};
use crate::experiments::uncontended::RawPair;
use crate::meter::cpu_ns;
use crate::plan::Plan;
use crate::plot::{LogLogChart, Series, draw_into};
use crate::servers::Servers;
use crate::table::verdict;

/// The numbers of processes of the curve.
const PROCESS_COUNTS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];
/// The sizes of a quick run.
const QUICK_PROCESS_COUNTS: usize = 4;
/// The knee of a curve is the first size whose throughput is at least this share of the
/// curve's most: where adding processes stops adding acquisitions.
const KNEE_SHARE: f64 = 0.9;

// The step's target, as docs/performance.md states it.
/// The raw scripts' saturation throughput over the library's, on one lock each.
const TARGET_RAW_OVER_LIBRARY: f64 = 1.3;

/// What the processes contend with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Contention {
    /// The library's plain lock, one lock all processes share.
    SharedLock,
    /// The library's plain lock, one lock per process.
    OwnLocks,
    /// The plain lock's two scripts sent raw on a plain connection, one lock per process.
    RawScripts,
}

impl Contention {
    const ALL: [Contention; 3] = [Contention::SharedLock, Contention::OwnLocks, Contention::RawScripts];

    fn as_str(self) -> &'static str {
        match self {
            Contention::SharedLock => "library, one lock",
            Contention::OwnLocks => "library, a lock each",
            Contention::RawScripts => "raw scripts, a lock each",
        }
    }

    fn code(self) -> &'static str {
        match self {
            Contention::SharedLock => "shared",
            Contention::OwnLocks => "own",
            Contention::RawScripts => "raw",
        }
    }

    fn parse(code: &str) -> Contention {
        match code {
            "shared" => Contention::SharedLock,
            "own" => Contention::OwnLocks,
            "raw" => Contention::RawScripts,
            other => panic!("unknown contention {other:?}"),
        }
    }
}

/// One subject with one number of processes.
pub(crate) struct ContentionPoint {
    subject: Contention,
    processes: usize,
    pub(crate) window: Duration,
    acquisitions: u64,
    /// `EVALSHA`s each server ran in the window (and the last attempts after it).
    pub(crate) scripts: Vec<u64>,
    /// Each server's CPU time in the window.
    pub(crate) server_cpu: Vec<Duration>,
    /// The processes' CPU time in the window, all of them.
    clients_cpu: Duration,
}

impl ContentionPoint {
    pub(crate) fn per_sec(&self) -> f64 {
        self.acquisitions as f64 / self.window.as_secs_f64()
    }
    /// The servers' CPU time in the window, summed.
    pub(crate) fn server_cpu(&self) -> Duration {
        self.server_cpu.iter().sum()
    }
    /// The servers' CPU as a share of one CPU (they are pinned to one).
    pub(crate) fn server_share(&self) -> f64 {
        self.server_cpu().as_secs_f64() / self.window.as_secs_f64()
    }
    /// Each server's CPU as a share of the servers' sum.
    pub(crate) fn server_shares(&self) -> Vec<f64> {
        let all = self.server_cpu().as_secs_f64().max(1e-9);
        self.server_cpu.iter().map(|cpu| cpu.as_secs_f64() / all).collect()
    }
    /// The processes' CPU as a share of one CPU (they share the CPUs the server is not on).
    pub(crate) fn clients_share(&self) -> f64 {
        self.clients_cpu.as_secs_f64() / self.window.as_secs_f64()
    }
    pub(crate) fn server_us(&self) -> f64 {
        self.server_cpu().as_secs_f64() * 1e6 / self.acquisitions.max(1) as f64
    }
    pub(crate) fn clients_us(&self) -> f64 {
        self.clients_cpu.as_secs_f64() * 1e6 / self.acquisitions.max(1) as f64
    }
}

/// The curve: every subject at every size (the larger sizes left out of a quick run).
pub(crate) fn measure_contention_curve(server: &RedisServer, plan: &Plan) -> Vec<ContentionPoint> {
    let sizes = if plan.quick { &PROCESS_COUNTS[..QUICK_PROCESS_COUNTS] } else { &PROCESS_COUNTS[..] };
    let mut servers = Servers::single(server);
    let mut points = Vec::new();
    for subject in Contention::ALL {
        for &processes in sizes {
            let name = |p: usize| match subject {
                Contention::SharedLock => format!("bench:contention:{}:{processes}", subject.code()),
                _ => format!("bench:contention:{}:{processes}:{p}", subject.code()),
            };
            points.push(contention_run(&mut servers, plan.throughput_for, subject, processes, name));
        }
    }
    points
}

/// `processes` processes of `subject` on `servers` through a window of `window`, process
/// `p` on the lock `name(p)`.
pub(crate) fn contention_run(
    servers: &mut Servers,
    window: Duration,
    subject: Contention,
    processes: usize,
    name: impl Fn(usize) -> String,
) -> ContentionPoint {
    let mut workers: Vec<Worker> = (0..processes)
        .map(|p| {
            let env = [(URL_ENV, servers.url.clone()), (KIND_ENV, subject.code().to_string()), (LOCK_ENV, name(p))];
            Worker::spawn("contending", &env)
        })
        .collect();
    for worker in &workers {
        worker.expect("ready");
    }
    let pids: Vec<String> = workers.iter().map(|w| w.pid().to_string()).collect();
    let clients_cpu = || pids.iter().map(|pid| cpu_ns(pid)).sum::<u64>();
    servers.reset_stats();
    let (start, end) = send_window(&mut workers, window);
    sleep_until_mono(start);
    let (server_before, clients_before) = (servers.cpu_each(), clients_cpu());
    sleep_until_mono(end);
    let (server_after, clients_after) = (servers.cpu_each(), clients_cpu());
    let acquisitions: u64 = workers.iter().map(|w| w.expect("count ").parse::<u64>().expect("a count")).sum();
    let scripts = servers.calls_each("evalsha");
    for worker in workers {
        worker.finish();
    }
    let server_cpu: Vec<Duration> =
        server_after.iter().zip(&server_before).map(|(a, b)| Duration::from_nanos(a.saturating_sub(*b))).collect();
    ContentionPoint {
        subject,
        processes,
        window: Duration::from_nanos(end - start),
        acquisitions,
        scripts,
        server_cpu,
        clients_cpu: Duration::from_nanos(clients_after.saturating_sub(clients_before)),
    }
}

/// Child: one thread looping acquire + release on its lock between the start and end times
/// the parent sends, through the library or with the scripts sent raw; says how many
/// acquisitions began in the window.
pub(crate) fn contending_child() {
    let subject = Contention::parse(&child_env(KIND_ENV));
    let url = child_env(URL_ENV);
    let name = child_env(LOCK_ENV);
    let count = match subject {
        Contention::RawScripts => {
            let mut conn = redis::Client::open(url).and_then(|c| c.get_connection()).expect("a plain connection");
            let mut pair = RawPair::new(&format!("raw-{}", std::process::id()), &name, false);
            // Loads the scripts and opens the connection before the clock starts.
            for _ in 0..20 {
                pair.run(&mut conn);
            }
            in_window(|| {
                pair.run(&mut conn);
            })
        }
        Contention::SharedLock | Contention::OwnLocks => {
            let client = Client::open(&url).expect("client of a contending process");
            let warm = client.lock(format!("bench:contention:warm:{}", std::process::id()));
            for _ in 0..20 {
                warm.try_lock().expect("warm-up try_lock").expect("the warm-up lock is free").unlock().expect("unlock");
            }
            let lock = client.lock(name);
            in_window(|| lock.lock().expect("lock").unlock().expect("unlock"))
        }
    };
    say(&format!("count {count}"));
}

/// Says ready, reads the window, and runs `pair` from its start until it ends: how many
/// pairs began before the end.
fn in_window(mut pair: impl FnMut()) -> u64 {
    say("ready");
    let (start, end) = read_window();
    sleep_until_mono(start);
    let mut count = 0;
    while mono_ns() < end {
        pair();
        count += 1;
    }
    count
}

/// The knee of `subject`'s curve: the first size with at least [`KNEE_SHARE`] of the
/// curve's most acquisitions per second.
fn knee(points: &[ContentionPoint], subject: Contention) -> Option<&ContentionPoint> {
    let most = saturation(points, subject)?.per_sec();
    points.iter().find(|p| p.subject == subject && p.per_sec() >= most * KNEE_SHARE)
}

/// The most acquisitions per second of `subject` at any size.
fn saturation(points: &[ContentionPoint], subject: Contention) -> Option<&ContentionPoint> {
    points.iter().filter(|p| p.subject == subject).max_by(|a, b| a.per_sec().total_cmp(&b.per_sec()))
}

/// Step 18's section: the table, the knees and the target, and the pictures.
pub(crate) fn contention_curve_section(out: &mut String, points: &[ContentionPoint]) {
    let _ = writeln!(
        out,
        "### 18. The contention curve: N processes of one thread each loop `lock()` + `unlock()` (no work between) \
         for {:.0} s, on one lock all share, on one lock each, and with the plain lock's two scripts sent raw on one \
         lock each (N = {})\n",
        points.first().map_or(0.0, |p| p.window.as_secs_f64()),
        PROCESS_COUNTS.map(|n| n.to_string()).join(", ")
    );
    let _ = writeln!(
        out,
        "CPU from `/proc` over the window: `redis-server`'s as a share of the one CPU it is pinned to, the \
         processes' (every thread of every one) as a share of one CPU; they share the others. Scripts: every \
         `EVALSHA` Redis ran over the acquisitions.\n"
    );
    let _ = writeln!(
        out,
        "| subject | processes | acquisitions/s | `redis-server` CPU | processes' CPU | Redis µs per acquisition | \
         processes' µs per acquisition | scripts per acquisition |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for p in points {
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} | {:.0} % | {:.0} % | {:.1} | {:.1} | {:.2} |",
            p.subject.as_str(),
            p.processes,
            p.per_sec(),
            p.server_share() * 100.0,
            p.clients_share() * 100.0,
            p.server_us(),
            p.clients_us(),
            p.scripts.iter().sum::<u64>() as f64 / p.acquisitions.max(1) as f64,
        );
    }
    let _ = writeln!(out);
    contention_targets(out, points);
    draw_into(out, contention_charts(points));
}

/// The knee of each subject, and the target on one lock each.
fn contention_targets(out: &mut String, points: &[ContentionPoint]) {
    let _ = writeln!(
        out,
        "Knees (the first N with at least {:.0} % of the curve's most acquisitions per second) and the most:\n",
        KNEE_SHARE * 100.0
    );
    let _ = writeln!(
        out,
        "| subject | knee at N | acquisitions/s | `redis-server` CPU | processes' CPU | the most: acquisitions/s (at N) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for subject in Contention::ALL {
        if let (Some(k), Some(most)) = (knee(points, subject), saturation(points, subject)) {
            let _ = writeln!(
                out,
                "| {} | {} | {:.0} | {:.0} % | {:.0} % | {:.0} ({}) |",
                subject.as_str(),
                k.processes,
                k.per_sec(),
                k.server_share() * 100.0,
                k.clients_share() * 100.0,
                most.per_sec(),
                most.processes
            );
        }
    }
    let library = saturation(points, Contention::OwnLocks);
    let raw = saturation(points, Contention::RawScripts);
    if let (Some(library), Some(raw)) = (library, raw) {
        let ratio = raw.per_sec() / library.per_sec().max(1e-9);
        let _ = writeln!(
            out,
            "\nTarget: the raw scripts' most over the library's, on one lock each: {ratio:.2} \
             (≤ {TARGET_RAW_OVER_LIBRARY}: {}).\n",
            verdict(ratio <= TARGET_RAW_OVER_LIBRARY)
        );
    }
}

/// The pictures: acquisitions per second, and `redis-server`'s CPU per acquisition, by the
/// number of processes.
fn contention_charts(points: &[ContentionPoint]) -> [LogLogChart<'static>; 2] {
    let series = |value: &dyn Fn(&ContentionPoint) -> f64| {
        Contention::ALL
            .iter()
            .map(|&subject| Series {
                name: subject.as_str().to_string(),
                points: points
                    .iter()
                    .filter(|p| p.subject == subject)
                    .map(|p| (p.processes as f64, value(p)))
                    .collect(),
            })
            .collect()
    };
    [
        LogLogChart {
            file: "contention-curve-throughput.svg",
            title: "Acquisitions per second, by the processes contending",
            x_label: "processes (one thread each)",
            y_label: "acquisitions/s",
            series: series(&ContentionPoint::per_sec),
        },
        LogLogChart {
            file: "contention-curve-cpu.svg",
            title: "CPU per acquisition, by the processes contending",
            x_label: "processes (one thread each)",
            y_label: "µs of redis-server CPU per acquisition",
            series: series(&ContentionPoint::server_us),
        },
    ]
}
