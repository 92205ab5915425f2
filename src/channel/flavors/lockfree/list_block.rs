//! The blocks of an `unbounded()` channel's list (`list.rs`): `LAP - 1`
//! slots each, allocated zeroed, and freed by their readers — the reader
//! of a block's last slot, or, when earlier slots are still being read,
//! the last of those readers.

#[cfg(not(loom))]
use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::mem::MaybeUninit;

use crate::atomic::{AtomicPtr, AtomicUsize, Cell, Ordering, spin_loop};
use crate::channel::backoff::Pause;

/// Positions a block spans: its slots and a marker (see `list.rs`).
#[cfg(not(loom))]
pub(super) const LAP: usize = 32;
/// In a loom model, blocks of three slots: a model crosses from one block
/// to the next (install, move, free) with a handful of messages.
#[cfg(loom)]
pub(super) const LAP: usize = 4;
pub(super) const BLOCK_CAP: usize = LAP - 1;

/// A slot's state bits.
pub(super) const WRITE: usize = 1;
const READ: usize = 2;
const DESTROY: usize = 4;
pub(super) const HOLE: usize = 8;

pub(super) struct Slot<T> {
    pub(super) message: Cell<MaybeUninit<T>>,
    pub(super) state: AtomicUsize,
}

pub(super) struct Block<T> {
    pub(super) next: AtomicPtr<Block<T>>,
    pub(super) slots: [Slot<T>; BLOCK_CAP],
}

impl<T> Block<T> {
    /// A new block, straight on the heap (a block of large messages
    /// would not fit a fiber's stack).
    #[cfg(not(loom))]
    pub(super) fn alloc() -> *mut Block<T> {
        let layout = Layout::new::<Block<T>>();
        // SAFETY: a block is never zero-sized (it holds an `AtomicPtr`).
        let block = unsafe { alloc_zeroed(layout) }.cast::<Block<T>>();
        if block.is_null() {
            handle_alloc_error(layout);
        }
        // All zeroes is a valid block: a null `next`, states 0 (nothing
        // written) and uninitialised messages.
        block
    }

    /// # Safety
    ///
    /// `block` came from [`Block::alloc`] and nothing uses it any more.
    #[cfg(not(loom))]
    pub(super) unsafe fn free(block: *mut Block<T>) {
        // SAFETY: the caller's contract; its messages were read or
        // dropped already (a `MaybeUninit` drops nothing).
        unsafe { dealloc(block.cast(), Layout::new::<Block<T>>()) };
    }

    /// In a model, a block made field by field (loom's atomics are not
    /// plain integers: all zeroes is not one) in memory loom tracks, so
    /// that a block freed twice, or never, fails the model.
    #[cfg(loom)]
    pub(super) fn alloc() -> *mut Block<T> {
        let layout = std::alloc::Layout::new::<Block<T>>();
        // SAFETY: a block is never zero-sized (it holds an `AtomicPtr`).
        let block = unsafe { loom::alloc::alloc(layout) }.cast::<Block<T>>();
        if block.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        let fresh = Block {
            next: AtomicPtr::new(std::ptr::null_mut()),
            slots: std::array::from_fn(|_| Slot {
                message: Cell::new(MaybeUninit::uninit()),
                state: AtomicUsize::new(0),
            }),
        };
        // SAFETY: just allocated with a block's layout, not yet shared.
        unsafe { block.write(fresh) };
        block
    }

    /// # Safety
    ///
    /// As the other `free`.
    #[cfg(loom)]
    pub(super) unsafe fn free(block: *mut Block<T>) {
        // Freeing is a write to every slot: loom fails the model if a
        // read of a message is not ordered before it (a block freed under
        // a reader).
        // SAFETY: the caller's contract (the closure touches nothing).
        for slot in unsafe { &(*block).slots } {
            slot.message.with_mut(|_| ());
        }
        // SAFETY: the caller's contract: made by `alloc`, unused now; its
        // messages were read or dropped (a `MaybeUninit` drops nothing).
        unsafe {
            std::ptr::drop_in_place(block);
            loom::alloc::dealloc(block.cast(), std::alloc::Layout::new::<Block<T>>());
        }
    }

    /// The next block, waited for: its installer is between two stores.
    pub(super) fn wait_next(&self) -> *mut Block<T> {
        loop {
            let next = self.next.load(Ordering::Acquire);
            if !next.is_null() {
                return next;
            }
            spin_loop();
        }
    }

    /// Frees `block` once every slot from `start` on has been read: a
    /// slot not read yet is asked to do it when it is.
    ///
    /// # Safety
    ///
    /// Called by the reader of the block's last slot (`start` 0), or by a
    /// reader that found its slot asked to (`start` its index + 1).
    unsafe fn destroy(block: *mut Block<T>, start: usize) {
        for i in start..BLOCK_CAP - 1 {
            // SAFETY: the block lives until this walk frees it or hands
            // the freeing to a slot's reader.
            let slot = unsafe { &(*block).slots[i] };
            if slot.state.load(Ordering::Acquire) & READ == 0
                && slot.state.fetch_or(DESTROY, Ordering::AcqRel) & READ == 0
            {
                // That slot's reader goes on from there.
                return;
            }
        }
        // SAFETY: every slot is read, and no one else is left to free it.
        unsafe { Block::free(block) };
    }

    /// Marks a slot read; the reader of the block's last slot, or one
    /// asked to, frees the block.
    ///
    /// # Safety
    ///
    /// `block` holds the slot `offset`, claimed by the caller, whose
    /// message is out (read, or a hole).
    pub(super) unsafe fn release(block: *mut Block<T>, offset: usize) {
        if offset + 1 == BLOCK_CAP {
            // SAFETY: the caller read the block's last slot.
            unsafe { Block::destroy(block, 0) };
        } else {
            // SAFETY: the block lives until every slot is read (ours not
            // yet: marked now).
            let slot = unsafe { &(*block).slots[offset] };
            if slot.state.fetch_or(READ, Ordering::AcqRel) & DESTROY != 0 {
                // SAFETY: asked to go on freeing from the next slot.
                unsafe { Block::destroy(block, offset + 1) };
            }
        }
    }
}

/// The state of a claimed slot once its writer wrote it: a send between
/// its claim and its write (a `select!` arm's message being made, perhaps:
/// the pause lets it run) is waited for. Not a point to unwind at: the
/// claim must be completed.
pub(super) fn written<T>(slot: &Slot<T>) -> usize {
    let mut wait = Pause::uncancellable();
    loop {
        let state = slot.state.load(Ordering::Acquire);
        if state & WRITE != 0 {
            return state;
        }
        wait.pause();
    }
}
