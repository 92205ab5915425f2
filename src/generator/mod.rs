//! Stackful generators: a closure on its own stack that hands values out one
//! at a time with [`Yielder::yield_`], driven as an [`Iterator`].
//!
//! A generator is a coroutine with no scheduler: `next` switches straight
//! onto its stack, `yield_` switches straight back. It needs no runtime (it
//! works on any thread), and inside one it is just code run by the fiber
//! that calls `next`: if the generator's body blocks (sleeps, reads a
//! socket), that fiber parks, exactly as if the body were its own code.
//!
//! ## How a generator lives
//!
//! ```text
//!   caller stack                       generator stack (pooled, guarded)
//!   next() ── switch ───────────────▶  entry: body(&yielder) ...
//!          ◀─────────────── switch ──  yield_(v)   (v's address in rdx)
//!   next() ── switch ───────────────▶  ... returns or panics (caught)
//!          ◀──────── final switch ───  entry ends: never resumed again
//! ```
//!
//! `next` enters the generator with a call ([`arch::resume`]) and `yield_`
//! leaves it with the matching return ([`arch::suspend`], inline assembly
//! with no call of its own), so the CPU predicts every return on both sides
//! (see "Generators" in `asm/x86_64.S`). Like a call, they leave the FP
//! control words alone: the body shares its caller's. The [`Control`]
//! block both sides share is boxed: the `Generator` value may move between
//! calls, the box does not.
//!
//! A value crosses the switch as its address: `yield_` keeps it in its own
//! frame and hands the switch a pointer to it (0 says the body has ended),
//! and `next` moves it out before anything else runs on the generator's
//! stack. So a value is written once and read once, with no `Option` in
//! between (a slot in `Control` cost a round trip two stores and a load
//! more than corosensei's).
//!
//! ## What a suspended body may hold
//!
//! A suspended body is a stack of frames that the generator's owner may
//! resume anywhere on its thread, or never (a `Generator` can be leaked).
//! Three rules keep that sound:
//!
//! - **Leaking keeps nothing borrowed.** [`Generator::new`] takes a
//!   `'static` body, so a leaked generator (its stack leaked with it) leaves
//!   no frame that borrows something which then ends — the leakpocalypse
//!   of the old `thread::scoped`, where a frame inside `std::thread::scope`
//!   was abandoned while the scope's threads read its borrows. A body that
//!   borrows gets its generator from [`Generator::scoped`], which lends it
//!   out only as a `&mut` to a closure, with a lifetime brand that no other
//!   generator has (so it cannot be swapped out either), and unwinds it
//!   before returning.
//! - **No runtime in a suspended frame.** `fibra::scope`, `block_on`/`run`
//!   and `fibra::timeout` hold the runtime entered on the thread while their
//!   closure runs; they pin the stack (`stack::pin`) and `yield_` panics on a
//!   pinned stack. A suspended body thus holds nothing of any runtime, and
//!   may be resumed inside another fiber, another runtime, or none.
//! - **A `Yielder` yields only from its own stack.** It can be lent to a
//!   scoped fiber or captured by a nested generator; `yield_` there would
//!   save the wrong stack as the generator's. It checks the stack it runs on
//!   and panics if that is not its generator's.
//!
//! Dropping an unfinished generator resumes it one last time with `cancel`
//! set: its pending `yield_` unwinds the body (running its destructors), and
//! a generator that never started drops its closure unrun. A body that
//! catches that unwind and yields again is unwound again; one that yields
//! while unwinding has its value dropped, since switching away mid-unwind
//! would leave the thread's panic count to the wrong context.

use std::any::Any;
use std::cell::Cell;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;

use crate::arch;
use crate::scheduler::core::FiberId;
use crate::stack::{self, Stack, StackHeader, overflow};

mod entry;
mod scoped;
mod yielder;

use entry::{Start, enter_stack, entry, leave_stack};
pub use yielder::Yielder;

/// The unwind payload that ends a generator dropped half-way.
struct GeneratorCancel;

