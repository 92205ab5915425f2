//! The body's side: handing a value out and suspending.

use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic;

use super::{Control, GeneratorCancel};
use crate::arch;
use crate::stack::{overflow, pin};

/// The body's handle for handing out values; see [`Generator`](super::Generator).
pub struct Yielder<T> {
    pub(super) control: *const Control,
    /// Only the generator's own thread may use it (`*mut`: not `Send`),
    /// and only for values of its `T` (`*mut`: invariant, so that a
    /// `Yielder<&'long str>` cannot yield a `&'short str`).
    pub(super) _marker: PhantomData<*mut T>,
}

impl<T> Yielder<T> {
    /// Hands `value` to the `next` that resumed the generator and suspends
    /// the body until the following `next`.
    ///
    /// ```
    /// let squares = fibra::Generator::new(|y| {
    ///     for i in 1..=3 {
    ///         y.yield_(i * i);
    ///     }
    /// });
    /// assert_eq!(squares.collect::<Vec<_>>(), [1, 4, 9]);
    /// ```
    ///
    /// # Panics
    ///
    /// When called from anywhere but its own generator's body: from a
    /// fiber or another generator it was lent to. And when the body would be
    /// suspended inside `fibra::scope`, `block_on`/`run`, or `fibra::timeout`:
    /// each holds on to the runtime entered on the thread until its closure
    /// returns, and a suspended body may be resumed elsewhere or never.
    #[inline]
    pub fn yield_(&self, value: T) {
        // `self` borrows the Yielder, a local of the body's entry
        // frame, so that frame is live; the generator owning the control box
        // cannot be dropped while its body runs (its `resume` holds it
        // borrowed) nor while it is suspended without first ending the body.
        // SAFETY: as argued just above.
        let control = unsafe { &*self.control };
        let here = overflow::running();
        if here != control.header {
            panic!(
                "fibra::Yielder::yield_ called outside its generator's body \
                 (from a fiber or generator it was lent to): a Yielder can only \
                 suspend its own generator"
            );
        }
        // SAFETY: we run on the generator's stack (checked just above),
        // which is mapped while the body runs.
        if unsafe { pin::pins(here) } != 0 {
            panic!(
                "fibra::Yielder::yield_ called inside `fibra::scope`, \
                 `block_on`/`run` or `fibra::timeout` in a generator's body: \
                 those hold the runtime until their closure returns, and a \
                 suspended generator may be resumed elsewhere or never"
            );
        }
        if control.cancel.get() {
            if crate::scheduler::park::unwinding() {
                return; // a destructor yielding during the cancel: drop it
            }
            panic::resume_unwind(Box::new(GeneratorCancel));
        }
        // Handed over by address: the `next` that resumed us moves it out
        // of this frame before anything else runs on this stack (see
        // `Generator::resume`); it is not dropped here. Never 0, which says
        // the body has ended.
        let value = ManuallyDrop::new(value);
        let handed = &raw const *value as usize;
        // we run on the generator's own stack (checked above), so
        // its body runs and its caller is suspended in `resume` with its
        // context in `caller_sp`; `generator_sp` lives in the box. No frame
        // of the body holds a runtime (the stack is not pinned), so it may
        // be resumed in any context.
        // SAFETY: as argued just above.
        unsafe {
            arch::suspend(
                control.generator_sp.as_ptr(),
                control.caller_sp.get(),
                handed,
            )
        };
        // Resumed by `next`, or by `Drop` to be cancelled.
        if control.cancel.get() {
            panic::resume_unwind(Box::new(GeneratorCancel));
        }
    }
}

impl<T> fmt::Debug for Yielder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Yielder").finish_non_exhaustive()
    }
}
