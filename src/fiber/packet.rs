//! The packet a fiber leaves its result in for its `JoinHandle`: one
//! allocation, owned jointly by the fiber's end and the handle's end, and
//! where the fiber lives (to cancel it). Here: the packet, its state word,
//! its allocation and the fiber's end; the handle's end (waiting for the
//! result, taking it) is `packet/handle_end.rs`.

use std::alloc::{self, Layout};
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::task::{Context, Poll};

use crate::fiber::Fiber;
use crate::fiber::fiber_ref::FiberRef;
use crate::fiber::scope_data::ScopeData;
use crate::scheduler::blocks::{self, BLOCK};
use crate::scheduler::context;
use crate::scheduler::core::Core;
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::park::{Unparker, park_current};
use crate::scheduler::wait_on::WaitOn;

use crate::fiber::JoinError;

mod handle_end;
pub(crate) use handle_end::{HandleEnd, Registered};

/// The handle has registered a waiter in the packet.
const WAITING: u8 = 1;
/// The handle is gone: whoever finishes last frees the packet.
const HANDLE_GONE: u8 = 2;
/// The fiber has its result in and is handing it over: the waiter slot is
/// the fiber's now, and `done` follows within a few instructions.
const COMPLETING: u8 = 4;
/// Set with `WAITING` when the waiter is a `join` from inside the fiber's
/// own runtime. The contexts of a runtime (its fibers and its root) run one
/// at a time on one thread, and `join` owns the handle until it returns, so
/// from then on the two ends of the packet are never used at the same time:
/// both update the state with plain loads and stores instead of
/// read-modify-writes.
const LOCAL: u8 = 8;

/// Where a fiber leaves its result for its [`JoinHandle`]: one allocation
/// per fiber, owned jointly by the fiber ([`FiberEnd`]) and the handle
/// ([`HandleEnd`]), with no reference count: the state word and the `done`
/// flag say who owns it.
///
/// # Invariant
///
/// - `result` is written by the fiber before it sets `COMPLETING`, and read
///   by the handle only after it saw `done` (Acquire).
/// - `waiter` belongs to the handle while `WAITING` and `COMPLETING` are
///   both clear. The handle publishes it by setting `WAITING`, and may take
///   it back by clearing `WAITING` with a CAS (which fails once the fiber
///   set `COMPLETING`). The fiber sets `COMPLETING` first and takes the
///   waiter only if `WAITING` was set at that moment.
/// - Setting `done` is the fiber's last access, unless it found
///   `HANDLE_GONE` when it set `COMPLETING`: then it frees the packet
///   itself. So a handle that saw `done` owns the packet alone and frees it
///   on drop. A handle that sets `HANDLE_GONE` before `COMPLETING` leaves
///   the packet to the fiber; one that finds `COMPLETING` already set waits
///   the few instructions until `done` and frees it.
///
/// `done` is a word of its own, written with a plain release store, so a
/// spawn and join costs two atomic read-modify-writes (the handle's
/// `WAITING`, the fiber's `COMPLETING`), where two `Arc`s (fiber and
/// handle) and a state word cost seven; and none at all when the handle
/// joins from inside the fiber's runtime (see [`LOCAL`]), the usual case.
///
/// The packet also holds what the handle knows of its fiber (id, name and
/// where to cancel it), which only the handle reads: a [`JoinHandle`] is
/// then one pointer, returned and passed in a register.
pub(crate) struct Packet<T> {
    pub(crate) state: AtomicU8,
    pub(crate) done: AtomicBool,
    /// The size of the packet's allocation when it has room for a deferred
    /// start after it (see [`packet`]), 0 when it has none (a block, or a
    /// `Packet<T>` alone). In what would be padding after the state words.
    alloc_size: u32,
    /// The base-2 logarithm of that allocation's alignment.
    alloc_align_log2: u8,
    pub(crate) result: UnsafeCell<Option<Result<T, JoinError>>>,
    pub(crate) waiter: UnsafeCell<Option<Unparker>>,
    /// For a scoped fiber: told when an unjoined result was a panic.
    pub(crate) scope: Option<NonNull<ScopeData>>,
    pub(crate) fiber: Fiber,
    pub(crate) at: FiberRef,
}

