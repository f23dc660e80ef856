//! Step 16, the leases curve: what holding 1 to 100,000 watchdog leases at once costs, per
//! lease renewed: Redis's time, the client's CPU, the commands and bytes it sends, the
//! round trips and the time of a renewal pass; the client's memory per lease, and the time
//! to release them all. Each size runs in a child process of its own, so that the memory
//! and the CPU time measured are that size's alone.

use std::fmt::Write as _;
use std::io::BufRead;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlease::Client;
use redlease_testkit::server::RedisServer;

use crate::child::{URL_ENV, Worker, child_env, say};
use crate::clock::nanos;
use crate::experiments::renewal::{RENEWAL_WATCHDOG, renewal_client};
use crate::plan::Plan;
use crate::plot::{LogLogChart, Series, draw_into};
use crate::servers::Servers;

/// The sizes of the curve: leases held at once by one client.
const LEASE_COUNTS: [usize; 6] = [1, 10, 100, 1_000, 10_000, 100_000];
/// The sizes of a quick run.
const QUICK_LEASE_COUNTS: usize = 5;
/// Threads the leases are spread over (guards stay on the thread that took them).
const HOLDERS: usize = 4;
/// Renewal periods in the measured window.
const PERIODS: u32 = 3;
/// Names the number of leases a child holds.
const LEASES_ENV: &str = "REDLEASE_BENCH_LEASES";

// Targets of the curve (docs/performance.md).
/// Redis's and the client's cost per lease renewed may grow at most this much from 100
/// leases to the largest size.
const TARGET_FLATNESS: f64 = 1.5;
/// The client's memory per lease held, at the largest size (all that taking them added,
/// the process's fixed costs included).
const TARGET_BYTES_PER_LEASE: f64 = 1024.0;
/// The longest pass, as a share of the renewal interval, at the largest size.
const TARGET_PASS_SHARE: f64 = 0.1;
/// The renewal interval of the default watchdog (30 s): what the pass target is judged
/// against. A pass takes as long whatever the interval; the curve's shorter watchdog only
/// brings more passes into its window.
const DEFAULT_RENEWAL_INTERVAL: Duration = Duration::from_secs(10);

/// One size of the curve.
pub(crate) struct CurvePoint {
    leases: usize,
    /// Taking them all, spread over the holders, and `redis-server`'s CPU meanwhile.
    acquired: Phase,
    /// The child's resident memory before the leases were taken and while they were held.
    rss_before: u64,
    rss_held: u64,
    /// The child's threads and open sockets while it held them.
    pub(crate) threads: u64,
    pub(crate) sockets: u64,
    window: Duration,
    pub(crate) passes: u64,
    pub(crate) round_trips: u64,
    renewed: u64,
    /// Time in renewal passes in the window.
    pass_time: Duration,
    /// The upper bound of the longest pass since the client was built (a power of two of a
    /// microsecond, at most twice the pass).
    longest_pass: Duration,
    /// Leases lost and renewals failed, as the event hook counted them.
    pub(crate) lost: u64,
    pub(crate) failed: u64,
    /// The child's CPU time in the window (every thread of the process).
    client_cpu: Duration,
    /// What Redis served in the window: every command's time and calls (`INFO
    /// commandstats`, the reset that opened the window left out), the bytes it read, and
    /// `redis-server`'s CPU time (`/proc`).
    redis_time: Duration,
    commands: u64,
    bytes_in: u64,
    server_cpu: Duration,
    released: Phase,
    /// Leases the client still counted after every guard dropped.
    leases_left: usize,
    /// Taking and releasing as many leases of a fixed length (no watchdog: nothing renews
    /// meanwhile), after the watchdog's leases were released.
    fixed_acquired: Phase,
    fixed_released: Phase,
}

/// A phase that takes or releases every lease: how long it took, and `redis-server`'s CPU
/// time meanwhile (`/proc`).
#[derive(Clone, Copy, Default)]
struct Phase {
    took: Duration,
    server_cpu: Duration,
}

impl Phase {
    /// The share of one CPU `redis-server` used in the phase: near 1, Redis was the limit.
    fn server_share(&self) -> f64 {
        self.server_cpu.as_secs_f64() / self.took.as_secs_f64().max(1e-9)
    }
    /// The phase's time per lease, in µs.
    fn per_lease_us(&self, leases: usize) -> f64 {
        self.took.as_secs_f64() * 1e6 / leases.max(1) as f64
    }
}

