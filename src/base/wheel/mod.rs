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
mod tests;