impl<T> Drop for Packet<T> {
    fn drop(&mut self) {
        if let Some(scope) = self.scope
            && matches!(self.result.get_mut(), Some(Err(e)) if e.is_panic())
        {
            // a scoped packet is freed by one of its two ends, both
            // on the scope's thread: the fiber's (scoped fibers run on the
            // scope's runtime) and the `ScopedJoinHandle`'s (`!Send`, and it
            // borrows the scope); and before the scope's data is gone, since
            // the scope waits for its fibers' exit and the handle cannot
            // outlive `'scope`.
            // SAFETY: as argued just above.
            unsafe { scope.as_ref().a_fiber_panicked.set(true) };
        }
    }
}

/// Sets `bit` in a packet's state word, which must be clear (each bit is
/// set by one side only, once, and that side knows it has not set it yet);
/// returns the state before.
///
/// A `fetch_add` of a clear bit is a `fetch_or`; on x86 an or that returns
/// the old value compiles to a load and a `lock cmpxchg` loop, an add to a
/// single `lock xadd`.
#[inline]
fn set_once(state: &AtomicU8, bit: u8) -> u8 {
    let before = state.fetch_add(bit, Ordering::AcqRel);
    debug_assert_eq!(before & bit, 0, "packet state bit {bit} set twice");
    before
}

/// A new packet for fiber `id` named `name`, which lives `at`: the fiber's
/// end and the handle's end. `core`: the runtime the fiber is spawned on
/// from its own thread, whose cache of blocks it comes from if it fits one.
///
/// `room`: a layout of size 0, or the layout of a deferred start (see
/// `fiber::entry`) to make room for right after the packet, in the same
/// allocation ([`FiberEnd::room`] finds it): a spawn that defers its start
/// then allocates once, and its start is freed with the packet, whose
/// memory is in cache then anyway. Such a packet is not a block.
///
/// Always inlined: the caller's values are then stored straight into the
/// block (see [`HandleEnd::register`] on copies through the stack); a
/// packet without room costs one test of `room` more.
#[inline(always)]
pub(crate) fn packet<T>(
    core: Option<&Core>,
    scope: Option<NonNull<ScopeData>>,
    id: FiberId,
    name: Option<Arc<str>>,
    at: FiberRef,
    room: Layout,
) -> (FiberEnd<T>, HandleEnd<T>) {
    let (mut alloc_size, mut alloc_align_log2) = (0, 0);
    let ptr = if room.size() != 0 {
        let ptr;
        (ptr, alloc_size, alloc_align_log2) = alloc_with_room::<T>(room);
        ptr
    } else if blocks::fits(Layout::new::<Packet<T>>()) {
        let block = core
            .and_then(Core::take_block)
            // SAFETY: BLOCK has a non-zero size.
            .or_else(|| NonNull::new(unsafe { alloc::alloc(BLOCK) }))
            .unwrap_or_else(|| alloc::handle_alloc_error(BLOCK));
        block.cast::<Packet<T>>()
    } else {
        let layout = Layout::new::<Packet<T>>();
        // SAFETY: a packet has a non-zero size (its state words).
        let raw = unsafe { alloc::alloc(layout) };
        NonNull::new(raw)
            .unwrap_or_else(|| alloc::handle_alloc_error(layout))
            .cast()
    };
    // Field by field, straight into the block: a `Packet` value built on
    // the stack and copied in is read back in 16-byte pieces that the CPU
    // cannot forward from the narrower stores that just wrote them, a stall
    // of a dozen cycles on every spawn.
    // SAFETY: `ptr` is a fresh allocation of at least Packet<T>'s layout;
    // each field is written once, through a raw place (nothing reads the
    // uninitialised memory).
    unsafe {
        let p = ptr.as_ptr();
        (&raw mut (*p).state).write(AtomicU8::new(0));
        (&raw mut (*p).done).write(AtomicBool::new(false));
        (&raw mut (*p).alloc_size).write(alloc_size);
        (&raw mut (*p).alloc_align_log2).write(alloc_align_log2);
        (&raw mut (*p).result).write(UnsafeCell::new(None));
        (&raw mut (*p).waiter).write(UnsafeCell::new(None));
        (&raw mut (*p).scope).write(scope);
        (&raw mut (*p).fiber).write(Fiber { id, name });
        (&raw mut (*p).at).write(at);
    }
    (FiberEnd(ptr), HandleEnd(ptr))
}