impl CurvePoint {
    fn per_renewal(&self, total: f64) -> f64 {
        total / self.renewed.max(1) as f64
    }
    fn redis_us(&self) -> f64 {
        self.per_renewal(self.redis_time.as_secs_f64() * 1e6)
    }
    pub(crate) fn server_cpu_us(&self) -> f64 {
        self.per_renewal(self.server_cpu.as_secs_f64() * 1e6)
    }
    pub(crate) fn client_cpu_us(&self) -> f64 {
        self.per_renewal(self.client_cpu.as_secs_f64() * 1e6)
    }
    /// The client's CPU per lease renewed between the size `before` and this one: what a
    /// renewal more costs, the fixed work (the pass's wake-ups, the announcement, the
    /// child's own threads) being the same in both processes and cancelling out.
    fn client_cpu_marginal_us(&self, before: &CurvePoint) -> f64 {
        let per_second = |p: &CurvePoint, total: f64| total / p.window.as_secs_f64().max(1e-9);
        let cpu = per_second(self, self.client_cpu.as_secs_f64()) - per_second(before, before.client_cpu.as_secs_f64());
        let renewals = per_second(self, self.renewed as f64) - per_second(before, before.renewed as f64);
        if renewals <= 0.0 { f64::NAN } else { cpu * 1e6 / renewals }
    }
    /// What taking the leases added to the resident memory.
    fn bytes_added(&self) -> f64 {
        self.rss_held as f64 - self.rss_before as f64
    }
    pub(crate) fn bytes_per_lease(&self) -> f64 {
        self.bytes_added() / self.leases as f64
    }
    pub(crate) fn mean_pass(&self) -> Duration {
        self.pass_time / u32::try_from(self.passes.max(1)).unwrap_or(u32::MAX)
    }
}

/// The curve, one child process per size (the largest left out of a quick run).
pub(crate) fn measure_lease_curve(server: &RedisServer, plan: &Plan) -> Vec<CurvePoint> {
    let sizes = if plan.quick { &LEASE_COUNTS[..QUICK_LEASE_COUNTS] } else { &LEASE_COUNTS[..] };
    let mut servers = Servers::single(server);
    sizes.iter().map(|&leases| lease_point(&mut servers, leases)).collect()
}

/// One point of the curve: `leases` held by a client of `servers` in a child process.
pub(crate) fn lease_point(servers: &mut Servers, leases: usize) -> CurvePoint {
    let mut child = Worker::spawn("leases", &[(URL_ENV, servers.url.clone()), (LEASES_ENV, leases.to_string())]);
    let ready = numbers(&child.expect("ready "));
    let (held, acquired) = phase(&mut child, servers, "take", "held ");
    servers.reset_stats();
    let server_cpu_before = servers.cpu();
    child.send("window");
    let window = numbers(&child.expect("window "));
    let server_cpu = servers.cpu().saturating_sub(server_cpu_before);
    let served = served_since_reset(servers);
    let (left, released) = phase(&mut child, servers, "release", "released ");
    let (_, fixed_acquired) = phase(&mut child, servers, "take-fixed", "held ");
    let (_, fixed_released) = phase(&mut child, servers, "release", "released ");
    child.finish();
    CurvePoint {
        leases,
        acquired,
        rss_before: ready[0],
        rss_held: held[0],
        threads: held[1],
        sockets: held[2],
        window: Duration::from_nanos(window[0]),
        passes: window[1],
        round_trips: window[2],
        renewed: window[3],
        pass_time: Duration::from_nanos(window[4]),
        longest_pass: Duration::from_nanos(window[5]),
        lost: window[6],
        failed: window[7],
        client_cpu: Duration::from_nanos(window[8]),
        redis_time: served.time,
        commands: served.commands,
        bytes_in: served.bytes_in,
        server_cpu: Duration::from_nanos(server_cpu),
        released,
        leases_left: usize::try_from(left[0]).unwrap_or(usize::MAX),
        fixed_acquired,
        fixed_released,
    }
}

