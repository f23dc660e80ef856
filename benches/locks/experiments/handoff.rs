//! Step 2, contended hand-off to a waiter parked in another process (pub/sub wake-up),
//! plain and fair lock in alternating blocks; the same rig hands over the semaphores of
//! step 8 and the peers' locks of step 9.

use std::fmt::Write as _;
use std::io::BufRead;
use std::thread;
use std::time::{Duration, Instant};

use rand::Rng;
use redlease_testkit::server::RedisServer;

use crate::child::{KIND_ENV, LOCK_ENV, URL_ENV, Worker, child_env, say};
use crate::clock::mono_ns;
use crate::experiments::LockKind;
use crate::experiments::contenders::{Contender, Process, Subject};
use crate::plan::Plan;
use crate::stats::Summary;
use crate::table::{handoff_head, handoff_row};

/// Rounds before the measured ones (they open the child's pub/sub connection).
pub(crate) const HANDOFF_WARMUP: usize = 20;
/// Rounds before the measured ones for a waiter that polls (no pub/sub connection to open,
/// and each round lasts a poll interval).
const POLLING_WARMUP: usize = 2;
/// How long a subscribed waiter is given to retry and park before the release.
const HANDOFF_SETTLE: Duration = Duration::from_millis(2);
/// The subjects of one measurement alternate in this many blocks each.
pub(crate) const HANDOFF_BLOCKS: usize = 8;

pub(crate) struct Handoffs {
    pub(crate) plain: Summary,
    pub(crate) fair: Summary,
}

/// One holder here and one waiter in a child process, handing a lock back and forth.
struct HandoffRig {
    subject: Subject,
    name: String,
    holder: Box<dyn Contender>,
    child: Worker,
    raw: redis::Connection,
}

/// Once a child's waiter is parked: lets it settle, releases, and returns the time from
/// just before the release to the child's return from its blocking acquire (nanoseconds);
/// takes the lock back after the child released it.
pub(crate) fn timed_release(holder: &mut dyn Contender, child: &Worker) -> u64 {
    thread::sleep(HANDOFF_SETTLE);
    let t0 = mono_ns();
    holder.give_back();
    let t1: u64 = child.expect("acquired ").parse().expect("the child's acquisition time");
    assert!(holder.try_take(), "the child has released");
    t1.checked_sub(t0).expect("the child acquired after the release")
}

impl HandoffRig {
    fn new(server: &RedisServer, process: &Process, subject: Subject) -> HandoffRig {
        let name = format!("bench:handoff:{}", subject.as_str());
        let mut holder = process.contender(&name);
        let child = Worker::spawn(
            "handoff",
            &[(URL_ENV, server.url()), (LOCK_ENV, name.clone()), (KIND_ENV, subject.as_str().to_string())],
        );
        child.expect("ready");
        assert!(holder.try_take(), "the hand-off lock starts free");
        HandoffRig { subject, name, holder, child, raw: server.conn() }
    }

    /// One hand-off: the child waits, this side releases; the time from just before the
    /// release to the child's return from its blocking acquire, in nanoseconds.
    fn round(&mut self) -> u64 {
        self.child.send("go");
        self.child.expect("waiting");
        self.wait_until_parked();
        timed_release(self.holder.as_mut(), &self.child)
    }

    /// Until the child waits where a release will wake it: subscribed to the lock's channel
    /// (plain) or the semaphore's, or queued and subscribed to its own channel (fair). A
    /// peer's waiter or a spin lock's polls and cannot be seen waiting: the release comes at
    /// a random moment of its poll interval instead (of the spin lock's
    /// [`release_window`](crate::experiments::contenders::Spin::release_window)).
    fn wait_until_parked(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let conn = &mut self.raw;
        let name = &self.name;
        let subscribed = |conn: &mut redis::Connection, channel: String| {
            let (_, count): (String, u64) =
                redis::cmd("PUBSUB").arg("NUMSUB").arg(channel).query(conn).expect("PUBSUB NUMSUB");
            count >= 1
        };
        let parked = |conn: &mut redis::Connection| match self.subject {
            Subject::Lock(LockKind::Plain) => subscribed(conn, format!("redisson_lock__channel:{{{name}}}")),
            Subject::Semaphore | Subject::Permits => subscribed(conn, format!("redisson_sc:{{{name}}}")),
            Subject::Lock(LockKind::Fair) => {
                let queued: u64 =
                    redis::cmd("LLEN").arg(format!("redisson_lock_queue:{{{name}}}")).query(conn).expect("LLEN");
                let own: Vec<String> = redis::cmd("PUBSUB")
                    .arg("CHANNELS")
                    .arg(format!("redisson_lock__channel:{{{name}}}:*"))
                    .query(conn)
                    .expect("PUBSUB CHANNELS");
                queued >= 1 && !own.is_empty()
            }
            Subject::Lock(LockKind::Read) => unreachable!("no read hand-off"),
            Subject::Peer(_) | Subject::Spin(_) => unreachable!("a polling waiter is not seen parked"),
        };
        let polling = match self.subject {
            Subject::Peer(peer) => Some(peer.poll_interval()),
            Subject::Spin(spin) => Some(spin.release_window()),
            _ => None,
        };
        if let Some(window) = polling {
            let window = u64::try_from(window.as_micros()).expect("poll interval in µs");
            thread::sleep(Duration::from_micros(rand::rng().random_range(0..window)));
            return;
        }
        while !parked(conn) {
            assert!(Instant::now() < deadline, "the waiting child did not park on {name} within 10 s");
            thread::sleep(Duration::from_micros(100));
        }
    }

