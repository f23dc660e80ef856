//! The lease's tests: its state machine held row by row to the tables of the module's
//! documentation, and the shell's waits.

use super::machine::*;
use super::*;
use crate::base::keys;
use crate::base::wheel::Wheel;

/// The watchdog's lease in these tests: renewed at 1 s, at risk from 1.5 s, valid until
/// 2.97 s after a send.
const SPAN: Span = Span { lease: Duration::from_secs(3), drift: Duration::from_millis(30) };

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// What a transition said to report, by kind.
fn said(effects: Effects) -> &'static str {
    match effects.report {
        None => "nothing",
        Some(Report::Lost) => "lost",
        Some(Report::AtRisk(_)) => "at risk",
        Some(Report::Recovered) => "recovered",
    }
}

/// The states a row of the table starts from, built at `t0`: the lease and the instant
/// it is in that state at.
#[derive(Debug, Clone, Copy)]
enum Given {
    Held,
    AtRisk,
    LostByTheClock,
    Lost,
    Released,
}

/// Two watchdog holds acquired at `t0`, brought into `given`.
fn given(given: Given, t0: Instant) -> (Core, Instant) {
    let mut core = Core::new(SPAN);
    core.hold_added(Term::Watchdog, t0);
    core.hold_added(Term::Watchdog, t0);
    let now = t0 + ms(1100);
    let (expected, now) = match given {
        Given::Held => (LeaseState::Held, now),
        Given::AtRisk => {
            assert_eq!(core.renewal_sent(), Some(false));
            assert_eq!(said(core.renewal_answered(Answer::Failed, t0 + ms(1000), now)), "at risk");
            (LeaseState::AtRisk, now)
        }
        Given::LostByTheClock => (LeaseState::Lost, t0 + ms(2970)),
        Given::Lost => {
            assert_eq!(said(core.lost()), "lost");
            (LeaseState::Lost, now)
        }
        Given::Released => {
            for _ in 0..2 {
                let mut release = core.hold_released(Term::Watchdog, now);
                core.release_ended(&mut release);
            }
            (LeaseState::Released, now)
        }
    };
    assert_eq!(core.state(now), expected, "{given:?}");
    (core, now)
}

/// One row of the state table: its state cell, a piece of its event cell, the states
/// it starts from, the event (at the instant given; the instant to read the next state
/// at, and what the transition said), and the next state (`None`: the same) and report.
struct Row {
    state: &'static str,
    event: &'static str,
    from: &'static [Given],
    act: fn(&mut Core, Instant) -> (Instant, Effects),
    next: Option<LeaseState>,
    says: &'static str,
}

fn release(core: &mut Core, term: Term, now: Instant) -> Effects {
    let mut release = core.hold_released(term, now);
    core.release_ended(&mut release)
}

/// A guard released from a lease that is not live: nothing is to be sent.
fn released_unsent(core: &mut Core, now: Instant) -> (Instant, Effects) {
    let mut release = core.hold_released(Term::Watchdog, now);
    assert!(!release.was_live, "nothing is sent");
    (now, core.release_ended(&mut release))
}

