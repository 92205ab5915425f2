//! Starting a fiber: its closure goes on its own stack, and its entry
//! function catches everything that unwinds.
//!
//! The closure and the fiber's end of the result packet are written at the
//! top of the new stack (no heap allocation for them), the first switch
//! frame just below. A closure too large to leave room for the fiber's own
//! frames (over a quarter of the stack) is boxed instead.

use std::io;
use std::panic::{self, AssertUnwindSafe, Location};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::arch;
use crate::fiber::join::{FiberEnd, FiberRef, JoinError, JoinHandle, packet};
use crate::runtime::context;
use crate::runtime::core::Core;
use crate::runtime::fiber_id::FiberId;
use crate::runtime::park::CancelUnwind;
use crate::runtime::token::Key;
use crate::runtime::watch::Meta;
use crate::stack::{Stack, StackHeader};

struct Start<F, T> {
    f: F,
    packet: FiberEnd<T>,
    /// Called after everything else, for scoped fibers.
    on_exit: Option<OnExit>,
}

/// A callback for the very end of a fiber's run, after its closure, result
/// and packet are gone (a scope learns that nothing of the fiber's borrows
/// remains).
pub(crate) struct OnExit {
    pub(crate) call: unsafe fn(*const ()),
    pub(crate) data: *const (),
}

/// Creates a fiber running `f` on `core`, queued to run.
///
/// # Safety
///
/// Whatever `f` and `T` borrow must outlive the fiber: either both are
/// `'static`, or the caller (a scope) waits for `on_exit` before ending the
/// borrows.
#[inline]
#[track_caller]
pub(crate) unsafe fn spawn_unchecked<F, T>(
    core: &Core,
    f: F,
    name: Option<Arc<str>>,
    stack_size: usize,
    scope: Option<(OnExit, *const crate::fiber::scope_data::ScopeData)>,
    idle: bool,
) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T,
{
    let stack = core.take_stack(stack_size)?;
    let id = FiberId::next();
    let (on_exit, scope_data) = match scope {
        Some((on_exit, data)) => (Some(on_exit), NonNull::new(data.cast_mut())),
        None => (None, None),
    };
    // The packet, which goes onto the fiber's stack, says where the fiber
    // lives, before it does: its key is the one the runtime hands out next
    // (checked below).
    let key = core.next_key();
    let at = FiberRef::At {
        runtime: core.id,
        key,
    };
    let (fiber_end, mut handle_end) = packet(Some(core), scope_data, id, name.clone(), at);
    write_meta(&stack, Location::caller());
    // SAFETY: forwarded from the caller.
    let started = unsafe { start_fiber(core, stack, f, fiber_end, id, name, on_exit) };
    if idle {
        core.make_idle(started);
    }
    if started != key {
        // Another fiber took the key in between: a tracing subscriber
        // spawned one when the new fiber's span was created.
        handle_end.relocate(FiberRef::At {
            runtime: core.id,
            key: started,
        });
    }
    Ok(JoinHandle::new(handle_end))
}

/// Writes the `Meta` of a fiber about to start on `stack` (before
/// [`start_fiber`], which leaves it in place): where it was spawned, no
/// fiber-locals yet.
#[inline(always)]
pub(crate) fn write_meta(stack: &Stack, location: &'static Location<'static>) {
    let at = crate::runtime::watch::meta_below(stack.header());
    debug_assert_eq!(at as usize % align_of::<Meta>(), 0);
    // SAFETY: `at..at + size_of::<Meta>()` lies in the usable stack right
    // below the header (16-byte aligned, as the header is), which nothing
    // of a fiber uses yet: the stack was just taken for a new one.
    unsafe { at.write(Meta::new(Some(location))) };
}