/// Allocates a packet with room for `room` after it: its memory, and the
/// size and alignment (log2) of the allocation. Out of line: one spawn in
/// many defers its start (see `fiber::entry`).
#[inline(never)]
fn alloc_with_room<T>(room: Layout) -> (NonNull<Packet<T>>, u32, u8) {
    let layout = with_room::<T>(room).0;
    // Sizes beyond 4 GiB cannot be stored; a start that large cannot have
    // been on anyone's stack to be spawned either.
    let size = u32::try_from(layout.size()).expect("fibra: a fiber's start over 4 GiB");
    // SAFETY: the layout holds a packet: its size is not zero.
    let raw = unsafe { alloc::alloc(layout) };
    let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
    (ptr.cast(), size, layout.align().trailing_zeros() as u8)
}

/// The layout of a packet with room for `room` after it, and the room's
/// offset.
#[inline(always)]
fn with_room<T>(room: Layout) -> (Layout, usize) {
    let (layout, offset) = Layout::new::<Packet<T>>()
        .extend(room)
        .expect("fibra: a fiber's start too large to allocate");
    (layout.pad_to_align(), offset)
}

/// Drops a packet and frees its memory: a block goes to the cache of the
/// runtime entered on this thread, if any.
///
/// # Safety
///
/// `ptr` came from [`packet`], its last owner frees it, once.
#[inline]
unsafe fn free<T>(ptr: NonNull<Packet<T>>) {
    // SAFETY: the packet is live until dropped below.
    let (size, align_log2) = unsafe { (ptr.as_ref().alloc_size, ptr.as_ref().alloc_align_log2) };
    if size != 0 {
        // SAFETY: the packet is live and nobody uses it any more (nor its
        // room, whose start was moved out when the fiber ran). `packet`
        // allocated it with this size and alignment, which it stored.
        unsafe {
            ptr.drop_in_place();
            let layout = Layout::from_size_align_unchecked(size as usize, 1 << align_log2);
            alloc::dealloc(ptr.as_ptr().cast(), layout);
        }
    } else if blocks::fits(Layout::new::<Packet<T>>()) {
        // SAFETY: the packet is live and nobody uses it any more.
        unsafe { ptr.drop_in_place() };
        let block = ptr.cast::<u8>();
        match context::current() {
            // SAFETY: `packet` allocated it with BLOCK; it is free now.
            Some(core) => unsafe { core.give_back_block(block) },
            // SAFETY: as above.
            None => unsafe { alloc::dealloc(block.as_ptr(), BLOCK) },
        }
    } else {
        // SAFETY: `packet` allocated it from the global allocator with
        // Packet<T>'s layout, as `Box` does, and initialised it.
        drop(unsafe { Box::from_raw(ptr.as_ptr()) });
    }
}

/// The fiber's end of a packet: [`complete`](FiberEnd::complete) once.
pub(crate) struct FiberEnd<T>(NonNull<Packet<T>>);

// SAFETY: the state protocol serialises every access to the packet, from
// any thread; the result is written on the fiber's thread and read on the
// handle's, hence `T: Send`. (A scoped packet's `scope` is dereferenced on
// drop: its fiber end stays on the scope's thread because a started fiber
// never migrates and scoped fibers are spawned on the scope's own runtime;
// its handle end is wrapped in a `ScopedJoinHandle`, which is `!Send`.)
unsafe impl<T: Send> Send for FiberEnd<T> {}

impl<T> FiberEnd<T> {
    /// The room for a `U` that [`packet`] made after the packet, if it was
    /// given `U`'s layout. Nothing else uses the room, and it lasts until
    /// the packet is freed, which this end holds off until it completes.
    #[inline(always)]
    pub(crate) fn room<U>(&self) -> Option<NonNull<U>> {
        let (layout, offset) = with_room::<T>(Layout::new::<U>());
        // SAFETY: this end keeps the packet alive.
        let packet = unsafe { self.0.as_ref() };
        let made_for_u = packet.alloc_size != 0
            && packet.alloc_size as usize == layout.size()
            && 1 << packet.alloc_align_log2 == layout.align();
        // A packet made with room for `U` has this size and alignment (one
        // made without has size 0), so the room is `offset..offset +
        // size_of::<U>()` of its allocation, aligned for `U`.
        // SAFETY: as argued just above.
        made_for_u.then(|| unsafe { self.0.cast::<u8>().add(offset).cast::<U>() })
    }

