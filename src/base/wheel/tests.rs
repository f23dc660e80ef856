//! The wheel's tests: its invariants against a model, and its edges.

use super::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap, HashSet};

/// 64^k.
fn pow64(k: u32) -> u64 {
    1u64 << (SLOT_BITS * k)
}

impl<T> Wheel<T> {
    /// Checks every structural invariant; O(entries + slots).
    fn check_invariants(&self) {
        let mut linked = 0;
        let mut check_list = |list: &List, loc: Loc| {
            let mut prev = NIL;
            let mut index = list.head;
            while index != NIL {
                let node = &self.nodes[index];
                assert_eq!(node.loc, loc);
                assert_eq!(node.prev, prev);
                assert!(node.value.is_some());
                let expected = match place(self.elapsed, node.deadline) {
                    None => Loc::Due,
                    Some((level, slot)) => Loc::slot(level, slot),
                };
                assert_eq!(expected, loc, "deadline {} misplaced", node.deadline);
                linked += 1;
                prev = index;
                index = node.next;
            }
            assert_eq!(list.tail, prev);
        };
        check_list(&self.due, Loc::Due);
        for (level_index, level) in self.levels.iter().enumerate() {
            for (slot, list) in level.slots.iter().enumerate() {
                assert_eq!(level.occupied & (1 << slot) != 0, !list.is_empty());
                check_list(list, Loc::slot(level_index, slot));
            }
        }
        assert_eq!(linked, self.len);
        let mut free = 0;
        let mut index = self.free;
        while index != NIL {
            assert_eq!(self.nodes[index].loc, Loc::Free);
            assert!(self.nodes[index].value.is_none());
            free += 1;
            index = self.nodes[index].next;
        }
        assert_eq!(free + self.len, self.nodes.len());
    }
}

fn poll(wheel: &mut Wheel<u64>, now: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    wheel.poll_expired(now, &mut out);
    out.sort_unstable();
    out
}

#[test]
fn place_at_boundaries_from_zero() {
    assert_eq!(place(0, 0), None);
    assert_eq!(place(0, 1), Some((0, 1)));
    assert_eq!(place(0, 63), Some((0, 63)));
    assert_eq!(place(0, 64), Some((1, 1)));
    assert_eq!(place(0, 65), Some((1, 1)));
    assert_eq!(place(0, 127), Some((1, 1)));
    assert_eq!(place(0, 128), Some((1, 2)));
    assert_eq!(place(0, 4095), Some((1, 63)));
    assert_eq!(place(0, 4096), Some((2, 1)));
    for k in 1..LEVELS as u32 {
        let level = k as usize;
        assert_eq!(place(0, pow64(k) - 1), Some((level - 1, 63)), "64^{k} - 1");
        assert_eq!(place(0, pow64(k)), Some((level, 1)), "64^{k}");
        assert_eq!(place(0, pow64(k) + 1), Some((level, 1)), "64^{k} + 1");
    }
    // The last tick in range, then past the range: clamped into the top level by digit 5.
    assert_eq!(place(0, pow64(6) - 1), Some((5, 63)));
    assert_eq!(place(0, pow64(6)), Some((5, 0)));
    assert_eq!(place(0, pow64(6) + 3 * pow64(5)), Some((5, 3)));
    assert_eq!(place(0, 1 << 50), Some((5, 0)));
    assert_eq!(place(0, u64::MAX), Some((5, 63)));
}

#[test]
fn place_relative_to_elapsed() {
    // Due at once at or before elapsed.
    assert_eq!(place(100, 100), None);
    assert_eq!(place(100, 99), None);
    assert_eq!(place(u64::MAX, u64::MAX), None);
    assert_eq!(place(u64::MAX, 0), None);
    // Crossing a digit boundary moves up a level even for a one-tick difference.
    assert_eq!(place(63, 64), Some((1, 1)));
    assert_eq!(place(64, 65), Some((0, 1)));
    assert_eq!(place(4095, 4096), Some((2, 1)));
    assert_eq!(place(pow64(6) - 1, pow64(6)), Some((5, 0)));
    // Near the end of u64.
    assert_eq!(place(u64::MAX - 1, u64::MAX), Some((0, 63)));
    assert_eq!(place(u64::MAX - 64, u64::MAX), Some((1, 63)));
    assert_eq!(place(u64::MAX - pow64(6), u64::MAX), Some((5, 63)));
}

