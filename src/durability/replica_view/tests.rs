//! The state tables of `replica_view`, row by row.

use super::*;

/// A master with `replicas` replicas, all online, listed as `127.0.0.11:7000`,
/// `127.0.0.11:7001`, …
fn master(replicas: u64, backlog: bool, syncs: u64) -> Reading {
    let attached = (0..replicas).map(|i| node(i as u16)).collect();
    Reading { master: true, replicas, online: replicas, backlog, syncs, attached, replid: Some(REPLID.to_owned()) }
}

const REPLID: &str = "8f3ab6c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6";

fn node(i: u16) -> Node {
    ("127.0.0.11".to_owned(), 7000 + i)
}

fn replica() -> Reading {
    Reading {
        master: false,
        replicas: 0,
        online: 0,
        backlog: true,
        syncs: 0,
        attached: Vec::new(),
        replid: Some(REPLID.to_owned()),
    }
}

/// A view that has read `readings` in turn, 1 ms apart, starting at `t0`.
fn view_after(t0: Instant, readings: &[Reading]) -> ReplicaView {
    let mut view = ReplicaView::default();
    for (i, reading) in readings.iter().enumerate() {
        view.observe(t0 + Duration::from_millis(i as u64), reading.clone());
    }
    view
}

#[test]
fn info_text_parses_into_a_reading() {
    let text = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n\
                slave0:ip=127.0.0.1,port=7001,state=online,offset=42,lag=0\r\n\
                master_replid:8f3ab6c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6\r\n\
                master_repl_offset:42\r\nrepl_backlog_active:1\r\n\
                # Stats\r\nsync_full:2\r\nsync_partial_ok:3\r\nsync_partial_err:1\r\n";
    let mut expected = master(1, true, 5);
    expected.attached = vec![("127.0.0.1".to_owned(), 7001)];
    assert_eq!(Reading::parse(text), Some(expected));
    let two = text.replace("connected_slaves:1", "connected_slaves:2").replace(
        "slave0:ip=127.0.0.1,port=7001",
        "slave0:ip=127.0.0.2,port=7002,state=wait_bgsave,offset=0,lag=0\r\nslave1:ip=127.0.0.1,port=7001",
    );
    let two = Reading::parse(&two).expect("parses");
    assert_eq!(two.attached, [("127.0.0.1".to_owned(), 7001), ("127.0.0.2".to_owned(), 7002)], "sorted");
    assert_eq!((two.replicas, two.online), (2, 1), "a replica still syncing is not online");
    let text_of_replica = "role:slave\r\nconnected_slaves:0\r\nmaster_replid:8f3ab6c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6\r\n\
         repl_backlog_active:1\r\nsync_full:0\r\nsync_partial_ok:0\r\n";
    assert_eq!(Reading::parse(text_of_replica), Some(replica()));
    assert_eq!(Reading::parse("role:master\r\nconnected_slaves:0\r\n"), None, "no stats: nothing is assumed");
    assert_eq!(Reading::parse(&text.replace("connected_slaves:1", "connected_slaves:x")), None);
}

/// Every row of the verdict table, in order.
#[test]
fn the_verdict_table_holds() {
    let t0 = Instant::now();
    let later = |ms: u64| t0 + Duration::from_millis(ms);
    // Not a master: refused, fresh or not.
    assert_eq!(ReplicaView::default().observe(t0, replica()), Verdict::Refused(Refusal::NotMaster));
    assert_eq!(
        view_after(t0, &[master(1, true, 1)]).observe(later(5), replica()),
        Verdict::Refused(Refusal::NotMaster)
    );
    // A loss whose replica that went was found gone: the rows below.
    let mut view = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
    let asked = view.replicas_to_ask(later(2)).expect("named");
    assert_eq!(view.answered(asked.loss, &[Found::Gone]), Verdict::Wait(1));
    // A count that falls is a loss; the master is held back while it has fewer, however
    // long that lasts.
    let mut view = view_after(t0, &[master(2, true, 2)]);
    let lost = Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 });
    assert_eq!(view.observe(later(5), master(1, true, 2)), lost);
    assert_eq!(view.observe(later(9_000), master(1, true, 2)), lost);
    assert_eq!(view.observe(later(3_600_000), master(1, true, 2)), lost, "no end but the replica's return");
    // Made good (the replica came back): wait for both.
    assert_eq!(view.observe(later(3_600_100), master(2, true, 3)), Verdict::Wait(2));
    // With replicas, fresh: wait for every one online.
    assert_eq!(ReplicaView::default().observe(t0, master(1, true, 1)), Verdict::Wait(1));
    assert_eq!(ReplicaView::default().observe(t0, master(3, true, 3)), Verdict::Wait(3));
    // Replicated and alone: refused.
    assert_eq!(ReplicaView::default().observe(t0, master(0, true, 7)), Verdict::Refused(Refusal::Alone));
    // Unreplicated: confirmed at once.
    assert_eq!(ReplicaView::default().observe(t0, master(0, false, 0)), Verdict::Confirmed);
    assert_eq!(view_after(t0, &[master(0, false, 0)]).observe(later(5), master(0, false, 0)), Verdict::Confirmed);
}