const ROWS: &[Row] = &[
    Row {
        state: "`Held`",
        event: "(`hold_added`)",
        from: &[Given::Held],
        act: |core, now| {
            let fixed = core.hold_added(Term::Until(Some(now + ms(100))), now);
            assert_eq!(fixed, Effects::default());
            (now, core.hold_added(Term::Watchdog, now))
        },
        next: None,
        says: "nothing",
    },
    Row {
        state: "`AtRisk`",
        event: "a watchdog hold is added (`hold_added`)",
        from: &[Given::AtRisk],
        act: |core, now| (now, core.hold_added(Term::Watchdog, now)),
        next: Some(LeaseState::Held),
        says: "recovered",
    },
    Row {
        state: "`AtRisk`",
        event: "a fixed hold that outlasts the watchdog part is added (`hold_added`)",
        from: &[Given::AtRisk],
        act: |core, now| (now, core.hold_added(Term::Until(Some(now + ms(60_000))), now)),
        next: Some(LeaseState::Held),
        says: "nothing",
    },
    Row {
        state: "`Held`",
        event: "(`renewal_answered`: renewed)",
        from: &[Given::Held],
        act: |core, now| {
            core.renewal_sent();
            let effects = core.renewal_answered(Answer::Renewed, now, now);
            assert_eq!(core.expires_at(), Some(now + ms(2970)), "sent + lease - drift");
            assert_eq!(core.next_change(now), Some(now + ms(1500)), "at risk from half the lease");
            (now + ms(1499), effects)
        },
        next: Some(LeaseState::Held),
        says: "nothing",
    },
    Row {
        state: "`Held`",
        event: "(`renewal_answered`: failed)",
        from: &[Given::Held],
        act: |core, now| {
            core.renewal_sent();
            let first = core.renewal_answered(Answer::Failed, now, now);
            assert_eq!(first.report, Some(Report::AtRisk(core.expires_at().unwrap())), "with the deadline");
            core.renewal_sent();
            assert_eq!(said(core.renewal_answered(Answer::Failed, now, now)), "nothing", "once a spell");
            (now, first)
        },
        next: Some(LeaseState::AtRisk),
        says: "at risk",
    },
    Row {
        state: "`Held`",
        event: "half the watchdog lease passes",
        from: &[Given::Held],
        act: |core, now| {
            let half = core.next_change(now).unwrap();
            assert_eq!(core.state(half - ms(1)), LeaseState::Held);
            // The renewal thread's look before its next batch (`expired`): at risk is not lost.
            (half, core.expired(half))
        },
        next: Some(LeaseState::AtRisk),
        says: "nothing",
    },
    Row {
        state: "`AtRisk`",
        event: "(`renewal_answered`: renewed)",
        from: &[Given::AtRisk],
        act: |core, now| {
            core.renewal_sent();
            (now, core.renewal_answered(Answer::Renewed, now, now))
        },
        next: Some(LeaseState::Held),
        says: "recovered",
    },
    Row {
        state: "`Held`, `AtRisk`",
        event: "(`renewal_answered`: gone)",
        from: &[Given::Held, Given::AtRisk],
        act: |core, now| {
            core.renewal_sent();
            (now, core.renewal_answered(Answer::Gone, now, now))
        },
        next: Some(LeaseState::Lost),
        says: "lost",
    },
    Row {
        state: "`Held`, `AtRisk`",
        event: "(`lost`)",
        from: &[Given::Held, Given::AtRisk],
        act: |core, now| {
            let first = core.lost();
            assert_eq!(core.lost(), Effects::default(), "once");
            (now, first)
        },
        next: Some(LeaseState::Lost),
        says: "lost",
    },
    Row {
        state: "`Held`, `AtRisk`",
        event: "the local deadline passes",
        from: &[Given::Held, Given::AtRisk],
        act: |core, now| {
            let end = core.expires_at().unwrap();
            assert!(now < end);
            assert_eq!(said(core.expired(end - ms(1))), "nothing", "live until its deadline");
            // The renewal thread's look before its next batch (`expired`) once it passed;
            // the look after that says nothing.
            let first = core.expired(end);
            assert_eq!(said(core.expired(end + ms(1))), "nothing", "once");
            (end, first)
        },
        next: Some(LeaseState::Lost),
        says: "lost",
    },
    Row {
        state: "`Lost` by the clock alone",
        event: "(`renewal_answered`: failed)",
        from: &[Given::LostByTheClock],
        act: |core, now| {
            core.renewal_sent();
            let effects = core.renewal_answered(Answer::Failed, now, now);
            assert_eq!(effects.schedule, None, "nothing more to renew");
            (now, effects)
        },
        next: Some(LeaseState::Lost),
        says: "lost",
    },
    Row {
        state: "`Lost` by the clock alone",
        event: "(`renewal_answered`: renewed)",
        from: &[Given::LostByTheClock],
        act: |core, now| {
            // Sent while it was live, answered past the deadline.
            assert_eq!(core.renewal_sent(), Some(false));
            (now, core.renewal_answered(Answer::Renewed, now - ms(100), now))
        },
        next: Some(LeaseState::Lost),
        says: "lost",
    },
    Row {
        state: "`Lost` by the clock alone",
        event: "(`renewal_sent`)",
        from: &[Given::LostByTheClock],
        act: |core, now| {
            let effects = core.expired(now);
            assert_eq!(core.renewal_sent(), None, "not sent");
            (now, effects)
        },
        next: Some(LeaseState::Lost),
        says: "lost",
    },
    Row {
        state: "`Lost` by the clock alone",
        event: "(`hold_released`)",
        from: &[Given::LostByTheClock],
        act: released_unsent,
        next: Some(LeaseState::Lost),
        says: "lost",
    },
    Row {
        state: "`Held`, `AtRisk`",
        event: "others remaining (`hold_released`)",
        from: &[Given::Held, Given::AtRisk],
        act: |core, now| {
            let mut release = core.hold_released(Term::Watchdog, now);
            assert!(release.was_live && !release.last && !release.stops_renewal);
            (now, core.release_ended(&mut release))
        },
        next: None,
        says: "nothing",
    },
    Row {
        state: "`Held`, `AtRisk`",
        event: "the last guard is released (`hold_released`)",
        from: &[Given::Held, Given::AtRisk],
        act: |core, now| {
            release(core, Term::Watchdog, now);
            let mut release = core.hold_released(Term::Watchdog, now);
            assert!(release.was_live && release.last && release.stops_renewal);
            (now, core.release_ended(&mut release))
        },
        next: Some(LeaseState::Released),
        says: "nothing",
    },
    Row {
        state: "`Released`",
        event: "(`lost`)",
        from: &[Given::Released],
        act: |core, now| {
            let first = core.lost();
            assert_eq!(core.lost(), Effects::default(), "once");
            (now, first)
        },
        next: Some(LeaseState::Lost),
        says: "lost",
    },
    Row {
        state: "`Lost`",
        event: "(`hold_released`)",
        from: &[Given::Lost],
        act: released_unsent,
        next: Some(LeaseState::Lost),
        says: "nothing",
    },
    Row {
        state: "`Lost`, `Released`",
        event: "(`renewal_answered`)",
        from: &[Given::Lost, Given::Released],
        act: |core, now| {
            for answer in [Answer::Renewed, Answer::Failed, Answer::Gone] {
                assert_eq!(core.renewal_answered(answer, now, now), Effects::default(), "{answer:?}");
            }
            (now, Effects::default())
        },
        next: None,
        says: "nothing",
    },
];

