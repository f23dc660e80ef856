//! The watchdog: one thread per client that renews every watchdog lease a third of the way
//! through it, in batches, over the timing wheel of [`crate::base::wheel`].
//!
//! The wheel lives under a mutex shared with the threads that acquire and release, so that
//! scheduling and cancelling are O(1) calls made by those threads themselves; the renewal
//! thread is woken only when a new entry is due before the time it sleeps until. With no
//! lease scheduled it waits on its condition variable with no timeout.
//!
//! Renewals are coalesced: when the first lease is due, every lease due within the next
//! quarter of the renewal period is renewed with it, a little early. Leases taken at
//! scattered times are thus renewed in a few large batches rather than many small ones.
//!
//! Every batch carries its confirmation behind it in the same write (`confirm`): a
//! renewal extends a lease only once the master's replicas (and, under `SyncMode::Auto` or
//! `WaitAof`, its disk) have it, as a grant is given only then; one that is not confirmed
//! is answered as a failed round trip. The ways a batch is sent are in `send`.
//!
//! Lock order: a lease's mutex, then the wheel's. I/O happens with neither held.
//!
//! | thread state | event                                   | next |
//! |--------------|-----------------------------------------|------|
//! | sleeping until `t` (or forever) | a lease or the announcement due before `t` is scheduled | awake |
//! | sleeping until `t` | `t` passes                           | awake |
//! | awake        | leases due: take them out of the wheel  | renewing |
//! | awake        | only the announcement due               | announcing |
//! | awake        | nothing due                             | sleeping until the next deadline (or forever) |
//! | renewing     | each batch answered or failed, leases rescheduled or marked lost | announcing if it is due, else awake |
//! | announcing   | written or failed (next in a third of a lease), or the client idle (none) | awake |
//! | any          | shutdown                                | ended |
//!
//! The same thread keeps the client's announcement of itself (see `crate::observe::identity`)
//! alive: written when the client first holds or waits for something
//! ([`Renewer::announce_soon`]), again a third of a watchdog lease later while it still
//! does, and left to expire (within one lease) once it holds and waits for nothing. An
//! acquire only reads a flag for it: the write is this thread's, after the leases due.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::keys;
use crate::base::span::Span;
use crate::base::wheel::{Wheel, WheelKey};
use crate::engine::lease::{Answer, Lease, Renews, Schedule};
use crate::engine::replicas::ReplicaSyncs;
use crate::kind::{self, RenewOutcome};
use crate::observe::histogram::DurationHistogram;
use crate::observe::identity::ClientIdentity;
use crate::observe::{telemetry, trace};
use crate::support::background::Background;
use crate::support::config::Config;
use crate::transport::{Pool, RunId, Topology};

mod confirm;
mod line;
mod plan;
mod send;

use line::{Answered, Batch, Line, Round};
use plan::{Chunk, Plan};

/// How many batches of a pass that one node serves may be written and unanswered at once:
/// two, so that Redis has the next batch while the client settles the last (and a pass
/// over a distant server costs half a round trip per batch), and a release waits for at
/// most one batch ahead of its lease's besides its own. A pass over several nodes keeps
/// one round in flight (a batch per node), as each release then waits for the batches of
/// the other nodes' in its round already: two rounds there renewed no faster on the
/// benchmark (its masters share one vCPU) and made 374–426 of 100,000 releases wait over
/// 10 ms (at most 69 ms) behind a pass, against none or one.
const BATCHES_IN_FLIGHT_ON_ONE_NODE: usize = 2;

pub(crate) struct Renewer {
    shared: Arc<Shared>,
    thread: Background,
}

struct Shared {
    /// Tick 0 of the wheel; a tick is a millisecond.
    start: Instant,
    state: Mutex<State>,
    wake: Condvar,
    /// Whether an announcement is scheduled or being written: read by every acquire,
    /// which schedules one when it is not.
    announcing: AtomicBool,
}