/// How many replicas a write waits for: every one online by default, at least `n` of
/// them with `AtLeast(n)`, and one while none is online yet (a replica still syncing).
#[test]
fn a_write_waits_for_the_replicas_acks_asks_for() {
    let t0 = Instant::now();
    let mut syncing = master(2, true, 2);
    syncing.online = 1;
    let mut none_online = master(1, true, 1);
    none_online.online = 0;
    for (acks, two, three, one_of_two, zero_of_one) in [
        (ReplicaAcks::All, 2, 3, 1, 1),
        (ReplicaAcks::AtLeast(1), 1, 1, 1, 1),
        (ReplicaAcks::AtLeast(2), 2, 2, 1, 1),
        (ReplicaAcks::AtLeast(9), 2, 3, 1, 1),
    ] {
        let verdict = |reading: Reading| ReplicaView::new(acks).observe(t0, reading);
        assert_eq!(verdict(master(2, true, 2)), Verdict::Wait(two), "{acks:?}");
        assert_eq!(verdict(master(3, true, 3)), Verdict::Wait(three), "{acks:?}");
        assert_eq!(verdict(syncing.clone()), Verdict::Wait(one_of_two), "{acks:?}");
        assert_eq!(verdict(none_online.clone()), Verdict::Wait(zero_of_one), "{acks:?}");
    }
}

/// A replica that attached and left between two readings (path of a failover right after
/// a replica came back) is seen through the sync counter.
#[test]
fn a_replica_that_came_and_went_unseen_is_a_loss() {
    let t0 = Instant::now();
    let mut view = view_after(t0, &[master(0, true, 4)]);
    let verdict = view.observe(t0 + Duration::from_millis(500), master(0, true, 5));
    assert_eq!(verdict, Verdict::Refused(Refusal::LostReplica { before: 1, now: 0 }));
    // One attached and is still there: nothing went.
    let mut view = view_after(t0, &[master(0, true, 4)]);
    assert_eq!(view.observe(t0 + Duration::from_millis(500), master(1, true, 5)), Verdict::Wait(1));
    // A counter that went back says nothing: taken for a loss.
    let mut view = view_after(t0, &[master(0, true, 4)]);
    assert!(matches!(view.observe(t0 + Duration::from_millis(500), master(0, true, 0)), Verdict::Refused(_)));
}

/// A replica link that blips (the replica drops and resyncs between readings) costs a
/// loss that is made good at once: the write waits for the replica, as before the blip.
#[test]
fn a_replica_that_resynced_between_readings_is_waited_for() {
    let t0 = Instant::now();
    let mut view = view_after(t0, &[master(1, true, 1)]);
    assert_eq!(view.observe(t0 + Duration::from_millis(50), master(1, true, 2)), Verdict::Wait(1));
}

/// With several replicas, one promoted leaves the others attached to the old master for a
/// while: their confirmations would be lost with it, so fewer than before is refused.
#[test]
fn one_of_several_replicas_going_holds_the_master_back() {
    let t0 = Instant::now();
    let mut view = view_after(t0, &[master(2, true, 2)]);
    let verdict = view.observe(t0 + Duration::from_millis(5), master(1, true, 2));
    assert_eq!(verdict, Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 }));
    // A second loss before the first is made good keeps the count before the first.
    let verdict = view.observe(t0 + Duration::from_millis(10), master(0, true, 2));
    assert_eq!(verdict, Verdict::Refused(Refusal::LostReplica { before: 2, now: 0 }));
}

