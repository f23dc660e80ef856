//! Step 5, a writer under continuously overlapping readers (Redisson's reader preference).

use std::fmt::Write as _;
use std::thread;
use std::time::Duration;

use redlease::Client;
use redlease_testkit::server::RedisServer;

use crate::clock::{mono_ns, nanos, sleep_until_mono};
use crate::plan::Plan;
use crate::stats::Summary;

/// Reader threads in the writer run.
pub(crate) const WRITER_READERS: usize = 4;
/// How long each reader holds the read lock before it releases and takes it again.
pub(crate) const READER_HOLD: Duration = Duration::from_millis(20);
/// The readers start this far apart, so that at any time at least three of them hold.
pub(crate) const READER_STAGGER: Duration = Duration::from_millis(5);
/// The writer starts waiting this long after the first reader.
pub(crate) const WRITER_DELAY: Duration = Duration::from_millis(100);
/// The writer's wait in the round that shows starvation: shorter than the readers' run.
pub(crate) const STARVED_WAIT: Duration = Duration::from_millis(500);
/// The writer's wait in the other rounds: longer than the readers' run.
pub(crate) const WRITER_WAIT: Duration = Duration::from_secs(10);

/// One round: readers overlap, a writer calls `try_lock_for`, the readers stop.
pub(crate) struct WriterRound {
    /// How long the writer's `try_lock_for` took.
    pub(crate) waited: Duration,
    pub(crate) granted: bool,
    /// From the writer's call to the last reader's release (taken just before `unlock()`).
    pub(crate) readers_went_on: Duration,
    /// From the last reader's release to the writer's return with the lock, ns (negative:
    /// the writer got in before the readers stopped).
    pub(crate) after_last_release: Option<i64>,
    /// Read acquisitions granted while the writer waited.
    pub(crate) reads_while_waiting: usize,
}

pub(crate) struct WriterUnderReaders {
    /// The round whose writer gives up (`STARVED_WAIT`) while the readers still overlap.
    pub(crate) starved: WriterRound,
    /// Rounds whose writer waits longer (`WRITER_WAIT`) than the readers read.
    pub(crate) rounds: Vec<WriterRound>,
    pub(crate) readers_for: Duration,
}

pub(crate) fn measure_writer_under_readers(server: &RedisServer, plan: &Plan) -> WriterUnderReaders {
    let readers = Client::open(&server.url()).expect("client of the readers");
    let writer = Client::open(&server.url()).expect("client of the writer");
    let name = "bench:rw:writer";
    let starved = writer_round(&readers, &writer, name, STARVED_WAIT * 2, STARVED_WAIT);
    let rounds = (0..plan.writer_rounds).map(|_| writer_round(&readers, &writer, name, plan.readers_for, WRITER_WAIT));
    WriterUnderReaders { starved, rounds: rounds.collect(), readers_for: plan.readers_for }
}