/// Queues a fiber `id` on `core` that runs `f` on `stack` and hands its
/// outcome to `end`; returns its key. Its `Meta` is written already
/// ([`write_meta`]).
///
/// # Safety
///
/// As for [`spawn_unchecked`]: what `f` and `T` borrow outlives the fiber.
pub(crate) unsafe fn start_fiber<F, T>(
    core: &Core,
    stack: Stack,
    f: F,
    end: FiberEnd<T>,
    id: FiberId,
    name: Option<Arc<str>>,
    on_exit: Option<OnExit>,
) -> Key
where
    F: FnOnce() -> T,
{
    let start = Start {
        f,
        packet: end,
        on_exit,
    };

    // The fiber's `Meta` stays right below the header (never moved, never
    // overwritten by the fiber's frames) until the stack is given back.
    let below = crate::runtime::watch::meta_below(stack.header()) as usize;
    let size = size_of::<Start<F, T>>();
    let align = align_of::<Start<F, T>>().max(16);
    let (frame_top, data, entry): (usize, *mut u8, arch::EntryFn) = if size <= stack.usable() / 4 {
        let at = (below - size) & !(align - 1);
        // SAFETY: `at..at + size` lies in the usable stack below the header
        // (size is at most a quarter of it), aligned for Start.
        unsafe { ptr::write(at as *mut Start<F, T>, start) };
        (at, at as *mut u8, fiber_main::<F, T, false>)
    } else {
        let boxed = Box::into_raw(Box::new(start));
        (below, boxed.cast(), fiber_main::<F, T, true>)
    };

    let (guard_lo, guard_hi) = stack.guard();
    let (name_ptr, name_len) = name
        .as_deref()
        .map_or((ptr::null(), 0), |n| (n.as_ptr(), n.len()));
    // SAFETY: the header slot at the top of our own stack is ours to write;
    // the name is kept alive by the record (which owns an `Arc` of it).
    unsafe {
        stack.header().write(StackHeader {
            guard_lo,
            guard_hi,
            usable: stack.usable(),
            fiber_id: id.as_u64(),
            name_ptr,
            name_len,
            pins: std::cell::Cell::new(0),
        })
    };
    // SAFETY: `frame_top` is 16-byte aligned (header slots and Start are
    // aligned to 16) with the rest of the usable stack below it; `data` stays
    // valid until the entry reads it.
    let sp = unsafe { arch::init_stack(frame_top as *mut u8, entry, data) };
    core.add_fiber(stack, sp, id, name)
}

/// Spawns a `'static` fiber: the safe face of [`spawn_unchecked`].
#[inline]
#[track_caller]
pub(crate) fn spawn_on<F, T>(
    core: &Core,
    f: F,
    name: Option<Arc<str>>,
    stack_size: usize,
    idle: bool,
) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + 'static,
    T: 'static,
{
    // SAFETY: everything is 'static.
    unsafe { spawn_unchecked(core, f, name, stack_size, None, idle) }
}

/// The first function of every fiber, called by the trampoline, which makes
/// the final switch this returns.
///
/// # Safety
///
/// Called only through `init_stack`'s frame, with `data` pointing at the
/// `Start<F, T>` written (or boxed, if `BOXED`) by `spawn_unchecked`.
unsafe extern "C" fn fiber_main<F, T, const BOXED: bool>(
    arg: usize,
    data: *mut u8,
) -> arch::FinalSwitch
where
    F: FnOnce() -> T,
{
    arch::entered();
    let Some(core) = context::current() else {
        // Unreachable: fibers run only inside their runtime. Not a panic:
        // nothing may unwind out of this function.
        std::process::abort();
    };
    core.after_switch(arg);
    // SAFETY: `data` holds the Start written for us; `run` reads each field
    // exactly once. A boxed Start's allocation is freed afterwards without
    // dropping its (moved-out) fields.
    unsafe {
        run(core, data.cast::<Start<F, T>>());
        if BOXED {
            drop(Box::from_raw(
                data.cast::<std::mem::ManuallyDrop<Start<F, T>>>(),
            ));
        }
    }
    if core.has_fiber_locals() {
        // Made anew by a `Drop` that the completion ran (a detached fiber's
        // result): a panic there has no one to go to.
        drop(drop_fiber_locals(core));
    }
    let last = core.exit_current();
    arch::leaving_for_good(&last);
    last
}

