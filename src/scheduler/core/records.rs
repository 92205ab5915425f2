//! The slab that holds a runtime's fiber records, indexed by [`Key`].
//!
//! A slab in the usual sense (an array of slots and a list of free ones),
//! written for this one use rather than taken from the `slab` crate,
//! because of what a spawn and an exit cost there:
//!
//! - `slab::Slab::insert` takes the record by value into a function the
//!   compiler keeps out of line, so every spawn built its 128-byte record on
//!   the stack (with stores of one to eight bytes) and copied it into the
//!   slot with 16-byte loads. A load that spans several recent stores cannot
//!   be forwarded from them and waits for them to reach the cache: that
//!   copy was the most expensive instruction of a spawn. Here the record is
//!   written straight into its slot, and the compiler stores each field in
//!   place.
//! - `Slab::remove` moves the whole record out (the same copy, at exit).
//!   Here [`Records::vacate`] takes out only what needs dropping or reuse.
//!
//! A vacant slot keeps a record whose state is [`State::Vacant`] and which
//! owns nothing (no stack, name or span): overwriting it leaks nothing.

use std::io::Write;
use std::ops::{Index, IndexMut};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering, compiler_fence};

use crate::mem::MappedArray;
use crate::reactor::token::Key;
use crate::scheduler::core::record::{Record, State};
use crate::stack::Stack;

pub(crate) struct Records {
    /// A `Vec` but for its growth (see `mem/array.rs`).
    slots: MappedArray<Record>,
    /// Keys of vacant slots, reused last-freed first (its memory is the
    /// most likely to be in cache). Never empty: see `insert_with`.
    free: Vec<Key>,
    /// Set while a record is put in or taken out (and while `slots`
    /// grows): what a dump that reads this runtime's records while its
    /// thread is held by the sampler's signal checks first
    /// (`observe::held`). Between the two compiler fences, a
    /// slot's name, stack and saved stack pointer may belong to no one
    /// yet, or to a fiber gone; outside them, every record that is not
    /// vacant is whole. An atomic only so that its stores are never
    /// dropped as unread: relaxed stores, plain `mov`s.
    editing: AtomicBool,
}

impl Records {
    /// Where a debugger reads the records' start and count, in bytes from
    /// a `Records`' address (`observe::debugger`).
    pub(crate) const START_AT: usize =
        std::mem::offset_of!(Records, slots) + MappedArray::<Record>::PTR_AT;
    pub(crate) const LEN_AT: usize =
        std::mem::offset_of!(Records, slots) + MappedArray::<Record>::LEN_AT;
    /// Where [`Records::editing`] lies (a byte, 1 while set).
    pub(crate) const EDITING_AT: usize = std::mem::offset_of!(Records, editing);

    pub(crate) fn with_capacity(capacity: usize) -> Records {
        let mut records = Records {
            slots: MappedArray::with_capacity(capacity),
            free: Vec::new(),
            editing: AtomicBool::new(false),
        };
        records.add_vacant();
        records
    }

    /// Marks the start of a change of the slots' structure (see
    /// [`Records::editing`]).
    #[inline(always)]
    fn begin_edit(&self) {
        self.editing.store(true, Ordering::Relaxed);
        // The stores of the change stay after the mark, as an interrupted
        // thread's handler (and the sampler it lets read) would see them.
        compiler_fence(Ordering::SeqCst);
    }

    /// Marks the end of a change begun with [`Records::begin_edit`].
    #[inline(always)]
    fn end_edit(&self) {
        compiler_fence(Ordering::SeqCst);
        self.editing.store(false, Ordering::Relaxed);
    }

    /// The key the next [`Records::insert_with`] will use.
    #[inline]
    pub(crate) fn next_key(&self) -> Key {
        *self
            .free
            .last()
            .expect("fibra: the free list of records is never empty")
    }

    /// Stores the record `make` returns in a vacant slot; returns its key,
    /// [`Records::next_key`]'s.
    ///
    /// The slot is found first and the record made after, with everything
    /// inlined, so that the compiler can build the record right in its slot
    /// (a record built before its slot is known goes through the stack).
    /// Nothing can unwind between the two either: had growing the slab
    /// been possible there, `make`'s captures would be spilled to the stack
    /// for the unwind to drop them. So a vacant slot is always kept ready,
    /// and the next one made once the record is in.
    #[inline(always)]
    pub(crate) fn insert_with(&mut self, make: impl FnOnce() -> Record) -> Key {
        self.begin_edit();
        // SAFETY: `free` is never empty: `with_capacity` puts a key in,
        // and a pop that empties it is followed by `add_vacant` below.
        let key = unsafe { self.free.pop().unwrap_unchecked() };
        // Free keys name vacant slots of `slots`.
        debug_assert_eq!(self.slots[key as usize].state, State::Vacant);
        // SAFETY: as just said, `key` is in bounds.
        let slot = unsafe { self.slots.get_unchecked_mut(key as usize) };
        let record = make();
        debug_assert_ne!(record.state, State::Vacant);
        // Overwriting a record without dropping it is at worst a leak, and a
        // vacant record owns nothing (see `vacate`): nothing leaks.
        // SAFETY: `slot` is a valid, exclusively borrowed record.
        unsafe { std::ptr::write(slot, record) };
        if self.free.is_empty() {
            self.add_vacant();
        }
        self.end_edit();
        key
    }

