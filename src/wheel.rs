//! A hashed hierarchical timing wheel: which entries are due at a given tick.
//!
//! The renewal thread schedules every lease's next renewal here and asks which ones are due.
//! The wheel is a pure data structure: a tick is an abstract `u64` (the renewal thread uses
//! milliseconds since its start instant), and time only moves when [`Wheel::poll_expired`] is
//! called. `elapsed` (E below) is the last tick polled up to.
//!
//! # Structure
//!
//! Six levels of 64 slots. A tick is read as base-64 digits; digit L is bits `6L..6L+6`.
//!
//! | level | one slot covers | the level covers (its "window") |
//! |-------|-----------------|---------------------------------|
//! | 0     | 1 tick          | 64 ticks                        |
//! | 1     | 64              | 4,096                           |
//! | 2     | 64^2            | 64^3 (about 4.4 min of ms)      |
//! | 3     | 64^3            | 64^4 (about 4.7 h)              |
//! | 4     | 64^4            | 64^5 (about 12.4 days)          |
//! | 5     | 64^5            | 64^6 = 2^36 (about 795 days)    |
//!
//! An entry with deadline D > E is placed at the level of the highest digit in which D and E
//! differ (capped at 5), in the slot given by D's digit at that level. So D and E agree on
//! every digit above L, D's digit L is greater than E's, and the slot's start (D with the
//! digits below L cleared) lies in (E, D]. An entry with D <= E is "due" and waits in a
//! separate due list for the next poll.
//!
//! Each level keeps a `u64` occupancy bitfield: bit s is set iff slot s holds an entry. A slot
//! is an intrusive doubly-linked list through a slab of nodes (a `Vec` plus a free list), so
//! insert and cancel are O(1) and there is no allocation per entry.
//!
//! Deadlines too far ahead for the wheel (D and E differ above digit 5) go to level 5 by D's
//! digit 5 as well: level 5 is a ring, and a slot at or before E's digit 5 stands for the next
//! rotation. Its next start is still at or before D, so such an entry is never returned early:
//! when its slot comes up it is re-placed, lower down or one more rotation (2^36 ticks) on.
//!
//! # Invariant
//!
//! Every live entry is in the due list iff D <= E, and otherwise in exactly the slot
//! [`place`]`(E, D)`. Slot starts grow with the level (every start on level L is before every
//! start on level L+1, because level L's window ends where E's slot on level L+1 ends), so the
//! earliest slot start is the first occupied slot after E's digit on the lowest non-empty
//! level: that is what [`Wheel::next_deadline`] returns, with a few bit operations per level.
//!
//! # Why `poll_expired(now)` is exact
//!
//! On each level, the slots whose next start is <= now form one arc of the bitfield, from
//! E's digit (exclusive) to now's digit (inclusive), possibly wrapping; it is computed as a
//! mask ([`expired_slots`]). Those slots and the due list are detached (O(1) each), E jumps to
//! now, and every detached entry is either returned (D <= now) or re-placed under the new E:
//! this is the cascade down to a finer level. An entry left in a slot that starts after now
//! has the same place under the new E (now lies between the old E and the slot's start, so
//! it agrees with D on the same digits), so the invariant holds again without touching it.
//! A due entry (D <= now) is in the due list or in a slot starting at or before D, hence
//! detached and returned; an entry is returned only if D <= now. The cost is the number of
//! levels plus the occupied slots detached plus the entries moved, however far now is.
//!
//! # Entry states
//!
//! | state         | where                    | enters by                      | leaves by                          |
//! |---------------|--------------------------|--------------------------------|------------------------------------|
//! | free          | free list                | cancel, or returned by a poll  | insert                             |
//! | due           | due list, D <= E         | insert with D <= E             | next poll (returned), cancel       |
//! | in slot (L,s) | slot s of level L, D > E | insert, or re-placed by a poll | a poll detaching the slot, cancel  |
//!
//! A node's generation changes every time it is freed, and a key carries the generation it
//! was issued with, so a stale key never reaches the node's next occupant.
//!
//! # For the caller
//!
//! - Sleep until [`Wheel::next_deadline`], poll there, and ask again: the tick it gives is a
//!   slot start, which can be earlier than every deadline (even a deadline one tick ahead
//!   lands on level 1 when it crosses a multiple of 64), so a poll may return nothing.
//! - An entry more than 2^36 ticks ahead costs one such empty wake-up per 2^36 ticks.
//! - Keys are only meaningful to the wheel that issued them. The slab never shrinks: its
//!   size is the largest number of entries held at once.

