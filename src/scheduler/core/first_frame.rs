//! A fiber whose first frame is built when it first runs, not when it is
//! spawned.
//!
//! A spawn normally writes the fiber's start (its closure and its end of
//! the result packet), its `Meta`, its stack header and its first switch
//! frame at the top of its new stack. When many fibers are queued ahead of
//! it, it runs long after: by then those lines (and, on a fresh stack, the
//! page's translation) have left the caches, and the fiber's first run pays
//! for the same memory twice. A burst of a million spawns spent more time
//! coming back to those stacks than writing them.
//!
//! A deferred fiber instead keeps its start off the stack, in what this
//! file calls its box: the spare room of its join packet's block when the
//! start fits there, or else a heap box of its own. The box's head is a
//! [`FirstFrame`], and the record's `sp` points at that head with the low
//! bit set (a saved stack pointer is 8-byte aligned, so the bit is free).
//! The switch that first runs it (`hand_over`, through [`build`]) writes
//! the `Meta`, the header and the first frame, puts the real stack pointer
//! in the record and switches in: the stack is touched once, right before
//! the fiber runs on it, and a fresh page comes in hot (faulted in then,
//! or, in a burst, populated with the next ones' just before: see
//! `first_run.rs`). The fiber frees a heap box once it has its start out
//! of it: at once for a small start, at its end for a large one (see
//! `fiber::entry`); the packet's room goes with the packet, which outlives
//! the fiber's start.

use std::panic::Location;
use std::ptr::NonNull;

use crate::arch::{self, EntryFn};
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::watch::{Meta, meta_below};
use crate::stack::{Stack, StackHeader};

/// What the first switch to a deferred fiber needs: the head of its boxed
/// start (`repr(C)` there, so a pointer to the box is a pointer to this).
#[repr(C)]
pub(crate) struct FirstFrame {
    /// The fiber's first function, given the box as its `data`.
    pub(crate) entry: EntryFn,
    /// Where it was spawned (its `Meta`'s, once it has one).
    pub(crate) location: &'static Location<'static>,
}

/// The `sp` a record holds for a fiber whose first frame is deferred to
/// the box headed by `head`.
#[inline]
pub(crate) fn deferred_sp(head: NonNull<FirstFrame>) -> *mut u8 {
    head.as_ptr().cast::<u8>().map_addr(|a| a | 1)
}

/// The head of the boxed start a record's `sp` stands for, if the fiber's
/// first frame is not built yet.
#[inline(always)]
pub(crate) fn deferred(sp: *mut u8) -> Option<*const FirstFrame> {
    (sp.addr() & 1 != 0).then(|| sp.map_addr(|a| a & !1).cast_const().cast())
}

/// Writes the `Meta`, the stack header and the first switch frame of the
/// deferred fiber `id` (named `name`) on `stack`, whose record's `sp`
/// stands for `head`; returns the stack pointer to switch to.
///
/// # Safety
///
/// The fiber has never run, its record owns `stack` and `name` and its
/// `sp` is `deferred_sp(head)`, with `head` the live box `fiber::entry`
/// made; no one else writes the stack (it has not run).
#[cold]
#[inline(never)]
pub(super) unsafe fn build(
    stack: &Stack,
    id: FiberId,
    name: Option<&str>,
    head: *const FirstFrame,
) -> *mut u8 {
    let header = stack.header();
    let meta = meta_below(header);
    // SAFETY: the box is live until the fiber's entry frees it, which has
    // not run yet (the caller's contract).
    let (entry, location) = unsafe { ((*head).entry, (*head).location) };
    // The header slot and the `Meta` right below it are the top of the
    // stack the record owns, which nothing uses yet; both addresses are
    // 16-byte aligned (the header's slot is, and `Meta`'s size is a
    // multiple of 16). The
    // name is kept alive by the record, which outlives the fiber's run.
    // SAFETY: as argued just above.
    unsafe {
        header.write(StackHeader::new(stack, id.as_u64(), name));
        meta.write(Meta::new(Some(location)));
    }
    // SAFETY: `meta` is 16-byte aligned with the rest of the usable stack
    // below it, unused; the box stays valid until the entry reads it.
    unsafe { arch::init_stack(meta.cast(), entry, head.cast_mut().cast()) }
}