struct State {
    wheel: Wheel<Arc<Lease>>,
    /// Tick the thread sleeps until: `Some(u64::MAX)` when it sleeps with nothing
    /// scheduled, `None` while it is awake (it looks at the wheel before sleeping again).
    sleeping_until: Option<u64>,
    /// Tick of the next announcement, when one is scheduled.
    announce_at: Option<u64>,
    shutdown: bool,
    counters: RenewalCounters,
}

/// What the renewal thread has done so far, for [`crate::ClientStats`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RenewalCounters {
    /// Wake-ups that found leases due.
    pub(crate) passes: u64,
    /// Renew script calls (one round trip each).
    pub(crate) round_trips: u64,
    /// Leases Redis confirmed renewed.
    pub(crate) renewed: u64,
    /// Time spent in renew round trips.
    pub(crate) busy: Duration,
    /// Each pass's time, from its first batch sent to its last answer.
    pub(crate) pass_time: DurationHistogram,
}

/// What the thread needs besides the wheel.
struct Worker {
    shared: Arc<Shared>,
    topology: Arc<Topology>,
    /// Each master's replica view, shared with the acquires: a renewal counts only once
    /// it is confirmed as a grant is.
    syncs: Arc<ReplicaSyncs>,
    config: Config,
    lease_millis: u64,
    /// The watchdog's lease and its drift allowance.
    span: Span,
    /// The client's id, for the traces.
    client: String,
    /// The client's announcement: its key and text.
    identity_key: String,
    identity_text: String,
}

/// What a wake-up of the thread found to do.
struct Pass {
    /// The client's announcement is due.
    announce: bool,
}

impl Renewer {
    pub(crate) fn start(
        topology: Arc<Topology>,
        syncs: Arc<ReplicaSyncs>,
        config: Config,
        lease_millis: u64,
        identity: ClientIdentity,
    ) -> Result<Renewer> {
        let shared = Arc::new(Shared {
            start: Instant::now(),
            state: Mutex::new(State {
                wheel: Wheel::new(),
                sleeping_until: None,
                announce_at: None,
                shutdown: false,
                counters: RenewalCounters::default(),
            }),
            wake: Condvar::new(),
            announcing: AtomicBool::new(false),
        });
        let span = config.watchdog_span();
        let identity_key = keys::identity_key(&identity.id);
        let identity_text = identity.to_text();
        let worker = Worker {
            shared: Arc::clone(&shared),
            topology,
            syncs,
            config,
            lease_millis,
            span,
            client: identity.id.clone(),
            identity_key,
            identity_text,
        };
        let thread = Background::spawn("redlease-renewal", move || worker.run())?;
        Ok(Renewer { shared, thread })
    }

    /// Has the client's announcement written soon unless one is scheduled already. Called
    /// as an acquisition begins, after it is counted active: the thread clears
    /// `announcing` before it reads whether the client is active, so one of the two sees
    /// the other (both atomics are sequentially consistent).
    pub(crate) fn announce_soon(&self) {
        if self.shared.announcing.load(Ordering::SeqCst) || self.shared.announcing.swap(true, Ordering::SeqCst) {
            return;
        }
        let now = self.shared.tick_of(Instant::now());
        self.shared.announce_at(now);
    }

    /// Leases scheduled for renewal, and the thread's counters.
    pub(crate) fn stats(&self) -> (usize, RenewalCounters) {
        let state = self.shared.state.lock();
        (state.wheel.len(), state.counters)
    }

    /// Stops the thread and waits for it; leases still held expire after their lease.
    pub(crate) fn shutdown(&self) {
        let mut state = self.shared.state.lock();
        state.shutdown = true;
        let mut cancelled = Vec::new();
        state.wheel.poll_expired(u64::MAX, &mut cancelled);
        drop(state);
        self.shared.wake.notify_all();
        drop(cancelled);
        self.thread.join();
    }
}

impl Shared {
    fn tick_of(&self, at: Instant) -> u64 {
        // Round up: a renewal is never sent before it is due.
        keys::ceil_millis_u64(at.saturating_duration_since(self.start))
    }