/// Orders the child to `order`, whose answer starts with `answer` followed by the phase's
/// time: the answer's other numbers, and the phase with `redis-server`'s CPU meanwhile.
fn phase(child: &mut Worker, servers: &Servers, order: &str, answer: &str) -> (Vec<u64>, Phase) {
    let server_cpu_before = servers.cpu();
    child.send(order);
    let numbers = numbers(&child.expect(answer));
    let server_cpu = Duration::from_nanos(servers.cpu().saturating_sub(server_cpu_before));
    (numbers[1..].to_vec(), Phase { took: Duration::from_nanos(numbers[0]), server_cpu })
}

/// In the child: takes the leases over [`HOLDERS`] threads, then holds them through the
/// window and releases them all, then takes and releases as many leases of a fixed length,
/// each on the parent's order, saying what it measured.
pub(crate) fn leases_child() {
    let leases: usize = child_env(LEASES_ENV).parse().expect("a count of leases");
    let (client, events) = renewal_client(Client::builder(child_env(URL_ENV)));
    // The pools and the renewal thread exist before the memory is first read.
    let warm = client.lock("bench:curve:warm").try_lock().expect("warm-up").expect("the warm-up lock is free");
    warm.unlock().expect("warm-up unlock");
    say(&format!("ready {}", resident_bytes()));

    await_order("take");
    let (holders, acquired) = take_over_holders(&client, leases, "", None);
    say(&format!("held {} {} {} {}", nanos(acquired), resident_bytes(), threads(), sockets()));

    await_order("window");
    let (before, cpu_before, window_start) = (client.stats(), own_cpu(), Instant::now());
    thread::sleep(RENEWAL_WATCHDOG / 3 * PERIODS);
    let (after, cpu, window) = (client.stats(), own_cpu() - cpu_before, window_start.elapsed());
    let longest = after.renewal_pass_time.quantile(1.0).unwrap_or_default();
    say(&format!(
        "window {} {} {} {} {} {} {} {} {}",
        nanos(window),
        after.renewal_passes - before.renewal_passes,
        after.renewal_round_trips - before.renewal_round_trips,
        after.leases_renewed - before.leases_renewed,
        nanos(after.renewal_time - before.renewal_time),
        nanos(longest),
        events.lost.load(std::sync::atomic::Ordering::Relaxed),
        events.renewal_failed.load(std::sync::atomic::Ordering::Relaxed),
        nanos(cpu),
    ));

    await_order("release");
    say(&format!("released {} {}", nanos(release_holders(holders)), client.stats().leases));

    await_order("take-fixed");
    let (holders, acquired) = take_over_holders(&client, leases, "fixed:", Some(FIXED_LEASE));
    say(&format!("held {}", nanos(acquired)));
    await_order("release");
    say(&format!("released {}", nanos(release_holders(holders))));
}

/// The lease of the fixed-length run: longer than the run.
const FIXED_LEASE: Duration = Duration::from_secs(120);

/// A holder thread: the order to release its guards, and the thread.
type Holder = (mpsc::Sender<()>, thread::JoinHandle<()>);

/// Takes `leases` locks (named after `run`) over [`HOLDERS`] threads, each with one
/// `try_lock`, of `lease` or with the watchdog: the holders, once all have taken theirs,
/// and the time that took.
fn take_over_holders(client: &Client, leases: usize, run: &str, lease: Option<Duration>) -> (Vec<Holder>, Duration) {
    let started = Instant::now();
    let (held_tx, held_rx) = mpsc::channel::<()>();
    let holders: Vec<Holder> = (0..HOLDERS.min(leases))
        .map(|holder| {
            let client = client.clone();
            let held_tx = held_tx.clone();
            let run = run.to_owned();
            let (release_tx, release_rx) = mpsc::channel::<()>();
            let thread = thread::spawn(move || {
                // What the benchmark keeps per lease is the guard alone, in a `Vec` of the
                // right size (a name is made for the call and dropped; the lock keeps its own).
                let mine = (holder..leases).step_by(HOLDERS);
                let mut guards = Vec::with_capacity(mine.len());
                for i in mine {
                    let lock = client.lock(format!("bench:curve:{run}{leases}:{i}"));
                    let lock = match lease {
                        Some(lease) => lock.with_lease(lease),
                        None => lock,
                    };
                    guards.push(lock.try_lock().expect("try_lock").expect("a fresh lease lock is free"));
                }
                held_tx.send(()).expect("tell the child's main thread");
                release_rx.recv().expect("the release order");
                drop(guards);
            });
            (release_tx, thread)
        })
        .collect();
    for _ in &holders {
        held_rx.recv().expect("a holder took its leases");
    }
    (holders, started.elapsed())
}

