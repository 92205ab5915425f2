//! Starting a fiber: its closure goes on its own stack, and its entry
//! function catches everything that unwinds.
//!
//! The closure and the fiber's end of the result packet are written at the
//! top of the new stack (no heap allocation for them), the first switch
//! frame just below. Two kinds of fiber keep their start off the stack
//! instead, their first frame built by the switch that first runs them
//! (see `scheduler::core::first_frame`): one whose closure is too large to
//! leave room for its own frames (over a quarter of the stack), and one
//! spawned behind [`DEFER_AFTER`] queued fibers, whose stack would have
//! left the caches by the time it runs. A spawn puts such a start in the
//! allocation of the fiber's join packet, right after it; a job (see
//! `fiber::queued`), whose packet was made before it knew, in a box.

use std::alloc::Layout;
use std::io;
use std::panic::{self, AssertUnwindSafe, Location};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::arch;
use crate::fiber::join::{FiberEnd, FiberRef, JoinError, JoinHandle, packet};
use crate::reactor::token::Key;
use crate::scheduler::context;
use crate::scheduler::core::Core;
use crate::scheduler::core::first_frame::{FirstFrame, deferred_sp};
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::park::CancelUnwind;
use crate::scheduler::watch::Meta;
use crate::stack::{Stack, StackHeader};

/// Fibers queued ahead of a new one from which on its start is deferred
/// to its first run. Each fiber that runs first touches a few KiB of its
/// own: past this many, the new fiber's freshly written stack lines have
/// left the L2 cache before it runs, and a heap box is the cheaper place
/// for its start.
const DEFER_AFTER: usize = 256;

struct Start<F, T> {
    f: F,
    packet: FiberEnd<T>,
    /// Called after everything else, for scoped fibers.
    on_exit: Option<OnExit>,
}

/// Starts from this size on stay in their box while the fiber runs (see
/// [`run_unboxed`]): moving them to the stack would copy the closure twice.
const KEEP_BOXED_FROM: usize = 256;

/// A start kept off the stack until the fiber's first run.
#[repr(C)]
struct Deferred<F, T> {
    /// First, so that a pointer to the start is one to this.
    first: FirstFrame,
    start: Start<F, T>,
}

/// Where [`fiber_main`] finds its start: at the top of its stack, ...
const ON_STACK: u8 = 0;
/// ... after its packet, in the same allocation, ...
const WITH_PACKET: u8 = 1;
/// ... or in a box of its own.
const IN_BOX: u8 = 2;

/// Whether a fiber that runs `F` and returns `T` on `stack`, spawned now,
/// has its start deferred to its first run.
#[inline(always)]
fn defers<F, T>(core: &Core, stack: &Stack) -> bool {
    size_of::<Start<F, T>>() > stack.usable() / 4 || core.queued() >= DEFER_AFTER
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
    // A deferred start gets room after the packet (`start_fiber` decides
    // the same way: nothing in between changes the queue).
    let room = if defers::<F, T>(core, &stack) {
        Layout::new::<Deferred<F, T>>()
    } else {
        Layout::new::<()>()
    };
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
    let (fiber_end, mut handle_end) = packet(Some(core), scope_data, id, name.clone(), at, room);
    // SAFETY: forwarded from the caller.
    let started = unsafe {
        start_fiber(
            core,
            stack,
            f,
            fiber_end,
            id,
            name,
            on_exit,
            Location::caller(),
        )
    };
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

/// Queues a fiber `id`, spawned at `location`, that runs `f` on `stack`
/// and hands its outcome to `end`; returns its key.
///
/// # Safety
///
/// As for [`spawn_unchecked`]: what `f` and `T` borrow outlives the fiber.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn start_fiber<F, T>(
    core: &Core,
    stack: Stack,
    f: F,
    end: FiberEnd<T>,
    id: FiberId,
    name: Option<Arc<str>>,
    on_exit: Option<OnExit>,
    location: &'static Location<'static>,
) -> Key
where
    F: FnOnce() -> T,
{
    let start = Start {
        f,
        packet: end,
        on_exit,
    };
    if defers::<F, T>(core, &stack) {
        return defer_start(core, stack, start, id, name, location);
    }

    // The fiber's `Meta` stays right below the header (never moved, never
    // overwritten by the fiber's frames) until the stack is given back.
    let header = stack.header();
    let below = crate::scheduler::watch::meta_below(header);
    debug_assert_eq!(below as usize % align_of::<Meta>(), 0);
    let size = size_of::<Start<F, T>>();
    let align = align_of::<Start<F, T>>().max(16);
    let at = (below as usize - size) & !(align - 1);
    // The header slot at the top of our own stack, the `Meta` right below
    // it and `at..at + size` below that are the usable stack of a fiber
    // that does not run yet (size is at most a quarter of it), aligned for
    // each; the name is kept alive by the record (which owns an `Arc` of it).
    // SAFETY: as argued just above.
    unsafe {
        below.write(Meta::new(Some(location)));
        ptr::write(at as *mut Start<F, T>, start);
        header.write(StackHeader::new(&stack, id.as_u64(), name.as_deref()));
    }
    let entry = fiber_main::<F, T, ON_STACK>;
    // SAFETY: `at` is 16-byte aligned (Start's alignment is raised to 16)
    // with the rest of the usable stack below it; the Start there stays
    // valid until the entry reads it.
    let sp = unsafe { arch::init_stack(at as *mut u8, entry, at as *mut u8) };
    core.add_fiber(stack, sp, id, name)
}