    /// Hands the fiber's outcome to the handle, waking it if it waits.
    pub(crate) fn complete(self, result: Result<T, JoinError>) {
        self.complete_in(None, result);
    }

    /// As [`FiberEnd::complete`], from the fiber itself, running on `core`:
    /// a waiter in `core` is then woken without looking it up.
    #[inline]
    pub(crate) fn complete_in(self, core: Option<&Core>, result: Result<T, JoinError>) {
        let ptr = self.0;
        // SAFETY: until this end sets `done` (or frees it) the packet is
        // alive: the handle frees it only after seeing `done`.
        let packet = unsafe { ptr.as_ref() };
        // SAFETY: only this end writes `result`, before COMPLETING; it is
        // still `None`, so overwriting it drops nothing.
        unsafe { packet.result.get().write(Some(result)) };
        let seen = packet.state.load(Ordering::Relaxed);
        let before = if seen & LOCAL != 0 {
            // The waiter is a join in this runtime, which is not running
            // while we are (see LOCAL): a plain store will do.
            packet.state.store(seen | COMPLETING, Ordering::Relaxed);
            seen
        } else {
            set_once(&packet.state, COMPLETING)
        };
        if before & HANDLE_GONE != 0 {
            // Nobody will read the result: free the packet, and the result
            // with it (a scope learns from the drop that a panic went
            // unjoined).
            // SAFETY: the handle left before COMPLETING, so it left the
            // packet to this end, the last owner.
            unsafe { free(ptr) };
            return;
        }
        if before & WAITING != 0
            && let Some(core) = core
            // SAFETY: WAITING was set when COMPLETING went in, so the
            // handle published a waiter and can no longer take it back.
            && let Some(Unparker::Local(waiter)) = unsafe { &*packet.waiter.get() }
        {
            // A join in this runtime (the usual case), woken here without
            // moving the whole `Unparker` out of its slot.
            let waiter = *waiter;
            // SAFETY: as above, the slot is ours; the local unparker in it
            // owns nothing, so overwriting it leaks nothing.
            unsafe { packet.waiter.get().write(None) };
            packet.done.store(true, Ordering::Release);
            if !waiter.unpark_in(core) {
                Unparker::Local(waiter).unpark();
            }
            return;
        }
        let waiter = if before & WAITING != 0 {
            // SAFETY: WAITING was set when COMPLETING went in, so the
            // handle published a waiter and can no longer take it back.
            unsafe { (*packet.waiter.get()).take() }
        } else {
            None
        };
        // The last access: from here on the handle may free the packet.
        packet.done.store(true, Ordering::Release);
        if let Some(waiter) = waiter {
            waiter.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(crate) fn packets_of_small_results_fit_a_cached_block() {
        // A packet that does not fit is allocated and freed with malloc on
        // every spawn: keep the usual results within a block.
        assert!(blocks::fits(Layout::new::<Packet<()>>()));
        assert!(blocks::fits(Layout::new::<Packet<u64>>()));
        assert!(blocks::fits(Layout::new::<Packet<String>>()));
        assert!(blocks::fits(Layout::new::<Packet<std::io::Result<usize>>>()));
    }

    #[test]
    fn a_packet_with_room_has_it_right_after_itself_and_frees_whole() {
        type Room = [u128; 3];
        let at = || FiberRef::Queued(Arc::new(crate::fiber::fiber_ref::Placement::queued()));
        let id = FiberId::next();
        let (fiber, handle) = packet::<String>(None, None, id, None, at(), Layout::new::<Room>());
        let room = fiber.room::<Room>().expect("the room made for it");
        let start = fiber.0.as_ptr() as usize;
        assert!(room.as_ptr() as usize >= start + size_of::<Packet<String>>());
        assert_eq!(room.as_ptr() as usize % align_of::<Room>(), 0);
        assert!(fiber.room::<u8>().is_none(), "no room for another type");
        // SAFETY: the room is the fiber end's to use, and big enough.
        unsafe { room.write([7; 3]) };
        fiber.complete(Ok("done".to_string()));
        assert_eq!(handle.take_result().unwrap(), "done");
        drop(handle); // frees the packet with the layout it was made with

        let (fiber, handle) = packet::<()>(None, None, id, None, at(), Layout::new::<()>());
        assert!(fiber.room::<Room>().is_none(), "made without room");
        fiber.complete(Ok(()));
        drop(handle);
    }
}
