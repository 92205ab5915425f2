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
use crate::runtime::core::{Core, FiberId, Key};
use crate::runtime::park::CancelUnwind;
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
    scope: Option<(OnExit, *const crate::fiber::scope::ScopeData)>,
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
    // SAFETY: forwarded from the caller.
    let started = unsafe {
        start_fiber(
            core,
            stack,
            f,
            fiber_end,
            (id, name, Location::caller(), idle),
            on_exit,
        )
    };
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

/// Queues a fiber `id` on `core` that runs `f` on `stack` and hands its
/// outcome to `end`; returns its key.
///
/// # Safety
///
/// As for [`spawn_unchecked`]: what `f` and `T` borrow outlives the fiber.
pub(crate) unsafe fn start_fiber<F, T>(
    core: &Core,
    stack: Stack,
    f: F,
    end: FiberEnd<T>,
    (id, name, location, idle): (FiberId, Option<Arc<str>>, &'static Location<'static>, bool),
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

    // The fiber's `Meta` first, right below the header (`Meta`'s
    // invariant: `header_of` finds the header from it), where it stays
    // (never moved, never overwritten by the fiber's frames) until the
    // stack is given back.
    let meta_at = stack.below_header() as usize - size_of::<Meta>();
    debug_assert_eq!(meta_at % align_of::<Meta>(), 0);
    debug_assert_eq!(
        crate::runtime::watch::header_of(meta_at as *const Meta),
        stack.header().cast_const()
    );
    // SAFETY: `meta_at..meta_at + size_of::<Meta>()` lies in the usable
    // stack right below the header (16-byte aligned, as `below_header`
    // is), aligned for `Meta`; nothing else of the new fiber is there yet.
    unsafe { ptr::write(meta_at as *mut Meta, Meta::new(Some(location))) };
    let below = meta_at;
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
    core.add_fiber(stack, sp, id, name, meta_at as *const Meta, idle)
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
    let last = core.exit_current();
    arch::leaving_for_good(&last);
    last
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
    let name = || core.current_fiber().1;
    let mut result = if cancelled {
        // Cancelled before it ever ran: drop the closure unrun.
        // SAFETY: `f` is read (and dropped) here, once.
        let _ = panic::catch_unwind(AssertUnwindSafe(|| drop(unsafe { ptr::read(f) })));
        Err(JoinError::cancelled(id, name()))
    } else {
        // SAFETY: `f` is read (and called) here, once.
        panic::catch_unwind(AssertUnwindSafe(|| unsafe { ptr::read(f) }())).map_err(|payload| {
            if payload.is::<CancelUnwind>() {
                JoinError::cancelled(id, name())
            } else {
                JoinError::panic(id, name(), payload)
            }
        })
    };
    // Its fiber-locals, after its closure, on its own stack, with no borrow
    // of the scheduler live (their `Drop` may spawn, wake, log or park).
    // A value whose `Drop` panics (or parks while the fiber is cancelled)
    // ends that drop only: the loop goes on with the others.
    if let Some(meta) = core.current_meta()
        && crate::fiber::local::begin_teardown(meta)
    {
        while let Err(payload) =
            panic::catch_unwind(AssertUnwindSafe(|| crate::fiber::local::teardown(meta)))
        {
            if result.is_ok() && !payload.is::<CancelUnwind>() {
                result = Err(JoinError::panic(id, name(), payload));
            }
        }
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
