//! The storage behind `unbounded()`: a linked list of blocks of slots and
//! no lock (as crossbeam-channel's `list` flavor).
//!
//! Positions count places: shifted left by one, the low bit free for a
//! flag (in `tail`: disconnected; in `head`: the tail is in a later block,
//! so a receive need not look at it). Each block holds `LAP - 1` slots;
//! the last position of each lap is a marker that no message takes: the
//! sender that claims a block's last slot installs the next block (made
//! before its claim) and moves the tail past the marker; the receiver that
//! claims it moves the head to the next block. A party that finds a
//! position at a marker waits for that move, a few instructions.
//!
//! Each slot has a state: written (its message published), read, and
//! "destroy": a block is freed by the reader of its last slot, which asks
//! each earlier slot not yet read to free the block when it is (the last
//! of those readers does). A hole is a slot written without a message.

use crate::atomic::{AtomicPtr, AtomicUsize, Ordering, fence, spin_loop};
use std::mem::MaybeUninit;
use std::ptr;

use super::list_block::{BLOCK_CAP, Block, HOLE, LAP, WRITE, written};
use super::{Claim, NoClaim, Slots};
use crate::channel::backoff::Backoff;

const SHIFT: usize = 1;
/// In `tail`: disconnected.
const MARK: usize = 1;
/// In `head`: the tail is in a later block.
const HAS_NEXT: usize = 1;

struct Position<T> {
    index: AtomicUsize,
    block: AtomicPtr<Block<T>>,
}

/// Keeps `head` and `tail` on cache lines of their own.
#[repr(align(128))]
struct Padded<T>(T);

pub(crate) struct ListSlots<T> {
    head: Padded<Position<T>>,
    tail: Padded<Position<T>>,
}

// SAFETY: messages move between threads only through claims, which one
// party holds at a time (the slot states order the hand-over): like a
// `Mutex<T>`, `Send` and `Sync` for `T: Send`.
unsafe impl<T: Send> Send for ListSlots<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for ListSlots<T> {}

impl<T> ListSlots<T> {
    pub(crate) fn new() -> ListSlots<T> {
        let position = || Position {
            index: AtomicUsize::new(0),
            block: AtomicPtr::new(ptr::null_mut()),
        };
        ListSlots {
            head: Padded(position()),
            tail: Padded(position()),
        }
    }

    /// The head that claiming the slot at `head` makes (flagged when the
    /// tail is in a later block, so the next receive need not look), or
    /// why there is none: the list is empty (`NotReady`), or empty and
    /// disconnected. `head` is not at a block's marker.
    #[inline]
    fn head_after(&self, head: usize) -> Result<usize, NoClaim> {
        let mut new_head = head + (1 << SHIFT);
        if new_head & HAS_NEXT == 0 {
            fence(Ordering::SeqCst);
            let tail = self.tail.0.index.load(Ordering::Relaxed);
            if head >> SHIFT == tail >> SHIFT {
                return Err(if tail & MARK != 0 {
                    NoClaim::Disconnected
                } else {
                    NoClaim::NotReady
                });
            }
            if (head >> SHIFT) / LAP != (tail >> SHIFT) / LAP {
                new_head |= HAS_NEXT;
            }
        }
        Ok(new_head)
    }

    /// The rest of a receive whose first try claimed a slot not written
    /// yet, or a hole: waits for its writer; a hole is freed and the
    /// receive goes on in the slow path.
    ///
    /// # Safety
    ///
    /// The caller claimed slot `offset` of `block` and has not released it.
    #[inline(never)]
    unsafe fn claimed_unwritten(
        &self,
        block: *mut Block<T>,
        offset: usize,
        freed: &mut bool,
    ) -> Result<Claim, NoClaim> {
        // SAFETY: the caller's claim: the block lives until we read the slot.
        let slot = unsafe { &(*block).slots[offset] };
        if written(slot) & HOLE == 0 {
            return Ok(Claim::of_block(block, offset));
        }
        // SAFETY: our claim, its hole out.
        unsafe { Block::release(block, offset) };
        self.start_recv_slow(true, freed)
    }

