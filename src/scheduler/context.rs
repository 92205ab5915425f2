//! Which runtime, if any, this thread is running right now.
//!
//! `CONTEXT` points at the `Core` of the runtime entered on this thread
//! (inside `block_on`, `run`, `turn` or its drop); null otherwise. Every
//! fiber runs while its runtime is entered, so inside a fiber, and inside
//! `block_on`'s closure, it names the fiber's own runtime.
//!
//! Also here: [`close`], the end of a runtime (entered one last time to
//! finish its fibers), and the drop of the reactor's task wakers, which
//! leave through the entered runtime's [`Core::callback`].

use std::cell::Cell;
use std::ptr;

use crate::reactor::TaskWakes;
use crate::scheduler::core::record::State;
use crate::scheduler::core::{Core, ROOT};
use crate::scheduler::{fork, registry};
use crate::stack::overflow;
use crate::stack::pin::StackPin;

thread_local! {
    static CONTEXT: Cell<*const Core> = const { Cell::new(ptr::null()) };
}

/// The runtime entered on this thread.
///
/// The lifetime is the caller's to keep honest: the reference is valid for
/// as long as the caller's frame runs inside this entry of the runtime. Why
/// that holds:
///
/// - CONTEXT is non-null only between an [`Enter`] and its drop. The `Core`
///   is boxed in its `Runtime`, which cannot be dropped while entered:
///   `block_on`, `run` and `turn` borrow it, and its own drop enters it
///   (nested) only to finish its fibers.
/// - Fibers run only while their runtime is entered, and a runtime's drop
///   finishes (or, during thread-exit, leaks without resuming) every fiber,
///   so a fiber's frame never runs after its `Core` is gone.
/// - The one way a frame can leave its entry and run again later is a
///   generator: `yield_` suspends the body's frames and the generator may
///   be resumed elsewhere. Every crate frame that keeps the reference (or
///   the entry) across user code pins its stack (`stack::pin`), and `yield_`
///   refuses to suspend a pinned stack; other callers use the reference
///   only for the call at hand and do not keep it.
#[inline]
pub(crate) fn current<'a>() -> Option<&'a Core> {
    let core = CONTEXT.with(Cell::get);
    // SAFETY: see above; a non-null CONTEXT points to a live, entered Core.
    unsafe { core.as_ref() }
}

/// Registers (once per process) what the child of a `fork` does first:
/// count the fork and leave the runtime the forking thread was in, so
/// that it runs on as plain blocking code (see `scheduler::fork`).
fn watch_forks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: a handler that is async-signal-safe (an atomic add and a
        // thread-local store), as a fork's child handler must be.
        unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) };
    });
}

extern "C" fn in_forked_child() {
    fork::forked();
    CONTEXT.with(|c| c.set(ptr::null()));
}

/// Like [`current`], for operations that need a runtime.
#[track_caller]
pub(crate) fn expect<'a>(what: &str) -> &'a Core {
    match current() {
        Some(core) => core,
        None => panic!(
            "{what} must be called from a fiber or inside `block_on`/`fibra::run`, \
             but there is no fibra runtime on this thread"
        ),
    }
}

/// Whether the caller is a fiber or the root of an entered runtime: then a
/// blocking call parks instead of blocking the thread.
#[inline]
pub(crate) fn in_runtime() -> bool {
    !CONTEXT.with(Cell::get).is_null()
}

/// Whether the caller is a fiber of the runtime entered on this thread (not
/// its root): then it runs on a fiber's stack.
pub(crate) fn in_fiber() -> bool {
    current().is_some_and(|core| core.current_key() != ROOT)
}

/// Marks a runtime as entered on this thread until dropped.
pub(crate) struct Enter<'a> {
    core: &'a Core,
    previous: *const Core,
    /// The root entered while unwinding (a runtime used or dropped in a
    /// destructor during a panic): it counts as a context suspended
    /// mid-unwind while fibers run.
    unwinding: bool,
    /// The context stays set until this guard drops: the frame that holds
    /// it must not be suspended by a generator (see `stack::pin`).
    _pin: StackPin,
}