use std::fmt;
use std::mem;

/// Bits of a tick per level (64 slots).
const SLOT_BITS: u32 = 6;
/// Slots per level.
const SLOTS: usize = 1 << SLOT_BITS;
/// Mask of one base-64 digit.
const DIGIT_MASK: u64 = (1 << SLOT_BITS) - 1;
/// Number of levels; together they span 64^6 = 2^36 ticks.
const LEVELS: usize = 6;
/// "No node" in the intrusive links.
const NIL: usize = usize::MAX;

/// Handle to a scheduled entry, returned by [`Wheel::insert`].
///
/// A stale key (its entry already returned or cancelled, even if the storage was reused)
/// is harmless: [`Wheel::cancel`] and [`Wheel::deadline`] return `None` for it. A key must
/// only be used with the wheel that issued it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct WheelKey {
    index: usize,
    generation: u64,
}

/// Where a node is linked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loc {
    /// In the free list; holds no value.
    Free,
    /// In the due list: deadline <= elapsed.
    Due,
    /// In slot `slot` of level `level`.
    Slot { level: u8, slot: u8 },
}

impl Loc {
    fn slot(level: usize, slot: usize) -> Self {
        // Both come from `place`, so they are < 6 and < 64.
        Loc::Slot { level: level as u8, slot: slot as u8 }
    }
}

/// A slab node: one entry, linked into the due list, a slot, or the free list.
struct Node<T> {
    value: Option<T>,
    deadline: u64,
    /// Bumped each time the node is freed, so keys to earlier occupants go stale.
    generation: u64,
    prev: usize,
    /// Next in its list; in the free list, the next free node.
    next: usize,
    loc: Loc,
}

/// Head and tail of an intrusive list; the tail makes splicing a whole slot O(1).
#[derive(Clone, Copy, Debug)]
struct List {
    head: usize,
    tail: usize,
}

impl List {
    const EMPTY: List = List { head: NIL, tail: NIL };

    fn is_empty(&self) -> bool {
        self.head == NIL
    }
}

/// One level: 64 slots and the bitfield of the non-empty ones.
struct Level {
    occupied: u64,
    slots: [List; SLOTS],
}

impl Level {
    const EMPTY: Level = Level { occupied: 0, slots: [List::EMPTY; SLOTS] };
}

/// A hierarchical timing wheel of values `T` keyed by `u64` deadlines (see the module docs).
pub(crate) struct Wheel<T> {
    elapsed: u64,
    len: usize,
    levels: [Level; LEVELS],
    /// Entries whose deadline is <= elapsed, returned by the next poll.
    due: List,
    nodes: Vec<Node<T>>,
    /// Head of the free list threaded through `Node::next`.
    free: usize,
}

impl<T> Default for Wheel<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for Wheel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wheel").field("elapsed", &self.elapsed).field("len", &self.len).finish_non_exhaustive()
    }
}

/// Shift of digit `level` (at most 30).
fn shift(level: usize) -> u32 {
    level as u32 * SLOT_BITS
}

/// Digit `level` of `tick`: its slot on that level.
fn digit(tick: u64, level: usize) -> usize {
    ((tick >> shift(level)) & DIGIT_MASK) as usize
}

/// Bits `0..=bit` set; `bit` must be < 64.
fn bits_through(bit: usize) -> u64 {
    u64::MAX >> (63 - bit)
}

/// The level and slot of an entry with `deadline` when the wheel is at `elapsed`, or `None`
/// if it is due (`deadline <= elapsed`).
fn place(elapsed: u64, deadline: u64) -> Option<(usize, usize)> {
    if deadline <= elapsed {
        return None;
    }
    // The digit mask makes any difference within digit 0 count as level 0.
    let differ = (elapsed ^ deadline) | DIGIT_MASK;
    let top_bit = 63 - differ.leading_zeros();
    // Beyond the wheel's range: clamp into the top level (a ring).
    let level = ((top_bit / SLOT_BITS) as usize).min(LEVELS - 1);
    Some((level, digit(deadline, level)))
}

/// The first tick after `elapsed` at which slot `slot` of `level` starts, or `None` if that
/// is past `u64::MAX` (no entry can be in such a slot).
fn slot_start(elapsed: u64, level: usize, slot: usize) -> Option<u64> {
    let window_bits = shift(level) + SLOT_BITS;
    let window = elapsed & !((1u64 << window_bits) - 1);
    let start = window | ((slot as u64) << shift(level));
    if slot > digit(elapsed, level) {
        Some(start)
    } else {
        // At or before E's own slot: the next window (only the top level has such entries).
        start.checked_add(1 << window_bits)
    }
}