    /// `start_send` past its first try: every case.
    #[inline(never)]
    fn start_send_slow(&self, _wait_for_readers: bool) -> Result<Claim, NoClaim> {
        let mut lost = Backoff::default();
        let mut tail = self.tail.0.index.load(Ordering::Acquire);
        let mut block = self.tail.0.block.load(Ordering::Acquire);
        let mut next_block: *mut Block<T> = ptr::null_mut();
        let result = loop {
            if tail & MARK != 0 {
                break Err(NoClaim::Disconnected);
            }
            let offset = (tail >> SHIFT) % LAP;
            if offset == BLOCK_CAP {
                // Another send is installing the next block: a few
                // instructions, never a park (not waiting for a reader).
                spin_loop();
                tail = self.tail.0.index.load(Ordering::Acquire);
                block = self.tail.0.block.load(Ordering::Acquire);
                continue;
            }
            if offset + 1 == BLOCK_CAP && next_block.is_null() {
                next_block = Block::alloc();
            }
            if block.is_null() {
                // The first message: install the first block.
                let first = Block::<T>::alloc();
                if self
                    .tail
                    .0
                    .block
                    .compare_exchange(block, first, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
                {
                    self.head.0.block.store(first, Ordering::Release);
                    block = first;
                } else {
                    // SAFETY: never shared.
                    unsafe { Block::free(first) };
                    tail = self.tail.0.index.load(Ordering::Acquire);
                    block = self.tail.0.block.load(Ordering::Acquire);
                    continue;
                }
            }
            let new_tail = tail + (1 << SHIFT);
            match self.tail.0.index.compare_exchange_weak(
                tail,
                new_tail,
                Ordering::SeqCst,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if offset + 1 == BLOCK_CAP {
                        // We took the block's last slot: install the next.
                        let next = std::mem::replace(&mut next_block, ptr::null_mut());
                        self.tail.0.block.store(next, Ordering::Release);
                        self.tail.0.index.fetch_add(1 << SHIFT, Ordering::Release);
                        // SAFETY: `block` is the tail's, alive: its last
                        // slot is ours, not read yet.
                        unsafe { (*block).next.store(next, Ordering::Release) };
                    }
                    break Ok(Claim::of_block(block, offset));
                }
                Err(now) => {
                    tail = now;
                    block = self.tail.0.block.load(Ordering::Acquire);
                    lost.spin();
                }
            }
        };
        if !next_block.is_null() {
            // SAFETY: made above and never shared.
            unsafe { Block::free(next_block) };
        }
        result
    }

    /// `start_recv` past its first try: every case, waits included.
    #[inline(never)]
    fn start_recv_slow(&self, wait_for_writers: bool, freed: &mut bool) -> Result<Claim, NoClaim> {
        let mut lost = Backoff::default();
        // An unbounded list has no room to free.
        let _ = freed;
        let mut head = self.head.0.index.load(Ordering::Acquire);
        let mut block = self.head.0.block.load(Ordering::Acquire);
        loop {
            let offset = (head >> SHIFT) % LAP;
            if offset == BLOCK_CAP {
                // Another receive is moving the head to the next block.
                spin_loop();
                head = self.head.0.index.load(Ordering::Acquire);
                block = self.head.0.block.load(Ordering::Acquire);
                continue;
            }
            let new_head = self.head_after(head)?;
            if block.is_null() {
                // The first block is being installed.
                spin_loop();
                head = self.head.0.index.load(Ordering::Acquire);
                block = self.head.0.block.load(Ordering::Acquire);
                continue;
            }
            // Not waiting for writers is for the last receiver, dropping
            // (`Queue::disconnect`): no other receiver reads and frees
            // the head's block meanwhile.
            if !wait_for_writers {
                // SAFETY: so the block lives: only the head passing every
                // slot, which takes a receiver, frees it.
                let slot = unsafe { &(*block).slots[offset] };
                if slot.state.load(Ordering::Acquire) & WRITE == 0 {
                    return Err(NoClaim::NotReady);
                }
            }
            match self.head.0.index.compare_exchange_weak(
                head,
                new_head,
                Ordering::SeqCst,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if offset + 1 == BLOCK_CAP {
                        // SAFETY: as above.
                        let next = unsafe { (*block).wait_next() };
                        let mut next_index = (new_head & !HAS_NEXT) + (1 << SHIFT);
                        // SAFETY: installed, not freed before it is read.
                        if !unsafe { (*next).next.load(Ordering::Relaxed) }.is_null() {
                            next_index |= HAS_NEXT;
                        }
                        self.head.0.block.store(next, Ordering::Release);
                        self.head.0.index.store(next_index, Ordering::Release);
                    }
                    // SAFETY: the slot is ours: its block lives until we
                    // read it (looked at only now: before the claim, other
                    // receivers could have read and freed the block).
                    let slot = unsafe { &(*block).slots[offset] };
                    if written(slot) & HOLE != 0 {
                        // SAFETY: our claim, its hole out.
                        unsafe { Block::release(block, offset) };
                        head = self.head.0.index.load(Ordering::Acquire);
                        block = self.head.0.block.load(Ordering::Acquire);
                        continue;
                    }
                    return Ok(Claim::of_block(block, offset));
                }
                Err(now) => {
                    head = now;
                    block = self.head.0.block.load(Ordering::Acquire);
                    lost.spin();
                }
            }
        }
    }
}