/// What the caller and the generator's body share.
struct Control {
    /// The generator's stack pointer while it is suspended.
    generator_sp: Cell<*mut u8>,
    /// The caller's stack pointer while the generator runs.
    caller_sp: Cell<*mut u8>,
    /// Set by `Drop`: the body must unwind (or not start).
    cancel: Cell<bool>,
    /// The body's panic, for `next` to re-raise.
    panic: Cell<Option<Box<dyn Any + Send>>>,
    /// The generator's own stack (its header), for `yield_` to check that
    /// it runs there.
    header: *const StackHeader,
}

/// Where the generator is in its life. (Not whether it runs: `next` holds
/// it borrowed `&mut` while it does, so its own body cannot reach it.)
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// Created or suspended in `yield_`: `next` resumes it.
    Suspended,
    /// Returned, panicked or cancelled: its stack is back in the pool.
    Finished,
}

/// A closure running on its own stack, handing out values with
/// [`Yielder::yield_`]; iterate it to get them.
///
/// It works with or without a runtime, and may block: inside a fiber that
/// parks the fiber. Dropping a generator before it has finished unwinds its
/// body, so its destructors run. A panic in the body comes out of the
/// `next` that resumed it; the generator is finished after that.
///
/// A generator made by [`new`](Generator::new) owns its body (`'static`,
/// `Generator<'static, T>`): it can be kept, returned and leaked. A body
/// that borrows from its surroundings runs in [`scoped`](Generator::scoped),
/// which lends its generator to a closure (`'a` is then a brand of that
/// call) and unwinds it before returning. Why: a leaked generator never
/// runs its body's destructors, and a body may be suspended inside
/// `std::thread::scope`, whose threads would then read borrows that ended.
/// The body must not yield inside `fibra::scope`, `block_on`/`run` or
/// `fibra::timeout` (each holds the runtime; see [`Yielder::yield_`]).
///
/// The body runs in the floating-point environment of the code that calls
/// `next`, as a called function would: a change of rounding mode or of
/// flush-to-zero (MXCSR, the x87 control word) on either side is seen by
/// the other. (A fiber, by contrast, keeps its own; the generator's switch
/// skips the save and compare, which on some CPUs costs as much as the rest
/// of the switch.)
///
/// ```
/// use fibra::Generator;
///
/// let fibonacci = Generator::new(|y| {
///     let (mut a, mut b) = (0u64, 1u64);
///     loop {
///         y.yield_(a);
///         (a, b) = (b, a + b);
///     }
/// });
/// let first: Vec<u64> = fibonacci.take(10).collect();
/// assert_eq!(first, [0, 1, 1, 2, 3, 5, 8, 13, 21, 34]);
/// ```
///
/// A generator stays on the thread that made it:
///
/// ```compile_fail
/// let g = fibra::Generator::new(|y| y.yield_(1));
/// std::thread::spawn(move || g.count());
/// ```
///
/// A generator that can be leaked does not borrow:
///
/// ```compile_fail
/// let data = vec![1, 2, 3];
/// let g = fibra::Generator::new(|y| {
///     for x in &data {
///         y.yield_(*x);
///     }
/// });
/// std::mem::forget(g);
/// ```
///
/// and a borrowing one cannot be swapped out of its closure to be leaked:
///
/// ```compile_fail
/// let data = vec![1, 2, 3];
/// fibra::Generator::scoped(
///     |y| {
///         for x in &data {
///             y.yield_(*x);
///         }
///     },
///     |g| {
///         let mut other = fibra::Generator::new(|y| y.yield_(0));
///         std::mem::swap(g, &mut other);
///         std::mem::forget(other);
///     },
/// );
/// ```
pub struct Generator<'a, T> {
    control: Box<Control>,
    /// `None` once finished.
    stack: Option<Stack>,
    state: State,
    /// `'static` for an owning generator, a brand of one `scoped` call for
    /// a borrowing one: invariant, so that no generator of another lifetime
    /// can take its place. `*mut T`: it runs on this thread only, and is
    /// invariant in `T`, as its body's `Yielder<T>` is.
    _marker: PhantomData<(Invariant<'a>, *mut T)>,
}