/// Every row of the asking table: a replica that went and was found gone clears the
/// loss; one that answered (or could not be reached) keeps it, and is asked again
/// [`ASK_AGAIN`] later, not before; a loss made good asks nothing.
#[test]
fn the_asking_table_holds() {
    let t0 = Instant::now();
    let lost = Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 });
    for (found, verdict) in [(Found::Gone, Verdict::Wait(1)), (Found::Unknown, lost)] {
        let mut view = view_after(t0, &[master(2, true, 2)]);
        let at = t0 + Duration::from_millis(5);
        assert_eq!(view.observe(at, master(1, true, 2)), lost);
        let asked = view.replicas_to_ask(at).expect("the replica that went is named");
        assert_eq!(asked, ToAsk { loss: at, replicas: vec![node(1)] });
        assert_eq!(view.replicas_to_ask(at), None, "asked once, also while the answer is awaited");
        assert_eq!(view.observe(at + Duration::from_millis(1), master(1, true, 2)), lost, "refused meanwhile");
        assert_eq!(view.answered(asked.loss, &[found]), verdict, "{found:?}");
        assert_eq!(view.observe(at + Duration::from_millis(3), master(1, true, 2)), verdict, "{found:?}, later");
        let almost = at + ASK_AGAIN - Duration::from_millis(1);
        assert_eq!(view.replicas_to_ask(almost), None, "{found:?}: not asked again before ASK_AGAIN");
        let again = view.replicas_to_ask(at + ASK_AGAIN);
        match found {
            Found::Gone => assert_eq!(again, None, "cleared: nothing to ask"),
            Found::Unknown => {
                let again = again.expect("asked again");
                assert_eq!(view.answered(again.loss, &[Found::Gone]), Verdict::Wait(1), "gone by then");
            }
        }
    }
    // Two went: both must be found gone.
    let mut view = view_after(t0, &[master(3, true, 3)]);
    let at = t0 + Duration::from_millis(5);
    view.observe(at, master(1, true, 3));
    let asked = view.replicas_to_ask(at).expect("named");
    assert_eq!(asked.replicas, [node(1), node(2)]);
    let lost = Verdict::Refused(Refusal::LostReplica { before: 3, now: 1 });
    assert_eq!(view.answered(asked.loss, &[Found::Gone, Found::Unknown]), lost);
    // Made good before the answer: nothing to ask any more.
    let mut view = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
    view.observe(t0 + Duration::from_millis(2), master(2, true, 3));
    assert_eq!(view.replicas_to_ask(t0 + Duration::from_millis(3)), None);
}

/// Asking has nothing to go on, or comes too late: only the loss made good ends it.
#[test]
fn a_loss_not_asked_about_holds_the_master_back() {
    let t0 = Instant::now();
    // A replica came and went between two readings: no reading names it.
    let mut view = view_after(t0, &[master(0, true, 4)]);
    view.observe(t0 + Duration::from_millis(5), master(0, true, 5));
    assert_eq!(view.replicas_to_ask(t0 + Duration::from_millis(6)), None);
    // The answer concerns an earlier loss: a later one stays.
    let mut view = view_after(t0, &[master(3, true, 3), master(2, true, 3)]);
    let first = view.replicas_to_ask(t0 + Duration::from_millis(1)).expect("named");
    let later = Verdict::Refused(Refusal::LostReplica { before: 3, now: 1 });
    assert_eq!(view.observe(t0 + Duration::from_millis(2), master(1, true, 3)), later);
    assert_eq!(view.answered(first.loss, &[Found::Gone]), later);
    let second = view.replicas_to_ask(t0 + Duration::from_millis(3)).expect("the later loss is asked about");
    assert_eq!(second.replicas, [node(1), node(2)], "with the replica of the loss before, still away");
    // No answer at all clears nothing.
    let mut view = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
    let asked = view.replicas_to_ask(t0 + Duration::from_millis(2)).expect("named");
    assert!(matches!(view.answered(asked.loss, &[]), Verdict::Refused(_)));
}