    /// Adds a vacant slot at the end and lists it as free.
    ///
    /// Aborts if that fails by unwinding (over 2^32 fibers, or an allocator
    /// that panics when out of memory): [`Records::insert_with`] takes the
    /// free list's last key without a check, and a runtime that caught the
    /// panic would go on to spawn into a slot that is not there.
    #[cold]
    #[inline(never)]
    fn add_vacant(&mut self) {
        struct AbortOnUnwind;
        impl Drop for AbortOnUnwind {
            fn drop(&mut self) {
                let _ = writeln!(
                    std::io::stderr(),
                    "fibra: cannot make room for another fiber record; aborting"
                );
                std::process::abort();
            }
        }
        let abort = AbortOnUnwind;
        let key = Key::try_from(self.slots.len()).expect("fibra: over 2^32 fibers");
        self.slots.push(Record::vacant());
        self.free.push(key);
        std::mem::forget(abort);
    }

    /// Empties slot `key` for reuse: drops the record's name and returns
    /// its stack. Its span must have been taken out first
    /// (`rec.span.take()`): dropping a span calls the subscriber's
    /// `try_close`, user code that may spawn fibers, so the caller drops it
    /// once it holds no borrow of the slab (see the ground rules in
    /// `core.rs`).
    ///
    /// # Panics
    ///
    /// If the slot is vacant or out of bounds.
    #[inline]
    pub(crate) fn vacate(&mut self, key: Key) -> Option<Stack> {
        if self.get(key).is_none() {
            vacant(key); // (before the mark, which a panic would leave set)
        }
        self.begin_edit();
        let rec = &mut self[key];
        debug_assert!(rec.span.is_none(), "a span dropped under a borrow");
        rec.state = State::Vacant;
        rec.name = None;
        let stack = rec.stack.take();
        self.free.push(key);
        self.end_edit();
        stack
    }

    /// The record in slot `key`, if the slot holds one.
    #[inline]
    pub(crate) fn get(&self, key: Key) -> Option<&Record> {
        self.slots
            .get(key as usize)
            .filter(|rec| rec.state != State::Vacant)
    }

    /// Where slot `key`'s record lies, without reading it (for a
    /// prefetch); `None` past the end.
    #[inline]
    pub(crate) fn slot_addr(&self, key: Key) -> Option<*const u8> {
        self.slots
            .get(key as usize)
            .map(|rec| ptr::from_ref(rec).cast())
    }

    /// The record in slot `key`, if the slot holds one.
    #[inline]
    pub(crate) fn get_mut(&mut self, key: Key) -> Option<&mut Record> {
        self.slots
            .get_mut(key as usize)
            .filter(|rec| rec.state != State::Vacant)
    }

    /// The record in slot `key`, without a bounds check.
    ///
    /// # Safety
    ///
    /// `key` is in bounds: a key of a record that has not been vacated.
    #[inline(always)]
    pub(crate) unsafe fn get_unchecked(&self, key: Key) -> &Record {
        debug_assert!(self.get(key).is_some());
        // SAFETY: forwarded from the caller.
        unsafe { self.slots.get_unchecked(key as usize) }
    }

    /// As [`Records::get_unchecked`], mutably.
    ///
    /// # Safety
    ///
    /// As for [`Records::get_unchecked`].
    #[inline(always)]
    pub(crate) unsafe fn get_unchecked_mut(&mut self, key: Key) -> &mut Record {
        debug_assert!(self.get(key).is_some());
        // SAFETY: forwarded from the caller.
        unsafe { self.slots.get_unchecked_mut(key as usize) }
    }

    /// Every record with its key.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Key, &Record)> {
        (0..)
            .zip(self.slots.iter())
            .filter(|(_, rec)| rec.state != State::Vacant)
    }
}

impl Index<Key> for Records {
    type Output = Record;

    /// # Panics
    ///
    /// If the slot is vacant or out of bounds.
    #[inline]
    fn index(&self, key: Key) -> &Record {
        match self.get(key) {
            Some(rec) => rec,
            None => vacant(key),
        }
    }
}

impl IndexMut<Key> for Records {
    #[inline]
    fn index_mut(&mut self, key: Key) -> &mut Record {
        match self.slots.get_mut(key as usize) {
            Some(rec) if rec.state != State::Vacant => rec,
            _ => vacant(key),
        }
    }
}

#[cold]
#[track_caller]
fn vacant(key: Key) -> ! {
    panic!("fibra: no fiber record in slot {key}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running() -> Record {
        let mut rec = Record::vacant();
        rec.state = State::Running;
        rec.name = Some("r".into());
        rec
    }

    #[test]
    fn a_vacated_slot_is_gone_and_then_reused() {
        let mut records = Records::with_capacity(1);
        let a = records.insert_with(running);
        let b = records.insert_with(running);
        assert_ne!(a, b);
        assert!(records.vacate(a).is_none(), "these records own no stack");
        assert!(records.get(a).is_none());
        assert!(records.get_mut(a).is_none());
        assert!(records.get(99).is_none());
        assert_eq!(records.iter().map(|(key, _)| key).collect::<Vec<_>>(), [b]);
        assert_eq!(records.next_key(), a, "the last freed slot is next");
        let c = records.insert_with(running);
        assert_eq!(c, a, "the freed slot is reused");
        assert_eq!(records[c].name.as_deref(), Some("r"));
        assert_eq!(records.iter().count(), 2);
    }

    #[test]
    #[should_panic(expected = "no fiber record in slot 0")]
    fn indexing_a_vacant_slot_panics() {
        let mut records = Records::with_capacity(1);
        let a = records.insert_with(running);
        records.vacate(a);
        let _ = &records[a];
    }
}