/// Orders every holder to drop its guards: the time until all have.
fn release_holders(holders: Vec<Holder>) -> Duration {
    let start = Instant::now();
    for (release, _) in &holders {
        release.send(()).expect("a holder waits for the release order");
    }
    for (_, thread) in holders {
        thread.join().expect("a holder released its leases");
    }
    start.elapsed()
}

/// What Redis served since the last `CONFIG RESETSTAT`.
struct Served {
    time: Duration,
    commands: u64,
    bytes_in: u64,
}

/// Whether a command named so in `INFO commandstats` is one a client sends itself: the
/// commands a script runs are counted under their own names as well as in the script's
/// time, and are left out of the sum.
fn sent_by_a_client(name: &str) -> bool {
    const SENT: [&str; 6] = ["info", "wait", "waitaof", "ping", "set", "hello"];
    name.starts_with("eval") || name.starts_with("client|") || name.starts_with("script|") || SENT.contains(&name)
}

/// The calls and time of the commands clients sent since the reset (the reset itself left
/// out; see [`sent_by_a_client`]), and the bytes the servers read, less this reading's two
/// requests on each (each counted in the input bytes when it is read, in its command
/// statistics only after it ran: the first is in neither figure's reply, the second in the
/// bytes).
fn served_since_reset(servers: &mut Servers) -> Served {
    let mut commands = 0;
    let mut usec = 0;
    for (name, calls, time) in servers.all_command_stats() {
        if sent_by_a_client(&name) {
            commands += calls;
            usec += time;
        }
    }
    let ours = redis::cmd("INFO").arg("commandstats").get_packed_command().len()
        + redis::cmd("INFO").arg("stats").get_packed_command().len();
    Served { time: Duration::from_micros(usec), commands, bytes_in: servers.bytes_in(ours as u64) }
}

/// The numbers of a child's line, in order.
fn numbers(line: &str) -> Vec<u64> {
    line.split_whitespace().map(|n| n.parse().unwrap_or_else(|_| panic!("a number in {line:?}"))).collect()
}

/// In the child: waits for the parent's next order, which must be `order`.
fn await_order(order: &str) {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).expect("read an order");
    assert_eq!(line.trim(), order, "the parent's order");
}

/// This process's resident memory in bytes (`VmRSS` of `/proc/self/status`).
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

/// This process's threads.
fn threads() -> u64 {
    std::fs::read_dir("/proc/self/task").map_or(0, |tasks| tasks.count() as u64)
}

/// This process's open sockets (`/proc/self/fd` entries that are sockets).
fn sockets() -> u64 {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else { return 0 };
    fds.flatten()
        .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target.to_string_lossy().starts_with("socket:")))
        .count() as u64
}

/// This process's CPU time, every thread's, those that ended included.
fn own_cpu() -> Duration {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID).expect("process CPU clock");
    Duration::from(t)
}

/// How much a series grows over the sizes from 100 leases on: its greatest value over
/// its least.
fn spread(points: &[CurvePoint], value: impl Fn(&CurvePoint) -> f64) -> f64 {
    greatest_over_least(points.iter().filter(|p| p.leases >= 100).map(value))
}

/// As [`spread`], of a figure between each size and the one before it.
fn spread_since_before(points: &[CurvePoint], value: impl Fn(&CurvePoint, &CurvePoint) -> f64) -> f64 {
    greatest_over_least(points.windows(2).filter(|w| w[1].leases >= 100).map(|w| value(&w[1], &w[0])))
}

/// NaN when there is no value, or one is not a positive number.
fn greatest_over_least(values: impl Iterator<Item = f64>) -> f64 {
    let values: Vec<f64> = values.collect();
    if values.is_empty() || values.iter().any(|v| !v.is_finite() || *v <= 0.0) {
        return f64::NAN;
    }
    let (low, high) = values.iter().fold((f64::INFINITY, 0.0f64), |(l, h), &v| (l.min(v), h.max(v)));
    high / low
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "missed" }
}