#[test]
fn slot_starts_and_masks() {
    assert_eq!(slot_start(0, 0, 1), Some(1));
    assert_eq!(slot_start(0, 1, 1), Some(64));
    assert_eq!(slot_start(0, 5, 63), Some(63 * pow64(5)));
    // At or before elapsed's own slot: the next rotation.
    assert_eq!(slot_start(0, 5, 0), Some(pow64(6)));
    assert_eq!(slot_start(70, 1, 1), Some(4096 + 64));
    assert_eq!(slot_start(u64::MAX, 0, 5), None);
    assert_eq!(expired_slots(0, 0, 0), 0);
    assert_eq!(expired_slots(0, 63, 0), u64::MAX - 1);
    assert_eq!(expired_slots(0, 64, 0), u64::MAX);
    assert_eq!(expired_slots(0, 64, 1), 0b10);
    assert_eq!(expired_slots(10, 5 + 64, 0), !bits_through(10) | bits_through(5));
    assert_eq!(expired_slots(0, u64::MAX, 5), u64::MAX);
    assert_eq!(next_occupied(0, 3), None);
    assert_eq!(next_occupied(0b1001, 3), Some(0));
    assert_eq!(next_occupied(0b1001, 2), Some(3));
    assert_eq!(next_occupied(1 << 63, 63), Some(63));
}

#[test]
fn due_at_once() {
    let mut wheel = Wheel::new();
    assert!(poll(&mut wheel, 1000).is_empty());
    assert_eq!(wheel.elapsed(), 1000);
    wheel.insert(1000, 1);
    wheel.insert(3, 2);
    wheel.insert(0, 3);
    assert_eq!(wheel.next_deadline(), Some(1000));
    // Even when polled at an earlier tick, which does not move elapsed back.
    assert_eq!(poll(&mut wheel, 5), vec![(0, 3), (3, 2), (1000, 1)]);
    assert_eq!(wheel.elapsed(), 1000);
    assert!(wheel.is_empty());
    assert_eq!(wheel.next_deadline(), None);
    wheel.check_invariants();
}

#[test]
fn stale_keys_are_rejected() {
    let mut wheel = Wheel::new();
    let fired = wheel.insert(5, 1);
    let cancelled = wheel.insert(10, 2);
    assert_eq!(wheel.deadline(cancelled), Some(10));
    assert_eq!(wheel.cancel(cancelled), Some(2));
    assert_eq!(wheel.cancel(cancelled), None);
    assert_eq!(wheel.deadline(cancelled), None);
    assert_eq!(poll(&mut wheel, 5), vec![(5, 1)]);
    assert_eq!(wheel.cancel(fired), None);
    assert_eq!(wheel.deadline(fired), None);
    // Both nodes are reused by new entries: the old keys still must not reach them.
    let a = wheel.insert(20, 3);
    let b = wheel.insert(30, 4);
    let mut reused = [a.index, b.index];
    reused.sort_unstable();
    let mut old = [fired.index, cancelled.index];
    old.sort_unstable();
    assert_eq!(reused, old);
    assert_eq!(wheel.cancel(fired), None);
    assert_eq!(wheel.cancel(cancelled), None);
    assert_eq!(wheel.deadline(fired), None);
    assert_eq!(wheel.len(), 2);
    // A key from nowhere.
    let bogus = WheelKey { index: 1_000, generation: 0 };
    assert_eq!(wheel.cancel(bogus), None);
    assert_eq!(wheel.cancel(a), Some(3));
    assert_eq!(wheel.cancel(b), Some(4));
    assert!(wheel.is_empty());
    wheel.check_invariants();
}

#[test]
fn next_deadline_steps_through_coarse_slots() {
    let mut wheel = Wheel::new();
    assert_eq!(wheel.next_deadline(), None);
    wheel.insert(100, 1);
    // 100 sits in level 1 slot 1, which starts at 64.
    assert_eq!(wheel.next_deadline(), Some(64));
    assert!(poll(&mut wheel, 64).is_empty());
    assert_eq!(wheel.next_deadline(), Some(100));
    assert_eq!(poll(&mut wheel, 100), vec![(100, 1)]);
    assert_eq!(wheel.next_deadline(), None);

    wheel.insert(105, 2);
    assert_eq!(wheel.next_deadline(), Some(105));
    wheel.insert(3000, 3);
    assert_eq!(wheel.next_deadline(), Some(105));
    wheel.insert(101, 4);
    assert_eq!(wheel.next_deadline(), Some(101));
    wheel.insert(50, 5);
    assert_eq!(wheel.next_deadline(), Some(100));
    wheel.check_invariants();
}

