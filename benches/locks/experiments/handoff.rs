//! Step 2, contended hand-off to a waiter parked in another process (pub/sub wake-up),
//! plain and fair lock in alternating blocks.

use std::io::BufRead;
use std::thread;
use std::time::{Duration, Instant};

use redlease::{AnyLock, Client, LockGuard};
use redlease_testkit::server::RedisServer;

use crate::child::{KIND_ENV, LOCK_ENV, URL_ENV, Worker, child_env, say};
use crate::clock::mono_ns;
use crate::experiments::LockKind;
use crate::plan::Plan;
use crate::stats::Summary;

/// Rounds before the measured ones (they open the child's pub/sub connection).
const HANDOFF_WARMUP: usize = 20;
/// How long a subscribed waiter is given to retry and park before the release.
const HANDOFF_SETTLE: Duration = Duration::from_millis(2);
/// The plain and the fair hand-off alternate in this many blocks each.
pub(crate) const HANDOFF_BLOCKS: usize = 8;

pub(crate) struct Handoffs {
    pub(crate) plain: Summary,
    pub(crate) fair: Summary,
}

/// One holder here and one waiter in a child process, handing a lock back and forth.
struct HandoffRig {
    kind: LockKind,
    name: String,
    lock: AnyLock,
    child: Worker,
    raw: redis::Connection,
    guard: Option<LockGuard>,
}

impl HandoffRig {
    fn new(server: &RedisServer, client: &Client, kind: LockKind) -> HandoffRig {
        let name = format!("bench:handoff:{}", kind.as_str());
        let lock = kind.handle(client, name.clone());
        let child = Worker::spawn(
            "handoff",
            &[(URL_ENV, server.url()), (LOCK_ENV, name.clone()), (KIND_ENV, kind.as_str().to_string())],
        );
        child.expect("ready");
        let guard = Some(lock.try_lock().expect("try_lock").expect("the hand-off lock starts free"));
        HandoffRig { kind, name, lock, child, raw: server.conn(), guard }
    }

    /// One hand-off: the child waits, this side releases; the time from just before the
    /// release to the child's return from `lock()`, in nanoseconds.
    fn round(&mut self) -> u64 {
        self.child.send("go");
        self.child.expect("waiting");
        self.wait_until_parked();
        thread::sleep(HANDOFF_SETTLE);
        let guard = self.guard.take().expect("held between rounds");
        let t0 = mono_ns();
        guard.unlock().expect("unlock for the hand-off");
        let t1: u64 = self.child.expect("acquired ").parse().expect("the child's acquisition time");
        self.guard = Some(self.lock.try_lock().expect("try_lock").expect("the child has released"));
        t1.checked_sub(t0).expect("the child acquired after the release")
    }

    /// Until the child waits where a release will wake it: subscribed to the lock's channel
    /// (plain), or queued and subscribed to its own channel (fair).
    fn wait_until_parked(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let conn = &mut self.raw;
        let name = &self.name;
        let parked = |conn: &mut redis::Connection| match self.kind {
            LockKind::Plain => {
                let channel = format!("redisson_lock__channel:{{{name}}}");
                let (_, count): (String, u64) =
                    redis::cmd("PUBSUB").arg("NUMSUB").arg(channel).query(conn).expect("PUBSUB NUMSUB");
                count >= 1
            }
            LockKind::Fair => {
                let queued: u64 =
                    redis::cmd("LLEN").arg(format!("redisson_lock_queue:{{{name}}}")).query(conn).expect("LLEN");
                let own: Vec<String> = redis::cmd("PUBSUB")
                    .arg("CHANNELS")
                    .arg(format!("redisson_lock__channel:{{{name}}}:*"))
                    .query(conn)
                    .expect("PUBSUB CHANNELS");
                queued >= 1 && !own.is_empty()
            }
            LockKind::Read => unreachable!("no read hand-off"),
        };
        while !parked(conn) {
            assert!(Instant::now() < deadline, "the waiting child did not park on {name} within 10 s");
            thread::sleep(Duration::from_micros(100));
        }
    }

    fn finish(mut self) {
        self.guard.take().expect("held at the end").unlock().expect("final unlock");
        self.child.send("quit");
        self.child.finish();
    }
}

/// The plain and the fair hand-off, in alternating blocks.
pub(crate) fn measure_handoffs(server: &RedisServer, plan: &Plan) -> Handoffs {
    let client = Client::open(&server.url()).expect("client for the hand-off run");
    let mut rigs =
        [HandoffRig::new(server, &client, LockKind::Plain), HandoffRig::new(server, &client, LockKind::Fair)];
    for rig in &mut rigs {
        for _ in 0..HANDOFF_WARMUP {
            rig.round();
        }
    }
    let mut samples = [Vec::with_capacity(plan.handoffs), Vec::with_capacity(plan.handoffs)];
    for _ in 0..HANDOFF_BLOCKS {
        for (rig, samples) in rigs.iter_mut().zip(&mut samples) {
            for _ in 0..plan.handoffs / HANDOFF_BLOCKS {
                samples.push(rig.round());
            }
        }
    }
    for rig in rigs {
        rig.finish();
    }
    let [plain, fair] = samples;
    Handoffs { plain: Summary::of_nanos(plain), fair: Summary::of_nanos(fair) }
}

/// Child: on each "go", blocks in `lock()`, notes the time it returned, releases, reports.
pub(crate) fn handoff_child() {
    let client = Client::open(&child_env(URL_ENV)).expect("child client");
    let lock = LockKind::parse(&child_env(KIND_ENV)).handle(&client, child_env(LOCK_ENV));
    say("ready");
    for line in std::io::stdin().lock().lines() {
        match line.expect("read the parent's order").as_str() {
            "go" => {
                say("waiting");
                let guard = lock.lock().expect("child lock()");
                let t1 = mono_ns();
                guard.unlock().expect("child unlock");
                say(&format!("acquired {t1}"));
            }
            "quit" => return,
            other => panic!("unknown order {other:?}"),
        }
    }
}
