//! The generator's first function, and which stack the thread runs on.

use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};

use super::{Control, Yielder};
use crate::arch;
use crate::stack::{StackHeader, overflow};

/// Tells the overflow handler which stack this thread now runs on (and so
/// the runtime, which saves it when it switches the running fiber out);
/// returns the previous one. Made right before `arch::resume`, with
/// nothing in between (see `overflow::set_running`).
#[inline(always)]
pub(super) fn enter_stack(header: *const StackHeader) -> *const StackHeader {
    overflow::set_running::<{ arch::RESUME_PUSHES }>(header)
}

/// Tells the overflow handler (and the runtime) that the thread is back on
/// the stack `resume` was called on, once the generator has suspended or
/// ended: the generator pushed nothing on its own stack on the way out.
#[inline(always)]
pub(super) fn leave_stack(caller: *const StackHeader) {
    overflow::return_to(caller);
}

pub(super) struct Start<F, T> {
    pub(super) body: F,
    pub(super) control: *const Control,
    pub(super) _value: PhantomData<*mut T>,
}

/// The generator's first function, on its own stack.
///
/// # Safety
///
/// Called only through the frame `init_stack` built, with `data` the boxed
/// `Start<F, T>`, whose control box outlives the generator's run.
pub(super) unsafe extern "C" fn entry<F, T>(_arg: usize, data: *mut u8) -> arch::FinalSwitch
where
    F: FnOnce(&Yielder<T>),
{
    arch::entered();
    // SAFETY: `data` is the box made by `build`, taken once.
    let start = unsafe { Box::from_raw(data.cast::<Start<F, T>>()) };
    let Start { body, control, .. } = *start;
    // SAFETY: the control box is owned by the Generator, which outlives
    // the body's run: it resumes the body until it ends before it drops
    // the box, or it is leaked and the box with it.
    let ctl = unsafe { &*control };
    let yielder = Yielder {
        control,
        _marker: PhantomData,
    };
    let outcome = if ctl.cancel.get() {
        // Dropped before it ever ran: drop the closure unrun.
        panic::catch_unwind(AssertUnwindSafe(move || drop(body)))
    } else {
        panic::catch_unwind(AssertUnwindSafe(move || body(&yielder)))
    };
    if let Err(payload) = outcome {
        ctl.panic.set(Some(payload));
    }
    // Back to the caller, suspended in `resume`, for good: the trampoline
    // makes the switch (its `ret` then pops the entry of the caller's call
    // to `resume`, as a `suspend` does). 0: no value, the end.
    let last = arch::FinalSwitch {
        load_sp: ctl.caller_sp.get(),
        arg: 0,
    };
    arch::leaving_for_good(&last);
    last
}