/// A lifetime marker that is neither co- nor contravariant.
type Invariant<'a> = fn(&'a ()) -> &'a ();

impl<T> Generator<'static, T> {
    /// A generator running `body` on a stack of the default size
    /// ([`DEFAULT_STACK_SIZE`](stack::DEFAULT_STACK_SIZE)). The body does
    /// not start until the first `next`.
    ///
    /// # Panics
    ///
    /// If no stack can be mapped (see [`with_stack_size`](Self::with_stack_size)
    /// for the error instead).
    ///
    /// ```
    /// let mut g = fibra::Generator::new(|y| {
    ///     y.yield_("a");
    ///     y.yield_("b");
    /// });
    /// assert_eq!(g.next(), Some("a"));
    /// assert_eq!(g.next(), Some("b"));
    /// assert_eq!(g.next(), None);
    /// ```
    pub fn new<F>(body: F) -> Generator<'static, T>
    where
        F: FnOnce(&Yielder<T>) + 'static,
    {
        match Generator::with_stack_size(stack::DEFAULT_STACK_SIZE, body) {
            Ok(g) => g,
            Err(e) => panic!("fibra::Generator::new: cannot create a stack: {e}"),
        }
    }

    /// A generator on a stack of `stack_size` bytes (rounded up to pages).
    ///
    /// # Errors
    ///
    /// If the size is zero or too large, or the stack cannot be mapped.
    ///
    /// ```
    /// let g = fibra::Generator::with_stack_size(64 * 1024, |y| y.yield_(1)).unwrap();
    /// assert_eq!(g.sum::<i32>(), 1);
    /// assert!(fibra::Generator::<()>::with_stack_size(0, |_| ()).is_err());
    /// ```
    pub fn with_stack_size<F>(stack_size: usize, body: F) -> io::Result<Generator<'static, T>>
    where
        F: FnOnce(&Yielder<T>) + 'static,
    {
        // SAFETY: the body borrows nothing: a leaked generator leaves no
        // borrow behind.
        unsafe { Generator::build(stack_size, body) }
    }
}
impl<'a, T> Generator<'a, T> {
    /// Makes a generator of any brand around `body`.
    ///
    /// # Safety
    ///
    /// Whatever `body` borrows must outlive the generator's body run,
    /// including the case where the generator is leaked and its body never
    /// ends: either `body` borrows nothing (`'static`), or the caller drops
    /// the generator before the borrows end and lets nobody leak it.
    unsafe fn build<F>(stack_size: usize, body: F) -> io::Result<Generator<'a, T>>
    where
        F: FnOnce(&Yielder<T>),
    {
        arch::check_supported()?;
        let usable = stack::validate_size(stack_size)?;
        let stack = stack::take(usable)?;
        overflow::prepare_thread(); // an overflow of the body is reported
        let control = Box::new(Control {
            generator_sp: Cell::new(ptr::null_mut()),
            caller_sp: Cell::new(ptr::null_mut()),
            cancel: Cell::new(false),
            panic: Cell::new(None),
            header: stack.header(),
        });
        let (guard_lo, guard_hi) = stack.guard();
        const NAME: &str = "<generator>";
        // SAFETY: the header slot at the top of the stack is ours to write.
        unsafe {
            stack.header().write(StackHeader {
                guard_lo,
                guard_hi,
                usable: stack.usable(),
                fiber_id: FiberId::next().as_u64(),
                name_ptr: NAME.as_ptr(),
                name_len: NAME.len(),
                pins: std::cell::Cell::new(0),
            })
        };
        // The body goes into a box (the first switch moves it onto the new
        // stack); generators are made far less often than fibers.
        let start = Box::into_raw(Box::new(Start::<F, T> {
            body,
            control: &*control as *const Control,
            _value: PhantomData,
        }));
        // SAFETY: the area below the header is free and 16-byte aligned;
        // `start` stays valid until the entry takes it (or Drop frees it:
        // it never does, it resumes the entry to drop it there).
        let sp = unsafe {
            arch::init_generator_stack(stack.below_header(), entry::<F, T>, start.cast())
        };
        control.generator_sp.set(sp);
        Ok(Generator {
            control,
            stack: Some(stack),
            state: State::Suspended,
            _marker: PhantomData,
        })
    }