impl<T> Slots for ListSlots<T> {
    type Message = T;

    #[inline]
    fn start_send(&self, wait_for_readers: bool) -> Result<Claim, NoClaim> {
        // The common case in line: a slot of the tail's block that is not
        // its last, and the tail ours at the first try. The rest (a block
        // to install, a disconnection, a lost race) takes a frame of its
        // own.
        let tail = self.tail.0.index.load(Ordering::Acquire);
        let block = self.tail.0.block.load(Ordering::Acquire);
        let offset = (tail >> SHIFT) % LAP;
        if tail & MARK == 0
            && offset + 1 < BLOCK_CAP
            && !block.is_null()
            && self
                .tail
                .0
                .index
                .compare_exchange_weak(
                    tail,
                    tail + (1 << SHIFT),
                    Ordering::SeqCst,
                    Ordering::Acquire,
                )
                .is_ok()
        {
            return Ok(Claim::of_block(block, offset));
        }
        self.start_send_slow(wait_for_readers)
    }

    unsafe fn write(&self, claim: Claim, message: T) {
        let (block, offset) = claim.block::<T>();
        // SAFETY: the caller's contract: a slot we alone hold until its
        // state publishes it; its block lives until it is read.
        let slot = unsafe { &(*block).slots[offset] };
        // SAFETY: as above.
        unsafe {
            slot.message
                .with_mut(|m| m.write(MaybeUninit::new(message)))
        };
        slot.state.fetch_or(WRITE, Ordering::Release);
    }

    unsafe fn write_hole(&self, claim: Claim) {
        let (block, offset) = claim.block::<T>();
        // SAFETY: as in `write`.
        let slot = unsafe { &(*block).slots[offset] };
        slot.state.fetch_or(WRITE | HOLE, Ordering::Release);
    }

    #[inline]
    fn start_recv(&self, wait_for_writers: bool, freed: &mut bool) -> Result<Claim, NoClaim> {
        // The common case in line, as in `start_send`: a slot of the head's
        // block that is not its last, the head ours at once, and a message
        // (not a hole) in it.
        let head = self.head.0.index.load(Ordering::Acquire);
        let block = self.head.0.block.load(Ordering::Acquire);
        let offset = (head >> SHIFT) % LAP;
        if wait_for_writers && offset + 1 < BLOCK_CAP && !block.is_null() {
            // Empty: said here, not again after the slow path's fence (a
            // receiver that keeps up with its sender asks at every turn).
            let new_head = self.head_after(head)?;
            if self
                .head
                .0
                .index
                .compare_exchange_weak(head, new_head, Ordering::SeqCst, Ordering::Acquire)
                .is_ok()
            {
                // Looked at only now: before the claim, other receivers
                // could have read and freed the block.
                // SAFETY: the slot is ours: its block lives until we read
                // it.
                let slot = unsafe { &(*block).slots[offset] };
                if slot.state.load(Ordering::Acquire) & (WRITE | HOLE) == WRITE {
                    return Ok(Claim::of_block(block, offset));
                }
                // SAFETY: claimed just now, as above.
                return unsafe { self.claimed_unwritten(block, offset, freed) };
            }
        }
        self.start_recv_slow(wait_for_writers, freed)
    }