    fn finish(mut self) {
        self.holder.give_back();
        self.child.send("quit");
        self.child.finish();
    }
}

/// Hand-offs of every subject, `rounds[i]` of `subjects[i]`, in `HANDOFF_BLOCKS` alternating
/// blocks; the parent's side of the library's subjects uses `client`.
pub(crate) fn measure_handoff_blocks(
    server: &RedisServer,
    client: &redlease::Client,
    subjects: &[Subject],
    rounds: &[usize],
) -> Vec<Summary> {
    let mut rigs: Vec<HandoffRig> = subjects
        .iter()
        .map(|&subject| {
            let process = match subject {
                Subject::Peer(_) => Process::open(subject, &server.url()),
                _ => Process::with_client(subject, client),
            };
            HandoffRig::new(server, &process, subject)
        })
        .collect();
    for rig in &mut rigs {
        let polls = matches!(rig.subject, Subject::Peer(_) | Subject::Spin(_));
        let warmup = if polls { POLLING_WARMUP } else { HANDOFF_WARMUP };
        for _ in 0..warmup {
            rig.round();
        }
    }
    let mut samples: Vec<Vec<u64>> = rounds.iter().map(|&n| Vec::with_capacity(n)).collect();
    for _ in 0..HANDOFF_BLOCKS {
        for ((rig, samples), &n) in rigs.iter_mut().zip(&mut samples).zip(rounds) {
            for _ in 0..(n / HANDOFF_BLOCKS).max(1) {
                samples.push(rig.round());
            }
        }
    }
    for rig in rigs {
        rig.finish();
    }
    samples.into_iter().map(Summary::of_nanos).collect()
}

/// The plain and the fair hand-off, in alternating blocks.
pub(crate) fn measure_handoffs(server: &RedisServer, plan: &Plan) -> Handoffs {
    let client = redlease::Client::open(&server.url()).expect("client for the hand-off run");
    let subjects = [Subject::Lock(LockKind::Plain), Subject::Lock(LockKind::Fair)];
    let mut each = measure_handoff_blocks(server, &client, &subjects, &[plan.handoffs; 2]).into_iter();
    let mut next = || each.next().expect("one summary per subject");
    Handoffs { plain: next(), fair: next() }
}

/// Child: on each "go", blocks in its acquire, notes the time it returned, releases,
/// reports.
pub(crate) fn handoff_child() {
    let subject = Subject::parse(&child_env(KIND_ENV));
    serve_handoffs(Process::open(subject, &child_env(URL_ENV)).contender(&child_env(LOCK_ENV)));
}

/// A child's side of the hand-offs, with `waiter`: on each "go", says "waiting", blocks in
/// its acquire, notes the time it returned, releases, and says "acquired <time>".
pub(crate) fn serve_handoffs(mut waiter: Box<dyn Contender>) {
    say("ready");
    for line in std::io::stdin().lock().lines() {
        match line.expect("read the parent's order").as_str() {
            "go" => {
                say("waiting");
                waiter.take();
                let t1 = mono_ns();
                waiter.give_back();
                say(&format!("acquired {t1}"));
            }
            "quit" => return,
            other => panic!("unknown order {other:?}"),
        }
    }
}

/// Step 2's section, in round trips `rtt`.
pub(crate) fn handoff_section(out: &mut String, rtt: f64, handoffs: &Handoffs) {
    let _ = writeln!(
        out,
        "### 2. Contended hand-off to a waiter parked in another process ({HANDOFF_BLOCKS} blocks per lock, \
         alternating)\n"
    );
    handoff_head(out, "lock");
    for (what, h) in [("plain", &handoffs.plain), ("fair", &handoffs.fair)] {
        handoff_row(out, what, h, rtt, Some("target"));
    }
    let _ = writeln!(out);
}