/// `WRITER_READERS` threads of `readers` take the read lock `name` in a loop, each holding it
/// `READER_HOLD`, from the start until `readers_for` after the writer (a thread of `writer`)
/// started waiting up to `wait` for the write lock.
fn writer_round(readers: &Client, writer: &Client, name: &str, readers_for: Duration, wait: Duration) -> WriterRound {
    let begin = mono_ns() + nanos(Duration::from_millis(10));
    let writer_at = begin + nanos(WRITER_DELAY);
    let stop_at = writer_at + nanos(readers_for);
    let (reads, last_release, (w_start, w_end, granted)) = thread::scope(|scope| {
        let reader_threads: Vec<_> = (0..WRITER_READERS)
            .map(|i| {
                let lock = readers.read_write_lock(name).read();
                scope.spawn(move || {
                    sleep_until_mono(begin + i as u64 * nanos(READER_STAGGER));
                    let (mut acquired, mut last_release) = (Vec::new(), 0);
                    while mono_ns() < stop_at {
                        let guard = lock.lock().expect("read lock()");
                        acquired.push(mono_ns());
                        thread::sleep(READER_HOLD);
                        last_release = mono_ns();
                        guard.unlock().expect("read unlock");
                    }
                    (acquired, last_release)
                })
            })
            .collect();
        let write = writer.read_write_lock(name).write();
        let writer_thread = scope.spawn(move || {
            sleep_until_mono(writer_at);
            let start = mono_ns();
            let guard = write.try_lock_for(wait).expect("write try_lock_for");
            let end = mono_ns();
            let granted = guard.is_some();
            if let Some(guard) = guard {
                guard.unlock().expect("write unlock");
            }
            (start, end, granted)
        });
        let mut reads = Vec::new();
        let mut last_release = 0;
        for reader in reader_threads {
            let (acquired, last) = reader.join().expect("reader thread");
            reads.extend(acquired);
            last_release = last_release.max(last);
        }
        (reads, last_release, writer_thread.join().expect("writer thread"))
    });
    let signed = |ns: u64, from: u64| i64::try_from(ns).unwrap_or(i64::MAX) - i64::try_from(from).unwrap_or(i64::MAX);
    WriterRound {
        waited: Duration::from_nanos(w_end - w_start),
        granted,
        readers_went_on: Duration::from_nanos(last_release.saturating_sub(w_start)),
        after_last_release: granted.then(|| signed(w_end, last_release)),
        reads_while_waiting: reads.iter().filter(|&&at| at >= w_start && at < w_end).count(),
    }
}

/// Step 5's section, in round trips `rtt`.
pub(crate) fn writer_section(out: &mut String, rtt: f64, w: &WriterUnderReaders) {
    let _ = writeln!(
        out,
        "### 5. A writer under {WRITER_READERS} readers in one process, each holding the read lock {} ms in a \
         loop, started {} ms apart (always at least {} holding); the writer (its own client) calls \
         `write().try_lock_for(d)` {} ms after the first reader\n",
        READER_HOLD.as_millis(),
        READER_STAGGER.as_millis(),
        WRITER_READERS - 1,
        WRITER_DELAY.as_millis()
    );
    let _ = writeln!(
        out,
        "| round | d | readers went on after the writer's call for | writer waited | got in | from the last reader's release to the writer's entry | read acquisitions while it waited |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---|---:|---:|");
    let mut row = |what: String, d: Duration, r: &WriterRound| {
        let entry = r.after_last_release.map_or_else(
            || "–".to_string(),
            |ns| {
                if ns >= 0 {
                    format!("{:.1} µs", ns as f64 / 1e3)
                } else {
                    format!("{:.1} µs before it", -ns as f64 / 1e3)
                }
            },
        );
        let _ = writeln!(
            out,
            "| {what} | {} ms | {:.1} ms | {:.1} ms | {} | {entry} | {} |",
            d.as_millis(),
            r.readers_went_on.as_secs_f64() * 1e3,
            r.waited.as_secs_f64() * 1e3,
            if r.granted { "yes" } else { "no" },
            r.reads_while_waiting
        );
    };
    row("starvation: d shorter than the readers' run".to_string(), STARVED_WAIT, &w.starved);
    for (i, r) in w.rounds.iter().enumerate() {
        row(
            format!("{}: readers stop {} ms after the writer's call", i + 1, w.readers_for.as_millis()),
            WRITER_WAIT,
            r,
        );
    }
    let entries: Vec<u64> =
        w.rounds.iter().filter_map(|r| r.after_last_release).map(|ns| u64::try_from(ns).unwrap_or(0)).collect();
    let early = w.rounds.iter().filter(|r| r.after_last_release.is_some_and(|ns| ns < 0)).count();
    if !entries.is_empty() {
        let s = Summary::of_nanos(entries);
        let _ = writeln!(
            out,
            "\nEntry after the last reader's release, over {} rounds: p50 {:.1} µs ({:.2} RTT), max {:.1} µs; \
             rounds in which the writer got in while readers still held: {early}.",
            s.n,
            s.p50,
            s.p50 / rtt,
            s.max
        );
    }
    let _ = writeln!(out);
}