    unsafe fn read(&self, claim: Claim) -> T {
        let (block, offset) = claim.block::<T>();
        // SAFETY: the caller's contract: a written slot we claimed; its
        // block lives until we release it.
        let message = unsafe {
            (*block).slots[offset]
                .message
                .with(|m| m.read().assume_init())
        };
        // SAFETY: our claim, its message out.
        unsafe { Block::release(block, offset) };
        message
    }

    fn disconnect(&self) -> bool {
        self.tail.0.index.fetch_or(MARK, Ordering::SeqCst) & MARK == 0
    }

    fn is_drained(&self) -> bool {
        let tail = self.tail.0.index.load(Ordering::SeqCst);
        tail & MARK == 0 && self.head.0.index.load(Ordering::SeqCst) >> SHIFT == tail >> SHIFT
    }

    fn recv_ready(&self) -> bool {
        let tail = self.tail.0.index.load(Ordering::SeqCst);
        tail & MARK != 0 || self.head.0.index.load(Ordering::SeqCst) >> SHIFT != tail >> SHIFT
    }

    fn send_ready(&self) -> bool {
        true
    }

    fn is_full(&self) -> bool {
        false
    }

    fn len(&self) -> usize {
        loop {
            let tail = self.tail.0.index.load(Ordering::SeqCst);
            let head = self.head.0.index.load(Ordering::SeqCst);
            if self.tail.0.index.load(Ordering::SeqCst) != tail {
                continue;
            }
            let (mut h, mut t) = (head >> SHIFT, tail >> SHIFT);
            // A position at a marker counts as the next block's first.
            if h % LAP == BLOCK_CAP {
                h += 1;
            }
            if t % LAP == BLOCK_CAP {
                t += 1;
            }
            // From the start of the head's lap: the markers crossed are
            // the laps `t` is past.
            let base = h - h % LAP;
            let (h, t) = (h - base, t - base);
            return t - h - t / LAP;
        }
    }

    fn capacity(&self) -> Option<usize> {
        None
    }
}

impl Claim {
    /// A list's claim: its slot's block, and its index in `pos`.
    fn of_block<T>(block: *mut Block<T>, offset: usize) -> Claim {
        Claim {
            slot: block.cast::<()>(),
            pos: offset,
        }
    }

    fn block<T>(self) -> (*mut Block<T>, usize) {
        (self.slot.cast::<Block<T>>().cast_mut(), self.pos)
    }
}

impl<T> Drop for ListSlots<T> {
    fn drop(&mut self) {
        // (Loads, not `get_mut`: loom's atomics have none. Nothing else
        // is left to race with.)
        let mut head = self.head.0.index.load(Ordering::Relaxed) >> SHIFT;
        let tail = self.tail.0.index.load(Ordering::Relaxed) >> SHIFT;
        let mut block = self.head.0.block.load(Ordering::Relaxed);
        while head != tail {
            let offset = head % LAP;
            if offset < BLOCK_CAP {
                // SAFETY: between head and tail, the block is alive and
                // its slot was claimed by a send (and never read).
                let slot = unsafe { &(*block).slots[offset] };
                let state = slot.state.load(Ordering::Relaxed);
                if state & WRITE != 0 && state & HOLE == 0 {
                    // SAFETY: written and never read: a message to drop.
                    unsafe { slot.message.with_mut(|m| (*m).assume_init_drop()) };
                }
            } else {
                // SAFETY: past its last slot: no one uses it any more.
                let next = unsafe { (*block).next.load(Ordering::Relaxed) };
                // SAFETY: as above.
                unsafe { Block::free(block) };
                block = next;
            }
            head += 1;
        }
        if !block.is_null() {
            // SAFETY: the last block, no one uses it any more.
            unsafe { Block::free(block) };
        }
    }
}