/// Step 16's section: the table, the targets and the pictures (drawn now, see
/// [`crate::plot::curves_dir`]).
pub(crate) fn lease_curve_section(out: &mut String, points: &[CurvePoint]) {
    let interval = RENEWAL_WATCHDOG / 3;
    let _ = writeln!(
        out,
        "### 16. The leases curve: 1 to {} watchdog leases held by one client over {HOLDERS} threads \
         (watchdog {} s, renewal every {} s, a window of {PERIODS} renewal periods; each size in a process of its own)\n",
        points.last().map_or(0, |p| p.leases),
        RENEWAL_WATCHDOG.as_secs(),
        interval.as_secs()
    );
    let _ = writeln!(
        out,
        "| leases | client memory per lease (B): all it added / since the size before | window (s) | passes | round trips per pass | \
         pass mean / longest (ms) | renewed | Redis per renewal: commands' time (µs) | `redis-server` CPU per renewal (µs) | \
         client CPU per renewal (µs): all / since the size before | commands per renewal | bytes sent per renewal | lost / failed |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let fixed = fixed_work(points);
    table_rows(out, points);
    let redis_spread = spread(points, CurvePoint::redis_us);
    let client_spread = spread(points, CurvePoint::client_cpu_us);
    let marginal_spread = spread_since_before(points, CurvePoint::client_cpu_marginal_us);
    // Noise in two children's fixed work can make a small size's difference negative, and
    // the spread then means nothing.
    let marginal = if marginal_spread.is_finite() {
        format!("{marginal_spread:.2}× ({})", verdict(marginal_spread <= TARGET_FLATNESS))
    } else {
        "not measurable in this run (a size spent less than the size before it)".to_string()
    };
    let largest = points.last();
    let memory = largest.map_or(f64::NAN, CurvePoint::bytes_per_lease);
    let longest = largest.map_or(f64::NAN, |p| p.longest_pass.as_secs_f64());
    let pass_share = longest / DEFAULT_RENEWAL_INTERVAL.as_secs_f64();
    let _ = writeln!(
        out,
        "\nTargets: Redis's time per renewal grows {redis_spread:.2}× from 100 leases to the largest size, the client's CPU \
         {client_spread:.2}× (≤ {TARGET_FLATNESS}×: {}, {}): with one lease the client spends {:.0} µs of CPU a second (its fixed \
         work), which a small size's renewals share; a renewal more, from one size to the next, {marginal}; the client's memory per lease at {} leases is {memory:.0} B \
         (≤ {TARGET_BYTES_PER_LEASE:.0}: {}); the longest pass at {} leases is at most {:.1} % of the default watchdog's \
         renewal interval, {} s (≤ {:.0} %: {}; {:.1} % of this curve's {} s). The window's figures are per lease renewed; a pass's longest time is the upper end of its \
         bucket in `ClientStats::renewal_pass_time` (at most twice the pass).\n",
        verdict(redis_spread <= TARGET_FLATNESS),
        verdict(client_spread <= TARGET_FLATNESS),
        fixed * 1e6,
        largest.map_or(0, |p| p.leases),
        verdict(memory <= TARGET_BYTES_PER_LEASE),
        largest.map_or(0, |p| p.leases),
        pass_share * 100.0,
        DEFAULT_RENEWAL_INTERVAL.as_secs(),
        TARGET_PASS_SHARE * 100.0,
        verdict(pass_share <= TARGET_PASS_SHARE),
        longest / interval.as_secs_f64() * 100.0,
        interval.as_secs(),
    );
    phase_table(out, points);
    draw_into(out, lease_charts(points));
}

/// The two pictures of the curve: the cost per lease renewed, and the time of a pass.
fn lease_charts(points: &[CurvePoint]) -> [LogLogChart<'static>; 2] {
    let series = |name: &str, value: &dyn Fn(&CurvePoint) -> f64| Series {
        name: name.to_string(),
        points: points.iter().map(|p| (p.leases as f64, value(p))).collect(),
    };
    [
        LogLogChart {
            file: "lease-curve-cost.svg",
            title: "Cost per lease renewed, by the leases one client holds",
            x_label: "leases held",
            y_label: "µs per lease renewed",
            series: vec![
                series("Redis: the commands' time (INFO commandstats)", &CurvePoint::redis_us),
                series("redis-server CPU (/proc)", &CurvePoint::server_cpu_us),
                series("client CPU (the process's clock)", &CurvePoint::client_cpu_us),
            ],
        },
        LogLogChart {
            file: "lease-curve-pass.svg",
            title: "A renewal pass's time, by the leases one client holds",
            x_label: "leases held",
            y_label: "ms",
            series: vec![
                series("mean pass", &|p| p.mean_pass().as_secs_f64() * 1e3),
                series("longest pass (upper bound)", &|p| p.longest_pass.as_secs_f64() * 1e3),
                series("the target: a tenth of the default renewal interval", &|_| {
                    DEFAULT_RENEWAL_INTERVAL.as_secs_f64() * 1e3 * TARGET_PASS_SHARE
                }),
            ],
        },
    ]
}

/// The client's CPU per second of its fixed work (its pass, its announcement, the child's
/// own threads): its CPU with one lease, where one renewal a pass is all the rest.
fn fixed_work(points: &[CurvePoint]) -> f64 {
    points.iter().find(|p| p.leases == 1).map_or(0.0, |p| p.client_cpu.as_secs_f64() / p.window.as_secs_f64().max(1e-9))
}

/// Taking and releasing every lease, with the watchdog and with a fixed lease, and how much
/// of one CPU `redis-server` used meanwhile.
fn phase_table(out: &mut String, points: &[CurvePoint]) {
    let _ = writeln!(
        out,
        "Taking and releasing them all ({HOLDERS} threads; `redis-server`'s CPU meanwhile as a share of one CPU): with the \
         watchdog (the leases above; their renewal runs meanwhile), then as many leases of a fixed {} s (nothing renews):\n",
        FIXED_LEASE.as_secs()
    );
    let _ = writeln!(
        out,
        "| leases | watchdog: taking (s, Redis CPU) | releasing (s, Redis CPU) | fixed lease: taking (s, Redis CPU) | \
         releasing (s, Redis CPU) | fixed lease: µs per lease taken / released |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|");
    let cell = |phase: &Phase| format!("{:.3} ({:.0} %)", phase.took.as_secs_f64(), phase.server_share() * 100.0);
    for p in points {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.1} / {:.1} |",
            p.leases,
            cell(&p.acquired),
            cell(&p.released),
            cell(&p.fixed_acquired),
            cell(&p.fixed_released),
            p.fixed_acquired.per_lease_us(p.leases),
            p.fixed_released.per_lease_us(p.leases),
        );
    }
    let _ = writeln!(out);
}