/// The state table's rows as the module's documentation writes them: (state, event,
/// next) cells.
fn documented_rows() -> Vec<[String; 3]> {
    let doc: Vec<&str> = include_str!("mod.rs").lines().map_while(|line| line.strip_prefix("//!")).collect();
    let header = doc.iter().position(|line| line.starts_with(" | state")).expect("the state table");
    doc[header + 2..]
        .iter()
        .map_while(|line| line.strip_prefix(" | ")?.strip_suffix(" |"))
        .map(|row| {
            let cells: Vec<String> = row.split(" | ").map(str::to_owned).collect();
            cells.try_into().expect("three cells")
        })
        .collect()
}

/// Every row of the state table, in its order, from each state it starts from: the
/// machine goes where the row says and reports what it says, and the table has no row
/// that is not walked here.
#[test]
fn the_state_table_holds() {
    let documented = documented_rows();
    assert_eq!(documented.len(), ROWS.len(), "a row of the table without its case here, or the reverse");
    for (row, [state, event, next]) in ROWS.iter().zip(&documented) {
        assert_eq!(&row.state, state, "the rows in the table's order");
        assert!(event.contains(row.event), "{event:?} names {:?}", row.event);
        match row.next {
            Some(to) => assert!(next.starts_with(&format!("`{to:?}`")), "{next:?} is {to:?}"),
            None => assert!(next.starts_with("the same"), "{next:?}"),
        }
        for &from in row.from {
            let t0 = Instant::now();
            let (mut core, now) = given(from, t0);
            let before = core.state(now);
            let (then, effects) = (row.act)(&mut core, now);
            let expected = row.next.unwrap_or(before);
            assert_eq!(core.state(then), expected, "{state} / {event}: from {from:?}");
            assert_eq!(said(effects), row.says, "{state} / {event}: from {from:?}");
            assert!(effects.report.is_none() || effects.wake, "a report wakes the waiters too");
        }
    }
}

/// A last release that waits for a renewal in flight which finds the lease gone: the
/// loss is reported once, by the renewal; the release sends nothing, and what Redis
/// says after it reports nothing again.
#[test]
fn a_release_behind_a_renewal_that_finds_the_lease_gone_reports_the_loss_once() {
    let t0 = Instant::now();
    let mut core = Core::new(SPAN);
    core.hold_added(Term::Watchdog, t0);
    let now = t0 + ms(1100);
    assert_eq!(core.renewal_sent(), Some(false));
    let mut release = core.hold_released(Term::Watchdog, now);
    assert!(release.was_live && release.last && release.stops_renewal);
    assert_eq!(said(core.renewal_answered(Answer::Gone, t0 + ms(1000), now)), "lost");
    assert_eq!(said(core.release_ended(&mut release)), "nothing");
    assert!(!release.was_live, "nothing to send for a lease known gone");
    assert_eq!(core.state(now), LeaseState::Lost);
    assert_eq!(said(core.lost()), "nothing");
}