/// The slots of `level` whose next start after `elapsed` is <= `now` (`now >= elapsed`).
fn expired_slots(elapsed: u64, now: u64, level: usize) -> u64 {
    let window_bits = shift(level) + SLOT_BITS;
    let from = digit(elapsed, level);
    let to = digit(now, level);
    match (now >> window_bits).saturating_sub(elapsed >> window_bits) {
        // Same window: the slots after E's, up to now's.
        0 => bits_through(to) & !bits_through(from),
        // Now is in the next window: the rest of this one, then the next one up to now's.
        1 => !bits_through(from) | bits_through(to),
        _ => u64::MAX,
    }
}

/// The first occupied slot after `current`, wrapping around, or `None` if none is occupied.
fn next_occupied(occupied: u64, current: usize) -> Option<usize> {
    if occupied == 0 {
        return None;
    }
    let after = occupied & !bits_through(current);
    let bits = if after != 0 { after } else { occupied };
    Some(bits.trailing_zeros() as usize)
}

impl<T> Wheel<T> {
    /// An empty wheel at tick 0.
    pub(crate) fn new() -> Self {
        Wheel { elapsed: 0, len: 0, levels: [Level::EMPTY; LEVELS], due: List::EMPTY, nodes: Vec::new(), free: NIL }
    }

    /// The last tick polled up to.
    #[cfg_attr(not(test), allow(dead_code))] // used by the tests and diagnostics
    pub(crate) fn elapsed(&self) -> u64 {
        self.elapsed
    }

    /// The number of scheduled entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is scheduled.
    #[cfg_attr(not(test), allow(dead_code))] // used by the tests
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Schedules `value` at `deadline`, in O(1).
    ///
    /// A deadline <= `elapsed()` is due at once: the next [`poll_expired`](Self::poll_expired)
    /// returns it whatever its `now`. A deadline beyond the wheel's range (2^36 ticks) goes
    /// into the top level and keeps its true deadline: it is never returned early.
    pub(crate) fn insert(&mut self, deadline: u64, value: T) -> WheelKey {
        let node = Node { value: Some(value), deadline, generation: 0, prev: NIL, next: NIL, loc: Loc::Free };
        let index = if self.free == NIL {
            self.nodes.push(node);
            self.nodes.len() - 1
        } else {
            let index = self.free;
            let slot = &mut self.nodes[index];
            self.free = slot.next;
            // Keep the generation: it was bumped when the node was freed.
            *slot = Node { generation: slot.generation, ..node };
            index
        };
        let loc = match place(self.elapsed, deadline) {
            None => Loc::Due,
            Some((level, slot)) => Loc::slot(level, slot),
        };
        self.push_back(index, loc);
        self.len += 1;
        WheelKey { index, generation: self.nodes[index].generation }
    }

    /// Removes the entry of `key` and returns its value, in O(1); `None` if the key is stale.
    pub(crate) fn cancel(&mut self, key: WheelKey) -> Option<T> {
        self.live(key)?;
        self.unlink(key.index);
        self.release(key.index)
    }

    /// The deadline the entry of `key` was scheduled with; `None` if the key is stale.
    // Part of the API, for diagnostics; the renewal thread does not need it.
    #[allow(dead_code)]
    pub(crate) fn deadline(&self, key: WheelKey) -> Option<u64> {
        self.live(key).map(|node| node.deadline)
    }

    /// Advances `elapsed()` to `max(elapsed(), now)` and appends to `out`, as
    /// `(deadline, value)` in no particular order, every entry whose deadline is <= that tick.
    ///
    /// Never returns an entry early nor leaves a due one behind. The cost is the number of
    /// levels plus the occupied slots that come up plus the entries returned or moved to a
    /// finer level, however far ahead `now` is.
    pub(crate) fn poll_expired(&mut self, now: u64, out: &mut Vec<(u64, T)>) {
        let elapsed = self.elapsed;
        let now = now.max(elapsed);
        // Detach everything that may be due: the due list and every slot starting by `now`.
        let mut detached = mem::replace(&mut self.due, List::EMPTY);
        for (level_index, level) in self.levels.iter_mut().enumerate() {
            let mut taken = level.occupied & expired_slots(elapsed, now, level_index);
            level.occupied &= !taken;
            while taken != 0 {
                let slot = taken.trailing_zeros() as usize;
                taken &= taken - 1;
                let list = mem::replace(&mut level.slots[slot], List::EMPTY);
                splice(&mut self.nodes, &mut detached, list);
            }
        }
        // Slots left behind start after `now`, so their entries' places do not change.
        self.elapsed = now;
        let mut index = detached.head;
        while index != NIL {
            let node = &self.nodes[index];
            let (next, deadline) = (node.next, node.deadline);
            match place(now, deadline) {
                None => {
                    if let Some(value) = self.release(index) {
                        out.push((deadline, value));
                    }
                }
                // Cascade: a finer slot, or the next rotation of the top level.
                Some((level, slot)) => self.push_back(index, Loc::slot(level, slot)),
            }
            index = next;
        }
    }