/// One row of step 16's table per size.
fn table_rows(out: &mut String, points: &[CurvePoint]) {
    for (i, p) in points.iter().enumerate() {
        // The memory per lease between this size and the one before: what the fixed costs
        // (the holders' threads, the first growth of the maps) leave out.
        let marginal = i.checked_sub(1).map_or_else(
            || "–".to_string(),
            |before| {
                let b = &points[before];
                format!("{:.0}", (p.bytes_added() - b.bytes_added()) / (p.leases - b.leases) as f64)
            },
        );
        let _ = writeln!(
            out,
            "| {} | {:.0} / {} | {:.2} | {} | {:.2} | {:.2} / ≤ {:.1} | {} | {:.2} | {:.2} | {:.2} / {} | {:.3} | {:.1} | {} / {}{} |",
            p.leases,
            p.bytes_per_lease(),
            marginal,
            p.window.as_secs_f64(),
            p.passes,
            p.round_trips as f64 / p.passes.max(1) as f64,
            p.mean_pass().as_secs_f64() * 1e3,
            p.longest_pass.as_secs_f64() * 1e3,
            p.renewed,
            p.redis_us(),
            p.server_cpu_us(),
            p.client_cpu_us(),
            i.checked_sub(1)
                .map_or_else(|| "–".to_string(), |before| format!("{:.2}", p.client_cpu_marginal_us(&points[before]))),
            p.per_renewal(p.commands as f64),
            p.per_renewal(p.bytes_in as f64),
            p.lost,
            p.failed,
            if p.leases_left > 0 { format!(" ({} leases left)", p.leases_left) } else { String::new() },
        );
    }
}