#[test]
fn long_jump_ahead() {
    let mut wheel = Wheel::new();
    let deadlines = [1, 63, 64, 5000, pow64(3) + 7, pow64(5) * 9, pow64(6) + 1, 1 << 40];
    for (i, &d) in deadlines.iter().enumerate() {
        wheel.insert(d, i as u64);
    }
    let far = wheel.insert(1 << 50, 100);
    let last = wheel.insert(u64::MAX, 101);
    // One poll over ~2^41 ticks; stepping tick by tick would never finish.
    let out = poll(&mut wheel, (1 << 40) + 1);
    let expected: Vec<_> = deadlines.iter().enumerate().map(|(i, &d)| (d, i as u64)).collect();
    assert_eq!(out, expected);
    assert_eq!(wheel.elapsed(), (1 << 40) + 1);
    assert_eq!(wheel.deadline(far), Some(1 << 50));
    assert_eq!(wheel.deadline(last), Some(u64::MAX));
    wheel.check_invariants();
    let next = wheel.next_deadline().unwrap();
    assert!(next > wheel.elapsed() && next <= 1 << 50);
    assert!(poll(&mut wheel, (1 << 50) - 1).is_empty());
    assert_eq!(poll(&mut wheel, 1 << 50), vec![(1 << 50, 100)]);
    assert!(poll(&mut wheel, u64::MAX - 1).is_empty());
    assert_eq!(wheel.next_deadline(), Some(u64::MAX));
    assert_eq!(poll(&mut wheel, u64::MAX), vec![(u64::MAX, 101)]);
    assert_eq!(wheel.elapsed(), u64::MAX);
    // At the end of time everything is due at once.
    wheel.insert(u64::MAX, 102);
    wheel.insert(0, 103);
    assert_eq!(wheel.next_deadline(), Some(u64::MAX));
    assert_eq!(poll(&mut wheel, 0), vec![(0, 103), (u64::MAX, 102)]);
    wheel.check_invariants();
}

#[test]
fn beyond_range_rotates_and_is_never_early() {
    let mut wheel = Wheel::new();
    let deadline = 3 * pow64(6) + 5 * pow64(5) + 2 * 64 + 7;
    let key = wheel.insert(deadline, 1);
    let mut polls = 0;
    while let Some(t) = wheel.next_deadline() {
        polls += 1;
        assert!(t <= deadline && t > wheel.elapsed());
        let out = poll(&mut wheel, t);
        if t < deadline {
            assert!(out.is_empty());
            assert_eq!(wheel.deadline(key), Some(deadline));
        } else {
            assert_eq!(out, vec![(deadline, 1)]);
        }
        wheel.check_invariants();
    }
    // Slot 5 of the top level in rotations 0..=3, then levels 1 and 0.
    assert_eq!(polls, 6);
}

#[test]
fn many_entries_in_one_slot() {
    let mut wheel = Wheel::new();
    // Level 2 slot 3: deadlines 3 * 4096 ..= 3 * 4096 + 4095.
    let base = 3 * pow64(2);
    let keys: Vec<_> = (0..1000u64).map(|i| wheel.insert(base + i % pow64(2), i)).collect();
    assert_eq!(wheel.levels[2].occupied, 1 << 3);
    for key in keys.iter().step_by(3) {
        assert!(wheel.cancel(*key).is_some());
    }
    wheel.check_invariants();
    assert_eq!(wheel.next_deadline(), Some(base));
    let mut out = poll(&mut wheel, base + 500);
    wheel.check_invariants();
    out.extend(poll(&mut wheel, base + 999));
    assert_eq!(out.len(), 666);
    assert!(out.iter().all(|&(d, i)| d == base + i && i % 3 != 0));
    assert!(wheel.is_empty());
    wheel.check_invariants();
}