/// Every row of the renewal's table.
#[test]
fn the_renewal_table_holds() {
    let mut wheel = Wheel::new();
    let t0 = Instant::now();
    let mut core = Core::new(SPAN);
    // None: a watchdog hold schedules it at a third of the lease; a fixed one does not.
    assert_eq!(core.hold_added(Term::Until(Some(t0 + ms(500))), t0).schedule, None);
    assert_eq!(core.hold_added(Term::Watchdog, t0).schedule, Some(t0 + ms(1000)));
    let key = wheel.insert(1000, ());
    core.renewal_scheduled(|old| {
        assert_eq!(old, None);
        Some(key)
    });
    // Scheduled: another watchdog hold leaves the entry as it is.
    assert_eq!(core.hold_added(Term::Watchdog, t0 + ms(10)).schedule, None);
    // The entry fires: none, then in flight when the batch goes out (with a fixed hold
    // left, which the renewal must not cut short).
    core.renewal_fired();
    assert_eq!(core.renewal_cancelled(), None, "a release can no longer cancel it");
    assert_eq!(core.renewal_sent(), Some(true));
    assert!(core.renewal_in_flight());
    // In flight: a watchdog hold leaves it to the answer.
    assert_eq!(core.hold_added(Term::Watchdog, t0 + ms(20)).schedule, None);
    // Renewed: the next at the send + a third.
    let sent = t0 + ms(1000);
    let effects = core.renewal_answered(Answer::Renewed, sent, sent + ms(5));
    assert_eq!(effects.schedule, Some(sent + ms(1000)));
    assert!(!core.renewal_in_flight());
    // Failed before the deadline: again a twelfth later, or at the deadline if sooner.
    core.renewal_sent();
    let now = sent + ms(1200);
    assert_eq!(core.renewal_answered(Answer::Failed, sent, now).schedule, Some(now + ms(250)));
    core.renewal_sent();
    let end = core.expires_at().unwrap();
    let now = end - ms(100);
    assert_eq!(core.renewal_answered(Answer::Failed, sent, now).schedule, Some(end));
    // Failed past the deadline, or gone: none.
    core.renewal_sent();
    assert_eq!(core.renewal_answered(Answer::Failed, sent, end).schedule, None);
    let (mut gone, now) = given(Given::Held, t0);
    gone.renewal_sent();
    assert_eq!(gone.renewal_answered(Answer::Gone, now, now).schedule, None);
    // Renewed with no watchdog hold left (released while in flight): none.
    let (mut released, now) = given(Given::Held, t0);
    assert_eq!(released.renewal_sent(), Some(false));
    for _ in 0..2 {
        released.hold_released(Term::Watchdog, now);
    }
    assert_eq!(released.renewal_answered(Answer::Renewed, now, now).schedule, None);
    // Not held, or no watchdog hold: left out of the batch.
    let (mut lost, _) = given(Given::Lost, t0);
    assert_eq!(lost.renewal_sent(), None);
    assert!(!lost.renewal_in_flight());
    let mut fixed = Core::new(SPAN);
    fixed.hold_added(Term::Until(None), t0);
    assert_eq!(fixed.renewal_sent(), None);
    // The last watchdog hold released: the entry is to be cancelled and a round trip in
    // flight waited for; a watchdog hold left keeps both.
    let (mut two, now) = given(Given::Held, t0);
    let key = wheel.insert(1000, ());
    two.renewal_scheduled(|_| Some(key));
    assert!(!two.hold_released(Term::Watchdog, now).stops_renewal);
    assert!(two.hold_released(Term::Watchdog, now).stops_renewal);
    assert_eq!(two.renewal_cancelled(), Some(key));
    // A hold added after the entry fired schedules one; the answer's replaces it.
    let (mut raced, now) = given(Given::Held, t0);
    raced.renewal_fired();
    let early = wheel.insert(5, ());
    raced.renewal_scheduled(|_| Some(early));
    raced.renewal_sent();
    let effects = raced.renewal_answered(Answer::Renewed, now, now);
    let replacement = wheel.insert(10, ());
    raced.renewal_scheduled(|old| {
        assert_eq!(old, Some(early), "the entry it replaces, to cancel");
        Some(replacement)
    });
    assert!(effects.schedule.is_some());
}