/// [`start_fiber`]'s other way: the start goes into the room its packet
/// has for it (a spawn's), or else into a box (a job's), and the stack is
/// first written by the switch that first runs the fiber. Out of line, so
/// that the usual spawn stays as small as it was.
#[cold]
#[inline(never)]
fn defer_start<F, T>(
    core: &Core,
    stack: Stack,
    start: Start<F, T>,
    id: FiberId,
    name: Option<Arc<str>>,
    location: &'static Location<'static>,
) -> Key
where
    F: FnOnce() -> T,
{
    let head = if let Some(room) = start.packet.room::<Deferred<F, T>>() {
        // The room is the packet's, which the start's own fiber end keeps
        // alive until the fiber has run it; nothing else uses it, and it
        // is aligned and large enough for a `Deferred<F, T>`.
        // SAFETY: as argued just above.
        unsafe {
            room.write(Deferred {
                first: FirstFrame {
                    entry: fiber_main::<F, T, WITH_PACKET>,
                    location,
                },
                start,
            });
        }
        room.cast::<FirstFrame>()
    } else {
        let boxed = Box::into_raw(Box::new(Deferred {
            first: FirstFrame {
                entry: fiber_main::<F, T, IN_BOX>,
                location,
            },
            start,
        }));
        // SAFETY: `Box::into_raw` never returns null.
        unsafe { NonNull::new_unchecked(boxed) }.cast::<FirstFrame>()
    };
    core.add_fiber(stack, deferred_sp(head), id, name)
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
/// `Start<F, T>` written by `start_fiber` (`FROM` is [`ON_STACK`]) or at
/// the `Deferred<F, T>` `defer_start` wrote after the packet
/// ([`WITH_PACKET`]) or boxed ([`IN_BOX`]).
unsafe extern "C" fn fiber_main<F, T, const FROM: u8>(
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
    // `data` holds the start made for us, where `FROM` says. One after the
    // packet is run in place: it stays valid until the fiber's end (which
    // `run` reads out first) completes the packet, after the closure is
    // read out and called.
    // SAFETY: as argued just above.
    unsafe {
        if FROM == ON_STACK {
            run(core, data.cast::<Start<F, T>>());
        } else if FROM == WITH_PACKET {
            run(core, &raw mut (*data.cast::<Deferred<F, T>>()).start);
        } else if size_of::<Start<F, T>>() < KEEP_BOXED_FROM {
            run_unboxed(core, data.cast::<Deferred<F, T>>());
        } else {
            run_in_box(core, data.cast::<Deferred<F, T>>());
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

/// Runs a small boxed start: moves it onto this stack and frees the box at
/// once, while the box is in cache (freed at the fiber's end, a thousand
/// fibers later, each box cost a cache miss in `free`). Out of line, so
/// that only a fiber that takes this way has the start in its frame
/// (`fiber_main` of a large start would otherwise reserve room for one in
/// debug builds, and overflow).
///
/// # Safety
///
/// `boxed` is the box `defer_start` made for this fiber, not used since.
#[inline(never)]
unsafe fn run_unboxed<F, T>(core: &Core, boxed: *mut Deferred<F, T>)
where
    F: FnOnce() -> T,
{
    // SAFETY: the box holds an initialised start, read once here; the box
    // is then freed without dropping its (moved-out) fields, and `run`
    // reads each field of the copy exactly once.
    unsafe {
        let mut start = std::mem::ManuallyDrop::new(ptr::read(&raw const (*boxed).start));
        drop(Box::from_raw(
            boxed.cast::<std::mem::ManuallyDrop<Deferred<F, T>>>(),
        ));
        run(core, &raw mut *start);
    }
}

/// Runs a large boxed start where it is, so that its closure is copied
/// only once (by the call), and frees the box after.
///
/// # Safety
///
/// As for [`run_unboxed`].
unsafe fn run_in_box<F, T>(core: &Core, boxed: *mut Deferred<F, T>)
where
    F: FnOnce() -> T,
{
    // SAFETY: `run` reads each field of the boxed start exactly once; the
    // box is then freed without dropping the (moved-out) fields.
    unsafe {
        run(core, &raw mut (*boxed).start);
        drop(Box::from_raw(
            boxed.cast::<std::mem::ManuallyDrop<Deferred<F, T>>>(),
        ));
    }
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
        Err(fiber_error(core, id, CancelUnwind::report()))
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