/// The error of the running fiber `id` whose closure unwound with
/// `payload` (or was cancelled before it ran): out of line, so that the
/// fiber's end keeps no more registers than a fiber that returns needs.
#[cold]
#[inline(never)]
fn fiber_error(core: &Core, id: FiberId, payload: Box<dyn std::any::Any + Send>) -> JoinError {
    let name = core.current_fiber().1;
    if payload.is::<CancelUnwind>() {
        JoinError::cancelled(id, name)
    } else {
        JoinError::panic(id, name, payload)
    }
}

/// Drops the running fiber's fiber-locals, if it has any, on its own stack
/// with no borrow of the scheduler live (their `Drop` may spawn, wake, log
/// or park); returns the first panic of a `Drop`. A value whose `Drop`
/// panics (or parks while the fiber is cancelled) ends that drop only: the
/// others are dropped too.
#[cold]
#[inline(never)]
fn drop_fiber_locals(core: &Core) -> Option<Box<dyn std::any::Any + Send>> {
    let meta = core.current_meta()?;
    if !crate::fiber::local::begin_teardown(meta) {
        return None;
    }
    let mut first = None;
    while let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| {
        crate::fiber::local::teardown(core, meta)
    })) {
        if first.is_none() && !payload.is::<CancelUnwind>() {
            first = Some(payload);
        }
    }
    first
}

/// Runs the fiber's closure and hands its outcome to the packet. Every local
/// is dropped when this returns, before the fiber's final switch.
///
/// The closure is moved out of `start` only inside `catch_unwind`, right
/// before it is called: a closure that captures a large array is then
/// copied once onto the fiber's stack, not once per wrapper (debug builds
/// copy on every move).
///
/// # Safety
///
/// `start` points to an initialised `Start` whose fields are read here once
/// and must not be used (nor dropped) afterwards.
#[inline(never)]
unsafe fn run<F, T>(core: &Core, start: *mut Start<F, T>)
where
    F: FnOnce() -> T,
{
    // SAFETY: per the contract, each field is read exactly once.
    let (packet, on_exit, f) = unsafe {
        (
            ptr::read(&raw const (*start).packet),
            ptr::read(&raw const (*start).on_exit),
            &raw mut (*start).f,
        )
    };
    let (id, cancelled) = core.begin_current();
    let mut result = if cancelled {
        // Cancelled before it ever ran: drop the closure unrun.
        // SAFETY: `f` is read (and dropped) here, once.
        let _ = panic::catch_unwind(AssertUnwindSafe(|| drop(unsafe { ptr::read(f) })));
        Err(fiber_error(core, id, Box::new(CancelUnwind)))
    } else {
        // SAFETY: `f` is read (and called) here, once.
        panic::catch_unwind(AssertUnwindSafe(|| unsafe { ptr::read(f) }()))
            .map_err(|payload| fiber_error(core, id, payload))
    };
    // Its fiber-locals, after its closure (one compare when no fiber of
    // this runtime has any).
    if core.has_fiber_locals()
        && let Some(payload) = drop_fiber_locals(core)
        && result.is_ok()
    {
        result = Err(fiber_error(core, id, payload));
    }
    packet.complete_in(Some(core), result);
    if let Some(on_exit) = on_exit {
        // the scope that set the callback waits for it: its frame
        // is blocked in `wait_for_all` (which neither returns nor unwinds
        // before the count reaches zero) and cannot have been abandoned,
        // since it pins its stack against a generator's yield.
        // SAFETY: as argued just above.
        unsafe { (on_exit.call)(on_exit.data) };
    }
}