/// The lease lasts as long as its longest hold, and Redis is asked to keep it so: a
/// short fixed hold never cuts the watchdog's part, a long one outlasts it.
#[test]
fn a_lease_lasts_as_long_as_its_longest_hold() {
    let now = Instant::now();
    let mut core = Core::new(Span { lease: Duration::from_secs(3), drift: Duration::ZERO });
    core.hold_added(Term::Watchdog, now);
    let short = Term::Until(now.checked_add(ms(200)));
    core.hold_added(short, now);
    assert_eq!(core.expires_at(), now.checked_add(Duration::from_secs(3)), "the short hold does not cut it");
    let long = Term::Until(now.checked_add(Duration::from_secs(10)));
    core.hold_added(long, now);
    assert_eq!(core.expires_at(), now.checked_add(Duration::from_secs(10)));
    assert_eq!(core.renewal_sent(), Some(true), "fixed holds remain: lengthen only");
    assert!(!core.hold_released(long, now).last);
    assert_eq!(core.keep_millis(3000, now), 3000, "the watchdog hold and a 200 ms one remain");
    assert!(!core.hold_released(Term::Watchdog, now).last);
    assert_eq!(core.keep_millis(3000, now), 200);
    assert_eq!(core.keep_millis(3000, now + ms(150)), 50, "the rest of it");
    assert_eq!(core.keep_millis(3000, now + ms(300)), 1, "at least 1 ms");
    assert!(core.hold_released(short, now).last);
}

/// Validity and risk are measured from the send: valid until send + lease − drift, at
/// risk from send + lease/2, and a later renewal never moves either back.
#[test]
fn validity_and_risk_count_from_the_send() {
    let sent = Instant::now();
    let mut core = Core::new(SPAN);
    core.hold_added(Term::Watchdog, sent + ms(100));
    assert_eq!(core.expires_at(), Some(sent + ms(3070)));
    assert_eq!(core.next_change(sent), Some(sent + ms(1600)));
    // An older renewal's answer (a send before the acquire's) changes nothing.
    assert!(!core.renewed(sent));
    assert_eq!(core.expires_at(), Some(sent + ms(3070)));
    assert_eq!(core.valid_until(sent + ms(3069)), Some(Some(sent + ms(3070))));
    assert_eq!(core.valid_until(sent + ms(3070)), None, "lost: no validity");
}

/// A fixed hold that outlasts the watchdog's keeps the lease valid whatever renewals do:
/// never at risk while it does.
#[test]
fn a_fixed_hold_longer_than_the_watchdog_part_keeps_the_lease_out_of_risk() {
    let sent = Instant::now();
    let mut core = Core::new(SPAN);
    core.hold_added(Term::Watchdog, sent);
    let long = Term::Until(sent.checked_add(Duration::from_secs(60)));
    core.hold_added(long, sent);
    core.renewal_sent();
    assert_eq!(said(core.renewal_answered(Answer::Failed, sent, sent)), "nothing", "not at risk");
    assert_eq!(core.state(sent + Duration::from_secs(2)), LeaseState::Held);
    assert!(!core.hold_released(long, sent).last);
    assert_eq!(core.state(sent + Duration::from_secs(2)), LeaseState::AtRisk, "the watchdog part alone now");
    // Fixed holds alone are never at risk: nothing renews them.
    let mut fixed = Core::new(SPAN);
    fixed.hold_added(Term::Until(Some(sent + ms(100))), sent);
    assert_eq!(fixed.state(sent + ms(99)), LeaseState::Held);
    assert_eq!(fixed.next_change(sent), Some(sent + ms(100)));
    assert_eq!(fixed.state(sent + ms(100)), LeaseState::Lost);
}

#[test]
fn a_hold_without_end_never_expires() {
    let now = Instant::now();
    let mut core = Core::new(SPAN);
    core.hold_added(Term::Until(None), now);
    assert_eq!(core.expires_at(), None);
    assert!(core.is_live(now + Duration::from_secs(3_600_000)));
    assert_eq!(core.next_change(now), None);
    assert_eq!(core.keep_millis(1000, now), keys::MAX_LEASE_MILLIS);
}