#[test]
fn hundred_thousand_entries() {
    let mut wheel = Wheel::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // Renewals spread over ten minutes of milliseconds.
    let keys: Vec<_> = (0..100_000u64).map(|i| wheel.insert(next() % 600_000, i)).collect();
    assert_eq!(wheel.len(), 100_000);
    for key in keys.iter().step_by(2) {
        assert!(wheel.cancel(*key).is_some());
    }
    let mut out = Vec::new();
    let mut now = 0;
    while let Some(t) = wheel.next_deadline() {
        now = t.max(now + 250);
        let before = out.len();
        wheel.poll_expired(now, &mut out);
        assert!(out[before..].iter().all(|&(d, _)| d <= now && d + 250 > now));
    }
    assert_eq!(out.len(), 50_000);
    assert!(out.iter().all(|&(_, i)| i % 2 == 1));
    wheel.check_invariants();
}

/// An insert offset: mostly small, on slot boundaries, large, or anything.
fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..200,
        4 => (0u32..=6, -2i64..=2).prop_map(|(k, d)| pow64(k).saturating_add_signed(d)),
        2 => 0u64..pow64(6) * 3,
        1 => any::<u64>(),
    ]
}

/// An advance step: like `offset`, with huge jumps rare (they end the interesting part).
fn step() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => 0u64..100,
        6 => (0u32..=6, -2i64..=2).prop_map(|(k, d)| pow64(k).saturating_add_signed(d)),
        4 => 0u64..(1 << 40),
        1 => any::<u64>(),
    ]
}

/// Where the wheel starts: zero, small, anywhere, or close to the end of time.
fn start() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), 0u64..(1 << 40), any::<u64>(), (0u64..(1 << 40)).prop_map(|x| u64::MAX - x),]
}

#[derive(Clone, Debug)]
enum Op {
    /// Insert at elapsed + offset.
    Insert(u64),
    /// Insert at elapsed - offset (due at once).
    InsertPast(u64),
    /// Cancel the n-th key ever issued (mod count), live or stale.
    Cancel(usize),
    /// Poll at elapsed + step.
    Advance(u64),
    /// Poll at exactly next_deadline().
    PollAtNext,
    /// Poll at elapsed - step: moves nothing but returns what is due.
    PollBehind(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => offset().prop_map(Op::Insert),
        1 => (0u64..1000).prop_map(Op::InsertPast),
        2 => any::<usize>().prop_map(Op::Cancel),
        3 => step().prop_map(Op::Advance),
        2 => Just(Op::PollAtNext),
        1 => (0u64..100).prop_map(Op::PollBehind),
    ]
}

/// The wheel against a sorted map of (deadline, id).
struct Harness {
    wheel: Wheel<u64>,
    model: BTreeMap<(u64, u64), ()>,
    live: HashMap<u64, u64>,
    keys: Vec<(WheelKey, u64)>,
}

impl Harness {
    fn poll(&mut self, now: u64) -> Result<(), TestCaseError> {
        let elapsed = self.wheel.elapsed();
        let out = poll(&mut self.wheel, now);
        let horizon = now.max(elapsed);
        prop_assert_eq!(self.wheel.elapsed(), horizon);
        let later = match horizon.checked_add(1) {
            Some(after) => self.model.split_off(&(after, 0)),
            None => BTreeMap::new(),
        };
        let expected: Vec<_> = mem::replace(&mut self.model, later).into_keys().collect();
        for (_, id) in &expected {
            self.live.remove(id);
        }
        prop_assert_eq!(out, expected);
        Ok(())
    }

    fn check(&self) -> Result<(), TestCaseError> {
        self.wheel.check_invariants();
        let elapsed = self.wheel.elapsed();
        prop_assert_eq!(self.wheel.len(), self.model.len());
        prop_assert_eq!(self.wheel.is_empty(), self.model.is_empty());
        match (self.wheel.next_deadline(), self.model.keys().next()) {
            (None, None) => {}
            (Some(t), Some(&(min, _))) => {
                prop_assert!(elapsed <= t && t <= min.max(elapsed), "t {} min {}", t, min);
                if min <= elapsed {
                    prop_assert_eq!(t, elapsed);
                }
            }
            (t, min) => prop_assert!(false, "next_deadline {:?} but min {:?}", t, min),
        }
        for (key, id) in &self.keys {
            prop_assert_eq!(self.wheel.deadline(*key), self.live.get(id).copied());
        }
        Ok(())
    }
}