    fn instant_of(&self, tick: u64) -> Option<Instant> {
        self.start.checked_add(Duration::from_millis(tick))
    }

    /// Schedules the next announcement at `tick`, waking the thread if it sleeps past it.
    fn announce_at(&self, tick: u64) {
        let mut state = self.state.lock();
        if state.shutdown {
            return;
        }
        state.announce_at = Some(tick);
        self.wake_before(state, tick);
    }

    /// Wakes the thread when it sleeps past `tick`, which was just scheduled.
    fn wake_before(&self, mut state: MutexGuard<'_, State>, tick: u64) {
        if state.sleeping_until.is_some_and(|until| tick < until) {
            state.sleeping_until = None;
            drop(state);
            self.wake.notify_one();
        }
    }
}

/// The wheel, as the leases schedule their renewals on it (under their mutex).
impl Schedule for Shared {
    fn put(&self, lease: &Arc<Lease>, old: Option<WheelKey>, at: Instant) -> Option<WheelKey> {
        let tick = self.tick_of(at);
        let mut state = self.state.lock();
        if state.shutdown {
            return old;
        }
        if let Some(old) = old {
            state.wheel.cancel(old);
        }
        let key = state.wheel.insert(tick, Arc::clone(lease));
        self.wake_before(state, tick);
        Some(key)
    }

    fn cancel(&self, key: WheelKey) {
        self.state.lock().wheel.cancel(key);
    }
}

/// The threads that acquire and release schedule through the renewer.
impl Schedule for Renewer {
    fn put(&self, lease: &Arc<Lease>, old: Option<WheelKey>, at: Instant) -> Option<WheelKey> {
        self.shared.put(lease, old, at)
    }

    fn cancel(&self, key: WheelKey) {
        self.shared.cancel(key);
    }
}

impl Worker {
    fn run(self) {
        let mut due = Vec::new();
        loop {
            let Some(pass) = self.take_due(&mut due) else {
                return;
            };
            if !due.is_empty() {
                let leases: Vec<Arc<Lease>> = due.drain(..).map(|(_, lease)| lease).collect();
                self.renew(leases);
            }
            if pass.announce {
                self.announce();
            }
        }
    }

    /// Writes the client's announcement while the client holds or waits for something,
    /// and schedules the next, a third of a lease later (a failed write too: the key
    /// outlives one failed refresh); when it does neither, schedules none (the key expires
    /// within a lease).
    fn announce(&self) {
        let activity = self.config.events.activity();
        if !activity.is_active() {
            self.shared.announcing.store(false, Ordering::SeqCst);
            // An acquisition that began meanwhile saw `announcing` set and left it to us.
            if !activity.is_active() || self.shared.announcing.swap(true, Ordering::SeqCst) {
                return;
            }
        }
        // Bounded by a 24th of the lease for each of its steps (connect, a pooled
        // connection, the reply): a renewal that falls due meanwhile (in a cluster, on
        // another master) is delayed by an eighth of a lease at most, and still goes out
        // before the lease turns at risk at half of it.
        let limit = Some(self.config.command_timeout.min(self.span.announcement_step()));
        let written = self.topology.pool_for(&self.identity_key).run_within("announcing the client", limit, |conn| {
            kind::announce(conn, &self.identity_key, &self.identity_text, self.lease_millis)
        });
        if let Err(error) = written {
            // Nothing depends on it but what an inspection shows: no event for users.
            trace::event!(DEBUG, "announcement not written"; error = error);
        }
        self.shared.announce_at(self.shared.tick_of(self.span.renew_at(Instant::now())));
    }