    /// When to poll next: `None` iff the wheel is empty; otherwise a tick `t` with
    /// `elapsed() <= t <= ` the earliest deadline, found in O(levels) from the bitfields.
    ///
    /// `t` is the start of the earliest occupied slot, so it may be earlier than the earliest
    /// deadline when that entry sits in a coarse slot: polling at `t` then moves it to a finer
    /// slot and the next call returns a later tick. Polling at `t` always makes progress: it
    /// returns entries, or the next call returns a strictly later tick. If something is due
    /// (deadline <= `elapsed()`), returns `elapsed()`.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        if !self.due.is_empty() {
            return Some(self.elapsed);
        }
        // Every slot start on a level is before every slot start on the levels above.
        self.levels.iter().enumerate().find_map(|(level_index, level)| {
            let slot = next_occupied(level.occupied, digit(self.elapsed, level_index))?;
            // A slot start past u64::MAX cannot hold an entry: never the case.
            Some(slot_start(self.elapsed, level_index, slot).unwrap_or(u64::MAX))
        })
    }

    /// The node of `key` if the key is live.
    fn live(&self, key: WheelKey) -> Option<&Node<T>> {
        self.nodes.get(key.index).filter(|node| node.generation == key.generation && node.loc != Loc::Free)
    }

    /// The list at `loc`, marking a slot occupied (it is about to receive a node).
    fn list_to_fill(&mut self, loc: Loc) -> Option<&mut List> {
        match loc {
            Loc::Free => None,
            Loc::Due => Some(&mut self.due),
            Loc::Slot { level, slot } => {
                let level = &mut self.levels[usize::from(level)];
                level.occupied |= 1 << slot;
                Some(&mut level.slots[usize::from(slot)])
            }
        }
    }

    /// Links node `index` (not in any list) at the back of the list at `loc`.
    fn push_back(&mut self, index: usize, loc: Loc) {
        let Some(list) = self.list_to_fill(loc) else {
            return;
        };
        let tail = mem::replace(&mut list.tail, index);
        if tail == NIL {
            list.head = index;
        } else {
            self.nodes[tail].next = index;
        }
        let node = &mut self.nodes[index];
        node.prev = tail;
        node.next = NIL;
        node.loc = loc;
    }

    /// Unlinks node `index` from the list it is in, clearing the slot's bit if it empties.
    fn unlink(&mut self, index: usize) {
        let Node { prev, next, loc, .. } = self.nodes[index];
        if prev != NIL {
            self.nodes[prev].next = next;
        }
        if next != NIL {
            self.nodes[next].prev = prev;
        }
        let list = match loc {
            Loc::Free => return,
            Loc::Due => &mut self.due,
            Loc::Slot { level, slot } => &mut self.levels[usize::from(level)].slots[usize::from(slot)],
        };
        if prev == NIL {
            list.head = next;
        }
        if next == NIL {
            list.tail = prev;
        }
        if let (true, Loc::Slot { level, slot }) = (list.is_empty(), loc) {
            self.levels[usize::from(level)].occupied &= !(1 << slot);
        }
    }

    /// Moves node `index` (already unlinked) to the free list and returns its value.
    fn release(&mut self, index: usize) -> Option<T> {
        let node = &mut self.nodes[index];
        let value = node.value.take();
        node.generation = node.generation.wrapping_add(1);
        node.loc = Loc::Free;
        node.prev = NIL;
        node.next = self.free;
        self.free = index;
        if value.is_some() {
            self.len -= 1;
        }
        value
    }
}

/// Appends list `other` to list `into`, in O(1).
fn splice<T>(nodes: &mut [Node<T>], into: &mut List, other: List) {
    if other.is_empty() {
        return;
    }
    if into.is_empty() {
        *into = other;
    } else {
        nodes[into.tail].next = other.head;
        nodes[other.head].prev = into.tail;
        into.tail = other.tail;
    }
}

#[cfg(test)]
mod tests {
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
}