fn run_ops(start: u64, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut h = Harness { wheel: Wheel::new(), model: BTreeMap::new(), live: HashMap::new(), keys: Vec::new() };
    h.poll(start)?;
    for (id, op) in (0u64..).zip(ops) {
        let elapsed = h.wheel.elapsed();
        match op {
            Op::Insert(offset) | Op::InsertPast(offset) => {
                let deadline = match op {
                    Op::Insert(_) => elapsed.saturating_add(offset),
                    _ => elapsed.saturating_sub(offset),
                };
                let key = h.wheel.insert(deadline, id);
                h.model.insert((deadline, id), ());
                h.live.insert(id, deadline);
                h.keys.push((key, id));
            }
            Op::Cancel(n) => {
                if !h.keys.is_empty() {
                    let (key, id) = h.keys[n % h.keys.len()];
                    let expected = h.live.remove(&id).map(|deadline| {
                        h.model.remove(&(deadline, id));
                        id
                    });
                    prop_assert_eq!(h.wheel.cancel(key), expected);
                }
            }
            Op::Advance(step) => h.poll(elapsed.saturating_add(step))?,
            Op::PollBehind(step) => h.poll(elapsed.saturating_sub(step))?,
            Op::PollAtNext => {
                if let Some(t) = h.wheel.next_deadline() {
                    let before = h.model.len();
                    h.poll(t)?;
                    if h.model.len() == before {
                        let next = h.wheel.next_deadline();
                        prop_assert!(next.is_none_or(|n| n > t), "stuck at {}", t);
                    }
                }
            }
        }
        h.check()?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_model(start in start(), ops in prop::collection::vec(op(), 1..200)) {
        run_ops(start, ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn polling_at_next_deadline_drains(
        start in start(),
        entries in prop::collection::vec((any::<bool>(), offset()), 1..100),
    ) {
        let mut wheel = Wheel::new();
        wheel.poll_expired(start, &mut Vec::new());
        let mut deadlines = HashMap::new();
        // Each entry is touched at most once per level, plus once per extra rotation of
        // the top level, and each poll at next_deadline touches at least one entry.
        let mut bound = 0u64;
        for (id, (past, offset)) in (0u64..).zip(entries) {
            // Far offsets are bounded here: each 2^36 ticks costs a wake-up.
            let offset = offset % (pow64(6) * 4);
            let deadline = if past {
                start.saturating_sub(offset)
            } else {
                start.saturating_add(offset)
            };
            bound += LEVELS as u64 + (deadline.saturating_sub(start) >> 36);
            wheel.insert(deadline, id);
            deadlines.insert(id, deadline);
        }
        let mut returned = HashSet::new();
        let mut previous: Option<u64> = None;
        let mut polls = 0;
        let mut out = Vec::new();
        while let Some(t) = wheel.next_deadline() {
            polls += 1;
            prop_assert!(polls <= bound, "more than {} polls", bound);
            prop_assert!(t >= wheel.elapsed());
            prop_assert!(previous.is_none_or(|p| t > p));
            wheel.poll_expired(t, &mut out);
            for (deadline, id) in out.drain(..) {
                prop_assert_eq!(deadlines.get(&id), Some(&deadline));
                prop_assert!(deadline <= t, "{} returned early at {}", deadline, t);
                prop_assert!(previous.is_none_or(|p| deadline > p), "{} returned late", deadline);
                prop_assert!(returned.insert(id));
            }
            previous = Some(t);
        }
        prop_assert_eq!(returned.len(), deadlines.len());
        wheel.check_invariants();
    }

    #[test]
    fn expired_slots_match_slot_starts(
        elapsed in start(),
        step in step(),
        level in 0..LEVELS,
        slot in 0..SLOTS,
    ) {
        let now = elapsed.saturating_add(step);
        let expired = expired_slots(elapsed, now, level) & (1 << slot) != 0;
        let start = slot_start(elapsed, level, slot);
        prop_assert_eq!(expired, start.is_some_and(|s| s <= now));
        prop_assert!(start.is_none_or(|s| s > elapsed));
    }
}