impl<'a> Enter<'a> {
    /// Enters `core` to drive it from the root context; `what` names the
    /// caller for the panic when another runtime (or this one) is running.
    #[track_caller]
    pub(crate) fn new(core: &'a Core, what: &str) -> Enter<'a> {
        if in_runtime() {
            panic!(
                "`{what}` cannot be called from a fiber or from inside `block_on`: \
                 the runtime running there would stop while it waits. Spawn a \
                 fiber instead, or call it from a plain thread."
            );
        }
        crate::scheduler::owner::driven();
        Enter::nested(core)
    }

    /// Enters `core` even from inside another runtime: used to drop a
    /// runtime, which must finish its fibers wherever it is dropped.
    pub(crate) fn nested(core: &'a Core) -> Enter<'a> {
        if core.fork_gen != fork::generation() {
            fork::forked_runtime();
        }
        watch_forks();
        overflow::prepare_thread();
        let previous = CONTEXT.with(|c| c.replace(core));
        // SAFETY: on the runtime's thread (a Runtime is !Send); short borrow.
        let l = unsafe { core.local() };
        l.entered = true;
        // The root runs on whatever stack called us: a generator's, maybe.
        l.fibers[ROOT].running_header = overflow::running();
        // The root runs (the watchdog's word; see `scheduler::watch`).
        core.publish_root_running();
        let unwinding = std::thread::panicking();
        if unwinding {
            core.count_unwinding_suspended(1);
        }
        Enter {
            core,
            previous,
            unwinding,
            _pin: StackPin::new(),
        }
    }
}

impl Drop for Enter<'_> {
    fn drop(&mut self) {
        // SAFETY: on the runtime's thread; short borrow. If the root unwound
        // out of the scheduler, it is running again whatever it was doing.
        let l = unsafe { self.core.local() };
        l.entered = false;
        if self.unwinding {
            l.unwinding_suspended -= 1;
        }
        l.fibers[ROOT].state = State::Running;
        l.current = ROOT;
        self.core.shared.watch.publish_idle();
        // The root leaves: a stall the watchdog warned about has ended.
        self.core.stall_ended();
        // In the child of a fork made inside (a `block_on` closure that
        // forked and returns), the thread stays out of every runtime of
        // the parent's.
        let previous = if self.core.fork_gen == fork::generation() {
            self.previous
        } else {
            ptr::null()
        };
        CONTEXT.with(|c| c.set(previous));
    }
}

/// Cancels the fibers left in `core`, runs them to their end, and takes the
/// runtime out of the registry; during thread-local destruction, leaks
/// them instead (see `thread_exit`).
pub(crate) fn close(core: &Core) {
    if crate::scheduler::thread_exit::destroying() {
        core.abandon();
    } else {
        let enter = Enter::nested(core);
        core.shutdown();
        drop(enter);
    }
    registry::unregister(core.id);
    core.shared.close();
}

/// The reactor's task wakers leave through [`Core::callback`].
impl Drop for TaskWakes {
    #[inline]
    fn drop(&mut self) {
        if self.wake.is_empty() && self.drop.is_empty() {
            return; // the common case: no task polls this runtime's sockets
        }
        self.run();
    }
}

impl TaskWakes {
    /// [`TaskWakes`]' drop when it has wakers: out of line, off the path
    /// of every turn of a runtime without tasks.
    #[inline(never)]
    fn run(&mut self) {
        let (wake, dropped) = (
            std::mem::take(&mut self.wake),
            std::mem::take(&mut self.drop),
        );
        let run = move || {
            drop(dropped);
            for waker in wake {
                waker.wake();
            }
        };
        // Through the scheduler's door for user code: a waker that parks
        // or panics in there is reported rather than left to corrupt a
        // poll half done.
        match current() {
            Some(core) => core.callback("Waker::wake", run),
            None => run(),
        }
    }
}