/// A wheel that schedules nothing.
struct NoWheel;

impl Schedule for NoWheel {
    fn put(&self, _: &Arc<Lease>, old: Option<WheelKey>, _: Instant) -> Option<WheelKey> {
        old
    }

    fn cancel(&self, _: WheelKey) {}
}

fn lease(span: Span) -> Arc<Lease> {
    let renews = Renews::Hash { owner: "o".into(), kind: Kind::Reentrant, field: "o".into(), hold_keys: None };
    Arc::new(Lease::new("l".into(), renews, span))
}

/// A waiter on the lease wakes when a renewal fails (notified) and when the clock turns
/// it at risk (its own deadline), and returns at its timeout otherwise.
#[test]
fn waiting_while_held_ends_at_risk_or_at_the_timeout() {
    let lease = lease(Span { lease: ms(600), drift: Duration::ZERO });
    let sent = Instant::now();
    lease.hold_added(Term::Watchdog, sent, &NoWheel, &Events::none());
    let timed_out = lease.wait_while_held(Some(Instant::now() + ms(20)));
    assert_eq!(timed_out, LeaseState::Held);
    // The clock: at risk at half the lease (300 ms after the send).
    assert_eq!(lease.wait_while_held(None), LeaseState::AtRisk);
    assert!(sent.elapsed() >= ms(300), "{:?}", sent.elapsed());
    // A failure, notified: at once.
    let lease = self::lease(SPAN);
    lease.hold_added(Term::Watchdog, Instant::now(), &NoWheel, &Events::none());
    let failing = Arc::clone(&lease);
    let failer = std::thread::spawn(move || {
        std::thread::sleep(ms(50));
        failing.renewal_sent(&Events::none());
        failing.renewal_answered(Answer::Failed, Instant::now(), &NoWheel, &Events::none());
    });
    let started = Instant::now();
    assert_eq!(lease.wait_while_held(Some(Instant::now() + Duration::from_secs(5))), LeaseState::AtRisk);
    // Well before the clock would turn it at risk (half of `SPAN`'s 3 s).
    assert!(started.elapsed() < ms(1000), "woken by the failure: {:?}", started.elapsed());
    failer.join().expect("failer");
}

/// A release waits for the renewal in flight, and the loss found then is the lease's.
#[test]
fn a_release_waits_for_the_renewal_in_flight_then_ends_the_lease() {
    let lease = lease(SPAN);
    lease.hold_added(Term::Watchdog, Instant::now(), &NoWheel, &Events::none());
    assert_eq!(lease.renewal_sent(&Events::none()), Some(false));
    let renewer = Arc::clone(&lease);
    // Set just before the answer: a release that did not wait for it returns while the
    // answering thread still sleeps, and reads it unset.
    let answering = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answer = std::thread::spawn({
        let answering = Arc::clone(&answering);
        move || {
            std::thread::sleep(ms(50));
            answering.store(true, std::sync::atomic::Ordering::SeqCst);
            renewer.renewal_answered(Answer::Renewed, Instant::now(), &NoWheel, &Events::none());
        }
    });
    let left = lease.hold_released(Term::Watchdog, &NoWheel, Duration::from_secs(5), 3000, &Events::none());
    assert!(answering.load(std::sync::atomic::Ordering::SeqCst), "the release waited for the answer");
    assert!(left.last && !left.lost);
    assert_eq!(left.keep_millis, 1, "nothing left to keep");
    assert_eq!(lease.state(), LeaseState::Released);
    assert_eq!(lease.valid_until(), None);
    lease.lost(&Events::none());
    assert_eq!(lease.state(), LeaseState::Lost);
    answer.join().expect("renewer");
}

/// A permit lease and a group lease have no field; a lock's lease has its owner and role.
#[test]
fn what_a_lease_renews_names_its_owner() {
    let permits = Lease::new("s".into(), Renews::Permits(vec![[7; 16]]), SPAN);
    assert_eq!((permits.owner(), permits.role()), (None, None));
    let group = Lease::new("g".into(), Renews::Group { owner: "c:1".into(), fields: "ab".into() }, SPAN);
    assert_eq!((group.owner(), group.role()), (Some("c:1"), None));
    let lock = lease(SPAN);
    assert_eq!((lock.owner(), lock.role()), (Some("o"), Some(Role::Exclusive)));
    assert_eq!(&**lock.name(), "l");
}