    /// Sleeps until some lease or the announcement is due and moves the due leases into
    /// `due`. `None` at shutdown.
    fn take_due(&self, due: &mut Vec<(u64, Arc<Lease>)>) -> Option<Pass> {
        let shared = &self.shared;
        let mut state = shared.state.lock();
        loop {
            if state.shutdown {
                return None;
            }
            let now = shared.tick_of(Instant::now());
            if state.wheel.next_deadline().is_some_and(|tick| tick <= now) {
                state.wheel.poll_expired(now.saturating_add(self.coalesce_ticks()), due);
            }
            let announce = state.announce_at.is_some_and(|tick| tick <= now);
            if announce {
                state.announce_at = None;
            }
            if !due.is_empty() || announce {
                state.sleeping_until = None;
                if !due.is_empty() {
                    state.counters.passes += 1;
                }
                return Some(Pass { announce });
            }
            let next = match (state.wheel.next_deadline(), state.announce_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            match next {
                None => {
                    state.sleeping_until = Some(u64::MAX);
                    shared.wake.wait(&mut state);
                }
                Some(tick) => {
                    state.sleeping_until = Some(tick);
                    match shared.instant_of(tick) {
                        Some(at) => {
                            shared.wake.wait_until(&mut state, at);
                        }
                        None => shared.wake.wait(&mut state),
                    }
                }
            }
            state.sleeping_until = None;
        }
    }

    /// How long one renewal round trip may take: the command timeout, and at most a sixth
    /// of the lease, so that a renewal sent a third of the way through it has failed by
    /// half of it, when the lease turns at risk, and the failure is reported then rather
    /// than a command timeout later (a cut-off connection answers nothing).
    fn round_trip_limit(&self) -> Option<Duration> {
        Some(self.config.command_timeout.min(self.span.round_trip_limit()))
    }

    /// How far ahead of their time leases are renewed with a batch, in ticks.
    fn coalesce_ticks(&self) -> u64 {
        u64::try_from(self.span.coalescing().as_millis()).unwrap_or(u64::MAX)
    }

    /// Renews the leases that are still held with a watchdog. One batch goes to one node
    /// (in a cluster, the master of its leases' slots). A pass of more than one batch is
    /// pipelined on a connection per node lent while batches are in flight on it, the
    /// replies read in order. On one node whose pool has more than one connection, the next
    /// batch is written while the one before it is unanswered
    /// ([`BATCHES_IN_FLIGHT_ON_ONE_NODE`]): the client builds and settles batches while
    /// Redis runs the ones before, and a pass of many batches costs about half a round trip
    /// per batch. Over several nodes a round (the next batch of every node) is written
    /// before any of its replies is read: a round over n masters costs about one round
    /// trip, not n; the connections go back to their pools between rounds.
    fn renew(&self, leases: Vec<Arc<Lease>>) {
        for lease in &leases {
            lease.renewal_fired();
        }
        let mut by_node: Vec<(Arc<Pool>, Vec<Arc<Lease>>)> = Vec::new();
        for lease in leases {
            let pool = self.topology.pool_for(lease.name());
            match by_node.iter_mut().find(|(node, _)| Arc::ptr_eq(node, &pool)) {
                Some((_, leases)) => leases.push(lease),
                None => by_node.push((pool, vec![lease])),
            }
        }
        let size = self.config.renew_batch_size.max(1);
        let rounds = by_node.iter().map(|(_, leases)| leases.len().div_ceil(size)).max().unwrap_or(0);
        // Two batches in flight on one node keep one of its pooled connections through the
        // pass: only where the pool has another for the client's other calls.
        let window = if by_node.len() == 1 && self.config.pool_size > 1 { BATCHES_IN_FLIGHT_ON_ONE_NODE } else { 1 };
        // One node's batches one at a time go as any call does: the pool sends a batch again
        // on a connection it finds dead after a quiet spell.
        let pipelined = by_node.len() > 1 || (rounds > 1 && window > 1);
        let mut lines: Vec<Line<'_>> =
            by_node.iter().map(|(pool, _)| Line { pool, lent: None, epoch: 0, unread: 0 }).collect();
        let started = Instant::now();
        let (mut round_trips, mut renewed) = (0, 0);
        let mut in_flight: VecDeque<Round> = VecDeque::with_capacity(window);
        for round in 0..rounds {
            // At shutdown the rest is left alone: each round could cost a command timeout.
            if self.shared.state.lock().shutdown {
                break;
            }
            let batches = by_node
                .iter()
                .enumerate()
                .filter_map(|(node, (_, leases))| leases.chunks(size).nth(round).map(|batch| (node, batch)));
            in_flight.push_back(self.send_round(batches, &mut lines, pipelined));
            while in_flight.len() >= window {
                let Some(round) = in_flight.pop_front() else { break };
                let (made, done) = self.settle_round(round, &mut lines);
                round_trips += made;
                renewed += done;
            }
            // Nothing in flight: the connections go back to their pools between rounds, so
            // that the client's other calls never wait for a whole pass.
            if in_flight.is_empty() {
                lines.iter_mut().for_each(Line::give_back);
            }
        }
        for round in in_flight {
            let (made, done) = self.settle_round(round, &mut lines);
            round_trips += made;
            renewed += done;
        }
        lines.iter_mut().for_each(Line::give_back);
        // The time of the whole pass, once: its round trips overlap.
        if round_trips > 0 {
            self.count(started.elapsed(), round_trips, renewed);
        }
    }

    /// Marks the leases of one batch per node in flight, just before their batch goes out
    /// (a release waits for the one round trip that carries its lease, and a lease released
    /// meanwhile is left out), and writes each batch on its node's line when `pipelined`.
    /// Each lease goes with how the script may set its expiry: a lease that also has
    /// fixed-lease holds must never be shortened to the watchdog's.
    fn send_round<'a>(
        &self,
        batches: impl Iterator<Item = (usize, &'a [Arc<Lease>])>,
        lines: &mut [Line<'_>],
        pipelined: bool,
    ) -> Round {
        let sent = Instant::now();
        let batches = batches
            .map(|(node, candidates)| {
                let line = &mut lines[node];
                // One span per batch, entered for each step of it: the leases lost by the
                // clock before they could go, and what the replies say, are reported inside it.
                let span = trace::span!(TRACE, "renew", pool = line.pool.id(), client = &*self.client; leases, renewed, round_trips);
                let chunk: Chunk = trace::within!(span, {
                    candidates
                        .iter()
                        .filter_map(|lease| {
                            lease.renewal_sent(&self.config.events).map(|fixed_too| (Arc::clone(lease), fixed_too))
                        })
                        .collect()
                });
                trace::record!(span, leases = chunk.len());
                let plan = Plan::of(line.pool.pubsub(), self.lease_millis, &chunk);
                let written = if pipelined { self.write(line, &plan) } else { None };
                Batch { node, chunk, plan, span, written }
            })
            .collect();
        Round { sent, batches }
    }

    /// Reads the replies of a round and of their confirmations (sending as any call the
    /// batches that were not written) and settles its leases. Returns the round trips made
    /// and the leases renewed.
    fn settle_round(&self, round: Round, lines: &mut [Line<'_>]) -> (u64, usize) {
        let (mut round_trips, mut renewed) = (0, 0);
        for batch in round.batches {
            if batch.chunk.is_empty() {
                continue;
            }
            let line = &mut lines[batch.node];
            let answered = match batch.written {
                Some((epoch, behind)) => {
                    let confirming = self.confirming(line.pool);
                    line.read(epoch, &batch.plan, behind, &confirming)
                }
                None => self.on_batch(line.pool, &batch.plan),
            };
            let (made, done) =
                trace::within!(batch.span, self.settle(&batch.span, &batch.chunk, &batch.plan, answered, round.sent));
            round_trips += made;
            renewed += done;
        }
        (round_trips, renewed)
    }

    /// What the replies of one batch and its confirmation say: each lease's answer
    /// recorded (a renewal that does not count is a failed one), the leases found lost or
    /// at risk reported (inside the batch's `span`). Returns the round trips made and the
    /// leases renewed.
    fn settle(
        &self,
        span: &trace::Span,
        chunk: &[(Arc<Lease>, bool)],
        plan: &Plan,
        (replies, confirmed): Answered,
        sent: Instant,
    ) -> (u64, usize) {
        let counts = self.counts(confirmed);
        let mut outcomes = vec![(Answer::Failed, None); chunk.len()];
        let mut round_trips = 0;
        for (part, replies) in plan.parts.iter().zip(replies) {
            round_trips += 1 + self.take_replies(chunk, &part.indexes, replies, counts, &mut outcomes, |j| {
                part.alone(j, chunk, self.lease_millis, &self.topology, |pool, what, call| {
                    self.renew_alone(pool, what, call)
                })
            });
        }
        let renewed = outcomes.iter().filter(|(o, _)| *o == Answer::Renewed).count();
        trace::record!(span, renewed = renewed, round_trips = round_trips);
        for ((lease, _), (answer, run)) in chunk.iter().zip(outcomes) {
            if answer == Answer::Renewed {
                // Redis showed the hold on this run of the server.
                lease.shown_on(run);
            }
            lease.renewal_answered(answer, sent, &*self.shared, &self.config.events);
        }
        (round_trips, renewed)
    }

    /// Records the replies of one renew script for the leases `indexes` of `chunk` into
    /// `outcomes`; a renewal counts only when the batch's confirmation `counts`. A lease
    /// its node no longer serves is renewed again by `alone` (its position in `indexes`),
    /// with its key declared, so that `MOVED` and `ASK` take it where its slot is now, and
    /// confirmed there. Returns the round trips `alone` made.
    fn take_replies(
        &self,
        chunk: &[(Arc<Lease>, bool)],
        indexes: &[usize],
        replies: Result<(Vec<RenewOutcome>, Option<RunId>)>,
        counts: bool,
        outcomes: &mut [(Answer, Option<RunId>)],
        alone: impl Fn(usize) -> Result<(Vec<RenewOutcome>, Option<RunId>)>,
    ) -> u64 {
        let (replies, run) = match replies {
            Ok(replies) => replies,
            Err(err) => {
                self.config.events.renewal_failed(&err);
                return 0;
            }
        };
        let mut round_trips = 0;
        for (j, (&i, reply)) in indexes.iter().zip(replies).enumerate() {
            let (reply, run) = match reply {
                RenewOutcome::Elsewhere => {
                    round_trips += 1;
                    match alone(j) {
                        Ok((mut one, run)) => (one.pop().unwrap_or(RenewOutcome::Elsewhere), run),
                        Err(err) => {
                            self.config.events.renewal_failed(&err);
                            continue;
                        }
                    }
                }
                // Not confirmed: tried again as after a failed round trip.
                RenewOutcome::Renewed if !counts => continue,
                reply => (reply, run),
            };
            outcomes[i] = (self.outcome(&chunk[i].0, reply), run);
        }
        round_trips
    }

    /// One lease's answer: renewed, gone, or refused by Redis (reported, and retried like
    /// a failed round trip).
    fn outcome(&self, lease: &Lease, outcome: RenewOutcome) -> Answer {
        match outcome {
            RenewOutcome::Renewed => Answer::Renewed,
            RenewOutcome::Gone => Answer::Gone,
            // Still not where its slot is, alone: tried again soon, with a fresh map.
            RenewOutcome::Elsewhere => Answer::Failed,
            RenewOutcome::Refused(text) => {
                let kind = if text.starts_with("NOPERM") { ErrorKind::PermissionDenied } else { ErrorKind::Redis };
                let err = Error::new(kind, format!("Redis refused to renew the lease: {text}"));
                let err = match lease.renews() {
                    Renews::Permits(_) => err.on_semaphore(lease.name()),
                    Renews::Hash { .. } | Renews::Group { .. } => err.on_lock(lease.name()),
                };
                self.config.events.renewal_failed(&err);
                Answer::Failed
            }
        }
    }

    fn count(&self, took: Duration, round_trips: u64, renewed: usize) {
        let counters = &mut self.shared.state.lock().counters;
        counters.round_trips += round_trips;
        counters.renewed += renewed as u64;
        counters.busy += took;
        counters.pass_time.add(took);
        telemetry::renewal_pass(took);
    }
}