    /// Whether the body has returned, panicked or been unwound.
    ///
    /// ```
    /// let mut g = fibra::Generator::new(|y| y.yield_(()));
    /// g.next();
    /// assert!(!g.is_finished());
    /// g.next();
    /// assert!(g.is_finished());
    /// ```
    pub fn is_finished(&self) -> bool {
        self.state == State::Finished
    }

    /// Runs the body until its next `yield_` (the address of the value it
    /// yields, in the suspended `yield_`'s frame) or its end (`None`). The
    /// caller must move the value out (`ptr::read`) before it resumes the
    /// generator again: `yield_` has given it up.
    ///
    /// Inlined into `next`, with the end of the body out of line: a
    /// resume + yield is a few nanoseconds, and a call with its frame
    /// would be a good part of them.
    #[inline]
    fn resume(&mut self) -> Option<*const T> {
        if self.state != State::Suspended {
            return None; // finished
        }
        let control = &*self.control;
        let (save_sp, load_sp) = (control.caller_sp.as_ptr(), control.generator_sp.get());
        // `header` is the generator's stack's, which it keeps until it ends.
        // Nothing but the switch comes between this and the switch (see
        // `enter_stack`).
        let caller_header = enter_stack(control.header);
        // The generator is suspended (checked above), so `generator_sp`
        // holds a context saved by `suspend` (or built by
        // `init_generator_stack`) on a
        // stack we own; `caller_sp` lives in the box, which outlives the
        // switch. Its frames hold no runtime (`yield_` refuses to suspend a
        // pinned stack), so resuming them here, in whatever runtime context
        // this thread is in now, is sound. Nothing unwinds across: the
        // entry catches everything.
        // SAFETY: as just argued.
        let yielded = unsafe { arch::resume(save_sp, load_sp, 0) };
        leave_stack(caller_header);
        if yielded != 0 {
            return Some(yielded as *const T);
        }
        self.finish();
        None
    }

    /// The body has just ended: frees its stack and re-raises its panic.
    #[cold]
    #[inline(never)]
    fn finish(&mut self) {
        self.state = State::Finished;
        // The body is done and its stack will never be resumed again.
        if let Some(stack) = self.stack.take() {
            stack::give_back(stack);
        }
        if let Some(payload) = self.control.panic.take()
            && !payload.is::<GeneratorCancel>()
        {
            panic::resume_unwind(payload);
        }
    }
}

impl<T> Iterator for Generator<'_, T> {
    type Item = T;

    /// Resumes the body until it yields a value (`Some`) or ends (`None`).
    /// A panic in the body is re-raised here.
    #[inline]
    fn next(&mut self) -> Option<T> {
        let value = self.resume()?;
        // SAFETY: the address of the value the body's `yield_` gave up, in
        // its frame, which stays as it is until the body is resumed (see
        // `resume`); read once.
        Some(unsafe { value.read() })
    }
}

impl<T> Drop for Generator<'_, T> {
    fn drop(&mut self) {
        if self.state != State::Suspended {
            return; // finished
        }
        self.control.cancel.set(true);
        // Resume it to unwind (or, never started, to drop its closure).
        // A body that yields again while being cancelled is cancelled
        // again; one that panics for real has that panic dropped here
        // rather than raised from a destructor.
        while self.state == State::Suspended {
            let resumed = panic::catch_unwind(AssertUnwindSafe(|| {
                if let Some(value) = self.resume() {
                    // SAFETY: as in `next`. (A cancelled body does not
                    // yield, but one that did would hand its value here.)
                    drop(unsafe { value.read() });
                }
            }));
            if let Err(payload) = resumed {
                drop(payload);
            }
        }
    }
}

impl<T> fmt::Debug for Generator<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Generator")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}