/// A master that lost its last replica, and the client found that replica's server
/// gone: nothing can be promoted over it, and it counts writes as a single server does;
/// an answer leaves it refused. A replica that comes back is waited for again, and when
/// it goes again it is asked again.
#[test]
fn a_master_whose_replicas_are_all_gone_grants_as_a_single_server() {
    let t0 = Instant::now();
    let ms = |ms: u64| t0 + Duration::from_millis(ms);
    let lost = Verdict::Refused(Refusal::LostReplica { before: 1, now: 0 });
    for (found, verdict) in [(Found::Gone, Verdict::Confirmed), (Found::Unknown, lost)] {
        let mut view = view_after(t0, &[master(1, true, 1)]);
        assert_eq!(view.observe(ms(5), master(0, true, 1)), lost);
        let asked = view.replicas_to_ask(ms(5)).expect("named");
        assert_eq!(view.answered(asked.loss, &[found]), verdict, "{found:?}");
        assert_eq!(view.observe(ms(7), master(0, true, 1)), verdict, "{found:?}, the next write");
        assert_eq!(view.observe(ms(3_600_000), master(0, true, 1)), verdict, "{found:?}, an hour on");
    }
    // It comes back: waited for. It goes again: asked again.
    let mut view = view_after(t0, &[master(1, true, 1), master(0, true, 1)]);
    let asked = view.replicas_to_ask(ms(2)).expect("named");
    assert_eq!(view.answered(asked.loss, &[Found::Gone]), Verdict::Confirmed);
    assert_eq!(view.observe(ms(3), master(1, true, 2)), Verdict::Wait(1));
    view.observe(ms(4), master(0, true, 2));
    assert_eq!(view.replicas_to_ask(ms(5)).map(|a| a.replicas), Some(vec![node(0)]));
}

/// Every replica still away is asked at each loss: one that answered before keeps a
/// master that lost its last replica since refused, though that one is gone.
#[test]
fn a_replica_still_away_from_an_earlier_loss_is_asked_again() {
    let t0 = Instant::now();
    let ms = |ms: u64| t0 + Duration::from_millis(ms);
    let mut view = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
    let first = view.replicas_to_ask(ms(2)).expect("named");
    assert_eq!(first.replicas, [node(1)]);
    assert_eq!(
        view.answered(first.loss, &[Found::Unknown]),
        Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 })
    );
    view.observe(ms(3), master(0, true, 2));
    let second = view.replicas_to_ask(ms(3)).expect("named");
    assert_eq!(second.replicas, [node(0), node(1)]);
    let verdict = view.answered(second.loss, &[Found::Gone, Found::Unknown]);
    assert_eq!(verdict, Verdict::Refused(Refusal::LostReplica { before: 2, now: 0 }));
    // Both gone: as a single server.
    let third = view.replicas_to_ask(ms(3) + ASK_AGAIN).expect("asked again");
    assert_eq!(view.answered(third.loss, &[Found::Gone, Found::Gone]), Verdict::Confirmed);
}

