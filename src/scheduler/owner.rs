//! The current-thread runtimes a thread owns, and the warning for a
//! thread that blocks its own runtime.
//!
//! A current-thread runtime runs its fibers only while its thread drives
//! it (`block_on`, `run`, `turn`). A plain blocking call on that thread
//! outside them — a channel `recv`, a `join`, a lock — whose other side is
//! one of those fibers can never end: nothing runs the fiber. Go reports
//! "all goroutines are asleep"; fibra, which cannot know that nobody else
//! will end the wait, tells it once the call has blocked for the owning
//! runtime's `stall_warning` (a `fibra::stall` WARN naming the call and the
//! runtime's live fibers), and goes on waiting.
//!
//! Only thread parks look here (`park::park_current` on a plain thread),
//! a path that costs microseconds anyway.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use crate::report::{self, Level};
use crate::scheduler::core::Core;
use crate::scheduler::wait_on::WaitOn;

thread_local! {
    /// The current-thread runtimes made on this thread and not yet dropped.
    static OWNED: RefCell<Vec<*const Core>> = const { RefCell::new(Vec::new()) };
    /// This thread was warned about its blocked runtime since it last
    /// drove one (one warning per blocking episode, not one per wake-up).
    static WARNED: Cell<bool> = const { Cell::new(false) };
}

/// `core`, a current-thread runtime at its final address, is this thread's
/// until [`disown`].
pub(crate) fn own(core: &Core) {
    let _ = OWNED.try_with(|o| o.borrow_mut().push(core as *const Core));
}

/// `core` is being dropped.
pub(crate) fn disown(core: &Core) {
    let _ = OWNED.try_with(|o| o.borrow_mut().retain(|&c| !std::ptr::eq(c, core)));
}

/// The thread drives a runtime: a later blocking call may be told again.
pub(crate) fn driven() {
    let _ = WARNED.try_with(|w| w.set(false));
}

/// If this thread, which runs no runtime now, owns one with live fibers
/// that has a stall warning: that warning's threshold and the runtime's
/// live fibers.
pub(crate) fn blocked_runtime() -> Option<(Duration, usize)> {
    if WARNED.try_with(Cell::get).unwrap_or(true) {
        return None;
    }
    OWNED
        .try_with(|o| {
            o.borrow().iter().find_map(|&core| {
                // SAFETY: a runtime registered by `own` is alive until
                // `disown`, which its drop calls on this thread.
                let core = unsafe { &*core };
                // SAFETY: on the runtime's thread; none is entered here now
                // (the caller's park is a thread's), so no borrow of its
                // state is live: a short one, running no user code.
                let live = unsafe { core.local() }.live;
                let threshold = core
                    .shared
                    .watch
                    .threshold_ns
                    .load(std::sync::atomic::Ordering::Relaxed);
                (live > 0 && threshold != u64::MAX).then(|| (Duration::from_nanos(threshold), live))
            })
        })
        .ok()
        .flatten()
}

/// Warns (target `fibra::stall`, once until the thread drives a runtime
/// again) that this thread has blocked in `on` for `waited` while its own
/// runtime, with `fibers` live fibers, cannot run them.
#[cold]
pub(crate) fn warn_blocked(on: WaitOn, fibers: usize, waited: Duration) {
    let _ = WARNED.try_with(|w| w.set(true));
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("<unnamed>");
    // (No runtime is entered on this thread: a subscriber's code may do
    // anything here.)
    let message = format!(
        "thread {name:?} has blocked for {waited:.0?} in a plain call ({on}) outside its \
         runtime, which has {fibers} live fibers: they cannot run until the thread drives \
         the runtime (block_on, run, turn). If one of them is to end this wait, it never \
         will: make the call inside block_on, or drive the runtime first"
    );
    report::tell(Level::Warn, "fibra::stall", &message, None, || {
        tracing::warn!(
            target: "fibra::stall",
            thread = name,
            waiting_on = %on,
            fibers,
            "{message}"
        );
    });
}
