//! Frames that tie the stack they run on to the runtime entered on its thread.
//!
//! Some of fibra's own frames hold on to the runtime that is entered on this
//! thread for as long as they live, while user code runs inside them:
//!
//! - `fibra::scope` keeps the runtime's `Core` to spawn on, and its fibers
//!   borrow from the frame until the scope has waited for all of them;
//! - `block_on`, `run`, `turn` and a runtime's drop keep the thread's
//!   runtime context set (the `Enter` guard) until they return;
//! - `fibra::timeout` has set a deadline on the running fiber's record and
//!   takes it back when its closure returns.
//!
//! Each is sound only while its frame keeps running inside that same entry
//! of the runtime, on the fiber (or root) it started on. On a fiber's own
//! stack that always holds. On a generator's stack it need not:
//! `Yielder::yield_` suspends the body's frames, and the generator may then
//! be resumed by another fiber, outside the runtime, after the runtime is
//! gone, or never. So each such frame *pins* the stack it runs on — counts
//! itself in that stack's [`StackHeader`] — for as long as it lives, and
//! `yield_` refuses (panics) to suspend a pinned stack. A generator's
//! suspended frames therefore never hold a runtime.
//!
//! The thread's own stack has no header and is never suspended by a
//! generator: pins made there are not counted.

use std::marker::PhantomData;

use super::StackHeader;
use super::overflow;

/// A frame's pin on the stack it runs on; see the module docs. Unpins when
/// dropped (also while unwinding).
///
/// # Invariant
///
/// `header` is null or the header of the stack this guard lives on: the
/// guard is a local of a frame on that stack (it is `!Send` and is never
/// moved into a heap value), so the stack stays mapped for as long as the
/// guard can be dropped.
pub(crate) struct StackPin {
    header: *const StackHeader,
    /// A frame's guard: it stays on its thread (and its stack).
    _local: PhantomData<*const ()>,
}

impl StackPin {
    /// Pins the stack this thread is running on now.
    #[inline]
    pub(crate) fn new() -> StackPin {
        let header = overflow::running();
        // a non-null RUNNING names the header of the stack this
        // thread runs on (the scheduler and the generators set it at every
        // switch), at the top of that stack's mapping, which is mapped while
        // we run on it. Only code running on a stack touches its `pins`.
        // SAFETY: as argued just above.
        if let Some(h) = unsafe { header.as_ref() } {
            h.pins.set(h.pins.get() + 1);
        }
        StackPin {
            header,
            _local: PhantomData,
        }
    }
}

impl Drop for StackPin {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: by the type's invariant the header is null or that of the
        // stack this guard (and so this drop) runs on, which is mapped.
        if let Some(h) = unsafe { self.header.as_ref() } {
            h.pins.set(h.pins.get() - 1);
        }
    }
}

/// How many live frames pin the stack whose header is `header`.
///
/// # Safety
///
/// `header` is the header of a mapped stack this thread runs on.
#[inline]
pub(crate) unsafe fn pins(header: *const StackHeader) -> u32 {
    // SAFETY: forwarded from the caller.
    unsafe { (*header).pins.get() }
}