/// Every row of the grant's probe and of the check's table.
#[test]
fn a_grant_checks_cheaply_only_what_the_last_reading_settled() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let check = |replicas: &[Node]| Check { master: true, replicas: replicas.to_vec() };
    let replicated = view_after(t0, &[master(2, true, 3)]);
    assert_eq!(replicated.probe_for_grant(ms(1)), Probe::CheckAndWait(2));
    assert_eq!(replicated.probe(ms(1)), Probe::ReadAndWait(2), "a renewal reads");
    assert_eq!(replicated.probe_for_grant(t0 + SETTLE), Probe::ReadAndWait(2), "not lately: read");
    let mut syncing = master(2, true, 3);
    syncing.online = 1;
    assert_eq!(view_after(t0, &[syncing]).probe_for_grant(ms(1)), Probe::ReadAndWait(1), "one not online");
    let mut unlisted = master(2, true, 3);
    unlisted.attached.pop();
    assert_eq!(view_after(t0, &[unlisted]).probe_for_grant(ms(1)), Probe::ReadAndWait(2), "one unnamed");
    let after_a_loss = view_after(t0, &[master(2, true, 3), master(1, true, 3)]);
    assert_eq!(after_a_loss.probe_for_grant(ms(2)), Probe::Read, "a loss that refuses: read");
    let made_good = view_after(t0, &[master(2, true, 3), master(1, true, 3), master(2, true, 4)]);
    assert_eq!(made_good.probe_for_grant(ms(3)), Probe::CheckAndWait(2), "a loss made good");
    let alone = view_after(t0, &[master(0, false, 0)]);
    assert_eq!(alone.probe_for_grant(ms(1)), Probe::Skip);

    // The check's table.
    let both = [node(0), node(1)];
    assert_eq!(replicated.checked(ms(1), &check(&both)), Some(Verdict::Wait(2)), "the same replicas");
    assert_eq!(replicated.checked(ms(1), &check(&both[..1])), None, "one went");
    assert_eq!(replicated.checked(ms(1), &check(&[node(0), node(1), node(2)])), None, "one came");
    assert_eq!(replicated.checked(ms(1), &check(&[node(0), node(2)])), None, "one replaced");
    let demoted = Check { master: false, replicas: Vec::new() };
    assert_eq!(replicated.checked(ms(1), &demoted), None, "no master");
    assert_eq!(replicated.checked(t0 + SETTLE, &check(&both)), None, "the reading too old");
    let refusing = view_after(t0, &[master(2, true, 3), master(1, true, 3)]);
    assert_eq!(refusing.checked(ms(2), &check(&[node(0)])), None, "a loss that refuses");
}

/// Every row of the probe table.
#[test]
fn the_probe_table_holds() {
    let t0 = Instant::now();
    assert_eq!(ReplicaView::default().probe(t0), Probe::Read, "fresh: read");
    let alone = view_after(t0, &[master(0, false, 0)]);
    assert_eq!(alone.probe(t0 + Duration::from_millis(999)), Probe::Skip, "unreplicated, a moment ago");
    assert_eq!(alone.probe(t0 + SETTLE), Probe::Read, "unreplicated, but not lately");
    let degraded = view_after(t0, &[master(0, true, 3)]);
    assert_eq!(degraded.probe(t0 + Duration::from_millis(1)), Probe::Read, "a backlog: replicas may come");
    let replicated = view_after(t0, &[master(2, true, 3)]);
    assert_eq!(replicated.probe(t0 + Duration::from_millis(1)), Probe::ReadAndWait(2));
    let after_a_loss = view_after(t0, &[master(2, true, 3), master(1, true, 3)]);
    assert_eq!(after_a_loss.probe(t0 + Duration::from_millis(2)), Probe::Read, "a loss: refused, read first");
    let demoted = view_after(t0, &[replica()]);
    assert_eq!(demoted.probe(t0 + Duration::from_millis(1)), Probe::Read);
}

/// Redisson's rule counts what the default refuses for want of a replica, and nothing
/// else: a lost replica or none at all counts (waiting for those online), a server that
/// is no master still refuses, and the other verdicts stand.
#[test]
fn when_connected_counts_what_only_a_missing_replica_refused() {
    let t0 = Instant::now();
    let two_then_one = view_after(t0, &[master(2, true, 2), master(1, true, 2)]);
    let lost = Verdict::Refused(Refusal::LostReplica { before: 2, now: 1 });
    assert_eq!(two_then_one.when_connected(lost), Verdict::Wait(1));
    let none = view_after(t0, &[master(1, true, 1), master(0, true, 1)]);
    assert_eq!(none.when_connected(Verdict::Refused(Refusal::LostReplica { before: 1, now: 0 })), Verdict::Confirmed);
    assert_eq!(none.when_connected(Verdict::Refused(Refusal::Alone)), Verdict::Confirmed);
    assert_eq!(none.when_connected(Verdict::Refused(Refusal::NotMaster)), Verdict::Refused(Refusal::NotMaster));
    assert_eq!(two_then_one.when_connected(Verdict::Wait(1)), Verdict::Wait(1));
    assert_eq!(none.when_connected(Verdict::Confirmed), Verdict::Confirmed);
}
